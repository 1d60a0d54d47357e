"""Conversations with the Anthropic Messages API: `{"system": ..., "messages": [...]}` (a request body, optionally
with the response's `content` appended as the last assistant turn) or the bare list of messages; one document a
conversation (a file holding one, or JSON Lines of them).

Content is a string or blocks: `text`; `tool_use` (a call) and `tool_result` (its result, `is_error` kept);
`server_tool_use` / `*_tool_result` (tools the API ran); `mcp_tool_use` / `mcp_tool_result` (MCP connector calls, as
`mcp__<server>__<tool>`); `thinking` is dropped. The conversation's id is the document's own, else a hash of its
content.
"""

from __future__ import annotations

from collections.abc import Iterator

from .base import Format, Options, Parsed, Transcript, block_text, mcp_name
from .documents import content_id, documents, first_document, given_id
from .source import Source
from .tool_output import reported_outcome

# Blocks of a user turn that carry someone else's words, and the author they are given.
ATTACHED = {
    "document": "attachment",
    "search_result": "web",
    "web_search_result": "web",
    "web_search_tool_result": "web",
    "web_fetch_result": "web",
}
# Block types only the Messages API has (OpenAI's parts are text, image_url, input_audio, file, refusal): a
# conversation holding one is Anthropic's, whatever else it looks like. An image is Anthropic's when it has a `source`.
ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "mcp_tool_use"}
ANTHROPIC_BLOCKS |= {"mcp_tool_result", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result"}
ANTHROPIC_BLOCKS |= {"bash_code_execution_tool_result", "text_editor_code_execution_tool_result"}
ANTHROPIC_BLOCKS |= set(ATTACHED)


def _messages(doc) -> list | None:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return doc["messages"]
    return None


def looks_anthropic(doc) -> bool:
    """A positive sign of the Messages API: a top-level `system`, a `stop_reason`, or a block only it has. (Plain
    text turns look the same in either API and read the same either way.)"""
    messages = _messages(doc)
    if messages is None or not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in messages):
        return False
    if isinstance(doc, dict) and ("system" in doc or "stop_reason" in doc or isinstance(doc.get("content"), list)):
        return True
    return any(
        isinstance(b, dict)
        and (b.get("type") in ANTHROPIC_BLOCKS or (b.get("type") == "image" and isinstance(b.get("source"), dict)))
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
    )


def server_outcome(content) -> tuple[str | None, int | None, bool]:
    """How a tool the API ran ended, from its result object: an error object (`web_search_tool_result_error`,
    `bash_code_execution_tool_result_error`: its code is the output, and it failed), or a code execution's result
    (stdout and stderr, its return code). (None, None, False) for any other content."""
    if not isinstance(content, dict):
        return None, None, False
    kind = str(content.get("type") or "")
    if kind.endswith("_error"):
        code = content.get("error_code")
        return f"error: {code}" if isinstance(code, str) and code else "error", None, True
    if "return_code" in content or "stdout" in content or "stderr" in content:
        printed = [content[k] for k in ("stdout", "stderr") if isinstance(content.get(k), str) and content[k].strip()]
        rc = content.get("return_code")
        rc = rc if isinstance(rc, int) and not isinstance(rc, bool) else None
        return "\n".join(p.rstrip("\n") for p in printed), rc, rc not in (None, 0)
    return None, None, False


def sniff(source: Source) -> bool:
    return looks_anthropic(first_document(source))


def convert(doc, options: Options) -> dict:
    t = Transcript()
    body = doc if isinstance(doc, dict) else {}
    if body.get("system"):
        t.say("system", block_text(body["system"]))
    messages = list(_messages(doc) or [])
    if isinstance(body.get("content"), list) and body.get("role") == "assistant":
        messages.append({"role": "assistant", "content": body["content"]})  # the response of this request
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        if isinstance(content, str):
            t.say("user" if role == "user" else "assistant", content)
            continue
        texts: list[str] = []

        def flush(texts=texts, role=role):
            if texts:
                t.say("user" if role == "user" else "assistant", "\n".join(texts))
                texts.clear()

        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                flush()
                name = str(block.get("name") or "tool")
                if kind == "mcp_tool_use":
                    name = mcp_name(name, block.get("server_name"))
                t.call(str(block.get("id") or ""), name, block.get("input"))
            elif isinstance(kind, str) and kind.endswith("tool_result"):
                flush()
                # Without is_error (an application that never sets it), the content may still say how it ended.
                output, code, failed = server_outcome(block.get("content"))
                if output is None:
                    output, code, failed = reported_outcome(block_text(block.get("content")))
                t.result(
                    str(block.get("tool_use_id") or ""),
                    output,
                    is_error=bool(block.get("is_error")) or failed,
                    exit_code=code,
                )
            elif role == "user" and kind in ATTACHED:
                # A document the person attached, a search result: in the person's turn, not in their words (a
                # forum post saying "don't use npm" is not the person's correction; docs/session-formats.md).
                flush()
                t.say("user", block_text([block]), author=ATTACHED[kind])
            elif kind not in ("thinking", "redacted_thinking"):
                text = block_text([block])
                if text:
                    texts.append(text)
        flush()
    return t.document(
        external_id=given_id(body) or content_id(FORMAT.name, doc),
        agent=options.agent or FORMAT.default_agent,
        task=options.task,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        metadata={"source_format": FORMAT.name, "usage": body.get("usage")},
    )


def read(source: Source, options: Options) -> Iterator[Parsed]:
    for where, doc, error in documents(source):
        if error is not None:
            yield Parsed(where, error=error)
        elif _messages(doc) is None:
            yield Parsed(where, error="not an Anthropic Messages conversation (no messages list)")
        else:
            session = convert(doc, options)
            yield Parsed(f"session {session['external_id']}", doc=session)


FORMAT = Format(
    name="anthropic-messages",
    label="Anthropic Messages conversation, JSON or JSON Lines",
    default_agent="anthropic-agent",
    sniff=sniff,
    read=read,
)
