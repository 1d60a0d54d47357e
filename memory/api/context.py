"""GET /api/v1/context/: the block an agent puts in its prompt (see memory.context for ranking and budget)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from dreamweb.api_auth import KEY_TEAM_COLUMN, KeyStatementExtra
from dreamweb.api_base import AgentAPIView, error_responses, query_parameters
from dreamweb.api_permissions import HasScope
from dreamweb.api_query import fast_parameters
from memory.context import NoSuchStore, build_context, check_in_statement

from .serializers import ContextQuerySerializer, ContextSerializer

# What a key needs for context: its permission, and the gate of the ranking's check in the key's statement.
CONTEXT_SCOPE = "memory:read"


class ContextView(AgentAPIView):
    permission_classes = [HasScope(CONTEXT_SCOPE)]
    _asked = None  # the query's parameters as key_statement_extra read them, and the extra columns it asked for

    def key_statement_extra(self, request):
        """The ranking's check, read by the key's own statement (one statement fewer on every request that names a
        store): asked for a common query string (one read without the serializer, dreamweb.api_query), whose
        parameters ``get`` then takes as read here, so that the check is always the one for what it serves."""
        if request.method != "GET":
            return None
        p = fast_parameters(request.query_params.dict(), ContextQuerySerializer)
        if p is None or not p.get("store"):
            return None
        pieces = check_in_statement(KEY_TEAM_COLUMN, p["store"], p.get("query", ""), p.get("skills", True))
        if pieces is None:
            return None
        self._asked = (p, KeyStatementExtra(*pieces, scope=CONTEXT_SCOPE))
        return self._asked[1]

    @extend_schema(
        tags=["context"],
        summary="Context for an agent's prompt",
        description=(
            "Entries ranked by scope match (task and agent, task, agent, store-wide; entries scoped to another "
            "agent or task are never served), relevance to `query`, rating and recency; cut to `max_items` and "
            "`max_tokens`; plus the skills index (with `skills:read`). `text` is rendered literally. Every call is "
            "recorded (which entry versions and skills went to which key, agent, task and session)."
        ),
        parameters=[ContextQuerySerializer],
        responses={200: ContextSerializer, **error_responses(400, 404)},
    )
    def get(self, request):
        p, extra = self._asked or (query_parameters(request, ContextQuerySerializer), None)
        slug = p.get("store") or None
        try:
            result = build_context(
                self.key,
                store_slug=slug,
                agent=p.get("agent") or None,
                task=p.get("task") or None,
                query=p.get("query", ""),
                max_items=p.get("max_items"),
                max_tokens=p.get("max_tokens"),
                session_external_id=request.headers.get("X-Session-Id") or p.get("session", ""),
                include_skills=p.get("skills", True),
                checked=extra.values if extra is not None and extra.read else None,
            )
        except NoSuchStore:
            # As get_store says it for every other store-scoped path.
            raise exceptions.NotFound(f"No store {slug!r} in this key's team.") from None
        body = {
            "items": [
                {
                    "key": i.key,
                    "store": i.store,
                    "content": i.content,
                    "scope": {"agent": i.scope_agent, "task": i.scope_task},
                    "version": i.version,
                    "content_hash": i.content_hash,
                    "score": round(i.score, 6),
                }
                for i in result.items
            ],
            "skills": result.skills,
            "text": result.text,
            "tokens": result.tokens,
            "max_items": result.max_items,
            "max_tokens": result.max_tokens,
            "serve_id": result.serve_id,
        }
        # Built by hand (not through the serializer) because this is the hot path; the schema documents the shape.
        return Response(body)
