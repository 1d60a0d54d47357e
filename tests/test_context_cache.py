# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The ranking data a worker process keeps per store (memory.ranking_cache): after every kind of change to the
entries it serves what the ranking statement serves, it never serves one team's entries to another, and a change
that the ranking does not read (last_served_at) keeps it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from dreamweb.models import AgentKey
from dreamweb.provenance import Author
from memory import ranking, ranking_cache
from memory.feedback import record_feedback
from memory.models import MemoryEntry
from memory.services import archive_entry, restore_entry, update_entry
from tests.api_support import Api, fast_passwords, make_key  # noqa: F401 - fixtures
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory, make_entry
from tests.scoping import all_teams

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not is_postgres(), reason="the cache is kept on PostgreSQL only (SQLite runs the statement)"),
]

SHAPES = [
    dict(agent=None, task=None, query=""),
    dict(agent=None, task=None, query="deploy cache"),
    dict(agent="a0", task="t0", query="deploy"),
    dict(agent="a0", task=None, query="retry timeout"),
]


def _version(store) -> int:
    with connection.cursor() as c:
        c.execute("SELECT content_version FROM memory_memorystore WHERE id = %s", [store.pk])
        return c.fetchone()[0]


def _same_as_statement(key, store):
    """Every shape, on the store and on the whole team: the cache's answer is the statement's, scores included."""
    for where in (store, None):
        for shape in SHAPES:
            got = ranking_cache.ranked_entries(key, store=where, limit=30, **shape)
            want = ranking.ranked_by_statement(key, store=where, limit=30, **shape)
            assert [(i.entry_id, i.key, i.content, i.version, i.score) for i in got] == [
                (i.entry_id, i.key, i.content, i.version, i.score) for i in want
            ], (where, shape)


@pytest.mark.all_teams
@override_settings(DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S=0)
def test_every_change_the_ranking_reads_is_served_at_once(world):
    make_key(world.team_a, name="reader")
    key = AgentKey.objects.get(team=world.team_a, name="reader")
    entries = [
        make_entry(world.store_a, key=f"e{i}", content=f"deploy cache lesson {i}", scope_agent="a0" if i % 3 else None)
        for i in range(12)
    ]
    other = StoreFactory(team=world.team_a, slug="docs")
    make_entry(other, key="doc", content="retry timeout deploy")
    ranking_cache.clear()
    _same_as_statement(key, world.store_a)
    data = ranking_cache._cache[(world.team_a.pk, world.store_a.pk)].data
    author = Author.system()

    changes = [
        lambda: make_entry(world.store_a, key="new", content="deploy cache retry timeout, new"),
        lambda: update_entry(entries[0], base_version=1, author=author, content="retry retry retry"),
        lambda: update_entry(entries[1], base_version=1, author=author, scope_agent="a0", scope_task="t0"),
        lambda: archive_entry(entries[2], base_version=1, author=author),
        lambda: restore_entry(MemoryEntry.objects.get(pk=entries[2].pk), base_version=2, author=author),
        lambda: record_feedback(entries[3], helpful=False),
        lambda: MemoryEntry.objects.filter(pk=entries[4].pk).update(updated_at=timezone.now() - timedelta(days=90)),
        lambda: MemoryEntry.objects.filter(pk=entries[5].pk).delete(),
        lambda: make_entry(other, key="doc-2", content="deploy cache everywhere"),
    ]
    for change in changes:
        before = _version(world.store_a), _version(other)
        change()
        assert (_version(world.store_a), _version(other)) != before
        _same_as_statement(key, world.store_a)
    assert ranking_cache._cache[(world.team_a.pk, world.store_a.pk)].data is not data  # rebuilt, not bypassed


@pytest.mark.all_teams
def test_marking_entries_served_keeps_the_version_and_the_data(world):
    make_key(world.team_a, name="reader")
    key = AgentKey.objects.get(team=world.team_a, name="reader")
    for i in range(5):
        make_entry(world.store_a, key=f"e{i}", content="deploy")
    ranking_cache.clear()
    from memory.context import build_context

    first = build_context(key, store=world.store_a, query="deploy")
    version = _version(world.store_a)
    data = ranking_cache._cache[(world.team_a.pk, world.store_a.pk)].data
    assert MemoryEntry.objects.filter(store=world.store_a, last_served_at__isnull=False).count() == 5
    second = build_context(key, store=world.store_a, query="deploy")
    assert _version(world.store_a) == version
    assert ranking_cache._cache[(world.team_a.pk, world.store_a.pk)].data is data
    assert [i.entry_id for i in first.items] == [i.entry_id for i in second.items]
    # The process's copy of last_served_at moved with the write: the second serve marks nothing again.
    assert all(i.last_served_at is not None for i in second.items)


@pytest.mark.all_teams
def test_a_rolled_back_write_is_not_served(world):
    make_key(world.team_a, name="reader")
    key = AgentKey.objects.get(team=world.team_a, name="reader")
    make_entry(world.store_a, key="kept", content="deploy")
    ranking_cache.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        make_entry(world.store_a, key="ghost", content="deploy deploy deploy")
        assert "ghost" in [i.key for i in ranking_cache.ranked_entries(key, store=world.store_a, limit=5)]
        raise RuntimeError
    assert [i.key for i in ranking_cache.ranked_entries(key, store=world.store_a, query="deploy", limit=5)] == ["kept"]
    assert [i.key for i in ranking_cache.ranked_entries(key, store=None, query="deploy", limit=5)] == ["kept"]


@pytest.mark.all_teams
def test_a_key_never_gets_another_teams_cached_store(world):
    """The cache is keyed by team and store, and its check names the key's team: a store of team A, cached for A's
    key, asked for with B's key (as no view would), gives B nothing, and the whole-team shape gives each its own."""
    for team, store in ((world.team_a, world.store_a), (world.team_b, world.store_b)):
        make_key(team, name="reader")
        for i in range(4):
            make_entry(store, key=f"{team.slug}-{i}", content="deploy cache shared words")
    key_a = AgentKey.objects.get(team=world.team_a, name="reader")
    key_b = AgentKey.objects.get(team=world.team_b, name="reader")
    ranking_cache.clear()
    assert {i.key[:6] for i in ranking_cache.ranked_entries(key_a, store=world.store_a, limit=10)} == {"team-a"}
    assert ranking_cache.ranked_entries(key_b, store=world.store_a, limit=10) == []
    for _ in range(2):
        for key, slug in ((key_a, "team-a"), (key_b, "team-b")):
            assert {i.key[:6] for i in ranking_cache.ranked_entries(key, store=None, query="deploy", limit=10)} == {
                slug
            }


@pytest.mark.all_teams
def test_the_statement_serves_when_the_data_is_not_kept(world):
    make_key(world.team_a, name="reader")
    key = AgentKey.objects.get(team=world.team_a, name="reader")
    entries = [make_entry(world.store_a, key=f"e{i}", content=f"deploy {i}") for i in range(6)]
    ranking_cache.clear()
    with override_settings(DREAMWEB_CONTEXT_CACHE_MAX_ENTRIES=3):
        _same_as_statement(key, world.store_a)  # too large to keep
    ranking_cache.clear()
    with override_settings(DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S=3600):
        _same_as_statement(key, world.store_a)
        update_entry(entries[0], base_version=1, author=Author.system(), content="changed at once")
        _same_as_statement(key, world.store_a)  # changed again within the interval: the statement serves
    with override_settings(DREAMWEB_CONTEXT_CACHE_STORES=0):
        _same_as_statement(key, world.store_a)
    # A query PostgreSQL does not turn into lexemes joined by | only: the statement serves it.
    assert ranking_cache.query_lexemes("'deploy' <-> 'cach'") is None
    assert ranking_cache.query_lexemes("'deploy' | 'it''s' | 'cach'") == ("cach", "deploy", "it's")
    assert ranking_cache.query_lexemes("") == ()


@pytest.mark.django_db(transaction=True)
def test_api_alternating_teams_with_the_same_store_slug(fast_passwords):
    """Through the API, under row-level security, on one kept connection: two teams with a store of the same slug,
    alternately, each get their own entries, in the store and team-wide shapes, and every serve is recorded."""
    with all_teams():
        teams = [TeamFactory(slug="cache-a"), TeamFactory(slug="cache-b")]
        for team in teams:
            store = StoreFactory(team=team, slug="eng")
            for n in range(3):
                make_entry(store, key=f"{team.slug}-{n}", content="shared words deploy")
        raws = [make_key(team, name="k") for team in teams]
    ranking_cache.clear()
    for n in range(8):
        team, raw = teams[n % 2], raws[n % 2]
        query = {"store": "eng", "query": "deploy"} if n % 4 < 2 else {"query": "deploy"}
        r = Api(raw).get("/api/v1/context/", query=query)
        assert r.status_code == 200
        assert {i["key"].rsplit("-", 1)[0] for i in r.json()["items"]} == {team.slug}
    with all_teams():
        from memory.models import ContextServe

        assert ContextServe.objects.count() == 8


@pytest.mark.all_teams
def test_validity_is_judged_at_every_request_not_at_the_build(world):
    """An entry whose valid_until passes stops being served by the kept data itself (no write, no new version, no
    rebuild), and one whose valid_from arrives starts being served."""
    import time

    make_key(world.team_a, name="reader")
    key = AgentKey.objects.get(team=world.team_a, name="reader")
    now = timezone.now()
    make_entry(world.store_a, key="always", content="deploy")
    make_entry(world.store_a, key="ending", content="deploy", valid_until=now + timedelta(seconds=1.5))
    make_entry(world.store_a, key="starting", content="deploy", valid_from=now + timedelta(seconds=1.5))
    ranking_cache.clear()
    served = lambda: {i.key for i in ranking_cache.ranked_entries(key, store=world.store_a, query="deploy", limit=9)}  # noqa: E731
    assert served() == {"always", "ending"}
    version, data = _version(world.store_a), ranking_cache._cache[(world.team_a.pk, world.store_a.pk)].data
    time.sleep(max(0.0, (now + timedelta(seconds=1.6) - timezone.now()).total_seconds()))
    assert served() == {"always", "starting"}
    assert _version(world.store_a) == version
    assert ranking_cache._cache[(world.team_a.pk, world.store_a.pk)].data is data
    _same_as_statement(key, world.store_a)


@pytest.mark.all_teams
def test_the_first_build_moves_the_process_out_of_full_collections_once(world, monkeypatch):
    """After a process's first ranking data is built, what is alive is frozen (the collector's full passes no longer
    walk it: the context p99's pauses); only once per process, after a collection."""
    import gc

    make_key(world.team_a, name="reader")
    key = AgentKey.objects.get(team=world.team_a, name="reader")
    make_entry(world.store_a, key="e0", content="deploy cache lesson")
    monkeypatch.setattr(ranking_cache, "_frozen", False)
    ranking_cache.clear()
    gc.unfreeze()
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(a) or 0)
    try:
        ranking_cache.ranked_entries(key, store=world.store_a, limit=5)
        frozen = gc.get_freeze_count()
        ranking_cache.clear()
        ranking_cache.ranked_entries(key, store=world.store_a, limit=5)  # a second build: nothing more
        assert frozen > 0 and len(collections) == 1
    finally:
        gc.unfreeze()


@pytest.mark.all_teams
@override_settings(DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S=0)
def test_through_the_keys_statement_a_change_is_served_at_once(world, fast_passwords):
    """The check read by the key's own statement (memory.api.context) serves what the ranking statement serves after
    a change, in the same request's snapshot; a query string only the serializer reads gets the check of its own,
    with the same answer; a refused key answers nothing."""
    raw = make_key(world.team_a, name="reader")
    entry = make_entry(world.store_a, key="lesson", content="deploy with make release")
    make_entry(world.store_a, key="other", content="retry the deploy")
    ranking_cache.clear()

    def served(**query):
        r = Api(raw).get("/api/v1/context/", query={"store": world.store_a.slug, "query": "deploy", **query})
        assert r.status_code == 200, r.json()
        return [(i["key"], i["content"]) for i in r.json()["items"]]

    before = served()
    assert ("lesson", "deploy with make release") in before
    assert served(max_items=" 20") == before  # the serializer's path: the ranking's own check statement
    update_entry(entry, base_version=1, author=Author.system(), content="deploy with make ship")
    after = served()
    assert ("lesson", "deploy with make ship") in after and ("lesson", "deploy with make release") not in after
    assert served(max_items=" 20") == after
    archive_entry(MemoryEntry.objects.get(pk=entry.pk), base_version=2, author=Author.system())
    assert [k for k, _ in served()] == ["other"]

    refused = Api(raw[:-1] + ("x" if raw[-1] != "x" else "y")).get(
        "/api/v1/context/", query={"store": world.store_a.slug, "query": "deploy"}
    )
    assert refused.status_code == 401 and "items" not in refused.json()
