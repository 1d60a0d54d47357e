"""The session viewer: a transcript readable at a glance.

Transcript text is untrusted (agents and tools wrote it, i.e. anyone): the view only reshapes events into plain
values and the template prints them with auto-escaping inside an ``hx-disable`` container, so neither HTML nor htmx
attributes in a transcript can ever act. Nothing here returns markup.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dreamweb.gates import get_for_user
from dreamweb.input_guard import parse_int
from dreamweb.secret_scan import REDACTED, redact, redact_value, redact_window
from dreamweb.views import current_team_or_404

from ..models import NEWEST, AgentSession, ContextServe, MemoryEntry, MemoryVersion
from ..sessions import team_agents

LIST_FIELDS = (
    "id",
    "team",
    "external_id",
    "agent",
    "task",
    "outcome",
    "started_at",
    "ended_at",
    "event_count",
    "size_bytes",
    "model",
    "ingested_at",
)
MAX_MARK = 400
PER_PAGE = 50


class BoundedPaginator(Paginator):
    """Counts the rows only up to ten pages past the one asked for: a team's millionth session is never counted to
    show its newest fifty. ``capped`` says there are more than that (the page shows "of N+")."""

    AHEAD = 10

    def __init__(self, object_list, per_page, *, page: int):
        super().__init__(object_list, per_page)
        self.bound = (max(page, 1) + self.AHEAD) * per_page
        self.capped = False

    @property
    def count(self) -> int:
        if not hasattr(self, "_bounded_count"):
            found = self.object_list.order_by()[: self.bound + 1].count()
            self.capped = found > self.bound
            self._bounded_count = min(found, self.bound)
        return self._bounded_count


def _text(value) -> str:
    """An event's field as shown: its secrets replaced by [REDACTED] (dreamweb.secret_scan; a JSON value read with its
    keys, so `{"password": "..."}` is caught too). The stored transcript is unchanged; evidence excerpts are stored
    redacted, so they are still found and marked in the redacted text."""
    if isinstance(value, str):
        return redact(value)
    try:
        return json.dumps(redact_value(value), indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return redact(repr(value))


# Characters of one event's text drawn at a time: a 5 MB message (the session limit) took 20 s to scan for secrets
# and draw whole; a part of it is what a person reads, with links to the parts before and after.
EVENT_CHARS = 20_000


def _clip(value, *, at: int | None = None, mark: str = "") -> tuple[str, dict | None]:
    """An event's text field as shown, and where it was cut when longer than EVENT_CHARS: from ``at``, else around
    the evidence excerpt ``mark``, else from the start; secrets redacted in the part shown (read with its margins)."""
    if not isinstance(value, str) or len(value) <= EVENT_CHARS:
        return _text(value), None
    total = len(value)
    if at is None:
        at = 0
        needle = (mark or "").strip().removesuffix("…").strip()[:MAX_MARK]
        for probe in (needle, needle.split(REDACTED)[0].strip()):
            if probe and (found := value.find(probe)) >= 0:
                at = max(0, found - 200)
                break
    at = max(0, min(at, total - 1))
    end = min(total, at + EVENT_CHARS)
    clip = {
        "start": at,
        "end": end,
        "total": total,
        "previous": max(0, at - EVENT_CHARS) if at else None,
        "next": end if end < total else None,
    }
    return redact_window(value, at, end), clip


def _clip_arguments(value, **here) -> tuple[str, dict | None]:
    """A tool call's arguments as shown: a short object read with its keys (``_text``); one whose JSON runs past
    EVENT_CHARS (a `Write` of a 5 MB file) drawn a part of its JSON at a time like any long text, since reading every
    value of it for secrets took seconds and drew megabytes."""
    if isinstance(value, str):
        return _clip(value, **here)
    try:
        raw = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return _text(value), None
    if len(raw) <= EVENT_CHARS:
        return _text(value), None
    return _clip(raw, **here)


def _split_mark(text: str, mark: str) -> tuple[str, str, str] | None:
    """(before, match, after) around the first occurrence of an evidence excerpt, for <mark>; None if absent."""
    needle = (mark or "").strip().removesuffix("…").strip()[:MAX_MARK]
    if not needle:
        return None
    at = text.find(needle)
    if at < 0:
        return None
    return text[:at], text[at : at + len(needle)], text[at + len(needle) :]


KNOWN_EVENTS = frozenset({"message", "tool_call", "tool_result", "memory_write"})


def event_outline(events: list) -> list[dict]:
    """Each event's shape without its text: type, role, and for tool events the call they pair with and whether it
    failed. Cheap for any length, so the counts and the pairing cover the whole session while the text (redacted,
    the costly part) is made only for the events drawn (event_rows)."""
    calls: dict[str, dict] = {}
    outline = []
    for index, event in enumerate(events if isinstance(events, list) else []):
        if not isinstance(event, dict):
            outline.append({"index": index, "type": "unknown"})
            continue
        kind = event.get("type")
        item = {"index": index, "type": kind if kind in KNOWN_EVENTS else "unknown"}
        if kind == "tool_call":
            calls[str(event.get("id", ""))] = item
        elif kind == "tool_result":
            call = calls.get(str(event.get("call_id", "")))
            exit_code = event.get("exit_code")
            item["failed"] = bool(event.get("is_error")) or (isinstance(exit_code, int) and exit_code != 0)
            item["call"] = call
            if call is not None and item["failed"]:
                call["failed"] = True
        outline.append(item)
    return outline


def event_rows(
    events: list,
    outline: list[dict],
    start: int,
    end: int,
    *,
    mark_index: int | None = None,
    mark: str = "",
    at: int | None = None,
) -> list[dict]:
    """Plain rows for the template, for events start..end: tool results know their call, failures are flagged,
    notes marked; a long text is drawn a part at a time (``at``: where the marked event's part starts)."""
    rows = []
    for item in outline[start:end]:
        index = item["index"]
        event = events[index]
        if not isinstance(event, dict):
            rows.append({"index": index, "type": "unknown", "text": _text(event)})
            continue
        kind = event.get("type")
        row = {"index": index, "type": kind, "ts": event.get("ts") or ""}
        here = {"at": at, "mark": mark} if index == mark_index else {}
        if kind == "message":
            text, row["clip"] = _clip(event.get("content", ""), **here)
            row.update(role=event.get("role") or "?", text=text)
        elif kind == "tool_call":
            text, row["clip"] = _clip_arguments(event.get("arguments", {}), **here)
            row.update(name=_text(event.get("name", "?")), call_id=_text(event.get("id", "")))
            row.update(text=text, failed=item.get("failed", False))
        elif kind == "tool_result":
            call = item["call"]
            call_event = events[call["index"]] if call else {}
            text, row["clip"] = _clip(event.get("content", ""), **here)
            row.update(
                text=text,
                call_id=_text(event.get("call_id", "")),
                name=_text(call_event.get("name", "?")) if call else "",
                call_index=call["index"] if call else None,
                exit_code=event.get("exit_code"),
                failed=item["failed"],
            )
        elif kind == "memory_write":
            text, row["clip"] = _clip(event.get("content", ""), **here)
            row.update(text=text, store=_text(event.get("store") or ""))
        else:
            row.update(type="unknown", label=_text(kind), text=_text(event))
        if index == mark_index:
            row["marked"] = _split_mark(row.get("text", ""), mark)
            row["target"] = True
        rows.append(row)
    return rows


@login_required
@require_GET
def session_list(request):
    membership = current_team_or_404(request)
    sessions = AgentSession.objects.for_user(request.user, team=membership.team)
    agent = request.GET.get("agent") or ""
    outcome = request.GET.get("outcome") or ""
    q = (request.GET.get("q") or "").strip()[:200]
    if agent:
        sessions = sessions.filter(agent=agent)
    if outcome:
        sessions = sessions.filter(outcome=outcome)
    if q:
        # Found by its id (the external id an agent pushed, or a part of it).
        sessions = sessions.filter(external_id__icontains=q)
    # Newest first, in the order of the team's index (memory.models.NEWEST): the page reads its rows and stops.
    number = parse_int(request.GET.get("page") or "", minimum=1, maximum=10**6) or 1
    paginator = BoundedPaginator(sessions.only(*LIST_FIELDS).order_by(*NEWEST), PER_PAGE, page=number)
    page = paginator.get_page(request.GET.get("page"))
    return render(
        request,
        "memory/sessions.html",
        {
            "page": page,
            "agents": team_agents(membership.team_id),
            "agent": agent,
            "outcome": outcome,
            "q": q,
            "team": membership.team,
        },
    )


# Events drawn at a time: a 20,000-event session is 7 MB of HTML and seconds to render at once; a window of them
# is what a person reads, and an evidence link opens the window that holds its event.
EVENT_WINDOW = 1000


def event_window(total: int, start, mark_index: int | None) -> dict:
    """The window of events to draw: from ``start`` (?from=), else the one holding the marked event, else the first."""
    try:
        first = int(start)
    except (TypeError, ValueError):
        first = (mark_index // EVENT_WINDOW) * EVENT_WINDOW if mark_index is not None and mark_index >= 0 else 0
    first = max(0, min(first, max(0, total - 1)))
    end = min(total, first + EVENT_WINDOW)
    return {
        "start": first,
        "end": end,
        "total": total,
        "paged": total > EVENT_WINDOW,
        "previous": max(0, first - EVENT_WINDOW) if first > 0 else None,
        "next": end if end < total else None,
        "last": ((total - 1) // EVENT_WINDOW) * EVENT_WINDOW if total else 0,
    }


@login_required
@require_GET
def session_detail(request, pk: int):
    session = get_for_user(AgentSession.objects.all(), request.user, pk=pk)
    try:
        mark_index = int(request.GET.get("event", ""))
    except ValueError:
        mark_index = None
    outline = event_outline(session.events)
    window = event_window(len(outline), request.GET.get("from"), mark_index)
    rows = event_rows(
        session.events,
        outline,
        window["start"],
        window["end"],
        mark_index=mark_index,
        mark=request.GET.get("mark", ""),
        at=parse_int(request.GET.get("at") or "", minimum=0, maximum=10**9),
    )
    serves = list(
        ContextServe.objects.filter(team_id=session.team_id, session_external_id=session.external_id)
        .select_related("store")
        .order_by("created_at")[:20]
    )
    # Entry ids of the served versions that still exist in a team the person sees: the others are not linked.
    served_ids = {e.get("entry_id") for s in serves for e in (s.entries or []) if isinstance(e, dict)}
    linkable = set(
        MemoryEntry.objects.for_user(request.user)
        .filter(pk__in=[i for i in served_ids if isinstance(i, int)])
        .values_list("pk", flat=True)
    )
    learned = (
        MemoryVersion.objects.filter(session=session)
        .select_related("entry")
        .only("id", "number", "operation", "key", "created_at", "entry__id", "entry__key", "team")
        .order_by("-created_at")[:50]
    )
    tool_calls = sum(1 for r in outline if r["type"] == "tool_call")
    failures = sum(1 for r in outline if r["type"] == "tool_result" and r["failed"])
    notes = sum(1 for r in outline if r["type"] == "memory_write")
    return render(
        request,
        "memory/session.html",
        {
            "session": session,
            "team": session.team,
            "rows": rows,
            "window": window,
            "serves": serves,
            "linkable": linkable,
            "learned": list(learned),
            "summary": {"events": len(outline), "tool_calls": tool_calls, "failures": failures, "notes": notes},
            "metadata": _text(session.metadata) if session.metadata else "",
        },
    )
