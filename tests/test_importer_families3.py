"""Families the third transcript probe found (tests/test_formats3_probe.py, stop 27), each with cases of its own:
an assistant's answer that is not a text part (an OpenAI refusal part, a spoken reply's transcript); how a call
ended told by a Responses output that has no exec header (the JSON agent frameworks return, an exit line), as chat
tool messages tell it; results of tools the Anthropic API ran (an error object, a code execution's streams and
return code, a fetched page's text, a search result's title and source); and the Claude Code CLI's own tags: several
in a row are still the CLI's words, and read without their tags."""

from __future__ import annotations

import json

import pytest

from tests.importer_support import convert, events, jsonl, one

ERR = "fatal: could not read Username for 'https://git.example': terminal prompts disabled"


def _said(doc, role):
    return [e["content"] for e in events(doc, "message") if e["role"] == role]


@pytest.mark.parametrize(
    "assistant",
    [
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't share that key."}]},
        {"role": "assistant", "content": None, "audio": {"id": "a1", "transcript": "I can't share that key."}},
        {"role": "assistant", "content": None, "refusal": "I can't share that key."},
    ],
)
def test_an_openai_answer_that_is_not_a_text_part_keeps_its_words(assistant):
    doc = one({"model": "gpt-4o", "messages": [{"role": "user", "content": "Paste the key."}, assistant]})
    assert _said(doc, "assistant") == ["I can't share that key."]


@pytest.mark.parametrize(
    "output,code,failed,text",
    [
        (json.dumps({"stdout": "", "stderr": ERR, "exit_code": 128}), 128, True, ERR),
        (json.dumps({"error": ERR}), None, True, ERR),
        (f"{ERR}\nExit code: 128", 128, True, None),
        (json.dumps({"stdout": "Already up to date.", "exit_code": 0}), 0, False, "Already up to date."),
        ("Already up to date.", None, False, "Already up to date."),
    ],
)
def test_a_responses_output_without_a_header_says_how_the_call_ended(output, code, failed, text):
    doc = one(
        {
            "model": "gpt-4.1",
            "input": [{"role": "user", "content": "Pull the repo."}],
            "output": [
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command": "git pull"}'},
                {"type": "function_call_output", "call_id": "c1", "output": output},
            ],
        }
    )
    (result,) = events(doc, "tool_result")
    assert bool(result.get("is_error")) is failed and result.get("exit_code") == code
    if text is not None:
        assert result["content"] == text


def _anthropic(result_block, call_name="web_search"):
    return {
        "model": "claude-sonnet-4-5",
        "system": "You are a coding agent.",
        "messages": [
            {"role": "user", "content": "Check the changelog."},
            {
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "s1", "name": call_name, "input": {"query": "changelog"}},
                    result_block,
                ],
            },
        ],
    }


@pytest.mark.parametrize(
    "block,expect_in,code,failed",
    [
        (
            {"type": "web_fetch_tool_result", "tool_use_id": "s1",
             "content": {"type": "web_fetch_tool_error", "error_code": "url_not_accessible"}},
            "url_not_accessible", None, True,
        ),
        (
            {"type": "code_execution_tool_result", "tool_use_id": "s1",
             "content": {"type": "code_execution_result", "stdout": "", "stderr": "ZeroDivisionError",
                         "return_code": 1}},
            "ZeroDivisionError", 1, True,
        ),
        (
            {"type": "bash_code_execution_tool_result", "tool_use_id": "s1",
             "content": {"type": "bash_code_execution_result", "stdout": "3 files", "stderr": "", "return_code": 0}},
            "3 files", 0, False,
        ),
        (
            {"type": "web_fetch_tool_result", "tool_use_id": "s1",
             "content": {"type": "web_fetch_result", "url": "https://docs.example/changes",
                         "content": {"type": "document", "source": {"type": "text", "data": "2.0 drops Node 16."}}}},
            "2.0 drops Node 16.", None, False,
        ),
    ],
)  # fmt: skip
def test_a_result_of_a_tool_the_api_ran_keeps_what_it_said_and_how_it_ended(block, expect_in, code, failed):
    doc = one(_anthropic(block), format="anthropic-messages")
    (result,) = events(doc, "tool_result")
    assert expect_in in result["content"]
    assert bool(result.get("is_error")) is failed and result.get("exit_code") == code


def test_a_search_result_block_keeps_its_title_and_source():
    block = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [
            {"type": "search_result", "title": "Runbook: rotate keys", "source": "https://wiki.example/rotate",
             "content": [{"type": "text", "text": "Rotate every 90 days."}]},
        ],
    }  # fmt: skip
    doc = one(
        {
            "model": "claude-sonnet-4-5",
            "messages": [
                {"role": "user", "content": "How often?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "kb", "input": {}}]},
                {"role": "user", "content": [block]},
            ],
        },
        format="anthropic-messages",
    )
    (result,) = events(doc, "tool_result")
    for part in ("Runbook: rotate keys", "https://wiki.example/rotate", "Rotate every 90 days."):
        assert part in result["content"]


def _cc_line(uuid, parent, text):
    return {
        "type": "user", "sessionId": "cc-tags", "uuid": uuid, "parentUuid": parent, "timestamp": "2026-11-30T10:00:00Z",
        "cwd": "/repo", "message": {"role": "user", "content": text},
    }  # fmt: skip


@pytest.mark.parametrize(
    "text,shown",
    [
        ("<bash-stdout>3 files</bash-stdout><bash-stderr></bash-stderr>", "3 files"),
        ("<bash-stdout></bash-stdout><bash-stderr>ls: x: No such file</bash-stderr>", "ls: x: No such file"),
        ("<local-command-stdout>Total cost: $1.20</local-command-stdout>", "Total cost: $1.20"),
        ("<bash-input>git status</bash-input>", "! git status"),
    ],
)
def test_the_clis_own_tags_are_system_text_without_the_tags(text, shown):
    _, docs, _ = convert(jsonl(_cc_line("u1", None, "Look at the repo."), _cc_line("u2", "u1", text)))
    (doc,) = docs
    assert _said(doc, "user") == ["Look at the repo."]
    assert _said(doc, "system") == [shown]


def test_a_person_writing_about_tags_is_still_the_person():
    text = "Why does <bash-stdout> show up in my terminal?"
    _, docs, _ = convert(jsonl(_cc_line("u1", None, text)))
    assert _said(docs[0], "user") == [text]
