"""The one interface every importer implements, and the bookkeeping they share.

An importer turns one file of its format into canonical sessions (contracts/session.schema.json). It is a module
with a ``FORMAT``: a name, a label, the agent name to use when the file does not name one, ``sniff(source)`` (does the
start of this file look like my format?) and ``read(source, options)``, a generator of ``Parsed`` items: a session
document, or a problem at a place in the file. Readers never touch the database; validation and storing are the
caller's (memory.importing), the same for every format.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from dreamweb import input_guard
from memory.sessions import parse_timestamp

from .source import Source

# The MCP tool of Dreamweb's own server (clients/python, server name "dreamweb") that saves an in-band note. Agents
# spell MCP tool names mcp__<server>__<tool> (Claude Code, Codex) or give the server apart (Codex's namespace,
# Anthropic's mcp_tool_use.server_name); both arrive here joined.
REMEMBER = re.compile(r"^(?:mcp__)?dreamweb(?:__|\.|/)remember$")

# Text that PostgreSQL cannot store (NUL) or UTF-8 cannot encode (lone surrogates): tool output of binary files has
# them. Replaced, so one byte does not cost the whole session.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

# Who wrote a message, when it is not what the role says: a subagent's "user" turns are prompts its parent agent
# wrote, not a person's words. Canonical message events carry it as "author" (the schema keeps extra event keys);
# an absent author means the role's usual writer (a person for "user").
AUTHOR_AGENT = "agent"


@dataclass(frozen=True)
class Options:
    """What the caller knows that the file may not say."""

    agent: str | None = None
    task: str | None = None


@dataclass
class Parsed:
    """One thing a reader found: a session document, a rejected part (``error``) or a remark (``notice``).

    ``where`` names the place for messages ("line 12", "session 4c2d…"). ``size`` and ``raw`` are given by the
    canonical reader only: the line's byte size and text. ``hints``, the input guard's hints from parsing the text
    the document came from (the line, or every line of a converted file: Source.hints), let validation skip work
    the text shows is not needed; without them it does all of it.
    """

    where: str
    doc: dict | None = None
    error: str | None = None
    notice: str | None = None
    size: int | None = None
    raw: bytes | None = None
    hints: input_guard.Hints | None = None


@dataclass(frozen=True)
class Format:
    name: str
    label: str
    default_agent: str | None
    sniff: Callable[[Source], bool]
    read: Callable[[Source, Options], Iterator[Parsed]]


def clean_text(text: str) -> str:
    return _UNSTORABLE.sub("\ufffd", text) if _UNSTORABLE.search(text) else text


def clean_value(value):
    """clean_text over every string (and key) of a JSON value. A container with nothing to clean (nearly all) is
    returned as it is: orjson's text of it shows that at C speed (it writes NUL as \\u0000 and refuses a lone
    surrogate), where the walk below costs a Python call per value."""
    if isinstance(value, dict | list):
        try:
            if b"\\u0000" not in orjson.dumps(value):
                return value
        except TypeError:  # a lone surrogate, an integer beyond 64 bits, a key that is not a string: walk
            pass
    return _clean_walk(value)


def _clean_walk(value):
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k): _clean_walk(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_walk(v) for v in value]
    return value


def timestamp(value) -> str | None:
    """A date-time as the schema wants it (memory.sessions.parse_timestamp takes it), or None for anything else:
    epoch numbers, and the other ISO 8601 forms a format may write (a date alone, 20260101T100000Z, +0530), are
    written out in RFC 3339, so that no session of a file is refused for its timestamps' spelling."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        if value > 1e11:  # milliseconds
            value = value / 1000
        try:
            return _rfc3339(datetime.fromtimestamp(value, tz=UTC))
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value:
        return None
    if parse_timestamp(value) is not None:
        return value  # as written: the common case
    try:
        return _rfc3339(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def _rfc3339(moment: datetime) -> str:
    text = moment.isoformat().replace("+00:00", "Z")
    if parse_timestamp(text) is None:  # an offset with seconds (+05:30:15), which RFC 3339 has no way to write
        text = moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return text


def block_text(content, *, image: str = "[image]") -> str:
    """The text of a content that is a string or a list of blocks/parts (Anthropic, OpenAI, MCP)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block.get("refusal"), str):
                parts.append(block["refusal"])  # an OpenAI refusal part: the assistant's answer, in words
            elif kind == "search_result":
                # A search result given to the model: its title and source, then its text.
                head = " ".join(
                    x
                    for x in (
                        block.get("title") if isinstance(block.get("title"), str) else "",
                        f"({block['source']})" if isinstance(block.get("source"), str) else "",
                    )
                    if x
                )
                parts.append("\n".join(p for p in (head, block_text(block.get("content"), image=image)) if p))
            elif kind == "web_fetch_result":
                # A page the API fetched: its address, then the document it returned.
                url = block.get("url") if isinstance(block.get("url"), str) else ""
                parts.append("\n".join(p for p in (url, block_text(block.get("content"), image=image)) if p))
            elif kind in ("document", "input_file", "file"):
                parts.append(_document_text(block, image))
            elif kind in ("image", "image_url", "input_image"):
                parts.append(image)
            elif isinstance(block.get("content"), str | list | dict):
                parts.append(block_text(block["content"], image=image))
            elif isinstance(block.get("url"), str):
                # A search result (web_search_result, a citation): its title and address, never its encrypted body.
                title = block.get("title") if isinstance(block.get("title"), str) else ""
                parts.append(f"{title} ({block['url']})" if title else block["url"])
    return "\n".join(p for p in parts if p)


def _document_text(block: dict, image: str) -> str:
    """A document block: its text when it carries text (a plain-text source, or content blocks), else a marker that
    names it; a PDF or a file by reference stays a marker, as an image does."""
    title = next((block[k] for k in ("title", "filename", "name") if isinstance(block.get(k), str)), "")
    head = f"[document: {title}]" if title else "[document]"
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return f"{head}\n{source['data']}"
    if source.get("type") == "content" and isinstance(source.get("content"), str | list):
        return f"{head}\n{block_text(source['content'], image=image)}"
    return head if title else image  # a PDF, an uploaded file's bytes, a file by id: named, never inlined


@dataclass
class Transcript:
    """Canonical events of one session being built, with what every format needs: in-band notes from the remember
    tool, one result per call, first and last timestamps, cleaned text."""

    events: list[dict] = field(default_factory=list)
    first_ts: str | None = None
    last_ts: str | None = None
    calls: dict[str, dict] = field(default_factory=dict)
    results: dict[str, dict] = field(default_factory=dict)
    notes: set[str] = field(default_factory=set)

    def touch(self, ts) -> str | None:
        ts = timestamp(ts)
        if ts is not None:
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        return ts

    def _add(self, event: dict, ts) -> dict:
        ts = self.touch(ts)
        if ts is not None:
            event["ts"] = ts
        self.events.append(event)
        return event

    def say(self, role: str, content: str, ts=None, *, author: str | None = None) -> dict | None:
        if not content or not content.strip():
            return None
        event = {"type": "message", "role": role, "content": clean_text(content)}
        if author is not None:
            event["author"] = author
        return self._add(event, ts)

    def call(self, call_id: str, name: str, arguments, ts=None) -> dict | None:
        """A tool call; a call of Dreamweb's remember tool becomes the in-band note it is (and its result is
        dropped: the note is the event)."""
        if name and "remember" in name and REMEMBER.match(name):
            self.notes.add(call_id)
            args = arguments if isinstance(arguments, dict) else {"content": arguments}
            content = args.get("content") or args.get("note") or args.get("text")
            if isinstance(content, str) and content.strip():
                note = {"type": "memory_write", "content": clean_text(content)}
                if isinstance(args.get("store"), str):
                    note["store"] = clean_text(args["store"])
                return self._add(note, ts)
            return None
        event = {"type": "tool_call", "id": call_id, "name": clean_text(name or "tool")}
        if arguments is not None:
            event["arguments"] = clean_value(arguments if isinstance(arguments, dict | str) else {"input": arguments})
        self.calls[call_id] = event
        return self._add(event, ts)

    def result(
        self, call_id: str, content: str, ts=None, *, is_error: bool = False, exit_code: int | None = None
    ) -> dict | None:
        if call_id in self.notes:
            return None
        if call_id in self.results:
            return None  # a repeated result (a replayed line) is the same result
        event = {"type": "tool_result", "call_id": call_id, "content": clean_text(content or "")}
        if is_error:
            event["is_error"] = True
        if exit_code is not None:
            event["exit_code"] = exit_code
        self.results[call_id] = event
        return self._add(event, ts)

    def note(self, content: str, ts=None, *, store: str | None = None) -> dict | None:
        if not content or not content.strip():
            return None
        event = {"type": "memory_write", "content": clean_text(content)}
        if store:
            event["store"] = store
        return self._add(event, ts)

    def document(
        self,
        *,
        external_id: str,
        agent: str,
        task: str | None,
        model: str | None,
        metadata: dict,
        outcome: str = "unknown",
    ) -> dict:
        return {
            "external_id": external_id,
            "agent": agent,
            "task": task,
            "model": model,
            "started_at": self.first_ts,
            "ended_at": self.last_ts,
            "outcome": outcome,
            "metadata": clean_value({k: v for k, v in metadata.items() if v not in (None, "", [], {})}),
            "events": self.events,
        }


def mcp_name(name: str, server: str | None) -> str:
    """mcp__<server>__<tool>, the one spelling of an MCP tool whatever the format's own."""
    if not server:
        return name
    server = server.removeprefix("mcp__").rstrip("_")
    return f"mcp__{server}__{name}"
