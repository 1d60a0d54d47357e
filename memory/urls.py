from django.urls import path

from .views import curation, entries, sessions, stores

app_name = "memory"
urlpatterns = [
    path("", stores.store_list, name="stores"),
    path("stores/<int:store_pk>/", entries.entry_list, name="entries"),
    path("entries/<int:pk>/", entries.entry_detail, name="entry"),
    path("stores/<int:store_pk>/new/", curation.entry_create, name="entry-create"),
    path("entries/<int:pk>/edit/", curation.entry_edit, name="entry-edit"),
    path("entries/<int:pk>/archive/", curation.archive, name="archive"),
    path("entries/<int:pk>/restore/", curation.restore, name="restore"),
    path("entries/<int:pk>/pin/", curation.pin, name="pin"),
    path("entries/<int:pk>/unpin/", curation.unpin, name="unpin"),
    path("entries/<int:pk>/revert/", entries.revert, name="revert"),
    path("sessions/", sessions.session_list, name="sessions"),
    path("sessions/<int:pk>/", sessions.session_detail, name="session"),
]
