"""The agents' API under /api/v1/: each app contributes its own routes."""

from django.urls import include, path

urlpatterns = [
    path("", include("memory.api_urls")),
    path("", include("skills_registry.api_urls")),
    path("", include("reviews.api_urls")),
]
