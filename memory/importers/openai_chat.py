"""Conversations with the OpenAI API: Chat Completions or Responses, one document a conversation (a file holding one
document, or JSON Lines of them).

Chat Completions: `{"messages": [...]}` (a request body, optionally with the response's `choices`), or the bare list
of messages. System and developer messages are system text; an assistant's `tool_calls` are calls; `tool` messages
(`tool_call_id`) are their results. The format has no error flag for results.
Responses: `{"input": ..., "output": [...]}` or the bare list of items, read as memory.importers.responses reads a
Codex rollout's items.
The conversation's id is the document's own (`id`, `conversation_id`, `metadata.session_id`, ...) or, when it has
none, a hash of its content, so a re-import adds nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from .anthropic_messages import ANTHROPIC_BLOCKS
from .base import Format, Options, Parsed, Transcript, block_text, timestamp
from .documents import content_id, documents, first_document, given_id
from .responses import Items, arguments
from .source import Source
from .tool_output import reported_outcome

CHAT_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning", "custom_tool_call", "web_search_call"}


def _is_chat_message(m) -> bool:
    return isinstance(m, dict) and m.get("role") in CHAT_ROLES and "type" not in m


def _is_item(m) -> bool:
    return isinstance(m, dict) and (m.get("type") in ITEM_TYPES or (m.get("role") in CHAT_ROLES and "content" in m))


def shape(doc) -> str | None:
    """ "chat" or "responses" for a document this format reads, else None."""
    if isinstance(doc, list):
        if doc and all(_is_chat_message(m) for m in doc):
            return "chat"
        if doc and all(_is_item(m) for m in doc):
            return "responses"
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("messages"), list) and all(_is_chat_message(m) for m in doc["messages"]):
        return "chat"
    if isinstance(doc.get("choices"), list) and doc.get("object") in ("chat.completion", None) and doc["choices"]:
        answers = all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in doc["choices"])
        return "chat" if answers else None
    if isinstance(doc.get("output"), list) or (
        isinstance(doc.get("input"), list | str) and ("model" in doc or "instructions" in doc)
    ):
        return "responses"
    return None


def sniff(source: Source) -> bool:
    return shape(first_document(source)) is not None


def _chat(doc, t: Transcript) -> None:
    messages = doc if isinstance(doc, list) else list(doc.get("messages") or [])
    if isinstance(doc, dict):
        for choice in doc.get("choices") or []:
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
                messages.append(choice["message"])
                break  # n > 1 gives alternatives, not turns: the first is the one a conversation continues with
    legacy = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, text, ts = m.get("role"), block_text(m.get("content")), m.get("timestamp") or m.get("created_at")
        if role in ("system", "developer"):
            t.say("system", text, ts)
        elif role == "user":
            t.say("user", text, ts)
        elif role == "assistant":
            # no text: a refusal, or a spoken answer whose transcript is its words
            audio = m.get("audio") if isinstance(m.get("audio"), dict) else {}
            spoken = audio.get("transcript") if isinstance(audio.get("transcript"), str) else ""
            t.say("assistant", text or (m.get("refusal") if isinstance(m.get("refusal"), str) else "") or spoken, ts)
            for call in m.get("tool_calls") or []:
                if isinstance(call, dict):
                    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                    name = fn.get("name") or call.get("name") or call.get("type") or "tool"
                    t.call(str(call.get("id") or ""), str(name), arguments(fn.get("arguments")), ts)
            if isinstance(m.get("function_call"), dict):  # the API's older single-call form
                legacy += 1
                fn = m["function_call"]
                t.call(f"function_call_{legacy}", str(fn.get("name") or "tool"), arguments(fn.get("arguments")), ts)
        elif role in ("tool", "function"):
            # The format has no error flag: the content says how the call ended, if anything does.
            output, code, failed = reported_outcome(text)
            call_id = str(m.get("tool_call_id") or "") if role == "tool" else f"function_call_{legacy}"
            t.result(call_id, output, ts, is_error=failed, exit_code=code)


def _anthropic_blocks(doc) -> list[str]:
    """The Anthropic-only block types (tool_use, tool_result, thinking ...) a chat document's messages hold."""
    messages = doc if isinstance(doc, list) else (doc.get("messages") if isinstance(doc, dict) else None)
    found = {
        b.get("type")
        for m in messages or ()
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") in ANTHROPIC_BLOCKS
    }
    return sorted(found)


def convert(doc, options: Options) -> dict:
    kind = shape(doc)
    body = doc if isinstance(doc, dict) else {}
    if kind == "responses":
        items = Items()
        if isinstance(body.get("instructions"), str):
            items.t.say("system", body["instructions"])
        source = doc if isinstance(doc, list) else []
        if isinstance(body.get("input"), str):
            items.t.say("user", body["input"])
        elif isinstance(body.get("input"), list):
            source = body["input"]
        for item in [*source, *(body.get("output") or [])]:
            if isinstance(item, dict):
                items.item(item, item.get("created_at"))
        items.finish()
        t = items.t
    else:
        t = Transcript()
        _chat(doc, t)
    t.touch(timestamp(body.get("created") or body.get("created_at")))
    return t.document(
        external_id=given_id(body) or content_id(FORMAT.name, doc),
        agent=options.agent or FORMAT.default_agent,
        task=options.task,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        metadata={"source_format": FORMAT.name, "api": kind, "usage": body.get("usage")},
    )


def read(source: Source, options: Options) -> Iterator[Parsed]:
    for where, doc, error in documents(source):
        if error is not None:
            yield Parsed(where, error=error)
        elif shape(doc) is None:
            yield Parsed(where, error="not an OpenAI conversation (no chat messages, no Responses input or output)")
        elif _anthropic_blocks(doc):
            # Both APIs take a list of messages; read as this one, Anthropic's blocks (its tool calls and results)
            # would be dropped without a word.
            yield Parsed(
                where,
                error=f"an Anthropic Messages conversation ({', '.join(_anthropic_blocks(doc))} blocks, which "
                "openai-chat would drop): name anthropic-messages, or let detection choose",
            )
        else:
            session = convert(doc, options)
            yield Parsed(f"session {session['external_id']}", doc=session)


FORMAT = Format(
    name="openai-chat",
    label="OpenAI Chat Completions or Responses conversation, JSON or JSON Lines",
    default_agent="openai-agent",
    sniff=sniff,
    read=read,
)
