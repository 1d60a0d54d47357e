"""What a card shows of a proposal's evidence: grouped by session, a few representative sessions first, each
excerpt with a few lines of the transcript around it.

Pure functions over plain values (no database): the dream's finalize step calls ``context_lines`` once per
representative evidence row and stores the result (a card never reads a transcript, which can be megabytes), and the
card calls ``group_by_session`` and ``representatives``. Transcript text is untrusted: it is redacted here and
auto-escaped by the templates, never marked safe.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.timezone import localtime

from .analysis.risk import redact

SHOWN_SESSIONS = 3  # sessions a card shows with their context; the others are behind "n more"
# The rows (in citation order) among which the representative sessions are picked, by finalize (which stores their
# context lines) and by the card (which loads no more than these): the spread of agents, tasks and outcomes shows in
# the first rows of any pattern, and a card's cost stays bounded however many sessions a pattern was seen in.
CANDIDATE_ROWS = 60
CONTEXT_BEFORE = 1  # events before and after the cited one
CONTEXT_AFTER = 1
LINE_CHARS = 120  # one context line is cut to this many characters


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def event_line(event: Any) -> tuple[str, str]:
    """(label, one-line text) of a canonical session event (contracts/session.schema.json)."""
    if not isinstance(event, dict):
        return "event", _text(event)
    kind = event.get("type")
    if kind == "message":
        return str(event.get("role") or "message"), _text(event.get("content", ""))
    if kind == "tool_call":
        arguments = event.get("arguments", {})
        if isinstance(arguments, dict) and len(arguments) == 1:
            # One argument (a shell's command, a file's path): its value says what the call did.
            arguments = next(iter(arguments.values()))
        return f"call {_text(event.get('name', '?'))}", _text(arguments)
    if kind == "tool_result":
        exit_code = event.get("exit_code")
        failed = bool(event.get("is_error")) or (isinstance(exit_code, int) and exit_code != 0)
        return ("result (failed)" if failed else "result"), _text(event.get("content", ""))
    if kind == "memory_write":
        return "note", _text(event.get("content", ""))
    return _text(kind or "event"), _text(event)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LINE_CHARS else flat[: LINE_CHARS - 1] + "…"


def context_lines(events: Sequence[Any], index: int) -> list[list]:
    """The cited event and its neighbours as [[index, label, text]], each text on one line, redacted and cut."""
    if not isinstance(events, Sequence) or not 0 <= index < len(events):
        return []
    rows = []
    for i in range(max(0, index - CONTEXT_BEFORE), min(len(events), index + CONTEXT_AFTER + 1)):
        label, text = event_line(events[i])
        rows.append([i, label[:40], _one_line(redact(text) or "")])
    return rows


@dataclass
class SessionGroup:
    """One session's evidence for one proposal: the session, its rows (first the one cited first). ``count`` is the
    number of rows the session has for the proposal when the rows loaded are fewer (a card loads a bounded number)."""

    session_id: int
    rows: list = field(default_factory=list)
    count: int | None = None

    @property
    def first(self):
        return self.rows[0]

    @property
    def more_events(self) -> int:
        """Rows of this session beyond the first ("+n more events")."""
        return (len(self.rows) if self.count is None else self.count) - 1


@dataclass
class EvidenceFacts:
    """What a card says of its evidence's strength: distinct sessions and the span of their start times."""

    sessions: int = 0
    first: datetime | None = None
    last: datetime | None = None

    @property
    def span(self) -> str:
        """When the sessions started, compactly: the minutes within one day (a flood pushed within a minute shows
        as one time), the days otherwise."""
        if self.first is None or self.last is None:
            return ""
        first, last = localtime(self.first), localtime(self.last)
        if first.date() != last.date():
            return f"{first:%Y-%m-%d} to {last:%Y-%m-%d}"
        same = f"{first:%H:%M}" == f"{last:%H:%M}"
        return f"{first:%Y-%m-%d %H:%M}" + ("" if same else f"–{last:%H:%M}")


def group_by_session(rows: Iterable, session_of: Callable[[Any], int]) -> list[SessionGroup]:
    """Evidence rows grouped by session, in the order each session is first cited; a session appears once."""
    groups: dict[int, SessionGroup] = {}
    for row in rows:
        sid = session_of(row)
        groups.setdefault(sid, SessionGroup(sid)).rows.append(row)
    return list(groups.values())


def representatives(
    groups: Sequence[SessionGroup], facets: Callable[[SessionGroup], tuple], n: int = SHOWN_SESSIONS
) -> list[SessionGroup]:
    """Up to ``n`` groups that show the pattern's spread: each pick prefers a group whose facets (e.g. agent, task,
    outcome) differ most from those already picked, ties broken by citation order (deterministic)."""
    picked: list[SessionGroup] = []
    seen: list[set] = []
    remaining = list(groups)
    while remaining and len(picked) < n:

        def novelty(item: tuple[int, SessionGroup]) -> tuple[int, int]:
            position, group = item
            values = facets(group)
            new = sum(1 for i, v in enumerate(values) if i >= len(seen) or v not in seen[i])
            return (-new, position)

        position, best = min(enumerate(remaining), key=novelty)
        picked.append(best)
        values = facets(best)
        while len(seen) < len(values):
            seen.append(set())
        for i, v in enumerate(values):
            seen[i].add(v)
        remaining.pop(position)
    return picked
