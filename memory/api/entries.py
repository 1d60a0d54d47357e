"""Stores and entries: list and read (with ETag), and in-band writes with If-Match, all through memory.services."""

from __future__ import annotations

from django.db.models import Count, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from dreamweb.api_base import (
    AgentAPIView,
    AgentListView,
    Conflict,
    PreconditionFailed,
    error_responses,
    query_parameters,
)
from dreamweb.api_permissions import HasScope
from memory import services
from memory.models import EntryStatus, MemoryEntry, MemoryStore

from .common import (
    ENTITY_TAGS,
    ensure_may_write,
    etag,
    get_entry,
    get_store,
    if_match_versions,
    none_match,
    provenance_for,
)
from .serializers import EntryCreateSerializer, EntrySerializer, EntryUpdateSerializer, StoreSerializer

SLUG = OpenApiParameter("slug", OpenApiTypes.STR, OpenApiParameter.PATH, description="Store slug.")
KEY = OpenApiParameter("key", OpenApiTypes.STR, OpenApiParameter.PATH, description="Entry key.")
IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=True,
    pattern=ENTITY_TAGS,
    description="The entry's ETag as read, or a list of them (428 without it or with `*`, 412 when stale).",
)
SESSION_HEADER = OpenApiParameter(
    "X-Session-Id", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False, description="Session external_id."
)
ETAG_HEADER = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200, 201, 304],
    description="The entry's version tag (id and version, quoted): send it back in If-Match.",
)


def _screened(exc) -> Conflict:
    """409 ``screened``: the text is refused whatever the key may write; nothing was written or will be served."""
    return Conflict(
        "Refused by screening; nothing was written: " + " ".join(exc.reasons),
        code="screened",
        extra={"reasons": exc.reasons},
    )


class EntryFilterSerializer(serializers.Serializer):
    agent = serializers.CharField(required=False, max_length=100, help_text="Only entries scoped to this agent.")
    task = serializers.CharField(required=False, max_length=100, help_text="Only entries scoped to this task.")
    q = serializers.CharField(required=False, max_length=500, help_text="Text contained in key or content.")
    updated_since = serializers.DateTimeField(required=False, help_text="ISO 8601; entries changed at or after it.")
    status = serializers.ChoiceField(
        choices=["active", "archived", "superseded", "all"], required=False, default="active"
    )


class StoreListView(AgentListView):
    permission_classes = [HasScope("memory:read")]
    serializer_class = StoreSerializer

    def get_queryset(self):
        return (
            MemoryStore.objects.for_agent_key(self.key)
            .annotate(active_entries=Count("entries", filter=Q(entries__status=EntryStatus.ACTIVE)))
            .order_by("slug")
        )

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "key": self.key}

    @extend_schema(
        tags=["memory"],
        summary="The team's memory stores",
        responses={200: StoreSerializer(many=True), **error_responses()},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class EntryListCreateView(AgentListView):
    serializer_class = EntrySerializer

    def get_permissions(self):
        scope = "memory:write" if self.request.method == "POST" else "memory:read"
        return [HasScope(scope)()]

    def get_queryset(self):
        store = get_store(self.key, self.kwargs["slug"])
        f = query_parameters(self.request, EntryFilterSerializer)
        qs = MemoryEntry.objects.for_agent_key(self.key).filter(store=store).select_related("store", "superseded_by")
        if f["status"] != "all":
            qs = qs.filter(status=f["status"])
        if f.get("agent"):
            qs = qs.filter(scope_agent=f["agent"])
        if f.get("task"):
            qs = qs.filter(scope_task=f["task"])
        if f.get("q"):
            qs = qs.filter(Q(key__icontains=f["q"]) | Q(content__icontains=f["q"]))
        if f.get("updated_since"):
            qs = qs.filter(updated_at__gte=f["updated_since"])
        return qs.order_by("key")

    @extend_schema(
        tags=["memory"],
        summary="List a store's entries",
        parameters=[SLUG, EntryFilterSerializer],
        responses={200: EntrySerializer(many=True), **error_responses(400, 404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        tags=["memory"],
        summary="Create an entry in-band",
        description="Needs `memory:write`, a store that lets agents write, and a key allowed to write it.",
        parameters=[SLUG, SESSION_HEADER, ETAG_HEADER],
        request=EntryCreateSerializer,
        responses={
            201: EntrySerializer,
            **error_responses(400, 404, 409),
        },
    )
    def post(self, request, slug):
        store = get_store(self.key, slug)
        ensure_may_write(self.key, store)
        data = EntryCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        scope = d.get("scope") or {}
        try:
            entry = services.create_entry(
                store,
                key=d["key"],
                content=d["content"],
                author=services.Author.agent(self.key),
                scope_agent=scope.get("agent") or None,
                scope_task=scope.get("task") or None,
                tags=d.get("tags", []),
                provenance=provenance_for(request, self.key, d.get("session_id"), "in-band write"),
            )
        except services.EntryExists as exc:
            raise Conflict(
                f"An entry with key {d['key']!r} already exists in store {slug!r}; update it with PUT."
            ) from exc
        except services.ScreenedWrite as exc:
            raise _screened(exc) from exc
        except services.InvalidChange as exc:
            raise serializers.ValidationError({"content": [str(exc)]}) from exc
        entry.store = store
        return Response(EntrySerializer(entry).data, status=status.HTTP_201_CREATED, headers={"ETag": etag(entry)})


class EntryDetailView(AgentAPIView):
    def get_permissions(self):
        scope = "memory:read" if self.request.method in ("GET", "HEAD", "OPTIONS") else "memory:write"
        return [HasScope(scope)()]

    @extend_schema(
        tags=["memory"],
        summary="Read one entry (with its ETag)",
        parameters=[
            SLUG,
            KEY,
            OpenApiParameter(
                "If-None-Match",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                required=False,
                description="304 if it matches.",
            ),
            ETAG_HEADER,
        ],
        responses={
            200: EntrySerializer,
            304: OpenApiResponse(description="Not modified: the entry still has the ETag you sent."),
            **error_responses(404),
        },
    )
    def get(self, request, slug, key):
        entry = get_entry(get_store(self.key, slug), key)
        tag = etag(entry)
        if none_match(request, entry):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag})
        return Response(EntrySerializer(entry).data, headers={"ETag": tag})

    def _update(self, request, slug, key, *, partial: bool):
        store = get_store(self.key, slug)
        ensure_may_write(self.key, store)
        entry = get_entry(store, key)
        versions = if_match_versions(request, entry)
        data = EntryUpdateSerializer(data=request.data, partial=partial)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        changes = {}
        if "content" in d:
            changes["content"] = d["content"]
        if "scope" in d:
            changes["scope_agent"] = d["scope"].get("agent") or None
            changes["scope_task"] = d["scope"].get("task") or None
        if "tags" in d:
            changes["tags"] = d["tags"]
        prov = provenance_for(request, self.key, d.get("session_id"), "in-band write")
        return self._write(
            entry,
            store,
            lambda: services.update_entry(
                entry,
                base_version=versions,
                author=services.Author.agent(self.key),
                provenance=prov,
                skip_unchanged=True,  # a PUT or PATCH that changes nothing: 200, no new version, the same ETag
                **changes,
            ),
        )

    def _write(self, entry, store, write):
        try:
            fresh = write()
        except services.StaleWrite as exc:
            current = etag(exc.entry)
            raise PreconditionFailed(
                f"Entry {entry.key!r} changed since you read it (it is now {current}); nothing was written. "
                "GET it again, merge, and retry with the new ETag.",
                extra={"current_etag": current},
                headers={"ETag": current},
            ) from exc
        except services.ScreenedWrite as exc:
            raise _screened(exc) from exc
        except services.ArchivedEntry as exc:
            raise Conflict(
                f"Entry {entry.key!r} is archived; nothing was written. A person can restore it in its history.",
                code="archived",
                headers={"ETag": etag(exc.entry)},
            ) from exc
        except services.InvalidChange as exc:
            raise serializers.ValidationError({"content": [str(exc)]}) from exc
        fresh.store = store
        return Response(EntrySerializer(fresh).data, headers={"ETag": etag(fresh)})

    _write_responses = {
        200: EntrySerializer,
        **error_responses(400, 404, 409, 412, 428),
    }

    @extend_schema(
        tags=["memory"],
        summary="Replace an entry's content (If-Match required)",
        parameters=[SLUG, KEY, IF_MATCH, SESSION_HEADER, ETAG_HEADER],
        request=EntryUpdateSerializer,
        responses=_write_responses,
    )
    def put(self, request, slug, key):
        return self._update(request, slug, key, partial=False)

    @extend_schema(
        tags=["memory"],
        summary="Change some of an entry's fields (If-Match required)",
        parameters=[SLUG, KEY, IF_MATCH, SESSION_HEADER, ETAG_HEADER],
        request=EntryUpdateSerializer(partial=True),
        responses=_write_responses,
    )
    def patch(self, request, slug, key):
        return self._update(request, slug, key, partial=True)

    @extend_schema(
        tags=["memory"],
        summary="Archive an entry (If-Match required)",
        description="Archiving is a new version; the history keeps every earlier state.",
        parameters=[SLUG, KEY, IF_MATCH, SESSION_HEADER, ETAG_HEADER],
        request=None,
        responses=_write_responses,
    )
    def delete(self, request, slug, key):
        store = get_store(self.key, slug)
        ensure_may_write(self.key, store)
        entry = get_entry(store, key)
        versions = if_match_versions(request, entry)
        if entry.status == EntryStatus.ARCHIVED and entry.version in versions:
            # Archived already, at the version the caller read: nothing to do (DELETE is idempotent). A stale
            # If-Match on an archived entry goes on to the service, which refuses it like any stale write.
            return Response(EntrySerializer(entry).data, headers={"ETag": etag(entry)})
        prov = provenance_for(request, self.key, None, "archived in-band")
        return self._write(
            entry,
            store,
            lambda: services.archive_entry(
                entry, base_version=versions, author=services.Author.agent(self.key), provenance=prov
            ),
        )
