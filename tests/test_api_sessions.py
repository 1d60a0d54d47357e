# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""POST /api/v1/sessions/: 201 new, 200 already stored, batches, field-precise 400s, 413 past the limits."""

from __future__ import annotations

import json

import pytest

from memory.models import AgentSession
from tests.api_support import Api, fast_passwords, keys, session_doc  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

URL = "/api/v1/sessions/"


def test_single_session_created_then_unchanged(world, keys):
    api = Api(keys.full)
    r = api.post(URL, session_doc("s-1", repo="dreamweb"))
    assert r.status_code == 201, r.json()
    assert r.json() == {
        "created": 1,
        "unchanged": 0,
        "results": [{"index": 0, "external_id": "s-1", "status": "created"}],
    }
    stored = AgentSession.objects.get(external_id="s-1")
    assert stored.team == world.team_a and stored.ingested_by.name == "full"
    assert stored.event_count == 4 and stored.metadata == {"repo": "dreamweb"}

    r = api.post(URL, session_doc("s-1", repo="dreamweb"))
    assert r.status_code == 200
    assert r.json()["results"][0]["status"] == "unchanged"
    assert AgentSession.objects.count() == 1
    # Another team may use the same external_id: ids are unique per team.
    assert Api(keys.other_team).post(URL, session_doc("s-1")).status_code == 201
    assert AgentSession.objects.count() == 2


def test_batch(world, keys):
    api = Api(keys.full)
    api.post(URL, session_doc("b-2"))
    r = api.post(URL, [session_doc("b-1"), session_doc("b-2"), session_doc("b-3"), session_doc("b-1")])
    assert r.status_code == 201
    body = r.json()
    assert (body["created"], body["unchanged"]) == (2, 2)
    assert [x["status"] for x in body["results"]] == ["created", "unchanged", "created", "unchanged"]
    r = api.post(URL, [session_doc("b-1"), session_doc("b-3")])
    assert r.status_code == 200 and r.json()["created"] == 0
    assert AgentSession.objects.filter(team=world.team_a).count() == 3


def test_invalid_session_errors_are_field_precise(world, keys):
    doc = session_doc("bad")
    doc["events"][3] = {"type": "message", "role": "robot", "content": "hi"}
    doc["outcome"] = "great"
    r = Api(keys.full).post(URL, doc)
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert "events[3].role" in errors and "robot" in errors["events[3].role"][0]
    assert "outcome" in errors
    assert not AgentSession.objects.exists()


def test_invalid_batch_item_named_by_index_and_nothing_stored(world, keys):
    bad = session_doc("b-bad")
    del bad["agent"]
    r = Api(keys.full).post(URL, [session_doc("b-ok"), bad, "not an object"])
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert set(errors) == {"1", "2"}
    assert errors["1"] == {"agent": ["is required"]}
    assert "session" in errors["2"]
    assert not AgentSession.objects.exists()


@pytest.mark.parametrize("body", [b"{oops", b"42", b'"text"', b"[]", b"null"])
def test_bodies_that_are_not_sessions(world, keys, body):
    r = Api(keys.full).request("POST", URL, body)
    assert r.status_code == 400 and r.json()["detail"]


def test_wrong_content_type_is_415(world, keys):
    r = Api(keys.full).client.post(
        URL, data="external_id=x", content_type="text/plain", headers={"Authorization": f"Api-Key {keys.full}"}
    )
    assert r.status_code == 415 and r.json()["detail"]


def test_request_too_large_is_413_before_parsing(world, keys, settings):
    settings.DREAMWEB_MAX_REQUEST_BYTES = 2000
    body = json.dumps([session_doc(f"big-{i}") for i in range(10)])
    assert len(body) > 2000
    r = Api(keys.full).request("POST", URL, body)
    assert r.status_code == 413
    assert "limit is 2000 bytes" in r.json()["detail"] and r.json()["limit"] == 2000
    assert not AgentSession.objects.exists()


def test_session_too_large_is_413(world, keys, settings):
    settings.DREAMWEB_MAX_SESSION_BYTES = 1000
    doc = session_doc("huge")
    doc["events"].append({"type": "message", "role": "assistant", "content": "x" * 2000})
    r = Api(keys.full).post(URL, doc)
    assert r.status_code == 413 and "DREAMWEB_MAX_SESSION_BYTES" in r.json()["detail"]
    r = Api(keys.full).post(URL, [session_doc("small"), doc])
    assert r.status_code == 413 and r.json()["index"] == 1
    assert not AgentSession.objects.exists()


def test_batch_over_the_count_limit_is_413(world, keys, settings):
    settings.DREAMWEB_MAX_BATCH_SESSIONS = 3
    r = Api(keys.full).post(URL, [session_doc(f"n-{i}") for i in range(4)])
    assert r.status_code == 413 and "limit is 3" in r.json()["detail"]
