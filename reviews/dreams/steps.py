"""The steps of a run before finalize, and their tasks: dispatch a run's batches, analyse a batch and save its
results, fail a batch, and enqueue finalize once nothing is pending. Each takes ids and is idempotent."""

from __future__ import annotations

import json
import logging
import sys
import time
from array import array
from collections.abc import Iterator, Sequence
from itertools import islice

from celery import shared_task
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from dreamweb import rls
from memory.models import AgentSession
from memory.sessions import session_document

from ..analysis import registry
from ..analysis.findings import stored_findings
from ..analysis.procedures import MAX_SESSION_STEPS, procedure_steps
from ..analysis.risk import scan_memo
from ..models import AnalysisStatus, DreamRun, RunStatus, SessionAnalysis
from .finalizing import finalize_run
from .queue import TASK_OPTIONS, backoff, enqueue, run_info
from .selection import delivered_notes, selected_sessions, served_texts

# One logger for the whole pipeline: `manage.py dream` shows its progress lines by attaching a handler to it.
log = logging.getLogger("reviews.dreams")
# The tasks' own lines (retries, a batch that failed as a whole) keep the logger of the workers' task module.
task_log = logging.getLogger("reviews.tasks")


# The analysis rows dispatch writes per statement (and holds as objects at once).
ANALYSIS_ROWS_CHUNK = 2000


class RetryLater(Exception):
    """A batch hit a transient error (rate limit, timeout, connection); the task retries it with backoff."""

    def __init__(self, error: Exception):
        self.error = error
        super().__init__(str(error))


def transient_errors() -> tuple[type[Exception], ...]:
    """The language model's transient errors. Only an analyzer that imported openai can raise them, so a rules-only
    worker does not pay the SDK's import time (seconds) for nothing."""
    sdk = sys.modules.get("openai")
    if sdk is None:
        return ()
    return (sdk.RateLimitError, sdk.APITimeoutError, sdk.APIConnectionError)


def dispatch(run_id: int) -> list[list[int]]:
    """Select the run's sessions (once: queued → running) and return the batches still to analyse. A real run
    sends them to the workers when this commits; a redelivered dispatch of a running run sends the pending ones
    again (analysis is idempotent, so at worst some work is repeated, never counted twice)."""
    started = _start(run_id)
    return [] if started is None else list(_batches(*started))


def _start(run_id: int) -> tuple[array, int] | None:
    """dispatch without its list of batches (the task's: nobody reads it there): the run's pending session ids and
    its batch size, the batches sent (or, without a broker, analysed) when this commits."""
    info = run_info(run_id)
    if info is None:
        log.warning("dispatch: dream run %s does not exist", run_id)
        return None
    with rls.team_scope(info.team_id):
        run = DreamRun.objects.select_related("store").get(pk=run_id)
        if run.status == RunStatus.QUEUED:
            if not _select(run, info.team_id):
                return None
        elif run.status != RunStatus.RUNNING:
            return None
        # One machine word per id, not a list of int objects: without a broker the whole run (finalize included)
        # runs inside this frame, from the commit below, and 100,000 ids as lists of ints held 8 MiB through it.
        pending = array(
            "q",
            SessionAnalysis.objects.filter(run_id=run_id, status=AnalysisStatus.PENDING)
            .order_by("id")
            .values_list("session_id", flat=True)
            .iterator(chunk_size=ANALYSIS_ROWS_CHUNK),
        )
        size = max(1, int(run.inputs.batch_size or 25))
        if not info.dry_run:
            transaction.on_commit(lambda: _fan_out(run_id, pending, size))
    return pending, size


def _select(run: DreamRun, team_id: int) -> bool:
    """Claim a queued run (queued → running) and write its pending analyses from the selection; False when another
    dispatch claimed it first. The claim comes first: a second dispatch waits on the run's row, then finds it
    running and selects nothing; the selection does not count the run's own analyses as consumed either way."""
    claimed = DreamRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return False
    selection = selected_sessions(
        run.store,
        limit=run.inputs.max_sessions,
        all_sessions=run.all_sessions,
        agents=run.inputs.agents,
        exclude_run_id=run.pk,
    )
    selected = _create_analyses(team_id, run.pk, selection)
    DreamRun.objects.filter(pk=run.pk).update(sessions_selected=selected)
    log.info("dream #%s: %s sessions selected", run.pk, selected)
    return True


def _batches(pending: array, size: int) -> Iterator[list[int]]:
    """The batches of the pending ids, each a list made when it is reached."""
    for start in range(0, len(pending), size):
        yield pending[start : start + size].tolist()


def _create_analyses(team_id: int, run_id: int, selection: QuerySet) -> int:
    """One pending analysis per selected session, in the selection's order (ids ascending: finalize reads them in
    that order); the number written. On PostgreSQL one INSERT … SELECT from the selection's own query, so the ids
    never come to Python (at 100,000 sessions the list of ids, the driver's result and the array parameter made of
    them were dispatch's peak): dispatch runs on one worker while the others wait for its messages, and bulk_create
    of 10,000 rows cost some 1.5 s of that worker's CPU (model instances, 50,000 parameters bound one by one)."""
    if connection.vendor != "postgresql":
        # A chunk of rows at a time: bulk_create holds every object it is given.
        written = 0
        ids = selection.iterator(chunk_size=ANALYSIS_ROWS_CHUNK)
        while chunk := list(islice(ids, ANALYSIS_ROWS_CHUNK)):
            SessionAnalysis.objects.bulk_create(
                [SessionAnalysis(team_id=team_id, run_id=run_id, session_id=i) for i in chunk], ignore_conflicts=True
            )
            written += len(chunk)
        return written
    try:
        select_sql, select_params = selection.query.sql_with_params()
    except EmptyResultSet:  # a selection that can match nothing
        return 0
    table = connection.ops.quote_name(SessionAnalysis._meta.db_table)
    # Every column with the model's default (they are Python-side defaults, not the database's); only the table
    # name and the selection's own SQL (Django's, its values parameters) are formatted in. ARRAY(subquery) keeps the
    # subquery's order, and ORDINALITY hands it on to the rows' ids.
    sql = (
        f"INSERT INTO {table} (team_id, run_id, session_id, status, findings, tokens_input, tokens_output, error, "  # noqa: S608
        f"created_at) SELECT %s, %s, s.id, %s, '[]'::jsonb, 0, 0, '', %s "
        f"FROM unnest(ARRAY({select_sql})) WITH ORDINALITY AS s(id, n) ORDER BY s.n ON CONFLICT DO NOTHING"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [team_id, run_id, AnalysisStatus.PENDING, timezone.now(), *select_params])
        return cursor.rowcount


def _fan_out(run_id: int, pending: array, size: int) -> None:
    if not pending:
        enqueue(finalize_run, run_id)
    elif analyze_sessions.app.conf.task_always_eager:
        for batch in _batches(pending, size):  # no broker: one after the other, here
            analyze_sessions.apply(args=[run_id, batch])
    else:
        # One message per batch over one producer (its connection taken once). The argument's repr is given, not
        # made: Celery otherwise writes a saferepr of every batch's ids into its message (a third of dispatch's
        # CPU for the messages, 100 of them at 10,000 sessions); a group added a group id and its bookkeeping per
        # message, which nothing here reads.
        with analyze_sessions.app.producer_or_acquire() as producer:
            for batch in _batches(pending, size):
                analyze_sessions.apply_async(
                    (run_id, batch), producer=producer, argsrepr=f"({run_id}, [{len(batch)} session ids])"
                )


@scan_memo()  # a batch redacts the same texts in many sessions (reviews.analysis.risk)
def analyze_batch(run_id: int, session_ids: Sequence[int], *, final_attempt: bool = True) -> None:
    """Analyse the batch's sessions that are still pending in this run. Each result is saved with a
    compare-and-set on the analysis row (pending → done/failed) and counted once. A transient error stops the
    batch and raises RetryLater (the rest stay pending) unless this is the final attempt, when the session fails
    with that error."""
    info = run_info(run_id)
    if info is None:
        log.warning("analyze: dream run %s does not exist", run_id)
        return
    if info.status != RunStatus.RUNNING:
        log.info("analyze: dream run %s is %s; nothing to do", run_id, info.status)
        return
    analyzer = registry.get(info.analyzer)
    with rls.team_scope(info.team_id):
        todo = _pending_of(run_id, session_ids)
        by_id = {s.pk: s for s in AgentSession.objects.filter(team_id=info.team_id, pk__in=list(todo))}
        served = served_texts(info.team_id, [s.external_id for s in by_id.values()])
        for external_id, notes in delivered_notes(info.team_id, by_id.values()).items():
            served.setdefault(external_id, []).extend(notes)
        spent = 0
        if analyzer.uses_tokens:
            row = DreamRun.objects.filter(pk=run_id).values_list("tokens_input", "tokens_output").first()
            spent = sum(row or (0, 0))
    budget = int(info.inputs.token_budget or 0)
    transient = transient_errors()
    results: list[dict] = []
    retry: Exception | None = None
    last_save = time.monotonic()
    for session_id in session_ids:
        session = by_id.get(session_id)
        if session_id not in todo or session is None:
            continue
        result = {"id": todo[session_id], "tokens_input": 0, "tokens_output": 0, "findings": [], "error": ""}
        if analyzer.uses_tokens and budget and spent >= budget:
            result.update(status=AnalysisStatus.FAILED, error=f"token budget spent ({spent} of {budget} tokens)")
        else:
            try:
                analysis = analyzer.analyze(session_document(session), served=served.get(session.external_id, ()))
            except transient as exc:
                if not final_attempt:
                    retry = exc
                    break
                result.update(status=AnalysisStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])
            except Exception as exc:  # noqa: BLE001 - one session's failure is recorded, the run goes on
                log.warning("dream #%s: analysis of session %s failed: %r", run_id, session.external_id, exc)
                result.update(
                    status=AnalysisStatus.FAILED,
                    error=f"{type(exc).__name__}: {exc}"[:2000],
                    tokens_input=int(getattr(exc, "tokens_input", 0) or 0),
                    tokens_output=int(getattr(exc, "tokens_output", 0) or 0),
                )
            else:
                result.update(
                    status=AnalysisStatus.DONE,
                    findings=stored_findings(analysis),
                    tokens_input=int(analysis.tokens_input or 0),
                    tokens_output=int(analysis.tokens_output or 0),
                    steps=_steps_of(session),
                )
        spent += result["tokens_input"] + result["tokens_output"]
        results.append(result)
        # A slow analyzer (a model) saves each result at once, so the page shows progress and a crash loses little.
        if time.monotonic() - last_save > 1.0:
            _save(run_id, info.team_id, results)
            results, last_save = [], time.monotonic()
    done = _save(run_id, info.team_id, results, check_done=retry is None and not info.dry_run)
    if retry is not None:
        raise RetryLater(retry)
    if done:
        enqueue(finalize_run, run_id)


def _steps_of(session: AgentSession) -> list[dict]:
    """The session's procedure steps, as finalize's recurring_procedures takes them (none for a failed or abandoned
    session: those do not count there)."""
    if session.outcome in ("failure", "abandoned"):
        return []
    return procedure_steps(session.events or [], session.metadata)[:MAX_SESSION_STEPS]


def _pending_of(run_id: int, session_ids: Sequence[int]) -> dict[int, int]:
    """{session id: analysis id} of these sessions' analyses still pending in the run (inside its team scope).
    Read by (run, session), the unique index, and the status checked here: with the status in the query the planner
    took the partial index of the run's pending analyses (reviews migration 0008), estimated small, and read every
    pending row of the run for each batch: quadratic in the run's size (30-50 ms a batch at 100,000 sessions)."""
    rows = SessionAnalysis.objects.filter(run_id=run_id, session_id__in=list(session_ids))
    return {
        sid: pk
        for sid, pk, status in rows.values_list("session_id", "id", "status")
        if status == AnalysisStatus.PENDING
    }


def _save(run_id: int, team_id: int, results: list[dict], *, check_done: bool = False) -> bool:
    """Write a batch's results to the analyses still pending, and count only those (compare-and-set per row: a
    redelivered copy of the batch running at the same time waits for the row lock, then finds the row done and
    writes and counts nothing).

    With ``check_done``: whether nothing of the run is pending any more, read in the same transaction after the
    counts (one transaction per batch, not two). Batches that changed something update the run's row, so they pass
    that point one at a time, each seeing the others' committed results: the last one sees the run done."""
    if not results and not check_done:
        return False
    now = timezone.now()
    with rls.team_scope(team_id):
        if not results:
            return _nothing_pending(run_id)
        changed = _update_pending(results, now)
        counts = {"done": 0, "failed": 0, "tokens_input": 0, "tokens_output": 0}
        for r in results:
            if r["id"] in changed:
                counts["done" if r["status"] == AnalysisStatus.DONE else "failed"] += 1
                counts["tokens_input"] += r["tokens_input"]
                counts["tokens_output"] += r["tokens_output"]
        if changed:
            DreamRun.objects.filter(pk=run_id).update(
                sessions_analysed=F("sessions_analysed") + counts["done"],
                sessions_failed=F("sessions_failed") + counts["failed"],
                tokens_input=F("tokens_input") + counts["tokens_input"],
                tokens_output=F("tokens_output") + counts["tokens_output"],
            )
        if log.isEnabledFor(logging.INFO):
            row = DreamRun.objects.filter(pk=run_id).values_list(
                "sessions_analysed", "sessions_failed", "sessions_selected"
            )
            for analysed, failed, selected in row:
                log.info("dream #%s: %s of %s sessions analysed, %s failed", run_id, analysed, selected, failed)
        return check_done and _nothing_pending(run_id)


def _nothing_pending(run_id: int) -> bool:
    """No analysis of the run is pending and the run still runs (inside the caller's team scope). The pending
    analyses are found through a partial index (reviews migration 0008), so this costs the same at 100,000
    sessions as at 100."""
    if SessionAnalysis.objects.filter(run_id=run_id, status=AnalysisStatus.PENDING).exists():
        return False
    return DreamRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists()


def _update_pending(results: list[dict], now) -> set[int]:
    """Set each result on its analysis row where the row is still pending; the ids of the rows changed."""
    if connection.vendor != "postgresql":
        changed = set()
        for r in results:
            if SessionAnalysis.objects.filter(pk=r["id"], status=AnalysisStatus.PENDING).update(
                status=r["status"],
                findings=r["findings"],
                tokens_input=r["tokens_input"],
                tokens_output=r["tokens_output"],
                error=r["error"],
                steps=r.get("steps"),
                finished_at=now,
            ):
                changed.add(r["id"])
        return changed
    # One statement for the whole batch on PostgreSQL (a batch's 25 single-row updates cost ten times more).
    table = connection.ops.quote_name(SessionAnalysis._meta.db_table)
    values = ", ".join(["(%s::bigint, %s, %s::jsonb, %s::integer, %s::integer, %s, %s::jsonb)"] * len(results))
    params: list = []
    for r in results:
        steps = None if r.get("steps") is None else json.dumps(r["steps"])  # None: SQL NULL, not JSON null
        params += [r["id"], r["status"], json.dumps(r["findings"]), r["tokens_input"], r["tokens_output"], r["error"]]
        params.append(steps)
    # Only the table name and placeholders are formatted in; every value is a parameter.
    sql = (
        f"UPDATE {table} AS a SET status = v.status, findings = v.findings, tokens_input = v.ti, "  # noqa: S608
        f"tokens_output = v.tout, error = v.error, steps = v.steps, finished_at = %s "
        f"FROM (VALUES {values}) AS v(id, status, findings, ti, tout, error, steps) "
        f"WHERE a.id = v.id AND a.status = %s RETURNING a.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, *params, AnalysisStatus.PENDING])
        return {row[0] for row in cursor.fetchall()}


def fail_batch(run_id: int, session_ids: Sequence[int], error: str) -> None:
    """Mark the batch's still-pending analyses failed with ``error`` and let the run go on to its end."""
    info = run_info(run_id)
    if info is None:
        return
    with rls.team_scope(info.team_id):
        ids = list(_pending_of(run_id, session_ids).values())
    results = [
        {"id": pk, "status": AnalysisStatus.FAILED, "findings": [], "tokens_input": 0, "tokens_output": 0}
        | {"error": error[:2000]}
        for pk in ids
    ]
    if _save(run_id, info.team_id, results, check_done=not info.dry_run):
        enqueue(finalize_run, run_id)


def maybe_finalize(run_id: int, team_id: int) -> bool:
    """Enqueue finalize_run once nothing is pending. Each batch checks after its own commit, so the last one to
    commit sees every other batch done; two that both see it enqueue two finalizes, and the compare-and-set in
    finalize lets one through."""
    with rls.team_scope(team_id):
        if not _nothing_pending(run_id):
            return False
    enqueue(finalize_run, run_id)
    return True


# --- the tasks that run these steps (registered as reviews.tasks.*; they take ids, never model instances) ----------


@shared_task(name="reviews.tasks.dispatch_run", **TASK_OPTIONS)
def dispatch_run(run_id: int) -> None:
    """Select the run's sessions and send their batches to the workers."""
    _start(run_id)


@shared_task(name="reviews.tasks.analyze_sessions", bind=True, max_retries=None, **TASK_OPTIONS)
def analyze_sessions(self, run_id: int, session_ids: list[int]) -> None:
    """Analyse one batch of a run's sessions (the pending ones; done ones are skipped)."""
    limit = int(getattr(settings, "DREAMWEB_ANALYSIS_MAX_RETRIES", 3))
    attempt = self.request.retries
    while True:
        try:
            analyze_batch(run_id, session_ids, final_attempt=attempt >= limit)
            return
        except RetryLater as exc:
            task_log.warning("dream #%s: %r; retry %s of %s", run_id, exc.error, attempt + 1, limit)
            if not self.request.is_eager:
                raise self.retry(exc=exc.error, countdown=backoff(attempt)) from exc
            # In-process (no broker) there is no queue to come back through: wait a little here and go again.
            time.sleep(backoff(attempt, base=0.2, cap=10.0))
            attempt += 1
        except (OperationalError, InterfaceError) as exc:
            # The database went away under the batch (a restart, a failover, a terminated backend): every step is
            # idempotent (a compare-and-set per analysis), so the batch is done again on a new connection, as often
            # as a transient error of the analyzer is retried; then its sessions fail as below.
            connection.close()
            if attempt >= limit:
                fail_batch(run_id, session_ids, f"{type(exc).__name__}: {exc}")
                return
            task_log.warning("dream #%s: database lost (%r); retry %s of %s", run_id, exc, attempt + 1, limit)
            if not self.request.is_eager:
                raise self.retry(exc=exc, countdown=backoff(attempt, base=1.0)) from exc
            time.sleep(backoff(attempt, base=0.2, cap=10.0))
            attempt += 1
        except Exception as exc:
            # Not a session's error (those are saved per session) but the batch's own, e.g. a result that cannot be
            # stored: its sessions fail with it, so the run still ends (partial) instead of waiting forever.
            task_log.exception("dream #%s: a batch of %s sessions failed", run_id, len(session_ids))
            fail_batch(run_id, session_ids, f"{type(exc).__name__}: {exc}")
            return
