"""Which memory entries an agent's context gets first: the ranking rule, defined once.

Highest first:
1. scope level: entries scoped to this task and agent (3), to this task (2), to this agent (1), store-wide (0).
   Entries scoped to another agent or task are never served.
2. within a level, a score: relevance to the query (an entry that matches at all gets 1 + its text rank, so it beats
   every entry that does not match), plus its standing: the smoothed rating (feedback mean in [-1, 1], times
   n/(n+1), weighted RATING_WEIGHT) and recency (RECENCY_WEIGHT / (1 + age in days / RECENCY_DAYS)).
3. ties: the most recently updated first, then the lowest id.

Only entries valid now are served: active (not archived, not superseded) and inside their validity window
(``valid_from`` passed or unset, ``valid_until`` not reached or unset; ``MemoryEntry.objects.valid_now`` is the same
rule in the ORM). An expired entry stays in the store, shown as expired, until a person or a dream renews or archives
it.

One statement selects and orders the entries on both backends, one scope level group at a time: the entries scoped
to this agent and/or task first (through the partial indexes of migration 0004 on PostgreSQL), then, only when those
do not fill the limit, the store-wide entries. Scope level outranks everything else, so ranking the groups apart
gives exactly the order of one query over every eligible entry. The score is computed in that statement on
PostgreSQL, over the stored ``search_vector`` (migration 0003), so each query returns only the rows it needs. SQLite
(development) has no text search: there the statement reads both groups at once and the score is computed here, with
word overlap as the relevance.

``eligible_entries`` is the same selection written with the ORM: tests/test_context_ranking.py ranks every eligible
entry in one query with it, the oracle the statement is compared with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import Case, IntegerField, Q, Value, When
from django.utils import timezone

from .models import EntryStatus, MemoryEntry

# The rule's numbers.
TASK_LEVEL, AGENT_LEVEL = 2, 1  # a scope level is the sum of what the entry is scoped to
RATING_WEIGHT = 0.5
RECENCY_WEIGHT = 0.25
RECENCY_DAYS = 30


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
    # Where the item was ranked from (memory.ranking_cache's data for the store), so that marking it served can move
    # that copy's last_served_at too.
    source: object = field(default=None, repr=False, compare=False)


def standing(rating: float, rating_count: int, age_days: float) -> float:
    """The score without relevance: the smoothed rating plus recency (the Python form of _PG_REST)."""
    return RATING_WEIGHT * rating * rating_count / (rating_count + 1) + RECENCY_WEIGHT / (1 + age_days / RECENCY_DAYS)


_PG_TSQUERY = "replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery"
_PG_RELEVANCE = (
    f'CASE WHEN "memory_memoryentry"."search_vector" @@ {_PG_TSQUERY} '
    f'THEN 1 + ts_rank("memory_memoryentry"."search_vector", {_PG_TSQUERY}) ELSE 0 END'
)
# standing() in SQL, in double precision throughout: with numeric literals and extract() (numeric since PostgreSQL
# 14) this term cost about 2 microseconds a row, more than the text rank; float8 arithmetic costs a fifth of that.
_PG_REST = (
    f'{RATING_WEIGHT}::float8 * "memory_memoryentry"."rating" * "memory_memoryentry"."rating_count"'
    ' / ("memory_memoryentry"."rating_count" + 1.0::float8)'
    f" + {RECENCY_WEIGHT}::float8 / (1.0::float8"
    f' + date_part(\'epoch\', now() - "memory_memoryentry"."updated_at") / {RECENCY_DAYS * 86400.0}::float8)'
)

# The ranking statement, written out: building the same query through the ORM costs about 2 ms of CPU per request,
# four times what executing it costs the client. Only constant SQL is formatted in; every value is a parameter.
_A, _T = '"memory_memoryentry"."scope_agent"', '"memory_memoryentry"."scope_task"'
_SCOPE_RANK = (
    f"CASE WHEN {_T} IS NOT NULL THEN {TASK_LEVEL} ELSE 0 END"
    f" + CASE WHEN {_A} IS NOT NULL THEN {AGENT_LEVEL} ELSE 0 END"
)
_STORE_WIDE = f"{_A} IS NULL AND {_T} IS NULL"
_JOIN_STORE = 'JOIN "memory_memorystore" ON "memory_memorystore"."id" = "memory_memoryentry"."store_id"'
_ROW = ("id", "key", "content", "scope_agent", "scope_task", "version", "content_hash", "last_served_at")
# What SQLite needs besides, to compute the score here.
_STANDING = ("rating", "rating_count", "updated_at")
_RANKED = """
SELECT {columns}, {slug} AS store_slug, ({scope_rank}) AS scope_rank, {score} AS score
FROM "memory_memoryentry" {join}
WHERE "memory_memoryentry"."team_id" = %s AND "memory_memoryentry"."status" = %s
  AND ("memory_memoryentry"."valid_from" IS NULL OR "memory_memoryentry"."valid_from" <= %s)
  AND ("memory_memoryentry"."valid_until" IS NULL OR "memory_memoryentry"."valid_until" > %s) {store} AND ({level})
{order}"""
_ORDER = """ORDER BY 10 DESC, 11 DESC, "memory_memoryentry"."updated_at" DESC, 1 ASC
LIMIT %s
"""


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


def ranked_by_statement(key, *, store=None, agent=None, task=None, query: str = "", limit: int) -> list[ContextItem]:
    """The ``limit`` best entries of the key's team (of ``store`` when given) for this agent, task and query, best
    first: the scoped levels, then the store-wide entries only when those do not fill ``limit``."""
    if limit <= 0:
        return []
    query = (query or "").strip()
    if connection.vendor != "postgresql":
        # SQLite scores every row it reads in Python: one statement over both level groups at once.
        scoped, scoped_params = _scoped_level(agent, task) if agent or task else ("1 = 0", [])
        return _top(key, store, query, f"({scoped}) OR ({_STORE_WIDE})", scoped_params, limit)
    items: list[ContextItem] = []
    if agent or task:
        items = _top(key, store, query, *_scoped_level(agent, task), limit)
    if len(items) < limit:
        items += _top(key, store, query, _STORE_WIDE, [], limit - len(items))
    return items


def _top(key, store, query: str, level: str, level_params: list, n: int) -> list[ContextItem]:
    """The n best entries of one level group."""
    on_postgres = connection.vendor == "postgresql"
    score, score_params = "0.0", []
    if on_postgres:
        score, score_params = (f"({_PG_RELEVANCE}) + {_PG_REST}", [query, query]) if query else (_PG_REST, [])
    by_store = store is not None
    columns = _ROW if on_postgres else (*_ROW, *_STANDING)
    sql = _RANKED.format(
        columns=", ".join(f'"memory_memoryentry"."{c}"' for c in columns),
        # The store's slug is known when a store was asked for; otherwise it comes from a join.
        slug="%s" if by_store else '"memory_memorystore"."slug"',
        join="" if by_store else _JOIN_STORE,
        scope_rank=_SCOPE_RANK,
        score=score,
        store='AND "memory_memoryentry"."store_id" = %s' if by_store else "",
        level=level,
        # SQLite reads the whole level group and orders it by the score computed below.
        order=_ORDER if on_postgres else "",
    )
    # In the order of the placeholders: select list, team and status, validity window, store, level, limit.
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [
        *([store.slug] if by_store else []),
        *score_params,
        key.team_id,
        EntryStatus.ACTIVE.value,
        now,
        now,
        *([store.pk] if by_store else []),
        *level_params,
        *([n] if on_postgres else []),
    ]
    if on_postgres:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [
            _item({**dict(zip(_ROW, r[:8], strict=True)), "store__slug": r[8], "scope_rank": r[9], "score": r[10]})
            for r in rows
        ]
    return _scored_here(MemoryEntry.objects.raw(sql, params), query, n)  # noqa: S611 - constant SQL, values are params


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from how i in is it of on or the this to was what when with".split()  # noqa: SIM905
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _scored_here(entries, query: str, n: int) -> list[ContextItem]:
    """SQLite: the score computed in Python (relevance: 1 + the share of the query's words the entry holds)."""
    words = _words(query)
    now = timezone.now()
    scored = []
    for e in entries:
        relevance = 0.0
        if words:
            overlap = len(words & _words(e.key + " " + e.content))
            relevance = 1 + overlap / len(words) if overlap else 0.0
        age_days = max(0.0, (now - e.updated_at).total_seconds() / 86400)
        row = {name: getattr(e, name) for name in _ROW}
        score = relevance + standing(e.rating, e.rating_count, age_days)
        row.update(store__slug=e.store_slug, scope_rank=e.scope_rank, score=score)
        scored.append((row, e.updated_at))
    scored.sort(key=lambda ru: (-ru[0]["scope_rank"], -ru[0]["score"], -ru[1].timestamp(), ru[0]["id"]))
    return [_item(row) for row, _ in scored[:n]]


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


def eligible_entries(key, *, store=None, agent: str | None = None, task: str | None = None):
    """The statement's selection in the ORM (the tests' oracle): active entries of the key's team, valid now, that this
    agent and task may see, never another agent's or task's, annotated with their scope level."""
    qs = MemoryEntry.objects.for_agent_key(key).valid_now()
    if store is not None:
        qs = qs.filter(store=store)
    qs = qs.filter(Q(scope_agent__isnull=True) | Q(scope_agent=agent) if agent else Q(scope_agent__isnull=True))
    qs = qs.filter(Q(scope_task__isnull=True) | Q(scope_task=task) if task else Q(scope_task__isnull=True))
    level = IntegerField()
    return qs.annotate(
        scope_rank=Case(When(scope_task__isnull=False, then=Value(TASK_LEVEL)), default=Value(0), output_field=level)
        + Case(When(scope_agent__isnull=False, then=Value(AGENT_LEVEL)), default=Value(0), output_field=level)
    )
