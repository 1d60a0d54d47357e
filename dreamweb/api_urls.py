"""The agents' API under /api/v1/: each app contributes its own routes."""

from django.urls import include, path, re_path

from . import api_views

urlpatterns = [
    path("ping/", api_views.PingView.as_view(), name="api-ping"),
    path("", include("memory.api_urls")),
    path("", include("skills_registry.api_urls")),
    path("", include("reviews.api_urls")),
    # Last: anything else under /api/v1/ is a JSON 404, never an HTML page.
    re_path(r"^(?P<path>.*)$", api_views.not_found),
]
