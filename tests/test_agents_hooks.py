"""The no-code hooks: the Claude Code hook (SessionStart context, transcript pushed at SessionEnd) and the Codex
notify program, run as the agents run them (a subprocess fed the hook-input document), against a live server."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from dreamweb_hooks import claude_code, codex

from dreamweb.models import AgentKey
from memory.models import ContextServe
from tests.factories import StoreFactory, TeamFactory, make_entry

pytestmark = pytest.mark.all_teams  # test code sees every team (tests/scoping.py)

BIN = Path(sys.executable).parent
CLAUDE_HOOK = BIN / "dreamweb-claude-code-hook"
CODEX_NOTIFY = BIN / "dreamweb-codex-notify"
SESSION = "fe5e1c67-5c1a-4c55-9d1e-2f1f7c1a9e01"

installed = pytest.mark.skipif(
    not CLAUDE_HOOK.exists(), reason="the hooks are not installed (pip install -e ./clients/python)"
)


def hook_env(url: str, api_key: str, **extra) -> dict:
    return {"PATH": os.environ.get("PATH", ""), "DREAMWEB_URL": url, "DREAMWEB_API_KEY": api_key, **extra}


def run_hook(document, env: dict) -> subprocess.CompletedProcess:
    data = document if isinstance(document, str) else json.dumps(document)
    return subprocess.run(
        [str(CLAUDE_HOOK)], input=data, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@installed
@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_session_start_injects_the_context_and_records_the_serve(live_server):
    team = TeamFactory(slug="hook-team")
    store = StoreFactory(team=team, slug="eng")
    make_entry(store, key="test-command", content="Run the tests with `go test -race ./...`.")
    _, raw = AgentKey.generate(team=team, name="laptop", scopes=["memory:read", "skills:read"])
    document = {
        "session_id": SESSION,
        "transcript_path": f"/home/me/.claude/projects/-home-me-app/{SESSION}.jsonl",
        "cwd": "/home/me/app",
        "permission_mode": "default",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    done = run_hook(document, hook_env(live_server.url, raw, DREAMWEB_STORE="eng"))
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "Run the tests with `go test -race ./...`." in output["hookSpecificOutput"]["additionalContext"]
    serve = ContextServe.objects.get(team=team)
    assert (serve.agent, serve.session_external_id) == ("claude-code", SESSION)


@installed
def test_a_hook_never_stands_in_the_agents_way(tmp_path):
    """Server down, key refused, input that is not a hook document, no settings: exit 0, one line on stderr."""
    start = {"session_id": SESSION, "hook_event_name": "SessionStart", "transcript_path": "x", "cwd": "/"}
    down = run_hook(start, hook_env(closed_port_url(), "dw_key"))
    assert (down.returncode, down.stdout) == (0, "")
    assert "dreamweb: Dreamweb is not reachable at http://127.0.0.1:" in down.stderr

    garbage = run_hook("not json", hook_env(closed_port_url(), "dw_key"))
    assert (garbage.returncode, garbage.stdout) == (0, "")
    assert "the hook input is not JSON" in garbage.stderr

    unset = run_hook(start, {"PATH": os.environ.get("PATH", "")})
    assert (unset.returncode, unset.stdout) == (0, "")
    assert "set DREAMWEB_URL and DREAMWEB_API_KEY" in unset.stderr

    missing = dict(start, hook_event_name="SessionEnd", transcript_path=str(tmp_path / "gone.jsonl"))
    gone = run_hook(missing, hook_env(closed_port_url(), "dw_key"))
    assert gone.returncode == 0 and "no transcript file at" in gone.stderr

    notified = subprocess.run(
        [str(CODEX_NOTIFY), "{not json"], env=hook_env(closed_port_url(), "k"), capture_output=True, text=True
    )
    assert notified.returncode == 0 and "the notification is not JSON" in notified.stderr


def test_a_claude_code_session_comes_with_its_subagents_files(tmp_path):
    project = tmp_path / "projects" / "-home-me-app"
    project.mkdir(parents=True)
    transcript = project / f"{SESSION}.jsonl"
    transcript.write_text(json.dumps({"sessionId": SESSION, "type": "user"}) + "\n")
    nested = project / SESSION / "subagents"
    nested.mkdir(parents=True)
    (nested / "agent-a485154.jsonl").write_text(json.dumps({"sessionId": SESSION, "isSidechain": True}) + "\n")
    (project / "agent-b1.jsonl").write_text(json.dumps({"sessionId": SESSION, "isSidechain": True}) + "\n")
    (project / "agent-b2.jsonl").write_text(json.dumps({"sessionId": "another-session"}) + "\n")
    (project / "other-session.jsonl").write_text(json.dumps({"sessionId": "another-session"}) + "\n")
    files = claude_code.session_files(transcript, SESSION)
    assert [p.relative_to(project).as_posix() for p in files] == [
        f"{SESSION}.jsonl",
        f"{SESSION}/subagents/agent-a485154.jsonl",
        "agent-b1.jsonl",
    ]


def test_codex_notify_finds_the_threads_newest_rollout(tmp_path):
    thread = "019e1625-789d-76c0-80ab-3724b5ddb799"
    day = tmp_path / "sessions" / "2026" / "05" / "11"
    day.mkdir(parents=True)
    older = day / f"rollout-2026-05-11T11-26-55-{thread}.jsonl"
    newer = day / f"rollout-2026-05-11T13-00-00-{thread}.jsonl"
    other = day / "rollout-2026-05-11T12-00-00-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
    for path in (older, newer, other):
        path.write_text("{}\n")
    assert codex.find_rollout(thread, tmp_path) == newer
    assert codex.find_rollout("019e0000-0000-0000-0000-000000000000", tmp_path) is None
    assert codex.find_rollout("../*", tmp_path) is None  # a thread id is never a path pattern
    assert codex.find_rollout("", tmp_path) is None


def test_codex_notify_ignores_other_notifications(capsys, tmp_path):
    settings = claude_code.Settings(url="http://127.0.0.1:9", api_key="k")
    codex.run({"type": "approval-requested", "thread-id": "t"}, settings, tmp_path)
    assert "nothing to do for a 'approval-requested' notification" in capsys.readouterr().err
    codex.run({"type": "agent-turn-complete", "thread-id": "t-unknown"}, settings, tmp_path)
    assert "no rollout for thread 't-unknown'" in capsys.readouterr().err


def test_push_finds_transcripts_in_folders(tmp_path):
    from dreamweb_hooks.push import transcript_files

    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("a/one.jsonl", "a/b/two.json", "a/notes.txt", "three.jsonl"):
        (tmp_path / name).write_text("{}\n")
    found = transcript_files([tmp_path / "a", tmp_path / "three.jsonl"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a/b/two.json", "a/one.jsonl", "three.jsonl"]


@pytest.mark.skipif(not CLAUDE_HOOK.exists(), reason="the hooks are not installed (pip install -e ./clients/python)")
def test_every_agent_program_is_installed_as_a_console_script():
    for name in ("dreamweb-push", "dreamweb-mcp", "dreamweb-claude-code-hook", "dreamweb-codex-notify"):
        assert shutil.which(name, path=str(BIN)), name


def test_codex_notify_pushes_each_rollout_once_it_has_settled(tmp_path, monkeypatch, capsys):
    """A turn is not the end of a session: a rollout is pushed when it has not changed for the settle time, once per
    size; a rollout that grew after its push is reported, not pushed over."""
    import httpx
    from dreamweb_client import DreamwebClient

    pushed: list[tuple[str, bytes]] = []
    conflict = {"on": False}
    names: dict[bytes, str] = {}  # file content -> name, to tell which rollout a request carried

    def api(request: httpx.Request) -> httpx.Response:
        assert request.url.params["format"] == "codex"
        if conflict["on"]:
            return httpx.Response(409, json={"detail": "another version is stored", "code": "conflict"})
        pushed.append((names[request.content], request.content))
        return httpx.Response(201, json={"created": 1, "unchanged": 0, "format": "codex"})

    monkeypatch.setattr(
        codex.Settings, "client", lambda self: DreamwebClient("http://dw", "k", transport=httpx.MockTransport(api))
    )
    settings = codex.Settings(url="http://dw", api_key="k")
    day = tmp_path / "sessions" / "2026" / "05" / "11"
    day.mkdir(parents=True)
    a, b = "019e1625-0000-7000-8000-00000000000a", "019e1625-0000-7000-8000-00000000000b"
    rollout_a, rollout_b = (
        day / f"rollout-2026-05-11T11-00-00-{a}.jsonl",
        day / f"rollout-2026-05-11T12-00-00-{b}.jsonl",
    )
    rollout_a.write_text('{"type":"session_meta"}\n')
    rollout_b.write_text('{"type":"session_meta"}\n{"type":"turn_context"}\n')
    names.update({rollout_a.read_bytes(): rollout_a.name, rollout_b.read_bytes(): rollout_b.name})
    now = rollout_b.stat().st_mtime
    os.utime(rollout_a, (now - 3600, now - 3600))
    turn = {"type": "agent-turn-complete", "turn-id": "1", "cwd": "/app", "input-messages": ["hi"]}

    codex.run({**turn, "thread-id": a}, settings, tmp_path, now=now)  # a settled an hour ago: pushed
    assert [name for name, _ in pushed] == [rollout_a.name] and pushed[0][1] == rollout_a.read_bytes()
    codex.run({**turn, "thread-id": b}, settings, tmp_path, now=now)  # b just changed; a is pushed already
    codex.run({**turn, "thread-id": b}, settings, tmp_path, now=now + 60)
    assert len(pushed) == 1
    codex.run({**turn, "thread-id": a}, settings, tmp_path, now=now + 601)  # b has settled
    assert [name for name, _ in pushed] == [rollout_a.name, rollout_b.name]
    state = json.loads((tmp_path / codex.STATE_FILE).read_text())
    assert state[b] == {"path": str(rollout_b), "pushed": rollout_b.stat().st_size}

    # a was resumed after its push: the server keeps its first version (409), which is said once, not retried.
    with rollout_a.open("a") as f:
        f.write('{"type":"event_msg"}\n')
    os.utime(rollout_a, (now, now))
    conflict["on"] = True
    capsys.readouterr()
    codex.run({**turn, "thread-id": b}, settings, tmp_path, now=now + 1200)
    assert "the server holds another version of this session (another version is stored)" in capsys.readouterr().err
    codex.run({**turn, "thread-id": b}, settings, tmp_path, now=now + 1800)
    assert capsys.readouterr().err == ""

    # With no settle time (one-shot `codex exec`), the thread is pushed after its turn.
    conflict["on"] = False
    monkeypatch.setenv("DREAMWEB_SETTLE_SECONDS", "0")
    with rollout_b.open("a") as f:
        f.write('{"type":"event_msg"}\n')
    names[rollout_b.read_bytes()] = rollout_b.name
    codex.run({**turn, "thread-id": b}, settings, tmp_path, now=now + 1801)
    assert pushed[-1] == (rollout_b.name, rollout_b.read_bytes())


REAL = Path(__file__).resolve().parents[2] / "shared" / "real" / "transcripts"  # CI lays shared/ beside the clone
if not REAL.is_dir():
    REAL = Path("/work/shared/real/transcripts")
PARENT = "e9fb405b-169f-40eb-9396-7e75076f045d"


def _transcript_api() -> bool:
    try:
        from memory.api import session_files  # noqa: F401 - the file upload of POST /sessions/
    except ImportError:
        return False
    return True


@installed
@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not (REAL / "claude-code").is_dir(), reason="shared/real/transcripts not available")
@pytest.mark.skipif(not _transcript_api(), reason="POST /sessions/ does not take transcript files yet")
def test_session_end_stores_a_real_claude_code_session_with_its_subagent(live_server, tmp_path):
    from memory.models import AgentSession

    team = TeamFactory(slug="hook-team")
    _, raw = AgentKey.generate(team=team, name="laptop", scopes=["sessions:write"])
    # Laid out as Claude Code 2.1 writes it: the session file, its subagent under <session id>/subagents/.
    project = tmp_path / ".claude" / "projects" / "-Users-User-app"
    (project / PARENT / "subagents").mkdir(parents=True)
    transcript = project / f"{PARENT}.jsonl"
    shutil.copyfile(REAL / "claude-code" / "codemie-e9fb405b-subagents-turn-2.jsonl", transcript)
    shutil.copyfile(
        REAL / "claude-code" / "codemie-e9fb405b-subagent-agent-a485154.jsonl",
        project / PARENT / "subagents" / "agent-a485154.jsonl",
    )
    document = {
        "session_id": PARENT,
        "transcript_path": str(transcript),
        "cwd": "/Users/User/app",
        "permission_mode": "default",
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    env = hook_env(live_server.url, raw)
    done = run_hook(document, env)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert f"pushed {PARENT}.jsonl: created 1" in done.stderr and "pushed agent-a485154.jsonl: created 1" in done.stderr

    main = AgentSession.objects.get(team=team, external_id=PARENT)
    assert main.agent == "claude-code" and main.event_count > 0
    sub = AgentSession.objects.get(team=team, external_id__startswith=f"{PARENT}:")
    assert sub.metadata.get("parent_session") == PARENT and sub.event_count > 0

    # The hook runs again (a second SessionEnd for the same file): nothing new, nothing lost.
    again = run_hook(document, env)
    assert again.returncode == 0 and "unchanged 1" in again.stderr
    assert AgentSession.objects.filter(team=team).count() == 2


@installed
@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not (REAL / "codex").is_dir(), reason="shared/real/transcripts not available")
@pytest.mark.skipif(not _transcript_api(), reason="POST /sessions/ does not take transcript files yet")
def test_codex_notify_stores_a_real_rollout(live_server, tmp_path):
    from memory.models import AgentSession

    team = TeamFactory(slug="codex-team")
    _, raw = AgentKey.generate(team=team, name="laptop", scopes=["sessions:write"])
    thread = "019e1625-789d-76c0-80ab-3724b5ddb799"
    name = f"rollout-2026-05-11T11-26-55-{thread}.jsonl"
    day = tmp_path / "codex" / "sessions" / "2026" / "05" / "11"
    day.mkdir(parents=True)
    shutil.copyfile(REAL / "codex" / f"codemie-{name}", day / name)
    notification = {
        "type": "agent-turn-complete",
        "thread-id": thread,
        "turn-id": "2",
        "cwd": "/Users/Sample_User/repo",
        "input-messages": ["fix the tests"],
        "last-assistant-message": "Done.",
    }
    env = hook_env(live_server.url, raw, CODEX_HOME=str(tmp_path / "codex"), DREAMWEB_SETTLE_SECONDS="0")
    done = subprocess.run(
        [str(CODEX_NOTIFY), json.dumps(notification)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and f"pushed {name}: created 1" in done.stderr, done.stderr
    session = AgentSession.objects.get(team=team, external_id=thread)
    assert session.agent == "codex" and session.event_count > 0
