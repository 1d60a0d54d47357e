"""Feedback on an entry: helpful or not, or 1 to 5; normalised to [-1, 1]; the entry's mean feeds ranking."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from dreamweb.api_base import AgentAPIView, error_responses
from dreamweb.api_permissions import HasScope
from memory.feedback import record_feedback

from .common import get_entry, get_store
from .entries import KEY, SLUG
from .serializers import FeedbackResultSerializer, FeedbackSerializer


def _request_schema() -> dict:
    """FeedbackSerializer's fields, with its rule that exactly one of `helpful` and `score` is sent."""
    fields = FeedbackSerializer().fields
    return {
        "type": "object",
        "properties": {
            "helpful": {"type": "boolean", "description": fields["helpful"].help_text},
            "score": {"type": "integer", "minimum": 1, "maximum": 5, "description": fields["score"].help_text},
            "source": {"type": "string", "maxLength": 100, "description": fields["source"].help_text},
            "comment": {"type": "string", "maxLength": 5000},
            "session_id": {"type": "string", "maxLength": 200},
        },
        "oneOf": [{"required": ["helpful"]}, {"required": ["score"]}],
    }


class FeedbackView(AgentAPIView):
    # Rating what it was served is part of reading memory: no write scope needed, read-only stores included.
    permission_classes = [HasScope("memory:read")]
    body_required = True

    @extend_schema(
        tags=["memory"],
        summary="Rate an entry",
        parameters=[SLUG, KEY],
        request={"application/json": _request_schema()},
        responses={201: FeedbackResultSerializer, **error_responses(400, 404)},
    )
    def post(self, request, slug, key):
        entry = get_entry(get_store(self.key, slug), key)
        data = FeedbackSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        feedback, entry = record_feedback(
            entry,
            helpful=d.get("helpful"),
            score=d.get("score"),
            source=d.get("source") or "agent",
            comment=d.get("comment", ""),
            session_external_id=request.headers.get("X-Session-Id") or d.get("session_id", ""),
            agent_key=self.key,
        )
        body = {"key": entry.key, "score": feedback.score, "rating": entry.rating, "rating_count": entry.rating_count}
        return Response(FeedbackResultSerializer(body).data, status=status.HTTP_201_CREATED)
