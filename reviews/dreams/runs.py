"""Start a dream run and wait for it; a dry run (nothing persisted) and a recorded preview (the dry run's proposals
written on its run row)."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from dreamweb import rls
from memory.models import MemoryStore
from memory.services import memory_hash

from ..analysis import registry
from ..models import DreamRun, RunInputs, RunStatus, Trigger
from .finalizing import finalize
from .queue import TASK_OPTIONS, enqueue, run_info
from .selection import get_policy
from .steps import analyze_sessions, dispatch, dispatch_run

# One logger for the whole pipeline: `manage.py dream` shows its progress lines by attaching a handler to it.
log = logging.getLogger("reviews.dreams")


class RunInProgress(RuntimeError):
    """A run of this store is still going; start another when it has finished."""


# A run older than this that never finished (its worker died with the queue lost) no longer blocks new runs.
STALE_AFTER = timedelta(hours=2)


class QueueUnavailable(RuntimeError):
    """The task broker could not take the run: nothing was started (and no run row is left)."""


def _owner() -> dict:
    """The process that runs an in-process run (no broker): if it dies, nothing else ever finishes the run."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _owner_gone(run: DreamRun) -> bool:
    """Whether the run was running in a process of this machine that no longer exists (killed, crashed)."""
    owner = (run.options or {}).get("process")
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def _give_up(run: DreamRun) -> None:
    """Mark a run whose process died as failed, in words: its sessions are read again by the next run (a session
    is consumed only by a run that did not fail)."""
    owner = run.options.get("process") or {}
    DreamRun.objects.filter(pk=run.pk, status__in=RunStatus.going()).update(
        status=RunStatus.FAILED,
        finished_at=timezone.now(),
        error=(
            f"Stopped: the process that ran it (pid {owner.get('pid')} on {owner.get('host')}) ended before it "
            "finished. Its sessions are read again by the next dream."
        ),
    )


def start_run(
    store: MemoryStore,
    *,
    trigger: str = Trigger.COMMAND,
    user=None,
    dry_run: bool = False,
    all_sessions: bool = False,
    analyzer: str | None = None,
    max_sessions: int | None = None,
    agents: Sequence[str] | None = None,
    wait: bool = False,
    record: bool = True,
    on_progress: Callable[[DreamRun], None] | None = None,
    poll_seconds: float = 0.5,
) -> DreamRun:
    """Start a dream cycle over the store. The status row is written first; the work is enqueued when the
    transaction commits. With ``wait`` this returns when the run has finished (outside any transaction only).

    A dry run proposes without storing any proposal, analysis or policy: the cycle runs inside a transaction that
    is rolled back. With ``record`` (pages, API) a DreamRun row (dry_run=True) is kept to show the preview
    (``run.outcome.preview``) and the progress; without it (``manage.py dream --dry-run``) nothing at all is
    persisted: the cycle runs here, now, and the DreamRun returned is not saved (pk None) and carries the report
    as ``run.report`` (a dream-output.schema.json document).

    Raises RunInProgress when a (non-dry) run of the store is still going, UnknownAnalyzer (a ValueError) for an
    analyzer name that does not exist."""
    if dry_run and not record:
        return _dry_run(
            store,
            trigger=trigger,
            user=user,
            all_sessions=all_sessions,
            analyzer=analyzer,
            max_sessions=max_sessions,
            agents=agents,
        )
    if wait and connection.in_atomic_block:
        raise RuntimeError("start_run(wait=True) must be called outside a transaction: the run starts on commit")
    with rls.team_scope(store.team_id):
        if not dry_run:
            busy = (
                DreamRun.objects.going()
                .filter(store=store, dry_run=False, created_at__gte=timezone.now() - STALE_AFTER)
                .first()
            )
            if busy is not None and _owner_gone(busy):
                _give_up(busy)
                busy = None
            if busy is not None:
                raise RunInProgress(f"dream #{busy.pk} over {store.slug} is still {busy.status}")
        run = _create_run(store, trigger, user, dry_run, all_sessions, analyzer, max_sessions, agents)
        task = preview_run if dry_run else dispatch_run
        transaction.on_commit(lambda task=task, run=run: _enqueue_or_withdraw(task, run))
    if wait:
        run = wait_for(run, on_progress=on_progress, poll_seconds=poll_seconds)
    return run


class NotServed(ValueError):
    """A run asked for agents its store does not serve."""


def run_agents(store: MemoryStore, asked: Sequence[str] | None) -> list[str]:
    """The agents whose sessions a run reads: the store's agents (empty: all), narrowed to those asked for (the
    command's ``--agent``). Raises NotServed when asked only for agents the store does not serve."""
    served = list(store.agents or [])
    if not asked:
        return served
    asked = sorted(set(asked))
    if not served:
        return asked
    both = [a for a in asked if a in served]
    if not both:
        raise NotServed(f"store {store.slug} serves only {', '.join(served)}, not {', '.join(asked)}")
    return both


# Sessions per task when DREAMWEB_DREAM_BATCH_SIZE is not set. The rules analyzer takes about a millisecond of CPU a
# session, so a batch's own statements (the run's state, its analyses, the sessions, served texts, notes, the results,
# the done check: a dozen round trips, some 15 ms of worker and PostgreSQL CPU) and its message were a third of the
# work at 25 sessions: 100 cut the workers' CPU a session by about a quarter and PostgreSQL's by a fifth (10,000
# sessions: 100 tasks, not 400). A model takes seconds a session: its batches stay small, so a run spreads over the
# workers and a task stays well inside the broker's visibility timeout (a longer task would be delivered twice).
RULES_BATCH_SIZE = 100
MODEL_BATCH_SIZE = 25


def batch_size_for(label: str) -> int:
    """Sessions per batch for a run of this analyzer (DREAMWEB_DREAM_BATCH_SIZE, when set, for every analyzer)."""
    configured = int(getattr(settings, "DREAMWEB_DREAM_BATCH_SIZE", 0) or 0)
    if configured > 0:
        return configured
    return RULES_BATCH_SIZE if label == "rules" else MODEL_BATCH_SIZE


def _enqueue_or_withdraw(task, run: DreamRun) -> None:
    """Queue the run; if the broker cannot take it, the run row goes (it never started, and a queued row nobody will
    run would hold the store) and QueueUnavailable says why."""
    try:
        enqueue(task, run.pk)
    except Exception as exc:
        if task.app.conf.task_always_eager:
            raise  # in this process: the run's own failure, already recorded on its row
        with rls.team_scope(run.team_id):
            DreamRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).delete()
        raise QueueUnavailable(
            f"the task queue is not reachable ({type(exc).__name__}: {exc}); nothing was started. Check REDIS_URL "
            "and that Redis runs, or run without REDIS_URL to dream in this process."
        ) from exc


def _create_run(store, trigger, user, dry_run, all_sessions, analyzer, max_sessions, agents) -> DreamRun:
    policy = get_policy(store)
    label = registry.resolve(analyzer or policy.analyzer)
    inputs = RunInputs(
        max_sessions=int(max_sessions if max_sessions is not None else policy.max_sessions),
        agents=run_agents(store, agents),
        token_budget=int(policy.token_budget),
        batch_size=batch_size_for(label),
    )
    options = asdict(inputs)
    if settings.CELERY_TASK_ALWAYS_EAGER:  # in this process: no worker will ever pick it up if the process dies
        options["process"] = _owner()
    return DreamRun.objects.create(
        team_id=store.team_id,
        store=store,
        trigger=trigger,
        dry_run=dry_run,
        all_sessions=all_sessions,
        analyzer=label,
        memory_hash=memory_hash(store),
        options=options,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def wait_for(
    run: DreamRun,
    *,
    on_progress: Callable[[DreamRun], None] | None = None,
    poll_seconds: float = 0.5,
    timeout: float | None = None,
) -> DreamRun:
    """Poll the run row until it has finished; ``on_progress(run)`` whenever its progress changes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    seen = None
    while True:
        with rls.team_scope(run.team_id):
            run.refresh_from_db()
        state = (run.status, run.sessions_analysed, run.sessions_failed)
        if on_progress and state != seen:
            on_progress(run)
        seen = state
        if run.status in RunStatus.finished():
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"dream #{run.pk} still {run.status} after {timeout} s")
        time.sleep(poll_seconds)


def _dry_run(store, *, trigger, user, all_sessions, analyzer, max_sessions, agents) -> DreamRun:
    """The whole cycle in this process, inside a transaction that is rolled back: the same code as a real run,
    nothing persisted (no run row, no analyses, no policy row, no proposals)."""
    with transaction.atomic():
        with rls.team_scope(store.team_id):
            run = _create_run(store, trigger, user, True, all_sessions, analyzer, max_sessions, agents)
        for batch in dispatch(run.pk):
            analyze_sessions.apply(args=[run.pk, batch], throw=True)
        report = finalize(run.pk)
        with rls.team_scope(store.team_id):
            run.refresh_from_db()
        transaction.set_rollback(True)
    run.pk = run.id = None
    run.report = report
    return run


def preview(run_id: int) -> None:
    """A recorded dry run (pages, API): run the cycle without persisting it, then write what it would propose
    and its counts on the run row (queued → running → its final status)."""
    info = run_info(run_id)
    if info is None:
        log.warning("preview: dream run %s does not exist", run_id)
        return
    with rls.team_scope(info.team_id):
        if not DreamRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=timezone.now()
        ):
            return
        recorded = DreamRun.objects.select_related("store").get(pk=run_id)
    try:
        dry = _dry_run(
            recorded.store,
            trigger=recorded.trigger,
            user=None,
            all_sessions=recorded.all_sessions,
            analyzer=recorded.analyzer,
            max_sessions=recorded.inputs.max_sessions,
            agents=recorded.inputs.agents,
        )
    except Exception as exc:  # noqa: BLE001 - the preview fails with its error saved on the row
        log.exception("dry run #%s failed", run_id)
        with rls.team_scope(info.team_id):
            DreamRun.objects.filter(pk=run_id).update(
                status=RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:4000], finished_at=timezone.now()
            )
        return
    doc = dry.report or {}
    items = [
        {**p, "prevalence_sessions": p["prevalence"]["sessions"], "prevalence_of": p["prevalence"]["of"]}
        for p in doc.get("proposals", [])
    ]
    with rls.team_scope(info.team_id):
        DreamRun.objects.filter(pk=run_id).update(
            status=dry.status,
            error=dry.error,
            memory_hash=dry.memory_hash,
            sessions_selected=dry.sessions_selected,
            sessions_analysed=dry.sessions_analysed,
            sessions_failed=dry.sessions_failed,
            tokens_input=dry.tokens_input,
            tokens_output=dry.tokens_output,
            cost_usd=dry.cost_usd,
            proposals_count=len(items),
            isolated=list(doc.get("isolated") or []),
            options=recorded.with_outcome(replace(dry.outcome, preview=items)),
            finished_at=timezone.now(),
        )


@shared_task(name="reviews.tasks.preview_run", **TASK_OPTIONS)
def preview_run(run_id: int) -> None:
    """A recorded dry run (pages, API): the cycle without persisting it; the preview is written on the run row."""
    preview(run_id)
