from django.urls import path

from . import views

app_name = "skills_registry"
urlpatterns = [
    path("", views.skill_list, name="list"),
    path("<slug:team>/<slug:name>/", views.skill_detail, name="detail"),
    path("<slug:team>/<slug:name>/versions/", views.skill_versions, name="versions"),
    path("<slug:team>/<slug:name>/diff/", views.skill_diff, name="diff"),
    path("<slug:team>/<slug:name>/revert/<int:number>/", views.skill_revert, name="revert"),
    path("<slug:team>/<slug:name>/status/", views.skill_status, name="status"),
    path("<slug:team>/<slug:name>/files/<path:path>", views.skill_reference, name="reference"),
]
