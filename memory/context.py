"""The context an agent puts in its prompt: memory entries ranked and cut to an injection budget, plus the skills
index, rendered literally, and an audit row saying exactly what was served to whom.

The entries come in the order of memory.ranking (scope level, then relevance, rating and recency); the skills index
is the skills registry's (skills_registry.services.published_index; on PostgreSQL kept per process and checked by its
fingerprint in the ranking's statement: skills_registry.index).

The budget is strict: at most ``max_items`` entries and at most ``max_tokens`` tokens of rendered text
(``memory.services.tokens_estimate``). An entry that would not fit is skipped and the next one is tried, so the
items returned are always in rank order. Text is joined as plain strings: nothing is ever evaluated as a template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from dreamweb import prepared
from skills_registry import index as skills_index
from skills_registry.services import published_index

from .models import ContextServe, MemoryEntry
from .ranking import ContextItem
from .ranking_cache import Also, note_served, ranked_entries, ranked_entries_in, slug_check_in
from .services import tokens_estimate

# last_served_at says "recently used" to people and to dreams; minute precision is enough and keeps concurrent
# context calls from queueing on the same row locks.
SERVED_RESOLUTION = timedelta(minutes=1)

MEMORY_HEADER = "# Memory\n\n"
SKILLS_HEADER = "# Skills (ask for one by name to read it)\n\n"


@dataclass
class ContextResult:
    items: list[ContextItem]
    skills: list[dict]
    text: str
    tokens: int
    max_items: int
    max_tokens: int
    serve_id: int | None = None
    considered: int = field(default=0)


def clamp_budget(max_items: int | None, max_tokens: int | None) -> tuple[int, int]:
    items = settings.DREAMWEB_CONTEXT_DEFAULT_ITEMS if max_items is None else max_items
    tokens = settings.DREAMWEB_CONTEXT_DEFAULT_TOKENS if max_tokens is None else max_tokens
    return (
        max(0, min(items, settings.DREAMWEB_CONTEXT_MAX_ITEMS)),
        max(0, min(tokens, settings.DREAMWEB_CONTEXT_MAX_TOKENS)),
    )


def _tokens_for(chars: int) -> int:
    # Same arithmetic as tokens_estimate(text) for a text of this many characters (0 for no text at all).
    return max(1, (chars + 3) // 4) if chars else 0


# A line of an entry's text that would read as a heading of the prompt: each entry is one `## key` section, and a
# heading inside an entry's text (an agent's note holding "## deploy-command") would read as another entry, under a
# name someone else wrote. Escaped as Markdown escapes it (`\##`): the text is kept, the heading is not.
_HEADING_LINE = re.compile(r"(?m)^( {0,3})(?=#{1,6}(?:[ \t]|$))")


def render_item(key: str, content: str) -> str:
    """One entry as it appears in the prompt. Plain concatenation: `{{ x }}` stays `{{ x }}`."""
    if "#" in content:
        content = _HEADING_LINE.sub(r"\1\\", content)
    return "## " + key + "\n" + content.rstrip("\n") + "\n\n"


def render_skill(skill: dict) -> str:
    description = " ".join(str(skill["description"]).split())
    return "- " + skill["name"] + " (v" + str(skill["version"]) + "): " + description + "\n"


def _fit(candidates, max_items: int, max_tokens: int) -> tuple[list[ContextItem], list[str], int]:
    """The budget rule: in rank order, at most ``max_items`` entries and ``max_tokens`` tokens of rendered text; an
    entry too long for what is left is skipped and the next one tried. Returns the items, their text, its length."""
    parts: list[str] = []
    chars = 0
    items: list[ContextItem] = []
    for item in candidates:
        if len(items) >= max_items:
            break
        chunk = render_item(item.key, item.content)
        if not items:
            chunk = MEMORY_HEADER + chunk
        if _tokens_for(chars + len(chunk)) > max_tokens:
            continue
        parts.append(chunk)
        chars += len(chunk)
        items.append(item)
    return items, parts, chars


def fit(candidates, max_items: int, max_tokens: int) -> list[ContextItem]:
    """The entries of ``candidates`` (ranked) that an agent's context holds at this budget."""
    return _fit(candidates, max_items, max_tokens)[0]


class NoSuchStore(LookupError):
    """The key's team has no store with the slug a context request named."""


def build_context(
    key,
    *,
    store=None,
    store_slug: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    query: str = "",
    max_items: int | None = None,
    max_tokens: int | None = None,
    session_external_id: str = "",
    include_skills: bool = True,
    record: bool = True,
    checked: tuple | None = None,
) -> ContextResult:
    """Rank, cut to the budget, render, and (by default) record the serve and mark the entries as served.

    The store is given as a model (``store``) or by its slug in the key's team (``store_slug``: found with the
    ranking's own statement, or in ``checked``, that statement's row as ``check_in_statement``'s columns read it in
    this transaction for the same slug, query and skills; NoSuchStore when the team has none)."""
    max_items, max_tokens = clamp_budget(max_items, max_tokens)
    # A few spare rows: an entry too long for the remaining budget is skipped and the next one tried.
    limit = max_items + min(max_items, 20)
    with_skills = include_skills and key.has_scope("skills:read")
    # The skills index's fingerprint is read by the ranking's check statement (no statement of its own); the index
    # itself only when it changed (skills_registry.index).
    fingerprint = Also(*skills_index.fingerprint_sql(key.team_id)) if with_skills else None
    if store_slug is not None:
        store, candidates = ranked_entries_in(
            key, store_slug, agent=agent, task=task, query=query, limit=limit, also=fingerprint, checked=checked
        )
        if store is None:
            raise NoSuchStore(store_slug)
    else:
        candidates = (
            ranked_entries(key, store=store, agent=agent, task=task, query=query, limit=limit, also=fingerprint)
            if max_items
            else []
        )
    items, parts, chars = _fit(candidates, max_items, max_tokens)

    skills: list[dict] = []
    if with_skills:
        if fingerprint.read:
            index = skills_index.published_index_at(key.team_id, fingerprint.value)
        else:
            index = published_index(key.team_id)
        for skill in index:
            chunk = render_skill(skill)
            if not skills:
                chunk = SKILLS_HEADER + chunk
            if _tokens_for(chars + len(chunk)) > max_tokens:
                continue
            parts.append(chunk)
            chars += len(chunk)
            skills.append(skill)

    text = "".join(parts)
    tokens = tokens_estimate(text) if text else 0
    result = ContextResult(
        items=items,
        skills=skills,
        text=text,
        tokens=tokens,
        max_items=max_items,
        max_tokens=max_tokens,
        considered=len(candidates),
    )
    if record:
        result.serve_id = record_serve(
            key, result, store=store, agent=agent, task=task, query=query, session_external_id=session_external_id
        )
    return result


def check_in_statement(team_column: str, store_slug: str, query: str, include_skills: bool):
    """The ranking's check (the store by its slug, its version, the clock, the query's lexemes and, with skills, the
    index's fingerprint) as columns and a join of another statement whose row names the team in ``team_column``, and
    their parameters (None when the ranking does not check): the key's own statement reads them (memory.api.context),
    and ``build_context(checked=...)`` takes the values. The fingerprint is read whenever skills are asked for; it is
    used only if the key may read skills."""
    also = Also(*skills_index.fingerprint_sql_of(team_column)) if include_skills else None
    return slug_check_in(team_column, store_slug, query, also)


def record_serve(key, result: ContextResult, *, store, agent, task, query, session_external_id) -> int:
    """The audit row (which entry versions and skills went to which key, agent, task and session), and
    last_served_at on the served entries (those not marked within SERVED_RESOLUTION)."""
    now = timezone.now()
    fields = {
        "team_id": key.team_id,
        "store_id": store.pk if store is not None else None,
        "agent_key_id": key.pk,
        "agent": agent or "",
        "task": task or "",
        "session_external_id": session_external_id or "",
        "query": query or "",
        "entries": [
            {
                "entry_id": i.entry_id,
                "key": i.key,
                "store": i.store,
                "version": i.version,
                "content_hash": i.content_hash,
            }
            for i in result.items
        ],
        "skills": [{"name": s["name"], "version": s["version"]} for s in result.skills],
        "tokens": result.tokens,
        "created_at": now,
    }
    # Entries already marked within the resolution need no write at all (most of them, under steady use).
    stale_before = now - SERVED_RESOLUTION
    stale = [i for i in result.items if i.last_served_at is None or i.last_served_at < stale_before]
    if connection.vendor == "postgresql":
        serve_id = _insert_serve(fields, [i.entry_id for i in stale], now)
    else:
        serve_id = ContextServe.objects.create(**fields).pk
        mark_served([i.entry_id for i in stale], now)
    note_served(stale, now)
    return serve_id


# The audit row and the last_served_at marks in one statement (one round trip on the hot path). Constant SQL; every
# value is a parameter.
_SERVE_COLUMNS = (
    "team_id",
    "store_id",
    "agent_key_id",
    "agent",
    "task",
    "session_external_id",
    "query",
    "entries",
    "skills",
    "tokens",
    "created_at",
)
# Both statements also turn synchronous_commit off for the rest of the transaction (set_config(..., true) lasts
# until its end, so nothing is carried on a kept connection or through PgBouncer in transaction mode): the commit
# then returns without waiting for the WAL flush. A crash of the database server may lose the last few hundred
# milliseconds of committed serves (their audit rows and last_served_at marks); it never corrupts or half-writes one
# (docs/api.md, "The audit of served context").
_INSERT_SERVE = """WITH serve AS (
    INSERT INTO "memory_contextserve" ("team_id", "store_id", "agent_key_id", "agent", "task",
        "session_external_id", "query", "entries", "skills", "tokens", "created_at")
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s) RETURNING "id"
)
SELECT "id", set_config('synchronous_commit', 'off', true) FROM serve
"""
# SKIP LOCKED: when another request is marking the same rows right now, its timestamp is as good as ours.
_MARK_SERVED = """UPDATE memory_memoryentry SET last_served_at = %s WHERE id IN (
    SELECT id FROM memory_memoryentry
    WHERE id = ANY(%s) AND (last_served_at IS NULL OR last_served_at < %s)
    FOR UPDATE SKIP LOCKED)
"""
_SERVE_AND_MARK = """WITH marked AS (
    UPDATE memory_memoryentry SET last_served_at = %s WHERE id IN (
        SELECT id FROM memory_memoryentry
        WHERE id = ANY(%s) AND (last_served_at IS NULL OR last_served_at < %s)
        FOR UPDATE SKIP LOCKED)
), serve AS (
    INSERT INTO "memory_contextserve" ("team_id", "store_id", "agent_key_id", "agent", "task",
        "session_external_id", "query", "entries", "skills", "tokens", "created_at")
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s) RETURNING "id"
)
SELECT "id", set_config('synchronous_commit', 'off', true) FROM serve
"""


def _insert_serve(fields: dict, stale_ids: list[int], now) -> int:
    # The two jsonb values encoded by orjson (a sixth of the standard encoder's time for 20 entries); PostgreSQL
    # stores jsonb parsed, so the row is the same whatever the spacing of the text sent.
    values = [orjson.dumps(fields[c]).decode() if c in ("entries", "skills") else fields[c] for c in _SERVE_COLUMNS]
    with prepared.cursor() as cursor:
        if not stale_ids:
            cursor.execute(_INSERT_SERVE, values)
        else:
            cursor.execute(_SERVE_AND_MARK, [now, stale_ids, now - SERVED_RESOLUTION, *values])
        return cursor.fetchone()[0]


def mark_served(entry_ids: list[int], now) -> None:
    if not entry_ids:
        return
    stale_before = now - SERVED_RESOLUTION
    if connection.vendor == "postgresql":
        with prepared.cursor() as cursor:
            cursor.execute(_MARK_SERVED, [now, entry_ids, stale_before])
        return
    MemoryEntry.objects.filter(pk__in=entry_ids).filter(
        Q(last_served_at__isnull=True) | Q(last_served_at__lt=stale_before)
    ).update(last_served_at=now)
