"""The dream's side of the skills registry: what a dream cycle needs to propose skill changes.

Reads the team's published skills and the analysed sessions' events (for recurring procedures), then calls the
pure functions of skills_registry.proposals. Called by reviews.dreams inside the run's team scope; returns
ProposalDraft-shaped dicts (the dream assesses their risk, redacts them and stores them).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import F

from memory.models import AgentSession

from .proposals import group_findings, recurring_procedures, skill_drafts
from .services import skill_snapshots


def dream_skill_drafts(
    team_id: int,
    sessions: Sequence,
    *,
    sessions_analysed: int,
    min_sessions: int = 3,
    min_share: float = 0.0,
) -> list[dict]:
    """Skill proposals for one dream cycle. ``sessions``: the run's SessionFindings (session_id is the pk)."""
    skills = skill_snapshots(team_id)
    groups = group_findings(sessions)
    ids = [s.session_id for s in sessions]
    # Streamed in chunks; recurring_procedures keeps only each session's successful steps, not its events.
    rows = (
        AgentSession.objects.filter(team_id=team_id, pk__in=ids)
        .order_by("pk")
        .values("events", "outcome", "agent", "task", "external_id", session_id=F("pk"))
        .iterator(chunk_size=100)
    )
    procedures = recurring_procedures(
        rows, min_sessions=min_sessions, min_share=min_share, sessions_analysed=sessions_analysed
    )
    return skill_drafts(
        groups,
        skills,
        sessions_analysed=sessions_analysed,
        procedures=procedures,
        min_sessions=min_sessions,
        min_share=min_share,
    )
