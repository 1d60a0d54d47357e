"""Gates and small helpers the memory API views share: load a store or entry for a key (404 outside its team),
check that a key may write a store (403), read ETag headers, name the session of a write."""

from __future__ import annotations

from rest_framework import exceptions

from dreamweb.api_base import PreconditionRequired
from dreamweb.provenance import Provenance
from memory.models import AgentSession, MemoryEntry, MemoryStore


def get_store(key, slug: str) -> MemoryStore:
    store = MemoryStore.objects.for_agent_key(key).filter(slug=slug).first()
    if store is None:
        raise exceptions.NotFound(f"No store {slug!r} in this key's team.")
    return store


def get_entry(store: MemoryStore, entry_key: str) -> MemoryEntry:
    entry = MemoryEntry.objects.for_team(store.team_id).filter(store=store, key=entry_key).first()
    if entry is None:
        raise exceptions.NotFound(f"No entry {entry_key!r} in store {store.slug!r}.")
    entry.store = store
    return entry


def ensure_may_write(key, store: MemoryStore) -> None:
    """In-band writes need a store that lets agents write and a key allowed to write that store."""
    if not store.agents_may_write:
        raise exceptions.PermissionDenied(f"Store {store.slug!r} does not accept in-band writes from agents.")
    if not key.has_scope("memory:write"):
        raise exceptions.PermissionDenied("This API key lacks the `memory:write` scope.")
    if not key.may_write_store(store.slug):
        raise exceptions.PermissionDenied(f"This API key may not write to store {store.slug!r}.")


def etag(content_hash: str) -> str:
    return f'"{content_hash}"'


def parse_etags(header: str) -> list[str]:
    """The entity tags of an If-Match / If-None-Match header, unquoted (weak tags compared by their value)."""
    tags = []
    for part in header.split(","):
        part = part.strip()
        if part.startswith("W/"):
            part = part[2:]
        if len(part) >= 2 and part[0] == part[-1] == '"':
            part = part[1:-1]
        if part:
            tags.append(part)
    return tags


def base_hash_from_if_match(request, entry: MemoryEntry) -> str:
    """The content hash the client prepared its change against, from If-Match (428 when missing)."""
    header = request.headers.get("If-Match", "").strip()
    if not header:
        raise PreconditionRequired("This write needs an If-Match header with the entry's ETag (GET the entry first).")
    tags = parse_etags(header)
    if not tags or "*" in tags:
        raise PreconditionRequired(
            "If-Match must name the entry's ETag (its quoted content hash); `*` is not accepted."
        )
    return entry.content_hash if entry.content_hash in tags else tags[0]


def provenance_for(request, key, body_session_id: str | None, reason: str) -> Provenance:
    """Name the session a write comes from: the X-Session-Id header, else the body's session_id. The session is
    linked when it is already stored for the team; otherwise its id is kept in the version's reason."""
    session_id = (request.headers.get("X-Session-Id") or body_session_id or "").strip()[:200]
    if not session_id:
        return Provenance(reason=reason)
    session = AgentSession.objects.for_agent_key(key).filter(external_id=session_id).first()
    if session is None:
        return Provenance(reason=f"{reason} (session {session_id}, not ingested yet)")
    return Provenance(session=session, reason=reason)
