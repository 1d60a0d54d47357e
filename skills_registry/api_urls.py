from django.urls import path, re_path

from .api.views import SkillDetailView, SkillIndexView

urlpatterns = [
    path("skills/", SkillIndexView.as_view(), name="api-skills"),
    re_path(r"^skills/(?P<name>[^/]+)/$", SkillDetailView.as_view(), name="api-skill"),
]
