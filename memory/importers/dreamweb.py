"""Dreamweb's own format: JSON Lines, one canonical session (contracts/session.schema.json) per line.

The fast path: a line is parsed once and handed on with its text, so validation can skip the walk for unstorable
characters when the text has no escape that could carry one.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings

from dreamweb import input_guard

from ..sessions import SessionTooLarge
from .base import Format, Options, Parsed
from .source import Source, json_error

CANONICAL_KEYS = ("external_id", "events")


def sniff(source: Source) -> bool:
    return any(isinstance(v, dict) and all(k in v for k in CANONICAL_KEYS) for v in source.head_values())


def read(source: Source, options: Options) -> Iterator[Parsed]:
    limit = settings.DREAMWEB_MAX_SESSION_BYTES
    for number, line, size in source.lines(limit):
        if line is not None and not line.strip():
            continue
        where = f"line {number}"
        if line is None or size > limit:
            yield Parsed(where, error=str(SessionTooLarge(size, limit)))
            continue
        try:
            doc, hints = input_guard.parse(line.rstrip(b"\r\n"))
        except input_guard.Refused as exc:
            yield Parsed(where, error=json_error(exc))
            continue
        if isinstance(doc, dict):
            # --agent / --task name what a line leaves out; they never override what it says.
            if options.agent and not doc.get("agent"):
                doc["agent"] = options.agent
            if options.task and not doc.get("task"):
                doc["task"] = options.task
        yield Parsed(where, doc=doc, size=size, raw=line, hints=hints)


FORMAT = Format(
    name="dreamweb",
    label="Dreamweb canonical sessions, JSON Lines",
    default_agent=None,
    sniff=sniff,
    read=read,
)
