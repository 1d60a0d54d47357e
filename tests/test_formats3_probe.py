"""Blind probe of `import_sessions` on transcript forms the earlier probes did not cover (probe 27, "formats").

Gemini CLI sessions, checkpoints and project folders; OpenAI Chat / Responses exports in their less common shapes;
Anthropic Messages with server tools, documents, search results and errors; newer Claude Code and Codex records;
and, across formats, CRLF, truncation, metadata-only files, copies, mixed folders, unicode and very long messages.

Every case drives the command as a user would (files built in tmp_path) and asserts what docs/session-formats.md,
contracts/README.md and shared/real/transcripts/FORMATS.md promise; where they are silent, nothing silently lost,
or one clear message naming the file, and never a traceback. Of its 76 cases 10 failed on the code probed (first
run): results' error/exit JSON not read for Responses items, refusal parts and audio transcripts dropped, Anthropic
server-tool results (web search error, web fetch text, code execution, search_result title/source) emptied or
stripped, and Claude Code `!` shell output / local-command output kept as the person's words or with CLI tags.
All ten are fixed; tests/test_importer_families3.py tests each family with cases of its own."""

from __future__ import annotations

import io
import json
import traceback
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory.models import AgentSession
from tests.factories import TeamFactory
from tests.scoping import no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

FORMAT_NAMES = ("dreamweb", "claude-code", "codex", "gemini-cli", "openai-chat", "anthropic-messages")

# text with emoji (incl. ZWJ sequence and skin tone), RTL (Hebrew, Arabic), combining marks (decomposed, not NFC)
UNI = "déjà vu 👩🏽‍💻🚀 שלום עולם مرحبا e\u0301 a\u0308 Z\u0336a\u0334l\u0337g\u0335o"


# ----------------------------------------------------------------------------------------------------------------
# driving the command (same style as tests/test_importer_variants_probe.py)


def run_import(path, team="acme", **kwargs):
    """(exit code, stdout, stderr). Any exception other than the documented exit-1 CommandError is a crash."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with no_scope():
            call_command("import_sessions", str(path), "--team", team, stdout=out, stderr=err, **kwargs)
    except CommandError as exc:
        if getattr(exc, "returncode", 1) != 1 or "rejected" not in str(exc):
            pytest.fail(f"CommandError instead of a per-file report: {exc!r}\nstderr: {err.getvalue()}")
        code = exc.returncode
    except Exception:  # noqa: BLE001
        pytest.fail(f"import_sessions crashed:\n{traceback.format_exc()}\nstderr: {err.getvalue()}")
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


def ok1(result):
    code, out, err = result
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    return err


def stored(eid: str) -> AgentSession:
    return AgentSession.objects.get(external_id=eid)


def ids() -> list[str]:
    return sorted(AgentSession.objects.values_list("external_id", flat=True))


def msgs(s: AgentSession, role: str | None = None) -> list[tuple[str, str]]:
    return [
        (e["role"], e["content"]) for e in s.events if e["type"] == "message" and (role is None or e["role"] == role)
    ]


def of_type(s: AgentSession, kind: str) -> list[dict]:
    return [e for e in s.events if e["type"] == kind]


def kinds(s: AgentSession) -> list[str]:
    return [e["type"] if e["type"] != "message" else f"message:{e['role']}" for e in s.events]


def write_jsonl(path: Path, *lines, eol="\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((ln if isinstance(ln, str) else json.dumps(ln, ensure_ascii=False)) + eol for ln in lines)
    path.write_bytes(text.encode())
    return path


def write_json(path: Path, doc, indent=None, eol="\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    if eol != "\n":
        text = text.replace("\n", eol)
    path.write_bytes(text.encode())
    return path


def assert_clear_error_naming(path: Path, code: int, err: str):
    assert code == 1, err
    assert path.name in err, err
    assert "Traceback" not in err


@pytest.fixture
def acme():
    return TeamFactory(slug="acme")


# ----------------------------------------------------------------------------------------------------------------
# builders


def gem_msg(i, kind, content, **extra):
    return {"id": f"m{i}", "timestamp": f"2026-03-01T10:00:{i:02d}.000Z", "type": kind, "content": content, **extra}


def gem_call(cid, name, args, output=None, *, status="success", error=None):
    response = {"output": output} if error is None else {"error": error}
    return {
        "id": cid,
        "name": name,
        "args": args,
        "result": [{"functionResponse": {"id": cid, "name": name, "response": response}}],
        "status": status,
        "timestamp": "2026-03-01T10:00:05.000Z",
        "displayName": name,
        "renderOutputAsMarkdown": True,
    }


def gem_doc(sid="gem-s1", messages=None):
    return {
        "sessionId": sid,
        "projectHash": "7e89aa",
        "startTime": "2026-03-01T10:00:00.000Z",
        "lastUpdated": "2026-03-01T10:09:00.000Z",
        "messages": messages
        if messages is not None
        else [gem_msg(1, "user", "List files."), gem_msg(2, "gemini", "Here they are.", model="gemini-2.5-pro")],
    }


_n = iter(range(1, 1_000_000))


def cc_line(kind, message=None, *, sid="cc-s1", parent=None, **extra):
    i = next(_n)
    out = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/proj",
        "sessionId": sid,
        "version": "2.1.7",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"u-{sid}-{i:06d}",
        "timestamp": f"2026-03-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.000Z",
    }
    if message is not None:
        out["message"] = message
    out.update(extra)
    return out


def cc_user(content, **extra):
    return cc_line("user", {"role": "user", "content": content}, **extra)


def cc_asst(mid, *blocks, **extra):
    message = {
        "id": mid,
        "model": "claude-sonnet-4-5",
        "role": "assistant",
        "type": "message",
        "content": list(blocks),
        "stop_reason": None,
        "usage": {"input_tokens": 7, "output_tokens": 3},
    }
    return cc_line("assistant", message, requestId=f"req_{mid}", **extra)


def txt(t):
    return {"type": "text", "text": t}


def cx(kind, payload, ts="2026-05-11T10:00:00.000Z"):
    return {"timestamp": ts, "type": kind, "payload": payload}


def cx_meta(sid="cx-s1"):
    return cx(
        "session_meta",
        {
            "id": sid,
            "timestamp": "2026-05-11T10:00:00.000Z",
            "cwd": "/home/dev/proj",
            "originator": "codex_cli_rs",
            "cli_version": "0.130.0",
            "source": "cli",
            "model_provider": "openai",
            "base_instructions": {"text": "You are Codex."},
            "git": {"commit_hash": "abc", "branch": "main", "repository_url": "https://example.com/r.git"},
        },
    )


def cx_msg(role, text):
    kind = "output_text" if role == "assistant" else "input_text"
    return cx("response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


def cx_user(text):
    return [cx_msg("user", text), cx("event_msg", {"type": "user_message", "message": text, "images": []})]


def cx_turn(model="gpt-5.1-codex", effort="high"):
    return cx(
        "turn_context",
        {
            "turn_id": "t1",
            "cwd": "/home/dev/proj",
            "model": model,
            "effort": effort,
            "approval_policy": "on-request",
            "sandbox_policy": {"type": "workspace-write"},
            "summary": "auto",
        },
    )


# ================================================================================================================
# Gemini CLI


def test_gemini_tool_calls_results_errors_exit_code_thoughts_and_system_kinds(acme, tmp_path):
    """docs/session-formats.md, Gemini CLI: each toolCalls entry a call and its result; status error or a
    functionResponse.response.error is an error; the shell tool's `Exit Code: N` becomes exit_code; info/error/warning
    are system text; thoughts are dropped; order kept."""
    shell_out = "Command: pytest -q\nDirectory: (root)\nStdout: 1 failed\nStderr: (empty)\nError: (none)\nExit Code: 1"
    messages = [
        gem_msg(1, "user", "Run the tests."),
        gem_msg(2, "info", "Switched to fallback model."),
        gem_msg(
            3,
            "gemini",
            "",
            toolCalls=[
                gem_call("run_shell_command-1", "run_shell_command", {"command": "pytest -q"}, shell_out),
                gem_call("read_file-2", "read_file", {"absolute_path": "/x/a.py"}, error="File not found: /x/a.py"),
                gem_call("write_file-3", "write_file", {"file_path": "b.py"}, "denied", status="error"),
            ],
            thoughts=[{"subject": "Planning", "description": "SECRET-THOUGHT", "timestamp": "2026-03-01T10:00:03Z"}],
            model="gemini-2.5-pro",
            tokens={"input": 100, "output": 5, "cached": 0, "thoughts": 7, "tool": 0, "total": 112},
        ),
        gem_msg(4, "warning", "Loop detected."),
        gem_msg(5, "error", "Quota exceeded."),
        gem_msg(6, "gemini", "One test fails.", model="gemini-2.5-pro", tokens={"input": 200, "output": 9}),
    ]
    ok1(run_import(write_json(tmp_path / "session-1.json", gem_doc(messages=messages), indent=2)))
    s = stored("gem-s1")
    assert s.agent == "gemini-cli"
    assert kinds(s) == [
        "message:user",
        "message:system",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "message:system",
        "message:system",
        "message:assistant",
    ], kinds(s)
    assert "SECRET-THOUGHT" not in json.dumps(s.events)
    calls = of_type(s, "tool_call")
    assert [(c["id"], c["name"]) for c in calls] == [
        ("run_shell_command-1", "run_shell_command"),
        ("read_file-2", "read_file"),
        ("write_file-3", "write_file"),
    ]
    assert calls[0]["arguments"] == {"command": "pytest -q"}
    res = of_type(s, "tool_result")
    assert [r["call_id"] for r in res] == [c["id"] for c in calls]
    assert res[0].get("exit_code") == 1 and res[0].get("is_error") is True, res[0]
    assert res[1].get("is_error") is True and "File not found" in res[1]["content"], res[1]
    assert res[2].get("is_error") is True, res[2]
    assert s.model == "gemini-2.5-pro"
    assert s.metadata.get("projectHash") == "7e89aa" or "7e89aa" in json.dumps(s.metadata), s.metadata


def test_gemini_tokens_are_summed_into_metadata_usage(acme, tmp_path):
    """docs: Gemini `tokens` are summed into metadata.usage."""
    messages = [
        gem_msg(1, "user", "hi"),
        gem_msg(2, "gemini", "a", tokens={"input": 1000, "output": 11, "total": 1011}),
        gem_msg(3, "user", "again"),
        gem_msg(4, "gemini", "b", tokens={"input": 2000, "output": 22, "total": 2022}),
    ]
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc(messages=messages))))
    usage = stored("gem-s1").metadata.get("usage")
    assert isinstance(usage, dict), stored("gem-s1").metadata
    vals = set(usage.values())
    assert {3000, 33} <= vals, usage


def test_gemini_content_as_a_list_of_parts_keeps_the_text(acme, tmp_path):
    """Newer Gemini CLI writes a message's `content` as a PartListUnion (`[{"text": ...}]`). Docs silent: the text
    must not be lost."""
    messages = [
        gem_msg(1, "user", [{"text": "Explain "}, {"text": "this repo."}]),
        gem_msg(2, "gemini", [{"text": "It is a Django app."}]),
    ]
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc(messages=messages))))
    m = msgs(stored("gem-s1"))
    assert [r for r, _ in m] == ["user", "assistant"], m
    assert "Explain" in m[0][1] and "this repo." in m[0][1], m
    assert m[1][1] == "It is a Django app."


def test_gemini_cancelled_tool_call_without_result_is_kept(acme, tmp_path):
    """A call the person cancelled (status `cancelled`, no functionResponse) is still a call: nothing lost."""
    call = gem_call("replace-1", "replace", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, "n/a")
    call["status"] = "cancelled"
    call["result"] = []
    messages = [gem_msg(1, "user", "Edit a.py"), gem_msg(2, "gemini", "", toolCalls=[call]), gem_msg(3, "user", "stop")]
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc(messages=messages))))
    s = stored("gem-s1")
    assert [c["name"] for c in of_type(s, "tool_call")] == ["replace"]
    assert msgs(s) == [("user", "Edit a.py"), ("user", "stop")]


def test_gemini_dreamweb_remember_call_is_a_memory_write(acme, tmp_path):
    """docs: in every format, a call of Dreamweb's MCP tool remember (`mcp__dreamweb__remember`) is a memory_write;
    its result dropped."""
    call = gem_call("mcp-1", "mcp__dreamweb__remember", {"content": "Use uv, not pip."}, "saved")
    messages = [gem_msg(1, "user", "Note that."), gem_msg(2, "gemini", "", toolCalls=[call])]
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc(messages=messages))))
    s = stored("gem-s1")
    (note,) = of_type(s, "memory_write")
    assert note["content"] == "Use uv, not pip."
    assert of_type(s, "tool_result") == []


def test_gemini_chat_checkpoint_file_of_contents_with_parts(acme, tmp_path):
    """`/chat save tag` writes ~/.gemini/tmp/<hash>/checkpoint-tag.json: a list of Content objects (`role`
    user/model, `parts` with text, `thought` parts, `functionCall`, `functionResponse`). The docs name only the
    session file: imported with nothing lost (calls and results in order, thoughts dropped), or one clear error
    naming the file; never a wrong, empty session."""
    checkpoint = [
        {"role": "user", "parts": [{"text": "Find TODOs."}]},
        {
            "role": "model",
            "parts": [
                {"text": "SECRET-THOUGHT planning", "thought": True},
                {"text": "Searching."},
                {"functionCall": {"id": "fc1", "name": "search_file_content", "args": {"pattern": "TODO"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "fc1", "name": "search_file_content", "response": {"output": "a.py:3"}}}
            ],
        },
        {"role": "model", "parts": [{"text": "One TODO in a.py."}]},
    ]
    path = write_json(tmp_path / "checkpoint-todo.json", checkpoint, indent=2)
    code, out, err = run_import(path)
    if code:
        assert_clear_error_naming(path, code, err)
        assert AgentSession.objects.count() == 0
        return
    assert out == "imported 1, unchanged 0, rejected 0\n", err
    (s,) = AgentSession.objects.all()
    assert kinds(s) == ["message:user", "message:assistant", "tool_call", "tool_result", "message:assistant"], kinds(s)
    assert "SECRET-THOUGHT" not in json.dumps(s.events)
    assert of_type(s, "tool_call")[0]["arguments"] == {"pattern": "TODO"}
    assert "a.py:3" in of_type(s, "tool_result")[0]["content"]


def test_gemini_project_folder_with_chats_and_logs_json(acme, tmp_path):
    """~/.gemini/tmp/<hash>/ holds chats/session-*.json (one per session) and logs.json (a list of the person's
    prompts across sessions). Importing the folder imports each chat once; logs.json must not make bogus sessions
    (docs: a file in no known format is one clear error naming it)."""
    root = tmp_path / "7e89aa"
    write_json(root / "chats" / "session-2026-03-01T10-00-aaaa.json", gem_doc("gem-a"), indent=2)
    write_json(root / "chats" / "session-2026-03-02T10-00-bbbb.json", gem_doc("gem-b"), indent=2)
    logs = [
        {"sessionId": "gem-a", "messageId": 0, "type": "user", "message": "List files.", "timestamp": "2026-03-01"},
        {"sessionId": "gem-b", "messageId": 0, "type": "user", "message": "List files.", "timestamp": "2026-03-02"},
    ]
    write_json(root / "logs.json", logs, indent=2)
    code, out, err = run_import(tmp_path)
    assert ids() == ["gem-a", "gem-b"], (out, err)
    assert out.startswith("imported 2, unchanged 0, rejected "), (out, err)
    if code:
        assert "logs.json" in err, err
    # re-import adds nothing
    code2, out2, err2 = run_import(tmp_path)
    assert out2.startswith("imported 0, unchanged 2, rejected "), (out2, err2)


def test_gemini_same_session_copied_in_two_files_is_one_session(acme, tmp_path):
    """Idempotent on external_id: the same session in two files is stored once, the second `unchanged`."""
    write_json(tmp_path / "a" / "session-1.json", gem_doc(), indent=2)
    write_json(tmp_path / "b" / "session-1.json", gem_doc())
    code, out, err = run_import(tmp_path)
    assert (code, out) == (0, "imported 1, unchanged 1, rejected 0\n"), err
    assert ids() == ["gem-s1"]


def test_gemini_crlf_pretty_printed_session(acme, tmp_path):
    """A session saved with Windows line endings reads the same."""
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc(), indent=2, eol="\r\n")))
    assert msgs(stored("gem-s1")) == [("user", "List files."), ("assistant", "Here they are.")]


def test_gemini_truncated_document_is_a_clear_error_and_the_other_files_import(acme, tmp_path):
    """A session file still being written (cut mid-document) cannot be read: one clear error naming the file, the
    other files of the folder still import, exit 1."""
    text = json.dumps(gem_doc("gem-cut"), indent=2)
    bad = tmp_path / "a-session-cut.json"
    bad.write_text(text[: len(text) // 2])
    write_json(tmp_path / "b-session-ok.json", gem_doc("gem-ok"), indent=2)
    code, out, err = run_import(tmp_path)
    assert ids() == ["gem-ok"], (out, err)
    assert out == "imported 1, unchanged 0, rejected 1\n", (out, err)
    assert_clear_error_naming(bad, code, err)


def test_gemini_session_with_no_messages_is_not_a_crash(acme, tmp_path):
    """A file of only metadata (a session started and left): nothing to import, no traceback; if refused, the
    message names the file."""
    path = write_json(tmp_path / "session-empty.json", gem_doc("gem-empty", messages=[]), indent=2)
    code, out, err = run_import(path)
    if code:
        assert_clear_error_naming(path, code, err)
    else:
        assert out in ("imported 0, unchanged 0, rejected 0\n", "imported 1, unchanged 0, rejected 0\n"), err


def test_gemini_agent_and_task_options(acme, tmp_path):
    """contracts/README.md: formats that do not name the agent take --agent; --task names the task."""
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc()), agent="researcher", task="triage"))
    s = stored("gem-s1")
    assert (s.agent, s.task) == ("researcher", "triage")


# ================================================================================================================
# OpenAI chat / Responses


def _chat(cid, *messages, **extra):
    return {"id": cid, "model": "gpt-4o", "messages": list(messages), **extra}


def test_openai_tool_call_with_invalid_json_arguments_keeps_the_call_and_its_text(acme, tmp_path):
    """Models do emit invalid JSON in `arguments` (cut at max_tokens, single quotes). The call must be kept with its
    name and the raw text, not dropped and not the whole conversation refused."""
    bad = "{'path': 'a.py', \"mode\": "
    doc = _chat(
        "oa-badargs",
        {"role": "user", "content": "Open a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "open_file", "arguments": bad}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "error: bad arguments"},
        {"role": "assistant", "content": "Retrying."},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    s = stored("oa-badargs")
    (call,) = of_type(s, "tool_call")
    assert (call["id"], call["name"]) == ("call_1", "open_file")
    assert "'path': 'a.py'" in json.dumps(call["arguments"], ensure_ascii=False), call
    assert kinds(s) == ["message:user", "tool_call", "tool_result", "message:assistant"], kinds(s)


def test_openai_content_parts_with_input_audio_and_image_keep_text_in_order(acme, tmp_path):
    """`content` as a list of parts (text, image_url, input_audio, file): the text parts are the message, in order;
    the media do not make the conversation fail."""
    doc = _chat(
        "oa-parts",
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "First part."},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/x.png", "detail": "high"}},
                {"type": "file", "file": {"file_id": "file-abc", "filename": "spec.pdf"}},
                {"type": "text", "text": "Second part."},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Got both."}]},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    m = msgs(stored("oa-parts"))
    assert m[0][0] == "user" and m[0][1].index("First part.") < m[0][1].index("Second part."), m
    assert "UklGRg==" not in m[0][1]
    assert m[-1] == ("assistant", "Got both.")


def test_openai_refusal_is_not_lost(acme, tmp_path):
    """An assistant message with `content: null` and a `refusal` string: the model's turn is its refusal; dropping it
    would make the conversation end on the person's question (docs silent: nothing lost)."""
    doc = _chat(
        "oa-refusal",
        {"role": "user", "content": "Write malware."},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    m = msgs(stored("oa-refusal"))
    assert m[0] == ("user", "Write malware.")
    assert len(m) == 2 and m[1][0] == "assistant" and "I can't help with that." in m[1][1], m


def test_openai_refusal_content_part_is_not_lost(acme, tmp_path):
    """The same refusal as a content part (`{"type": "refusal", "refusal": ...}`), as the API returns it in parts."""
    doc = _chat(
        "oa-refusal2",
        {"role": "user", "content": "Write malware."},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I won't do that."}]},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    m = msgs(stored("oa-refusal2"))
    assert len(m) == 2 and "I won't do that." in m[1][1], m


def test_openai_name_on_messages_and_developer_role(acme, tmp_path):
    """`name` on messages (multi-party chats) and the `developer` role (docs: system and developer are system)."""
    doc = _chat(
        "oa-names",
        {"role": "developer", "content": "Answer tersely."},
        {"role": "user", "name": "alice", "content": "Status?"},
        {"role": "user", "name": "bob", "content": "And the build?"},
        {"role": "assistant", "name": "ops_bot", "content": "Green."},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    assert msgs(stored("oa-names")) == [
        ("system", "Answer tersely."),
        ("user", "Status?"),
        ("user", "And the build?"),
        ("assistant", "Green."),
    ]


def test_openai_pretty_printed_list_of_conversations_is_one_session_each(acme, tmp_path):
    """docs: a file may hold a JSON array of documents (several chat logs): each is a session."""
    convs = [
        _chat(f"oa-list-{i}", {"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"})
        for i in range(3)
    ]
    code, out, err = run_import(write_json(tmp_path / "chats.json", convs, indent=2))
    assert (code, out) == (0, "imported 3, unchanged 0, rejected 0\n"), err
    for i in range(3):
        assert msgs(stored(f"oa-list-{i}")) == [("user", f"q{i}"), ("assistant", f"a{i}")]


def test_openai_parallel_tool_calls_answered_out_of_order(acme, tmp_path):
    """Two tool_calls in one message answered in the other order: both calls and both results kept, each result
    linked to its call by id."""
    doc = _chat(
        "oa-parallel",
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c_oslo", "type": "function", "function": {"name": "wx", "arguments": '{"city":"Oslo"}'}},
                {"id": "c_rome", "type": "function", "function": {"name": "wx", "arguments": '{"city":"Rome"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c_rome", "content": "25C"},
        {"role": "tool", "tool_call_id": "c_oslo", "content": "-3C"},
        {"role": "assistant", "content": "Oslo -3C, Rome 25C."},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    s = stored("oa-parallel")
    assert [c["arguments"] for c in of_type(s, "tool_call")] == [{"city": "Oslo"}, {"city": "Rome"}]
    assert {r["call_id"]: r["content"] for r in of_type(s, "tool_result")} == {"c_rome": "25C", "c_oslo": "-3C"}
    assert [m for m in msgs(s) if m[0] == "assistant"] == [("assistant", "Oslo -3C, Rome 25C.")]


def test_openai_tool_result_json_with_exit_code_is_an_error_with_its_output(acme, tmp_path):
    """docs (OpenAI and Anthropic conversations): a result that is `{"stdout","stderr","exit_code"}` is its stdout and
    stderr, the exit code kept, a failure flagged."""
    payload = json.dumps({"stdout": "collected 3 items", "stderr": "E   AssertionError", "exit_code": 2})
    doc = _chat(
        "oa-exit",
        {"role": "user", "content": "Run tests."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"pytest"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": payload},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    (res,) = of_type(stored("oa-exit"), "tool_result")
    assert res.get("exit_code") == 2 and res.get("is_error") is True, res
    assert "collected 3 items" in res["content"] and "AssertionError" in res["content"], res
    assert '"exit_code"' not in res["content"], res


def test_openai_tool_result_with_exit_status_last_line_is_an_error(acme, tmp_path):
    """docs: a result whose last short line reports an exit ("returned non-zero exit status 2") is a failure."""
    doc = _chat(
        "oa-exit2",
        {"role": "user", "content": "Build."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": '{"cmd":"make"}'}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "make: *** [all] Error 2\nCommand 'make' returned non-zero exit status 2.",
        },
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    (res,) = of_type(stored("oa-exit2"), "tool_result")
    assert res.get("is_error") is True and res.get("exit_code") == 2, res


def test_openai_remember_tool_call_is_a_memory_write(acme, tmp_path):
    """docs: in every format, a call of mcp__dreamweb__remember is a memory_write and its result is dropped."""
    args = json.dumps({"content": "Deploys need the VPN."})
    doc = _chat(
        "oa-remember",
        {"role": "user", "content": "Remember: deploys need the VPN."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "mcp__dreamweb__remember", "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "saved"},
        {"role": "assistant", "content": "Noted."},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    s = stored("oa-remember")
    assert [n["content"] for n in of_type(s, "memory_write")] == ["Deploys need the VPN."]
    assert of_type(s, "tool_result") == [] and of_type(s, "tool_call") == []


def test_openai_assistant_audio_reply_keeps_its_transcript(acme, tmp_path):
    """An audio reply (gpt-4o-audio) has `content: null` and `audio: {id, data, transcript}`: the transcript is what
    the model said; dropping it loses the turn (docs silent: nothing lost). The audio bytes are not text."""
    doc = _chat(
        "oa-audio",
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]},
        {
            "role": "assistant",
            "content": None,
            "audio": {
                "id": "audio_1",
                "data": "SUQzBAAAAAAA",
                "expires_at": 1,
                "transcript": "The meeting is at noon.",
            },
        },
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    s = stored("oa-audio")
    assert [c for r, c in msgs(s) if r == "assistant"] == ["The meeting is at noon."], msgs(s)
    assert "SUQzBAAAAAAA" not in json.dumps(s.events)


def test_openai_responses_function_call_output_with_exit_code_json(acme, tmp_path):
    """docs (OpenAI conversations, tool_output): `{"stdout","stderr","exit_code"}` output is its stdout/stderr, the
    exit code kept, a failure flagged — for a Responses `function_call_output` as for a Chat `tool` message."""
    doc = {
        "id": "resp_exit",
        "object": "response",
        "input": [
            {"role": "user", "content": "Run it."},
            {"type": "function_call", "call_id": "call_x", "name": "shell", "arguments": '{"cmd": "make"}'},
            {
                "type": "function_call_output",
                "call_id": "call_x",
                "output": json.dumps({"stdout": "building", "stderr": "error: missing dep", "exit_code": 2}),
            },
        ],
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Failed."}]}],
    }
    ok1(run_import(write_json(tmp_path / "r.json", doc)))
    (res,) = of_type(stored("resp_exit"), "tool_result")
    assert (res.get("exit_code"), res.get("is_error")) == (2, True), res
    assert "missing dep" in res["content"] and '"exit_code"' not in res["content"], res


def test_openai_external_id_from_metadata_conversation_id(acme, tmp_path):
    """docs: the external_id is the document's own id (`external_id`, `session_id`, `conversation_id`, `id`, or the
    same in `metadata`)."""
    doc = {
        "metadata": {"conversation_id": "conv-from-meta"},
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    }
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    assert ids() == ["conv-from-meta"]


def test_openai_responses_input_as_a_string_with_instructions(acme, tmp_path):
    """Responses API: `input` may be a plain string and `instructions` the system prompt; `output` holds the items.
    docs: Responses `input` and `output` items are read. Nothing lost."""
    doc = {
        "id": "resp_str",
        "object": "response",
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": "What is 2+2?",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "SECRET-REASONING"}]},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "4", "annotations": []}],
            },
        ],
    }
    ok1(run_import(write_json(tmp_path / "r.json", doc)))
    s = stored("resp_str")
    m = msgs(s)
    assert ("user", "What is 2+2?") in m and m[-1] == ("assistant", "4"), m
    assert "SECRET-REASONING" not in json.dumps(s.events)


def test_openai_responses_jsonl_with_web_search_and_function_call_output_error(acme, tmp_path):
    """A JSONL of Responses documents: `web_search_call` is a call (docs: read as a Codex rollout's items) and a
    `function_call_output` whose output is `{"error": ...}` JSON is a failure (docs, tool_output)."""
    docs = [
        {
            "id": "resp_ws",
            "object": "response",
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "News?"}]}],
            "output": [
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "django 6 release"},
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Django 6 is out."}],
                },
            ],
        },
        {
            "id": "resp_err",
            "object": "response",
            "input": [
                {"role": "user", "content": "Delete tmp."},
                {"type": "function_call", "call_id": "call_9", "name": "rm", "arguments": '{"path": "/tmp/x"}'},
                {"type": "function_call_output", "call_id": "call_9", "output": '{"error": "permission denied"}'},
            ],
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Denied."}]}
            ],
        },
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "responses.jsonl", *docs))
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    ws = stored("resp_ws")
    (call,) = of_type(ws, "tool_call")
    assert "django 6 release" in json.dumps(call["arguments"]), call
    assert msgs(ws)[-1] == ("assistant", "Django 6 is out.")
    e = stored("resp_err")
    assert kinds(e) == ["message:user", "tool_call", "tool_result", "message:assistant"], kinds(e)
    (res,) = of_type(e, "tool_result")
    assert res.get("is_error") is True and "permission denied" in res["content"], res


def test_openai_chat_named_explicitly_for_an_anthropic_conversation_is_refused_naming_anthropic(acme, tmp_path):
    """docs: an Anthropic conversation with tool, result or thinking blocks named `openai-chat` is refused, the
    message naming `anthropic-messages`, rather than read wrongly."""
    path = write_json(tmp_path / "conv.json", _anth_doc())
    code, out, err = run_import(path, format="openai-chat")
    assert code == 1 and "anthropic-messages" in err, (out, err)
    assert AgentSession.objects.count() == 0


def test_openai_jsonl_whose_last_line_is_cut_keeps_the_others_and_names_file_and_line(acme, tmp_path):
    """A JSONL of conversations still being written, in a folder: the complete conversations import (contracts: the
    valid lines are still imported), the cut line is reported naming its file (docs: messages about a file name it)
    and its line number; the other file imports too."""
    good = [
        _chat(f"oa-cut-{i}", {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}) for i in range(2)
    ]
    path = tmp_path / "a-convs.jsonl"
    write_jsonl(path, *good)
    with path.open("a") as fh:
        fh.write(json.dumps(_chat("oa-cut-2", {"role": "user", "content": "q"}))[:40])
    write_json(tmp_path / "b-session.json", gem_doc("gem-ok"))
    code, out, err = run_import(tmp_path)
    assert ids() == ["gem-ok", "oa-cut-0", "oa-cut-1"], (out, err)
    assert_clear_error_naming(path, code, err)
    assert "line 3" in err, err


# ================================================================================================================
# Anthropic messages


def _anth_doc(cid="an-1", messages=None, **extra):
    return {
        "id": cid,
        "model": "claude-sonnet-4-5",
        "system": "Be careful.",
        "messages": messages
        or [
            {"role": "user", "content": [{"type": "text", "text": "Check disk."}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "df"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Fine."}]},
        ],
        **extra,
    }


def test_anthropic_tool_result_error_with_text_and_image_blocks(acme, tmp_path):
    """tool_result with is_error and content as a list of text and image blocks: an error result keeping its text
    in order (docs: tool_result with is_error)."""
    messages = [
        {"role": "user", "content": "Screenshot the page."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_s", "name": "screenshot", "input": {}}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_s",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "Partial render:"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
                        {"type": "text", "text": "timeout after 30s"},
                    ],
                }
            ],
        },
        {"role": "assistant", "content": "The page timed out."},
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-img", messages))))
    s = stored("an-img")
    (res,) = of_type(s, "tool_result")
    assert res["call_id"] == "toolu_s" and res.get("is_error") is True, res
    assert res["content"].index("Partial render:") < res["content"].index("timeout after 30s"), res
    assert "iVBORw0K" not in res["content"]


def test_anthropic_thinking_and_redacted_thinking_dropped_system_blocks_kept(acme, tmp_path):
    """docs: thinking is dropped; `system` as a list of blocks (with cache_control) keeps every block's text."""
    doc = _anth_doc(
        "an-think",
        [
            {"role": "user", "content": "Plan it."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "SECRET-THOUGHT", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "SECRET-REDACTED"},
                    {"type": "text", "text": "Step 1."},
                ],
            },
        ],
    )
    doc["system"] = [
        {"type": "text", "text": "You are a planner."},
        {"type": "text", "text": "Follow the style guide.", "cache_control": {"type": "ephemeral"}},
    ]
    ok1(run_import(write_json(tmp_path / "a.json", doc)))
    s = stored("an-think")
    dumped = json.dumps(s.events)
    assert "SECRET-THOUGHT" not in dumped and "SECRET-REDACTED" not in dumped
    system = " ".join(c for r, c in msgs(s) if r == "system")
    assert "You are a planner." in system and "Follow the style guide." in system, msgs(s)
    assert msgs(s)[-1] == ("assistant", "Step 1.")


def test_anthropic_server_web_search_is_a_call_and_its_result_from_the_web(acme, tmp_path):
    """docs: server tools are read; a search result keeps its title and address. server_tool_use +
    web_search_tool_result in one assistant message, with the text citing it after."""
    messages = [
        {"role": "user", "content": "Latest Postgres?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me search."},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "postgres latest"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://www.postgresql.org/about/news/",
                            "title": "PostgreSQL 18 Released",
                            "encrypted_content": "EqgfCioIARgB",
                            "page_age": "2 days ago",
                        }
                    ],
                },
                {"type": "text", "text": "PostgreSQL 18 is the latest."},
            ],
        },
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-web", messages))))
    s = stored("an-web")
    (call,) = of_type(s, "tool_call")
    assert call["id"] == "srvtoolu_1" and call["name"] == "web_search"
    assert call["arguments"] == {"query": "postgres latest"}
    blob = json.dumps([e for e in s.events if e["type"] != "tool_call"])
    assert "https://www.postgresql.org/about/news/" in blob and "PostgreSQL 18 Released" in blob
    assert "EqgfCioIARgB" not in blob
    texts = [c for r, c in msgs(s) if r == "assistant"]
    assert any("Let me search." in t for t in texts) and any("PostgreSQL 18 is the latest." in t for t in texts)
    order = kinds(s)
    assert order.index("tool_call") < max(i for i, k in enumerate(order) if k == "message:assistant")


def test_anthropic_web_search_error_result_is_an_error(acme, tmp_path):
    """A web_search_tool_result whose content is a `web_search_tool_result_error` (max_uses_exceeded) is a failed
    call, not a silent success."""
    messages = [
        {"role": "user", "content": "Search."},
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_e", "name": "web_search", "input": {"query": "x"}},
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_e",
                    "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
                },
                {"type": "text", "text": "Search failed."},
            ],
        },
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-wserr", messages))))
    results = [e for e in stored("an-wserr").events if e["type"] == "tool_result" and e.get("call_id") == "srvtoolu_e"]
    assert len(results) == 1 and results[0].get("is_error") is True, stored("an-wserr").events
    assert "max_uses_exceeded" in results[0]["content"]


def test_anthropic_server_web_fetch_result_keeps_the_address_and_text(acme, tmp_path):
    """docs: server tools are read; a fetch result keeps its address (and it is the web's words, not the person's)."""
    messages = [
        {"role": "user", "content": "Summarise https://example.com/changelog"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_f",
                    "name": "web_fetch",
                    "input": {"url": "https://example.com/changelog"},
                },
                {
                    "type": "web_fetch_tool_result",
                    "tool_use_id": "srvtoolu_f",
                    "content": {
                        "type": "web_fetch_result",
                        "url": "https://example.com/changelog",
                        "retrieved_at": "2026-03-01T10:00:00Z",
                        "content": {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "v2.0: dropped Python 3.9"},
                            "title": "Changelog",
                        },
                    },
                },
                {"type": "text", "text": "v2.0 drops Python 3.9."},
            ],
        },
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-fetch", messages))))
    s = stored("an-fetch")
    (call,) = of_type(s, "tool_call")
    assert (call["id"], call["name"]) == ("srvtoolu_f", "web_fetch")
    rest = json.dumps([e for e in s.events if e["type"] != "tool_call"])
    assert "dropped Python 3.9" in rest, s.events
    assert msgs(s, "user") == [("user", "Summarise https://example.com/changelog")], msgs(s)


def test_anthropic_text_document_block_is_an_attachment_message_apart(acme, tmp_path):
    """docs: a `document` block the person attached is a message of its own with author "attachment" (`[document:
    title]` and the text); only what the person typed is theirs."""
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "Refunds within 30 days."},
                    "title": "Refund policy",
                    "citations": {"enabled": True},
                },
                {"type": "text", "text": "Summarise the policy."},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "30-day refunds."}]},
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-doc", messages))))
    events = [e for e in stored("an-doc").events if e["type"] == "message"]
    att = [e for e in events if e.get("author") == "attachment"]
    assert len(att) == 1 and "[document: Refund policy]" in att[0]["content"], events
    assert "Refunds within 30 days." in att[0]["content"]
    typed = [e for e in events if e["role"] == "user" and e.get("author") is None]
    assert [e["content"] for e in typed] == ["Summarise the policy."], events


def test_anthropic_pdf_document_and_search_result_blocks(acme, tmp_path):
    """docs: a PDF document keeps a marker (not its base64); a `search_result` block keeps its title and address."""
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
                    "title": "Q3 report",
                },
                {"type": "text", "text": "Compare with the search result."},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_k", "name": "kb_search", "input": {"q": "q3"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_k",
                    "content": [
                        {
                            "type": "search_result",
                            "source": "https://kb.example.com/q3",
                            "title": "Q3 numbers",
                            "content": [{"type": "text", "text": "Revenue up 4%."}],
                        }
                    ],
                }
            ],
        },
        {"role": "assistant", "content": "Matches."},
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-pdf", messages))))
    s = stored("an-pdf")
    dumped = json.dumps(s.events)
    assert "JVBERi0xLjQK" not in dumped
    assert "Q3 report" in dumped
    (res,) = of_type(s, "tool_result")
    assert "https://kb.example.com/q3" in res["content"] and "Q3 numbers" in res["content"], res
    assert "Revenue up 4%." in res["content"]


def test_anthropic_max_tokens_stop_mid_tool_call(acme, tmp_path):
    """A conversation whose last assistant turn stopped at `max_tokens` inside a tool_use (the input cut short, no
    result ever came): the text and the call are kept, no result is invented."""
    messages = [
        {"role": "user", "content": "Write the file."},
        {
            "role": "assistant",
            "stop_reason": "max_tokens",
            "content": [
                {"type": "text", "text": "Writing it now."},
                {"type": "tool_use", "id": "toolu_w", "name": "write_file", "input": {"path": "big.py"}},
            ],
        },
    ]
    doc = _anth_doc("an-maxtok", messages, stop_reason="max_tokens")
    ok1(run_import(write_json(tmp_path / "a.json", doc)))
    s = stored("an-maxtok")
    assert kinds(s) == ["message:system", "message:user", "message:assistant", "tool_call"], kinds(s)
    assert of_type(s, "tool_call")[0]["arguments"] == {"path": "big.py"}


def test_anthropic_tool_result_without_is_error_reporting_exit_status(acme, tmp_path):
    """docs: an Anthropic tool_result may come without is_error; its last short line reporting an exit ("(exit status
    2)") makes it a failure with that exit code."""
    messages = [
        {"role": "user", "content": "lint"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_l", "name": "bash", "input": {"command": "ruff ."}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_l", "content": "a.py:1:1 F401 unused\n(exit status 2)"}
            ],
        },
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-exit", messages))))
    (res,) = of_type(stored("an-exit"), "tool_result")
    assert res.get("is_error") is True and res.get("exit_code") == 2, res
    assert "F401" in res["content"]


def test_anthropic_crlf_jsonl_of_conversations(acme, tmp_path):
    """Windows line endings in a JSON Lines file of Anthropic conversations change nothing."""
    path = write_jsonl(tmp_path / "a.jsonl", _anth_doc("an-c1"), _anth_doc("an-c2"), eol="\r\n")
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    assert msgs(stored("an-c2"))[-1] == ("assistant", "Fine.")
    assert of_type(stored("an-c1"), "tool_result")[0]["content"] == "ok"


# ================================================================================================================
# Claude Code newer records


def test_cc_slash_command_with_args_local_stdout_and_meta_are_system(acme, tmp_path):
    """docs: isMeta lines, slash-command wrappers (written as the command, `/review 12`), local-command output and
    interruptions are system messages: the CLI wrote them, not the person."""
    lines = [
        cc_user(
            "<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n"
            "<command-args>12</command-args>"
        ),
        cc_user("Review pull request 12 carefully.", isMeta=True),
        cc_asst("msg_1", txt("Reviewing PR 12.")),
        cc_user(
            "<command-name>/cost</command-name>\n<command-message>cost</command-message>\n<command-args></command-args>"
        ),
        cc_user("<local-command-stdout>Total cost: $0.42</local-command-stdout>"),
        cc_user([txt("[Request interrupted by user]")]),
        cc_user("Now fix the typo."),
        cc_asst("msg_2", txt("Fixed.")),
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    m = msgs(stored("cc-s1"))
    assert [c for r, c in m if r == "user"] == ["Now fix the typo."], m
    system = [c for r, c in m if r == "system"]
    assert any(c.strip() == "/review 12" for c in system), system
    assert any("Total cost: $0.42" in c for c in system), system
    assert not any("<command-name>" in c for _, c in m), m
    assert [c for r, c in m if r == "assistant"] == ["Reviewing PR 12.", "Fixed."]


def test_cc_local_command_output_is_its_text_without_the_cli_tags(acme, tmp_path):
    """Docs: local-command output is a system message and slash-command wrappers are written as the command; they
    are silent on the `<local-command-stdout>` wrapper, but as with the background-job tags ("the CLI's wrapping is
    not output") a demanding reader expects the text the command printed, not the CLI's markup."""
    lines = [
        cc_user(
            "<command-name>/cost</command-name>\n<command-message>cost</command-message>\n<command-args></command-args>"
        ),
        cc_user("<local-command-stdout>Total cost: $0.42</local-command-stdout>"),
        cc_user("Thanks."),
        cc_asst("msg_1", txt("You're welcome.")),
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    system = [c for r, c in msgs(stored("cc-s1")) if r == "system"]
    assert system[0].strip() == "/cost", system
    assert system[1].strip() == "Total cost: $0.42", system


def test_cc_bang_shell_input_and_output_are_system(acme, tmp_path):
    """docs: `!` shell input/output are system messages, not the person's words."""
    lines = [
        cc_user("<bash-input>git status</bash-input>"),
        cc_user("<bash-stdout>On branch main\nnothing to commit</bash-stdout><bash-stderr></bash-stderr>"),
        cc_user("Commit what's staged."),
        cc_asst("msg_1", txt("Nothing staged.")),
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    m = msgs(stored("cc-s1"))
    assert [c for r, c in m if r == "user"] == ["Commit what's staged."], m
    assert any("git status" in c for r, c in m if r == "system"), m
    assert any("nothing to commit" in c for r, c in m if r == "system"), m


def test_cc_file_starting_with_snapshot_and_hook_progress_lines(acme, tmp_path):
    """A 2.x file begins with `file-history-snapshot`; hook `system` (stop_hook_summary) and `progress` lines sit in
    it (FORMATS.md). docs: hook, progress, queue and file-snapshot lines are skipped; the rest imports."""
    lines = [
        {
            "type": "file-history-snapshot",
            "messageId": "m0",
            "snapshot": {"trackedFileBackups": {}},
            "isSnapshotUpdate": False,
        },
        {
            "type": "queue-operation",
            "operation": "enqueue",
            "timestamp": "2026-03-01T10:00:00Z",
            "sessionId": "cc-s1",
            "content": "also run lint",
        },
        cc_user("Add a test."),
        cc_line("progress", data={"type": "hook_progress", "hookEvent": "PreToolUse", "hookName": "fmt"}),
        cc_asst("msg_1", txt("Added.")),
        cc_line(
            "system",
            subtype="stop_hook_summary",
            hookCount=1,
            hookInfos=[{"command": "fmt"}],
            hookErrors=[],
            preventedContinuation=False,
            level="info",
        ),
        cc_line("system", subtype="turn_duration", durationMs=1234),
        {
            "type": "file-history-snapshot",
            "messageId": "m1",
            "snapshot": {"trackedFileBackups": {"a.py": {}}},
            "isSnapshotUpdate": True,
        },
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    assert [m for m in msgs(stored("cc-s1")) if m[0] != "system"] == [("user", "Add a test."), ("assistant", "Added.")]


def test_cc_tool_use_result_object_and_bash_exit_code_header(acme, tmp_path):
    """docs: a Bash error's `Exit code N` header becomes exit_code and is removed; the sibling `toolUseResult`
    object does not replace or duplicate the result; Read's line numbers and <system-reminder> are removed."""
    reminder = "\n\n<system-reminder>\nWhenever you read a file, consider malware.\n</system-reminder>\n"
    lines = [
        cc_user("Run tests then read a.py"),
        cc_asst("msg_1", {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "pytest"}}),
        cc_user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "is_error": True,
                    "content": "Exit code 1\nFAILED t.py::x",
                }
            ],
            toolUseResult="Error: Exit code 1\nFAILED t.py::x",
        ),
        cc_asst("msg_2", {"type": "tool_use", "id": "toolu_r", "name": "Read", "input": {"file_path": "/p/a.py"}}),
        cc_user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_r",
                    "content": "     1→import os\n     2→print(1)" + reminder,
                }
            ],
            toolUseResult={
                "type": "text",
                "file": {"filePath": "/p/a.py", "content": "import os\nprint(1)", "numLines": 2},
            },
        ),
        cc_asst("msg_3", txt("Done.")),
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    s = stored("cc-s1")
    bash, read = of_type(s, "tool_result")
    assert (bash.get("exit_code"), bash.get("is_error")) == (1, True), bash
    assert bash["content"].strip() == "FAILED t.py::x", bash
    assert read["content"].strip() == "import os\nprint(1)", read
    assert len(of_type(s, "tool_call")) == 2


def test_cc_user_prompt_submit_hook_output_is_not_the_persons_words(acme, tmp_path):
    """A UserPromptSubmit hook's output lands in the transcript as `<user-prompt-submit-hook>` text. docs: hook lines
    are skipped / what the CLI wrote is not the person's: it must not be a `user` message."""
    lines = [
        cc_user("Deploy it."),
        cc_user("<user-prompt-submit-hook>Reminder: staging only on Fridays.</user-prompt-submit-hook>", isMeta=False),
        cc_asst("msg_1", txt("Deploying to staging.")),
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    assert msgs(stored("cc-s1"), "user") == [("user", "Deploy it.")]


def test_cc_only_summary_records_file_makes_no_session(acme, tmp_path):
    """~/.claude/projects/* holds files of only `summary` lines (no sessionId, no messages). A file of only metadata:
    no session is invented; no traceback; if refused, the message names the file."""
    path = write_jsonl(
        tmp_path / "0a1b.jsonl",
        {"type": "summary", "summary": "Fix login bug", "leafUuid": "u-1"},
        {"type": "summary", "summary": "Refactor auth", "leafUuid": "u-2"},
    )
    code, out, err = run_import(path)
    assert AgentSession.objects.count() == 0, ids()
    if code:
        assert_clear_error_naming(path, code, err)


def test_cc_resumed_session_in_a_second_file_keeps_both_sessions_whole(acme, tmp_path):
    """`claude --resume` writes a new file under a new sessionId whose first line's parentUuid points into the older
    file. Docs: one file, one session (its sessionId). Both import whole; the dangling parentUuid loses nothing."""
    first = [cc_user("Start the refactor.", sid="cc-old"), cc_asst("msg_o1", txt("Started."), sid="cc-old")]
    last_uuid = first[-1]["uuid"]
    second = [
        cc_user("Continue the refactor.", sid="cc-new", parent=last_uuid),
        cc_asst("msg_n1", txt("Continuing."), sid="cc-new"),
        cc_user("Finish.", sid="cc-new"),
        cc_asst("msg_n2", txt("Finished."), sid="cc-new"),
    ]
    for i in range(1, len(second)):
        second[i]["parentUuid"] = second[i - 1]["uuid"]
    write_jsonl(tmp_path / "cc-old.jsonl", *first)
    write_jsonl(tmp_path / "cc-new.jsonl", *second)
    code, out, err = run_import(tmp_path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-new")) == [
        ("user", "Continue the refactor."),
        ("assistant", "Continuing."),
        ("user", "Finish."),
        ("assistant", "Finished."),
    ]
    assert msgs(stored("cc-old")) == [("user", "Start the refactor."), ("assistant", "Started.")]


def test_cc_pasted_image_only_turn_is_not_lost(acme, tmp_path):
    """A person pastes only an image (no text) and then asks: the image turn is not silently dropped from the order
    and its base64 is not stored as text."""
    lines = [
        cc_user(
            [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANS"}}]
        ),
        cc_user("What is wrong in this screenshot?"),
        cc_asst("msg_1", txt("The button overlaps.")),
    ]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *lines)))
    s = stored("cc-s1")
    assert "iVBORw0KGgoAAAANS" not in json.dumps(s.events)
    users = msgs(s, "user")
    assert users[-1] == ("user", "What is wrong in this screenshot?")
    assert len(users) == 2, users


# ================================================================================================================
# Codex newer rollouts


def test_cx_session_meta_after_other_lines_is_still_the_session(acme, tmp_path):
    """A rollout whose `session_meta` comes after other lines (a turn_context and events written first): it is still
    recognised, with session_meta.id as the external_id and nothing before it lost."""
    lines = [
        cx_turn(),
        cx("event_msg", {"type": "task_started", "model_context_window": 272000}),
        cx_msg("user", "Hello first."),
        cx("event_msg", {"type": "user_message", "message": "Hello first.", "images": []}),
        cx_meta("cx-late"),
        cx_msg("assistant", "Hi."),
    ]
    ok1(run_import(write_jsonl(tmp_path / "rollout-late.jsonl", *lines)))
    s = stored("cx-late")
    assert s.agent == "codex"
    assert [m for m in msgs(s) if m[0] != "system"] == [("user", "Hello first."), ("assistant", "Hi.")]


def test_cx_turn_context_model_effort_and_last_token_count(acme, tmp_path):
    """docs: turn_context.model is the model; its effort, approval policy and sandbox go to metadata; the last
    token_count is metadata.usage; agent_reasoning events are dropped."""
    tc = lambda total: cx(  # noqa: E731
        "event_msg",
        {
            "type": "token_count",
            "info": {
                "total_token_usage": {"input_tokens": total, "output_tokens": 7, "total_tokens": total + 7},
                "last_token_usage": {"input_tokens": 1},
            },
            "rate_limits": {},
        },
    )
    lines = [
        cx_meta("cx-tc"),
        cx_turn(model="gpt-5.1-codex-max", effort="xhigh"),
        *cx_user("Go."),
        cx("event_msg", {"type": "agent_reasoning", "text": "SECRET-REASONING"}),
        cx(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "SECRET-REASONING"}],
                "content": None,
                "encrypted_content": "gAAA",
            },
        ),
        tc(100),
        cx_msg("assistant", "Done."),
        tc(555),
    ]
    ok1(run_import(write_jsonl(tmp_path / "rollout-tc.jsonl", *lines)))
    s = stored("cx-tc")
    assert s.model == "gpt-5.1-codex-max"
    meta = json.dumps(s.metadata)
    assert "xhigh" in meta and "on-request" in meta and "workspace-write" in meta, s.metadata
    assert "555" in json.dumps(s.metadata.get("usage")) and "100," not in json.dumps(s.metadata.get("usage")), (
        s.metadata
    )
    assert "SECRET-REASONING" not in json.dumps(s.events)


def test_cx_exec_command_end_exit_code_and_header_stripped(acme, tmp_path):
    """docs: outputs lose the exec header; the exit code comes from exec_command_end; non-zero is is_error."""
    header = "Chunk ID: a1\nWall time: 1.2 seconds\nProcess exited with code 0\nOriginal token count: 10\nOutput:\n"
    lines = [
        cx_meta("cx-exec"),
        cx_turn(),
        *cx_user("Run tests."),
        cx(
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": '{"cmd":"pytest -q","workdir":"/p"}',
                "call_id": "call_e",
            },
        ),
        cx(
            "event_msg",
            {
                "type": "exec_command_end",
                "call_id": "call_e",
                "command": ["bash", "-lc", "pytest -q"],
                "exit_code": 3,
                "stdout": "1 failed",
                "stderr": "",
                "aggregated_output": "1 failed",
                "duration": {"secs": 1, "nanos": 0},
                "status": "completed",
            },
        ),
        cx("response_item", {"type": "function_call_output", "call_id": "call_e", "output": header + "1 failed\n"}),
        cx_msg("assistant", "A test fails."),
    ]
    ok1(run_import(write_jsonl(tmp_path / "rollout-exec.jsonl", *lines)))
    s = stored("cx-exec")
    (res,) = of_type(s, "tool_result")
    assert (res.get("exit_code"), res.get("is_error")) == (3, True), res
    assert res["content"].strip() == "1 failed", res
    assert kinds(s)[-3:] == ["tool_call", "tool_result", "message:assistant"], kinds(s)


def test_cx_apply_patch_custom_tool_call_failed_by_patch_apply_end(acme, tmp_path):
    """docs: custom_tool_call (apply_patch) is a call with the patch text; a failed patch (patch_apply_end.success
    false) is is_error."""
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"
    lines = [
        cx_meta("cx-patch"),
        cx_turn(),
        *cx_user("Bump x."),
        cx(
            "response_item",
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": "call_p",
                "name": "apply_patch",
                "input": patch,
            },
        ),
        cx(
            "event_msg",
            {
                "type": "patch_apply_end",
                "call_id": "call_p",
                "success": False,
                "stdout": "",
                "stderr": "context mismatch",
                "changes": {},
            },
        ),
        cx(
            "response_item",
            {
                "type": "custom_tool_call_output",
                "call_id": "call_p",
                "output": json.dumps(
                    {
                        "output": "apply_patch verification failed: context mismatch",
                        "metadata": {"exit_code": 1, "duration_seconds": 0.1},
                    }
                ),
            },
        ),
        cx_msg("assistant", "Patch failed."),
    ]
    ok1(run_import(write_jsonl(tmp_path / "rollout-patch.jsonl", *lines)))
    s = stored("cx-patch")
    (call,) = of_type(s, "tool_call")
    assert call["name"] == "apply_patch" and "+x = 2" in json.dumps(call["arguments"]), call
    (res,) = of_type(s, "tool_result")
    assert res.get("is_error") is True and "context mismatch" in res["content"], res
    assert '"metadata"' not in res["content"], res


def test_cx_ghost_snapshot_and_compacted_and_web_search_call(acme, tmp_path):
    """ghost_snapshot items (undo snapshots) and `compacted` lines are not conversation; web_search_call is a call
    with its query (docs, FORMATS.md). Nothing around them lost."""
    lines = [
        cx_meta("cx-ghost"),
        cx_turn(),
        *cx_user("Look up the release."),
        cx(
            "response_item",
            {
                "type": "ghost_snapshot",
                "ghost_commit": {"id": "deadbeef", "parent": "abc", "preexisting_untracked_files": []},
            },
        ),
        cx(
            "response_item",
            {
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "codex release notes", "queries": ["codex release notes"]},
            },
        ),
        cx("event_msg", {"type": "web_search_end", "call_id": "ws_1", "query": "codex release notes"}),
        cx("compacted", {"message": "Summary of earlier turns.", "replacement_history": []}),
        cx_msg("assistant", "Found them."),
    ]
    ok1(run_import(write_jsonl(tmp_path / "rollout-ghost.jsonl", *lines)))
    s = stored("cx-ghost")
    assert "deadbeef" not in json.dumps(s.events)
    calls = of_type(s, "tool_call")
    assert len(calls) == 1 and "codex release notes" in json.dumps(calls[0]["arguments"]), calls
    assert [m for m in msgs(s) if m[0] != "system"] == [("user", "Look up the release."), ("assistant", "Found them.")]


def test_cx_crlf_rollout_with_cut_last_line_imports_with_a_note(acme, tmp_path):
    """CRLF line endings plus a last line cut while Codex was writing it, in a folder: docs say the line is skipped
    with a note on standard error (messages about a file name it) and the rest is imported."""
    path = write_jsonl(
        tmp_path / "rollout-crlf.jsonl",
        cx_meta("cx-crlf"),
        cx_turn(),
        *cx_user("Hi."),
        cx_msg("assistant", "Hello."),
        eol="\r\n",
    )
    with path.open("ab") as fh:
        fh.write(json.dumps(cx_msg("assistant", "cut here"))[:50].encode())
    write_json(tmp_path / "session-other.json", gem_doc("gem-ok"))
    code, out, err = run_import(tmp_path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    assert path.name in err, err
    assert [m for m in msgs(stored("cx-crlf")) if m[0] != "system"] == [("user", "Hi."), ("assistant", "Hello.")]


# ================================================================================================================
# Across formats


def _all_formats_folder(root: Path):
    write_jsonl(
        root / "claude" / "p" / "cc-mix.jsonl", cc_user("q", sid="cc-mix"), cc_asst("msg_m", txt("a"), sid="cc-mix")
    )
    write_jsonl(
        root / "codex" / "rollout-mix.jsonl", cx_meta("cx-mix"), cx_turn(), *cx_user("q"), cx_msg("assistant", "a")
    )
    write_json(root / "gemini" / "chats" / "session-mix.json", gem_doc("gem-mix"), indent=2)
    write_json(
        root / "openai" / "chat.json",
        _chat("oa-mix", {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}),
    )
    write_jsonl(root / "anthropic" / "conv.jsonl", _anth_doc("an-mix"))
    write_jsonl(
        root / "dw" / "canon.jsonl",
        {"external_id": "dw-mix", "agent": "bot", "events": [{"type": "message", "role": "user", "content": "q"}]},
    )


def test_folder_mixing_all_six_formats_auto_imports_each_with_its_default_agent(acme, tmp_path):
    """docs table: each format recognised by content with `--format auto`, agent defaulting per format
    (claude-code, codex, gemini-cli, openai-agent, anthropic-agent; canonical names its own)."""
    _all_formats_folder(tmp_path)
    code, out, err = run_import(tmp_path, format="auto")
    assert (code, out) == (0, "imported 6, unchanged 0, rejected 0\n"), err
    agents = dict(AgentSession.objects.values_list("external_id", "agent"))
    assert agents == {
        "cc-mix": "claude-code",
        "cx-mix": "codex",
        "gem-mix": "gemini-cli",
        "oa-mix": "openai-agent",
        "an-mix": "anthropic-agent",
        "dw-mix": "bot",
    }
    code2, out2, err2 = run_import(tmp_path)
    assert (code2, out2) == (0, "imported 0, unchanged 6, rejected 0\n"), err2


def test_folder_mixing_formats_with_agent_and_task_options(acme, tmp_path):
    """docs: --agent and --task name what a format does not say; a canonical line naming its agent keeps it."""
    _all_formats_folder(tmp_path)
    code, out, err = run_import(tmp_path, agent="backend-dev", task="api")
    assert (code, out) == (0, "imported 6, unchanged 0, rejected 0\n"), err
    rows = {e: (a, t) for e, a, t in AgentSession.objects.values_list("external_id", "agent", "task")}
    assert rows.pop("dw-mix") == ("bot", "api")
    assert set(rows.values()) == {("backend-dev", "api")}, rows


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "gemini-cli", "openai-chat", "anthropic-messages"])
def test_unicode_in_every_text_field_is_kept_exactly(acme, tmp_path, fmt):
    """Emoji (ZWJ, skin tone), RTL scripts and decomposed combining marks in messages, tool names' arguments and
    results are stored exactly as written: not normalised, not escaped, not replaced."""
    if fmt == "claude-code":
        path = write_jsonl(
            tmp_path / "u.jsonl",
            cc_user(UNI, sid="uni"),
            cc_asst(
                "msg_u",
                txt(UNI),
                {"type": "tool_use", "id": "tu", "name": "Bash", "input": {"command": f"echo '{UNI}'"}},
                sid="uni",
            ),
            cc_user([{"type": "tool_result", "tool_use_id": "tu", "content": UNI}], sid="uni"),
        )
    elif fmt == "codex":
        path = write_jsonl(
            tmp_path / "rollout-u.jsonl",
            cx_meta("uni"),
            cx_turn(),
            *cx_user(UNI),
            cx_msg("assistant", UNI),
            cx(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": f"echo '{UNI}'"}, ensure_ascii=False),
                    "call_id": "tu",
                },
            ),
            cx("response_item", {"type": "function_call_output", "call_id": "tu", "output": UNI}),
        )
    elif fmt == "gemini-cli":
        call = gem_call("tu", "run_shell_command", {"command": f"echo '{UNI}'"}, UNI)
        messages = [gem_msg(1, "user", UNI), gem_msg(2, "gemini", UNI), gem_msg(3, "gemini", "", toolCalls=[call])]
        path = write_json(tmp_path / "u.json", gem_doc("uni", messages), indent=2)
    elif fmt == "openai-chat":
        path = write_json(
            tmp_path / "u.json",
            _chat(
                "uni",
                {"role": "user", "content": UNI},
                {
                    "role": "assistant",
                    "content": UNI,
                    "tool_calls": [
                        {
                            "id": "tu",
                            "type": "function",
                            "function": {"name": "sh", "arguments": json.dumps({"command": f"echo '{UNI}'"})},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "tu", "content": UNI},
            ),
        )
    else:
        path = write_json(
            tmp_path / "u.json",
            _anth_doc(
                "uni",
                [
                    {"role": "user", "content": UNI},
                    {
                        "role": "assistant",
                        "content": [
                            txt(UNI),
                            {"type": "tool_use", "id": "tu", "name": "sh", "input": {"command": f"echo '{UNI}'"}},
                        ],
                    },
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu", "content": UNI}]},
                ],
            ),
        )
    ok1(run_import(path, format=fmt))
    s = stored("uni")
    non_system = [m for m in msgs(s) if m[0] != "system"]
    assert non_system[:2] == [("user", UNI), ("assistant", UNI)], non_system
    (call,) = of_type(s, "tool_call")
    assert f"echo '{UNI}'" in json.dumps(call["arguments"], ensure_ascii=False), call
    (res,) = of_type(s, "tool_result")
    assert res["content"].strip() == UNI, res


@pytest.mark.parametrize("fmt", ["gemini-cli", "openai-chat", "anthropic-messages"])
def test_very_long_single_message_is_kept_whole(acme, tmp_path, fmt):
    """A 1.5 MB single message (a pasted log) under the 5 MiB session limit: stored whole, not cut (docs: nothing is
    cut to fit)."""
    big = ("line of a pasted log — ünïcode ✓ " * 40 + "\n") * 1100
    assert 1_000_000 < len(big.encode()) < 3_000_000
    if fmt == "gemini-cli":
        path = write_json(tmp_path / "big.json", gem_doc("big", [gem_msg(1, "user", big), gem_msg(2, "gemini", "ok")]))
    elif fmt == "openai-chat":
        path = write_json(
            tmp_path / "big.json",
            _chat("big", {"role": "user", "content": big}, {"role": "assistant", "content": "ok"}),
        )
    else:
        path = write_json(
            tmp_path / "big.json",
            _anth_doc("big", [{"role": "user", "content": big}, {"role": "assistant", "content": "ok"}]),
        )
    ok1(run_import(path))
    m = msgs(stored("big"))
    assert m[-2] == ("user", big) and m[-1] == ("assistant", "ok")


def test_same_openai_conversation_without_id_in_two_files_is_stored_once(acme, tmp_path):
    """docs: without an id the external_id is a hash of the document, so the same conversation again adds nothing,
    even from another file name."""
    doc = {"messages": [{"role": "user", "content": "no id"}, {"role": "assistant", "content": "fine"}]}
    write_json(tmp_path / "a.json", doc)
    write_json(tmp_path / "b.json", doc, indent=2)
    code, out, err = run_import(tmp_path)
    assert (code, out) == (0, "imported 1, unchanged 1, rejected 0\n"), err


def test_chatgpt_account_export_is_refused_cleanly_naming_the_formats(acme, tmp_path):
    """docs: ChatGPT's account export (conversations.json with `mapping`) is not read: an unknown format, refused
    cleanly with one error naming the file and the formats; the other files import."""
    export = [
        {
            "title": "Trip",
            "create_time": 1700000000.0,
            "mapping": {
                "n1": {
                    "id": "n1",
                    "message": {"author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}},
                    "parent": None,
                    "children": [],
                }
            },
            "conversation_id": "gpt-export-1",
        }
    ]
    bad = write_json(tmp_path / "conversations.json", export)
    write_json(tmp_path / "z-session.json", gem_doc("gem-ok"))
    code, out, err = run_import(tmp_path)
    assert ids() == ["gem-ok"], (out, err)
    assert_clear_error_naming(bad, code, err)
    assert all(name in err for name in ("claude-code", "codex", "gemini-cli", "openai-chat", "anthropic-messages")), err
    assert len([ln for ln in err.splitlines() if "conversations.json" in ln]) == 1, err


def test_claude_ai_account_export_is_refused_cleanly(acme, tmp_path):
    """docs: Claude.ai's account export (conversations with `chat_messages`) is not read: refused cleanly."""
    export = [
        {
            "uuid": "c-1",
            "name": "Chat",
            "created_at": "2026-01-01T00:00:00Z",
            "chat_messages": [
                {"uuid": "m1", "sender": "human", "text": "hi", "content": [{"type": "text", "text": "hi"}]},
                {"uuid": "m2", "sender": "assistant", "text": "hello", "content": [{"type": "text", "text": "hello"}]},
            ],
        }
    ]
    bad = write_json(tmp_path / "conversations.json", export)
    code, out, err = run_import(bad)
    assert_clear_error_naming(bad, code, err)
    assert AgentSession.objects.count() == 0


# ================================================================================================================
# More server tools, in-band notes across formats, injected context, forced formats


def test_anthropic_server_code_execution_failure_keeps_stderr_and_return_code(acme, tmp_path):
    """Anthropic's code execution server tool: `bash_code_execution_tool_result` with stdout/stderr/return_code. docs:
    server tools are read, and a result's JSON with an exit code says how the call ended: the stderr kept, the exit
    code kept, a failure flagged."""
    messages = [
        {"role": "user", "content": "Count lines in data.csv"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_c",
                    "name": "bash_code_execution",
                    "input": {"command": "wc -l data.csv"},
                },
                {
                    "type": "bash_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_c",
                    "content": {
                        "type": "bash_code_execution_result",
                        "stdout": "",
                        "stderr": "wc: data.csv: No such file or directory",
                        "return_code": 1,
                    },
                },
                {"type": "text", "text": "The file is missing."},
            ],
        },
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-code", messages))))
    s = stored("an-code")
    (call,) = of_type(s, "tool_call")
    assert call["name"] == "bash_code_execution" and call["arguments"] == {"command": "wc -l data.csv"}
    (res,) = of_type(s, "tool_result")
    assert "No such file or directory" in res["content"], res
    assert res.get("is_error") is True and res.get("exit_code") == 1, res


def test_anthropic_mcp_connector_remember_on_dreamweb_is_a_memory_write(acme, tmp_path):
    """docs: a call of Dreamweb's MCP tool `remember` with server `dreamweb` and tool `remember` given apart (the MCP
    connector's mcp_tool_use) is a memory_write with its content; its result dropped."""
    messages = [
        {"role": "user", "content": "Remember we pin numpy<2."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "mcp_tool_use",
                    "id": "mcptoolu_r",
                    "name": "remember",
                    "server_name": "dreamweb",
                    "input": {"content": "Pin numpy<2 in this repo."},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "mcp_tool_result", "tool_use_id": "mcptoolu_r", "content": [txt("saved")]}],
        },
        {"role": "assistant", "content": "Noted."},
    ]
    ok1(run_import(write_json(tmp_path / "a.json", _anth_doc("an-rem", messages))))
    s = stored("an-rem")
    assert [n["content"] for n in of_type(s, "memory_write")] == ["Pin numpy<2 in this repo."]
    assert of_type(s, "tool_result") == []


def test_openai_responses_mcp_call_remember_is_a_memory_write(acme, tmp_path):
    """docs: in every format, Dreamweb's `remember` (server `dreamweb`, tool `remember` given apart) is a
    memory_write. The Responses API writes a remote MCP call as one `mcp_call` item (server_label, name, arguments,
    output)."""
    doc = {
        "id": "resp_mcp",
        "object": "response",
        "input": [{"role": "user", "content": "Remember the staging URL."}],
        "output": [
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "server_label": "dreamweb",
                "name": "remember",
                "arguments": json.dumps({"content": "Staging is staging.example.com."}),
                "output": "saved",
                "error": None,
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Saved."}]},
        ],
    }
    ok1(run_import(write_json(tmp_path / "r.json", doc)))
    s = stored("resp_mcp")
    assert [n["content"] for n in of_type(s, "memory_write")] == ["Staging is staging.example.com."], s.events
    assert msgs(s)[-1] == ("assistant", "Saved.")


def test_openai_responses_code_interpreter_call_is_a_call_with_its_printed_result(acme, tmp_path):
    """docs: a Responses `code_interpreter_call` is a call (its code) with its result (what it printed)."""
    doc = {
        "id": "resp_ci",
        "object": "response",
        "input": "Compute 2**10.",
        "output": [
            {
                "type": "code_interpreter_call",
                "id": "ci_1",
                "status": "completed",
                "container_id": "cntr_1",
                "code": "print(2**10)",
                "outputs": [{"type": "logs", "logs": "1024\n"}],
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "1024"}]},
        ],
    }
    ok1(run_import(write_json(tmp_path / "r.json", doc)))
    s = stored("resp_ci")
    (call,) = of_type(s, "tool_call")
    assert "print(2**10)" in json.dumps(call["arguments"]), call
    (res,) = of_type(s, "tool_result")
    assert res["call_id"] == call["id"] and res["content"].strip() == "1024", res
    assert msgs(s)[-1] == ("assistant", "1024")


def test_openai_tool_result_first_line_exit_code_is_an_error(acme, tmp_path):
    """docs: a result whose *first* short line reports an exit ("Exit code: 1") is a failure with that code."""
    doc = _chat(
        "oa-first",
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": '{"cmd":"x"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Exit code: 1\nx: command not found"},
    )
    ok1(run_import(write_json(tmp_path / "c.json", doc)))
    (res,) = of_type(stored("oa-first"), "tool_result")
    assert (res.get("is_error"), res.get("exit_code")) == (True, 1), res
    assert "command not found" in res["content"]


def test_cx_injected_user_instructions_and_environment_context_are_system(acme, tmp_path):
    """docs: injected context (AGENTS.md `<user_instructions>`, `<environment_context>`) is system; a user item is
    the person's when Codex also logged it as event_msg/user_message."""
    lines = [
        cx_meta("cx-ctx"),
        cx_msg("user", "<user_instructions>\nAlways run ruff.\n</user_instructions>"),
        cx_msg("user", "<environment_context>\n  <cwd>/p</cwd>\n  <shell>zsh</shell>\n</environment_context>"),
        cx_turn(),
        *cx_user("Fix the lint."),
        cx_msg("assistant", "Fixed."),
    ]
    ok1(run_import(write_jsonl(tmp_path / "rollout-ctx.jsonl", *lines)))
    m = msgs(stored("cx-ctx"))
    assert [c for r, c in m if r == "user"] == ["Fix the lint."], m
    system = " ".join(c for r, c in m if r == "system")
    assert "Always run ruff." in system and "<cwd>/p</cwd>" in system, m


def test_a_claude_code_file_named_gemini_cli_is_refused_naming_both(acme, tmp_path):
    """docs: a format named with --format that the content is plainly not in is refused, naming both, rather than
    read wrongly."""
    path = write_jsonl(tmp_path / "cc.jsonl", cc_user("hi", sid="cc-x"), cc_asst("msg_x", txt("yo"), sid="cc-x"))
    code, out, err = run_import(path, format="gemini-cli")
    assert code == 1 and "gemini-cli" in err and "claude-code" in err, (out, err)
    assert AgentSession.objects.count() == 0


def test_cc_compact_boundary_keeps_the_turns_before_and_after(acme, tmp_path):
    """Claude Code 2.x `/compact`: a `system` line with subtype `compact_boundary` (parentUuid null,
    logicalParentUuid to the last turn), then an `isCompactSummary` user line, then the new turns. docs: the
    compaction summary is a system message; the turns before and after are the session, in order, nothing lost."""
    before = [cc_user("Add caching."), cc_asst("msg_b", txt("Cache added."))]
    boundary = cc_line(
        "system",
        subtype="compact_boundary",
        content="Conversation compacted",
        compactMetadata={"trigger": "manual", "preTokens": 150000},
        logicalParentUuid=before[-1]["uuid"],
        level="info",
    )
    summary = cc_user(
        "This session is being continued from a previous conversation. Summary: caching was added.",
        isCompactSummary=True,
        isVisibleInTranscriptOnly=True,
        parent=boundary["uuid"],
    )
    after = [cc_user("Now add tests.", parent=summary["uuid"]), cc_asst("msg_a", txt("Tests added."))]
    ok1(run_import(write_jsonl(tmp_path / "cc-s1.jsonl", *before, boundary, summary, *after)))
    m = msgs(stored("cc-s1"))
    assert [x for x in m if x[0] != "system"] == [
        ("user", "Add caching."),
        ("assistant", "Cache added."),
        ("user", "Now add tests."),
        ("assistant", "Tests added."),
    ], m
    assert any(r == "system" and "caching was added" in c for r, c in m), m


def test_gemini_message_with_text_and_tool_calls_keeps_text_before_the_calls(acme, tmp_path):
    """A `gemini` message carrying both `content` text and `toolCalls` (the model said something, then called):
    the text is an assistant message, then each call and its result, in that order."""
    call = gem_call("glob-1", "glob", {"pattern": "**/*.py"}, "a.py\nb.py")
    messages = [
        gem_msg(1, "user", "Which Python files?"),
        gem_msg(2, "gemini", "I'll look for them.", toolCalls=[call]),
        gem_msg(3, "gemini", "a.py and b.py."),
    ]
    ok1(run_import(write_json(tmp_path / "s.json", gem_doc(messages=messages))))
    s = stored("gem-s1")
    assert kinds(s) == ["message:user", "message:assistant", "tool_call", "tool_result", "message:assistant"], kinds(s)
    assert msgs(s, "assistant") == [("assistant", "I'll look for them."), ("assistant", "a.py and b.py.")]
    assert of_type(s, "tool_result")[0]["content"] == "a.py\nb.py"
