# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""Blind probe: foreign export files (ChatGPT, Claude.ai, OpenAI Chat / Responses logs, Anthropic Messages logs,
Gemini CLI, odd canonical) through import_sessions and the API, built in the shapes the products write.

Written blind by a helper against the code before this stop's importer fixes; of its 49 cases 11 failed there. Fixed
since: a byte order mark before a pretty-printed document (four cases), a canonical session pretty-printed in a .json
file and a JSON array of sessions or of chat logs (one line or pretty), an Anthropic document block's text, a web
search result's titles and addresses, a Responses code_interpreter_call. Left, marked: a file named openai-chat that
is an Anthropic conversation (both take a list of messages). ChatGPT's and Claude.ai's data exports are refused as
an unknown format, cleanly (not promised by the docs)"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory.models import AgentSession
from tests.api_support import Api, fast_passwords, keys  # noqa: F401 - fixtures
from tests.factories import TeamFactory
from tests.scoping import no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def run_import(path, team="acme", *args):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with no_scope():
            call_command("import_sessions", str(path), "--team", team, *args, stdout=out, stderr=err)
    except CommandError as exc:
        code = exc.returncode or 1
        err.write(f"[CommandError] {exc}\n")
    print("RUN", path, args, "->", code, out.getvalue(), err.getvalue()[:300])
    return code, out.getvalue(), err.getvalue()


def stored(team="acme"):
    return list(AgentSession.objects.filter(team__slug=team).order_by("external_id"))


def shape(events):
    out = []
    for e in events:
        if e["type"] == "message":
            out.append(("message", e["role"], e["content"]))
        elif e["type"] == "tool_call":
            out.append(("call", e["id"], e["name"]))
        elif e["type"] == "tool_result":
            out.append(("result", e["call_id"], e["content"], bool(e.get("is_error", False))))
        else:
            out.append((e["type"], e.get("content")))
    return out


def calls_paired(events):
    ids = [e["id"] for e in events if e["type"] == "tool_call"]
    results = [e["call_id"] for e in events if e["type"] == "tool_result"]
    return sorted(ids) == sorted(results)


@pytest.fixture
def acme():
    return TeamFactory(slug="acme")


def alltext(s: AgentSession) -> str:
    return json.dumps(s.events, ensure_ascii=False)


# ---------------------------------------------------------------- ChatGPT data export (conversations.json)


def _node(
    nid,
    parent,
    children,
    role=None,
    ctype="text",
    parts=None,
    text=None,
    name=None,
    recipient="all",
    hidden=False,
    ts=1700000000.0,
):
    if role is None:
        return {"id": nid, "message": None, "parent": parent, "children": children}
    content = {"content_type": ctype}
    if parts is not None:
        content["parts"] = parts
    if text is not None:
        content["text"] = text
    if ctype == "code":
        content["language"] = "unknown"
    msg = {
        "id": nid,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": ts,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": role == "assistant" or None,
        "weight": 1.0,
        "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {"model_slug": "gpt-4o"},
        "recipient": recipient,
    }
    return {"id": nid, "message": msg, "parent": parent, "children": children}


def chatgpt_conversation(cid="conv-aaa", title="Sales chart"):
    nodes = [
        _node("root", None, ["sys"]),
        _node("sys", "root", ["u1"], role="system", parts=[""], hidden=True),
        _node("u1", "sys", ["a1"], role="user", parts=["Plot sales by month from sales.csv"], ts=1700000001.0),
        _node(
            "a1",
            "u1",
            ["t1"],
            role="assistant",
            ctype="code",
            text="import pandas as pd\ndf = pd.read_csv('sales.csv')",
            recipient="python",
            ts=1700000002.0,
        ),
        _node(
            "t1",
            "a1",
            ["a2"],
            role="tool",
            name="python",
            ctype="execution_output",
            text="FileNotFoundError: sales.csv",
            ts=1700000003.0,
        ),
        _node(
            "a2",
            "t1",
            ["b1"],
            role="assistant",
            ctype="code",
            text='search("monthly sales csv format")',
            recipient="browser",
            ts=1700000004.0,
        ),
        _node("b1", "a2", ["a3"], role="tool", name="browser", ctype="tether_browsing_display", ts=1700000005.0) | {},
        _node(
            "a3",
            "b1",
            ["u2old", "u2new"],
            role="assistant",
            parts=["The file was missing; please upload it."],
            ts=1700000006.0,
        ),
        # the user edited their second message: two branches, the current one is u2new
        _node("u2old", "a3", ["a4old"], role="user", parts=["OLD BRANCH question"], ts=1700000007.0),
        _node("a4old", "u2old", [], role="assistant", parts=["OLD BRANCH answer"], ts=1700000008.0),
        _node(
            "u2new",
            "a3",
            ["a4new"],
            role="user",
            ctype="multimodal_text",
            ts=1700000009.0,
            parts=[
                {
                    "content_type": "image_asset_pointer",
                    "asset_pointer": "file-service://file-XYZ",
                    "size_bytes": 1234,
                    "width": 640,
                    "height": 480,
                    "fovea": None,
                    "metadata": None,
                },
                "Here is a screenshot of the sheet instead",
            ],
        ),
        _node("a4new", "u2new", [], role="assistant", parts=["Thanks, the chart is ready."], ts=1700000010.0),
    ]
    nodes[6]["message"]["content"]["result"] = "# Monthly sales CSV\nmonth,amount"
    mapping = {n["id"]: n for n in nodes}
    return {
        "title": title,
        "create_time": 1700000000.0,
        "update_time": 1700000010.0,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": "a4new",
        "plugin_ids": None,
        "conversation_id": cid,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": cid,
    }


def chatgpt_simple(cid="conv-bbb"):
    nodes = [
        _node("r", None, ["u"]),
        _node("u", "r", ["a"], role="user", parts=["What is 2+2?"]),
        _node("a", "u", [], role="assistant", parts=["4"]),
    ]
    return {
        "title": "Math",
        "create_time": 1700001000.0,
        "update_time": 1700001001.0,
        "mapping": {n["id"]: n for n in nodes},
        "current_node": "a",
        "conversation_id": cid,
        "id": cid,
        "default_model_slug": "gpt-4o-mini",
    }


def _chatgpt_ok_or_clear_error(code, out, err, path):
    """Either imported as two sessions, or one clear error naming the file (not silently mis-read)."""
    if code == 0:
        return True
    assert out == "imported 0, unchanged 0, rejected 1\n", (out, err)
    assert str(path) in err, err
    return False


def test_chatgpt_export_many_conversations_current_branch_only(acme, tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([chatgpt_conversation(), chatgpt_simple()]))
    code, out, err = run_import(path)
    print("OUT", out, "ERR", err)
    if not _chatgpt_ok_or_clear_error(code, out, err, path):
        return
    sessions = stored()
    assert out == "imported 2, unchanged 0, rejected 0\n", (out, err, [s.external_id for s in sessions])
    s = next(x for x in sessions if "conv-aaa" in x.external_id)
    text = alltext(s)
    assert "OLD BRANCH" not in text, shape(s.events)
    msgs = [(e["role"], e["content"]) for e in s.events if e["type"] == "message" and e["role"] != "system"]
    assert msgs[0] == ("user", "Plot sales by month from sales.csv"), msgs
    assert msgs[-1] == ("assistant", "Thanks, the chart is ready."), msgs
    assert "Here is a screenshot of the sheet instead" in text
    assert "FileNotFoundError" in text and "pd.read_csv" in text  # code and its output kept
    assert "Monthly sales CSV" in text  # browsing result kept
    assert calls_paired(s.events), shape(s.events)
    assert run_import(path)[1] == "imported 0, unchanged 2, rejected 0\n"


def test_chatgpt_export_is_not_misread_as_openai_chat(acme, tmp_path):
    """If detected as some format, it must not become empty / hash-id sessions that drop the mapping."""
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([chatgpt_conversation(), chatgpt_simple()]))
    code, out, err = run_import(path)
    for s in stored():
        assert any(e["type"] == "message" and e["role"] == "user" for e in s.events), (
            s.external_id,
            s.events,
            out,
            err,
        )
        assert "Plot sales" in alltext(s) or "2+2" in alltext(s), (s.external_id, s.events)


def test_chatgpt_single_conversation_document(acme, tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(chatgpt_simple()))
    code, out, err = run_import(path)
    print("OUT", out, "ERR", err)
    if code != 0:
        assert out == "imported 0, unchanged 0, rejected 1\n" and str(path) in err, (out, err)
        return
    (s,) = stored()
    assert shape(s.events)[-2:] == [("message", "user", "What is 2+2?"), ("message", "assistant", "4")], s.events


# ---------------------------------------------------------------- Claude.ai export (conversations.json)


def claude_ai_export():
    return [
        {
            "uuid": "11111111-aaaa-4bbb-8ccc-000000000001",
            "name": "Release notes",
            "created_at": "2024-05-01T10:00:00.000000Z",
            "updated_at": "2024-05-01T10:05:00.000000Z",
            "account": {"uuid": "acc-1"},
            "chat_messages": [
                {
                    "uuid": "m1",
                    "text": "Summarise the attached notes",
                    "sender": "human",
                    "created_at": "2024-05-01T10:00:00.000000Z",
                    "updated_at": "2024-05-01T10:00:00.000000Z",
                    "content": [
                        {
                            "type": "text",
                            "text": "Summarise the attached notes",
                            "start_timestamp": "2024-05-01T10:00:00Z",
                            "stop_timestamp": "2024-05-01T10:00:00Z",
                            "citations": [],
                        }
                    ],
                    "attachments": [
                        {
                            "file_name": "notes.txt",
                            "file_size": 40,
                            "file_type": "text/plain",
                            "extracted_content": "ATTACHED: ship on Friday after QA",
                        }
                    ],
                    "files": [{"file_name": "diagram.png"}],
                },
                {
                    "uuid": "m2",
                    "text": "",
                    "sender": "assistant",
                    "created_at": "2024-05-01T10:00:05.000000Z",
                    "updated_at": "2024-05-01T10:00:05.000000Z",
                    "content": [
                        {"type": "thinking", "thinking": "let me search", "summaries": []},
                        {
                            "type": "tool_use",
                            "name": "web_search",
                            "input": {"query": "release QA checklist"},
                            "message": "Searching the web",
                            "integration_name": None,
                        },
                        {
                            "type": "tool_result",
                            "name": "web_search",
                            "is_error": False,
                            "content": [{"type": "text", "text": "SEARCHRESULT: QA checklist page"}],
                        },
                        {"type": "text", "text": "The notes say: ship on Friday after QA.", "citations": []},
                    ],
                    "attachments": [],
                    "files": [],
                },
                {
                    "uuid": "m3",
                    "text": "Thanks",
                    "sender": "human",
                    "created_at": "2024-05-01T10:01:00.000000Z",
                    "updated_at": "2024-05-01T10:01:00.000000Z",
                    "content": [{"type": "text", "text": "Thanks"}],
                    "attachments": [],
                    "files": [],
                },
                {
                    "uuid": "m4",
                    "text": "You're welcome.",
                    "sender": "assistant",
                    "created_at": "2024-05-01T10:01:02.000000Z",
                    "updated_at": "2024-05-01T10:01:02.000000Z",
                    "content": [{"type": "text", "text": "You're welcome."}],
                    "attachments": [],
                    "files": [],
                },
            ],
        },
        {
            "uuid": "11111111-aaaa-4bbb-8ccc-000000000002",
            "name": "Old-style (text only)",
            "created_at": "2024-01-01T10:00:00Z",
            "updated_at": "2024-01-01T10:00:00Z",
            "account": {"uuid": "acc-1"},
            "chat_messages": [
                {
                    "uuid": "n1",
                    "text": "Hello there",
                    "sender": "human",
                    "created_at": "2024-01-01T10:00:00Z",
                    "updated_at": "2024-01-01T10:00:00Z",
                    "attachments": [],
                    "files": [],
                },
                {
                    "uuid": "n2",
                    "text": "Hi! How can I help?",
                    "sender": "assistant",
                    "created_at": "2024-01-01T10:00:01Z",
                    "updated_at": "2024-01-01T10:00:01Z",
                    "attachments": [],
                    "files": [],
                },
            ],
        },
    ]


def test_claude_ai_export_many_conversations(acme, tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(claude_ai_export()))
    code, out, err = run_import(path)
    print("OUT", out, "ERR", err)
    if code != 0:
        assert out == "imported 0, unchanged 0, rejected 1\n" and str(path) in err, (out, err)
        return
    assert out == "imported 2, unchanged 0, rejected 0\n", (out, err)
    s1 = next(s for s in stored() if s.external_id.endswith("0001"))
    msgs = [(e["role"], e["content"]) for e in s1.events if e["type"] == "message"]
    assert msgs[0][0] == "user" and "Summarise the attached notes" in msgs[0][1], msgs
    assert msgs[-1] == ("assistant", "You're welcome."), msgs
    assert "ATTACHED: ship on Friday" in alltext(s1)  # attachment content not silently lost
    assert calls_paired(s1.events), shape(s1.events)
    assert run_import(path)[1] == "imported 0, unchanged 2, rejected 0\n"


def test_claude_ai_export_is_not_misread(acme, tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(claude_ai_export()))
    code, out, err = run_import(path)
    for s in stored():
        assert any(e["type"] == "message" and e["role"] == "user" for e in s.events), (s.external_id, s.events)


# ---------------------------------------------------------------- OpenAI Chat Completions logs


def openai_chat_lines():
    first = {
        "id": "chatcmpl-log-1",
        "model": "gpt-4o-2024-08-06",
        "messages": [
            {"role": "system", "content": "You are a deploy bot."},
            {"role": "user", "content": [{"type": "text", "text": "Deploy api to staging"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_A",
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"cmd": "make deploy"}'},
                    },
                    {"id": "call_B", "type": "function", "function": {"name": "status", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_A", "content": "make: *** No rule to make target 'deploy'"},
            {"role": "tool", "tool_call_id": "call_B", "content": "staging: idle"},
            {
                "role": "assistant",
                "content": "Retrying with make release.",
                "tool_calls": [
                    {
                        "id": "call_C",
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"cmd": "make release"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_C", "content": [{"type": "text", "text": "released v1.2"}]},
        ],
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Deployed v1.2 to staging.", "refusal": None},
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    second = {
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "ping"},
            {"role": "assistant", "content": "pong"},
        ],
    }
    return [first, second]


def test_openai_chat_jsonl_many_sessions_order_and_pairing(acme, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in openai_chat_lines()))
    code, out, err = run_import(path, "acme", "--agent", "deployer", "--task", "staging")
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), (out, err)
    sessions = stored()
    s = next(x for x in sessions if x.external_id == "chatcmpl-log-1")
    assert (s.agent, s.task, s.source_format) == ("deployer", "staging", "openai-chat")
    assert shape(s.events) == [
        ("message", "system", "You are a deploy bot."),
        ("message", "user", "Deploy api to staging"),
        ("call", "call_A", "run"),
        ("call", "call_B", "status"),
        ("result", "call_A", "make: *** No rule to make target 'deploy'", False),
        ("result", "call_B", "staging: idle", False),
        ("message", "assistant", "Retrying with make release."),
        ("call", "call_C", "run"),
        ("result", "call_C", "released v1.2", False),
        ("message", "assistant", "Deployed v1.2 to staging."),
    ], shape(s.events)
    other = next(x for x in sessions if x is not s)
    assert shape(other.events) == [
        ("message", "system", "Be brief."),
        ("message", "user", "ping"),
        ("message", "assistant", "pong"),
    ]
    assert run_import(path, "acme", "--agent", "deployer", "--task", "staging")[:2] == (
        0,
        "imported 0, unchanged 2, rejected 0\n",
    )


def test_openai_chat_response_with_tool_calls_in_choice(acme, tmp_path):
    """A request/response log whose response message itself calls a tool (the last turn)."""
    doc = {
        "id": "chatcmpl-log-2",
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_W",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        }
                    ],
                },
            }
        ],
    }
    path = tmp_path / "one.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    sh = shape(s.events)
    assert sh[0] == ("message", "user", "weather in Paris?") and ("call", "call_W", "get_weather") in sh, sh
    call = next(e for e in s.events if e["type"] == "tool_call")
    assert call["arguments"] in ({"city": "Paris"}, '{"city":"Paris"}'), call


def test_openai_chat_legacy_function_call_role_function(acme, tmp_path):
    """Pre-tools logs: assistant function_call + role 'function' reply; nothing silently lost."""
    doc = {
        "messages": [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": None, "function_call": {"name": "ls", "arguments": '{"path": "."}'}},
            {"role": "function", "name": "ls", "content": "README.md\nsetup.py"},
            {"role": "assistant", "content": "Two files."},
        ]
    }
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    if code != 0:
        assert "legacy.json" in err, err
        return
    (s,) = stored()
    assert "README.md" in alltext(s) and '"ls"' in alltext(s), shape(s.events)
    assert calls_paired(s.events), shape(s.events)


# ---------------------------------------------------------------- Anthropic Messages logs


def anthropic_doc():
    return {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a CI fixer.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Fix the failing test"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "SECRETTHOUGHT", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Running the tests."},
                    {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "pytest -x"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "read", "input": {"path": "a.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "is_error": True,
                        "content": [{"type": "text", "text": "1 failed: test_a"}],
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_02", "content": "def a(): return 1"},
                    {"type": "text", "text": "also check b.py"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Fixed a.py."}]},
        ],
    }


def test_anthropic_messages_blocks_pairing_thinking_dropped(acme, tmp_path):
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(anthropic_doc()))
    code, out, err = run_import(path, "acme", "--task", "ci")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    assert (s.agent, s.task, s.source_format) == ("anthropic-agent", "ci", "anthropic-messages")
    assert shape(s.events) == [
        ("message", "system", "You are a CI fixer."),
        ("message", "user", "Fix the failing test"),
        ("message", "assistant", "Running the tests."),
        ("call", "toolu_01", "bash"),
        ("call", "toolu_02", "read"),
        ("result", "toolu_01", "1 failed: test_a", True),
        ("result", "toolu_02", "def a(): return 1", False),
        ("message", "user", "also check b.py"),
        ("message", "assistant", "Fixed a.py."),
    ], shape(s.events)
    assert "SECRETTHOUGHT" not in alltext(s)
    assert run_import(path, "acme", "--task", "ci")[1] == "imported 0, unchanged 1, rejected 0\n"


def test_anthropic_request_response_log_keeps_response(acme, tmp_path):
    """A log line of {request, response}: the response's content is the last assistant turn."""
    req = {"model": "claude-3-5-haiku-latest", "max_tokens": 200, "messages": [{"role": "user", "content": "Say hi"}]}
    resp = {
        "id": "msg_01XYZ",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-haiku-latest",
        "content": [{"type": "text", "text": "RESPONSETEXT hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"request": req, "response": resp}) + "\n")
    code, out, err = run_import(path)
    if code != 0:
        assert "log.jsonl" in err, err
        return
    (s,) = stored()
    assert shape(s.events)[-1] == ("message", "assistant", "RESPONSETEXT hi"), shape(s.events)
    assert shape(s.events)[0] == ("message", "user", "Say hi"), shape(s.events)


def test_anthropic_jsonl_many_conversations(acme, tmp_path):
    a = anthropic_doc()
    b = {"id": "conv-b", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    path = tmp_path / "many.jsonl"
    path.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n")
    code, out, err = run_import(path, "acme", "--format", "anthropic-messages")
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), (out, err)
    assert "conv-b" in [s.external_id for s in stored()]


# ---------------------------------------------------------------- OpenAI Responses API


def responses_doc():
    return {
        "id": "resp_67ccd2bed1ec8190",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "model": "gpt-4.1-2025-04-14",
        "instructions": "You are a helpful release assistant.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "What version is deployed?"}]},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_V",
                "name": "get_version",
                "arguments": '{"env": "prod"}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "call_V", "output": "v3.4.1"},
        ],
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Production runs v3.4.1.", "annotations": []}],
            },
        ],
        "usage": {"input_tokens": 36, "output_tokens": 87, "total_tokens": 123},
    }


def test_openai_responses_object(acme, tmp_path):
    path = tmp_path / "resp.json"
    path.write_text(json.dumps(responses_doc()))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    assert s.source_format == "openai-chat" and s.agent == "openai-agent"
    sh = [x for x in shape(s.events) if not (x[0] == "message" and x[1] == "system")]
    assert sh == [
        ("message", "user", "What version is deployed?"),
        ("call", "call_V", "get_version"),
        ("result", "call_V", "v3.4.1", False),
        ("message", "assistant", "Production runs v3.4.1."),
    ], shape(s.events)
    assert "You are a helpful release assistant." in alltext(s)  # instructions not silently lost
    assert run_import(path)[1] == "imported 0, unchanged 1, rejected 0\n"


def test_openai_responses_string_input(acme, tmp_path):
    doc = {
        "id": "resp_str",
        "object": "response",
        "model": "gpt-4.1",
        "input": "Tell me a joke",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "id": "m",
                "content": [{"type": "output_text", "text": "Why did the chicken...", "annotations": []}],
            }
        ],
    }
    path = tmp_path / "resp.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    assert shape(s.events) == [
        ("message", "user", "Tell me a joke"),
        ("message", "assistant", "Why did the chicken..."),
    ], s.events


def test_openai_responses_output_function_call_without_output(acme, tmp_path):
    """A response ending in a function_call (awaiting the tool): the call is kept."""
    doc = {
        "id": "resp_fc",
        "object": "response",
        "model": "gpt-4.1",
        "input": [{"role": "user", "content": "weather?"}],
        "output": [
            {
                "type": "function_call",
                "id": "fc_9",
                "call_id": "call_9",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
                "status": "completed",
            }
        ],
    }
    path = tmp_path / "resp.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    assert shape(s.events) == [("message", "user", "weather?"), ("call", "call_9", "get_weather")], s.events


# ---------------------------------------------------------------- Gemini CLI


def gemini_doc():
    return {
        "sessionId": "5f1c0a8e-1111-4222-8333-444455556666",
        "projectHash": "abc123def456",
        "startTime": "2025-09-01T10:00:00.000Z",
        "lastUpdated": "2025-09-01T10:02:00.000Z",
        "messages": [
            {"id": "g1", "timestamp": "2025-09-01T10:00:00.000Z", "type": "user", "content": "Run the linter"},
            {
                "id": "g2",
                "timestamp": "2025-09-01T10:00:05.000Z",
                "type": "gemini",
                "content": "Running ruff.",
                "thoughts": [
                    {"subject": "Plan", "description": "THOUGHTTEXT", "timestamp": "2025-09-01T10:00:04.000Z"}
                ],
                "tokens": {"input": 100, "output": 10, "cached": 0, "thoughts": 5, "tool": 0, "total": 115},
                "model": "gemini-2.5-pro",
                "toolCalls": [
                    {
                        "id": "run_shell_command-1",
                        "name": "run_shell_command",
                        "args": {"command": "ruff check ."},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "run_shell_command-1",
                                    "name": "run_shell_command",
                                    "response": {
                                        "output": "Command: ruff check .\nStdout: E501 line too long\nExit Code: 1"
                                    },
                                }
                            }
                        ],
                        "status": "success",
                        "timestamp": "2025-09-01T10:00:06.000Z",
                        "displayName": "Shell",
                        "description": "",
                        "resultDisplay": "E501 line too long",
                        "renderOutputAsMarkdown": False,
                    },
                    {
                        "id": "read_file-2",
                        "name": "read_file",
                        "args": {"absolute_path": "/x/missing.py"},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "read_file-2",
                                    "name": "read_file",
                                    "response": {"error": "File not found: /x/missing.py"},
                                }
                            }
                        ],
                        "status": "error",
                        "timestamp": "2025-09-01T10:00:07.000Z",
                    },
                ],
            },
            {"id": "g3", "timestamp": "2025-09-01T10:00:10.000Z", "type": "info", "content": "Request cancelled."},
            {"id": "g4", "timestamp": "2025-09-01T10:01:00.000Z", "type": "user", "content": "fix it"},
            {
                "id": "g5",
                "timestamp": "2025-09-01T10:01:05.000Z",
                "type": "gemini",
                "content": "Fixed.",
                "tokens": {"input": 200, "output": 5, "cached": 0, "thoughts": 0, "tool": 0, "total": 205},
                "model": "gemini-2.5-pro",
            },
        ],
    }


def test_gemini_cli_session(acme, tmp_path):
    path = tmp_path / "session-2025-09-01T10-00-5f1c0a8e.json"
    path.write_text(json.dumps(gemini_doc(), indent=2))
    code, out, err = run_import(path, "acme", "--agent", "gem", "--task", "lint")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    assert (s.external_id, s.agent, s.task, s.source_format) == (
        "5f1c0a8e-1111-4222-8333-444455556666",
        "gem",
        "lint",
        "gemini-cli",
    )
    sh = shape(s.events)
    assert [x for x in sh if x[0] == "message"] == [
        ("message", "user", "Run the linter"),
        ("message", "assistant", "Running ruff."),
        ("message", "system", "Request cancelled."),
        ("message", "user", "fix it"),
        ("message", "assistant", "Fixed."),
    ], sh
    assert calls_paired(s.events), sh
    results = {e["call_id"]: e for e in s.events if e["type"] == "tool_result"}
    assert results["run_shell_command-1"]["exit_code"] == 1, results
    assert results["read_file-2"]["is_error"] is True, results
    assert "THOUGHTTEXT" not in alltext(s)
    assert s.metadata.get("usage"), s.metadata
    # calls come after the gemini text that announced them and before the next user turn
    idx = {x: i for i, x in enumerate(sh)}
    assert (
        idx[("message", "assistant", "Running ruff.")]
        < idx[("call", "run_shell_command-1", "run_shell_command")]
        < idx[("message", "user", "fix it")]
    )
    assert run_import(path, "acme", "--agent", "gem", "--task", "lint")[1] == "imported 0, unchanged 1, rejected 0\n"


def test_gemini_cli_parts_content(acme, tmp_path):
    """Newer Gemini CLI writes user content as a list of parts; the text must survive."""
    doc = gemini_doc()
    doc["messages"][0]["content"] = [{"text": "Run the linter"}, {"text": " please"}]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    first = next(e for e in s.events if e["type"] == "message")
    assert first["role"] == "user" and "Run the linter" in first["content"], first


# ---------------------------------------------------------------- canonical, odd but valid


def test_canonical_odd_but_valid(acme, tmp_path):
    docs = [
        {
            "external_id": "odd-1",
            "agent": "a",
            "task": None,
            "user": None,
            "model": None,
            "started_at": None,
            "ended_at": None,
            "outcome": "abandoned",
            "metadata": {},
            "events": [],
            "x_custom": {"kept": True},
        },
        {
            "external_id": "odd-2",
            "agent": "a",
            "events": [
                {"type": "message", "role": "user", "content": "", "ts": None},
                {"type": "tool_call", "id": "c1", "name": "run", "arguments": "ls -la"},
                {"type": "tool_result", "call_id": "c1", "content": "ok", "exit_code": None, "is_error": False},
                {"type": "memory_write", "content": "note", "store": None},
                {"type": "future_event", "payload": 1},
                {"type": "message", "role": "assistant", "content": "héllo \u2603 🎉", "extra_key": "x"},
            ],
        },
        {
            "external_id": "ü-ñ/with spaces:and#odd?chars",
            "agent": "a",
            "started_at": "2025-01-01T00:00:00+05:30",
            "events": [{"type": "message", "role": "system", "content": "s"}],
        },
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    code, out, err = run_import(path, "acme", "--agent", "fallback", "--task", "t")
    assert (code, out) == (0, "imported 3, unchanged 0, rejected 0\n"), (out, err)
    by = {s.external_id: s for s in stored()}
    assert by["odd-1"].metadata.get("x_custom") == {"kept": True}, by["odd-1"].metadata
    assert by["odd-1"].task == "t" and by["odd-1"].agent == "a"
    assert [e["type"] for e in by["odd-2"].events] == [
        "message",
        "tool_call",
        "tool_result",
        "memory_write",
        "future_event",
        "message",
    ]
    assert by["odd-2"].events[1]["arguments"] == "ls -la"
    assert by["odd-2"].events[5]["content"] == "héllo \u2603 🎉"
    assert by["odd-2"].source_format in ("dreamweb", "dreamweb-session-v1")
    assert run_import(path, "acme", "--agent", "fallback", "--task", "t")[1] == "imported 0, unchanged 3, rejected 0\n"


def test_canonical_single_document_json(acme, tmp_path):
    """One canonical session pretty-printed in a .json file (not one a line)."""
    doc = {"external_id": "pretty-1", "agent": "a", "events": [{"type": "message", "role": "user", "content": "hi"}]}
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(doc, indent=2))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    assert [s.external_id for s in stored()] == ["pretty-1"]


# ---------------------------------------------------------------- a folder with every family


def test_folder_of_mixed_formats_auto(acme, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "anthropic.json").write_text(json.dumps(anthropic_doc()))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(x) + "\n" for x in openai_chat_lines()))
    (tmp_path / "c.json").write_text(json.dumps(responses_doc()))
    (tmp_path / "d.json").write_text(json.dumps(gemini_doc()))
    code, out, err = run_import(tmp_path, "acme", "--agent", "ag", "--task", "tk")
    assert (code, out) == (0, "imported 5, unchanged 0, rejected 0\n"), (out, err)
    formats = sorted(s.source_format for s in stored())
    assert formats == ["anthropic-messages", "gemini-cli", "openai-chat", "openai-chat", "openai-chat"], formats
    assert {(s.agent, s.task) for s in stored()} == {("ag", "tk")}


# ---------------------------------------------------------------- HTTP upload of foreign files


URL = "/api/v1/sessions/"


def post_file(raw, body: bytes, content_type="application/octet-stream", query=""):
    with no_scope():
        return Api(raw).client.post(
            URL + query, data=body, content_type=content_type, headers={"Authorization": f"Api-Key {raw}"}
        )


def test_api_upload_anthropic_and_responses_by_content(world, keys):
    r = post_file(keys.full, json.dumps(anthropic_doc()).encode(), query="?agent=up&task=t1")
    assert r.status_code == 201, r.json()
    assert r.json()["format"] == "anthropic-messages"
    r2 = post_file(keys.full, json.dumps(anthropic_doc()).encode(), query="?agent=up&task=t1")
    assert (r2.status_code, r2.json()["unchanged"]) == (200, 1), r2.json()
    r3 = post_file(
        keys.full, json.dumps(responses_doc()).encode(), content_type="application/json", query="?format=auto"
    )
    assert r3.status_code == 201, r3.json()
    assert r3.json()["format"] == "openai-chat"
    s = AgentSession.objects.get(external_id="resp_67ccd2bed1ec8190")
    assert s.agent == "openai-agent"
    lines = "".join(json.dumps(x) + "\n" for x in openai_chat_lines()).encode()
    r4 = post_file(keys.full, lines, content_type="application/x-ndjson; format=openai-chat")
    assert r4.status_code == 201 and r4.json()["created"] == 2, r4.json()


def test_api_upload_chatgpt_export(world, keys):
    body = json.dumps([chatgpt_conversation(), chatgpt_simple()]).encode()
    r = post_file(keys.full, body)
    print(r.status_code, r.json())
    if r.status_code == 400:
        assert r.json().get("code") == "unknown_format", r.json()
        return
    assert r.status_code == 201 and r.json()["created"] == 2, r.json()
    s = AgentSession.objects.get(external_id__contains="conv-aaa")
    assert "OLD BRANCH" not in json.dumps(s.events)


# ---------------------------------------------------------------- second round: harder shapes


def _import_one(tmp_path, doc, name="x.json", *args):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code, out, err = run_import(path, "acme", *args)
    print("OUT", out, "ERR", err)
    return code, out, err


def test_canonical_json_array_batch_file(acme, tmp_path):
    """The API's batch body (a JSON array of canonical sessions) saved as a .json file."""
    docs = [{"external_id": f"arr-{i}", "agent": "a", "events": []} for i in range(3)]
    code, out, err = _import_one(tmp_path, docs, "batch.json")
    assert (code, out) == (0, "imported 3, unchanged 0, rejected 0\n"), (out, err)


def test_openai_chat_json_array_of_conversations(acme, tmp_path):
    docs = openai_chat_lines()
    code, out, err = _import_one(tmp_path, docs, "chats.json")
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), (out, err)


def test_openai_chat_plain_doc_detected_as_openai(acme, tmp_path):
    """An OpenAI log with only system/user/assistant strings and an OpenAI model must not default to the
    Anthropic agent name."""
    doc = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ],
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    assert (s.source_format, s.agent) == ("openai-chat", "openai-agent"), (s.source_format, s.agent)
    assert shape(s.events) == [
        ("message", "system", "sys"),
        ("message", "user", "hi"),
        ("message", "assistant", "hello"),
    ]


def test_openai_chat_user_only_strings_with_gpt_model(acme, tmp_path):
    doc = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    assert (s.source_format, s.agent) == ("openai-chat", "openai-agent"), (s.source_format, s.agent)


def test_openai_chat_image_part_and_refusal_not_silently_lost(acme, tmp_path):
    doc = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this image?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                ],
            },
            {"role": "assistant", "content": None, "refusal": "REFUSAL: I can't help with that."},
        ]
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    text = alltext(s)
    assert "What is in this image?" in text
    assert "REFUSAL" in text, shape(s.events)


def test_openai_chat_bad_line_is_reported_rest_imported(acme, tmp_path):
    good = openai_chat_lines()
    body = json.dumps(good[0]) + "\n{not json\n" + json.dumps(good[1]) + "\n"
    code, out, err = _import_one(tmp_path, body, "log.jsonl")
    assert (code, out) == (1, "imported 2, unchanged 0, rejected 1\n"), (out, err)
    assert "line 2" in err, err


def test_forced_wrong_format_is_an_error_not_garbage(acme, tmp_path):
    """--format openai-chat on an Anthropic conversation with tool_use blocks: the tool calls must not vanish."""
    code, out, err = _import_one(tmp_path, anthropic_doc(), "a.json", "--format", "openai-chat")
    if code != 0:
        assert "anthropic-messages" in err, err  # the message says which format to name
        return
    (s,) = stored()
    assert any(e["type"] == "tool_call" for e in s.events), shape(s.events)


def test_anthropic_document_and_image_blocks_not_silently_lost(acme, tmp_path):
    doc = {
        "model": "claude-sonnet-4-5",
        "system": "plain string system",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "DOCBODY release on Friday"},
                        "title": "notes.txt",
                    },
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                    {"type": "text", "text": "Summarise the document"},
                ],
            },
            {"role": "assistant", "content": "It says release on Friday."},
        ],
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    assert shape(s.events)[0] == ("message", "system", "plain string system"), shape(s.events)
    assert "Summarise the document" in alltext(s)
    assert "DOCBODY" in alltext(s) or "notes.txt" in alltext(s), shape(s.events)


def test_anthropic_server_and_mcp_tools(acme, tmp_path):
    doc = {
        "id": "conv-srv",
        "messages": [
            {"role": "user", "content": "search and ask the wiki"},
            {
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": [
                            {
                                "type": "web_search_result",
                                "url": "https://x.org",
                                "title": "XTITLE",
                                "encrypted_content": "zz",
                                "page_age": None,
                            }
                        ],
                    },
                    {
                        "type": "mcp_tool_use",
                        "id": "mcptoolu_1",
                        "name": "ask",
                        "server_name": "wiki",
                        "input": {"q": "y"},
                    },
                    {
                        "type": "mcp_tool_result",
                        "tool_use_id": "mcptoolu_1",
                        "is_error": False,
                        "content": [{"type": "text", "text": "WIKIANSWER"}],
                    },
                    {"type": "text", "text": "done"},
                ],
            },
        ],
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    sh = shape(s.events)
    assert ("call", "srvtoolu_1", "web_search") in sh and ("call", "mcptoolu_1", "mcp__wiki__ask") in sh, sh
    assert calls_paired(s.events), sh
    assert "WIKIANSWER" in alltext(s) and ("XTITLE" in alltext(s) or "x.org" in alltext(s)), sh
    assert sh[-1] == ("message", "assistant", "done"), sh


def test_anthropic_remember_tool_is_memory_write(acme, tmp_path):
    doc = {
        "id": "conv-rem",
        "messages": [
            {"role": "user", "content": "remember this"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "mcp__dreamweb__remember",
                        "input": {"content": "Deploy with make release"},
                    }
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "saved"}]},
        ],
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    assert shape(s.events) == [("message", "user", "remember this"), ("memory_write", "Deploy with make release")]


def test_responses_builtin_tool_items(acme, tmp_path):
    doc = {
        "id": "resp_tools",
        "object": "response",
        "model": "gpt-4.1",
        "input": [
            {"type": "message", "role": "developer", "content": "DEVINSTR"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        ],
        "output": [
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "latest release"},
            },
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "server_label": "deepwiki",
                "name": "ask_question",
                "arguments": '{"q": "z"}',
                "output": "MCPOUTPUT",
                "error": None,
            },
            {
                "type": "code_interpreter_call",
                "id": "ci_1",
                "status": "completed",
                "container_id": "c",
                "code": "print(6*7)",
                "outputs": [{"type": "logs", "logs": "CIOUT 42"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "m",
                "content": [{"type": "output_text", "text": "final", "annotations": []}],
            },
        ],
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    sh = shape(s.events)
    assert sh[0] == ("message", "system", "DEVINSTR") and sh[1] == ("message", "user", "go"), sh
    assert ("call", "mcp_1", "mcp__deepwiki__ask_question") in sh, sh
    assert "MCPOUTPUT" in alltext(s), sh
    assert "CIOUT 42" in alltext(s) and "print(6*7)" in alltext(s), sh
    assert sh[-1] == ("message", "assistant", "final"), sh


def test_gemini_cli_cancelled_call_without_result(acme, tmp_path):
    doc = gemini_doc()
    doc["messages"][1]["toolCalls"].append(
        {
            "id": "write_file-3",
            "name": "write_file",
            "args": {"file_path": "/x/a.py", "content": "x"},
            "status": "cancelled",
            "timestamp": "2025-09-01T10:00:08.000Z",
        }
    )
    doc["messages"].append(
        {"id": "g6", "timestamp": "2025-09-01T10:01:06.000Z", "type": "error", "content": "ERRTEXT quota exceeded"}
    )
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    sh = shape(s.events)
    assert ("call", "write_file-3", "write_file") in sh, sh
    assert sh[-1] == ("message", "system", "ERRTEXT quota exceeded"), sh


def test_empty_conversation_is_reported_not_silently_stored_empty(acme, tmp_path):
    code, out, err = _import_one(tmp_path, {"id": "empty-conv", "model": "gpt-4o", "messages": []})
    # either a clear error, or an empty session under its id; not a crash
    assert out in ("imported 1, unchanged 0, rejected 0\n", "imported 0, unchanged 0, rejected 1\n"), (out, err)


# ---------------------------------------------------------------- third round


def test_gemini_cli_chat_checkpoint(acme, tmp_path):
    """`/chat save tag` writes checkpoint-<tag>.json: a list of Gemini API Content objects."""
    doc = [
        {"role": "user", "parts": [{"text": "CKPT list the files"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "list_directory", "args": {"path": "."}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "list_directory", "response": {"output": "CKPTOUT a.py b.py"}}}],
        },
        {"role": "model", "parts": [{"text": "There are two files."}]},
    ]
    code, out, err = _import_one(tmp_path, doc, "checkpoint-mytag.json")
    if code != 0:
        assert "checkpoint-mytag.json" in err and "not a session file in a known format" in err, err
        return
    (s,) = stored()
    assert "CKPTOUT" in alltext(s) and calls_paired(s.events), shape(s.events)


def test_responses_function_call_output_as_list(acme, tmp_path):
    doc = {
        "id": "resp_listout",
        "object": "response",
        "input": [
            {"role": "user", "content": "read it"},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "LISTOUTPUT line"}],
            },
        ],
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    assert ("result", "c1", "LISTOUTPUT line", False) in shape(s.events), shape(s.events)


def test_openai_chat_truncated_arguments_kept_as_string(acme, tmp_path):
    doc = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "ls'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
        ]
    }
    code, out, err = _import_one(tmp_path, doc)
    assert code == 0, err
    (s,) = stored()
    call = next(e for e in s.events if e["type"] == "tool_call")
    assert call.get("arguments") == '{"cmd": "ls', call


def test_openai_chat_orphan_tool_result_kept(acme, tmp_path):
    doc = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": "ghost", "content": "ORPHANRESULT"},
            {"role": "assistant", "content": "done"},
        ]
    }
    code, out, err = _import_one(tmp_path, doc)
    if code != 0:
        assert "x.json" in err, err
        return
    (s,) = stored()
    assert "ORPHANRESULT" in alltext(s), shape(s.events)


def test_canonical_jsonl_with_bom_and_crlf(acme, tmp_path):
    lines = [{"external_id": f"bom-{i}", "agent": "a", "events": []} for i in range(2)]
    path = tmp_path / "win.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps(x).encode() + b"\r\n" for x in lines))
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), (out, err)


def test_anthropic_json_with_bom(acme, tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(anthropic_doc(), indent=2).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)


def test_gemini_json_with_bom(acme, tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(gemini_doc(), indent=2).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)


def test_anthropic_json_with_bom_named_format(acme, tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(anthropic_doc()).encode())
    code, out, err = run_import(path, "acme", "--format", "anthropic-messages")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)


def test_openai_chat_jsonl_with_bom(acme, tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(x) + "\n" for x in openai_chat_lines()).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 2, unchanged 0, rejected 0\n"), (out, err)


def test_anthropic_single_line_json_with_bom_auto(acme, tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(anthropic_doc()).encode())
    code, out, err = run_import(path)
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)


def test_gemini_json_with_bom_named_format(acme, tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(gemini_doc(), indent=2).encode())
    code, out, err = run_import(path, "acme", "--format", "gemini-cli")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)


def test_api_upload_pretty_json_with_bom(world, keys):
    body = b"\xef\xbb\xbf" + json.dumps(anthropic_doc(), indent=2).encode()
    r = post_file(keys.full, body)
    assert r.status_code == 201, r.json()


def test_anthropic_pretty_json_named_format(acme, tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(anthropic_doc(), indent=2))
    code, out, err = run_import(path, "acme", "--format", "anthropic-messages")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)


def test_idless_conversation_same_content_other_spelling_is_unchanged(acme, tmp_path):
    """No id: the external_id is a hash; the same conversation re-serialised (indent, key order) must not duplicate."""
    doc = anthropic_doc()
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    assert run_import(a)[1] == "imported 1, unchanged 0, rejected 0\n"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc, indent=4, sort_keys=True))
    code, out, err = run_import(b)
    assert out == "imported 0, unchanged 1, rejected 0\n", (out, err, [s.external_id for s in stored()])


def test_canonical_line_without_agent_takes_agent_option(acme, tmp_path):
    path = tmp_path / "noagent.jsonl"
    path.write_text(json.dumps({"external_id": "na-1", "events": []}) + "\n")
    code, out, err = run_import(path, "acme", "--agent", "filled", "--task", "tt")
    assert (code, out) == (0, "imported 1, unchanged 0, rejected 0\n"), (out, err)
    (s,) = stored()
    assert (s.agent, s.task) == ("filled", "tt")
