"""The project's URLs plus two views whose queryset lost its team filter, as a mistake in a new view would: one page
(signed-in person) and one API endpoint (agent key). tests/test_scope_entry_points.py shows that the database still
answers them with the caller's team only."""

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.urls import include, path
from rest_framework.response import Response

from dreamweb.api_base import AgentAPIView
from dreamweb.api_permissions import IsAgent
from memory.models import AgentSession, MemoryEntry, MemoryStore


def _everything() -> dict:
    return {
        "stores": sorted(MemoryStore.objects.values_list("slug", flat=True)),  # no for_user / for_agent_key
        "entries": sorted(MemoryEntry.objects.values_list("key", flat=True)),
        "sessions": sorted(AgentSession.objects.values_list("external_id", flat=True)),
    }


@login_required
def careless_page(request):
    return JsonResponse(_everything())


class CarelessApi(AgentAPIView):
    permission_classes = [IsAgent]

    def get(self, request):
        return Response(_everything())


urlpatterns = [
    path("careless/page/", careless_page),
    path("careless/api/", CarelessApi.as_view()),
    path("", include("dreamweb.urls")),
]
