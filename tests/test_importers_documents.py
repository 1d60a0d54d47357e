"""Formats where a session is one JSON document (Gemini CLI, OpenAI Chat Completions and Responses, Anthropic
Messages), and detection by content across every format."""

from __future__ import annotations

import json

import pytest

from memory.importers import UnknownFormat
from tests.importer_support import convert, events, jsonl, shape

SHELL_OUTPUT = "Command: make lint\nOutput: lint failed\nExit Code: 2\nSignal: (none)"


def gemini_doc(**extra) -> dict:
    doc = {
        "sessionId": "faff42ab-6ea5-4f78-b8c4-f7dd6272af08",
        "projectHash": "7e8989f7",
        "startTime": "2026-01-10T02:08:26.108Z",
        "lastUpdated": "2026-01-10T02:09:27.575Z",
        "messages": [
            {"id": "1", "timestamp": "2026-01-10T02:08:26.108Z", "type": "user", "content": "append to notes.txt"},
            {
                "id": "2",
                "timestamp": "2026-01-10T02:09:21.386Z",
                "type": "gemini",
                "content": "",
                "model": "gemini-2.5-flash",
                "thoughts": [{"subject": "Plan", "description": "Read first."}],
                "tokens": {"input": 100, "output": 10, "cached": 0, "thoughts": 5, "tool": 0, "total": 115},
                "toolCalls": [
                    {
                        "id": "read_file-1",
                        "name": "read_file",
                        "args": {"file_path": "notes.txt"},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "read_file-1",
                                    "name": "read_file",
                                    "response": {"output": "hello"},
                                }
                            }
                        ],
                        "status": "success",
                    },
                    {
                        "id": "shell-1",
                        "name": "run_shell_command",
                        "args": {"command": "make lint"},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "shell-1",
                                    "name": "run_shell_command",
                                    "response": {"output": SHELL_OUTPUT},
                                }
                            }
                        ],
                        "status": "success",
                    },
                    {
                        "id": "write-1",
                        "name": "write_file",
                        "args": {"file_path": "/etc/x"},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "write-1",
                                    "name": "write_file",
                                    "response": {"error": "Permission denied"},
                                }
                            }
                        ],
                        "status": "error",
                    },
                ],
            },
            {"id": "3", "timestamp": "2026-01-10T02:09:27.575Z", "type": "info", "content": "Request cancelled."},
            {
                "id": "4",
                "timestamp": "2026-01-10T02:09:27.575Z",
                "type": "gemini",
                "content": "Done.",
                "model": "gemini-2.5-flash",
                "tokens": {"input": 50, "output": 3, "total": 53},
            },
        ],
    }
    doc.update(extra)
    return doc


def test_gemini_cli_session():
    found, docs, _ = convert(gemini_doc())
    assert found == "gemini-cli" and len(docs) == 1
    doc = docs[0]
    assert (doc["external_id"], doc["agent"], doc["model"]) == (
        "faff42ab-6ea5-4f78-b8c4-f7dd6272af08",
        "gemini-cli",
        "gemini-2.5-flash",
    )
    assert shape(doc) == [
        ("message", "user", "append to notes.txt"),
        ("call", "read_file-1", "read_file"),
        ("result", "read_file-1", "hello", False, None),
        ("call", "shell-1", "run_shell_command"),
        ("result", "shell-1", "Command: make lint\nOutput: lint failed\nExit Code: 2\nSignal: (none)", True, 2),
        ("call", "write-1", "write_file"),
        ("result", "write-1", "Permission denied", True, None),
        ("message", "system", "Request cancelled."),
        ("message", "assistant", "Done."),
    ]
    assert doc["metadata"]["usage"] == {"input": 150, "output": 13, "cached": 0, "thoughts": 5, "tool": 0, "total": 168}
    assert (doc["started_at"], doc["ended_at"]) == ("2026-01-10T02:08:26.108Z", "2026-01-10T02:09:27.575Z")


CHAT = {
    "id": "chat-7",
    "model": "gpt-4.1",
    "messages": [
        {"role": "system", "content": "You are a deploy bot."},
        {"role": "user", "content": [{"type": "text", "text": "Deploy it."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "make deploy"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {
                        "name": "mcp__dreamweb__remember",
                        "arguments": '{"content": "Deploy with make release."}',
                    },
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "make: *** No rule to make target 'deploy'."},
        {"role": "tool", "tool_call_id": "call_2", "content": "saved"},
    ],
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Use make release."}}],
}


def test_openai_chat_completions_conversation():
    found, docs, _ = convert(CHAT)
    assert found == "openai-chat"
    doc = docs[0]
    assert (doc["external_id"], doc["agent"], doc["model"]) == ("chat-7", "openai-agent", "gpt-4.1")
    assert shape(doc) == [
        ("message", "system", "You are a deploy bot."),
        ("message", "user", "Deploy it."),
        ("call", "call_1", "bash"),
        ("memory_write", "Deploy with make release."),
        ("result", "call_1", "make: *** No rule to make target 'deploy'.", False, None),
        ("message", "assistant", "Use make release."),
    ]
    assert events(doc, "tool_call")[0]["arguments"] == {"command": "make deploy"}


def test_openai_responses_conversation_and_json_lines_of_conversations_with_stable_ids():
    responses = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "What is in the repo?"}],
        "output": [
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "fc1", "name": "shell", "arguments": '{"command": "ls"}'},
            {
                "type": "function_call_output",
                "call_id": "fc1",
                "output": json.dumps({"output": "ls: cannot open", "metadata": {"exit_code": 2}}),
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Nothing."}]},
        ],
    }
    found, docs, _ = convert(jsonl(responses, {"messages": [{"role": "user", "content": "hi"}]}))
    assert found == "openai-chat" and len(docs) == 2
    assert shape(docs[0]) == [
        ("message", "system", "Be brief."),
        ("message", "user", "What is in the repo?"),
        ("call", "fc1", "shell"),
        ("result", "fc1", "ls: cannot open", True, 2),
        ("message", "assistant", "Nothing."),
    ]
    assert docs[0]["metadata"]["api"] == "responses"
    # No id in the documents: the id is a hash of the content, the same on every import.
    again = convert(jsonl(responses, {"messages": [{"role": "user", "content": "hi"}]}))[1]
    assert [d["external_id"] for d in docs] == [d["external_id"] for d in again]
    assert docs[0]["external_id"] != docs[1]["external_id"] and docs[0]["external_id"].startswith("openai-chat-")


def test_anthropic_messages_conversation():
    doc = {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "You fix CI."}],
        "metadata": {"session_id": "run-42"},
        "messages": [
            {"role": "user", "content": "CI is red."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Running the tests."},
                    {"type": "tool_use", "id": "tu1", "name": "bash", "input": {"command": "pytest -q"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "ModuleNotFoundError: No module named 'app'"}],
                    },
                    {"type": "text", "text": "Use PYTHONPATH=src, not a reinstall."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "mcp_tool_use",
                        "id": "mt1",
                        "name": "remember",
                        "server_name": "dreamweb",
                        "input": {"content": "Tests need PYTHONPATH=src."},
                    },
                    {"type": "mcp_tool_result", "tool_use_id": "mt1", "content": [{"type": "text", "text": "ok"}]},
                ],
            },
        ],
    }
    found, docs, _ = convert(doc)
    assert found == "anthropic-messages"
    assert docs[0]["external_id"] == "run-42" and docs[0]["agent"] == "anthropic-agent"
    assert shape(docs[0]) == [
        ("message", "system", "You fix CI."),
        ("message", "user", "CI is red."),
        ("message", "assistant", "Running the tests."),
        ("call", "tu1", "bash"),
        ("result", "tu1", "ModuleNotFoundError: No module named 'app'", True, None),
        ("message", "user", "Use PYTHONPATH=src, not a reinstall."),
        ("memory_write", "Tests need PYTHONPATH=src."),
    ]


@pytest.mark.parametrize(
    "data, expected",
    [
        (jsonl({"external_id": "s1", "agent": "a", "events": []}), "dreamweb"),
        (
            jsonl(
                {"type": "summary", "summary": "x", "leafUuid": "y"},
                {"type": "user", "sessionId": "s", "uuid": "u", "message": {"role": "user", "content": "hi"}},
            ),
            "claude-code",
        ),
        (jsonl({"timestamp": "t", "type": "session_meta", "payload": {"id": "r"}}), "codex"),
        (json.dumps(gemini_doc(), indent=2), "gemini-cli"),
        (json.dumps(CHAT), "openai-chat"),
        (json.dumps({"system": "s", "messages": [{"role": "user", "content": "hi"}]}, indent=1), "anthropic-messages"),
        (json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]), "openai-chat"),
        (b"", "dreamweb"),
    ],
)
def test_each_format_is_recognised_by_its_content(data, expected):
    assert convert(data)[0] == expected


@pytest.mark.parametrize(
    "data",
    [
        b"just some text\nin lines\n",
        jsonl({"hello": 1}, {"hello": 2}),
        b'{"messages": "not a list"}',
        b"[1, 2, 3]",
        b'{"broken": \n',
    ],
)
def test_content_in_no_known_format_is_one_error_naming_them(data):
    with pytest.raises(UnknownFormat) as exc:
        convert(data)
    for name in ("dreamweb", "claude-code", "codex", "gemini-cli", "anthropic-messages", "openai-chat"):
        assert name in str(exc.value)


def test_a_named_format_reads_what_detection_would_not_and_says_what_is_wrong():
    _, docs, problems = convert(jsonl({"hello": 1}), format="gemini-cli")
    assert docs == [] and "no sessionId" in problems["line 1"]
    _, docs, problems = convert(b'{"sessionId": "x", "messages": [\n', format="gemini-cli")
    assert docs == [] and problems["file"].startswith("not valid JSON")


ANTHROPIC_TURNS = [
    {"role": "user", "content": "Run the tests."},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "pytest"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2 failed"}]},
    {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "look", "signature": "x"}, {"type": "text", "text": "Two fail."}],
    },
]


@pytest.mark.parametrize(
    "doc",
    [
        {"model": "claude-x", "messages": ANTHROPIC_TURNS},  # a request body
        ANTHROPIC_TURNS,  # the bare list of messages
        {"messages": ANTHROPIC_TURNS[:3]},  # tool blocks only
        {"messages": [ANTHROPIC_TURNS[0], ANTHROPIC_TURNS[3]]},  # a thinking block only
    ],
    ids=["request", "bare-list", "tool-blocks", "thinking"],
)
def test_openai_chat_named_on_anthropic_blocks_is_refused_with_the_format_to_name(doc):
    """Both APIs take a list of messages: read as openai-chat, Anthropic's blocks would vanish without a word."""
    name, docs, problems = convert(doc, "openai-chat")
    assert docs == [] and len(problems) == 1, (docs, problems)
    assert "anthropic-messages" in next(iter(problems.values()))
    # Detection, or the right name, reads it whole.
    for fmt in ("auto", "anthropic-messages"):
        _, docs, problems = convert(doc, fmt)
        assert len(docs) == 1 and not problems, problems


def test_plain_text_turns_read_the_same_named_as_either_chat_format():
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}]
    _, docs, problems = convert({"messages": turns}, "openai-chat")
    assert not problems and [e["content"] for e in events(docs[0], "message")] == ["hi", "hello"]
