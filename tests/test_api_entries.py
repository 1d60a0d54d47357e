# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""Stores and entries over the API: ETag / If-Match (428, 412, 200) with nothing overwritten, 304, 409, filters,
and every in-band write recorded as a version by the key, naming the session."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dreamweb.models import AgentKey
from memory.models import AuthorKind, MemoryEntry, MemoryVersion
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures
from tests.factories import SessionFactory, StoreFactory, make_entry

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

BASE = "/api/v1/stores/eng/entries/"


@pytest.fixture
def writable(world):
    world.store_a.agents_may_write = True
    world.store_a.save()
    return world.store_a


def test_store_list_shows_only_the_keys_team(world, keys, writable):
    StoreFactory(team=world.team_a, slug="docs")
    make_entry(writable)
    r = Api(keys.full).get("/api/v1/stores/")
    assert r.status_code == 200
    rows = {s["slug"]: s for s in r.json()["results"]}
    assert set(rows) == {"eng", "docs"}
    assert rows["eng"]["entries"] == 1 and rows["eng"]["writable"] is True
    assert rows["docs"]["writable"] is False
    assert Api(keys.reader).get("/api/v1/stores/").json()["results"][0]["writable"] is False


def test_read_entry_with_etag_and_304(world, keys):
    entry = make_entry(world.store_a)
    api = Api(keys.reader)
    r = api.get(BASE + "deploy-command/")
    assert r.status_code == 200
    assert r["ETag"] == f'"{entry.pk}.{entry.version}"'
    assert r.json()["content"] == entry.content and r.json()["etag"] == r["ETag"]
    r = api.get(BASE + "deploy-command/", headers={"If-None-Match": r["ETag"]})
    assert r.status_code == 304 and r.content == b""
    assert api.get(BASE + "deploy-command/", headers={"If-None-Match": '"other"'}).status_code == 200


def test_update_needs_if_match_and_stale_overwrites_nothing(world, keys, writable):
    entry = make_entry(writable)
    api = Api(keys.full)
    url = BASE + "deploy-command/"
    etag = api.get(url)["ETag"]

    r = api.put(url, {"content": "no precondition"})
    assert r.status_code == 428 and "If-Match" in r.json()["detail"]
    assert api.put(url, {"content": "star"}, headers={"If-Match": "*"}).status_code == 428

    r = api.put(url, {"content": "Deploy with `make release`."}, headers={"If-Match": etag})
    assert r.status_code == 200, r.json()
    new_etag = r["ETag"]
    assert new_etag != etag and r.json()["version"] == 2

    # A second writer that read the old version: 412, and the winner's content stays.
    r = api.put(url, {"content": "clobber"}, headers={"If-Match": etag})
    assert r.status_code == 412
    assert r.json()["code"] == "stale" and r.json()["current_etag"] == new_etag and r["ETag"] == new_etag
    entry.refresh_from_db()
    assert entry.content == "Deploy with `make release`." and entry.version == 2
    assert MemoryVersion.objects.filter(entry=entry).count() == 2

    r = api.patch(url, {"tags": ["deploy"]}, headers={"If-Match": etag})
    assert r.status_code == 412
    r = api.delete(url, headers={"If-Match": etag})
    assert r.status_code == 412
    entry.refresh_from_db()
    assert entry.status == "active" and entry.tags == []


def test_patch_and_delete_archive_with_provenance(world, keys, writable):
    entry = make_entry(writable)
    session = SessionFactory(team=world.team_a, external_id="run-42")
    api = Api(keys.full)
    url = BASE + "deploy-command/"
    etag = api.get(url)["ETag"]
    r = api.patch(
        url,
        {"scope": {"agent": "deploy-bot"}, "tags": ["deploy"]},
        headers={"If-Match": etag, "X-Session-Id": "run-42"},
    )
    assert r.status_code == 200, r.json()
    assert r.json()["scope"] == {"agent": "deploy-bot", "task": None} and r.json()["content"] == entry.content
    version = MemoryVersion.objects.get(entry=entry, number=2)
    assert version.author_kind == AuthorKind.AGENT
    assert version.author_key == AgentKey.objects.get(name="full")
    assert version.session == session

    r = api.delete(url, headers={"If-Match": r["ETag"]})
    assert r.status_code == 200 and r.json()["status"] == "archived"
    entry.refresh_from_db()
    assert entry.status == "archived" and entry.version == 3
    assert MemoryVersion.objects.get(entry=entry, number=3).operation == "archive"


def test_create_entry(world, keys, writable):
    api = Api(keys.full)
    body = {"key": "db-migrations", "content": "Run `make migrate` first.", "scope": {"task": "release"}}
    r = api.post(BASE, {**body, "session_id": "not-yet-pushed"})
    assert r.status_code == 201, r.json()
    entry = MemoryEntry.objects.get(store=writable, key="db-migrations")
    assert r["ETag"] == f'"{entry.pk}.{entry.version}"'
    assert entry.scope_task == "release" and entry.origin == "agent"
    version = entry.versions.get()
    assert version.author_key.name == "full" and version.session is None
    assert "not-yet-pushed" in version.reason

    r = api.post(BASE, body)
    assert r.status_code == 409 and "already exists" in r.json()["detail"]
    assert MemoryEntry.objects.filter(store=writable).count() == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({"content": "x"}, "key"),
        ({"key": "k"}, "content"),
        ({"key": "a/b", "content": "x"}, "key"),
        ({"key": "k", "content": "   "}, "content"),
        ({"key": "k", "content": "x", "tags": "notalist"}, "tags"),
    ],
)
def test_create_entry_invalid_is_field_precise(world, keys, writable, body, field):
    r = Api(keys.full).post(BASE, body)
    assert r.status_code == 400
    assert field in r.json()["errors"], r.json()
    assert not MemoryEntry.objects.filter(store=writable).exists()


def test_writes_refused_where_agents_may_not_write(world, keys, writable):
    make_entry(writable)
    readonly = StoreFactory(team=world.team_a, slug="readonly")
    make_entry(readonly)
    only_eng = make_key(world.team_a, "only-docs", writable_stores=["docs"])
    api = Api(keys.full)
    # The store does not let agents write.
    r = api.post("/api/v1/stores/readonly/entries/", {"key": "k", "content": "x"})
    assert r.status_code == 403 and "does not accept" in r.json()["detail"]
    etag = api.get("/api/v1/stores/readonly/entries/deploy-command/")["ETag"]
    r = api.put("/api/v1/stores/readonly/entries/deploy-command/", {"content": "x"}, headers={"If-Match": etag})
    assert r.status_code == 403
    # The key may write other stores only.
    r = Api(only_eng).post(BASE, {"key": "k", "content": "x"})
    assert r.status_code == 403 and "may not write" in r.json()["detail"]
    assert MemoryEntry.objects.filter(key="k").count() == 0


def test_list_filters_and_pagination(world, keys):
    store = world.store_a
    make_entry(store, key="a-deploy", content="deploy things", scope_agent="deploy-bot")
    make_entry(store, key="b-review", content="review things", scope_task="review")
    old = make_entry(store, key="c-old", content="old things")
    MemoryEntry.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=10))
    api = Api(keys.reader)

    def keys_of(**query):
        r = api.get(BASE, query=query)
        assert r.status_code == 200, r.json()
        return [e["key"] for e in r.json()["results"]]

    assert keys_of() == ["a-deploy", "b-review", "c-old"]
    assert keys_of(agent="deploy-bot") == ["a-deploy"]
    assert keys_of(task="review") == ["b-review"]
    assert keys_of(q="REVIEW") == ["b-review"]
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert keys_of(updated_since=since) == ["a-deploy", "b-review"]
    assert keys_of(limit=1, offset=1) == ["b-review"]
    r = api.get(BASE, query={"updated_since": "yesterday"})
    assert r.status_code == 400 and "updated_since" in r.json()["errors"]


def test_errors_are_json_with_a_message(world, keys):
    api = Api(keys.full)
    r = api.get("/api/v1/nowhere/")
    assert r.status_code == 404 and r["Content-Type"] == "application/json" and r.json()["detail"]
    r = api.get("/api/v1/stores")
    assert r.status_code == 404 and "trailing slash" in r.json()["detail"]
    r = api.request("POST", BASE, b"{not json")
    assert r.status_code in (400, 403)
    assert r.json()["detail"]
    r = api.request("PUT", "/api/v1/stores/")
    assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"
