"""Retention: the raw events of consumed sessions are dropped after DREAMWEB_SESSION_EVENTS_RETENTION_DAYS.

A session's events are the bulk of the store (kilobytes to megabytes each; the rest of its row is a few hundred
bytes). Once a dream cycle has read a session, what the review needs of it is kept elsewhere: each proposal's
evidence rows hold their excerpts (reviews.ProposalEvidence), and the session row itself stays (its id, agent, task,
outcome, times, metadata, event count and size), so sessions still count, link and list. Only ``events`` is
emptied, and ``events_pruned_at`` says when; so are the procedure steps its analyses kept of it (the commands its
tool calls ran, which only finalize reads).

A session's events are dropped when all of these hold:
* it was ingested more than the retention period ago (``ingested_at``);
* it is consumed: a non-dry-run cycle that finished with results (succeeded or partial) analysed it;
* no pending proposal quotes it (a reviewer may still open its transcript at the quoted event).
Unconsumed sessions are never touched, however old: no cycle has read them yet.

The beat runs ``prune`` daily (settings.CELERY_BEAT_SCHEDULE); ``manage.py prune_session_events`` runs it by hand.
Teams are found through a SECURITY DEFINER function that answers ids only (reviews migration 0010); each team is
pruned in its own row-level-security scope, in batches (one short transaction each).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from dreamweb import rls
from memory.models import AgentSession

from .models import AnalysisStatus, ProposalEvidence, ProposalStatus, RunStatus, SessionAnalysis

BATCH = 1000


def team_ids() -> list[int]:
    """Ids of the teams that have dream runs (only they can have consumed sessions), across teams."""
    if not rls.is_postgres():
        from .models import DreamRun

        return sorted(set(DreamRun.objects.values_list("team_id", flat=True)))
    with connection.cursor() as cursor:
        cursor.execute("SELECT team FROM dreamweb_dreaming_teams()")
        return [row[0] for row in cursor.fetchall()]


def prunable(team_id: int, cutoff: datetime):
    """The team's sessions whose events may be dropped now (see the module's docstring)."""
    consumed = SessionAnalysis.objects.filter(
        team_id=team_id,
        session_id=OuterRef("pk"),
        status=AnalysisStatus.DONE,
        run__dry_run=False,
        run__status__in=RunStatus.completed(),
    )
    quoted = ProposalEvidence.objects.filter(
        team_id=team_id, session_id=OuterRef("pk"), proposal__status=ProposalStatus.PENDING
    )
    return AgentSession.objects.filter(team_id=team_id, events_pruned_at__isnull=True, ingested_at__lt=cutoff).filter(
        Exists(consumed), ~Exists(quoted)
    )


def prune_team(team_id: int, *, days: int, now: datetime | None = None, dry_run: bool = False) -> int:
    """Drop the events of the team's prunable sessions; return how many sessions (would) lose them."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    total = 0
    with rls.team_scope(team_id):
        if dry_run:
            return prunable(team_id, cutoff).count()
        while True:
            with transaction.atomic():
                ids = list(prunable(team_id, cutoff).order_by("ingested_at").values_list("pk", flat=True)[:BATCH])
                if not ids:
                    break
                total += AgentSession.objects.filter(team_id=team_id, pk__in=ids, events_pruned_at__isnull=True).update(
                    events=[], events_pruned_at=now
                )
                # The commands each analysis kept of the transcript for its run's finalize go with the events.
                SessionAnalysis.objects.filter(team_id=team_id, session_id__in=ids).exclude(steps=None).update(
                    steps=None
                )
    return total


def prune(*, days: int | None = None, now: datetime | None = None, dry_run: bool = False) -> dict[int, int]:
    """Prune every team: {team id: sessions whose events were dropped}. ``days`` defaults to the setting; 0 (the
    setting's default) keeps every event."""
    days = settings.DREAMWEB_SESSION_EVENTS_RETENTION_DAYS if days is None else days
    if not days or days < 0:
        return {}
    return {team_id: prune_team(team_id, days=days, now=now, dry_run=dry_run) for team_id in team_ids()}
