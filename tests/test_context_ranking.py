# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The context ranking on PostgreSQL ranks scope levels apart (scoped entries through indexes, store-wide entries
only when needed): it must return exactly what one query over every eligible entry returns. Plus the fixed cost of
a context request in SQL queries, and no scope carried from one key's request to another's on a kept connection."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.expressions import RawSQL
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dreamweb.models import AgentKey
from memory import ranking as ctx
from memory import ranking_cache
from memory.models import ContextServe, EntryStatus, MemoryEntry
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory, make_entry, make_skill
from tests.scoping import all_teams

pytestmark = pytest.mark.django_db

WORDS = [
    "deploy",
    "release",
    "migration",
    "database",
    "cache",
    "retry",
    "timeout",
    "token",
    "budget",
    "branch",
    "merge",
    "review",
    "lint",
    "docker",
]
AGENTS = ["a0", "a1", "a2"]
TASKS = ["t0", "t1", "t2"]


def _reference(key, *, store, agent, task, query, limit):
    """The first implementation: every eligible entry scored in one query, then cut to ``limit``."""
    qs = ctx.eligible_entries(key, store=store, agent=agent, task=task)
    sql, params = (f"({ctx._PG_RELEVANCE}) + {ctx._PG_REST}", [query, query]) if query else (ctx._PG_REST, [])
    rows = (
        qs.annotate(score=RawSQL(sql, params))  # noqa: S611 - constant SQL, the query is a parameter
        .order_by("-scope_rank", "-score", "-updated_at", "id")
        .values("id", "scope_rank", "score", "store__slug")[:limit]
    )
    return [(r["id"], r["scope_rank"], r["score"], r["store__slug"]) for r in rows]


@pytest.mark.skipif(not is_postgres(), reason="the level-by-level ranking is the PostgreSQL path")
@pytest.mark.all_teams
def test_level_by_level_ranking_equals_one_query_over_every_eligible_entry(world):
    rng = random.Random(11)
    now = timezone.now()
    other_store = StoreFactory(team=world.team_a, slug="docs")
    for i in range(240):
        r = rng.random()
        entry = make_entry(
            world.store_a if i % 5 else other_store,
            key=f"e{i:03d}",
            content=" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 15))),
            scope_agent=rng.choice(AGENTS) if r < 0.35 else None,
            scope_task=rng.choice(TASKS) if 0.25 < r < 0.55 else None,
        )
        MemoryEntry.objects.filter(pk=entry.pk).update(
            updated_at=now - timedelta(days=rng.choice([0, 0, 3, 40, 200])),  # ties on purpose
            rating=rng.choice([0.0, 0.0, 0.5, -0.5, 1.0]),
            rating_count=rng.randint(0, 4),
            status=EntryStatus.ARCHIVED
            if i % 17 == 0
            else EntryStatus.SUPERSEDED
            if i % 19 == 0
            else EntryStatus.ACTIVE,
            # Validity windows: expired, not yet valid, valid for a while, and started in the past.
            valid_until=now - timedelta(hours=1) if i % 11 == 0 else now + timedelta(days=5) if i % 7 == 0 else None,
            valid_from=now + timedelta(days=1) if i % 13 == 0 else now - timedelta(days=2) if i % 9 == 0 else None,
        )
    make_entry(world.store_b, key="b-only", content="deploy cache", scope_agent="a0")
    make_key(world.team_a, name="ranker")
    key = AgentKey.objects.get(team=world.team_a, name="ranker")
    compared = 0
    for store in (world.store_a, None):
        for agent in (None, "a0", "a2", "nobody"):
            for task in (None, "t1", "nothing"):
                for query in ("", "deploy", "cache retry timeout", "xyzzy"):
                    for limit in (1, 7, 40, 500):
                        want = _reference(key, store=store, agent=agent, task=task, query=query, limit=limit)
                        for rank in (ctx.ranked_by_statement, ranking_cache.ranked_entries):
                            got = rank(key, store=store, agent=agent, task=task, query=query, limit=limit)
                            assert [(i.entry_id, i.scope_rank, i.score, i.store) for i in got] == want, (
                                rank.__name__,
                                store,
                                agent,
                                task,
                                query,
                                limit,
                            )
                            compared += 1
    assert compared == 2 * 2 * 4 * 3 * 4 * 4


@pytest.mark.all_teams
def test_context_request_costs_a_fixed_number_of_queries(world, keys):
    for i in range(30):
        make_entry(world.store_a, key=f"k{i}", content=f"deploy lesson {i}", scope_agent="bot" if i % 2 else None)
    make_skill(world.team_a, name="release", description="How to release.")
    api = Api(keys.full)
    url = "/api/v1/context/"
    query = {"store": "eng", "agent": "bot", "task": "release", "query": "deploy", "max_items": 20}
    assert api.get(url, query=query).status_code == 200  # marks the entries served and the key used
    with CaptureQueriesContext(connection) as captured:
        r = api.get(url, query=query)
    assert r.status_code == 200 and len(r.json()["items"]) == 20
    sqls = [q["sql"] for q in captured.captured_queries]
    # Key lookup with its scope switch, store, ranking, skills index, the audit row;
    # no last_served_at or last_used_at write within their minute. Api() reads and empties the scope before the
    # request and gives it back after it (three statements).
    assert not [s for s in sqls if "last_served_at" in s and s.lstrip().upper().startswith("UPDATE")], sqls
    assert not [s for s in sqls if "last_used_at" in s and s.lstrip().upper().startswith("UPDATE")], sqls
    assert sum(1 for s in sqls if "INSERT INTO" in s and "memory_contextserve" in s) == 1
    data = [
        s for s in sqls if not s.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "SELECT set_config", "SELECT current_"))
    ]
    # PostgreSQL: the key, with the ranking's check in the same statement (the store found by its slug, its version,
    # the clock, the query's lexemes and the skills index's fingerprint; the ranking data and the index being ready
    # in the process: memory.ranking_cache, skills_registry.index), then the audit row. SQLite: the key, the store,
    # the ranking statement, skills, the audit row.
    assert len(data) == (2 if is_postgres() else 5), "\n".join(data)
    if is_postgres():
        assert "memory_memorystore" in data[0] and "skills_registry_skill" in data[0] and "prefix" in data[0]
    # With the scope switches (PostgreSQL) and the test transaction's savepoints: a fixed total.
    assert len(sqls) <= (14 if is_postgres() else 9), "\n".join(sqls)


@pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature")
@pytest.mark.django_db(transaction=True)
def test_no_scope_carried_between_keys_on_a_kept_connection(fast_passwords):
    """Each request's team scope lives in its own transaction: on one connection, kept open across requests (as
    with CONN_MAX_AGE), alternating keys of two teams each see only their own team."""
    with all_teams():
        teams = [TeamFactory(slug="keep-a"), TeamFactory(slug="keep-b")]
        for team in teams:
            store = StoreFactory(team=team, slug="eng")
            for n in range(3):
                make_entry(store, key=f"{team.slug}-{n}", content="shared words deploy")
        raws = [make_key(team, name="k") for team in teams]
    with connection.cursor() as c:
        c.execute("SELECT set_config('dreamweb.team_ids', '', false)")
    kept = connection.connection
    for n in range(6):
        team, raw = teams[n % 2], raws[n % 2]
        r = Api(raw).get("/api/v1/context/", query={"store": "eng", "query": "deploy"})
        assert r.status_code == 200
        assert {i["key"].rsplit("-", 1)[0] for i in r.json()["items"]} == {team.slug}
        assert connection.connection is kept and not connection.in_atomic_block
        with connection.cursor() as c:
            c.execute("SELECT coalesce(current_setting('dreamweb.team_ids', true), ''), count(*) FROM dreamweb_team")
            assert c.fetchone() == ("", 0)
            # The serve's transaction committed without waiting for the WAL flush; the next one waits again.
            c.execute("SELECT current_setting('synchronous_commit')")
            assert c.fetchone() == ("on",)
    with all_teams():
        assert ContextServe.objects.filter(team__in=teams).count() == 6
