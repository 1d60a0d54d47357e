"""The ranking data of a store kept ready in each worker process: a context request at the cost of a lookup.

``ranked_entries`` is the front door of memory.ranking's rule. On PostgreSQL it keeps, per worker process, one
``StoreRanking`` per (team, store) (and per team, for the requests that name no store): every active entry's row,
and, for each scope (agent, task) apart, its entries' standing (rating part), update time, validity and an inverted
index of their text-search lexemes, so a request reads only the scopes it may be served from. A request then
costs one statement, which reads the store's ``content_version`` (migration 0006: triggers move it on every change
of an entry that the ranking reads), the database's ``now()`` and the query's lexemes (``plainto_tsquery``), and a
few vectorised operations here; the ranking statement of memory.ranking runs only when the data is not ready. For a
store named by its slug, that check can be read as columns of another statement of the same transaction
(``slug_check_in``): the context endpoint has the API key's own lookup read it, so a context request costs no
statement for its ranking at all.

The score is PostgreSQL's, bit for bit, so the order (ties included) is the statement's:
- relevance: ``ts_rank`` with its default weights, in single precision as PostgreSQL computes it (its OR branch:
  the query's lexemes are joined with ``|``), plus 1 when any lexeme matches;
- standing: ``RATING_WEIGHT * rating * n / (n + 1)`` and ``RECENCY_WEIGHT / (1 + age / RECENCY_DAYS)``, the age
  taken as ``date_part('epoch', now() - updated_at)`` does, from the database's clock;
- ``(relevance + rating part) + recency``, in that order, as the statement adds them.
tests/test_context_ranking.py compares it with the ORM oracle exactly, scores included.

Isolation: a key names its team and a store is found with the key's team in the WHERE clause (``get_store``, or
the check statement by slug), so the cache key (team id, store id) never reaches another team's data; the data is
loaded with the team in the WHERE clause and under row-level security. What is cached is what one statement would
read; nothing is served without the version check.

Bounds: at most ``DREAMWEB_CONTEXT_CACHE_STORES`` stores per process (least recently used dropped first), stores
of more than ``DREAMWEB_CONTEXT_CACHE_MAX_ENTRIES`` active entries are left to the statement, and a store whose data
went stale again within ``DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S`` of its last build is served by the statement until
then (a store written to many times a second does not rebuild on every request). Queries whose lexemes PostgreSQL
joins with an operator other than ``|`` are left to the statement too.
"""

from __future__ import annotations

import gc
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils import timezone

from dreamweb import prepared

from .models import EntryStatus, MemoryStore
from .ranking import (
    AGENT_LEVEL,
    RATING_WEIGHT,
    RECENCY_DAYS,
    RECENCY_WEIGHT,
    TASK_LEVEL,
    ContextItem,
    ranked_by_statement,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_US_PER_DAY = 86_400_000_000
_NEVER_BEFORE, _NEVER_AFTER = np.iinfo(np.int64).min, np.iinfo(np.int64).max
# ts_rank's default weights for D, C, B, A (PostgreSQL's tsrank.c), as single-precision floats.
_WEIGHTS = {"": np.float32(0.1), "D": np.float32(0.1), "C": np.float32(0.2), "B": np.float32(0.4), "A": np.float32(1.0)}
_PI2_6 = 1.64493406685  # the double constant calc_rank_or divides by

_CHECK_STORE = (
    "SELECT now(), (SELECT content_version FROM memory_memorystore WHERE id = %s AND team_id = %s), NULL, {tsquery},"
    " NULL, {also}"
)
# The same for a store named by its slug: the store's lookup (its id; NULL when the key's team has no such store) in
# the same statement, so a context request for a store costs no statement of its own for it.
# Its columns and its join are also read by the key's own statement (slug_check_in), the team then being the key's.
_CHECK_SLUG_COLUMNS = "now(), s.content_version, NULL, {tsquery}, s.id, {also}"
_CHECK_SLUG_JOIN = "LEFT JOIN memory_memorystore s ON s.team_id = {team} AND s.slug = %s"
_CHECK_SLUG = f"SELECT {_CHECK_SLUG_COLUMNS} FROM (SELECT 1) AS one {_CHECK_SLUG_JOIN.format(team='%s')}"  # noqa: S608
_FIND_SLUG = "SELECT id FROM memory_memorystore WHERE team_id = %s AND slug = %s"
# A team's stores: the highest version and the number of stores (a store created or deleted changes one of them).
_CHECK_TEAM = (
    "SELECT now(), (SELECT max(content_version) FROM memory_memorystore WHERE team_id = %s),"
    " (SELECT count(*) FROM memory_memorystore WHERE team_id = %s), {tsquery}, NULL, {also}"
)
_TSQUERY = "replace(plainto_tsquery('english', %s)::text, '&', '|')"
_LOAD = """
SELECT e.id, e.key, e.content, e.scope_agent, e.scope_task, e.version, e.content_hash, e.last_served_at,
       e.rating, e.rating_count, e.updated_at, e.valid_from, e.valid_until, s.slug
FROM memory_memoryentry e JOIN memory_memorystore s ON s.id = e.store_id
WHERE e.team_id = %s AND e.status = %s {store}
ORDER BY e.id
"""
# The inverted index, built by PostgreSQL from the stored tsvectors: for each lexeme and each weight sequence of its
# positions (e.g. D,D,A), the entries that hold it so.
_POSTINGS = """
SELECT u.lexeme, coalesce(array_to_string(u.weights, ','), ''), array_agg(e.id)
FROM memory_memoryentry e, unnest(e.search_vector) u
WHERE e.team_id = %s AND e.status = %s {store}
GROUP BY 1, 2
"""

# A lexeme in the text form of a tsvector or tsquery ('' doubles a quote, a backslash escapes), and its positions.
_LEXEME = re.compile(r"'((?:''|\\.|[^'\\])*)'(?::([0-9A-D,]+))?")
_UNESCAPE = re.compile(r"''|\\(.)")


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: m.group(1) or "'", text) if ("'" in text or "\\" in text) else text


def _f32(x) -> np.float32:
    return np.float32(x)


_CONTRIBUTION: dict[str, float] = {}


def _contribution(signature: str) -> float:
    """What one lexeme of an entry adds to calc_rank_or's sum before the division by the number of query lexemes,
    as a double, from the weights of its positions (``signature``: e.g. ``D,A,D``; empty for a lexeme stored without
    positions, which ts_rank counts as one position of weight D). Computed as tsrank.c does, in single precision."""
    value = _CONTRIBUTION.get(signature)
    if value is None:
        weights = [_WEIGHTS[w] for w in signature.split(",")]
        resj, wjm, jm = np.float32(0.0), np.float32(-1.0), 0
        for j, w in enumerate(weights):
            resj = _f32(resj + _f32(w / np.float32((j + 1) * (j + 1))))
            if w > wjm:
                wjm, jm = w, j
        inner = _f32(_f32(wjm + resj) - _f32(wjm / np.float32((jm + 1) * (jm + 1))))
        value = _CONTRIBUTION[signature] = float(inner) / _PI2_6
    return value


# The lexemes of the tsquery texts seen last (agents ask the same questions again); dropped whole when full.
_LEXEMES: dict[str, tuple[str, ...] | None] = {}
_LEXEMES_KEPT = 4096


def query_lexemes(tsquery_text: str | None) -> tuple[str, ...] | None:
    """The distinct lexemes of ``replace(plainto_tsquery(q)::text, '&', '|')`` in the order ts_rank adds them (byte
    order), or None when the query holds anything but lexemes joined by ``|`` (left to the statement)."""
    if not tsquery_text:
        return ()
    try:
        return _LEXEMES[tsquery_text]
    except KeyError:
        pass
    if len(_LEXEMES) >= _LEXEMES_KEPT:
        _LEXEMES.clear()
    found = _LEXEMES[tsquery_text] = _parse_lexemes(tsquery_text)
    return found


def _parse_lexemes(tsquery_text: str) -> tuple[str, ...] | None:
    lexemes, end = [], 0
    for m in _LEXEME.finditer(tsquery_text):
        between = tsquery_text[end : m.start()].strip()
        if between not in ("", "|") or m.group(2) is not None or (not lexemes and between):
            return None
        lexemes.append(_unescape(m.group(1)))
        end = m.end()
    if tsquery_text[end:].strip() or not lexemes:
        return None
    return tuple(sorted(set(lexemes), key=lambda s: s.encode()))


def _us(dt: datetime) -> int:
    return (dt - _EPOCH) // _US


class _Group:
    """The entries of one (scope_agent, scope_task) group, which is one scope level, in arrays of their own (in id
    order): a request works on the groups it may serve, never on the whole store (an agent's hundred entries cost
    what a hundred cost, whatever the size of the store around them)."""

    __slots__ = ("at", "ids", "updated_us", "rating_part", "valid_from", "valid_until", "windowed", "postings")

    def __init__(self, at: np.ndarray, ids, updated_us, rating_part, valid_from, valid_until, postings: dict):
        self.at = at  # positions in the store's rows
        self.ids, self.updated_us, self.rating_part = ids[at], updated_us[at], rating_part[at]
        self.valid_from, self.valid_until = valid_from[at], valid_until[at]
        self.windowed = bool((self.valid_from != _NEVER_BEFORE).any() or (self.valid_until != _NEVER_AFTER).any())
        self.postings = postings  # lexeme -> (positions in this group, contributions)

    def relevance(self, lexemes: tuple[str, ...]) -> np.ndarray | None:
        """1 + ts_rank for the entries any lexeme matches, 0 for the others (None: none matches here)."""
        found = [self.postings[lx] for lx in lexemes if lx in self.postings]
        if not found:
            return None
        rank = np.zeros(len(self.at), np.float32)
        matched = np.zeros(len(self.at), bool)
        for where, what in found:
            # res = res + contribution, the sum in double precision stored back in single (tsrank.c), lexeme by
            # lexeme in the query's order.
            rank[where] = (rank[where].astype(np.float64) + what).astype(np.float32)
            matched[where] = True
        rank = rank / np.float32(len(lexemes))
        return np.where(matched, 1.0 + rank.astype(np.float64), 0.0)

    def valid(self, valid_us: int) -> np.ndarray | None:
        """The group's positions whose entry is valid at ``valid_us`` (None: all of them): valid_from unset or passed,
        valid_until unset or not reached (memory.models.valid_now_q). Time-dependent, so judged on every request."""
        if not self.windowed:
            return None
        return np.nonzero((self.valid_from <= valid_us) & (self.valid_until > valid_us))[0]

    def top(self, n: int, now_us: int, lexemes: tuple[str, ...], valid_us: int) -> list[tuple[int, float]]:
        """The n best valid entries of the group (by score, then most recently updated, then lowest id), as (store
        position, score)."""
        sel = self.valid(valid_us)
        if n <= 0 or not len(self.at) or (sel is not None and not len(sel)):
            return []
        relevance = self.relevance(lexemes) if lexemes else None
        updated = self.updated_us if sel is None else self.updated_us[sel]
        rating_part = self.rating_part if sel is None else self.rating_part[sel]
        delta = now_us - updated
        # now() - updated_at as an interval (whole days and the rest, truncated towards zero as justify_hours does),
        # then date_part('epoch', ...): time / 1e6 + 86400 * days.
        days = np.where(delta >= 0, delta // _US_PER_DAY, -((-delta) // _US_PER_DAY))
        epoch = (delta - days * _US_PER_DAY) / 1000000.0 + 86400.0 * days
        recency = RECENCY_WEIGHT / (1.0 + epoch / (RECENCY_DAYS * 86400.0))
        if relevance is None:
            score = rating_part + recency
        else:
            score = ((relevance if sel is None else relevance[sel]) + rating_part) + recency
        local = np.arange(len(score)) if sel is None else sel
        if len(score) > n:
            # Only what can be among the n best is sorted: the entries at or above the n-th score.
            keep = score >= np.partition(score, len(score) - n)[len(score) - n]
            local, score, updated = local[keep], score[keep], updated[keep]
        order = np.lexsort((self.ids[local], -updated, -score))[:n]
        at = self.at[local[order]]
        return list(zip(at.tolist(), score[order].tolist(), strict=True))


@dataclass
class StoreRanking:
    """One store's (or one team's) active entries, ready to rank, in groups of one scope each."""

    version: tuple
    built_at: float
    rows: list  # (id, key, content, scope_agent, scope_task, version, content_hash, store slug, scope level)
    last_served: list  # last_served_at per entry, moved forward by this process when it marks entries served
    groups: dict  # (scope_agent, scope_task) -> _Group
    position: dict  # entry id -> position

    @classmethod
    def build(cls, version: tuple, fetched: list, postings_rows: list) -> StoreRanking:
        n = len(fetched)
        ids = np.empty(n, np.int64)
        updated = np.empty(n, np.int64)
        rating = np.empty(n, np.float64)
        count = np.empty(n, np.float64)
        group_of = np.empty(n, np.int64)
        valid_from = np.full(n, _NEVER_BEFORE, np.int64)
        valid_until = np.full(n, _NEVER_AFTER, np.int64)
        rows, served, members, index = [], [], {}, {}
        for i, r in enumerate(fetched):
            entry_id, key, content, agent, task, version_, chash, served_at, rating_, count_, updated_at = r[:11]
            starts, ends, slug = r[11:]
            level = (TASK_LEVEL if task is not None else 0) + (AGENT_LEVEL if agent is not None else 0)
            rows.append((entry_id, key, content, agent, task, version_, chash, slug, level))
            served.append(served_at)
            ids[i], updated[i], rating[i], count[i] = entry_id, _us(updated_at), rating_, count_
            if starts is not None:
                valid_from[i] = _us(starts)
            if ends is not None:
                valid_until[i] = _us(ends)
            group_of[i] = index.setdefault((agent, task), len(index))
            members.setdefault((agent, task), []).append(i)
        # In the statement's order: RATING_WEIGHT * rating * n / (n + 1), in double precision.
        rating_part = RATING_WEIGHT * rating * count / (count + 1.0)
        positions = {k: np.asarray(v, np.int64) for k, v in members.items()}
        # An entry's place in its group (groups keep the store's id order).
        local = np.empty(n, np.int64)
        for at in positions.values():
            local[at] = np.arange(len(at))
        by_group: list[dict] = [{} for _ in positions]
        for lexeme, signature, entry_ids in postings_rows:
            wanted = np.asarray(entry_ids, np.int64)
            where = np.searchsorted(ids, wanted)
            found = where < n
            found[found] &= ids[where[found]] == wanted[found]
            where = where[found]  # an entry that changed between the two statements is left to the next version
            contribution = _contribution(signature)
            for g in np.unique(group_of[where]).tolist():
                in_group = where[group_of[where] == g]
                bucket = by_group[g].setdefault(lexeme, ([], []))
                bucket[0].append(local[in_group])
                bucket[1].append(np.full(len(in_group), contribution))
        groups = {}
        for g, (scope, at) in enumerate(positions.items()):
            postings = {k: (np.concatenate(w), np.concatenate(c)) for k, (w, c) in by_group[g].items()}
            groups[scope] = _Group(at, ids, updated, rating_part, valid_from, valid_until, postings)
        return cls(
            version=version,
            built_at=time.monotonic(),
            rows=rows,
            last_served=served,
            groups=groups,
            position={int(entry_id): i for i, entry_id in enumerate(ids)},
        )

    def items(self, chosen: list) -> list[ContextItem]:
        # Positional arguments, in ContextItem's field order: a context request makes some forty of these.
        rows, served = self.rows, self.last_served
        return [
            ContextItem(r[0], r[1], r[7], r[2], r[3], r[4], r[5], r[6], r[8], score, served[i], self)
            for i, score in chosen
            for r in (rows[i],)
        ]


_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()
_SKIPPED = object()  # a store too large to keep


def clear() -> None:
    with _lock:
        _cache.clear()


_frozen = False


def _freeze_once() -> None:
    """Once per process, after its first ranking data is built: everything alive then (the application, the modules
    its first requests imported, the data) is moved out of the cyclic garbage collector's reach. Those objects live
    as long as the process, yet every full collection walked all of them: 70-80 ms pauses every few hundred context
    requests, the agents' API's p99 (bench/api_context.py). Reference counting still frees them; a collection first
    leaves no garbage behind in the frozen set. Later builds need nothing: their rows are tuples of plain values and
    arrays, which the collector stops tracking by itself."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


def _get(cache_key, version: tuple, load) -> StoreRanking | None:
    with _lock:
        current = _cache.get(cache_key)
        if current is not None:
            _cache.move_to_end(cache_key)
    if current is not None and current.version == version:
        return None if current.data is _SKIPPED else current.data
    if current is not None and time.monotonic() - current.built_at < settings.DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S:
        return None  # stale again soon after its build: the statement serves until the interval has passed
    fetched, postings = load()
    too_large = len(fetched) > settings.DREAMWEB_CONTEXT_CACHE_MAX_ENTRIES
    data = _SKIPPED if too_large else StoreRanking.build(version, fetched, postings)
    _freeze_once()
    with _lock:
        _cache[cache_key] = _Slot(version, time.monotonic(), data)
        _cache.move_to_end(cache_key)
        while len(_cache) > settings.DREAMWEB_CONTEXT_CACHE_STORES:
            _cache.popitem(last=False)
    return None if data is _SKIPPED else data


@dataclass
class _Slot:
    version: tuple
    built_at: float
    data: object


class StoreRef(NamedTuple):
    """A store as the ranking and the audit need it: its id and slug (read with the ranking's check)."""

    pk: int
    slug: str


class Also:
    """A scalar SQL expression (and its parameters) read by the ranking's check statement, so that a caller's own
    per-request question costs no round trip (the context's skills index fingerprint). ``value`` holds the answer
    and ``read`` says whether the check statement ran (not on SQLite, nor when nothing is ranked)."""

    def __init__(self, sql: str, params: list):
        self.sql, self.params = sql, params
        self.value, self.read = None, False


def _also_sql(also: Also | None) -> tuple[str, list]:
    return (also.sql, also.params) if also is not None else ("NULL", [])


def _cached() -> bool:
    return connection.vendor == "postgresql" and bool(settings.DREAMWEB_CONTEXT_CACHE_STORES)


def slug_check_in(team_column: str, slug: str, query: str, also: Also | None) -> tuple[str, str, list] | None:
    """The check of ``ranked_entries_in`` as columns and a join of another statement whose row names the team in
    ``team_column`` (the key's statement: memory.api.context), and their parameters; None when the ranking does not
    use the process's data. The row read so is given back to ``ranked_entries_in`` as ``checked``."""
    if not _cached():
        return None
    query = (query or "").strip()
    also_sql, also_params = _also_sql(also)
    columns = _CHECK_SLUG_COLUMNS.format(tsquery=_TSQUERY if query else "NULL", also=also_sql)
    return columns, _CHECK_SLUG_JOIN.format(team=team_column), [*([query] if query else []), *also_params, slug]


def ranked_entries_in(
    key,
    slug: str,
    *,
    agent=None,
    task=None,
    query: str = "",
    limit: int,
    also: Also | None = None,
    checked: tuple | None = None,
) -> tuple[StoreRef | None, list[ContextItem]]:
    """The store of the key's team with this slug (None when there is none: nothing is ranked) and its ``limit`` best
    entries, as ``ranked_entries`` ranks them. On PostgreSQL the store is found by the ranking's own check statement,
    or ``checked`` is that statement's row, already read in this transaction with ``slug_check_in``'s columns (the
    same slug, query and ``also``)."""
    query = (query or "").strip()
    if checked is not None and _cached():
        return _ranked_after_check(key, slug, checked, agent=agent, task=task, query=query, limit=limit, also=also)
    if not _cached() or limit <= 0:
        with connection.cursor() as cursor:
            cursor.execute(_FIND_SLUG, [key.team_id, slug])
            row = cursor.fetchone()
        if row is None:
            return None, []
        store = _store_object(row[0], slug)
        return store, ranked_entries(key, store=store, agent=agent, task=task, query=query, limit=limit)
    tsquery = _TSQUERY if query else "NULL"
    also_sql, also_params = _also_sql(also)
    with prepared.cursor() as cursor:
        cursor.execute(
            _CHECK_SLUG.format(tsquery=tsquery, also=also_sql),
            [*([query] if query else []), *also_params, key.team_id, slug],
        )
        checked = cursor.fetchone()
    return _ranked_after_check(key, slug, checked, agent=agent, task=task, query=query, limit=limit, also=also)


def _ranked_after_check(key, slug, checked, *, agent, task, query, limit, also) -> tuple[StoreRef | None, list]:
    now, version, stores, tsquery_text, store_id, also_value = checked
    if also is not None:
        also.value, also.read = also_value, True
    if store_id is None:
        return None, []
    store = StoreRef(store_id, slug)
    if limit <= 0:
        return store, []
    return store, _rank(
        key, store, now, version, stores, tsquery_text, agent=agent, task=task, query=query, limit=limit
    )


def _store_object(store_id: int, slug: str):
    # SQLite's ranking filters with the ORM, which takes a model instance; PostgreSQL's statements take the ref.
    if connection.vendor == "postgresql":
        return StoreRef(store_id, slug)
    return MemoryStore(pk=store_id, slug=slug)


def ranked_entries(
    key, *, store=None, agent=None, task=None, query: str = "", limit: int, also: Also | None = None
) -> list[ContextItem]:
    """The ``limit`` best entries of the key's team (of ``store`` when given) for this agent, task and query, best
    first (memory.ranking's rule): from the process's ranking data when it is ready and current, otherwise from the
    ranking statement."""
    if limit <= 0:
        return []
    query = (query or "").strip()
    if not _cached():
        return ranked_by_statement(key, store=store, agent=agent, task=task, query=query, limit=limit)
    team_id = key.team_id
    tsquery = _TSQUERY if query else "NULL"
    also_sql, also_params = _also_sql(also)
    words = [query] if query else []
    with prepared.cursor() as cursor:
        if store is not None:
            sql, params = _CHECK_STORE, [store.pk, team_id, *words, *also_params]
        else:
            sql, params = _CHECK_TEAM, [team_id, team_id, *words, *also_params]
        cursor.execute(sql.format(tsquery=tsquery, also=also_sql), params)
        now, version, stores, tsquery_text, _, also_value = cursor.fetchone()
    if also is not None:
        also.value, also.read = also_value, True
    return _rank(key, store, now, version, stores, tsquery_text, agent=agent, task=task, query=query, limit=limit)


def _rank(key, store, now, version, stores, tsquery_text, *, agent, task, query: str, limit: int) -> list[ContextItem]:
    """The ranking from the process's data, once the check statement has said the store's version, the clock and
    the query's lexemes (the statement when the data is not ready or the query is not a plain OR of lexemes)."""
    team_id = key.team_id
    lexemes = query_lexemes(tsquery_text)
    if version is None or lexemes is None:
        return ranked_by_statement(key, store=store, agent=agent, task=task, query=query, limit=limit)

    def load() -> tuple[list, list]:
        where = "AND e.store_id = %s" if store is not None else ""
        params = [team_id, EntryStatus.ACTIVE.value, *([store.pk] if store is not None else [])]
        with connection.cursor() as cursor:
            cursor.execute(_LOAD.format(store=where), params)
            rows = cursor.fetchall()
            cursor.execute(_POSTINGS.format(store=where), params)
            return rows, cursor.fetchall()

    data = _get((team_id, store.pk if store is not None else None), (version, stores), load)
    if data is None:
        return ranked_by_statement(key, store=store, agent=agent, task=task, query=query, limit=limit)
    now_us = _us(now)
    # The validity window is judged by this process's clock, as the ranking statement judges it.
    valid_us = _us(timezone.now())
    # Scope level first (task and agent, task, agent, store-wide), and each (agent, task) group is one level: the best
    # of each group in turn, until the limit is filled, are the best of all of them.
    if agent and task:
        groups = [(agent, task), (None, task), (agent, None)]
    else:
        groups = [(agent, task)] if agent or task else []
    chosen: list = []
    for scope in [*groups, (None, None)]:
        group = data.groups.get(scope)
        if group is not None and len(chosen) < limit:
            chosen += group.top(limit - len(chosen), now_us, lexemes, valid_us)
    return data.items(chosen)


def note_served(items: list[ContextItem], now) -> None:
    """The entries just marked served: this process's copy of last_served_at follows, so the next request within the
    minute does not try to mark them again."""
    for item in items:
        if isinstance(item.source, StoreRanking):
            i = item.source.position.get(item.entry_id)
            if i is not None:
                item.source.last_served[i] = now
