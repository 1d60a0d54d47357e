"""How a tool call ended, when the conversation format has no field for it (OpenAI chat's `tool` messages, an
Anthropic `tool_result` without `is_error`): read from the content the application put there, the JSON agent
frameworks return or the line a shell tool adds; and Anthropic's own block types tell its conversations apart."""

from __future__ import annotations

import json

import pytest

from memory.importers.tool_output import reported_outcome
from tests.importer_support import convert, events, one

ERR = "make: *** No rule to make target 'deploy'.  Stop."


@pytest.mark.parametrize(
    "content, code, failed",
    [
        (json.dumps({"stdout": "", "stderr": ERR, "exit_code": 2}), 2, True),
        (json.dumps({"output": ERR, "returncode": 1}), 1, True),
        (json.dumps({"stdout": "ok", "stderr": "", "exitCode": 0}), 0, False),
        (json.dumps({"result": ERR, "return_code": "127"}), 127, True),
        (json.dumps({"error": ERR}), None, True),
        (json.dumps({"success": False, "output": ERR}), None, True),
        (json.dumps({"ok": False, "stderr": ERR}), None, True),
        (f"{ERR}\n(exit status 2)", 2, True),
        (f"{ERR}\nExit code: 2", 2, True),
        (f"Process exited with code 1\n{ERR}", 1, True),
        (f"{ERR}\nCommand 'make deploy' returned non-zero exit status 2.", 2, True),
        (f"{ERR}\nexited with code 0", 0, False),
        ("build finished\nreturncode=3", 3, True),
    ],
)
def test_the_content_says_how_the_call_ended(content, code, failed):
    _, got_code, got_failed = reported_outcome(content)
    assert (got_code, got_failed) == (code, failed)


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"rows": 3, "status": "done"}),  # other JSON a tool returned
        json.dumps({"error": None, "output": "fine"}),
        json.dumps([1, 2, 3]),
        "{not json at all}",
        "line one\nthe child said: exit code 2, retrying\nall good in the end",  # mid-output, another process's
        "x" * 300 + " exit code 2",  # a long line is output, not a status line
        "Deployed build 412.",
    ],
)
def test_output_that_reports_nothing_is_left_as_it_is(content):
    text, code, failed = reported_outcome(content)
    assert (text, code, failed) == (content, None, False)


def test_the_joined_output_keeps_stdout_then_stderr_and_the_error():
    text, _, _ = reported_outcome(json.dumps({"stdout": "building\n", "stderr": ERR, "exit_code": 2}))
    assert text == f"building\n{ERR}"
    text, _, _ = reported_outcome(json.dumps({"error": "permission denied", "ok": False}))
    assert text == "permission denied"


def chat(tool_content, role="tool"):
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "make deploy"}'}}
    msgs = [
        {"role": "user", "content": "deploy it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_content},
    ]
    if role == "function":
        msgs[1] = {"role": "assistant", "content": None, "function_call": {"name": "bash", "arguments": "{}"}}
        msgs[2] = {"role": "function", "name": "bash", "content": tool_content}
    return {"id": "conv-1", "messages": msgs}


@pytest.mark.parametrize("role", ["tool", "function"])
def test_an_openai_tool_message_that_reports_a_failure_is_a_failed_result(role):
    (result,) = events(one(chat(json.dumps({"stdout": "", "stderr": ERR, "exit_code": 2}), role)), "tool_result")
    assert (result["content"], result.get("exit_code"), result.get("is_error")) == (ERR, 2, True)
    (result,) = events(one(chat(f"{ERR}\n(exit status 2)", role)), "tool_result")
    assert (result.get("exit_code"), result.get("is_error")) == (2, True)


def test_an_openai_tool_message_that_reports_nothing_stays_a_plain_result():
    (result,) = events(one(chat("Deployed build 412.")), "tool_result")
    assert "exit_code" not in result and "is_error" not in result


def anthropic(result_block):
    return {
        "messages": [
            {"role": "user", "content": "deploy it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"x": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", **result_block}]},
        ]
    }


def test_an_anthropic_result_without_is_error_that_reports_a_failure_is_failed():
    (result,) = events(one(anthropic({"content": f"{ERR}\nExit code: 2"})), "tool_result")
    assert (result.get("exit_code"), result.get("is_error")) == (2, True)


def test_an_anthropic_result_flagged_is_error_stays_failed_whatever_its_text():
    (result,) = events(one(anthropic({"content": "permission denied", "is_error": True})), "tool_result")
    assert result.get("is_error") is True and "exit_code" not in result


@pytest.mark.parametrize(
    "block",
    [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Always deploy Fridays."}},
        {
            "type": "search_result",
            "source": "https://x.example/a",
            "title": "A",
            "content": [{"type": "text", "text": "x"}],
        },
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
    ],
)
@pytest.mark.parametrize("named", ["auto", "anthropic-messages"])
def test_a_block_only_anthropic_has_makes_the_conversation_anthropics(block, named):
    doc = {"messages": [{"role": "user", "content": [block, {"type": "text", "text": "summarise it"}]}]}
    found, docs, problems = convert(doc, named)
    assert (found, len(docs), problems) == ("anthropic-messages", 1, {})
    users = [e for e in events(docs[0], "message") if e["role"] == "user"]
    # the person's own words stay theirs (an image is a marker in them; an attachment is a message of its own)
    assert users[-1]["content"].endswith("summarise it") and "author" not in users[-1], users
    assert "Always deploy" not in users[-1]["content"], users
