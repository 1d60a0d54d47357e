"""How the cycle's steps reach the workers: the options every task of the cycle shares, ``enqueue`` (in this
process when there is no broker), the retry delay, and ``run_info`` (a run's team and state, looked up across teams
before a step works inside that team's scope).

Each task sits next to the step it runs (steps.py, finalizing.py, runs.py) under a ``reviews.tasks.*`` name, so a
step enqueues the next one by importing it from the module below it: runs → steps → finalizing, no cycle.
reviews/tasks.py lists them all for Celery.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.db import connection

from dreamweb import rls

from ..models import DreamRun, RunInputs, typed_options

# acks_late + reject_on_worker_lost: a worker killed mid-task leaves its message to be delivered again; every step
# is idempotent, so a redelivery repeats at most some work and counts nothing twice.
TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True, "ignore_result": True}


def enqueue(task, *args) -> None:
    """task.delay, or without a broker task.apply: the same code in this process (and no broker connection made)."""
    if task.app.conf.task_always_eager:
        task.apply(args=args)
    else:
        task.delay(*args)


def backoff(retries: int, *, base: float = 5.0, cap: float = 300.0) -> float:
    """Seconds before retry number ``retries + 1``: exponential, capped, with full jitter (so that workers that
    hit a rate limit together do not come back together)."""
    return random.uniform(0.5, 1.0) * min(cap, base * 2**retries)


@dataclass
class RunInfo:
    team_id: int
    status: str
    analyzer: str
    dry_run: bool
    inputs: RunInputs


def run_team_id(run_id: int) -> int | None:
    """The team of a dream run: a task gets only the run's id, and the database answers this one question across
    teams with the team's id (reviews migration 0005)."""
    if not rls.is_postgres():
        return DreamRun.objects.filter(pk=run_id).values_list("team_id", flat=True).first()
    with connection.cursor() as cursor:
        cursor.execute("SELECT dreamweb_run_team(%s)", [run_id])
        return cursor.fetchone()[0]


def run_info(run_id: int) -> RunInfo | None:
    # Everything, the run's own row included, is read inside the run's team's scope.
    team_id = run_team_id(run_id)
    if team_id is None:
        return None
    with rls.team_scope(team_id):
        row = (
            DreamRun.objects.filter(pk=run_id)
            .values_list("team_id", "status", "analyzer", "dry_run", "options")
            .first()
        )
    if row is None:
        return None
    team_id, status, analyzer, dry_run, options = row
    return RunInfo(team_id, status, analyzer, dry_run, typed_options(RunInputs, options))
