"""Blind adversarial probe of `import_sessions` on transcript variants nobody on the team wrote.

Every case drives the command as a user would (files built in tmp_path), and asserts what the documentation
(contracts/README.md, docs/session-formats.md, shared/real/transcripts/FORMATS.md) promises: sessions imported with
their messages in order and nothing silently lost, or a clear per-file error naming the file (and line) while the
other files still import; never a traceback, never a half-written session; re-imports add nothing. Of its 85 cases
10 failed on the code it probed: Claude Code files starting with a record type the reader did not know, a byte order
mark before a pretty-printed document, a non-UTF-8 byte costing its whole line, the older Codex layout (all fixed);
a shell call's argv read as typed (documented, the case says so); a session over the size or event limit refused
whole (by design and documented: strict xfail)."""

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


# ----------------------------------------------------------------------------------------------------------------
# driving the command


def run_import(path, team="acme", **kwargs):
    """(exit code, stdout, stderr). Any exception other than the documented exit-1 CommandError fails the test with
    its traceback (a crash)."""
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


def write_jsonl(path: Path, *lines, eol="\n", bom=False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + eol for ln in lines)
    data = text.encode()
    if bom:
        data = b"\xef\xbb\xbf" + data
    path.write_bytes(data)
    return path


@pytest.fixture
def acme():
    return TeamFactory(slug="acme")


# ----------------------------------------------------------------------------------------------------------------
# Claude Code builders (shapes from FORMATS.md, values invented)

_n = iter(range(1, 1_000_000))


def cc_line(kind, message=None, *, sid="cc-sess-1", parent=None, ts=None, **extra):
    i = next(_n)
    out = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/proj",
        "sessionId": sid,
        "version": "2.1.7",
        "gitBranch": "feature/x",
        "type": kind,
        "uuid": f"uuid-{i:06d}",
        "timestamp": ts or f"2026-03-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.000Z",
    }
    if message is not None:
        out["message"] = message
    out.update(extra)
    return out


def cc_user(content, **extra):
    return cc_line("user", {"role": "user", "content": content}, **extra)


def cc_asst(mid, *blocks, model="claude-opus-4-1", **extra):
    message = {
        "id": mid,
        "model": model,
        "role": "assistant",
        "type": "message",
        "content": list(blocks),
        "stop_reason": None,
        "usage": {"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 50},
    }
    return cc_line("assistant", message, requestId=f"req_{mid}", **extra)


def txt(t):
    return {"type": "text", "text": t}


def tuse(tid, name, **args):
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def tres(tid, content, is_error=None, **extra):
    block = {"type": "tool_result", "tool_use_id": tid, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return cc_user([block], **extra)


def basic_cc(sid="cc-sess-1"):
    return [
        cc_user("Please rename foo to bar.", sid=sid),
        cc_asst("msg_a1", txt("Sure, renaming."), sid=sid),
        cc_asst("msg_a1", tuse("toolu_a1", "Bash", command="sed -i s/foo/bar/ x.py"), sid=sid),
        tres("toolu_a1", "", sid=sid),
        cc_asst("msg_a2", txt("Done."), sid=sid),
    ]


# ----------------------------------------------------------------------------------------------------------------
# Codex builders


def cx(kind, payload, ts="2026-05-11T10:00:00.000Z"):
    return {"timestamp": ts, "type": kind, "payload": payload}


def cx_meta(sid="cx-sess-1"):
    return cx(
        "session_meta",
        {
            "id": sid,
            "timestamp": "2026-05-11T10:00:00.000Z",
            "cwd": "/home/dev/proj",
            "originator": "codex-tui",
            "cli_version": "0.130.0",
            "source": "cli",
            "model_provider": "openai",
            "base_instructions": {"text": "You are Codex."},
            "git": {"commit_hash": "abc", "branch": "main", "repository_url": "https://example.com/r.git"},
        },
    )


def cx_msg(role, text, kind=None):
    kind = kind or ("output_text" if role == "assistant" else "input_text")
    return cx("response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


def cx_user(text):
    return [cx_msg("user", text), cx("event_msg", {"type": "user_message", "message": text, "images": []})]


def cx_turn(model="gpt-5.1-codex"):
    return cx("turn_context", {"turn_id": "t1", "cwd": "/home/dev/proj", "model": model, "effort": "medium"})


# ================================================================================================================
# Family: Claude Code — newer / unknown record types and extra fields


LEADING = {
    "custom_title": {"type": "custom-title", "customTitle": "Rename work", "sessionId": "cc-sess-1"},
    "attachment": cc_line("attachment", attachment={"type": "file", "path": "a.py"}),
    "future_type": {"type": "totally-new-kind", "sessionId": "cc-sess-1", "payload": {"a": 1}},
}


def _expect_basic_imported(code, out, err):
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-sess-1")) == [
        ("user", "Please rename foo to bar."),
        ("assistant", "Sure, renaming."),
        ("assistant", "Done."),
    ]


def test_cc_file_whose_first_line_is_a_custom_title_record_is_recognised(acme, tmp_path):
    _expect_basic_imported(*run_import(write_jsonl(tmp_path / "cc.jsonl", LEADING["custom_title"], *basic_cc())))


def test_cc_file_whose_first_line_is_an_attachment_record_is_recognised(acme, tmp_path):
    _expect_basic_imported(*run_import(write_jsonl(tmp_path / "cc.jsonl", LEADING["attachment"], *basic_cc())))


def test_cc_file_whose_first_line_is_a_future_record_type_is_recognised(acme, tmp_path):
    _expect_basic_imported(*run_import(write_jsonl(tmp_path / "cc.jsonl", LEADING["future_type"], *basic_cc())))


def test_cc_file_whose_first_line_is_a_future_record_type_with_explicit_format(acme, tmp_path):
    path = write_jsonl(tmp_path / "cc.jsonl", LEADING["future_type"], *basic_cc())
    _expect_basic_imported(*run_import(path, format="claude-code"))


def test_cc_unknown_record_types_and_extra_fields_mid_file_are_ignored(acme, tmp_path):
    base = basic_cc()
    lines = [
        {
            "type": "queue-operation",
            "operation": "dequeue",
            "timestamp": "2026-03-01T10:00:00.000Z",
            "sessionId": "cc-sess-1",
        },
        cc_user("Please rename foo to bar.", futureField={"x": 1}, permissionMode="acceptEdits"),
        LEADING["custom_title"],
        LEADING["attachment"],
        cc_line("system", subtype="some_new_subtype", content="new thing", level="info"),
        base[1],
        LEADING["future_type"],
        base[2],
        base[3],
        base[4],
    ]
    _expect_basic_imported(*run_import(write_jsonl(tmp_path / "cc.jsonl", *lines)))


def test_cc_newer_content_block_types_in_assistant_do_not_lose_text(acme, tmp_path):
    lines = [
        cc_user("Look up the docs."),
        cc_asst(
            "msg_1", {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}
        ),
        cc_asst("msg_1", {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
        cc_asst("msg_1", {"type": "some_future_block", "data": "?"}),
        cc_asst("msg_1", txt("The docs say X.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert ("assistant", "The docs say X.") in msgs(stored("cc-sess-1"))


# ================================================================================================================
# Family: Claude Code — tool result content shapes


def test_cc_tool_result_content_list_of_text_image_and_tool_reference_blocks(acme, tmp_path):
    lines = [
        cc_user("Show me the screenshot and search tools."),
        cc_asst("msg_1", tuse("toolu_1", "Read", file_path="/tmp/shot.png")),
        tres(
            "toolu_1",
            [
                {"type": "text", "text": "Here is the image:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "text", "text": "End of image."},
            ],
        ),
        cc_asst("msg_2", tuse("toolu_2", "ToolSearch", query="git")),
        tres("toolu_2", [{"type": "tool_reference", "tool_name": "mcp__git__status"}]),
        cc_asst("msg_3", txt("All done.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    results = {r["call_id"]: r for r in of_type(s, "tool_result")}
    assert set(results) == {"toolu_1", "toolu_2"}
    assert "Here is the image:" in results["toolu_1"]["content"]
    assert "End of image." in results["toolu_1"]["content"]
    assert "iVBORw0KGgo=" not in results["toolu_1"]["content"]  # base64 image data is not text
    assert msgs(s)[-1] == ("assistant", "All done.")


def test_cc_tool_result_plain_string_and_error_string(acme, tmp_path):
    lines = [
        cc_user("Run the tests."),
        cc_asst("msg_1", tuse("toolu_1", "Bash", command="pytest")),
        tres("toolu_1", "Exit code 2\nFAILED test_a.py::test_x", is_error=True),
        cc_asst("msg_2", tuse("toolu_2", "Bash", command="ls")),
        tres("toolu_2", "a.py\nb.py"),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    r = {x["call_id"]: x for x in of_type(stored("cc-sess-1"), "tool_result")}
    assert r["toolu_1"]["is_error"] is True and r["toolu_1"]["exit_code"] == 2
    assert "FAILED test_a.py::test_x" in r["toolu_1"]["content"]
    assert r["toolu_2"]["content"] == "a.py\nb.py" and not r["toolu_2"].get("is_error")


def test_cc_tool_result_null_or_missing_content(acme, tmp_path):
    null_block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": None}
    missing_block = {"type": "tool_result", "tool_use_id": "toolu_2"}
    lines = [
        cc_user("Go."),
        cc_asst("msg_1", tuse("toolu_1", "Write", file_path="a", content="x")),
        cc_user([null_block]),
        cc_asst("msg_2", tuse("toolu_2", "Write", file_path="b", content="y")),
        cc_user([missing_block]),
        cc_asst("msg_3", txt("Both written.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    assert [r["call_id"] for r in of_type(s, "tool_result")] == ["toolu_1", "toolu_2"]
    assert msgs(s)[-1] == ("assistant", "Both written.")


def test_cc_user_turn_with_text_blocks_and_an_image(acme, tmp_path):
    lines = [
        cc_user(
            [
                {"type": "text", "text": "What is wrong in this screenshot?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ]
        ),
        cc_asst("msg_1", txt("The button is misaligned.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    m = msgs(stored("cc-sess-1"))
    assert m[0][0] == "user" and "What is wrong in this screenshot?" in m[0][1]
    assert m[-1] == ("assistant", "The button is misaligned.")


# ================================================================================================================
# Family: Claude Code — sidechains / subagents


def test_cc_2x_subagent_file_gets_its_own_external_id(acme, tmp_path):
    parent = [
        cc_user("Investigate the bug."),
        cc_asst(
            "msg_p1",
            tuse(
                "toolu_task", "Task", description="dig", prompt="Find the bug in x.py", subagent_type="general-purpose"
            ),
        ),
        tres("toolu_task", [{"type": "text", "text": "The bug is on line 3."}]),
        cc_asst("msg_p2", txt("Subagent found it.")),
    ]
    child = [
        cc_user("Find the bug in x.py", isSidechain=True, agentId="a1b2c3"),
        cc_asst("msg_c1", txt("Line 3 divides by zero."), isSidechain=True, agentId="a1b2c3"),
    ]
    write_jsonl(tmp_path / "proj" / "cc-sess-1.jsonl", *parent)
    write_jsonl(tmp_path / "proj" / "agent-a1b2c3.jsonl", *child)
    code, out, err = run_import(tmp_path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    assert ids() == ["cc-sess-1", "cc-sess-1:a1b2c3"]
    sub = stored("cc-sess-1:a1b2c3")
    assert sub.metadata.get("parent_session") == "cc-sess-1"
    assert msgs(sub)[-1] == ("assistant", "Line 3 divides by zero.")
    assert msgs(stored("cc-sess-1"))[-1] == ("assistant", "Subagent found it.")


def test_cc_1x_inline_sidechain_is_split_off(acme, tmp_path):
    p1 = cc_user("Investigate the bug.")
    p2 = cc_asst(
        "msg_p1", tuse("toolu_task", "Task", description="dig", prompt="Find the bug in x.py"), parent=p1["uuid"]
    )
    c1 = cc_user("Find the bug in x.py", isSidechain=True)
    c2 = cc_asst("msg_c1", txt("Line 3 divides by zero."), isSidechain=True, parent=c1["uuid"])
    p3 = tres("toolu_task", "Line 3 divides by zero.", parent=p2["uuid"])
    p4 = cc_asst("msg_p2", txt("Subagent found it."), parent=p3["uuid"])
    for x in (p1, p2, c1, c2, p3, p4):
        x["version"] = "1.0.98"
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", p1, p2, c1, c2, p3, p4))
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    assert ids() == ["cc-sess-1", "cc-sess-1:toolu_task"]
    main = stored("cc-sess-1")
    assert "Line 3 divides by zero." not in [c for r, c in msgs(main, "assistant")]
    sub = stored("cc-sess-1:toolu_task")
    assert msgs(sub) and msgs(sub)[-1] == ("assistant", "Line 3 divides by zero.")


def test_cc_subagent_file_alone_without_its_parent(acme, tmp_path):
    child = [
        cc_user("Find the bug in x.py", isSidechain=True, agentId="zz9"),
        cc_asst("msg_c1", txt("Nothing found."), isSidechain=True, agentId="zz9"),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "agent-zz9.jsonl", *child))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert ids() == ["cc-sess-1:zz9"]


# ================================================================================================================
# Family: Claude Code — compaction, thinking, tool-use-only messages, notes


def test_cc_compaction_summary_is_system_text_and_summary_lines_go_to_metadata(acme, tmp_path):
    lines = [
        {"type": "summary", "summary": "Renaming foo to bar", "leafUuid": "uuid-x"},
        cc_user("Please rename foo to bar."),
        cc_asst("msg_1", txt("Working.")),
        cc_line(
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        ),
        cc_user(
            "This session is being continued from a previous conversation that ran out of context. "
            "Summary: renamed foo.",
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
        ),
        cc_user("Now also rename baz."),
        cc_asst("msg_2", txt("Renamed baz.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    assert msgs(s, "user") == [("user", "Please rename foo to bar."), ("user", "Now also rename baz.")]
    assert any("continued from a previous conversation" in c for _, c in msgs(s, "system"))
    assert "Renaming foo to bar" in json.dumps(s.metadata.get("summaries"))
    assert msgs(s, "assistant") == [("assistant", "Working."), ("assistant", "Renamed baz.")]


def test_cc_thinking_and_redacted_thinking_blocks_are_dropped_text_kept(acme, tmp_path):
    lines = [
        cc_user("Why is it slow?"),
        cc_asst("msg_1", {"type": "thinking", "thinking": "Hmm, N+1 queries.", "signature": "sig=="}),
        cc_asst("msg_1", {"type": "redacted_thinking", "data": "EuYBCkQYAiJA..."}),
        cc_asst("msg_1", txt("You have N+1 queries.")),
        cc_asst("msg_2", {"type": "thinking", "thinking": "Only thinking here.", "signature": "s"}),
        cc_user("Thanks."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    assert msgs(s) == [
        ("user", "Why is it slow?"),
        ("assistant", "You have N+1 queries."),
        ("user", "Thanks."),
    ]
    assert "N+1 queries." not in json.dumps([e for e in s.events if e["type"] != "message"])


def test_cc_assistant_messages_with_only_tool_use_make_no_empty_messages(acme, tmp_path):
    lines = [
        cc_user("List and count files."),
        cc_asst("msg_1", tuse("toolu_1", "Glob", pattern="*.py")),
        cc_asst("msg_1", tuse("toolu_2", "Bash", command="wc -l *.py")),
        tres("toolu_1", "a.py"),
        tres("toolu_2", "10 a.py"),
        cc_asst("msg_2", txt("One file, 10 lines.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    kinds = [(e["type"], e.get("id") or e.get("call_id") or e.get("content")) for e in s.events]
    assert kinds == [
        ("message", "List and count files."),
        ("tool_call", "toolu_1"),
        ("tool_call", "toolu_2"),
        ("tool_result", "toolu_1"),
        ("tool_result", "toolu_2"),
        ("message", "One file, 10 lines."),
    ]


def test_cc_dreamweb_remember_call_is_a_memory_write(acme, tmp_path):
    lines = [
        cc_user("Remember that staging uses port 8443."),
        cc_asst("msg_1", tuse("toolu_m", "mcp__dreamweb__remember", content="Staging uses port 8443.")),
        tres("toolu_m", [{"type": "text", "text": "saved"}]),
        cc_asst("msg_2", txt("Noted.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    assert [e["content"] for e in of_type(s, "memory_write")] == ["Staging uses port 8443."]
    assert not of_type(s, "tool_result")


def test_cc_api_error_synthetic_line_is_not_lost(acme, tmp_path):
    err_line = cc_asst(
        "msg_err",
        txt("API Error: 529 Overloaded"),
        model="<synthetic>",
        isApiErrorMessage=True,
        error="rate_limit",
        apiErrorStatus=529,
    )
    lines = [cc_user("Do it."), cc_asst("msg_1", txt("Starting."), model="claude-opus-4-1"), err_line]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cc-sess-1")
    assert s.model == "claude-opus-4-1"
    assert any("529" in c or "Overloaded" in c for _, c in msgs(s, "system"))


# ================================================================================================================
# Family: Codex — other item types, reasoning, JSON-string outputs


def test_cx_reasoning_and_unknown_item_and_event_types_are_ignored(acme, tmp_path):
    lines = [
        cx_meta(),
        cx_turn(),
        *cx_user("Add a test."),
        cx(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Plan**"}],
                "content": [{"type": "reasoning_text", "text": "thinking..."}],
                "encrypted_content": "gAAAA",
            },
        ),
        cx("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "c1"}}),
        cx("response_item", {"type": "brand_new_item", "whatever": True}),
        cx("event_msg", {"type": "agent_reasoning", "text": "**Plan**"}),
        cx("event_msg", {"type": "some_future_event", "x": 1}),
        cx("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        cx_msg("assistant", "Added test_x."),
        cx("event_msg", {"type": "agent_message", "message": "Added test_x."}),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cx-sess-1")
    assert s.model == "gpt-5.1-codex" and s.agent == "codex"
    assert [m for m in msgs(s) if m[0] != "system"] == [("user", "Add a test."), ("assistant", "Added test_x.")]


def _cx_json_output_rollout():
    return [
        cx_meta(),
        cx_turn(),
        *cx_user("Run the tests."),
        cx(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "call_1",
                "arguments": json.dumps({"command": ["bash", "-lc", "pytest"], "workdir": "/home/dev/proj"}),
            },
        ),
        cx(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": json.dumps(
                    {"output": "1 failed, 3 passed", "metadata": {"exit_code": 1, "duration_seconds": 2.5}}
                ),
            },
        ),
        cx_msg("assistant", "One test fails."),
    ]


def test_cx_function_call_output_as_json_string_with_metadata_exit_code(acme, tmp_path):
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *_cx_json_output_rollout()))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    (res,) = of_type(stored("cx-sess-1"), "tool_result")
    assert res["content"] == "1 failed, 3 passed", res  # the JSON wrapper is not the tool's output
    assert res.get("exit_code") == 1 and res.get("is_error") is True, res


def test_cx_shell_function_call_arguments_are_the_parsed_json_with_the_command_as_typed(acme, tmp_path):
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *_cx_json_output_rollout()))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    (call,) = of_type(stored("cx-sess-1"), "tool_call")
    assert call["name"] == "shell"
    # Documented (docs/session-formats.md, Codex): a shell call's argv is the line a person would type.
    assert call["arguments"] == {"command": "pytest", "workdir": "/home/dev/proj"}, call


def test_cx_function_call_arguments_not_json_are_kept_as_text(acme, tmp_path):
    lines = [
        cx_meta(),
        *cx_user("Go."),
        cx(
            "response_item",
            {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": '{"cmd": "ls'},
        ),  # cut-off JSON
        cx("response_item", {"type": "function_call_output", "call_id": "c1", "output": "a\nb"}),
        cx_msg("assistant", "Listed."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cx-sess-1")
    (call,) = of_type(s, "tool_call")
    assert call["arguments"] == '{"cmd": "ls'
    assert [r["content"] for r in of_type(s, "tool_result")] == ["a\nb"]


def test_cx_local_shell_call_and_custom_tool_call_apply_patch(acme, tmp_path):
    lines = [
        cx_meta(),
        *cx_user("Patch it."),
        cx(
            "response_item",
            {
                "type": "local_shell_call",
                "call_id": "ls_1",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls", "-la"]},
            },
        ),
        cx("response_item", {"type": "function_call_output", "call_id": "ls_1", "output": "total 0"}),
        cx(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": "p_1",
                "input": "*** Begin Patch\n*** End Patch",
            },
        ),
        cx(
            "response_item",
            {
                "type": "custom_tool_call_output",
                "call_id": "p_1",
                "output": json.dumps({"output": "patch failed", "metadata": {"exit_code": 1}}),
            },
        ),
        cx(
            "event_msg",
            {
                "type": "patch_apply_end",
                "call_id": "p_1",
                "success": False,
                "stdout": "",
                "stderr": "patch failed",
                "changes": {},
            },
        ),
        cx_msg("assistant", "The patch did not apply."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cx-sess-1")
    assert [c["id"] for c in of_type(s, "tool_call")] == ["ls_1", "p_1"]
    res = {r["call_id"]: r for r in of_type(s, "tool_result")}
    assert res["p_1"]["is_error"] is True and "patch failed" in res["p_1"]["content"]
    assert res["ls_1"]["content"] == "total 0"


def test_cx_compacted_item_does_not_lose_the_turns_around_it(acme, tmp_path):
    lines = [
        cx_meta(),
        *cx_user("First task."),
        cx_msg("assistant", "First done."),
        cx(
            "compacted",
            {
                "message": "Summary of the conversation so far.",
                "replacement_history": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "First task."}]}
                ],
            },
        ),
        cx("event_msg", {"type": "context_compacted"}),
        *cx_user("Second task."),
        cx_msg("assistant", "Second done."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cx-sess-1")
    assert [m for m in msgs(s) if m[0] != "system"] == [
        ("user", "First task."),
        ("assistant", "First done."),
        ("user", "Second task."),
        ("assistant", "Second done."),
    ]


def test_cx_mcp_remember_call_is_a_memory_write(acme, tmp_path):
    lines = [
        cx_meta(),
        *cx_user("Remember the deploy key lives in vault."),
        cx(
            "response_item",
            {
                "type": "function_call",
                "name": "mcp__dreamweb__remember",
                "call_id": "m1",
                "arguments": json.dumps({"content": "Deploy key is in vault."}),
            },
        ),
        cx("response_item", {"type": "function_call_output", "call_id": "m1", "output": "ok"}),
        cx_msg("assistant", "Saved."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-1.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cx-sess-1")
    assert [e["content"] for e in of_type(s, "memory_write")] == ["Deploy key is in vault."]


def test_cx_older_rollout_layout_without_session_meta(acme, tmp_path):
    """Codex CLI rollouts of mid-2025: first line is the meta object itself, items are not wrapped in payload."""
    lines = [
        {
            "id": "old-rollout-1",
            "timestamp": "2025-06-01T10:00:00.000Z",
            "instructions": None,
            "git": {"commit_hash": "abc", "branch": "main"},
        },
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the build."}]},
        {"type": "function_call", "name": "shell", "call_id": "c1", "arguments": json.dumps({"command": ["make"]})},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": json.dumps({"output": "ok", "metadata": {"exit_code": 0}}),
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Build fixed."}]},
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout-old.jsonl", *lines))
    if code == 1:  # not supported: must at least be one clear error naming the file
        assert len(err.strip().splitlines()) == 1 and str(tmp_path / "rollout-old.jsonl") in err, err
        pytest.fail(f"an older Codex rollout is not imported: {err.strip()}")
    assert out == "imported 1, unchanged 0, rejected 0\n"
    assert [m for m in msgs(stored("old-rollout-1")) if m[0] != "system"] == [
        ("user", "Fix the build."),
        ("assistant", "Build fixed."),
    ]


# ================================================================================================================
# Family: OpenAI chat exports


def test_openai_chat_tool_calls_null_content_and_tool_messages(acme, tmp_path):
    doc = {
        "id": "chat-1",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "What's the weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_w",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_w", "content": "18C, cloudy"},
            {"role": "assistant", "content": "It is 18C and cloudy.", "refusal": None},
        ],
    }
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("chat-1")
    assert msgs(s) == [
        ("system", "You are helpful."),
        ("user", "What's the weather in Paris?"),
        ("assistant", "It is 18C and cloudy."),
    ]
    (call,) = of_type(s, "tool_call")
    assert (call["id"], call["name"], call["arguments"]) == ("call_w", "get_weather", {"city": "Paris"})
    (res,) = of_type(s, "tool_result")
    assert (res["call_id"], res["content"]) == ("call_w", "18C, cloudy")


def test_openai_chat_legacy_function_call_and_function_role(acme, tmp_path):
    doc = {
        "id": "chat-legacy",
        "messages": [
            {"role": "user", "content": "Add 2 and 3."},
            {"role": "assistant", "content": None, "function_call": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
            {"role": "function", "name": "add", "content": "5"},
            {"role": "assistant", "content": "The answer is 5."},
        ],
    }
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("chat-legacy")
    assert msgs(s) == [("user", "Add 2 and 3."), ("assistant", "The answer is 5.")]
    assert [c["name"] for c in of_type(s, "tool_call")] == ["add"]
    assert [r["content"] for r in of_type(s, "tool_result")] == ["5"]


def test_openai_chat_content_parts_array_and_jsonl_of_conversations(acme, tmp_path):
    convs = [
        {
            "id": f"conv-{i}",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"Question {i}"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    ],
                },
                {"role": "assistant", "content": [{"type": "text", "text": f"Answer {i}"}]},
            ],
        }
        for i in range(3)
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "chats.jsonl", *convs))
    assert (code, out) == (0, "imported 3, unchanged 0, rejected 0\n"), err
    for i in range(3):
        m = msgs(stored(f"conv-{i}"))
        assert m[0][0] == "user" and f"Question {i}" in m[0][1]
        assert m[1] == ("assistant", f"Answer {i}")


def test_openai_chat_completion_response_with_choices(acme, tmp_path):
    doc = {
        "id": "chatcmpl-xyz",
        "object": "chat.completion",
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Say hi."}],
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi!", "refusal": None}}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    path = tmp_path / "resp.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("chatcmpl-xyz")) == [("user", "Say hi."), ("assistant", "Hi!")]


def test_openai_chat_without_id_reimports_as_unchanged(acme, tmp_path):
    doc = {"messages": [{"role": "user", "content": "No id here."}, {"role": "assistant", "content": "OK."}]}
    path = tmp_path / "noid.json"
    path.write_text(json.dumps(doc))
    assert run_import(path)[:2] == (0, "imported 1, unchanged 0, rejected 0\n")
    assert run_import(path)[:2] == (0, "imported 0, unchanged 1, rejected 0\n")
    assert AgentSession.objects.count() == 1


# ================================================================================================================
# Family: Anthropic messages


def test_anthropic_messages_content_block_arrays(acme, tmp_path):
    doc = {
        "id": "anth-1",
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "You are a careful engineer."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Check disk usage."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "use df", "signature": "s"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_d", "name": "bash", "input": {"command": "df -h"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_d",
                        "is_error": True,
                        "content": [{"type": "text", "text": "df: permission denied"}],
                    },
                ],
            },
            {"role": "assistant", "content": "I lack permission."},
        ],
    }
    path = tmp_path / "anth.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("anth-1")
    assert msgs(s) == [
        ("system", "You are a careful engineer."),
        ("user", "Check disk usage."),
        ("assistant", "Checking."),
        ("assistant", "I lack permission."),
    ]
    (res,) = of_type(s, "tool_result")
    assert res["is_error"] is True and "permission denied" in res["content"]


def test_anthropic_messages_jsonl_with_mcp_tool_use_and_image_results(acme, tmp_path):
    convs = [
        {
            "id": "anth-a",
            "messages": [
                {"role": "user", "content": "Screenshot please."},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "mcp_tool_use",
                            "id": "mcptoolu_1",
                            "name": "screenshot",
                            "server_name": "browser",
                            "input": {},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "mcp_tool_result",
                            "tool_use_id": "mcptoolu_1",
                            "is_error": False,
                            "content": [{"type": "text", "text": "captured"}],
                        }
                    ],
                },
                {"role": "assistant", "content": [{"type": "text", "text": "Here it is."}]},
            ],
        },
        {
            "id": "anth-b",
            "messages": [
                {"role": "user", "content": "Read file."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [
                                {
                                    "type": "image",
                                    "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
                                }
                            ],
                        }
                    ],
                },
                {"role": "assistant", "content": [{"type": "text", "text": "It is an image."}]},
            ],
        },
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "anth.jsonl", *convs))
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    a = stored("anth-a")
    assert [c["name"] for c in of_type(a, "tool_call")] == ["mcp__browser__screenshot"]
    assert msgs(a)[-1] == ("assistant", "Here it is.")
    assert msgs(stored("anth-b"))[-1] == ("assistant", "It is an image.")


# ================================================================================================================
# Family: bytes and lines — BOM, CRLF, blank lines, truncation, huge lines, bad bytes, empty files


def test_bytes_utf8_bom_on_a_claude_code_file(acme, tmp_path):
    path = write_jsonl(tmp_path / "cc.jsonl", *basic_cc(), bom=True)
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-sess-1"))[0] == ("user", "Please rename foo to bar.")


def test_bytes_utf8_bom_on_a_codex_file(acme, tmp_path):
    path = write_jsonl(tmp_path / "rollout.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."), bom=True)
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert ids() == ["cx-sess-1"]


def test_bytes_utf8_bom_on_a_pretty_printed_openai_json_document(acme, tmp_path):
    doc = {"id": "chat-bom", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path = tmp_path / "chat.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc, indent=2).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err


def test_bytes_utf8_bom_on_a_canonical_file(acme, tmp_path):
    s = {"external_id": "dw-bom", "agent": "bot", "events": [{"type": "message", "role": "user", "content": "x"}]}
    path = write_jsonl(tmp_path / "dw.jsonl", s, bom=True)
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err


def test_bytes_crlf_line_endings_and_blank_lines(acme, tmp_path):
    lines = basic_cc()
    with_blanks = [lines[0], "", lines[1], "   ", lines[2], "", lines[3], lines[4], ""]
    path = write_jsonl(tmp_path / "cc.jsonl", *with_blanks, eol="\r\n")
    code, out, err = run_import(path)
    assert (code, out, err) == (0, "imported 1, unchanged 0, rejected 0\n", "")
    s = stored("cc-sess-1")
    assert msgs(s) == [
        ("user", "Please rename foo to bar."),
        ("assistant", "Sure, renaming."),
        ("assistant", "Done."),
    ]
    assert not any("\r" in json.dumps(e) for e in s.events)


def test_bytes_crlf_canonical_and_codex(acme, tmp_path):
    s = {"external_id": "dw-crlf", "agent": "bot", "events": [{"type": "message", "role": "user", "content": "x"}]}
    write_jsonl(tmp_path / "a.jsonl", s, "", eol="\r\n")
    write_jsonl(tmp_path / "b.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."), eol="\r\n")
    code, out, err = run_import(tmp_path)
    assert (code, out, err) == (0, "imported 2, unchanged 0, rejected 0\n", "")


def test_bytes_truncated_last_line_of_claude_code(acme, tmp_path):
    lines = basic_cc()
    cut = json.dumps(cc_asst("msg_a3", txt("This line was cut while writi")))[:80]
    path = write_jsonl(tmp_path / "cc.jsonl", *lines, cut)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # no newline after the cut
    code, out, err = run_import(path)
    assert out == "imported 1, unchanged 0, rejected 0\n", (code, out, err)
    assert "line 6" in err, err
    assert msgs(stored("cc-sess-1"))[-1] == ("assistant", "Done.")


def test_bytes_truncated_last_line_of_codex(acme, tmp_path):
    cut = json.dumps(cx_msg("assistant", "This line was cut"))[:50]
    path = write_jsonl(tmp_path / "rollout.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."), cut)
    code, out, err = run_import(path)
    assert out == "imported 1, unchanged 0, rejected 0\n", (code, out, err)
    assert "line 5" in err, err
    assert msgs(stored("cx-sess-1"))[-1] == ("assistant", "Hello.")


def test_bytes_truncated_line_note_in_a_folder_names_the_file(acme, tmp_path):
    """In a folder import, a note about a skipped line must say which file it is in ("messages about a file name
    it")."""
    write_jsonl(tmp_path / "a" / "ok.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."))
    cut = json.dumps(cc_asst("msg_a3", txt("This line was cut while writi")))[:80]
    write_jsonl(tmp_path / "b" / "cc.jsonl", *basic_cc(), cut)
    code, out, err = run_import(tmp_path)
    assert out == "imported 2, unchanged 0, rejected 0\n", (code, out, err)
    assert "line 6" in err, err
    assert "cc.jsonl" in err, f"the note does not name the file: {err!r}"


def test_bytes_non_utf8_line_note_in_a_folder_names_the_file(acme, tmp_path):
    write_jsonl(tmp_path / "a" / "ok.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."))
    path = write_jsonl(tmp_path / "b" / "cc.jsonl", *basic_cc())
    path.write_bytes(path.read_bytes().replace(b"Done.", b"D\xf6ne."))
    code, out, err = run_import(tmp_path)
    assert out == "imported 2, unchanged 0, rejected 0\n", (code, out, err)
    assert "cc.jsonl" in err or err == "", f"a note does not name the file: {err!r}"


def test_bytes_huge_session_in_a_folder_error_names_the_file(acme, tmp_path):
    write_jsonl(tmp_path / "a" / "ok.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."))
    lines = [
        cc_user("Dump the log."),
        cc_asst("msg_1", tuse("toolu_1", "Bash", command="cat big.log")),
        tres("toolu_1", "x" * (6 * 1024 * 1024)),
    ]
    write_jsonl(tmp_path / "b" / "cc.jsonl", *lines)
    code, out, err = run_import(tmp_path)
    assert "cx-sess-1" in ids(), (out, err)
    if "cc-sess-1" not in ids():
        assert "cc.jsonl" in err, f"the rejection does not name the file: {err!r}"


def test_bytes_truncated_middle_line_in_canonical_names_file_and_line(acme, tmp_path):
    def good(i):
        return {
            "external_id": f"dw-{i}",
            "agent": "bot",
            "events": [{"type": "message", "role": "user", "content": f"m{i}"}],
        }

    path = write_jsonl(tmp_path / "dw.jsonl", good(1), json.dumps(good(2))[:30], good(3))
    code, out, err = run_import(path)
    assert (code, out) == (1, "imported 2, unchanged 0, rejected 1\n"), err
    assert "line 2" in err
    assert ids() == ["dw-1", "dw-3"]


@pytest.mark.xfail(strict=True, reason="a session over the limits is refused whole, by design: docs/session-formats.md")
def test_bytes_huge_single_tool_result_line(acme, tmp_path):
    big = "x" * (8 * 1024 * 1024)  # an 8 MB tool output on one line
    lines = [
        cc_user("Dump the log."),
        cc_asst("msg_1", tuse("toolu_1", "Bash", command="cat big.log")),
        tres("toolu_1", big),
        cc_asst("msg_2", txt("That is a big log.")),
    ]
    path = write_jsonl(tmp_path / "cc.jsonl", *lines)
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err[:2000]
    s = stored("cc-sess-1")
    assert msgs(s)[-1] == ("assistant", "That is a big log.")
    assert len(of_type(s, "tool_result")) == 1


def test_bytes_3mb_single_line_under_the_session_limit(acme, tmp_path):
    lines = [
        cc_user("Dump the log."),
        cc_asst("msg_1", tuse("toolu_1", "Bash", command="cat big.log")),
        tres("toolu_1", "y" * (3 * 1024 * 1024)),
        cc_asst("msg_2", txt("That is a big log.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err[:2000]
    assert msgs(stored("cc-sess-1"))[-1] == ("assistant", "That is a big log.")


def test_bytes_non_utf8_byte_inside_a_claude_code_line(acme, tmp_path):
    """One latin-1 byte in the person's prompt: the prompt is kept (the byte replaced, as the docs promise for NULs
    and cut surrogates), not the whole line dropped."""
    path = write_jsonl(tmp_path / "cc.jsonl", *basic_cc())
    path.write_bytes(path.read_bytes().replace(b"Please rename foo to bar.", b"Please rename f\xe9o to bar."))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-sess-1")) == [
        ("user", "Please rename f\ufffdo to bar."),
        ("assistant", "Sure, renaming."),
        ("assistant", "Done."),
    ], f"stderr: {err!r}"


def test_bytes_non_utf8_file_among_good_ones(acme, tmp_path):
    write_jsonl(tmp_path / "a" / "cc.jsonl", *basic_cc())
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "latin1.jsonl").write_bytes('{"r\u00e9sum\u00e9": 1}\n'.encode("latin-1") * 3)
    write_jsonl(tmp_path / "c" / "rollout.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."))
    code, out, err = run_import(tmp_path)
    assert code == 1 and out == "imported 2, unchanged 0, rejected 1\n", (out, err)
    assert str(tmp_path / "b" / "latin1.jsonl") in err
    assert ids() == ["cc-sess-1", "cx-sess-1"]


def test_bytes_nul_and_lone_surrogate_in_text(acme, tmp_path):
    lines = basic_cc()
    lines[3] = tres("toolu_a1", "bin\u0000ary \ud83d cut")
    path = tmp_path / "cc.jsonl"
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))  # json.dumps escapes them as \u0000 / \ud83d
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    (res,) = of_type(stored("cc-sess-1"), "tool_result")
    assert "\x00" not in res["content"] and "\ufffd" in res["content"]


def test_bytes_empty_file_alone(acme, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    code, out, err = run_import(path)
    # nothing imported, and either silently nothing or one clear error naming the file: never a crash
    assert out in ("imported 0, unchanged 0, rejected 0\n", "imported 0, unchanged 0, rejected 1\n"), (out, err)
    if code:
        assert str(path) in err and len(err.strip().splitlines()) == 1, err


def test_bytes_empty_and_whitespace_files_among_good_ones(acme, tmp_path):
    (tmp_path / "0-empty.jsonl").write_bytes(b"")
    (tmp_path / "1-blank.json").write_bytes(b"\n\n  \r\n")
    write_jsonl(tmp_path / "2-cc.jsonl", *basic_cc())
    code, out, err = run_import(tmp_path)
    assert out.startswith("imported 1, unchanged 0, rejected "), (out, err)
    assert ids() == ["cc-sess-1"]
    for line in err.strip().splitlines():
        assert str(tmp_path) in line, err  # every message names its file


# ================================================================================================================
# Family: folders — mixed formats, nesting, non-transcript files


def _mixed_folder(root: Path):
    write_jsonl(root / "claude" / "proj-a" / "cc-sess-1.jsonl", *basic_cc())
    write_jsonl(
        root / "codex" / "2026" / "05" / "11" / "rollout-x.jsonl",
        cx_meta(),
        cx_turn(),
        *cx_user("Hi."),
        cx_msg("assistant", "Hello."),
    )
    (root / "openai").mkdir()
    (root / "openai" / "chat.json").write_text(
        json.dumps(
            {"id": "chat-m", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
        )
    )
    (root / "anthropic").mkdir()
    (root / "anthropic" / "conv.json").write_text(
        json.dumps(
            {
                "id": "anth-m",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "q"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
                ],
            }
        )
    )
    write_jsonl(
        root / "dw" / "canon.jsonl",
        {"external_id": "dw-m", "agent": "bot", "events": [{"type": "message", "role": "user", "content": "x"}]},
    )
    (root / "README.md").write_text("# my transcripts\n")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1\x00\x00\x10\x00")
    (root / "claude" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "notes.txt").write_text('{"not": "a transcript"}\n')
    (root / "claude" / "proj-a" / "settings.local.json.bak").write_text("{}")


def test_folder_mixed_formats_nested_with_junk_files(acme, tmp_path):
    _mixed_folder(tmp_path)
    code, out, err = run_import(tmp_path)
    assert (code, out, err) == (0, "imported 5, unchanged 0, rejected 0\n", "")
    assert ids() == ["anth-m", "cc-sess-1", "chat-m", "cx-sess-1", "dw-m"]
    formats = dict(AgentSession.objects.values_list("external_id", "source_format"))
    assert formats["cc-sess-1"] == "claude-code" and formats["cx-sess-1"] == "codex"


def test_folder_with_a_json_config_file_that_is_not_a_transcript(acme, tmp_path):
    _mixed_folder(tmp_path)
    (tmp_path / "claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}))
    (tmp_path / "package.json").write_text(json.dumps({"name": "x", "version": "1.0.0"}))
    code, out, err = run_import(tmp_path)
    assert out == "imported 5, unchanged 0, rejected 2\n", (out, err)
    assert len(err.strip().splitlines()) == 2
    assert str(tmp_path / "package.json") in err and str(tmp_path / "claude" / "settings.json") in err


def test_folder_reimport_is_idempotent(acme, tmp_path):
    _mixed_folder(tmp_path)
    assert run_import(tmp_path)[:2] == (0, "imported 5, unchanged 0, rejected 0\n")
    before = {s.external_id: (s.event_count, json.dumps(s.events)) for s in AgentSession.objects.all()}
    code, out, err = run_import(tmp_path)
    assert (code, out, err) == (0, "imported 0, unchanged 5, rejected 0\n", "")
    after = {s.external_id: (s.event_count, json.dumps(s.events)) for s in AgentSession.objects.all()}
    assert before == after


def test_folder_reimport_with_parent_and_subagent_is_idempotent(acme, tmp_path):
    p1 = cc_user("Investigate.")
    p2 = cc_asst("msg_p1", tuse("toolu_task", "Task", description="dig", prompt="Find the bug"), parent=p1["uuid"])
    c1 = cc_user("Find the bug", isSidechain=True)
    c2 = cc_asst("msg_c1", txt("Found."), isSidechain=True, parent=c1["uuid"])
    p3 = tres("toolu_task", "Found.", parent=p2["uuid"])
    write_jsonl(tmp_path / "cc.jsonl", p1, p2, c1, c2, p3)
    write_jsonl(
        tmp_path / "agent-q7.jsonl",
        cc_user("Other job", isSidechain=True, agentId="q7"),
        cc_asst("msg_q", txt("ok"), isSidechain=True, agentId="q7"),
    )
    first = run_import(tmp_path)
    assert first[0] == 0, first
    n = AgentSession.objects.count()
    assert run_import(tmp_path)[:2] == (0, f"imported 0, unchanged {n}, rejected 0\n")
    assert AgentSession.objects.count() == n


def test_folder_same_claude_session_id_in_two_files_with_different_content(acme, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", *basic_cc())
    other = basic_cc()
    other[0] = cc_user("A completely different request.")
    write_jsonl(tmp_path / "b.jsonl", *other)
    code, out, err = run_import(tmp_path)
    assert (code, out) == (1, "imported 1, unchanged 0, rejected 1\n"), err
    assert "conflict" in err and "b.jsonl" in err, err
    assert msgs(stored("cc-sess-1"))[0] == ("user", "Please rename foo to bar.")  # the first is kept, not mixed


def test_folder_same_session_copied_twice_is_unchanged_not_doubled(acme, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", *basic_cc())
    write_jsonl(tmp_path / "backup" / "a.jsonl", *basic_cc())
    # the backup copy has identical content (same uuids too)
    (tmp_path / "backup" / "a.jsonl").write_bytes((tmp_path / "a.jsonl").read_bytes())
    code, out, err = run_import(tmp_path)
    assert (code, out, err) == (0, "imported 1, unchanged 1, rejected 0\n", "")
    assert AgentSession.objects.count() == 1


def test_folder_same_codex_id_in_two_rollouts(acme, tmp_path):
    write_jsonl(tmp_path / "r1.jsonl", cx_meta("dup"), *cx_user("First."), cx_msg("assistant", "A."))
    write_jsonl(tmp_path / "r2.jsonl", cx_meta("dup"), *cx_user("Second."), cx_msg("assistant", "B."))
    code, out, err = run_import(tmp_path)
    assert (code, out) == (1, "imported 1, unchanged 0, rejected 1\n"), err
    assert "conflict" in err and "r2.jsonl" in err, err
    assert [m for m in msgs(stored("dup")) if m[0] != "system"] == [("user", "First."), ("assistant", "A.")]


def test_folder_a_grown_claude_transcript_reimported_is_a_conflict_not_unchanged(acme, tmp_path):
    """A live session's file grows; importing it again must not say 'unchanged' (the contract forbids silently
    dropping different content)."""
    path = write_jsonl(tmp_path / "cc.jsonl", *basic_cc()[:3])
    assert run_import(path)[:2] == (0, "imported 1, unchanged 0, rejected 0\n")
    write_jsonl(path, *basic_cc())
    code, out, err = run_import(path)
    assert out != "imported 0, unchanged 1, rejected 0\n", "grown session silently reported unchanged"
    assert code == 1 and "conflict" in err, (out, err)


def test_folder_a_file_with_a_mid_file_bad_line_is_not_half_written(acme, tmp_path):
    """A Claude Code file with a garbage line in the middle: the session is imported whole (the bad line skipped
    with a note naming file and line), never cut at the bad line."""
    lines = basic_cc()
    path = write_jsonl(tmp_path / "cc.jsonl", lines[0], lines[1], "<<<garbage>>>", lines[2], lines[3], lines[4])
    code, out, err = run_import(path)
    assert out == "imported 1, unchanged 0, rejected 0\n", (out, err)
    assert "line 3" in err, err
    s = stored("cc-sess-1")
    assert msgs(s)[-1] == ("assistant", "Done.")
    assert len(of_type(s, "tool_call")) == 1 and len(of_type(s, "tool_result")) == 1


# ================================================================================================================
# Family: more Codex / OpenAI Responses shapes


def test_cx_function_call_output_as_a_list_of_content_items(acme, tmp_path):
    lines = [
        cx_meta(),
        *cx_user("Take a screenshot."),
        cx(
            "response_item",
            {
                "type": "function_call",
                "name": "view_image",
                "call_id": "v1",
                "arguments": json.dumps({"path": "a.png"}),
            },
        ),
        cx(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "v1",
                "output": [
                    {"type": "input_text", "text": "image attached"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                ],
            },
        ),
        cx_msg("assistant", "I see a cat."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("cx-sess-1")
    (res,) = of_type(s, "tool_result")
    assert "image attached" in res["content"] and "base64" not in res["content"], res
    assert msgs(s)[-1] == ("assistant", "I see a cat.")


def test_cx_user_message_with_an_image_item(acme, tmp_path):
    lines = [
        cx_meta(),
        cx(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                ],
            },
        ),
        cx("event_msg", {"type": "user_message", "message": "What is this?", "images": ["data:..."]}),
        cx_msg("assistant", "A diagram."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    m = [x for x in msgs(stored("cx-sess-1")) if x[0] != "system"]
    assert m[0][0] == "user" and "What is this?" in m[0][1] and "base64" not in m[0][1], m
    assert m[-1] == ("assistant", "A diagram.")


def test_cx_rollout_with_a_second_session_meta_line(acme, tmp_path):
    """Resumed / forked rollouts can carry a second session_meta line; the import must not crash, double, or drop
    the turns after it."""
    lines = [
        cx_meta("fork-child"),
        cx_meta("fork-parent"),
        *cx_user("Continue."),
        cx_msg("assistant", "Continuing."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    (s,) = AgentSession.objects.all()
    assert s.external_id == "fork-child"
    assert [m for m in msgs(s) if m[0] != "system"] == [("user", "Continue."), ("assistant", "Continuing.")]


def test_openai_responses_document_with_reasoning_and_function_calls(acme, tmp_path):
    doc = {
        "id": "resp_abc",
        "object": "response",
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}],
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "-3C"},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "It is -3C.", "annotations": []}],
            },
        ],
    }
    path = tmp_path / "resp.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("resp_abc")
    assert msgs(s) == [("user", "Weather in Oslo?"), ("assistant", "It is -3C.")]
    assert [(c["id"], c["name"]) for c in of_type(s, "tool_call")] == [("call_1", "get_weather")]
    assert [r["content"] for r in of_type(s, "tool_result")] == ["-3C"]


def test_bytes_utf8_bom_on_an_anthropic_json_document(acme, tmp_path):
    doc = {"id": "anth-bom", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path = tmp_path / "anth.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err


def test_bytes_crlf_pretty_printed_json_document(acme, tmp_path):
    doc = {"id": "chat-crlf", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path = tmp_path / "chat.json"
    path.write_bytes(json.dumps(doc, indent=2).replace("\n", "\r\n").encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err


def test_cc_tool_use_error_inside_a_list_of_text_blocks(acme, tmp_path):
    lines = [
        cc_user("Edit it."),
        cc_asst("msg_1", tuse("toolu_1", "Edit", file_path="a.py", old_string="x", new_string="y")),
        tres(
            "toolu_1",
            [{"type": "text", "text": "<tool_use_error>File has not been read yet.</tool_use_error>"}],
            is_error=True,
        ),
        cc_asst("msg_2", txt("I will read it first.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    (res,) = of_type(stored("cc-sess-1"), "tool_result")
    assert res["is_error"] is True and res["content"] == "File has not been read yet.", res


def test_cc_rewound_branch_keeps_messages_in_time_order(acme, tmp_path):
    """A rewind: two children of one parent. Whatever is kept, the events stay in file/time order and the final
    answer is last."""
    u1 = cc_user("Write a haiku.")
    a1 = cc_asst("msg_1", txt("Draft one."), parent=u1["uuid"])
    u2 = cc_user("No, about autumn.", parent=u1["uuid"])
    a2 = cc_asst("msg_2", txt("Autumn haiku."), parent=u2["uuid"])
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", u1, a1, u2, a2))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    m = msgs(stored("cc-sess-1"))
    assert m[0] == ("user", "Write a haiku.") and m[-1] == ("assistant", "Autumn haiku."), m
    ts = [e["ts"] for e in stored("cc-sess-1").events if e.get("ts")]
    assert ts == sorted(ts)


def _gemini_doc():
    return {
        "sessionId": "gem-1",
        "projectHash": "abc",
        "startTime": "2026-03-01T10:00:00.000Z",
        "lastUpdated": "2026-03-01T10:05:00.000Z",
        "messages": [
            {"id": "1", "timestamp": "2026-03-01T10:00:00.000Z", "type": "user", "content": "List files."},
            {"id": "2", "timestamp": "2026-03-01T10:00:01.000Z", "type": "future_kind", "content": "?"},
            {"id": "3", "timestamp": "2026-03-01T10:00:02.000Z", "type": "gemini", "content": "Here they are."},
        ],
    }


def test_gemini_cli_session_with_an_unknown_message_type(acme, tmp_path):
    path = tmp_path / "session-gem.json"
    path.write_text(json.dumps(_gemini_doc(), indent=2))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    m = msgs(stored("gem-1"))
    assert m[0] == ("user", "List files.") and m[-1] == ("assistant", "Here they are."), m


def test_bytes_utf8_bom_on_a_pretty_printed_gemini_cli_session(acme, tmp_path):
    path = tmp_path / "session-gem.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_gemini_doc(), indent=2).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err


def test_bytes_utf8_bom_on_a_one_line_openai_document(acme, tmp_path):
    doc = {"id": "chat-bom1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path = tmp_path / "chat.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err


# ================================================================================================================
# Family: folders — odd filesystem entries


def test_folder_with_a_directory_named_like_a_transcript(acme, tmp_path):
    (tmp_path / "archive.jsonl").mkdir()
    write_jsonl(tmp_path / "archive.jsonl" / "inner.jsonl", *basic_cc())
    write_jsonl(tmp_path / "z.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."))
    code, out, err = run_import(tmp_path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), err
    assert ids() == ["cc-sess-1", "cx-sess-1"]


def test_folder_with_a_broken_symlink_named_like_a_transcript(acme, tmp_path):
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "does-not-exist.jsonl")
    write_jsonl(tmp_path / "z.jsonl", cx_meta(), *cx_user("Hi."), cx_msg("assistant", "Hello."))
    code, out, err = run_import(tmp_path)
    assert ids() == ["cx-sess-1"], (out, err)
    assert out.startswith("imported 1, unchanged 0, rejected "), (out, err)
    if code:
        assert "gone.jsonl" in err, err


def test_folder_with_a_symlink_loop(acme, tmp_path):
    write_jsonl(tmp_path / "a" / "cc.jsonl", *basic_cc())
    (tmp_path / "a" / "loop").symlink_to(tmp_path, target_is_directory=True)
    code, out, err = run_import(tmp_path)
    assert "cc-sess-1" in ids(), (out, err)
    assert AgentSession.objects.count() == 1
    assert code == 0 and out.startswith("imported 1, "), (out, err)


# ================================================================================================================
# Family: OpenAI chat / Anthropic messages (more)


def test_openai_chat_developer_role_and_tool_message_with_content_parts(acme, tmp_path):
    doc = {
        "id": "chat-parts",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
            {"role": "user", "content": "Lookup."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 2}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "one"}]},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
            {"role": "assistant", "content": "one, two"},
        ],
    }
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    s = stored("chat-parts")
    assert msgs(s) == [("system", "Be terse."), ("user", "Lookup."), ("assistant", "one, two")]
    assert [r["content"] for r in of_type(s, "tool_result")] == ["one", "two"]
    kinds = [e["type"] for e in s.events]
    assert kinds == ["message", "message", "tool_call", "tool_call", "tool_result", "tool_result", "message"]


def test_anthropic_messages_with_empty_and_null_assistant_content(acme, tmp_path):
    doc = {
        "id": "anth-empty",
        "messages": [
            {"role": "user", "content": "Hello?"},
            {"role": "assistant", "content": []},
            {"role": "user", "content": "Anyone?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Yes."}]},
        ],
    }
    path = tmp_path / "anth.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("anth-empty")) == [("user", "Hello?"), ("user", "Anyone?"), ("assistant", "Yes.")]


# ================================================================================================================
# Family: session shape edge cases


@pytest.mark.xfail(strict=True, reason="a session over the limits is refused whole, by design: docs/session-formats.md")
def test_cc_long_session_over_20000_events(acme, tmp_path):
    """A long agentic session: 10,500 small tool calls and results (21,000+ events). A demanding user expects it
    imported (or at most clearly cut), not the whole session refused."""
    lines = [cc_user("Process every file.")]
    for i in range(10_500):
        lines.append(cc_asst(f"msg_{i}", tuse(f"toolu_{i}", "Read", file_path=f"f{i}.py")))
        lines.append(tres(f"toolu_{i}", f"ok {i}"))
    lines.append(cc_asst("msg_end", txt("All files processed.")))
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err[:1000]
    assert "cc-sess-1" in ids()


def test_cc_file_with_two_session_ids(acme, tmp_path):
    """Claude Code 1.0.x `--continue` writes the copied history under the old sessionId, then the new turns under the
    new one. Nothing may be lost or attributed to the wrong session; no crash."""
    old = basic_cc("old-sess")
    new = [cc_user("And now rename baz.", sid="new-sess"), cc_asst("msg_n1", txt("Renamed baz."), sid="new-sess")]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *old, *new))
    assert code == 0, (out, err)
    everything = [c for s in AgentSession.objects.all() for _, c in msgs(s)]
    assert "And now rename baz." in everything and "Renamed baz." in everything, (ids(), everything)
    assert "Please rename foo to bar." in everything


def test_cc_orphan_tool_result_after_compaction(acme, tmp_path):
    lines = [
        tres("toolu_gone", "result of a call from before the file started"),
        cc_user("Continue please."),
        cc_asst("msg_1", txt("Continuing.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-sess-1")) == [("user", "Continue please."), ("assistant", "Continuing.")]


def test_cx_rollout_with_only_session_meta(acme, tmp_path):
    code, out, err = run_import(write_jsonl(tmp_path / "rollout.jsonl", cx_meta(), cx_turn()))
    # An empty session imported, or one clear note: never a crash
    assert out in ("imported 1, unchanged 0, rejected 0\n", "imported 0, unchanged 0, rejected 0\n"), (out, err)


def test_cx_orphan_function_call_output(acme, tmp_path):
    lines = [
        cx_meta(),
        *cx_user("Go."),
        cx("response_item", {"type": "function_call_output", "call_id": "nobody", "output": "stray"}),
        cx_msg("assistant", "Done."),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "rollout.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert [m for m in msgs(stored("cx-sess-1")) if m[0] != "system"] == [("user", "Go."), ("assistant", "Done.")]


def test_stdin_claude_code_with_bom_and_crlf(acme, monkeypatch):
    data = b"\xef\xbb\xbf" + "".join(json.dumps(x) + "\r\n" for x in basic_cc()).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, err = run_import("-")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-sess-1"))[0] == ("user", "Please rename foo to bar.")


def test_cc_assistant_content_as_plain_string_and_user_line_without_message(acme, tmp_path):
    a = cc_asst("msg_1")
    a["message"]["content"] = "Plain string answer."
    lines = [
        cc_user("Question?"),
        a,
        cc_line("user", toolUseResult={"stdout": "x"}),  # no message at all
        cc_user("Follow-up."),
        cc_asst("msg_2", txt("Second answer.")),
    ]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    assert msgs(stored("cc-sess-1")) == [
        ("user", "Question?"),
        ("assistant", "Plain string answer."),
        ("user", "Follow-up."),
        ("assistant", "Second answer."),
    ]


def test_cc_message_content_null_and_block_without_type(acme, tmp_path):
    b = cc_asst("msg_1", {"text": "no type key"}, txt("Typed text."))
    u = cc_user(None)
    lines = [cc_user("Hi."), u, b, cc_user("Bye.")]
    code, out, err = run_import(write_jsonl(tmp_path / "cc.jsonl", *lines))
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), err
    m = msgs(stored("cc-sess-1"))
    assert m[0] == ("user", "Hi.") and m[-1] == ("user", "Bye.") and ("assistant", "Typed text.") in m, m


# ================================================================================================================
# Family: a format named that the content is plainly not in (added after the second export probe)


def test_a_codex_rollout_named_claude_code_is_refused_naming_both(acme, tmp_path):
    path = write_jsonl(tmp_path / "rollout-1.jsonl", cx_meta(), *cx_user("Go."), cx_msg("assistant", "Done."))
    code, out, err = run_import(path, format="claude-code")
    assert code == 1 and out == "imported 0, unchanged 0, rejected 1\n", (out, err)
    assert "named as claude-code" in err and "content is codex" in err and "rollout-1.jsonl" in err


def test_a_claude_code_file_named_codex_is_refused_naming_both(acme, tmp_path):
    path = write_jsonl(tmp_path / "cc.jsonl", *basic_cc())
    code, out, err = run_import(path, format="codex")
    assert code == 1 and "named as codex" in err and "content is claude-code" in err, (out, err)
