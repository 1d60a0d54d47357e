"""A blind probe of the management commands, driven exactly as /work/shared/contracts/README.md writes them.

Written from the contract, docs/session-formats.md and what a user at a terminal expects; not from the source. The
real transcripts are copied into temporary folders, never edited in place. Subprocess tests run
`python manage.py ...` against the test database (committed rows: transactional tests), as the application role.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from dreamweb.models import Team
from memory.models import AgentSession
from tests.conftest import app_credentials, is_postgres
from tests.dream_sessions import mixed_corpus
from tests.factories import TeamFactory
from tests.scoping import all_teams, no_scope

pytestmark = [pytest.mark.all_teams]

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path("/work/shared")
if not SHARED.exists():
    SHARED = ROOT.parent / "shared"
CONTRACTS = SHARED / "contracts"
REAL = SHARED / "real" / "transcripts"
MEMORY_SCHEMA = json.loads((CONTRACTS / "memory.schema.json").read_text())
DREAM_SCHEMA = json.loads((CONTRACTS / "dream-output.schema.json").read_text())
FORMATS = ["dreamweb", "claude-code", "codex", "gemini-cli", "openai-chat", "anthropic-messages"]

CC_SMALL = REAL / "claude-code" / "codemie-4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"
CC_SMALL_ID = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
CC_PARENT = REAL / "claude-code" / "codemie-e9fb405b-subagents-turn-2.jsonl"
CC_SUBAGENT = REAL / "claude-code" / "codemie-e9fb405b-subagent-agent-a485154.jsonl"
CC_PARENT_ID = "e9fb405b-169f-40eb-9396-7e75076f045d"
CC_INLINE = REAL / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
CC_INLINE_ID = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
CODEX = REAL / "codex" / "codemie-rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
CODEX_ID = "019e1695-0522-7c83-8b39-0dd379793f80"
GEMINI = REAL / "entire-cli" / "gemini-cli" / "fa4593e0-f7e1-4dd1-b656-da95fb4d60fa.jsonl"
GEMINI_ID = "fa4593e0-f7e1-4dd1-b656-da95fb4d60fa"

SUBPROCESS = pytest.mark.skipif(not is_postgres(), reason="subprocesses need the PostgreSQL test database")


# --------------------------------------------------------------------------------------------------------- helpers


def cmd(*args) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a command run in this process; a CommandError's message goes to stderr, as
    manage.py would print it."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with no_scope():
            call_command(*args, stdout=out, stderr=err)
    except CommandError as exc:
        code = exc.returncode
        err.write(f"CommandError: {exc}\n")
    return code, out.getvalue(), err.getvalue()


def imp(path, *extra, team="acme") -> tuple[int, str, str]:
    return cmd("import_sessions", str(path), "--team", team, *extra)


def summary(imported: int, unchanged: int, rejected: int) -> str:
    return f"imported {imported}, unchanged {unchanged}, rejected {rejected}\n"


def env() -> dict:
    db = settings.DATABASES["default"]
    app = app_credentials() or {"USER": db["USER"], "PASSWORD": db["PASSWORD"]}
    e = dict(os.environ)
    e.pop("REDIS_URL", None)  # tasks in-process: no worker runs for these subprocesses
    e.pop("DREAMWEB_TEST_DB_NAME", None)
    e["DATABASE_URL"] = (
        f"postgres://{app['USER']}:{app['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    e["PYTHONUNBUFFERED"] = "1"
    return e


def manage(*args, input: str | bytes | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    data = input.encode() if isinstance(input, str) else input
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env(),
        input=data,
        stdin=None if data is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
    )


def _drain(fd: int, sink: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        sink.append(chunk)


def manage_on_terminal(*args, stdout_tty: bool = False, timeout: float = 90) -> tuple[int, str, str]:
    """Run with standard error (and, if asked, standard output) on a pseudo-terminal, as a person at a terminal."""
    err_master, err_slave = pty.openpty()
    out_master = out_slave = None
    if stdout_tty:
        out_master, out_slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=out_slave if stdout_tty else subprocess.PIPE,
        stderr=err_slave,
    )
    os.close(err_slave)
    if out_slave is not None:
        os.close(out_slave)
    err_chunks: list[bytes] = []
    out_chunks: list[bytes] = []
    threads = [threading.Thread(target=_drain, args=(err_master, err_chunks), daemon=True)]
    if stdout_tty:
        threads.append(threading.Thread(target=_drain, args=(out_master, out_chunks), daemon=True))
    for t in threads:
        t.start()
    if stdout_tty:
        proc.wait(timeout=timeout)
    else:
        out_chunks.append(proc.communicate(timeout=timeout)[0])
    for t in threads:
        t.join(timeout=10)
    os.close(err_master)
    if out_master is not None:
        os.close(out_master)
    return proc.returncode, b"".join(out_chunks).decode(errors="replace"), b"".join(err_chunks).decode(errors="replace")


def session(eid: str, agent: str | None = "deploy-bot", **over) -> dict:
    doc = {
        "external_id": eid,
        "agent": agent,
        "events": [
            {"type": "message", "role": "user", "content": f"Ship {eid}."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c1", "content": "ok", "exit_code": 0},
        ],
    }
    if agent is None:
        del doc["agent"]
    doc.update(over)
    return doc


def jsonl(*docs) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)


def stored(team="acme") -> dict[str, AgentSession]:
    with all_teams():
        return {s.external_id: s for s in AgentSession.objects.filter(team__slug=team)}


def copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def openai_chat_doc(conv_id: str | None = "chatcmpl-probe-1") -> dict:
    doc = {
        "model": "gpt-4o-2024-08-06",
        "messages": [
            {"role": "system", "content": "You are the deploy assistant."},
            {"role": "user", "content": "Deploy the web app to staging."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": "make deploy-staging"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc123", "content": "make: *** No rule to make target."},
            {"role": "assistant", "content": "The Makefile has no deploy-staging target."},
        ],
    }
    if conv_id:
        doc["id"] = conv_id
    return doc


def anthropic_doc(conv_id: str = "conv-anthropic-1") -> dict:
    return {
        "id": conv_id,
        "model": "claude-sonnet-4-5",
        "system": "You are a careful coding agent.",
        "messages": [
            {"role": "user", "content": "List the migrations folder."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Listing it."},
                    {"type": "tool_use", "id": "toolu_01A", "name": "bash", "input": {"command": "ls migrations"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A",
                        "content": "ls: migrations: No such file or directory",
                        "is_error": True,
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "There is no migrations folder."}]},
        ],
    }


def _cc_line(kind: str, uuid: str, parent: str | None, sid: str, second: int, message: dict) -> dict:
    line = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/repo",
        "sessionId": sid,
        "version": "2.1.7",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": f"2026-01-05T10:00:{second:02d}.000Z",
    }
    if kind == "assistant":
        line["requestId"] = f"req_{uuid}"
    return line


def claude_remember_file(sid: str = "cc-remember-0001") -> str:
    usage = {"input_tokens": 10, "output_tokens": 5}
    lines = [
        _cc_line("user", "u1", None, sid, 0, {"role": "user", "content": "Staging deploys need the VPN; remember it."}),
        _cc_line(
            "assistant",
            "a1",
            "u1",
            sid,
            1,
            {
                "id": "msg_01",
                "type": "message",
                "model": "claude-sonnet-4-5",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_rem1",
                        "name": "mcp__dreamweb__remember",
                        "input": {"content": "Staging deploys need the VPN connected first."},
                    }
                ],
                "stop_reason": "tool_use",
                "usage": usage,
            },
        ),
        _cc_line(
            "user",
            "u2",
            "a1",
            sid,
            2,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_rem1", "content": "Saved."}]},
        ),
        _cc_line(
            "assistant",
            "a2",
            "u2",
            sid,
            3,
            {
                "id": "msg_02",
                "type": "message",
                "model": "claude-sonnet-4-5",
                "role": "assistant",
                "content": [{"type": "text", "text": "Noted for next time."}],
                "stop_reason": "end_turn",
                "usage": usage,
            },
        ),
    ]
    return jsonl(*lines)


def codex_remember_file(sid: str = "019e0000-aaaa-7000-8000-000000000001") -> str:
    def line(sec, kind, payload):
        return {"timestamp": f"2026-01-05T10:00:{sec:02d}.000Z", "type": kind, "payload": payload}

    note = "Tests need Redis running on port 6379."
    lines = [
        line(
            0,
            "session_meta",
            {
                "id": sid,
                "timestamp": "2026-01-05T10:00:00.000Z",
                "cwd": "/repo",
                "originator": "codex-tui",
                "cli_version": "0.125.0",
                "source": "cli",
                "model_provider": "openai",
            },
        ),
        line(1, "turn_context", {"turn_id": "t1", "cwd": "/repo", "model": "gpt-5-codex", "approval_policy": "never"}),
        line(
            2,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Remember the Redis port."}],
            },
        ),
        line(2, "event_msg", {"type": "user_message", "message": "Remember the Redis port."}),
        line(
            3,
            "response_item",
            {
                "type": "function_call",
                "name": "mcp__dreamweb__remember",
                "arguments": json.dumps({"content": note}),
                "call_id": "call_rem1",
            },
        ),
        line(
            4,
            "event_msg",
            {
                "type": "mcp_tool_call_end",
                "call_id": "call_rem1",
                "invocation": {"server": "dreamweb", "tool": "remember", "arguments": {"content": note}},
                "result": {"Ok": {"content": [{"type": "text", "text": "Saved."}]}},
            },
        ),
        line(4, "response_item", {"type": "function_call_output", "call_id": "call_rem1", "output": "Saved."}),
        line(
            5,
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Saved the note."}]},
        ),
    ]
    return jsonl(*lines)


def table_counts() -> dict[str, int]:
    with all_teams(), connection.cursor() as cursor:
        counts = {}
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
    return counts


@pytest.fixture
def acme(db):
    return TeamFactory(slug="acme")


@pytest.fixture
def acme_tx(transactional_db):
    return TeamFactory(slug="acme")


# ================================================================================= import_sessions: canonical files


def test_summary_line_exact_and_rerun_says_unchanged(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(*(session(f"s-{i}") for i in range(3))))
    assert imp(path) == (0, summary(3, 0, 0), "")
    assert imp(path) == (0, summary(0, 3, 0), "")
    assert len(stored()) == 3


def test_mixed_run_counts_each_kind_in_the_summary(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(session("m-1")))
    imp(path)
    path.write_text(jsonl(session("m-1"), session("m-2")) + "{not json\n" + jsonl(session("m-3")))
    code, out, err = imp(path)
    assert (code, out) == (1, summary(2, 1, 1))
    assert "line 3" in err


def test_same_external_id_with_different_content_is_a_conflict_counted_as_rejected(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(session("c-1")))
    imp(path)
    path.write_text(jsonl(session("c-1", outcome="failure")))
    code, out, err = imp(path)
    assert (code, out) == (1, summary(0, 0, 1))
    assert "conflict" in err and "c-1" in err
    assert stored()["c-1"].outcome == "unknown"  # the stored session is kept


def test_a_conflict_inside_one_file_is_rejected_not_unchanged(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(session("d-1"), session("d-1", agent="other-bot")))
    code, out, err = imp(path)
    assert (code, out) == (1, summary(1, 0, 1)), err
    assert "line 2" in err and "conflict" in err


def test_agent_and_task_only_fill_what_a_canonical_line_leaves_out(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(session("f-1", agent="named-bot", task="named-task"), session("f-2", agent=None)))
    assert imp(path, "--agent", "fallback-bot", "--task", "fallback-task")[:2] == (0, summary(2, 0, 0))
    got = stored()
    assert (got["f-1"].agent, got["f-1"].task) == ("named-bot", "named-task")
    assert (got["f-2"].agent, got["f-2"].task) == ("fallback-bot", "fallback-task")


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_subprocess_exit_status_stdout_and_stderr(acme_tx, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(session("p-1")) + '{"external_id": "p-2", "agent": \n' + jsonl(session("p-3")))
    proc = manage("import_sessions", str(path), "--team", "acme")
    assert proc.returncode == 1
    assert proc.stdout.decode() == summary(2, 0, 1)
    err = proc.stderr.decode()
    assert "line 2" in err and "Traceback" not in err
    path.write_text(jsonl(session("p-1"), session("p-3")))
    proc = manage("import_sessions", str(path), "--team", "acme")
    assert (proc.returncode, proc.stdout.decode(), proc.stderr.decode()) == (0, summary(0, 2, 0), "")


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_subprocess_dash_reads_standard_input(acme_tx):
    proc = manage("import_sessions", "-", "--team", "acme", input=jsonl(session("in-1"), session("in-2")))
    assert (proc.returncode, proc.stdout.decode()) == (0, summary(2, 0, 0)), proc.stderr.decode()
    assert set(stored()) == {"in-1", "in-2"}
    # a pretty-printed Gemini CLI document piped in is one session
    proc = manage("import_sessions", "-", "--team", "acme", input=GEMINI.read_bytes())
    assert (proc.returncode, proc.stdout.decode()) == (0, summary(1, 0, 0)), proc.stderr.decode()
    # a Claude Code transcript piped in is recognised by its content too
    proc = manage("import_sessions", "-", "--team", "acme", input=CC_SMALL.read_bytes())
    assert (proc.returncode, proc.stdout.decode()) == (0, summary(1, 0, 0)), proc.stderr.decode()
    assert CC_SMALL_ID in stored()


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_progress_on_a_terminal_only_and_never_on_stdout(acme_tx, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(*(session(f"t-{i}") for i in range(60))))
    code, out, err = manage_on_terminal("import_sessions", str(path), "--team", "acme")
    assert (code, out) == (0, summary(60, 0, 0))
    assert err.strip(), "nothing was shown on the terminal while importing"
    path.write_text(jsonl(*(session(f"u-{i}") for i in range(60))))
    proc = manage("import_sessions", str(path), "--team", "acme")  # not a terminal: no progress at all
    assert (proc.returncode, proc.stdout.decode(), proc.stderr.decode()) == (0, summary(60, 0, 0), "")


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_on_a_terminal_the_summary_is_printed_once_on_stdout(acme_tx, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(*(session(f"tt-{i}") for i in range(40))))
    code, out, err = manage_on_terminal("import_sessions", str(path), "--team", "acme", stdout_tty=True)
    assert code == 0, err
    assert out.replace("\r\n", "\n") == summary(40, 0, 0)


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_ctrl_c_during_a_long_import_stops_it_promptly(acme_tx, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(jsonl(*(session(f"big-{i}") for i in range(60000))))
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "import_sessions", str(path), "--team", "acme"],
        cwd=ROOT,
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        # (Lead's note: a test run started in the background of a shell ignores SIGINT, and a child inherits that;
        # a terminal's Ctrl-C reaches the command with its default action, as here.)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(slave)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(master, chunks), daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not b"".join(chunks).strip() and proc.poll() is None:
        time.sleep(0.05)
    # (Lead's note: interrupted as soon as progress shows; a pause here let a quiet machine finish 30,000 first.)
    if proc.poll() is not None:
        pytest.skip("the import finished before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("import_sessions kept running 15 s after Ctrl-C")
    finally:
        reader.join(timeout=5)
        os.close(master)
    out = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode == 0 and "imported 60000" in out:
        # (Lead's note: on a loaded machine the import can end between the poll and the signal.)
        pytest.skip("the import finished before the interrupt reached it")
    assert proc.returncode != 0, out


# ===================================================================================== import_sessions: formats


def test_claude_code_real_file_by_content_and_by_name(acme, tmp_path):
    path = copy(CC_SMALL, tmp_path / "a" / "session.jsonl")
    assert imp(path)[:2] == (0, summary(1, 0, 0))
    s = stored()[CC_SMALL_ID]
    assert s.agent == "claude-code"
    assert any(e["type"] == "message" and e["role"] == "user" for e in s.events)
    assert imp(path, "--format", "claude-code") == (0, summary(0, 1, 0), "")


def test_claude_code_with_agent_and_task(acme, tmp_path):
    path = copy(CC_SMALL, tmp_path / "x.jsonl")
    assert imp(path, "--format", "claude-code", "--agent", "backend-dev", "--task", "api")[:2] == (0, summary(1, 0, 0))
    s = stored()[CC_SMALL_ID]
    assert (s.agent, s.task) == ("backend-dev", "api")


def test_codex_real_rollout(acme, tmp_path):
    path = copy(CODEX, tmp_path / "rollout.jsonl")
    assert imp(path, "--format", "codex")[:2] == (0, summary(1, 0, 0))
    s = stored()[CODEX_ID]
    assert s.agent == "codex"
    assert any(e["type"] == "tool_call" for e in s.events)
    assert imp(path)[:2] == (0, summary(0, 1, 0))  # auto finds the same session


def test_gemini_cli_real_session_as_json_and_jsonl(acme, tmp_path):
    path = copy(GEMINI, tmp_path / "gemini" / "session.json")
    assert imp(path, "--format", "gemini-cli")[:2] == (0, summary(1, 0, 0))
    s = stored()[GEMINI_ID]
    assert s.agent == "gemini-cli"
    assert [e["name"] for e in s.events if e["type"] == "tool_call"] == ["write_file"]
    assert imp(copy(GEMINI, tmp_path / "other.jsonl"))[:2] == (0, summary(0, 1, 0))


def test_openai_chat_document_and_jsonl(acme, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(openai_chat_doc(), indent=2))
    code, out, err = imp(path, "--format", "openai-chat")
    assert (code, out) == (0, summary(1, 0, 0)), err
    s = stored()["chatcmpl-probe-1"]
    assert s.agent == "openai-agent"
    kinds = [(e["type"], e.get("role")) for e in s.events]
    assert kinds == [
        ("message", "system"),
        ("message", "user"),
        ("tool_call", None),
        ("tool_result", None),
        ("message", "assistant"),
    ]
    call = next(e for e in s.events if e["type"] == "tool_call")
    assert (call["id"], call["name"], call["arguments"]) == ("call_abc123", "bash", {"command": "make deploy-staging"})
    lines = tmp_path / "chats.jsonl"  # JSON Lines of documents without ids: hashed ids, idempotent
    second = openai_chat_doc(None)
    second["messages"][1]["content"] = "Deploy the API to staging."
    lines.write_text(jsonl(openai_chat_doc(None), second))
    assert imp(lines)[:2] == (0, summary(2, 0, 0))
    assert imp(lines)[:2] == (0, summary(0, 2, 0))


def test_anthropic_messages_document(acme, tmp_path):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(anthropic_doc()))
    code, out, err = imp(path, "--format", "anthropic-messages")
    assert (code, out) == (0, summary(1, 0, 0)), err
    s = stored()["conv-anthropic-1"]
    assert s.agent == "anthropic-agent"
    result = next(e for e in s.events if e["type"] == "tool_result")
    assert result["call_id"] == "toolu_01A" and result["is_error"] is True
    assert imp(path)[:2] == (0, summary(0, 1, 0))  # auto recognises it


def test_an_unknown_format_name_is_refused_listing_the_choices(acme, tmp_path):
    path = tmp_path / "canon.jsonl"
    path.write_text(jsonl(session("dw-x")))
    code, out, err = imp(path, "--format", "cursor")
    assert code != 0 and "cursor" in err and all(f in err for f in FORMATS)
    assert not stored()


def test_the_same_transcript_twice_in_a_folder_is_imported_once(acme, tmp_path):
    copy(CC_SMALL, tmp_path / "d" / "a" / "s.jsonl")
    copy(CC_SMALL, tmp_path / "d" / "b" / "s.jsonl")
    assert imp(tmp_path / "d") == (0, summary(1, 1, 0), "")


def test_dreamweb_format_named_explicitly(acme, tmp_path):
    path = tmp_path / "canon.jsonl"
    path.write_text(jsonl(session("dw-1")))
    assert imp(path, "--format", "dreamweb") == (0, summary(1, 0, 0), "")


def test_a_format_named_that_the_content_is_plainly_not_is_refused(acme, tmp_path):
    path = copy(CODEX, tmp_path / "rollout.jsonl")
    code, out, err = imp(path, "--format", "claude-code")
    assert code != 0
    assert "codex" in err and "claude-code" in err
    assert not stored()


def test_subagent_file_gets_its_own_id_never_the_parents(acme, tmp_path):
    sub = copy(CC_SUBAGENT, tmp_path / "proj" / "agent-a485154.jsonl")
    assert imp(sub)[:2] == (0, summary(1, 0, 0))
    assert list(stored()) == [f"{CC_PARENT_ID}:a485154"]
    parent = copy(CC_PARENT, tmp_path / "proj" / f"{CC_PARENT_ID}.jsonl")
    assert imp(parent)[:2] == (0, summary(1, 0, 0))
    assert set(stored()) == {CC_PARENT_ID, f"{CC_PARENT_ID}:a485154"}


def test_inline_sidechains_are_sessions_of_their_own(acme, tmp_path):
    path = copy(CC_INLINE, tmp_path / "inline.jsonl")
    code, out, err = imp(path)
    assert (code, out) == (0, summary(6, 0, 0)), err
    ids = set(stored())
    assert CC_INLINE_ID in ids
    subs = ids - {CC_INLINE_ID}
    assert len(subs) == 5 and all(i.startswith(CC_INLINE_ID + ":") for i in subs)


def test_remember_in_claude_code_is_an_in_band_note(acme, tmp_path):
    path = tmp_path / "cc.jsonl"
    path.write_text(claude_remember_file())
    code, out, err = imp(path, "--format", "claude-code")
    assert (code, out) == (0, summary(1, 0, 0)), err
    events = stored()["cc-remember-0001"].events
    notes = [e for e in events if e["type"] == "memory_write"]
    assert [n["content"] for n in notes] == ["Staging deploys need the VPN connected first."]
    assert not [e for e in events if e["type"] == "tool_call" and "remember" in e["name"]]
    assert not [e for e in events if e["type"] == "tool_result" and e["call_id"] == "toolu_rem1"]


def test_remember_in_codex_is_an_in_band_note(acme, tmp_path):
    path = tmp_path / "rollout.jsonl"
    path.write_text(codex_remember_file())
    code, out, err = imp(path)
    assert (code, out) == (0, summary(1, 0, 0)), err
    events = stored()["019e0000-aaaa-7000-8000-000000000001"].events
    assert [e["content"] for e in events if e["type"] == "memory_write"] == ["Tests need Redis running on port 6379."]
    assert not [e for e in events if e["type"] == "tool_call" and "remember" in e["name"]]


def _chat_with_remember() -> dict:
    doc = openai_chat_doc("chat-remember-1")
    doc["messages"][2]["tool_calls"].append(
        {
            "id": "call_rem",
            "type": "function",
            "function": {"name": "mcp__dreamweb__remember", "arguments": json.dumps({"content": "Use make ship."})},
        }
    )
    doc["messages"].insert(4, {"role": "tool", "tool_call_id": "call_rem", "content": "Saved."})
    return doc


def _anthropic_with_remember() -> dict:
    doc = anthropic_doc("anth-remember-1")
    doc["messages"][1]["content"].append(
        {
            "type": "mcp_tool_use",
            "id": "mcptoolu_01",
            "name": "remember",
            "server_name": "dreamweb",
            "input": {"content": "Use make ship."},
        }
    )
    doc["messages"][1]["content"].append(
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01", "is_error": False, "content": "Saved."}
    )
    return doc


@pytest.mark.parametrize(
    "fmt,doc",
    [("openai-chat", _chat_with_remember()), ("anthropic-messages", _anthropic_with_remember())],
    ids=["openai-chat", "anthropic-mcp-connector"],
)
def test_remember_in_chat_formats_is_an_in_band_note(acme, tmp_path, fmt, doc):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(doc))
    code, out, err = imp(path, "--format", fmt)
    assert (code, out) == (0, summary(1, 0, 0)), err
    (s,) = stored().values()
    assert [e["content"] for e in s.events if e["type"] == "memory_write"] == ["Use make ship."]
    assert not [e for e in s.events if e["type"] == "tool_call" and "remember" in e["name"]]


def test_gemini_cli_tool_error_is_an_error_result(acme, tmp_path):
    doc = json.loads(GEMINI.read_text())
    call = next(m for m in doc["messages"] if m.get("toolCalls"))["toolCalls"][0]
    call["status"] = "error"
    call["result"][0]["functionResponse"]["response"] = {"error": "Permission denied: test-gemini.txt"}
    doc["sessionId"] = "gemini-error-0001"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc, indent=2))
    code, out, err = imp(path, "--agent", "gem-bot")
    assert (code, out) == (0, summary(1, 0, 0)), err
    s = stored()["gemini-error-0001"]
    assert s.agent == "gem-bot"
    (result,) = [e for e in s.events if e["type"] == "tool_result"]
    assert result["is_error"] is True and "Permission denied" in result["content"]


def test_a_file_in_no_known_format_is_one_error_naming_the_formats(acme, tmp_path):
    path = tmp_path / "mystery.jsonl"
    path.write_text("".join(json.dumps({"hello": i, "world": [i]}) + "\n" for i in range(8)))
    code, out, err = imp(path)
    assert code == 1
    lines = [line for line in err.splitlines() if line.strip()]
    problem = [line for line in lines if "mystery" in line or "format" in line]
    assert len(problem) == 1, err
    assert all(f in problem[0] for f in FORMATS), problem[0]
    assert "line 2" not in err and "line 8" not in err
    assert not stored()


# =================================================================================== import_sessions: directories


def test_directory_recursive_mixed_formats_under_auto(acme, tmp_path):
    d = tmp_path / "transcripts"
    copy(CC_SMALL, d / "a-claude" / "project" / "s.jsonl")
    (d / "b-canonical").mkdir()
    (d / "b-canonical" / "sessions.jsonl").write_text(jsonl(session("dir-1"), session("dir-2")))
    copy(CODEX, d / "c-codex" / "2026" / "05" / "11" / "rollout.jsonl")
    copy(GEMINI, d / "d-gemini" / "session.json")
    (d / "e-chat").mkdir()
    (d / "e-chat" / "chat.json").write_text(json.dumps(openai_chat_doc()))
    (d / "f-anthropic").mkdir()
    (d / "f-anthropic" / "conv.json").write_text(json.dumps(anthropic_doc()))
    (d / "notes.txt").write_text("not a transcript, not read\n")
    (d / ".git").mkdir()
    (d / ".git" / "junk.jsonl").write_text("garbage\n")
    code, out, err = imp(d)
    assert (code, out) == (0, summary(7, 0, 0)), err
    assert set(stored()) == {
        CC_SMALL_ID,
        "dir-1",
        "dir-2",
        CODEX_ID,
        GEMINI_ID,
        "chatcmpl-probe-1",
        "conv-anthropic-1",
    }
    assert imp(d)[:2] == (0, summary(0, 7, 0))


def test_directory_messages_name_each_file_in_name_order(acme, tmp_path):
    d = tmp_path / "dir"
    (d / "b").mkdir(parents=True)
    (d / "a").mkdir()
    (d / "b" / "zz-second.jsonl").write_text('{"nothing": 1}\n{"nothing": 2}\n')
    (d / "a" / "yy-first.json").write_text('{"unknown": true}\n')
    (d / "c.jsonl").write_text(jsonl(session("ok-1")))
    code, out, err = imp(d)
    assert code == 1
    assert out.startswith("imported 1, unchanged 0, ")
    assert "yy-first.json" in err and "zz-second.jsonl" in err
    assert err.index("yy-first.json") < err.index("zz-second.jsonl")
    assert len([line for line in err.splitlines() if "zz-second" in line]) == 1, err


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_directory_with_a_symlink_loop_and_an_unreadable_file(acme_tx, tmp_path):
    d = tmp_path / "dir"
    (d / "sub").mkdir(parents=True)
    (d / "good.jsonl").write_text(jsonl(session("loop-1")))
    os.symlink(".", d / "loop")
    os.symlink("..", d / "sub" / "back")
    os.symlink(tmp_path / "does-not-exist.jsonl", d / "dangling.jsonl")
    # a file that cannot be read (reading it fails with EIO; the tests run as root, so chmod 000 would not do)
    os.symlink("/proc/self/mem", d / "a-unreadable.jsonl")
    proc = manage("import_sessions", str(d), "--team", "acme", timeout=60)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert "Traceback" not in err, err[-3000:]
    assert out.startswith("imported 1, "), (out, err[-3000:])
    assert "a-unreadable.jsonl" in err
    assert proc.returncode == 1
    assert set(stored()) == {"loop-1"}


# ========================================================================================= import_sessions: noise


def test_bom_crlf_and_blank_lines_in_a_canonical_file(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    body = "\r\n".join(json.dumps(session(f"n-{i}")) for i in range(3))
    path.write_bytes(("\ufeff" + body.replace("\r\n", "\r\n\r\n", 1) + "\r\n\r\n").encode())
    assert imp(path) == (0, summary(3, 0, 0), "")


def test_bom_and_crlf_on_a_claude_code_transcript(acme, tmp_path):
    path = tmp_path / "cc.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + CC_SMALL.read_bytes().replace(b"\n", b"\r\n"))
    code, out, err = imp(path)
    assert (code, out) == (0, summary(1, 0, 0)), err
    assert stored()[CC_SMALL_ID].agent == "claude-code"


def test_trailing_garbage_line_in_a_claude_code_transcript(acme, tmp_path):
    path = tmp_path / "cc.jsonl"
    lines = CC_SMALL.read_bytes().count(b"\n")
    path.write_bytes(CC_SMALL.read_bytes() + b"Killed: 9\n")
    code, out, err = imp(path)
    assert out == summary(1, 0, 0), err
    assert f"line {lines + 1}" in err
    assert CC_SMALL_ID in stored()


def test_trailing_garbage_line_in_a_codex_rollout(acme, tmp_path):
    path = tmp_path / "rollout.jsonl"
    lines = CODEX.read_bytes().count(b"\n")
    path.write_bytes(CODEX.read_bytes() + b"Killed: 9\n")
    code, out, err = imp(path)
    assert out == summary(1, 0, 0), err
    assert f"line {lines + 1}" in err
    assert CODEX_ID in stored()


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_nul_padding_at_the_end_of_a_transcript_after_a_crash(acme_tx, tmp_path):
    """A file cut by a crash often ends in a run of NUL bytes (the file system's zero-filled block)."""
    path = tmp_path / "rollout.jsonl"
    lines = CODEX.read_bytes().count(b"\n")
    path.write_bytes(CODEX.read_bytes() + b"\x00" * 64 + b"\n")
    proc = manage("import_sessions", str(path), "--team", "acme", timeout=60)
    out, err = proc.stdout.decode(), proc.stderr.decode(errors="replace")
    assert "Traceback" not in err and "RecursionError" not in err, err[-1500:]
    assert out == summary(1, 0, 0), err[-1500:]
    assert f"line {lines + 1}" in err
    assert CODEX_ID in stored()


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_a_line_of_nul_bytes_in_a_canonical_file_is_one_rejected_line(acme_tx, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(jsonl(session("nul-1")).encode() + b"\x00" * 64 + b"\n" + jsonl(session("nul-3")).encode())
    proc = manage("import_sessions", str(path), "--team", "acme", timeout=60)
    out, err = proc.stdout.decode(), proc.stderr.decode(errors="replace")
    assert (proc.returncode, out) == (1, summary(2, 0, 1)), err[-1500:]
    assert "line 2" in err and "RecursionError" not in err
    assert set(stored()) == {"nul-1", "nul-3"}


def test_truncated_last_line_of_a_transcript_still_being_written(acme, tmp_path):
    raw = CC_SMALL.read_bytes()
    lines = raw.count(b"\n")
    last = raw.rstrip(b"\n").rsplit(b"\n", 1)[1]
    path = tmp_path / "cc.jsonl"
    path.write_bytes(raw + last[: len(last) // 2])
    code, out, err = imp(path)
    assert out == summary(1, 0, 0), err
    assert f"line {lines + 1}" in err
    canon = tmp_path / "c.jsonl"
    canon.write_text(jsonl(session("tr-1"), session("tr-2")) + json.dumps(session("tr-3"))[:40])
    code, out, err = imp(canon)
    assert (code, out) == (1, summary(2, 0, 1))
    assert "line 3" in err


def test_very_long_lines_import(acme, tmp_path):
    big = "x" * 2_000_000
    path = tmp_path / "big.jsonl"
    doc = session("long-1")
    doc["events"][2]["content"] = big
    path.write_text(jsonl(doc, session("long-2")))
    assert imp(path) == (0, summary(2, 0, 0), "")
    assert len(stored()["long-1"].events[2]["content"]) == 2_000_000
    cc = tmp_path / "cc.jsonl"
    cc.write_text(claude_remember_file("cc-long-0001").replace("Saved.", "y" * 1_500_000))
    assert imp(cc)[:2] == (0, summary(1, 0, 0))


def test_non_utf8_bytes_in_a_transcript_do_not_cost_the_session(acme, tmp_path):
    cc = tmp_path / "cc.jsonl"
    cc.write_bytes(claude_remember_file("cc-latin-0001").replace("Noted", "R\u00e9sum\u00e9").encode("latin-1"))
    code, out, err = imp(cc)
    assert (code, out) == (0, summary(1, 0, 0)), err
    assert any("\ufffd" in e.get("content", "") for e in stored()["cc-latin-0001"].events)


def test_non_utf8_bytes_in_a_canonical_line_are_replaced_or_named(acme, tmp_path):
    path = tmp_path / "latin1.jsonl"
    line = json.dumps(session("enc-1")).replace('"ok"', '"caf\u00e9"').encode("latin-1")
    path.write_bytes(line + b"\n" + json.dumps(session("enc-2")).encode() + b"\n")
    code, out, err = imp(path)
    assert "enc-2" in stored()
    if "enc-1" in stored():
        assert (code, out) == (0, summary(2, 0, 0))
        assert "\ufffd" in stored()["enc-1"].events[2]["content"]
    else:
        assert (code, out) == (1, summary(1, 0, 1)) and "line 1" in err


def test_an_empty_file_imports_nothing_cleanly(acme, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert imp(path)[:2] == (0, summary(0, 0, 0))


# ========================================================================================= import/export memory

MEMORY_DOC = {
    "store": "kb",
    "team": "acme",
    "agents": ["deploy-bot", "frontend-bot"],
    "entries": [
        {
            "key": "deploy-command",
            "content": "Deploy with `make deploy` from the repository root.",
            "scope": {"agent": None, "task": None},
            "tags": ["deploy"],
        },
        {
            "key": "use-pnpm",
            "content": "Use pnpm, not npm, in the web/ folder.",
            "scope": {"agent": "frontend-bot", "task": None},
            "tags": [],
        },
        {
            "key": "release-notes",
            "content": "Release notes go in CHANGELOG.md under Unreleased.",
            "scope": {"agent": "deploy-bot", "task": "release"},
            "tags": ["release", "docs"],
        },
        {"key": "staging-vpn", "content": "Staging needs the VPN connected.", "scope": {"agent": "deploy-bot"}},
        {"key": "lint-first", "content": "Run ruff before pushing.", "tags": ["ci"]},
    ],
}


def meaning(doc: dict) -> dict:
    out = {}
    for e in doc["entries"]:
        scope = e.get("scope") or {}
        out[e["key"]] = (e["content"], scope.get("agent"), scope.get("task"), sorted(e.get("tags") or []))
    return out


def export(store="kb", *extra) -> tuple[int, str, str]:
    return cmd("export_memory", "--team", "acme", "--store", store, *extra)


def test_memory_round_trip_json_import_export(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC, indent=2))
    code, out, err = cmd("import_memory", str(path), "--team", "acme")
    assert code == 0, err
    code, out, err = export()
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, MEMORY_SCHEMA)
    assert doc["store"] == "kb"
    assert meaning(doc) == meaning(MEMORY_DOC)
    assert sorted(doc.get("agents") or []) == ["deploy-bot", "frontend-bot"]  # "import sets it when given"
    for e in doc["entries"]:
        digest = hashlib.sha256(e["content"].encode()).hexdigest()
        assert e.get("version") == 1 and digest in e.get("content_hash", ""), e
    # the export imported into another store gives the same export back
    again = tmp_path / "export.json"
    again.write_text(out)
    assert cmd("import_memory", str(again), "--team", "acme", "--store", "kb-copy")[0] == 0
    code, out2, _ = export("kb-copy")
    doc2 = json.loads(out2)
    jsonschema.validate(doc2, MEMORY_SCHEMA)
    assert doc2["store"] == "kb-copy" and meaning(doc2) == meaning(doc)


def test_reimporting_the_same_memory_changes_no_version(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC))
    cmd("import_memory", str(path), "--team", "acme")
    before = json.loads(export()[1])
    assert cmd("import_memory", str(path), "--team", "acme")[0] == 0
    after = json.loads(export()[1])
    assert {e["key"]: e.get("version") for e in after["entries"]} == {
        e["key"]: e.get("version") for e in before["entries"]
    }


def test_importing_a_changed_memory_file_records_a_new_version(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC))
    cmd("import_memory", str(path), "--team", "acme")
    changed = json.loads(json.dumps(MEMORY_DOC))
    changed["entries"][1]["content"] = "Use pnpm 9, not npm or yarn, in the web/ folder."
    path.write_text(json.dumps(changed))
    code, _, err = cmd("import_memory", str(path), "--team", "acme")
    assert code == 0, err
    doc = json.loads(export()[1])
    assert meaning(doc) == meaning(changed)
    versions = {e["key"]: e.get("version") for e in doc["entries"]}
    assert versions["use-pnpm"] == 2 and versions["deploy-command"] == 1


def test_export_to_a_path_with_o(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC))
    cmd("import_memory", str(path), "--team", "acme")
    target = tmp_path / "out" / "kb.json"
    target.parent.mkdir()
    code, out, err = export("kb", "-o", str(target))
    assert code == 0, err
    doc = json.loads(target.read_text())
    jsonschema.validate(doc, MEMORY_SCHEMA)
    assert meaning(doc) == meaning(MEMORY_DOC)
    assert "Use pnpm" not in out  # the document went to the file, not to standard output
    md = tmp_path / "MEMORY.md"
    assert export("kb", "--format", "markdown", "-o", str(md))[0] == 0
    assert "Use pnpm, not npm" in md.read_text()


def test_markdown_export_is_grouped_by_scope(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC))
    cmd("import_memory", str(path), "--team", "acme")
    code, out, err = export("kb", "--format", "markdown")
    assert code == 0, err
    lines = out.splitlines()
    assert lines and lines[0].startswith("#")
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)

    keys = [e["key"] for e in MEMORY_DOC["entries"]]

    def heading_above(text: str) -> str:
        """The nearest heading above the text that is not an entry's own heading (its key)."""
        idx = next(i for i, line in enumerate(lines) if text in line)
        return next(
            lines[j] for j in range(idx, -1, -1) if lines[j].startswith("#") and not any(k in lines[j] for k in keys)
        )

    for e in MEMORY_DOC["entries"]:
        assert e["content"] in out
    # entries of one scope sit under one heading that names it; different scopes under different headings
    vpn, notes = heading_above("Staging needs the VPN"), heading_above("Release notes go in")
    pnpm, glob = heading_above("Use pnpm"), heading_above("Deploy with `make deploy`")
    assert "deploy-bot" in vpn and "frontend-bot" in pnpm
    assert "deploy-bot" in notes and "release" in notes
    assert len({vpn, notes, pnpm, glob}) == 4, (vpn, notes, pnpm, glob)
    assert heading_above("Run ruff before pushing") == glob


@pytest.mark.parametrize(
    "content",
    [
        "{this is not json",
        json.dumps({"store": "kb"}),  # no entries
        json.dumps({"store": "kb", "entries": [{"key": "ok", "content": "fine"}, {"key": "", "content": "x"}]}),
        json.dumps({"store": "kb", "entries": [{"key": "ok", "content": "fine"}, {"key": "empty", "content": ""}]}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"store": "kb", "entries": [{"key": "dup", "content": "one"}, {"key": "dup", "content": "two"}]}),
        json.dumps({"store": "kb", "entries": [{"key": "k" * 201, "content": "too long a key"}]}),
    ],
    ids=["not-json", "no-entries", "empty-key", "empty-content", "array", "duplicate-key", "key-too-long"],
)
def test_a_bad_memory_file_is_one_clear_error_and_changes_nothing(acme, tmp_path, content):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"store": "kb", "entries": [{"key": "keep", "content": "Keep me."}]}))
    cmd("import_memory", str(good), "--team", "acme")
    before_export, before = export()[1], table_counts()
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = cmd("import_memory", str(bad), "--team", "acme")
    assert code != 0
    assert "CommandError" in err and err.count("\n") <= 3, err
    assert table_counts() == before
    assert meaning(json.loads(export()[1])) == meaning(json.loads(before_export))
    # and into a store that does not exist yet: no store is created
    code, _, _ = cmd("import_memory", str(bad), "--team", "acme", "--store", "fresh")
    assert code != 0 and export("fresh")[0] != 0


def test_an_empty_store_exports_a_valid_document(acme, tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"store": "blank", "entries": []}))
    code, _, err = cmd("import_memory", str(path), "--team", "acme")
    assert code == 0, err
    code, out, err = export("blank")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, MEMORY_SCHEMA)
    assert doc["store"] == "blank" and doc["entries"] == []


def test_export_to_a_folder_that_does_not_exist_is_a_clear_error(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC))
    cmd("import_memory", str(path), "--team", "acme")
    code, out, err = export("kb", "-o", str(tmp_path / "no" / "such" / "dir" / "kb.json"))
    assert code != 0 and "kb.json" in err


def test_memory_commands_refuse_unknown_team_and_store(acme, tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(MEMORY_DOC))
    code, _, err = cmd("import_memory", str(path), "--team", "ghost")
    assert code != 0 and "ghost" in err
    code, out, err = cmd("export_memory", "--team", "acme", "--store", "nope")
    assert code != 0 and "nope" in err and out == ""
    code, _, err = cmd("import_memory", str(tmp_path / "missing.json"), "--team", "acme")
    assert code != 0 and "missing.json" in err


# ====================================================================================================== dream


def import_corpus(tmp_path: Path, prefix: str = "a") -> int:
    path = tmp_path / f"corpus-{prefix}.jsonl"
    docs = mixed_corpus(prefix)
    path.write_text(jsonl(*docs))
    code, out, err = imp(path)
    assert code == 0, err
    return len(docs)


def store_for_dream(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    path.write_text(
        json.dumps({"store": "eng", "entries": [{"key": "deploy-command", "content": "Deploy with make."}]})
    )
    assert cmd("import_memory", str(path), "--team", "acme")[0] == 0


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_dream_json_dry_run_one_document_on_stdout_and_persists_nothing(acme_tx, tmp_path):
    n = import_corpus(tmp_path)
    store_for_dream(tmp_path)
    before = table_counts()
    proc = manage("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json", "--all-sessions")
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err
    doc = json.loads(out)  # exactly one JSON document
    jsonschema.validate(doc, DREAM_SCHEMA)
    assert doc["store"] == "eng"
    assert doc["run"]["sessions_selected"] == n
    assert doc["proposals"] and {p["status"] for p in doc["proposals"]} == {"preview"}
    ids = {d["external_id"] for d in mixed_corpus("a")}
    for p in doc["proposals"]:
        assert set(p["supporting_sessions"]) <= ids, p
        assert p["prevalence"]["sessions"] == len(set(p["supporting_sessions"])) <= p["prevalence"]["of"] <= n, p
    assert err.strip(), "no progress or log on standard error"
    assert table_counts() == before


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_dream_json_on_a_terminal_keeps_stdout_pure(acme_tx, tmp_path):
    import_corpus(tmp_path)
    store_for_dream(tmp_path)
    code, out, err = manage_on_terminal(
        "dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json", stdout_tty=True
    )
    assert code == 0, err
    doc = json.loads(out.replace("\r\n", "\n"))
    jsonschema.validate(doc, DREAM_SCHEMA)


@pytest.mark.django_db(transaction=True)
def test_dream_max_sessions_default_selection_and_all_sessions(acme_tx, tmp_path):
    n = import_corpus(tmp_path)
    store_for_dream(tmp_path)
    code, out, err = cmd(
        "dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json", "--max-sessions", "3"
    )
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, DREAM_SCHEMA)
    assert doc["run"]["sessions_selected"] == 3
    # a real cycle of 3 consumes those 3 only; the next considers the rest
    code, out, err = cmd("dream", "--team", "acme", "--store", "eng", "--format", "json", "--max-sessions", "3")
    assert code == 0, err
    assert json.loads(out)["run"]["sessions_selected"] == 3
    code, out, _ = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json")
    assert json.loads(out)["run"]["sessions_selected"] == n - 3
    code, out, err = cmd("dream", "--team", "acme", "--store", "eng", "--format", "json")
    assert code == 0, err
    real = json.loads(out)
    jsonschema.validate(real, DREAM_SCHEMA)
    assert real["run"]["sessions_selected"] == n - 3
    assert "preview" not in {p["status"] for p in real["proposals"]}
    code, out, _ = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json")
    assert json.loads(out)["run"]["sessions_selected"] == 0
    code, out, _ = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json", "--all-sessions")
    assert json.loads(out)["run"]["sessions_selected"] == n
    # a dry run consumed nothing: new sessions are still selected by default after one
    extra = tmp_path / "extra.jsonl"
    # Other runs (another day): b-cmd-0 would otherwise be s-cmd-0 again (same agent, start and events), a copy that
    # a dream reads once (docs/dream-pipeline.md, "One run, one session").
    extra.write_text(
        jsonl(*[{**d, "started_at": d["started_at"].replace("03-01", "03-02")} for d in mixed_corpus("b", n_each=1)])
    )
    imp(extra)
    cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json")
    code, out, _ = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json")
    assert json.loads(out)["run"]["sessions_selected"] == len(mixed_corpus("b", n_each=1))


def test_dream_of_a_store_with_no_sessions_is_still_one_valid_document(acme, tmp_path):
    store_for_dream(tmp_path)
    code, out, err = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, DREAM_SCHEMA)
    assert doc["run"]["sessions_selected"] == 0 and doc["proposals"] == []
    code, out, err = cmd(
        "dream", "--team", "acme", "--store", "eng", "--dry-run", "--format", "json", "--analyzer", "rules"
    )
    assert code == 0, err
    assert json.loads(out)["run"]["analyzer"].startswith("rules")


def test_dream_text_format_is_text(acme, tmp_path):
    import_corpus(tmp_path)
    store_for_dream(tmp_path)
    for extra in ([], ["--format", "text"]):
        code, out, err = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", *extra)
        assert code == 0, err
        assert out.strip() and not out.lstrip().startswith("{")


def test_dream_refuses_a_negative_max_sessions_clearly(acme, tmp_path):
    store_for_dream(tmp_path)
    code, out, err = cmd("dream", "--team", "acme", "--store", "eng", "--dry-run", "--max-sessions", "-3")
    assert code != 0 and "max-sessions" in err and out == ""


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_dream_unknown_team_or_store_is_a_clear_nonzero_error(acme_tx):
    for args, name in (
        (["--team", "ghost", "--store", "eng"], "ghost"),
        (["--team", "acme", "--store", "no-such-store"], "no-such-store"),
    ):
        proc = manage("dream", *args, "--format", "json")
        err = proc.stderr.decode()
        assert proc.returncode != 0
        assert name in err and "Traceback" not in err, err
        assert proc.stdout.decode() == ""


# ========================================================================================= create_team, keys


def test_create_agent_key_for_an_unknown_team_is_a_clear_error(db):
    code, out, err = cmd("create_agent_key", "--team", "ghost", "--name", "bot")
    assert code != 0 and "ghost" in err and out == ""


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_create_team_twice_is_a_no_op(transactional_db):
    first = manage("create_team", "globex", "--name", "Globex Corp")
    assert first.returncode == 0, first.stderr.decode()
    second = manage("create_team", "globex", "--name", "Other Name")
    assert second.returncode == 0, second.stderr.decode()
    assert "Traceback" not in second.stderr.decode()
    with all_teams():
        assert list(Team.objects.filter(slug="globex").values_list("name", flat=True)) == ["Globex Corp"]


@SUBPROCESS
@pytest.mark.django_db(transaction=True)
def test_create_agent_key_prints_it_once_and_it_works_against_the_api(acme_tx):
    proc = manage("create_agent_key", "--team", "acme", "--name", "ci-bot")
    assert proc.returncode == 0, proc.stderr.decode()
    out, err = proc.stdout.decode(), proc.stderr.decode()
    key = out.strip()
    assert key and "\n" not in key and " " not in key, out
    assert (out + err).count(key) == 1
    client = Client()
    ok = client.get("/api/v1/ping/", HTTP_AUTHORIZATION=f"Api-Key {key}")
    assert ok.status_code == 200, ok.content
    assert client.get("/api/v1/ping/", HTTP_AUTHORIZATION=f"Api-Key {key}x").status_code in (401, 403)
    # the key can push a session, which an import then sees as unchanged
    pushed = client.post(
        "/api/v1/sessions/", data=json.dumps(session("api-1")), content_type="application/json",
        HTTP_AUTHORIZATION=f"Api-Key {key}",
    )  # fmt: skip
    assert pushed.status_code in (200, 201), pushed.content
    proc = manage("import_sessions", "-", "--team", "acme", input=jsonl(session("api-1")))
    assert (proc.returncode, proc.stdout.decode()) == (0, summary(0, 1, 0))
