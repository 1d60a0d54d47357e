"""Celery tasks of the dream cycle. They take ids, never model instances; the work is in reviews/dreams/.

All are ``acks_late`` with ``reject_on_worker_lost``: a worker killed mid-task leaves its message to be delivered
again, and every step is idempotent (compare-and-set on the run's status and on each analysis row), so a
redelivery repeats at most some work and counts nothing twice. Only transient errors of the language model
(rate limit, timeout, connection) are retried, with exponential backoff and jitter; anything else fails the
session (analysis) or the run (finalize) with its error saved.
"""

from __future__ import annotations

import logging
import random
import time

from celery import shared_task
from django.conf import settings

from . import dreams, schedule

log = logging.getLogger(__name__)

TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True, "ignore_result": True}


def backoff(retries: int, *, base: float = 5.0, cap: float = 300.0) -> float:
    """Seconds before retry number ``retries + 1``: exponential, capped, with full jitter (so that workers that
    hit a rate limit together do not come back together)."""
    return random.uniform(0.5, 1.0) * min(cap, base * 2**retries)


@shared_task(**TASK_OPTIONS)
def dispatch_run(run_id: int) -> None:
    """Select the run's sessions and send their batches to the workers."""
    dreams.dispatch(run_id)


@shared_task(bind=True, max_retries=None, **TASK_OPTIONS)
def analyze_sessions(self, run_id: int, session_ids: list[int]) -> None:
    """Analyse one batch of a run's sessions (the pending ones; done ones are skipped)."""
    limit = int(getattr(settings, "DREAMWEB_ANALYSIS_MAX_RETRIES", 3))
    attempt = self.request.retries
    while True:
        try:
            dreams.analyze_batch(run_id, session_ids, final_attempt=attempt >= limit)
            return
        except dreams.RetryLater as exc:
            log.warning("dream #%s: %r; retry %s of %s", run_id, exc.error, attempt + 1, limit)
            if not self.request.is_eager:
                raise self.retry(exc=exc.error, countdown=backoff(attempt)) from exc
            # In-process (no broker) there is no queue to come back through: wait a little here and go again.
            time.sleep(backoff(attempt, base=0.2, cap=10.0))
            attempt += 1
        except Exception as exc:
            # Not a session's error (those are saved per session) but the batch's own, e.g. a result that cannot be
            # stored: its sessions fail with it, so the run still ends (partial) instead of waiting forever.
            log.exception("dream #%s: a batch of %s sessions failed", run_id, len(session_ids))
            dreams.fail_batch(run_id, session_ids, f"{type(exc).__name__}: {exc}")
            return


@shared_task(**TASK_OPTIONS)
def preview_run(run_id: int) -> None:
    """A recorded dry run (pages, API): the cycle without persisting it; the preview is written on the run row."""
    dreams.preview(run_id)


@shared_task(**TASK_OPTIONS)
def finalize_run(run_id: int) -> None:
    """Aggregate the run's findings, persist its proposals and apply the store's policy (once)."""
    dreams.finalize(run_id)


@shared_task(**TASK_OPTIONS)
def run_scheduled_dreams() -> list[int]:
    """Celery beat, every minute: start a run for each store whose schedule is due."""
    return schedule.run_due()
