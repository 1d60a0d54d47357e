# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The context ranking's check read by the API key's own statement (dreamweb.api_auth.KeyStatementExtra,
memory.api.context): a key the database's gate refuses is never answered from the refused row, a wrong secret makes
the database read nothing of the team's, odd query strings never serve another store or team, refused keys all get
the same answer, and the fold answers what the separate check answers. Written as an adversarial review of the
change; the first two tests failed on it (the gate's verdict was not returned)."""

from __future__ import annotations

import json
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dreamweb import api_auth
from dreamweb.models import AgentKey, hash_key
from memory import ranking_cache
from memory.context import check_in_statement
from tests.api_support import Api, fast_passwords, make_key  # noqa: F401 - fixtures
from tests.conftest import is_postgres
from tests.factories import StoreFactory, make_entry, make_skill

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not is_postgres(), reason="the key statement's extra columns are read on PostgreSQL only"),
]


def _items(r):
    assert r.status_code == 200, (r.status_code, r.content[:300])
    return [(i["store"], i["key"], i["content"]) for i in r.json()["items"]]


def _db_now():
    with connection.cursor() as c:
        c.execute("SELECT now()")
        return c.fetchone()[0]


# ---------------------------------------------------------------------------------------------------------------
# The gate's verdict is what `extra.read` says: a refused row (all NULL) must not read as "no such store" (404) when
# the database's gate and authenticate disagree (they judge expiry by different clocks: the database's
# transaction-start now() and the app server's timezone.now()).
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.all_teams
def test_key_accepted_by_authenticate_but_gated_out_in_sql_is_not_served_a_false_404(world, fast_passwords):
    """App server clock a little behind the database's (clock skew) and a key at the edge of its expiry:
    authenticate accepts the key (Python clock), the SQL gate (database now()) refuses it: the view must take the
    separate check, not answer 404 'No store' for a store that exists."""
    raw = make_key(world.team_a, name="edge")
    make_entry(world.store_a, key="lesson", content="deploy with make release")
    db_now = _db_now()
    AgentKey.objects.filter(team=world.team_a, name="edge").update(expires_at=db_now - timedelta(seconds=1))
    skewed = db_now - timedelta(seconds=5)  # the app server's clock, 5 s behind the database's
    with mock.patch("dreamweb.api_auth.timezone.now", return_value=skewed):
        r = Api(raw).get("/api/v1/context/", query={"store": world.store_a.slug, "query": "deploy"})
    # Either answer is defensible (accepted: 200 with the entry; refused: 401), a 404 for an existing store is not.
    assert r.status_code != 404, r.json()


@pytest.mark.all_teams
def test_a_gated_out_read_is_not_reported_as_read(world, fast_passwords):
    """The unit form of the above: for a wrong secret nothing is read, and it says so (a caller must be able to tell
    'read: the store does not exist' from 'not read: gated out')."""
    raw = make_key(world.team_a, name="gated")
    pieces = check_in_statement(api_auth.KEY_TEAM_COLUMN, world.store_a.slug, "deploy", True)
    assert pieces is not None
    extra = api_auth.KeyStatementExtra(*pieces)
    with transaction.atomic():
        api_auth._lookup(api_auth.parse_prefix(raw), extra, hash_key(raw + "x"))
    assert all(v is None for v in extra.values)
    assert not extra.read, "a read the gate refused is reported as read (its NULL store id means 404 to the view)"


# ---------------------------------------------------------------------------------------------------------------
# The docstring's claim: "for a wrong secret the database reads nothing of the team's (no answer, and no timing,
# depends on its data)". Checked on the executed plan.
# ---------------------------------------------------------------------------------------------------------------


def _plan_nodes(plan, out):
    out.append(plan)
    for p in plan.get("Plans", []):
        _plan_nodes(p, out)
    return out


@pytest.mark.all_teams
def test_wrong_secret_executes_no_read_of_the_teams_stores_or_skills(world, fast_passwords):
    raw = make_key(world.team_a, name="victim")
    for i in range(30):
        make_skill(world.team_a, name=f"skill-{i}", description="d" * 200)

    def touched(presented):
        pieces = check_in_statement(api_auth.KEY_TEAM_COLUMN, world.store_a.slug, "deploy", True)
        extra = api_auth.KeyStatementExtra(*pieces)
        with transaction.atomic(), CaptureQueriesContext(connection) as ctx:
            api_auth._lookup(api_auth.parse_prefix(raw), extra, presented)
        sql = next(q["sql"] for q in ctx.captured_queries if "LATERAL" in q["sql"])
        with transaction.atomic(), connection.cursor() as c:
            api_auth.rls.enter_key_scope(api_auth.parse_prefix(raw))
            c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql.replace("%", "%%"))
            plan = c.fetchone()[0]
        plan = plan if isinstance(plan, list) else json.loads(plan)
        return [
            (n.get("Node Type"), n.get("Relation Name"), n.get("Actual Loops"), n.get("Actual Rows"))
            for n in _plan_nodes(plan[0]["Plan"], [])
            if n.get("Relation Name") in ("memory_memorystore", "skills_registry_skill") and n.get("Actual Loops", 0)
        ]

    # The accepted key reads both tables (the measure works) ...
    assert {t[1] for t in touched(hash_key(raw))} == {"memory_memorystore", "skills_registry_skill"}
    # ... a wrong secret executes neither read (passes: the gate is a one-time filter above the reads).
    assert touched(hash_key(raw + "x")) == []


# ---------------------------------------------------------------------------------------------------------------
# Attacks that fail (documenting tests).
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.all_teams
@override_settings(DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S=0)
def test_duplicated_and_odd_parameters_never_serve_another_store_or_team(world, fast_passwords):
    raw = make_key(world.team_a, name="a")
    make_entry(world.store_a, key="a-entry", content="deploy team a")
    make_entry(world.store_b, key="b-entry", content="deploy team b")
    other_a = StoreFactory(team=world.team_a, slug="other")
    make_entry(other_a, key="other-entry", content="deploy other store")
    ranking_cache.clear()
    api = Api(raw)
    eng = _items(api.get("/api/v1/context/", query={"store": "eng", "query": "deploy"}))
    assert {s for s, *_ in eng} == {"eng"}
    other = _items(api.get("/api/v1/context/", query={"store": "other", "query": "deploy"}))
    assert {s for s, *_ in other} == {"other"}
    # store twice (either order), query twice, skills twice: the served store is the one parsed (the last)
    for qs, want in [
        ("store=eng&store=other&query=deploy", other),
        ("store=other&store=eng&query=deploy", eng),
        ("store=eng&query=nothing&query=deploy", eng),
        ("store=eng&query=deploy&skills=false&skills=true", eng),
        ("store=%65ng&query=deploy", eng),  # percent-encoded slug
        ("store=eng%20&query=deploy", eng),  # trailing space: trimmed by both paths
        ("store=+eng&query=deploy", eng),
    ]:
        r = api.client.get(f"/api/v1/context/?{qs}", HTTP_AUTHORIZATION=f"Api-Key {raw}")
        assert _items(r) == want, qs
    # another team's slug: 404, never its entries
    r = api.client.get("/api/v1/context/?store=ops&query=deploy", HTTP_AUTHORIZATION=f"Api-Key {raw}")
    assert r.status_code == 404
    r = api.client.head("/api/v1/context/?store=eng&query=deploy", HTTP_AUTHORIZATION=f"Api-Key {raw}")
    assert r.status_code == 200
    r = api.client.get("/api/v1/context/?store=nope&query=deploy", HTTP_AUTHORIZATION=f"Api-Key {raw}")
    assert r.status_code == 404


@pytest.mark.all_teams
def test_refused_keys_answer_the_same_whatever_the_store(world, fast_passwords):
    raw = make_key(world.team_a, name="a")
    revoked = make_key(world.team_a, name="revoked")
    AgentKey.objects.filter(team=world.team_a, name="revoked").update(revoked_at=timezone.now())
    bodies = set()
    for key in (raw[:-1] + ("x" if raw[-1] != "x" else "y"), "dw_nosuchprefix_secret"):
        for store in ("eng", "ops", "nope"):
            r = Api(key).get("/api/v1/context/", query={"store": store, "query": "deploy"})
            assert r.status_code == 401
            bodies.add(r.content)
    assert len(bodies) == 1
    for store in ("eng", "nope"):
        assert Api(revoked).get("/api/v1/context/", query={"store": store}).status_code == 401


@pytest.mark.all_teams
@override_settings(DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S=0)
def test_check_path_answers_as_the_serializer_path(world, fast_passwords):
    """max_items=0, skills=false, a key without skills:read: the key-statement check answers what the separate
    check (serializer path: max_items=' N') answers."""
    make_skill(world.team_a, name="release", description="how to release")
    make_entry(world.store_a, key="lesson", content="deploy with make release")
    full = make_key(world.team_a, name="full")
    noskills = make_key(world.team_a, name="noskills", scopes=["memory:read"])
    ranking_cache.clear()
    for raw in (full, noskills):
        for extra in ({}, {"skills": "false"}, {"max_items": "0"}, {"max_items": "0", "skills": "false"}):
            q = {"store": "eng", "query": "deploy", **extra}
            fast = Api(raw).get("/api/v1/context/", query=q).json()
            slow_q = {**q, "max_items": " " + q.get("max_items", "20")}
            slow = Api(raw).get("/api/v1/context/", query=slow_q).json()
            if "max_items" not in extra:
                slow = Api(raw).get("/api/v1/context/", query={**q, "max_tokens": " 100000"}).json()
                fast = Api(raw).get("/api/v1/context/", query={**q, "max_tokens": "100000"}).json()
            for body in (fast, slow):
                body.pop("serve_id", None)
            assert fast == slow, (raw == full, extra)
            if raw == noskills:
                assert not fast["skills"]


@pytest.mark.all_teams
def test_a_key_without_memory_read_gets_its_403_and_reads_nothing_of_the_teams(world, fast_passwords):
    """The permission refuses it after authentication; the gate must have refused the check already, so that such
    a key (an ingest-only key, say) makes the database read none of the team's stores or skills."""
    raw = make_key(world.team_a, name="ingest-only", scopes=["sessions:write"])
    make_entry(world.store_a, key="lesson", content="deploy from main")
    with CaptureQueriesContext(connection) as ctx:
        r = Api(raw).get("/api/v1/context/", {"store": world.store_a.slug, "query": "deploy"})
    assert r.status_code == 403 and "memory:read" in r.json()["detail"]
    lateral = [q["sql"] for q in ctx.captured_queries if "LATERAL" in q["sql"]]
    assert len(lateral) == 1  # the fold was asked for (the measure works) ...
    assert "scopes" in lateral[0]  # ... with the scope in its gate
    with transaction.atomic(), connection.cursor() as c:
        api_auth.rls.enter_key_scope(api_auth.parse_prefix(raw))
        c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + lateral[0].replace("%", "%%"))
        plan = c.fetchone()[0]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    read = [
        n.get("Relation Name")
        for n in _plan_nodes(plan[0]["Plan"], [])
        if n.get("Relation Name") in ("memory_memorystore", "skills_registry_skill") and n.get("Actual Loops", 0)
    ]
    assert read == []
