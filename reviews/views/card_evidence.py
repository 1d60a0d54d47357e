"""The evidence a card shows, for a page of proposals, in three queries whatever the evidence rows per proposal.

A pattern seen in a thousand sessions has a thousand evidence rows; a card shows three representative sessions and
counts for the rest. So the database counts (distinct sessions and their time span, one grouped row per card) and
returns only each proposal's first ``CANDIDATE_ROWS`` rows in citation order, with the rows each of their sessions
has; the representatives are picked among those (reviews.evidence.representatives), and the sessions behind
"n more" are loaded when the toggle opens (``every=True``: the proposal's page and reviews:evidence).
"""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Count, F, Max, Min, Window
from django.db.models.functions import RowNumber

from memory.models import AgentSession

from .. import evidence
from ..models import Proposal, ProposalEvidence
from . import card_html

CANDIDATE_ROWS = evidence.CANDIDATE_ROWS  # rows per proposal among which a card picks its representative sessions

MORE_FIELDS = ("id", "team", "proposal", "session", "event_index", "excerpt", "trust")  # "n more" shows no context
SESSION_FIELDS = ("id", "team", "external_id", "agent", "task", "outcome", "started_at")
ROW_VALUES = ("id", "proposal_id", "session_id", "event_index", "excerpt", "trust", "context", "in_session")


def _viewer_url(base: str, ev: ProposalEvidence) -> str:
    """The session viewer at the evidence's event, with (the start of) its excerpt to highlight (see
    memory.views.sessions)."""
    query = urlencode({"event": ev.event_index, "mark": ev.excerpt[:40]})
    return f"{base.replace('/0/', f'/{ev.session_id}/')}?{query}#event-{ev.event_index}"


def _facets(group) -> tuple:
    """What makes sessions different for a reviewer: agent, task, outcome (reviews.evidence.representatives)."""
    session = group.first.session
    return (session.agent, session.task, session.outcome)


# A session's start read by its primary key for each evidence row (OFFSET 0 keeps the lateral subquery from being
# flattened into a join): the planner's own choice, a merge join, walked the whole primary key of the sessions table
# when its statistics of the evidence's session ids were older than the newest sessions (0.75 s at a million
# sessions, right after a dream cited new ones); this costs index lookups, as many as the page's evidence rows,
# whatever the table's size. Constant SQL; the ids are a parameter. Row-level security applies to both tables.
_FACTS_SQL = """SELECT e.proposal_id, COUNT(DISTINCT e.session_id), MIN(s.started_at), MAX(s.started_at)
FROM reviews_proposalevidence e
CROSS JOIN LATERAL (SELECT started_at FROM memory_agentsession WHERE id = e.session_id OFFSET 0) s
WHERE e.proposal_id = ANY(%s)
GROUP BY e.proposal_id
"""


def _facts(ids: list[int]) -> dict[int, evidence.EvidenceFacts]:
    """Distinct sessions and the span of their start times per proposal: one grouped row per card."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_FACTS_SQL, [list(ids)])
            return {pid: evidence.EvidenceFacts(n, first, last) for pid, n, first, last in cursor.fetchall()}
    rows = (
        ProposalEvidence.objects.filter(proposal_id__in=ids)
        .values("proposal_id")
        .annotate(
            n=Count("session_id", distinct=True), first=Min("session__started_at"), last=Max("session__started_at")
        )
        .order_by()
    )
    return {r["proposal_id"]: evidence.EvidenceFacts(r["n"], r["first"], r["last"]) for r in rows}


def _first_rows(ids: list[int]) -> list[SimpleNamespace]:
    """Each proposal's first CANDIDATE_ROWS rows by citation order, each with ``in_session`` (the rows its session
    has for the proposal), and their sessions (the card's columns only: a transcript can be megabytes). Plain values,
    not model instances: a page reads a few hundred and only prints them."""
    ranked = (
        ProposalEvidence.objects.filter(proposal_id__in=ids)
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("proposal_id")], order_by=F("id").asc()),
            in_session=Window(Count("id"), partition_by=[F("proposal_id"), F("session_id")]),
        )
        .filter(rank__lte=CANDIDATE_ROWS)
        .order_by("id")
        .values(*ROW_VALUES)
    )
    rows = [SimpleNamespace(**r) for r in ranked]
    sessions = AgentSession.objects.filter(pk__in={r.session_id for r in rows}).values(*SESSION_FIELDS)
    by_id = {s["id"]: SimpleNamespace(**s) for s in sessions}
    for row in rows:
        row.session = by_id.get(row.session_id)
    return [r for r in rows if r.session is not None]


def _groups(rows, session_base: str) -> list[evidence.SessionGroup]:
    for ev in rows:
        ev.viewer_url = _viewer_url(session_base, ev)
    return evidence.group_by_session(rows, lambda ev: ev.session_id)


def attach(proposals: list[Proposal], session_base: str, *, every: bool = False) -> None:
    """Set on each proposal ``card_facts``, ``card_session_count``, ``card_shown`` (the representative sessions),
    ``card_more_count`` and, with ``every``, ``card_more`` (the other sessions, each with its first row)."""
    ids = [p.pk for p in proposals if p.pk]
    facts = _facts(ids) if ids else {}
    by_proposal: dict[int, list] = {}
    for row in _first_rows(ids) if ids else []:
        by_proposal.setdefault(row.proposal_id, []).append(row)
    for p in proposals:
        groups = _groups(by_proposal.get(p.pk, []), session_base)
        for g in groups:
            g.count = g.first.in_session
        p.card_facts = facts.get(p.pk) or evidence.EvidenceFacts()
        p.card_session_count = p.card_facts.sessions
        p.card_shown = evidence.representatives(groups, _facets)
        p.card_shown_html = card_html.sessions(p.card_shown)
        p.card_more_count = max(p.card_session_count - len(p.card_shown), 0)
        p.card_more = []
    if every:
        _attach_more([p for p in proposals if p.card_more_count], session_base)


def _attach_more(proposals: list[Proposal], session_base: str) -> None:
    """The sessions behind "n more", in citation order, each with its first row and its number of rows."""
    if not proposals:
        return
    rows = (
        ProposalEvidence.objects.filter(proposal_id__in=[p.pk for p in proposals])
        .select_related("session")
        .only(*MORE_FIELDS, *(f"session__{f}" for f in SESSION_FIELDS))
        .order_by("id")
    )
    by_proposal: dict[int, list] = {}
    for row in rows:
        by_proposal.setdefault(row.proposal_id, []).append(row)
    for p in proposals:
        shown = {g.session_id for g in p.card_shown}
        groups = _groups(by_proposal.get(p.pk, []), session_base)
        p.card_more = [g for g in groups if g.session_id not in shown]
