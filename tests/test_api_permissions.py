# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The permission matrix: every endpoint of /api/v1/ against no key, a revoked / expired / malformed key, a key
without the endpoint's scope, another team's key (404, existence hidden), and a read-only store for writes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dreamweb.models import AgentKey
from memory.models import AgentSession, Feedback, MemoryEntry, MemoryVersion
from reviews.models import DreamRun, Proposal
from tests.api_support import ALL_SCOPES, Api, fast_passwords, keys, make_key, session_doc  # noqa: F401 - fixtures
from tests.factories import StoreFactory, make_entry, make_skill

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@dataclass
class Data:
    entry: MemoryEntry
    frozen_entry: MemoryEntry
    proposal: Proposal
    run: DreamRun


@pytest.fixture
def data(world):
    world.store_a.agents_may_write = True
    world.store_a.save()
    entry = make_entry(world.store_a)
    frozen = StoreFactory(team=world.team_a, slug="frozen", agents_may_write=False)
    frozen_entry = make_entry(frozen, key="frozen-entry")
    make_skill(world.team_a, name="release", description="How to release.")
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status="succeeded")
    proposal = Proposal.objects.create(
        team=world.team_a, store=world.store_a, run=run, operation="add", content="Tag first.", signature="sig-1"
    )
    return Data(entry, frozen_entry, proposal, run)


# (method, path, scope, body, success status); {proposal} and {run} are filled in from the data.
ENDPOINTS = [
    ("GET", "/api/v1/ping/", None, None, 200),
    ("POST", "/api/v1/sessions/", "sessions:write", "SESSION", 201),
    ("GET", "/api/v1/context/?store=eng", "memory:read", None, 200),
    ("GET", "/api/v1/stores/", "memory:read", None, 200),
    ("GET", "/api/v1/stores/eng/entries/", "memory:read", None, 200),
    ("POST", "/api/v1/stores/eng/entries/", "memory:write", {"key": "new-one", "content": "New."}, 201),
    ("GET", "/api/v1/stores/eng/entries/deploy-command/", "memory:read", None, 200),
    ("PUT", "/api/v1/stores/eng/entries/deploy-command/", "memory:write", {"content": "Changed."}, 200),
    ("PATCH", "/api/v1/stores/eng/entries/deploy-command/", "memory:write", {"tags": ["x"]}, 200),
    ("DELETE", "/api/v1/stores/eng/entries/deploy-command/", "memory:write", None, 200),
    ("POST", "/api/v1/stores/eng/entries/deploy-command/feedback/", "memory:read", {"helpful": True}, 201),
    ("GET", "/api/v1/skills/", "skills:read", None, 200),
    ("GET", "/api/v1/skills/release/", "skills:read", None, 200),
    ("GET", "/api/v1/proposals/", "dreams", None, 200),
    ("GET", "/api/v1/proposals/{proposal}/", "dreams", None, 200),
    ("GET", "/api/v1/dream-runs/", "dreams", None, 200),
    ("GET", "/api/v1/dream-runs/{run}/", "dreams", None, 200),
    ("POST", "/api/v1/stores/eng/dreams/", "dreams", {"dry_run": True}, 202),
    ("GET", "/api/v1/stores/eng/agents/", "dreams", None, 200),
    ("PUT", "/api/v1/stores/eng/agents/", "dreams", {"agents": ["deploy-bot"]}, 200),
]
IDS = [f"{m} {p}" for m, p, *_ in ENDPOINTS]
WRITES = [e for e in ENDPOINTS if e[2] == "memory:write"]
# Endpoints that name one object of team A (another team's key must get 404 there).
OBJECT_ENDPOINTS = [e for e in ENDPOINTS if "/eng/" in e[1] or "{" in e[1] or "store=eng" in e[1] or "release/" in e[1]]


def call(api: Api, data: Data, method, path, body, *, raw=..., entry=None):
    path = path.format(proposal=data.proposal.pk, run=data.run.pk)
    if body == "SESSION":
        body = session_doc("perm-1")
    entry = entry or data.entry
    headers = {"If-Match": f'"{entry.pk}.{entry.version}"'} if method in ("PUT", "PATCH", "DELETE") else {}
    if method in ("GET", "DELETE"):
        return api.request(method, path, headers=headers, raw=raw)
    return api.request(method, path, body if body is not None else {}, headers=headers, raw=raw)


def _state(data: Data):
    """Everything an endpoint could change, to assert that refused requests changed nothing."""
    return (
        list(
            MemoryEntry.objects.order_by("pk").values_list("key", "content_hash", "status", "version", "rating_count")
        ),
        MemoryVersion.objects.count(),
        AgentSession.objects.count(),
        Feedback.objects.count(),
        DreamRun.objects.count(),
    )


@pytest.mark.parametrize("method, path, scope, body, ok", ENDPOINTS, ids=IDS)
def test_no_key_is_401(world, keys, data, method, path, scope, body, ok):
    before = _state(data)
    r = call(Api(None), data, method, path, body)
    assert r.status_code == 401
    assert r.json()["code"] == "not_authenticated" and "Api-Key" in r["WWW-Authenticate"]
    assert _state(data) == before


@pytest.mark.parametrize("method, path, scope, body, ok", ENDPOINTS, ids=IDS)
@pytest.mark.parametrize("which", ["revoked", "expired", "malformed", "wrong-secret", "other-scheme"])
def test_bad_keys_are_401(world, keys, data, which, method, path, scope, body, ok):
    raw = {
        "revoked": keys.revoked,
        "expired": keys.expired,
        "malformed": "not-a-key",
        "wrong-secret": keys.full[:-4] + "abcd",
    }.get(which)
    api = Api(None)
    before = _state(data)
    if which == "other-scheme":
        r = api.request(
            method,
            path.format(proposal=data.proposal.pk, run=data.run.pk),
            headers={"Authorization": f"Bearer {keys.full}"},
        )
    else:
        r = call(api, data, method, path, body, raw=raw)
    assert r.status_code == 401, r.content
    detail = r.json()["detail"]
    if which in ("revoked", "expired"):
        assert which in detail
    assert _state(data) == before


@pytest.mark.parametrize(
    "method, path, scope, body, ok",
    [e for e in ENDPOINTS if e[2]],
    ids=[i for e, i in zip(ENDPOINTS, IDS, strict=True) if e[2]],
)
def test_missing_scope_is_403(world, keys, data, method, path, scope, body, ok):
    raw = make_key(world.team_a, "almost", scopes=[s for s in ALL_SCOPES if s != scope])
    before = _state(data)
    r = call(Api(raw), data, method, path, body)
    assert r.status_code == 403
    assert f"`{scope}`" in r.json()["detail"]
    assert _state(data) == before


@pytest.mark.parametrize(
    "method, path, scope, body, ok", OBJECT_ENDPOINTS, ids=[f"{m} {p}" for m, p, *_ in OBJECT_ENDPOINTS]
)
def test_other_teams_objects_are_404(world, keys, data, method, path, scope, body, ok):
    before = _state(data)
    r = call(Api(keys.other_team), data, method, path, body)
    assert r.status_code == 404, r.content
    assert r.json()["code"] == "not_found"
    assert _state(data) == before


def test_other_teams_lists_exclude_team_a(world, keys, data):
    api = Api(keys.other_team)
    assert [s["slug"] for s in api.get("/api/v1/stores/").json()["results"]] == ["ops"]
    assert api.get("/api/v1/skills/").json()["results"] == []
    assert api.get("/api/v1/proposals/").json()["results"] == []
    assert api.get("/api/v1/dream-runs/").json()["results"] == []
    assert api.get("/api/v1/context/").json()["items"] == []


@pytest.mark.parametrize("method, path, scope, body, ok", WRITES, ids=[f"{m} {p}" for m, p, *_ in WRITES])
def test_read_only_store_refuses_writes_with_403(world, keys, data, method, path, scope, body, ok):
    path = path.replace("/eng/", "/frozen/").replace("deploy-command", "frozen-entry")
    before = _state(data)
    r = call(Api(keys.full), data, method, path, body, entry=data.frozen_entry)
    assert r.status_code == 403
    assert "does not accept in-band writes" in r.json()["detail"]
    assert _state(data) == before


@pytest.mark.parametrize("method, path, scope, body, ok", ENDPOINTS, ids=IDS)
def test_the_right_key_succeeds(world, keys, data, method, path, scope, body, ok):
    r = call(Api(keys.full), data, method, path, body)
    assert r.status_code == ok, r.content
    key = AgentKey.objects.get(name="full")
    assert key.last_used_at is not None
