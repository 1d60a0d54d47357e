"""The Celery tasks of the dream cycle, as the workers know them (``reviews.tasks.*``). They take ids, never model
instances; each sits next to the step it runs, in reviews/dreams/ (see reviews/dreams/queue.py), and is listed here
for Celery's autodiscovery.

All are ``acks_late`` with ``reject_on_worker_lost``: a worker killed mid-task leaves its message to be delivered
again, and every step is idempotent (compare-and-set on the run's status and on each analysis row), so a
redelivery repeats at most some work and counts nothing twice. Only transient errors of the language model
(rate limit, timeout, connection) are retried, with exponential backoff and jitter; anything else fails the
session (analysis) or the run (finalize) with its error saved.
"""

from __future__ import annotations

from celery import shared_task

from . import retention, schedule
from .dreams.finalizing import finalize_run
from .dreams.queue import TASK_OPTIONS
from .dreams.runs import preview_run
from .dreams.steps import analyze_sessions, dispatch_run

__all__ = [
    "analyze_sessions",
    "dispatch_run",
    "finalize_run",
    "preview_run",
    "prune_session_events",
    "run_scheduled_dreams",
]


@shared_task(**TASK_OPTIONS)
def run_scheduled_dreams() -> list[int]:
    """Celery beat, every minute: start a run for each store whose schedule is due."""
    return schedule.run_due()


@shared_task(**TASK_OPTIONS)
def prune_session_events() -> int:
    """Celery beat, daily: drop the raw events of consumed sessions past the retention period (reviews.retention);
    a no-op while DREAMWEB_SESSION_EVENTS_RETENTION_DAYS is 0."""
    return sum(retention.prune().values())
