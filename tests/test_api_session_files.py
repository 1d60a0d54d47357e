# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""POST /api/v1/sessions/ with a transcript file as the body (format by query, content-type parameter or content),
and conflicts: a different session under a stored external_id is a 409 that stores nothing, never "unchanged"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.models import AgentSession
from tests.api_support import Api, fast_passwords, keys, session_doc  # noqa: F401 - fixtures
from tests.scoping import no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

URL = "/api/v1/sessions/"
REAL = Path(__file__).resolve().parents[2] / "shared" / "real" / "transcripts"  # CI lays shared/ beside the clone
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts")
CLAUDE = REAL / "claude-code" / "codemie-4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"
CODEX = REAL / "codex" / "codemie-rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
needs_real = pytest.mark.skipif(not CLAUDE.exists(), reason="real transcripts not available")


def post_file(raw: str, body: bytes, *, content_type="application/x-ndjson", query: str = ""):
    """A raw body with its own content type, sent from an empty scope as tests.api_support.Api sends requests."""
    headers = {"Authorization": f"Api-Key {raw}"}
    with no_scope():
        return Api(raw).client.post(URL + query, data=body, content_type=content_type, headers=headers)


@needs_real
def test_a_claude_code_file_is_recognised_stored_and_a_repeat_adds_nothing(world, keys):
    body = CLAUDE.read_bytes()
    r = post_file(keys.full, body)
    assert r.status_code == 201, r.json()
    assert r.json()["format"] == "claude-code"
    assert r.json()["results"] == [
        {"index": 0, "external_id": "4c2ddfdc-b619-4525-8d03-1950fb1b0257", "status": "created"}
    ]
    stored = AgentSession.objects.get(external_id="4c2ddfdc-b619-4525-8d03-1950fb1b0257")
    assert (stored.team, stored.agent, stored.source_format) == (world.team_a, "claude-code", "claude-code")
    assert stored.ingested_by.name == "full"
    r = post_file(keys.full, body)
    assert (r.status_code, r.json()["unchanged"]) == (200, 1)
    assert AgentSession.objects.count() == 1
    # The other team's key stores its own copy; neither team sees the other's.
    assert post_file(keys.other_team, body).status_code == 201
    assert AgentSession.objects.filter(team=world.team_b).count() == 1


@needs_real
@pytest.mark.parametrize(
    "content_type, query",
    [
        ("application/json", "?format=codex"),
        ("application/octet-stream", ""),
        ("application/x-ndjson; format=codex", ""),
        ("application/jsonl", "?format=auto&agent=release-bot&task=demo"),
    ],
)
def test_the_format_is_named_by_query_or_content_type_or_found_by_content(world, keys, content_type, query):
    r = post_file(keys.full, CODEX.read_bytes(), content_type=content_type, query=query)
    assert r.status_code == 201, r.json()
    assert r.json()["format"] == "codex"
    stored = AgentSession.objects.get(external_id="019e1695-0522-7c83-8b39-0dd379793f80")
    assert stored.agent == ("release-bot" if "agent=" in query else "codex")
    assert stored.task == ("demo" if "task=" in query else None)


def test_a_file_in_no_known_format_is_one_clear_400(world, keys):
    r = post_file(keys.full, b'{"hello": "world"}\n{"hello": "again"}\n')
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "unknown_format"
    for name in ("claude-code", "codex", "gemini-cli", "openai-chat", "anthropic-messages", "dreamweb"):
        assert name in body["detail"] and name in body["formats"]
    assert not AgentSession.objects.exists()


def test_unknown_format_name_agent_too_long_and_plain_text_are_refused(world, keys):
    r = post_file(keys.full, b"{}", query="?format=word-doc")
    assert r.status_code == 400 and "format" in r.json()["errors"]
    r = post_file(keys.full, CLAUDE.read_bytes() if CLAUDE.exists() else b"{}", query="?agent=" + "x" * 101)
    assert r.status_code == 400 and "agent" in r.json()["errors"]
    assert post_file(keys.full, b"hello", content_type="text/plain").status_code == 415


def test_a_file_with_invalid_parts_stores_nothing_and_names_each_part(world, keys):
    lines = [json.dumps(session_doc("f-1")), "not json", json.dumps({"external_id": "f-3", "events": []})]
    r = post_file(keys.full, "\n".join(lines).encode(), query="?format=dreamweb")
    assert r.status_code == 400
    assert set(r.json()["errors"]) == {"line 2", "line 3"}
    assert r.json()["errors"]["line 3"] == ["agent: is required"]
    assert not AgentSession.objects.exists()
    # --agent fills in what a canonical line leaves out (never overrides what it says).
    r = post_file(keys.full, lines[2].encode(), query="?format=dreamweb&agent=filler")
    assert r.status_code == 201 and AgentSession.objects.get(external_id="f-3").agent == "filler"


def test_a_different_session_under_a_stored_id_is_a_conflict_and_nothing_is_stored(world, keys):
    api = Api(keys.full)
    assert api.post(URL, session_doc("c-1")).status_code == 201
    changed = session_doc("c-1")
    changed["events"].append({"type": "message", "role": "assistant", "content": "Done."})
    r = api.post(URL, changed)
    assert r.status_code == 409
    body = r.json()
    assert body["code"] == "conflict" and body["conflicts"] == ["c-1"]
    assert "already stored" in body["errors"]["0"]["external_id"][0]
    assert AgentSession.objects.get(external_id="c-1").event_count == 4  # the stored session is kept
    # In a batch, one conflict stores nothing of the batch (as one invalid item does).
    r = api.post(URL, [session_doc("c-2"), changed, session_doc("c-1")])
    assert r.status_code == 409 and set(r.json()["errors"]) == {"1"}
    assert not AgentSession.objects.filter(external_id="c-2").exists()
    # Two different sessions under one id in one batch conflict with each other.
    r = api.post(URL, [session_doc("c-3"), {**session_doc("c-3"), "outcome": "failure"}])
    assert r.status_code == 409 and set(r.json()["errors"]) == {"1"}
    assert not AgentSession.objects.filter(external_id="c-3").exists()
    # The very same session again is still "unchanged", however its JSON is spelled.
    same = json.dumps(session_doc("c-1"), indent=2, sort_keys=True)
    r = api.request("POST", URL, same)
    assert r.status_code == 200 and r.json()["results"][0]["status"] == "unchanged"
