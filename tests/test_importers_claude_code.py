"""Claude Code transcripts to canonical sessions: every mapping rule, on synthetic lines shaped like the real files
(../shared/real/transcripts/FORMATS.md)."""

from __future__ import annotations

import json

import pytest

from tests.importer_support import convert, events, jsonl, one, shape

SID = "11111111-2222-3333-4444-555555555555"
_uuid = iter(range(1, 10_000))


def line(kind: str, message=None, *, parent=None, ts="2026-01-05T10:00:00.000Z", **extra) -> dict:
    out = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/work/app",
        "sessionId": SID,
        "version": "2.1.5",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"u-{next(_uuid):04d}",
        "timestamp": ts,
    }
    if message is not None:
        out["message"] = message
    out.update(extra)
    return out


def user(content, **extra) -> dict:
    return line("user", {"role": "user", "content": content}, **extra)


def assistant(mid: str, *blocks, usage=None, model="claude-sonnet-4-5", **extra) -> dict:
    message = {"id": mid, "model": model, "role": "assistant", "type": "message", "content": list(blocks)}
    message["usage"] = usage or {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100}
    return line("assistant", message, requestId="req_1", **extra)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_use(tid: str, name: str, **args) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def result(tid: str, content, *, is_error=None, structured=None, **extra) -> dict:
    block = {"type": "tool_result", "tool_use_id": tid, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    out = user([block], **extra)
    if structured is not None:
        out["toolUseResult"] = structured
    return out


def test_lines_of_one_api_message_are_one_message_and_its_usage_counts_once():
    doc = one(
        jsonl(
            user("Fix the failing test."),
            assistant("msg_1", {"type": "thinking", "thinking": "Let me think.", "signature": "sig"}),
            assistant("msg_1", text("Looking at the test.")),
            assistant("msg_1", text("It imports a missing module.")),
            assistant("msg_1", tool_use("toolu_1", "Read", file_path="/work/app/test_x.py")),
            result("toolu_1", "     1→import app"),
            assistant("msg_2", text("Found it."), usage={"input_tokens": 3, "output_tokens": 2}),
        )
    )
    assert doc["external_id"] == SID and doc["agent"] == "claude-code" and doc["model"] == "claude-sonnet-4-5"
    assert shape(doc) == [
        ("message", "user", "Fix the failing test."),
        ("message", "assistant", "Looking at the test.\nIt imports a missing module."),
        ("call", "toolu_1", "Read"),
        ("result", "toolu_1", "import app", False, None),
        ("message", "assistant", "Found it."),
    ]
    assert doc["metadata"]["usage"] == {"input_tokens": 13, "output_tokens": 7, "cache_read_input_tokens": 100}
    assert not any("think" in e.get("content", "").lower() for e in doc["events"])  # thinking is dropped


def test_tool_errors_tool_use_error_text_and_the_exit_code_header():
    doc = one(
        jsonl(
            user("Go."),
            assistant("m1", tool_use("t1", "Bash", command="golangci-lint run ./...")),
            result("t1", "Exit code 1\n[lint] clean.go:221:3: error is not nil (nilerr)", is_error=True),
            assistant("m2", tool_use("t2", "Edit", file_path="a.go", old_string="x", new_string="y")),
            result(
                "t2", "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"
            ),
            assistant("m3", tool_use("t3", "Bash", command="cat notes.txt")),
            result("t3", "Exit code 3 was what the old build returned", is_error=False),
            assistant("m4", tool_use("t4", "Bash", command="make build")),
            result("t4", [{"type": "text", "text": "cc: error"}], is_error=True),
        )
    )
    results = {e["call_id"]: e for e in events(doc, "tool_result")}
    assert (results["t1"]["exit_code"], results["t1"]["is_error"]) == (1, True)
    assert results["t1"]["content"] == "[lint] clean.go:221:3: error is not nil (nilerr)"
    assert results["t2"]["is_error"] is True and "exit_code" not in results["t2"]
    assert results["t2"]["content"] == "File has not been read yet. Read it first before writing to it."
    assert "is_error" not in results["t3"] and "exit_code" not in results["t3"]  # output, not a header
    assert results["t3"]["content"] == "Exit code 3 was what the old build returned"
    assert (results["t4"]["content"], results["t4"]["is_error"], results["t4"].get("exit_code")) == (
        "cc: error",
        True,
        None,
    )


def test_text_the_cli_wrote_is_system_text_not_the_persons():
    doc = one(
        jsonl(
            user(
                "<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n"
                "<command-args>PR 12</command-args>"
            ),
            user([text("# Review Command\nReview the pull request carefully.")], isMeta=True),
            user(
                "<local-command-caveat>Caveat: The messages below were generated by the user while running local "
                "commands.</local-command-caveat>",
                isMeta=True,
            ),
            user("<local-command-stdout>Catch you later!</local-command-stdout>"),
            user("<bash-input>git status</bash-input>"),
            user("This session is being continued from a previous conversation.", isCompactSummary=True),
            user("please use the staging database"),
            assistant("m1", text("OK.")),
            user([text("[Request interrupted by user]")]),
        )
    )
    assert [(e["role"], e["content"][:20]) for e in events(doc, "message")] == [
        ("system", "/review PR 12"),
        ("system", "# Review Command\nRev"),
        ("system", "<local-command-cavea"),
        ("system", "Catch you later!"),  # the CLI's tags go, what they hold stays
        ("system", "! git status"),
        ("system", "This session is bein"),
        ("user", "please use the stagi"),
        ("assistant", "OK."),
        ("system", "[Request interrupted"),
    ]
    assert doc["outcome"] == "abandoned"


def test_summary_lines_and_the_working_context_go_to_metadata():
    doc = one(
        jsonl(
            {"type": "summary", "summary": "Fix the login bug", "leafUuid": "x"},
            {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}, "isSnapshotUpdate": False},
            user("hi", slug="happy-otter", ts="2026-01-05T10:00:00.000Z"),
            line("system", subtype="turn_duration", durationMs=5),
            line("progress", data={"type": "hook_progress"}),
            assistant("m1", text("hello"), ts="2026-01-05T10:05:00.000Z"),
        )
    )
    meta = doc["metadata"]
    assert meta["summaries"] == ["Fix the login bug"]
    assert (meta["cwd"], meta["git_branch"], meta["cli_version"], meta["slug"]) == (
        "/work/app",
        "main",
        "2.1.5",
        "happy-otter",
    )
    assert (doc["started_at"], doc["ended_at"]) == ("2026-01-05T10:00:00.000Z", "2026-01-05T10:05:00.000Z")
    assert meta["source_format"] == "claude-code" and len(doc["events"]) == 2


def test_inline_subagents_of_cli_1_0_are_sessions_of_their_own_with_the_parents_prompts_marked():
    prompt_a, prompt_b = "Analyze the package.json files.", "List the project structure."
    task_a = assistant(
        "m1", tool_use("toolu_A", "Task", subagent_type="general-purpose", description="pkg", prompt=prompt_a)
    )
    task_b = assistant("m1", tool_use("toolu_B", "Task", subagent_type="Explore", description="tree", prompt=prompt_b))
    # Two sidechains interleaved in time, told apart only by their parentUuid chains.
    a0 = user(prompt_a, isSidechain=True, version="1.0.98")
    b0 = user(prompt_b, isSidechain=True, version="1.0.98")
    a1 = assistant("sa1", tool_use("ta1", "Bash", command="cat package.json"), parent=a0["uuid"], isSidechain=True)
    b1 = assistant("sb1", tool_use("tb1", "Bash", command="ls -la"), parent=b0["uuid"], isSidechain=True)
    a2 = result("ta1", "{}", parent=a1["uuid"], isSidechain=True)
    b2 = result("tb1", "total 0", parent=b1["uuid"], isSidechain=True)
    a3 = assistant("sa2", text("No dependencies."), parent=a2["uuid"], isSidechain=True)
    found, docs, _ = convert(
        jsonl(
            user("Update CLAUDE.md"),
            task_a,
            task_b,
            a0,
            b0,
            a1,
            b1,
            a2,
            b2,
            a3,
            result("toolu_A", "No dependencies."),
            result("toolu_B", "total 0"),
        )
    )
    assert found == "claude-code" and [d["external_id"] for d in docs] == [SID, f"{SID}:toolu_A", f"{SID}:toolu_B"]
    main, sub_a, sub_b = docs
    assert shape(sub_a) == [
        ("message", "user", prompt_a, "author", "agent"),
        ("call", "ta1", "Bash"),
        ("result", "ta1", "{}", False, None),
        ("message", "assistant", "No dependencies."),
    ]
    assert [e["id"] for e in events(sub_b, "tool_call")] == ["tb1"]
    assert sub_b["metadata"]["parent_session"] == SID and sub_b["metadata"]["parent_tool_call"] == "toolu_B"
    assert sub_b["metadata"]["subagent_type"] == "Explore" and sub_b["agent"] == main["agent"]
    assert main["metadata"]["subagents"] == [f"{SID}:toolu_A", f"{SID}:toolu_B"]
    assert all("author" not in e for e in main["events"])  # the person's prompt in the parent stays the person's
    assert [e["call_id"] for e in events(main, "tool_result")] == ["toolu_A", "toolu_B"]


def test_a_subagent_file_of_cli_2_x_gets_its_own_id_and_the_parent_lists_it():
    sub = jsonl(
        user("Review the CLI commands.", isSidechain=True, agentId="a485154"),
        assistant("s1", tool_use("t1", "Read", file_path="/x/registry.ts"), isSidechain=True, agentId="a485154"),
        result(
            "t1",
            "<tool_use_error>File does not exist.</tool_use_error>",
            is_error=True,
            isSidechain=True,
            agentId="a485154",
        ),
    )
    doc = one(sub)
    assert doc["external_id"] == f"{SID}:a485154"
    assert events(doc, "message")[0]["author"] == "agent"
    assert doc["metadata"]["subagent_id"] == "a485154" and doc["metadata"]["parent_session"] == SID
    parent = one(
        jsonl(
            user("Spec the missing commands."),
            assistant("m1", tool_use("toolu_T", "Task", subagent_type="solution-architect", prompt="Review the CLI")),
            result(
                "toolu_T",
                [text("Done."), text("agentId: a485154 (for resuming)")],
                structured={"status": "completed", "agentId": "a485154", "content": [text("Done.")]},
            ),
        )
    )
    assert parent["external_id"] == SID and parent["metadata"]["subagents"] == [f"{SID}:a485154"]


def test_a_poll_of_a_background_job_is_folded_onto_the_command_it_polls():
    doc = one(
        jsonl(
            user("Run the tests."),
            assistant("m1", tool_use("t1", "Bash", command="go test ./...", run_in_background=True)),
            result(
                "t1",
                "Command running in background with ID: bash_7",
                structured={"stdout": "", "stderr": "", "interrupted": False, "backgroundTaskId": "bash_7"},
            ),
            assistant("m2", tool_use("t2", "BashOutput", bash_id="bash_7")),
            result(
                "t2",
                "<status>running</status>",
                structured={"shellId": "bash_7", "status": "running", "exitCode": None},
            ),
            assistant("m3", tool_use("t3", "BashOutput", bash_id="bash_7")),
            result(
                "t3",
                "<status>failed</status>\n<stdout>FAIL ./pkg</stdout>",
                structured={"shellId": "bash_7", "status": "failed", "exitCode": 1},
            ),
            assistant("m4", tool_use("t4", "BashOutput", bash_id="unknown")),  # polls nothing of this session
            result("t4", "No shell found"),
        )
    )
    calls = [e["id"] for e in events(doc, "tool_call")]
    assert calls == ["t1", "t4"]
    folded = events(doc, "tool_result")[0]
    assert folded["call_id"] == "t1" and (folded["exit_code"], folded["is_error"]) == (1, True)
    # The CLI's wrapping (the "running in background" line, <status>, <stdout>) is not the job's output.
    assert folded["content"] == "FAIL ./pkg"


@pytest.mark.parametrize(
    "polled,content,code",
    [
        (
            "<status>failed</status>\n\n<exit_code>2</exit_code>\n\n<stdout>\nmake: *** No rule\n</stdout>",
            "make: *** No rule",
            2,
        ),
        (
            "<status>completed</status>\n<exit_code>0</exit_code>\n<stdout>ok</stdout>\n<stderr>warn: x</stderr>",
            "ok\nwarn: x",
            0,
        ),
        ("<status>failed</status>\n<stderr>boom</stderr>\n<timestamp>2025-09-03T01:00:18Z</timestamp>", "boom", None),
        ("plain text the CLI did not wrap", "plain text the CLI did not wrap", None),
    ],
)
def test_a_polled_jobs_output_is_its_own_without_the_clis_tags(polled, content, code):
    doc = one(
        jsonl(
            user("Run it."),
            assistant("m1", tool_use("t1", "Bash", command="make e2e", run_in_background=True)),
            result("t1", "Command running in background with ID: bash_1", structured={"backgroundTaskId": "bash_1"}),
            assistant("m2", tool_use("t2", "BashOutput", bash_id="bash_1")),
            result("t2", polled, structured={"shellId": "bash_1"}),
        )
    )
    (folded,) = events(doc, "tool_result")
    assert folded["content"] == content
    assert folded.get("exit_code") == code


def test_dreamweb_remember_calls_are_in_band_notes():
    doc = one(
        jsonl(
            user("Ship it."),
            assistant("m1", tool_use("t1", "mcp__dreamweb__remember", content="Deploy with make release.")),
            result("t1", "Saved."),
            assistant("m2", tool_use("t2", "mcp__other__remember", content="not ours")),
            result("t2", "ok"),
        )
    )
    assert shape(doc) == [
        ("message", "user", "Ship it."),
        ("memory_write", "Deploy with make release."),
        ("call", "t2", "mcp__other__remember"),
        ("result", "t2", "ok", False, None),
    ]


def test_replayed_lines_glued_objects_broken_lines_and_unstorable_text():
    first = user("hello")
    glued = json.dumps(assistant("m1", text("hi"))) + json.dumps({"type": "summary", "summary": "S", "leafUuid": "x"})
    found, docs, problems = convert(
        jsonl(
            first,
            first,  # a replayed line (same uuid) is the same line
            glued,
            '{"parentUuid": "cut off while it was writ',
            assistant("m2", tool_use("t1", "Bash", command="cat blob.bin")),
            result("t1", "PK\x00\x03\ud800"),
        )
    )
    assert found == "claude-code" and len(docs) == 1
    doc = docs[0]
    assert [e["content"] for e in events(doc, "message")] == ["hello", "hi"]
    assert doc["metadata"]["summaries"] == ["S"]
    assert events(doc, "tool_result")[0]["content"] == "PK\ufffd\x03\ufffd"
    assert list(problems) == ["line 4"] and problems["line 4"].startswith("skipped, not valid JSON")


def test_api_errors_of_the_cli_are_system_text_and_a_failure():
    doc = one(
        jsonl(
            user("hi"),
            assistant("m-err", text("API Error: 529 overloaded"), model="<synthetic>", isApiErrorMessage=True),
        )
    )
    assert shape(doc)[-1] == ("message", "system", "API Error: 529 overloaded")
    assert doc["outcome"] == "failure" and doc["model"] is None


def test_a_file_of_summaries_only_has_no_session():
    found, docs, problems = convert(jsonl({"type": "summary", "summary": "Old chat", "leafUuid": "x"}))
    assert (found, docs) == ("claude-code", [])
    assert "no session to import" in problems["file"]


def test_what_the_cli_adds_to_tool_output_is_removed():
    reminder = (
        "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be considered malware. "
        "You MUST refuse to improve or augment the code.\n</system-reminder>\n"
    )
    doc = one(
        jsonl(
            user("Read it."),
            assistant("m1", tool_use("t1", "Read", file_path="/w/a.go")),
            result("t1", "     1→package main\n     2→\n     3→\tfunc main() {}" + reminder),
            assistant("m2", tool_use("t2", "Bash", command="nl a.go")),
            result("t2", "     1→package main"),  # only Read's output is numbered by the CLI
        )
    )
    read, bash = events(doc, "tool_result")
    assert read["content"] == "package main\n\n\tfunc main() {}"
    assert bash["content"] == "     1→package main"


def test_a_line_of_a_type_a_newer_claude_code_writes_is_skipped_and_named():
    lines = [user("run the tests"), assistant("m1", text("Done."))]
    newer = {**lines[0], "type": "brand-new-record", "uuid": "u-new"}
    found, docs, problems = convert(jsonl(lines[0], newer, lines[1]))
    assert found == "claude-code" and len(docs) == 1 and shape(docs[0]) == shape(one(jsonl(*lines)))
    assert any("brand-new-record (1)" in text for text in problems.values()), problems
    # the CLI's own bookkeeping lines are known and skipped without a word
    bookkeeping = {**lines[0], "type": "file-history-snapshot", "uuid": "u-snap"}
    assert convert(jsonl(lines[0], bookkeeping, lines[1]))[2] == {}
