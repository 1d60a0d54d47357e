"""Gates and small helpers the memory API views share: load a store or entry for a key (404 outside its team),
check that a key may write a store (403), read ETag headers, name the session of a write."""

from __future__ import annotations

import re

from rest_framework import exceptions

from dreamweb.api_base import PreconditionRequired
from dreamweb.provenance import Provenance
from dreamweb.secret_scan import redact
from memory.models import AgentSession, MemoryEntry, MemoryStore


def get_store(key, slug: str) -> MemoryStore:
    """The store by slug in the key's team (404 otherwise). Plain SQL: every context request runs it, and the ORM's
    query building costs about three times what running it does (docs/benchmarks.md, agents' API)."""
    sql = 'SELECT * FROM "memory_memorystore" WHERE "team_id" = %s AND "slug" = %s'
    store = next(iter(MemoryStore.objects.raw(sql, [key.team_id, slug])), None)
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


# Bounded digits: an absurd tag is simply not one of ours (no int conversion of a megabyte of digits).
# Exactly as etag() writes it: no leading zeros (strong comparison is of the characters, so "12.01" is not "12.1").
_ENTRY_TAG = re.compile(r"([1-9]\d{0,18})\.(0|[1-9]\d{0,18})", re.ASCII)


def etag(entry: MemoryEntry) -> str:
    """The entry's entity tag: its id and version, so any write (of any field) gives a new one, and one that was
    superseded never comes back (the version only grows; the id tells an entry apart from a later one that took
    its key)."""
    return f'"{entry.pk}.{entry.version}"'


def parse_etags(header: str) -> list[tuple[bool, str]]:
    """The entity tags of an If-Match / If-None-Match header as (weak, opaque tag without quotes)."""
    tags = []
    for part in header.split(","):
        part = part.strip()
        weak = part.startswith("W/")
        if weak:
            part = part[2:]
        if len(part) >= 2 and part[0] == part[-1] == '"':
            part = part[1:-1]
        if part:
            tags.append((weak, part))
    return tags


def none_match(request, entry: MemoryEntry) -> bool:
    """Whether If-None-Match names the entry as it is (weak comparison, `*` included): the client has it."""
    current = etag(entry)[1:-1]
    return any(tag in (current, "*") for _, tag in parse_etags(request.headers.get("If-None-Match", "")))


# If-Match as a write here must send it: one or more entity tags, each quoted, maybe weak (RFC 9110 8.8.3). `*` is
# not one (a write must name the version it was prepared against). The schema gives the same pattern.
ENTITY_TAGS = r'^\s*(W/)?"[^"]*"(\s*,\s*(W/)?"[^"]*")*\s*$'
_ENTITY_TAGS = re.compile(ENTITY_TAGS)


def if_match_versions(request, entry: MemoryEntry) -> frozenset[int]:
    """The versions of this entry that If-Match names (428 when it is missing or not a list of entity tags). Strong
    comparison: a weak tag never matches; a tag of another entry, or not one of ours, names no version (the write is
    then stale, 412)."""
    header = request.headers.get("If-Match", "").strip()
    if not header:
        raise PreconditionRequired("This write needs an If-Match header with the entry's ETag (GET the entry first).")
    if not _ENTITY_TAGS.fullmatch(header):
        raise PreconditionRequired(
            'If-Match must name the entry\'s ETag as the GET returned it, quoted (`"42.3"`); `*` is not accepted.'
        )
    tags = parse_etags(header)
    versions = set()
    for weak, tag in tags:
        match = _ENTRY_TAG.fullmatch(tag)
        if not weak and match and match[1] == str(entry.pk):
            versions.add(int(match[2]))
    return frozenset(versions)


def provenance_for(request, key, body_session_id: str | None, reason: str) -> Provenance:
    """Name the session a write comes from: the X-Session-Id header, else the body's session_id. The session is
    linked when it is already stored for the team; otherwise its id is kept in the version's reason."""
    session_id = (request.headers.get("X-Session-Id") or body_session_id or "").strip()[:200]
    if not session_id:
        return Provenance(reason=reason)
    session = AgentSession.objects.for_agent_key(key).filter(external_id=session_id).first()
    if session is None:
        # Kept as text in the version's history: redacted like any text an agent sends (a header is no safer place
        # for a secret than a body).
        return Provenance(reason=f"{reason} (session {redact(session_id)}, not ingested yet)")
    return Provenance(session=session, reason=reason)
