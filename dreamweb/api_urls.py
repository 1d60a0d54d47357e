"""The agents' API under /api/v1/: each app contributes its own routes."""

from django.urls import include, path, re_path

from . import api_views
from .errors import CATCH_ALL

urlpatterns = [
    path("ping/", api_views.PingView.as_view(), name="api-ping"),
    path("", include("memory.api_urls")),
    path("", include("skills_registry.api_urls")),
    path("", include("reviews.api_urls")),
    # Last: anything else under /api/v1/ is a JSON 404, never an HTML page (and never a redirect to a slash):
    # [\s\S], not `.`, so that a path with a newline matches too.
    re_path(r"^(?P<path>[\s\S]*)$", api_views.not_found, name=CATCH_ALL),
]
