# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""A transcript pushed as it goes on (a hook on every turn, then at the end; a rollout pushed half-written) grows
the stored session when asked (`?grow=true`, what the hooks and dreamweb-push send): the longer one replaces it,
every stored event unchanged; an older, shorter push is unchanged. Any other difference stays a 409, and without
`grow` (and in `import_sessions`, whose contract says so) every difference is a conflict."""

from __future__ import annotations

import copy
import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory.models import AgentSession
from tests.api_support import Api, fast_passwords, keys, session_doc  # noqa: F401 - fixtures
from tests.test_api_session_files import post_file

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

URL = "/api/v1/sessions/"


def turn(i):
    return [
        {"type": "message", "role": "user", "content": f"step {i}"},
        {"type": "tool_call", "id": f"c{i}", "name": "bash", "arguments": {"command": f"make step{i}"}},
        {"type": "tool_result", "call_id": f"c{i}", "content": f"done {i}", "exit_code": 0},
    ]


def doc(turns, **extra):
    return {
        "external_id": "grow-1",
        "agent": "claude-code",
        "task": "build",
        "started_at": "2026-11-30T10:00:00Z",
        "events": [ev for i in range(turns) for ev in turn(i)],
        **extra,
    }


def push(raw, body, grow=True):
    return Api(raw).post(URL + ("?grow=true" if grow else ""), body)


def stored():
    return AgentSession.objects.get(external_id="grow-1")


def test_a_session_pushed_again_with_more_events_grows(world, keys):
    assert push(keys.full, doc(1)).status_code == 201
    first_size = stored().size_bytes
    r = push(keys.full, doc(3, outcome="success", ended_at="2026-11-30T10:20:00Z"))
    assert r.status_code == 200, r.json()
    assert r.json()["grown"] == 1 and r.json()["results"][0]["status"] == "grown"
    s = stored()
    assert len(s.events) == 9 and s.outcome == "success" and s.ended_at is not None
    assert s.event_count == 9 and s.size_bytes > first_size  # what the session list shows is the whole session
    # the fingerprint is the whole session's: a copy of it under another id is known as one
    push(keys.full, doc(3, outcome="success", ended_at="2026-11-30T10:20:00Z", external_id="copy-of-it"))
    assert s.fingerprint and s.fingerprint == AgentSession.objects.get(external_id="copy-of-it").fingerprint


def test_an_older_shorter_push_arriving_late_is_unchanged(world, keys):
    push(keys.full, doc(3))
    r = push(keys.full, doc(2))
    assert r.status_code == 200 and r.json()["results"][0]["status"] == "unchanged", r.json()
    assert len(stored().events) == 9


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["events"][0].update(content="another first message"),  # a stored event changed
        lambda d: d.update(agent="codex"),
        lambda d: d.update(task="deploy"),
        lambda d: d.update(started_at="2026-11-30T11:00:00Z"),
        lambda d: d["events"].pop(1),  # one stored event missing
    ],
)
def test_anything_but_more_events_after_the_stored_ones_is_still_a_conflict(world, keys, change):
    push(keys.full, doc(2))
    longer = doc(3)
    change(longer)
    r = push(keys.full, longer)
    assert r.status_code == 409, r.json()
    assert len(stored().events) == 6


def test_without_grow_a_longer_session_is_a_conflict_as_before(world, keys):
    push(keys.full, doc(1))
    assert push(keys.full, doc(2), grow=False).status_code == 409
    assert len(stored().events) == 3


def test_a_conflict_elsewhere_in_the_batch_undoes_the_growth_too(world, keys):
    push(keys.full, doc(1))
    other = dict(doc(1), external_id="other-1")
    push(keys.full, other)
    r = push(keys.full, [doc(2), dict(other, agent="codex")])
    assert r.status_code == 409
    assert len(stored().events) == 3


def test_grow_takes_true_or_false_only(world, keys):
    r = Api(keys.full).post(URL + "?grow=maybe", doc(1))
    assert r.status_code == 400 and "grow" in r.json()["errors"], r.json()


def claude_lines(turns):
    lines = []
    for i in range(turns):
        base = {"sessionId": "5b1c7a0e-2f4e-4a57-9f1c-0d3c2b1a9e88", "cwd": "/repo", "version": "2.0.1"}
        lines.append(
            {
                **base,
                "type": "user",
                "uuid": f"u{i}",
                "timestamp": f"2026-11-30T10:0{i}:00Z",
                "message": {"role": "user", "content": f"step {i}"},
            }
        )
        lines.append(
            {
                **base,
                "type": "assistant",
                "uuid": f"a{i}",
                "timestamp": f"2026-11-30T10:0{i}:30Z",
                "message": {"role": "assistant", "content": [{"type": "text", "text": f"did {i}"}]},
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_a_claude_code_transcript_pushed_after_each_turn_then_at_the_end_is_stored_whole(world, keys):
    first = post_file(keys.full, claude_lines(1), query="?format=claude-code&grow=true")
    assert first.status_code == 201, first.json()
    last = post_file(keys.full, claude_lines(3), query="?format=claude-code&grow=true")
    assert last.status_code == 200 and last.json()["grown"] == 1, last.json()
    (s,) = AgentSession.objects.filter(external_id="5b1c7a0e-2f4e-4a57-9f1c-0d3c2b1a9e88")
    assert [e["content"] for e in s.events if e["type"] == "message"][-1] == "did 2"


def test_import_sessions_keeps_its_contract_a_longer_session_is_a_conflict(world, tmp_path):
    team = world.team_a.slug
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(doc(1)) + "\n")
    call_command("import_sessions", str(path), "--team", team, stdout=io.StringIO())
    path.write_text(json.dumps(copy.deepcopy(doc(2))) + "\n")
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("import_sessions", str(path), "--team", team, stdout=out, stderr=io.StringIO())
    assert refused.value.returncode == 1
    assert "imported 0, unchanged 0, rejected 1" in out.getvalue()
