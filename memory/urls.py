from django.urls import path

from .views import entries, sessions, stores

app_name = "memory"
urlpatterns = [
    path("", stores.store_list, name="stores"),
    path("stores/<int:store_pk>/", entries.entry_list, name="entries"),
    path("entries/<int:pk>/", entries.entry_detail, name="entry"),
    path("entries/<int:pk>/revert/", entries.revert, name="revert"),
    path("sessions/", sessions.session_list, name="sessions"),
    path("sessions/<int:pk>/", sessions.session_detail, name="session"),
]
