"""The skill proposals of a run: the team's published skills and the run's sessions, through the pure functions of
reviews.analysis.skills and reviews.analysis.procedures, risk-assessed and redacted like the memory drafts.

Two signals: an update of the skill whose domain a recurring lesson belongs to, and a new skill for a recurring
procedure no skill covers. They are never auto-applied: reviews.services.policy_allows refuses target_kind "skill"
whatever the policy (skills are promoted by people).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import F

from memory.models import AgentSession

from ..analysis.findings import ProposalDraft, SessionFindings, count_sources
from ..analysis.procedures import recurring_procedures
from ..analysis.risk import assess, redact_draft
from ..analysis.skills import group_findings, skill_drafts
from ..models import AnalysisStatus, AutonomyPolicy, DreamRun, SessionAnalysis


def run_procedures(run: DreamRun, policy: AutonomyPolicy, *, analysed: int) -> list[dict]:
    """The recurring procedures of the run's analysed sessions (``analysed``: how many), in the sessions' order.
    Each analysis carries its session's procedure steps (found by its batch, in parallel on the workers): read
    those, not every transcript again on the one worker that finalizes (at 10,000 sessions 13 MB of events, a third
    of finalize's time). A run with an analysis without them (analysed before they were kept) streams the events,
    by a join on the run's analyses (not a list of its 100,000 ids)."""
    done = SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.DONE)
    if done.filter(steps__isnull=True).exists():
        rows = (
            AgentSession.objects.filter(team_id=run.team_id, analyses__run=run, analyses__status=AnalysisStatus.DONE)
            .order_by("pk")
            .values("events", "outcome", "agent", "task", "external_id", session_id=F("pk"))
            .iterator(chunk_size=100)
        )
    else:
        rows = (
            done.order_by("session_id")
            .values(
                "steps",
                "session_id",
                outcome=F("session__outcome"),
                agent=F("session__agent"),
                task=F("session__task"),
                external_id=F("session__external_id"),
            )
            .iterator(chunk_size=2000)
        )
    return recurring_procedures(
        rows, min_sessions=policy.min_sessions, min_share=policy.min_share, sessions_analysed=analysed
    )


def skill_proposals(
    run: DreamRun,
    sessions: Sequence,
    policy: AutonomyPolicy,
    skills: Sequence[dict],
    *,
    analysed: int | None = None,
    procedures: list[dict] | None = None,
    groups: list[dict] | None = None,
) -> list[ProposalDraft]:
    """Skill drafts for one run (call inside its team scope). ``sessions``: the run's SessionFindings (session_id
    is the pk), every analysed session, or with ``analysed`` (how many the run analysed) only those with findings.
    ``skills``: the team's published skills (skill_snapshots). ``procedures``: run_procedures of the run, read here
    when not given. ``groups``: group_findings of the sessions, made as finalize read them; ``sessions`` is then
    empty and the sessions the drafts quote are read back."""
    if analysed is None:
        analysed = len(sessions)
    if procedures is None:
        procedures = run_procedures(run, policy, analysed=analysed)
    if groups is None:
        groups = group_findings(sessions)
    drafts = [
        ProposalDraft(**fields)
        for fields in skill_drafts(
            groups,
            skills,
            sessions_analysed=analysed,
            procedures=procedures,
            min_sessions=policy.min_sessions,
            min_share=policy.min_share,
        )
    ]
    # Only the sessions the drafts quote (a few per draft), not a dictionary of every session with findings.
    wanted = {e.get("session_id") for draft in drafts for e in draft.evidence}
    by_id = {s.session_id: s for s in sessions if s.session_id in wanted}
    for draft in drafts:
        supporting = {e.get("session_id") for e in draft.evidence}
        draft.prevalence_sources, draft.prevalence_agents = count_sources(_supporting(run, supporting, by_id))
        allowed = list(run.team.allowed_hosts or [])
        draft.risk, draft.risk_reasons = assess(draft, store_kind=run.store.kind, allowed_hosts=allowed)
        redact_draft(draft)
    return drafts


def _supporting(run: DreamRun, ids: set, by_id: dict) -> list:
    """The run's analysed sessions among ``ids``: those with findings as given, the others (a procedure's sessions
    need no finding, and finalize gives none) read back as their agent and source only, a chunk of ids at a time."""
    found = [by_id[i] for i in ids if i in by_id]
    rest = sorted(i for i in ids if i not in by_id and isinstance(i, int))
    for start in range(0, len(rest), 2000):
        rows = AgentSession.objects.filter(
            team_id=run.team_id,
            pk__in=rest[start : start + 2000],
            analyses__run=run,
            analyses__status=AnalysisStatus.DONE,
        ).values_list("pk", "external_id", "agent", "source")
        found += [SessionFindings(pk, eid, agent, None, (), source=source or "") for pk, eid, agent, source in rows]
    return found
