"""import_sessions beyond one canonical file: folders, formats recognised by content, --agent/--task, one error for a
file in no known format, and conflicts (a different session under a stored external_id is rejected, never
"unchanged")."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory.models import AgentSession
from tests.factories import TeamFactory
from tests.scoping import no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

REAL = Path(__file__).resolve().parents[2] / "shared" / "real" / "transcripts"  # CI lays shared/ beside the clone
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts")
needs_real = pytest.mark.skipif(not REAL.exists(), reason="real transcripts not available")


def run_import(path, team="acme", **kwargs):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with no_scope():  # the command opens its own scope
            call_command("import_sessions", str(path), "--team", team, stdout=out, stderr=err, **kwargs)
    except CommandError as exc:
        if exc.returncode != 1 or "rejected" not in str(exc):
            raise
        code = exc.returncode
    return code, out.getvalue(), err.getvalue()


def session(eid: str, **over) -> dict:
    doc = {
        "external_id": eid,
        "agent": "deploy-bot",
        "events": [{"type": "message", "role": "user", "content": "Ship it."}],
    }
    doc.update(over)
    return doc


@pytest.fixture
def acme():
    return TeamFactory(slug="acme")


def test_a_different_session_under_a_stored_id_is_a_conflict_counted_as_rejected(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(session(f"s{i}")) + "\n" for i in range(3)))
    assert run_import(path)[:2] == (0, "imported 3, unchanged 0, rejected 0\n")
    changed = [session("s0"), session("s1", outcome="failure"), session("s2"), session("s3")]
    path.write_text("".join(json.dumps(s) + "\n" for s in changed))
    code, out, err = run_import(path)
    assert (code, out) == (1, "imported 1, unchanged 2, rejected 1\n")
    assert err.startswith("line 2: conflict: a different session with external_id 's1' is already stored")
    assert AgentSession.objects.get(team=acme, external_id="s1").outcome == "unknown"  # the stored one is kept
    # Within one file too: a repeat that differs from the first occurrence is a conflict, an exact repeat is not.
    path.write_text("".join(json.dumps(s) + "\n" for s in [session("n1"), session("n1"), session("n1", task="x")]))
    code, out, err = run_import(path, batch_size=2)  # across a batch boundary as well
    assert (code, out) == (1, "imported 1, unchanged 1, rejected 1\n")
    assert err.startswith("line 3: conflict:")


def test_a_file_in_no_known_format_is_one_error_naming_the_formats(acme, tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps({"note": i}) + "\n" for i in range(400)))
    code, out, err = run_import(path)
    assert (code, out) == (1, "imported 0, unchanged 0, rejected 1\n")
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"{path}: not a session file in a known format")
    for name in ("dreamweb", "claude-code", "codex", "gemini-cli", "openai-chat", "anthropic-messages"):
        assert name in err
    # Named explicitly, the canonical reader judges it line by line instead.
    code, out, err = run_import(path, format="dreamweb")
    assert (code, out) == (1, "imported 0, unchanged 0, rejected 400\n")


def test_a_folder_imports_every_session_file_below_it_in_name_order(acme, tmp_path):
    (tmp_path / "b" / "deeper").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.jsonl").write_text(json.dumps(session("a")) + "\n")
    (tmp_path / "b" / "deeper" / "c.json").write_text(json.dumps(session("c")) + "\n")
    (tmp_path / "b" / "broken.jsonl").write_text("{not json\n")
    (tmp_path / "README.md").write_text("not a session file")
    (tmp_path / ".git" / "x.jsonl").write_text(json.dumps(session("hidden")) + "\n")
    code, out, err = run_import(tmp_path)
    assert (code, out) == (1, "imported 2, unchanged 0, rejected 1\n")
    assert err.startswith(f"{tmp_path / 'b' / 'broken.jsonl'}: not a session file in a known format")
    assert sorted(AgentSession.objects.values_list("external_id", flat=True)) == ["a", "c"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CommandError, match=r"no \*\.jsonl or \*\.json file"):
        run_import(empty)


@needs_real
def test_every_real_transcript_imports_from_its_folder_and_a_reimport_adds_nothing(acme, tmp_path):
    code, out, err = run_import(REAL)
    assert (code, err) == (0, ""), err
    # 6 Claude Code files: 5 main sessions, 8 subagents (5 inline in fe5e1c67, 2 inline in 5c0375b4, 1 agent file);
    # 2 Codex rollouts; entire-cli: 43 Claude Code and 2 Gemini CLI sessions.
    assert out == "imported 60, unchanged 0, rejected 0\n"
    by_format = {}
    for fmt in AgentSession.objects.filter(team=acme).values_list("source_format", flat=True):
        by_format[fmt] = by_format.get(fmt, 0) + 1
    assert by_format == {"claude-code": 56, "codex": 2, "gemini-cli": 2}
    subagents = AgentSession.objects.filter(team=acme, metadata__has_key="parent_session")
    assert subagents.count() == 8
    assert all(s.external_id.startswith(s.metadata["parent_session"] + ":") for s in subagents)
    assert run_import(REAL)[:2] == (0, "imported 0, unchanged 60, rejected 0\n")


@needs_real
def test_agent_and_task_name_what_the_file_does_not(acme, tmp_path):
    shutil.copy(
        REAL / "codex" / "codemie-rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl", tmp_path
    )
    shutil.copy(REAL / "claude-code" / "codemie-4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl", tmp_path)
    assert run_import(tmp_path, agent="helper", task="demo")[:2] == (0, "imported 2, unchanged 0, rejected 0\n")
    assert set(AgentSession.objects.values_list("agent", "task", "source_format")) == {
        ("helper", "demo", "codex"),
        ("helper", "demo", "claude-code"),
    }
    with pytest.raises(CommandError, match="--agent must be 1 to 100 characters"):
        run_import(tmp_path, agent="x" * 101)


def test_standard_input_is_recognised_by_content(acme, monkeypatch):
    lines = [
        {"type": "session_meta", "timestamp": "2026-05-11T10:00:00Z", "payload": {"id": "rollout-1", "cwd": "/w"}},
        {
            "type": "event_msg",
            "timestamp": "2026-05-11T10:00:01Z",
            "payload": {"type": "user_message", "message": "hi"},
        },
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    assert run_import("-")[:2] == (0, "imported 1, unchanged 0, rejected 0\n")
    stored = AgentSession.objects.get(external_id="rollout-1")
    assert (stored.agent, stored.source_format, stored.events[0]["content"]) == ("codex", "codex", "hi")
