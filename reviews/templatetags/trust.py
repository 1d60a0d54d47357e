"""What a proposal card says of its evidence's strength: the sessions behind it and their time span (over the
evidence the card has already loaded: no query)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django import template
from django.utils.timezone import localtime

register = template.Library()


@dataclass
class EvidenceFacts:
    excerpts: int
    sessions: int
    first: datetime | None
    last: datetime | None

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


@register.filter
def evidence_facts(proposal) -> EvidenceFacts:
    """Excerpts, distinct sessions and the span of their start times, from the proposal's (prefetched) evidence."""
    rows = list(proposal.evidence.all())
    sessions = {ev.session_id: ev.session for ev in rows}
    times = sorted(s.started_at for s in sessions.values() if s is not None and s.started_at)
    return EvidenceFacts(len(rows), len(sessions), times[0] if times else None, times[-1] if times else None)
