"""Codex rollouts to canonical sessions: every mapping rule, on synthetic lines shaped like the real rollouts
(../shared/real/transcripts/FORMATS.md)."""

from __future__ import annotations

import json

from tests.importer_support import convert, events, jsonl, one, shape

RID = "019e1625-789d-76c0-80ab-3724b5ddb799"


def rl(kind: str, payload: dict, ts="2026-05-11T08:27:00.000Z") -> dict:
    return {"timestamp": ts, "type": kind, "payload": payload}


def meta(**extra) -> dict:
    payload = {
        "id": RID,
        "timestamp": "2026-05-11T08:26:55.042Z",
        "cwd": "/work/app",
        "originator": "codex-tui",
        "cli_version": "0.125.0",
        "source": "cli",
        "model_provider": "openai",
        "base_instructions": {"text": "You are Codex." * 1000},
        "git": {"commit_hash": "c8c2", "branch": "feat/x", "repository_url": "git@example.org:a/b.git"},
    }
    payload.update(extra)
    return rl("session_meta", payload, ts="2026-05-11T08:26:55.042Z")


def item(kind: str, **payload) -> dict:
    return rl("response_item", {"type": kind, **payload})


def event(kind: str, **payload) -> dict:
    return rl("event_msg", {"type": kind, **payload})


def message(role: str, text: str) -> dict:
    kind = "output_text" if role == "assistant" else "input_text"
    return item("message", role=role, content=[{"type": kind, "text": text}])


def exec_call(call_id: str, cmd: str) -> dict:
    return item(
        "function_call",
        name="exec_command",
        call_id=call_id,
        arguments=json.dumps({"cmd": cmd, "workdir": "/work/app", "yield_time_ms": 1000}),
    )


def header(body: str = "", *, code: int | None = None, running: int | None = None) -> str:
    state = f"Process exited with code {code}" if running is None else f"Process running with session ID {running}"
    return f"Chunk ID: a21e41\nWall time: 1.0037 seconds\n{state}\nOriginal token count: 12\nOutput:\n{body}"


def output(call_id: str, text: str) -> dict:
    return item("function_call_output", call_id=call_id, output=text)


def poll(call_id: str, session: int, chars: str = "") -> dict:
    return item(
        "function_call",
        name="write_stdin",
        call_id=call_id,
        arguments=json.dumps({"session_id": session, "chars": chars, "yield_time_ms": 1000}),
    )


def test_metadata_model_usage_and_the_people_in_the_conversation():
    doc = one(
        jsonl(
            meta(),
            event("task_started", turn_id="t1"),
            item(
                "message",
                role="developer",
                content=[
                    {"type": "input_text", "text": "<permissions instructions>\nSandbox on.</permissions instructions>"}
                ],
            ),
            message("user", "# AGENTS.md instructions for /work/app\n\n<INSTRUCTIONS>Use rg.</INSTRUCTIONS>"),
            message("user", "<environment_context>\n  <cwd>/work/app</cwd>\n</environment_context>"),
            rl(
                "turn_context",
                {
                    "turn_id": "t1",
                    "cwd": "/work/app",
                    "model": "gpt-5.5",
                    "effort": "medium",
                    "approval_policy": "on-request",
                    "sandbox_policy": {"type": "workspace-write"},
                },
            ),
            message("user", "show tools"),
            event("user_message", message="show tools", images=[]),
            item("reasoning", summary=[], content=None, encrypted_content="gAAAA"),
            event("agent_message", message="Here they are."),
            message("assistant", "Here they are."),
            event(
                "token_count", info={"total_token_usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}}
            ),
            event(
                "token_count", info={"total_token_usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}}
            ),
            event("task_complete", last_agent_message="Here they are."),
        )
    )
    assert doc["external_id"] == RID and doc["agent"] == "codex" and doc["model"] == "gpt-5.5"
    assert [(e["role"], e["content"][:12]) for e in events(doc, "message")] == [
        ("system", "<permissions"),
        ("system", "# AGENTS.md "),
        ("system", "<environment"),
        ("user", "show tools"),
        ("assistant", "Here they ar"),
    ]
    m = doc["metadata"]
    assert (m["cwd"], m["originator"], m["cli_version"], m["git_branch"], m["reasoning_effort"], m["sandbox"]) == (
        "/work/app",
        "codex-tui",
        "0.125.0",
        "feat/x",
        "medium",
        "workspace-write",
    )
    assert m["usage"] == {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}
    assert "base_instructions" not in json.dumps(m)
    assert doc["started_at"] == "2026-05-11T08:26:55.042Z"


def test_a_rollout_without_user_items_takes_the_persons_turns_from_the_events():
    doc = one(
        jsonl(
            meta(originator="Codex Desktop"),
            event("user_message", message="analyze the transcript"),
            exec_call("c1", "wc -l notes.vtt"),
            output("c1", header("8803 notes.vtt\n", code=0)),
            message("assistant", "Done."),
            event("user_message", message="now the action items"),
        )
    )
    assert [(e["role"], e["content"]) for e in events(doc, "message")] == [
        ("user", "analyze the transcript"),
        ("assistant", "Done."),
        ("user", "now the action items"),
    ]


def test_output_headers_are_stripped_and_exit_codes_kept_from_end_events_headers_and_patch_metadata():
    doc = one(
        jsonl(
            meta(),
            exec_call("c1", "pytest -q"),
            output("c1", header("E   ModuleNotFoundError: No module named 'app'\n", code=1)),
            exec_call("c2", "make build"),
            output("c2", header("ok\n", code=0)),
            event("exec_command_end", call_id="c2", exit_code=2, aggregated_output="ok\n", status="failed"),
            item(
                "custom_tool_call",
                name="apply_patch",
                call_id="p1",
                status="completed",
                input="*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch",
            ),
            item(
                "custom_tool_call_output",
                call_id="p1",
                output=json.dumps(
                    {
                        "output": "Success. Updated the following files:\nM a.py\n",
                        "metadata": {"exit_code": 0, "duration_seconds": 2.2},
                    }
                ),
            ),
            event("patch_apply_end", call_id="p1", success=True, stdout="Success.", stderr=""),
            item("custom_tool_call", name="apply_patch", call_id="p2", input="*** Begin Patch\n*** End Patch"),
            item(
                "custom_tool_call_output",
                call_id="p2",
                output=json.dumps({"output": "patch rejected", "metadata": {"exit_code": 1}}),
            ),
            event("patch_apply_end", call_id="p2", success=False, stdout="", stderr="patch rejected"),
        )
    )
    results = {e["call_id"]: e for e in events(doc, "tool_result")}
    assert results["c1"]["content"] == "E   ModuleNotFoundError: No module named 'app'\n"
    assert (results["c1"]["exit_code"], results["c1"]["is_error"]) == (1, True)
    assert (results["c2"]["exit_code"], results["c2"]["is_error"]) == (2, True)  # the end event wins
    assert (results["p1"]["content"], results["p1"]["exit_code"]) == (
        "Success. Updated the following files:\nM a.py\n",
        0,
    )
    assert "is_error" not in results["p1"]
    assert results["p2"]["is_error"] is True
    call = events(doc, "tool_call")[0]
    assert call["arguments"] == {"cmd": "pytest -q", "workdir": "/work/app", "yield_time_ms": 1000}
    assert not any("Chunk ID" in e.get("content", "") or "Wall time" in e.get("content", "") for e in doc["events"])


def test_write_stdin_polls_are_folded_onto_the_command_they_poll():
    doc = one(
        jsonl(
            meta(),
            exec_call("c1", "npm test"),
            output("c1", header("", running=48230)),
            poll("w1", 48230),
            output("w1", header("running 12 tests\n", running=48230)),
            poll("w2", 48230),
            output("w2", header("1 failed\n", code=1)),
            event("exec_command_end", call_id="c1", exit_code=1, aggregated_output="running 12 tests\n1 failed\n"),
            exec_call("c2", "python -i"),
            output("c2", header(">>> ", running=777)),
            poll("w3", 777, chars="print(1)\n"),  # sends input: a step of its own
            output("w3", header("1\n", code=0)),
            poll("w4", 999),  # a process this rollout did not start: kept as it is
            output("w4", "write_stdin failed: Unknown process id 999"),
        )
    )
    assert [e["id"] for e in events(doc, "tool_call")] == ["c1", "c2", "w3", "w4"]
    results = {e["call_id"]: e for e in events(doc, "tool_result")}
    assert results["c1"]["content"] == "running 12 tests\n1 failed"
    assert (results["c1"]["exit_code"], results["c1"]["is_error"]) == (1, True)
    assert results["c2"]["exit_code"] == 0 and "is_error" not in results["c2"]
    assert results["w3"]["content"] == "1\n" and "exit_code" not in results["w3"]
    assert "is_error" not in results["w4"]


def test_mcp_tools_web_search_and_dreamweb_notes():
    doc = one(
        jsonl(
            meta(),
            item("function_call", name="js", namespace="mcp__node_repl__", call_id="m1", arguments='{"code": "1+1"}'),
            output("m1", "Wall time: 1.8 seconds\nOutput:\n2"),
            item(
                "function_call",
                name="remember",
                namespace="mcp__dreamweb__",
                call_id="m2",
                arguments=json.dumps({"content": "Tests need PYTHONPATH=src."}),
            ),
            output("m2", '[{"type":"text","text":"saved"}]'),
            event(
                "mcp_tool_call_end",
                call_id="m3",
                invocation={"server": "db", "tool": "query", "arguments": {"sql": "select 1"}},
                result={"Ok": {"content": [{"type": "text", "text": "permission denied"}], "isError": True}},
            ),
            item("web_search_call", status="completed", action={"type": "search", "query": "codex rollout format"}),
        )
    )
    assert shape(doc) == [
        ("call", "m1", "mcp__node_repl__js"),
        ("result", "m1", "2", False, None),
        ("memory_write", "Tests need PYTHONPATH=src."),
        ("call", "m3", "mcp__db__query"),
        ("call", "web_search_1", "web_search"),
        ("result", "m3", "permission denied", True, None),
    ]


def test_a_rollout_without_its_session_meta_is_refused():
    found, docs, problems = convert(jsonl(event("user_message", message="hi"), message("assistant", "hello")))
    assert (found, docs) == ("codex", [])
    assert "no session_meta" in problems["file"]


def test_commands_given_as_argv_read_as_the_line_that_was_run():
    doc = one(
        jsonl(
            meta(),
            item(
                "function_call",
                name="shell",
                call_id="s1",
                arguments=json.dumps({"command": ["bash", "-lc", "make deploy"], "workdir": "/w"}),
            ),
            output(
                "s1",
                json.dumps(
                    {
                        "output": "make: *** No rule to make target 'deploy'.",
                        "metadata": {"exit_code": 2, "duration_seconds": 0.1},
                    }
                ),
            ),
            item(
                "local_shell_call",
                call_id="s2",
                status="completed",
                action={"type": "exec", "command": ["git", "commit", "-m", "two words"]},
            ),
            output("s2", "ok"),
        )
    )
    first, second = events(doc, "tool_call")
    assert first["arguments"] == {"command": "make deploy", "workdir": "/w"}
    assert second["arguments"]["command"] == "git commit -m 'two words'"
    assert [(r.get("exit_code"), r.get("is_error", False)) for r in events(doc, "tool_result")] == [
        (2, True),
        (None, False),
    ]


def rollout_lines():
    return [
        meta(),
        rl("response_item", message("user", "run the tests")["payload"], ts="2026-05-11T08:27:01.000Z"),
        rl("response_item", exec_call("c1", "make test")["payload"], ts="2026-05-11T08:27:02.000Z"),
        rl("response_item", output("c1", header("2 passed", code=0))["payload"], ts="2026-05-11T08:27:03.000Z"),
        rl("response_item", message("assistant", "Tests pass.")["payload"], ts="2026-05-11T08:27:04.000Z"),
    ]


def test_a_rollout_written_twice_over_is_the_same_session():
    """A replayed append (every line written again) adds no event: a line's time and payload make it the same."""
    lines = rollout_lines()
    once = one(jsonl(*lines))
    twice = one(jsonl(*lines, *lines[1:]))
    assert shape(twice) == shape(once) and len(events(twice, "tool_call")) == 1


def test_a_line_of_a_type_a_newer_codex_writes_is_skipped_and_named():
    lines = rollout_lines()
    lines.insert(3, rl("brand_new_kind", {"x": 1}, ts="2026-05-11T08:27:02.500Z"))
    found, docs, problems = convert(jsonl(*lines))
    assert found == "codex" and len(docs) == 1
    assert shape(docs[0]) == shape(one(jsonl(*rollout_lines())))
    assert any("brand_new_kind (1)" in text for text in problems.values()), problems
