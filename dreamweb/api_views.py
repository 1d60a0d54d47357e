"""Small API endpoints of the project itself: who am I (ping) and a JSON 404 for unknown API paths."""

from __future__ import annotations

from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from . import errors
from .api_base import AgentAPIView, error_responses
from .api_permissions import IsAgent


class PingView(AgentAPIView):
    """The cheapest authenticated call: checks the key and says which team and scopes it has."""

    permission_classes = [IsAgent]

    @extend_schema(
        tags=["meta"],
        summary="Check the key",
        responses={
            200: inline_serializer(
                "Ping",
                {
                    "ok": serializers.BooleanField(),
                    "team": serializers.CharField(),
                    "key": serializers.CharField(),
                    "scopes": serializers.ListField(child=serializers.CharField()),
                    "writable_stores": serializers.ListField(child=serializers.CharField()),
                },
            ),
            **error_responses(),
        },
    )
    def get(self, request):
        key = self.key
        return Response(
            {
                "ok": True,
                "team": key.team.slug,
                "key": key.name,
                "scopes": list(key.scopes),
                "writable_stores": list(key.writable_stores),
            }
        )


@csrf_exempt  # agents send no CSRF token; an unknown API path must be a JSON 404 for every method
def not_found(request, path=""):
    return errors.not_found(request)
