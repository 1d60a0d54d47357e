"""The skills index a context request lists, kept per worker process and team, keyed by a fingerprint of its content.

Every context request lists the team's published skills (name, description, version). On PostgreSQL the request
reads ``fingerprint_sql``'s value inside the ranking's check statement (memory.ranking_cache: no round trip of its
own): an md5 (a fingerprint, not a secret) over exactly what the index holds, every published skill's name, version
and description, in name order, each field length-prefixed so that two different indexes never spell the same text.
``published_index_at`` then answers from this process's copy when it was read at that fingerprint, and reads the
index again otherwise.

Nothing has to remember to invalidate it: the fingerprint is computed by the database from the rows themselves, so
publishing, unpublishing, editing, renaming or deleting a skill, in any process, by any path (service, admin, raw
SQL), changes what the next request reads. Row-level security applies to the fingerprint's sub-select as to any
query, and the copy is kept per team id: a team is only ever answered from its own copy.

The cost is linear in the size of the index (the database hashes it on every request): fine for the tens of skills
a team lists in a prompt; a counter moved by triggers would make it constant if teams ever publish thousands.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from django.db import connection

from .models import SkillStatus

# Teams whose index a process keeps (least recently used dropped first).
MAX_TEAMS = 1024

# The team is a parameter, or a column of the statement it is read in (``{team}``).
_FINGERPRINT = (
    "(SELECT md5(coalesce(string_agg(length(sk.name) || ':' || sk.name || ' ' || sk.version || ' '"
    " || length(sk.description) || ':' || sk.description, ' ' ORDER BY sk.name), ''))"
    " FROM skills_registry_skill sk WHERE sk.team_id = {team} AND sk.status = %s)"
)
# Constant text; every value is a parameter.
_LOAD = 'SELECT "name", "description", "version", ' + _FINGERPRINT.format(team="%s") + ' FROM "skills_registry_skill"'  # noqa: S608
_LOAD += ' WHERE "team_id" = %s AND "status" = %s ORDER BY "name"'
# What the fingerprint is when the team has no published skill (the statement then returns no row to carry it).
_EMPTY = hashlib.md5(b"", usedforsecurity=False).hexdigest()

_cache: OrderedDict[int, tuple[str, list[dict]]] = OrderedDict()
_lock = threading.Lock()


def fingerprint_sql(team_id: int) -> tuple[str, list]:
    """A scalar SQL expression and its parameters: the fingerprint of the team's published index."""
    return _FINGERPRINT.format(team="%s"), [team_id, SkillStatus.PUBLISHED.value]


def fingerprint_sql_of(team_column: str) -> tuple[str, list]:
    """The same, for the team named by a column of the statement it is read in (the key's: dreamweb.api_auth)."""
    return _FINGERPRINT.format(team=team_column), [SkillStatus.PUBLISHED.value]


def published_index_at(team_id: int, fingerprint: str) -> list[dict]:
    """The team's published index, as skills_registry.services.published_index reads it, given its fingerprint as
    read in this transaction. The list is shared between requests: callers must not change it."""
    with _lock:
        hit = _cache.get(team_id)
        if hit is not None:
            _cache.move_to_end(team_id)
    if hit is not None and hit[0] == fingerprint:
        return hit[1]
    with connection.cursor() as cursor:
        cursor.execute(_LOAD, [team_id, SkillStatus.PUBLISHED.value, team_id, SkillStatus.PUBLISHED.value])
        rows = cursor.fetchall()
    index = [{"name": n, "description": d, "version": v} for n, d, v, _ in rows]
    # Kept under the fingerprint read with the rows (newer than the one asked for if a skill changed in between).
    with _lock:
        _cache[team_id] = (rows[0][3] if rows else _EMPTY, index)
        _cache.move_to_end(team_id)
        while len(_cache) > MAX_TEAMS:
            _cache.popitem(last=False)
    return index


def clear() -> None:
    with _lock:
        _cache.clear()
