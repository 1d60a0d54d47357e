"""Dreamweb's own format: JSON Lines, one canonical session (contracts/session.schema.json) per line.

The fast path: a line is parsed once and handed on with its text, so validation can skip the walk for unstorable
characters when the text has no escape that could carry one.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from django.conf import settings

from dreamweb import input_guard

from ..sessions import SessionTooLarge
from .base import Format, Options, Parsed
from .documents import documents, documents_list, first_document
from .source import Source, json_error

CANONICAL_KEYS = ("external_id", "events")


def _canonical(v) -> bool:
    return isinstance(v, dict) and all(k in v for k in CANONICAL_KEYS)


def _array_of_sessions(source: Source) -> bool:
    """A JSON array of sessions (the API's batch body saved as a file), pretty-printed or on one line."""
    values = source.head_values()
    return source.looks_like_document() or (len(values) == 1 and documents_list(values[0]))


def sniff(source: Source) -> bool:
    if _array_of_sessions(source):  # one session pretty-printed, or an API batch body saved as a .json file
        return _canonical(first_document(source))
    return any(_canonical(v) for v in source.head_values())


def read(source: Source, options: Options) -> Iterator[Parsed]:
    limit = settings.DREAMWEB_MAX_SESSION_BYTES
    if _array_of_sessions(source):
        yield from _read_document(source, options, limit)
        return
    for number, line, size in source.lines(limit):
        item = parse_line(number, line, size, limit, options)
        if item is not None:
            yield item


def parse_line(number: int, line: bytes | None, size: int, limit: int, options: Options) -> Parsed | None:
    """One line of Source.lines(limit) as read() hands it on; None for a blank line. Apart so that a pool's worker
    parses a run of a large file's lines exactly as read() would (memory.importing.read_in_pool)."""
    if line is not None and not line.strip():
        return None
    where = f"line {number}"
    if line is None or size > limit:
        return Parsed(where, error=str(SessionTooLarge(size, limit)))
    try:
        doc, hints = input_guard.parse(line.rstrip(b"\r\n"))
    except input_guard.Refused as exc:
        return Parsed(where, error=json_error(exc))
    if isinstance(doc, dict):
        # --agent / --task name what a line leaves out; they never override what it says.
        if options.agent and not doc.get("agent"):
            doc["agent"] = options.agent
        if options.task and not doc.get("task"):
            doc["task"] = options.task
    return Parsed(where, doc=doc, size=size, raw=line, hints=hints)


def _read_document(source: Source, options: Options, limit: int) -> Iterator[Parsed]:
    for where, doc, error in documents(source):
        if error is not None:
            yield Parsed(where, error=error)
            continue
        size = len(orjson.dumps(doc))
        if size > limit:
            yield Parsed(where, error=str(SessionTooLarge(size, limit)))
            continue
        if isinstance(doc, dict):
            if options.agent and not doc.get("agent"):
                doc["agent"] = options.agent
            if options.task and not doc.get("task"):
                doc["task"] = options.task
        yield Parsed(where, doc=doc, size=size)


FORMAT = Format(
    name="dreamweb",
    label="Dreamweb canonical sessions, JSON Lines",
    default_agent=None,
    sniff=sniff,
    read=read,
)
