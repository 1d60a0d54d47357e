"""The context an agent puts in its prompt: memory entries ranked and cut to an injection budget, plus the skills
index, rendered literally, and an audit row saying exactly what was served to whom.

Ranking, highest first:
1. scope match: entries scoped to this task and agent, then to this task, then to this agent, then store-wide.
   Entries scoped to another agent or task are never served.
2. within a scope level, a score: relevance to the query (an entry that matches at all gets 1 + its text rank, so it
   beats every entry that does not match), plus the smoothed rating (feedback mean in [-1, 1], times n/(n+1),
   weighted 0.5), plus recency (0.25 / (1 + age in days / 30)).
On PostgreSQL the ranking is done in SQL over the stored ``search_vector`` (see migration 0003), one scope level
group at a time: the entries scoped to this agent and/or task first (through the partial indexes of migration 0004),
then, only when those do not fill the budget, the store-wide entries; each query returns only the rows it needs. On
SQLite a token-overlap score is computed in Python (development only).

The budget is strict: at most ``max_items`` entries and at most ``max_tokens`` tokens of rendered text
(``memory.services.tokens_estimate``). An entry that would not fit is skipped and the next one is tried, so the
items returned are always in rank order. Text is joined as plain strings: nothing is ever evaluated as a template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Case, IntegerField, Q, Value, When
from django.utils import timezone

from skills_registry.services import published_index

from .models import ContextServe, EntryStatus, MemoryEntry
from .services import tokens_estimate

# last_served_at says "recently used" to people and to dreams; minute precision is enough and keeps concurrent
# context calls from queueing on the same row locks.
SERVED_RESOLUTION = timedelta(minutes=1)

MEMORY_HEADER = "# Memory\n\n"
SKILLS_HEADER = "# Skills (ask for one by name to read it)\n\n"

_PG_TSQUERY = "replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery"
_PG_RELEVANCE = (
    f'CASE WHEN "memory_memoryentry"."search_vector" @@ {_PG_TSQUERY} '
    f'THEN 1 + ts_rank("memory_memoryentry"."search_vector", {_PG_TSQUERY}) ELSE 0 END'
)
# In double precision throughout: with numeric literals and extract() (numeric since PostgreSQL 14) this term cost
# about 2 microseconds a row, more than the text rank; float8 arithmetic costs a fifth of that.
_PG_REST = (
    '0.5::float8 * "memory_memoryentry"."rating" * "memory_memoryentry"."rating_count"'
    ' / ("memory_memoryentry"."rating_count" + 1.0::float8)'
    " + 0.25::float8 / (1.0::float8"
    ' + date_part(\'epoch\', now() - "memory_memoryentry"."updated_at") / 2592000.0::float8)'
)

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "with",
    ]
)

FIELDS = ("id", "key", "content", "scope_agent", "scope_task", "version", "content_hash", "store__slug")


@dataclass
class ContextItem:
    entry_id: int
    key: str
    store: str
    content: str
    scope_agent: str | None
    scope_task: str | None
    version: int
    content_hash: str
    scope_rank: int
    score: float
    last_served_at: datetime | None = None


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


def render_item(key: str, content: str) -> str:
    """One entry as it appears in the prompt. Plain concatenation: `{{ x }}` stays `{{ x }}`."""
    return "## " + key + "\n" + content.rstrip("\n") + "\n\n"


def render_skill(skill: dict) -> str:
    description = " ".join(str(skill["description"]).split())
    return "- " + skill["name"] + " (v" + str(skill["version"]) + "): " + description + "\n"


def eligible_entries(key, *, store=None, agent: str | None = None, task: str | None = None):
    """Active entries of the key's team this agent and task may see (never another agent's or task's)."""
    qs = MemoryEntry.objects.for_agent_key(key).filter(status=EntryStatus.ACTIVE)
    if store is not None:
        qs = qs.filter(store=store)
    qs = qs.filter(Q(scope_agent__isnull=True) | Q(scope_agent=agent) if agent else Q(scope_agent__isnull=True))
    qs = qs.filter(Q(scope_task__isnull=True) | Q(scope_task=task) if task else Q(scope_task__isnull=True))
    return qs.annotate(
        scope_rank=Case(When(scope_task__isnull=False, then=Value(2)), default=Value(0), output_field=IntegerField())
        + Case(When(scope_agent__isnull=False, then=Value(1)), default=Value(0), output_field=IntegerField())
    )


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def ranked_entries(key, *, store=None, agent=None, task=None, query: str = "", limit: int) -> list[ContextItem]:
    """The ``limit`` best entries for this agent, task and query, best first."""
    query = (query or "").strip()
    if connection.vendor == "postgresql":
        return _ranked_postgres(key, store=store, agent=agent, task=task, query=query, limit=limit)
    # SQLite (development): the same order, computed in Python over the eligible rows.
    qs = eligible_entries(key, store=store, agent=agent, task=task)
    words = _words(query)
    now = timezone.now()
    scored = []
    for r in qs.values(*FIELDS, "scope_rank", "rating", "rating_count", "updated_at", "last_served_at"):
        relevance = 0.0
        if words:
            overlap = len(words & _words(r["key"] + " " + r["content"]))
            relevance = 1 + overlap / len(words) if overlap else 0.0
        age_days = max(0.0, (now - r["updated_at"]).total_seconds() / 86400)
        rest = 0.5 * r["rating"] * r["rating_count"] / (r["rating_count"] + 1) + 0.25 / (1 + age_days / 30)
        r["score"] = relevance + rest
        scored.append(r)
    scored.sort(key=lambda r: (-r["scope_rank"], -r["score"], -r["updated_at"].timestamp(), r["id"]))
    return [_item(r) for r in scored[:limit]]


# The ranking statement, written out: building the same query through the ORM costs about 2 ms of CPU per request,
# four times what executing it costs the client. Only constant SQL is formatted in; every value is a parameter.
# tests/test_context_ranking.py checks that it returns exactly what the ORM form (eligible_entries) ranks.
_PG_SCOPE_RANK = (
    'CASE WHEN "memory_memoryentry"."scope_task" IS NOT NULL THEN 2 ELSE 0 END'
    ' + CASE WHEN "memory_memoryentry"."scope_agent" IS NOT NULL THEN 1 ELSE 0 END'
)
_PG_ROW = ("id", "key", "content", "scope_agent", "scope_task", "version", "content_hash", "last_served_at")
_PG_COLUMNS = ", ".join(f'"memory_memoryentry"."{c}"' for c in _PG_ROW)
_PG_RANKED = """
SELECT {columns}, {slug} AS store_slug, ({scope_rank}) AS scope_rank, {score} AS score
FROM "memory_memoryentry" {join}
WHERE "memory_memoryentry"."team_id" = %s AND "memory_memoryentry"."status" = %s {store} AND ({level})
ORDER BY 10 DESC, 11 DESC, "memory_memoryentry"."updated_at" DESC, 1 ASC
LIMIT %s
"""
_A, _T = '"memory_memoryentry"."scope_agent"', '"memory_memoryentry"."scope_task"'
_PG_STORE_WIDE = f"{_A} IS NULL AND {_T} IS NULL"


def _scoped_level(agent: str | None, task: str | None) -> tuple[str, list]:
    """Scope levels 3, 2 and 1 (entries scoped to this agent and/or task), as an OR of equalities so that PostgreSQL
    combines the partial indexes on scope_agent and scope_task (migration 0004) instead of scanning the store."""
    if agent and task:
        return (
            f"({_A} = %s AND {_T} = %s) OR ({_A} = %s AND {_T} IS NULL) OR ({_A} IS NULL AND {_T} = %s)",
            [agent, task, agent, task],
        )
    if agent:
        return f"{_A} = %s AND {_T} IS NULL", [agent]
    return f"{_A} IS NULL AND {_T} = %s", [task]


def _ranked_postgres(key, *, store, agent, task, query: str, limit: int) -> list[ContextItem]:
    """Scope level outranks everything else, so the levels are ranked apart, best level first: first the entries
    scoped to this agent and/or task (found through indexes; usually a few hundred at most), and the store-wide
    entries only when those do not fill ``limit``. The order is exactly that of one query over all eligible
    entries ordered by (scope_rank, score, updated_at, id); only the rows scored differ."""
    if limit <= 0:
        return []
    score, score_params = (f"({_PG_RELEVANCE}) + {_PG_REST}", [query, query]) if query else (_PG_REST, [])
    by_store = store is not None

    def top(level: str, level_params: list, n: int) -> list[ContextItem]:
        sql = _PG_RANKED.format(
            columns=_PG_COLUMNS,
            # The store's slug is known when a store was asked for; otherwise it comes from a join.
            slug="%s" if by_store else '"memory_memorystore"."slug"',
            join=""
            if by_store
            else 'JOIN "memory_memorystore" ON "memory_memorystore"."id" = "memory_memoryentry"."store_id"',
            scope_rank=_PG_SCOPE_RANK,
            score=score,
            store='AND "memory_memoryentry"."store_id" = %s' if by_store else "",
            level=level,
        )
        # In the order of the placeholders: select list, team and status, store, level, limit.
        params = [
            *([store.slug] if by_store else []),
            *score_params,
            key.team_id,
            EntryStatus.ACTIVE.value,
            *([store.pk] if by_store else []),
            *level_params,
            n,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [
            _item({**dict(zip(_PG_ROW, r[:8], strict=True)), "store__slug": r[8], "scope_rank": r[9], "score": r[10]})
            for r in rows
        ]

    items: list[ContextItem] = []
    if agent or task:
        items = top(*_scoped_level(agent, task), limit)
    if len(items) < limit:
        items += top(_PG_STORE_WIDE, [], limit - len(items))
    return items


def _item(r: dict) -> ContextItem:
    return ContextItem(
        entry_id=r["id"],
        key=r["key"],
        store=r["store__slug"],
        content=r["content"],
        scope_agent=r["scope_agent"],
        scope_task=r["scope_task"],
        version=r["version"],
        content_hash=r["content_hash"],
        scope_rank=int(r["scope_rank"]),
        score=float(r["score"]),
        last_served_at=r.get("last_served_at"),
    )


def build_context(
    key,
    *,
    store=None,
    agent: str | None = None,
    task: str | None = None,
    query: str = "",
    max_items: int | None = None,
    max_tokens: int | None = None,
    session_external_id: str = "",
    include_skills: bool = True,
    record: bool = True,
) -> ContextResult:
    """Rank, cut to the budget, render, and (by default) record the serve and mark the entries as served."""
    max_items, max_tokens = clamp_budget(max_items, max_tokens)
    # A few spare rows: an entry too long for the remaining budget is skipped and the next one tried.
    candidates = (
        ranked_entries(key, store=store, agent=agent, task=task, query=query, limit=max_items + min(max_items, 20))
        if max_items
        else []
    )
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

    skills: list[dict] = []
    if include_skills and key.has_scope("skills:read"):
        for skill in published_index(key.team_id):
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


def record_serve(key, result: ContextResult, *, store, agent, task, query, session_external_id) -> int:
    """The audit row (which entry versions and skills went to which key, agent, task and session), and
    last_served_at on the served entries."""
    now = timezone.now()
    serve = ContextServe.objects.create(
        team_id=key.team_id,
        store=store,
        agent_key=key,
        agent=agent or "",
        task=task or "",
        session_external_id=session_external_id or "",
        query=query or "",
        entries=[
            {
                "entry_id": i.entry_id,
                "key": i.key,
                "store": i.store,
                "version": i.version,
                "content_hash": i.content_hash,
            }
            for i in result.items
        ],
        skills=[{"name": s["name"], "version": s["version"]} for s in result.skills],
        tokens=result.tokens,
        created_at=now,
    )
    # Entries already marked within the resolution need no write at all (most of them, under steady use).
    stale_before = now - SERVED_RESOLUTION
    mark_served([i.entry_id for i in result.items if i.last_served_at is None or i.last_served_at < stale_before], now)
    return serve.pk


def mark_served(entry_ids: list[int], now) -> None:
    if not entry_ids:
        return
    stale_before = now - SERVED_RESOLUTION
    if connection.vendor == "postgresql":
        # SKIP LOCKED: when another request is marking the same rows right now, its timestamp is as good as ours.
        with connection.cursor() as cursor:
            cursor.execute(
                """
                UPDATE memory_memoryentry SET last_served_at = %s WHERE id IN (
                    SELECT id FROM memory_memoryentry
                    WHERE id = ANY(%s) AND (last_served_at IS NULL OR last_served_at < %s)
                    FOR UPDATE SKIP LOCKED)
                """,
                [now, entry_ids, stale_before],
            )
        return
    MemoryEntry.objects.filter(pk__in=entry_ids).filter(
        Q(last_served_at__isnull=True) | Q(last_served_at__lt=stale_before)
    ).update(last_served_at=now)
