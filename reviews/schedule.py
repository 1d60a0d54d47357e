"""Periodic dreams: Celery beat calls ``run_due`` every minute (settings.CELERY_BEAT_SCHEDULE).

A store's policy is due when its schedule is enabled and ``last_scheduled_at + schedule_minutes`` has passed (or
it never ran). The scan looks across teams through a database function that answers ids and times only (reviews
migration 0005: the application role cannot see every team); each start happens in its own team's scope. A due
policy is claimed with a compare-and-set on ``last_scheduled_at``, so two beats (or a beat that overlaps itself)
start one run, not two. A store whose previous run is still going is skipped this time, and
claimed again on a later tick.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from dreamweb import rls

from .dreams import start_run
from .models import AutonomyPolicy, DreamRun, Trigger

log = logging.getLogger(__name__)


def scheduled() -> list[tuple[int, int, int, datetime | None, int]]:
    """(policy id, team id, store id, last_scheduled_at, schedule_minutes) of every enabled schedule, across teams."""
    if not rls.is_postgres():
        return list(
            AutonomyPolicy.objects.filter(schedule_enabled=True).values_list(
                "pk", "team_id", "store_id", "last_scheduled_at", "schedule_minutes"
            )
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT policy, team, store, last_at, minutes FROM dreamweb_scheduled_policies()")
        return cursor.fetchall()


def due(now: datetime) -> list[tuple[int, int, int, datetime | None]]:
    """(policy id, team id, store id, last_scheduled_at) of every policy whose schedule is due, across teams."""
    return [
        (pk, team_id, store_id, last)
        for pk, team_id, store_id, last, minutes in scheduled()
        if last is None or last + timedelta(minutes=max(1, minutes)) <= now
    ]


def claim(policy_id: int, team_id: int, previous: datetime | None, now: datetime) -> bool:
    """Move last_scheduled_at from the value we read to now; False when another beat moved it first."""
    with rls.team_scope(team_id):
        rows = AutonomyPolicy.objects.filter(pk=policy_id)
        rows = (
            rows.filter(last_scheduled_at__isnull=True) if previous is None else rows.filter(last_scheduled_at=previous)
        )
        return rows.update(last_scheduled_at=now) == 1


def run_due(now: datetime | None = None) -> list[int]:
    """Start a scheduled run for every due store; returns the ids of the runs started."""
    now = now or timezone.now()
    started: list[int] = []
    for policy_id, team_id, store_id, previous in due(now):
        with rls.team_scope(team_id):
            if DreamRun.objects.going().filter(store_id=store_id).exists():
                log.info("scheduled dream of store %s skipped: a run is still going", store_id)
                continue
        if not claim(policy_id, team_id, previous, now):
            continue
        with rls.team_scope(team_id):
            policy = AutonomyPolicy.objects.select_related("store").get(pk=policy_id)
            try:
                run = start_run(policy.store, trigger=Trigger.SCHEDULE, analyzer=policy.analyzer or None)
            except Exception:  # noqa: BLE001 - one store's bad policy must not stop the other stores' dreams
                log.exception("scheduled dream of store %s could not start", store_id)
                continue
        started.append(run.pk)
    return started
