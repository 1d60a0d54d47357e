"""The dream cycle: start a run, select its sessions, analyse them in batches, aggregate, persist, apply the policy.

    start_run ── status row (queued), memory hash M_t ── on commit ──▶ tasks.dispatch_run(run_id)
    dispatch  ── selection (trusted layer: the store's team, agents, not yet consumed, newest first, capped)
                 one pending SessionAnalysis per session, status running ──▶ group of analyze_sessions(run_id, ids)
    analyze   ── per batch: each pending analysis → done (findings) or failed (error), compare-and-set per row,
                 progress with F() increments; the batch that leaves nothing pending enqueues finalize_run
    finalize  ── compare-and-set running → aggregating (so it runs once), aggregate the findings against the
                 memory and the skills, persist proposals and evidence, apply the autonomy policy, status

Every step takes ids and is idempotent, so a redelivered task (acks_late, a worker killed mid-batch) adds nothing
twice. Every step looks up the run's team in the system scope first and then works inside that team's scope
(row-level security on PostgreSQL). Without REDIS_URL the tasks run eagerly: the same code, in-process.

A dry run persists nothing: the whole cycle runs in this process inside a transaction that is rolled back, and
every proposal it reports has status ``preview``.

Deduplication (docs/dream-pipeline.md): a draft whose signature already waits in this store (pending or
quarantined) is not stored again and the waiting proposal is left as it is (a reviewer may be reading it); the
run lists it among its proposals. A draft whose signature was rejected is dropped unless its prevalence (sessions)
is now higher than at the rejection. Proposals whose risk reasons say poisoning (remote code, sending credentials
or data away, a secret) are stored as ``quarantined``: never applied and never in the review queue, whatever the
policy, but kept with their evidence for the record.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from dreamweb import rls
from memory.models import AgentSession, ContextServe, EntryStatus, MemoryEntry, MemoryStore, MemoryVersion
from memory.services import Author, memory_hash
from memory.sessions import session_document

from .analysis import registry
from .analysis.risk import is_poisoned
from .models import (
    AnalysisStatus,
    AutonomyPolicy,
    DreamRun,
    PolicyMode,
    Proposal,
    ProposalEvidence,
    ProposalStatus,
    RunStatus,
    SessionAnalysis,
    Trigger,
)

log = logging.getLogger("reviews.dreams")

FINISHED = (RunStatus.SUCCEEDED, RunStatus.PARTIAL, RunStatus.FAILED)
# Proposals that already wait for someone (or for nobody: quarantined): a new draft with the same signature is not
# stored twice.
WAITING = (ProposalStatus.PENDING, ProposalStatus.APPLYING, ProposalStatus.QUARANTINED)
# Risk reasons (reviews.analysis.risk) that mean poisoning rather than merely "a person should look".


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


# --- policy and selection ----------------------------------------------------------------------------------------


def get_policy(store: MemoryStore) -> AutonomyPolicy:
    """The store's autonomy policy; a default (manual) one is created on first use."""
    policy, _ = AutonomyPolicy.objects.get_or_create(store=store, defaults={"team_id": store.team_id})
    return policy


def select_sessions(
    store: MemoryStore,
    *,
    limit: int,
    all_sessions: bool = False,
    agents: Sequence[str] = (),
    exclude_run_id: int | None = None,
) -> list[int]:
    """Ids of the sessions a cycle over this store reads: only the store's team's sessions (optionally only these
    agents), not consumed by an earlier non-dry-run cycle of this store unless ``all_sessions``, newest first, at
    most ``limit``. A session is consumed when a cycle that did not fail analysed it (or is analysing it now); a
    session whose analysis failed is read again next time."""
    sessions = AgentSession.objects.filter(team_id=store.team_id)
    if agents:
        sessions = sessions.filter(agent__in=list(agents))
    if not all_sessions:
        consumed = SessionAnalysis.objects.filter(team_id=store.team_id, run__store=store, run__dry_run=False).filter(
            Q(status=AnalysisStatus.DONE, run__status__in=[*FINISHED[:2], RunStatus.RUNNING, RunStatus.AGGREGATING])
            | Q(status=AnalysisStatus.PENDING, run__status=RunStatus.RUNNING)
        )
        if exclude_run_id is not None:
            consumed = consumed.exclude(run_id=exclude_run_id)
        sessions = sessions.exclude(pk__in=consumed.values("session_id"))
    ordered = sessions.order_by(F("started_at").desc(nulls_last=True), "-id")
    return list(ordered.values_list("pk", flat=True)[: max(0, int(limit))])


def served_texts(team_id: int, external_ids: Iterable[str]) -> dict[str, list[str]]:
    """The texts Dreamweb itself served into each session (memory entry versions and skills), by external id:
    the analyzers do not count them as new evidence (dreams do not eat dreams)."""
    serves = list(
        ContextServe.objects.filter(team_id=team_id, session_external_id__in=list(external_ids)).values_list(
            "session_external_id", "entries", "skills"
        )
    )
    if not serves:
        return {}
    entry_ids = {int(e["entry_id"]) for _, entries, _ in serves for e in entries or [] if e.get("entry_id")}
    versions = {
        (entry_id, number): content
        for entry_id, number, content in MemoryVersion.objects.filter(
            team_id=team_id, entry_id__in=entry_ids
        ).values_list("entry_id", "number", "content")
    }
    current = dict(MemoryEntry.objects.filter(team_id=team_id, pk__in=entry_ids).values_list("pk", "content"))
    skill_names = {s["name"] for _, _, skills in serves for s in skills or [] if s.get("name")}
    skill_texts: dict[str, str] = {}
    if skill_names:
        from skills_registry.models import Skill

        for name, description, body in Skill.objects.filter(team_id=team_id, name__in=skill_names).values_list(
            "name", "description", "body"
        ):
            skill_texts[name] = f"{description}\n{body}"
    out: dict[str, list[str]] = {}
    for external_id, entries, skills in serves:
        texts = out.setdefault(external_id, [])
        for e in entries or []:
            entry_id = int(e.get("entry_id") or 0)
            text = versions.get((entry_id, e.get("version"))) or current.get(entry_id)
            if text:
                texts.append(text)
        texts += [skill_texts[s["name"]] for s in skills or [] if s.get("name") in skill_texts]
    return out


# --- start and wait ----------------------------------------------------------------------------------------------


class RunInProgress(RuntimeError):
    """A run of this store is still going; start another when it has finished."""


# A run older than this that never finished (its worker died with the queue lost) no longer blocks new runs.
STALE_AFTER = timedelta(hours=2)


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
    (``options["preview"]``) and the progress; without it (``manage.py dream --dry-run``) nothing at all is
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
    from . import tasks

    with rls.team_scope(store.team_id):
        if not dry_run:
            busy = DreamRun.objects.filter(
                store=store,
                dry_run=False,
                status__in=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AGGREGATING],
                created_at__gte=timezone.now() - STALE_AFTER,
            ).first()
            if busy is not None:
                raise RunInProgress(f"dream #{busy.pk} over {store.slug} is still {busy.status}")
        run = _create_run(store, trigger, user, dry_run, all_sessions, analyzer, max_sessions, agents)
        run_id = run.pk
        task = tasks.preview_run if dry_run else tasks.dispatch_run
        transaction.on_commit(lambda: _enqueue(task, run_id))
    if wait:
        run = wait_for(run, on_progress=on_progress, poll_seconds=poll_seconds)
    return run


def _create_run(store, trigger, user, dry_run, all_sessions, analyzer, max_sessions, agents) -> DreamRun:
    policy = get_policy(store)
    label = registry.resolve(analyzer or policy.analyzer)
    options = {
        "max_sessions": int(max_sessions if max_sessions is not None else policy.max_sessions),
        "agents": list(agents if agents is not None else (policy.agents or [])),
        "token_budget": int(policy.token_budget),
        "batch_size": int(getattr(settings, "DREAMWEB_DREAM_BATCH_SIZE", 25)),
    }
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
        if run.status in FINISHED:
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"dream #{run.pk} still {run.status} after {timeout} s")
        time.sleep(poll_seconds)


def _dry_run(store, *, trigger, user, all_sessions, analyzer, max_sessions, agents) -> DreamRun:
    """The whole cycle in this process, inside a transaction that is rolled back: the same code as a real run,
    nothing persisted (no run row, no analyses, no policy row, no proposals)."""
    from . import tasks

    with transaction.atomic():
        with rls.team_scope(store.team_id):
            run = _create_run(store, trigger, user, True, all_sessions, analyzer, max_sessions, agents)
        for batch in dispatch(run.pk):
            tasks.analyze_sessions.apply(args=[run.pk, batch], throw=True)
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
    info = _info(run_id)
    if info is None:
        log.warning("preview: dream run %s does not exist", run_id)
        return
    with rls.team_scope(info.team_id):
        if not DreamRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=timezone.now()
        ):
            return
        recorded = DreamRun.objects.select_related("store").get(pk=run_id)
    opts = recorded.options or {}
    try:
        dry = _dry_run(
            recorded.store,
            trigger=recorded.trigger,
            user=None,
            all_sessions=recorded.all_sessions,
            analyzer=recorded.analyzer,
            max_sessions=opts.get("max_sessions"),
            agents=opts.get("agents"),
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
            options={**opts, **(dry.options or {}), "preview": items},
            finished_at=timezone.now(),
        )


# --- the steps the tasks run -------------------------------------------------------------------------------------


@dataclass
class _RunInfo:
    team_id: int
    status: str
    analyzer: str
    dry_run: bool
    options: dict


def _info(run_id: int) -> _RunInfo | None:
    # The run's team is looked up across teams (trusted code); everything else happens inside that team's scope.
    with rls.system_scope():
        row = (
            DreamRun.objects.filter(pk=run_id)
            .values_list("team_id", "status", "analyzer", "dry_run", "options")
            .first()
        )
    return _RunInfo(*row) if row else None


def dispatch(run_id: int) -> list[list[int]]:
    """Select the run's sessions (once: queued → running) and return the batches still to analyse. A real run
    sends them to the workers when this commits; a redelivered dispatch of a running run sends the pending ones
    again (analysis is idempotent, so at worst some work is repeated, never counted twice)."""
    info = _info(run_id)
    if info is None:
        log.warning("dispatch: dream run %s does not exist", run_id)
        return []
    with rls.team_scope(info.team_id):
        run = DreamRun.objects.select_related("store").get(pk=run_id)
        if run.status == RunStatus.QUEUED:
            ids = select_sessions(
                run.store,
                limit=run.options.get("max_sessions", 1000),
                all_sessions=run.all_sessions,
                agents=run.options.get("agents") or (),
                exclude_run_id=run.pk,
            )
            claimed = DreamRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
                status=RunStatus.RUNNING, sessions_selected=len(ids), started_at=timezone.now()
            )
            if not claimed:
                return []
            SessionAnalysis.objects.bulk_create(
                [SessionAnalysis(team_id=info.team_id, run_id=run_id, session_id=i) for i in ids],
                batch_size=2000,
                ignore_conflicts=True,
            )
            log.info("dream #%s: %s sessions selected", run_id, len(ids))
        elif run.status != RunStatus.RUNNING:
            return []
        pending = list(
            SessionAnalysis.objects.filter(run_id=run_id, status=AnalysisStatus.PENDING)
            .order_by("id")
            .values_list("session_id", flat=True)
        )
        size = max(1, int(run.options.get("batch_size") or 25))
        batches = [pending[i : i + size] for i in range(0, len(pending), size)]
        if not info.dry_run:
            transaction.on_commit(lambda: _fan_out(run_id, batches))
    return batches


def _enqueue(task, *args) -> None:
    """task.delay, or without a broker task.apply: the same code in this process (and no broker connection made)."""
    if task.app.conf.task_always_eager:
        task.apply(args=args)
    else:
        task.delay(*args)


def _fan_out(run_id: int, batches: list[list[int]]) -> None:
    from celery import group

    from . import tasks

    if not batches:
        _enqueue(tasks.finalize_run, run_id)
    elif tasks.analyze_sessions.app.conf.task_always_eager:
        for batch in batches:  # no broker: one after the other, here
            tasks.analyze_sessions.apply(args=[run_id, batch])
    else:
        group(tasks.analyze_sessions.si(run_id, batch) for batch in batches).apply_async()


def analyze_batch(run_id: int, session_ids: Sequence[int], *, final_attempt: bool = True) -> None:
    """Analyse the batch's sessions that are still pending in this run. Each result is saved with a
    compare-and-set on the analysis row (pending → done/failed) and counted once. A transient error stops the
    batch and raises RetryLater (the rest stay pending) unless this is the final attempt, when the session fails
    with that error."""
    info = _info(run_id)
    if info is None:
        log.warning("analyze: dream run %s does not exist", run_id)
        return
    if info.status != RunStatus.RUNNING:
        log.info("analyze: dream run %s is %s; nothing to do", run_id, info.status)
        return
    analyzer = registry.get(info.analyzer)
    with rls.team_scope(info.team_id):
        todo = dict(
            SessionAnalysis.objects.filter(
                run_id=run_id, session_id__in=list(session_ids), status=AnalysisStatus.PENDING
            ).values_list("session_id", "id")
        )
        by_id = {s.pk: s for s in AgentSession.objects.filter(team_id=info.team_id, pk__in=list(todo))}
        served = served_texts(info.team_id, [s.external_id for s in by_id.values()])
        spent = 0
        if analyzer.uses_tokens:
            row = DreamRun.objects.filter(pk=run_id).values_list("tokens_input", "tokens_output").first()
            spent = sum(row or (0, 0))
    budget = int(info.options.get("token_budget") or 0)
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
                    findings=list(analysis.findings),
                    tokens_input=int(analysis.tokens_input or 0),
                    tokens_output=int(analysis.tokens_output or 0),
                )
        spent += result["tokens_input"] + result["tokens_output"]
        results.append(result)
        # A slow analyzer (a model) saves each result at once, so the page shows progress and a crash loses little.
        if time.monotonic() - last_save > 1.0:
            _save(run_id, info.team_id, results)
            results, last_save = [], time.monotonic()
    _save(run_id, info.team_id, results)
    if retry is not None:
        raise RetryLater(retry)
    if not info.dry_run:
        maybe_finalize(run_id, info.team_id)


def _save(run_id: int, team_id: int, results: list[dict]) -> None:
    """Write a batch's results to the analyses still pending, and count only those (compare-and-set per row: a
    redelivered copy of the batch running at the same time waits for the row lock, then finds the row done and
    writes and counts nothing)."""
    if not results:
        return
    now = timezone.now()
    with rls.team_scope(team_id):
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
                finished_at=now,
            ):
                changed.add(r["id"])
        return changed
    # One statement for the whole batch on PostgreSQL (a batch's 25 single-row updates cost ten times more).
    table = connection.ops.quote_name(SessionAnalysis._meta.db_table)
    values = ", ".join(["(%s::bigint, %s, %s::jsonb, %s::integer, %s::integer, %s)"] * len(results))
    params: list = []
    for r in results:
        params += [r["id"], r["status"], json.dumps(r["findings"]), r["tokens_input"], r["tokens_output"], r["error"]]
    # Only the table name and placeholders are formatted in; every value is a parameter.
    sql = (
        f"UPDATE {table} AS a SET status = v.status, findings = v.findings, tokens_input = v.ti, "  # noqa: S608
        f"tokens_output = v.tout, error = v.error, finished_at = %s "
        f"FROM (VALUES {values}) AS v(id, status, findings, ti, tout, error) "
        f"WHERE a.id = v.id AND a.status = %s RETURNING a.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, *params, AnalysisStatus.PENDING])
        return {row[0] for row in cursor.fetchall()}


def fail_batch(run_id: int, session_ids: Sequence[int], error: str) -> None:
    """Mark the batch's still-pending analyses failed with ``error`` and let the run go on to its end."""
    info = _info(run_id)
    if info is None:
        return
    with rls.team_scope(info.team_id):
        ids = list(
            SessionAnalysis.objects.filter(
                run_id=run_id, session_id__in=list(session_ids), status=AnalysisStatus.PENDING
            ).values_list("pk", flat=True)
        )
    results = [
        {"id": pk, "status": AnalysisStatus.FAILED, "findings": [], "tokens_input": 0, "tokens_output": 0}
        | {"error": error[:2000]}
        for pk in ids
    ]
    _save(run_id, info.team_id, results)
    if not info.dry_run:
        maybe_finalize(run_id, info.team_id)


def maybe_finalize(run_id: int, team_id: int) -> bool:
    """Enqueue finalize_run once nothing is pending. Each batch checks after its own commit, so the last one to
    commit sees every other batch done; two that both see it enqueue two finalizes, and the compare-and-set in
    finalize lets one through."""
    from . import tasks

    with rls.team_scope(team_id):
        if SessionAnalysis.objects.filter(run_id=run_id, status=AnalysisStatus.PENDING).exists():
            return False
        if not DreamRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists():
            return False
    _enqueue(tasks.finalize_run, run_id)
    return True


# --- finalize ----------------------------------------------------------------------------------------------------


def _session_findings(run: DreamRun) -> list:
    from .analysis.findings import SessionFindings

    rows = (
        SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.DONE)
        .order_by("id")
        .values_list("session_id", "session__external_id", "session__agent", "session__task", "findings")
    )
    return [SessionFindings(sid, eid, agent, task, list(findings or [])) for sid, eid, agent, task, findings in rows]


def _memory(store: MemoryStore) -> list[dict]:
    return list(
        MemoryEntry.objects.filter(store=store, status=EntryStatus.ACTIVE)
        .order_by("key")
        .values("key", "content", "content_hash", "scope_agent", "scope_task", "origin")
    )


def _skills(team_id: int) -> list[dict]:
    from skills_registry.models import Skill

    return list(Skill.objects.filter(team_id=team_id).published().values("name", "description", "body", "content_hash"))


# --- skill proposals (skills registry, issue 6) -------------------------------------------------------------------
def _skill_proposals(run: DreamRun, sessions: list, policy: AutonomyPolicy) -> list:
    """Skill drafts (an update of the skill whose domain a recurring lesson belongs to; a new skill for a recurring
    procedure no skill covers), risk-assessed and redacted like the memory drafts. They are never auto-applied:
    reviews.services.policy_allows refuses target_kind "skill" whatever the policy (skills are promoted by people)."""
    from skills_registry.dreaming import dream_skill_drafts

    from .analysis.findings import ProposalDraft
    from .analysis.risk import assess, redact_draft

    drafts = []
    for fields in dream_skill_drafts(
        run.team_id,
        sessions,
        sessions_analysed=len(sessions),
        min_sessions=policy.min_sessions,
        min_share=policy.min_share,
    ):
        draft = ProposalDraft(**fields)
        allowed = list(run.team.allowed_hosts or [])
        draft.risk, draft.risk_reasons = assess(draft, store_kind=run.store.kind, allowed_hosts=allowed)
        redact_draft(draft)
        drafts.append(draft)
    return drafts


@dataclass
class _Screened:
    new: list  # drafts to store
    waiting: dict  # signature → id of the proposal already waiting
    suppressed: list  # drafts dropped because a reviewer rejected them at the same or higher prevalence


def _screen(store: MemoryStore, drafts: list) -> _Screened:
    unique: dict[str, object] = {}
    for d in drafts:
        unique.setdefault(d.signature, d)  # one proposal per signature, even if the aggregation repeated one
    waiting: dict[str, int] = {}
    rejected: dict[str, int] = {}
    rows = Proposal.objects.filter(store=store, signature__in=list(unique)).values_list(
        "id", "signature", "status", "prevalence_sessions"
    )
    for pk, sig, status, prevalence in rows:
        if status in WAITING:
            waiting.setdefault(sig, pk)
        elif status == ProposalStatus.REJECTED:
            rejected[sig] = max(rejected.get(sig, 0), prevalence)
    new, suppressed = [], []
    for sig, d in unique.items():
        if sig in waiting:
            continue
        if sig in rejected and d.prevalence_sessions <= rejected[sig]:
            suppressed.append(d)
            continue
        new.append(d)
    return _Screened(new, {s: pk for s, pk in waiting.items()}, suppressed)


def _clip(value: str | None, length: int) -> str | None:
    return value[:length] if isinstance(value, str) else value


def _persist(run: DreamRun, drafts: list) -> list[int]:
    """Store the drafts as proposals with their evidence (bulk); returns the new proposals' ids."""
    if not drafts:
        return []
    objs = [
        Proposal(
            team_id=run.team_id,
            store_id=run.store_id,
            run=run,
            target_kind=d.target_kind,
            operation=d.operation,
            targets=list(d.targets or []),
            target_hashes=dict(d.target_hashes or {}),
            content=d.content,
            key_hint=_clip(d.key_hint or "", 200),
            scope_agent=_clip(d.scope_agent, 100),
            scope_task=_clip(d.scope_task, 100),
            kind=_clip(d.kind or "", 40),
            rationale=d.rationale or "",
            prevalence_sessions=d.prevalence_sessions,
            prevalence_of=d.prevalence_of,
            confidence=float(d.confidence),
            risk=d.risk,
            risk_reasons=list(d.risk_reasons or []),
            status=ProposalStatus.QUARANTINED if is_poisoned(d.risk, d.risk_reasons) else ProposalStatus.PENDING,
            signature=d.signature,
        )
        for d in drafts
    ]
    # A concurrent run of the same store may have stored the same signature meanwhile: the unique constraint
    # (one pending per signature) keeps one, and the ids are read back by signature.
    Proposal.objects.bulk_create(objs, batch_size=500, ignore_conflicts=True)
    ids = dict(Proposal.objects.filter(run=run).values_list("signature", "id"))
    evidence = [
        ProposalEvidence(
            team_id=run.team_id,
            proposal_id=ids[d.signature],
            session_id=e["session_id"],
            event_index=int(e.get("event_index") or 0),
            excerpt=e.get("excerpt") or "",
            trust=e.get("trust") or "agent",
        )
        for d in drafts
        if d.signature in ids
        for e in d.evidence
    ]
    ProposalEvidence.objects.bulk_create(evidence, batch_size=1000)
    return sorted(ids.values())


def _apply_policy(run: DreamRun, proposal_ids: list[int], policy: AutonomyPolicy) -> dict[str, int]:
    """Apply what the store's policy allows, one proposal at a time (each all-or-nothing; a stale target gives
    conflict). Quarantined and high-risk proposals never get here (policy_allows says no)."""
    from .services import NotPending, apply_proposal, policy_allows

    counts = {"applied": 0, "conflict": 0}
    if policy.mode == PolicyMode.MANUAL or not proposal_ids:
        return counts
    with rls.team_scope(run.team_id):
        proposals = list(
            Proposal.objects.filter(pk__in=proposal_ids, status=ProposalStatus.PENDING)
            .select_related("store", "team", "run")
            .order_by("id")
        )
    for proposal in proposals:
        if not policy_allows(proposal, policy):
            continue
        with rls.team_scope(run.team_id):
            try:
                done = apply_proposal(proposal, author=Author.dream(run.pk), reason=f"applied by dream #{run.pk}")
            except NotPending:
                continue
        counts["applied" if done.status == ProposalStatus.APPLIED else "conflict"] += 1
    return counts


def finalize(run_id: int) -> dict | None:
    """Aggregate, persist and apply, once per run (running → aggregating compare-and-set); returns the run's
    report (dream-output.schema.json), or None when another finalize got there first."""
    info = _info(run_id)
    if info is None:
        log.warning("finalize: dream run %s does not exist", run_id)
        return None
    with rls.team_scope(info.team_id):
        claimed = DreamRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(status=RunStatus.AGGREGATING)
    if not claimed:
        return None
    try:
        return _finalize(run_id, info.team_id)
    except Exception as exc:  # noqa: BLE001 - the run is marked failed with its error, then the task ends
        log.exception("dream #%s failed while aggregating", run_id)
        with rls.team_scope(info.team_id):
            DreamRun.objects.filter(pk=run_id).update(
                status=RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:4000], finished_at=timezone.now()
            )
            run = DreamRun.objects.select_related("store").get(pk=run_id)
            return build_report(run, proposals=[])


def _finalize(run_id: int, team_id: int) -> dict:
    from .analysis import aggregate as aggregate_mod

    with rls.team_scope(team_id):
        run = DreamRun.objects.select_related("store", "team").get(pk=run_id)
        # Anything still pending was never analysed (finalize reached by hand); it counts as failed.
        SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.PENDING).update(
            status=AnalysisStatus.FAILED, error="not analysed before the run was finalized", finished_at=timezone.now()
        )
        policy = get_policy(run.store)
        sessions = _session_findings(run)
        memory = _memory(run.store)
        result = aggregate_mod.aggregate(
            sessions,
            sessions_analysed=len(sessions),
            memory=memory,
            skills=_skills(team_id),
            min_sessions=policy.min_sessions,
            min_share=policy.min_share,
            store_kind=run.store.kind,
            allowed_hosts=list(run.team.allowed_hosts or []),
        )
        result.proposals += _skill_proposals(run, sessions, policy)  # skills registry (issue 6)
        screened = _screen(run.store, list(result.proposals))
        totals = SessionAnalysis.objects.filter(run=run).aggregate(
            tokens_input=Sum("tokens_input"), tokens_output=Sum("tokens_output")
        )
        done = len(sessions)
        failed = SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.FAILED).count()
        first_error = (
            SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.FAILED)
            .order_by("id")
            .values_list("error", flat=True)
            .first()
        )
        new_ids = [] if run.dry_run else _persist(run, screened.new)
        cap = int(getattr(settings, "DREAMWEB_ISOLATED_CAP", 200))
        tokens_in, tokens_out = totals["tokens_input"] or 0, totals["tokens_output"] or 0
        options = dict(run.options)
        options.update(
            {
                "waiting": sorted(screened.waiting.values()),
                "suppressed_rejected": len(screened.suppressed),
                "reinforced": len(result.reinforced),
                "withheld": len(getattr(result, "withheld", []) or []),
                "isolated_total": len(result.isolated),
                "memory_hash_aggregated": _hash_of(memory),
            }
        )
        DreamRun.objects.filter(pk=run_id).update(
            sessions_analysed=done,
            sessions_failed=failed,
            tokens_input=tokens_in,
            tokens_output=tokens_out,
            cost_usd=_cost(run.analyzer, tokens_in, tokens_out),
            isolated=list(result.isolated[:cap]),
            proposals_count=len(new_ids) if not run.dry_run else len(screened.new) + len(screened.waiting),
            options=options,
        )
    applied = {"applied": 0, "conflict": 0}
    if not run.dry_run:
        applied = _apply_policy(run, new_ids, policy)
    if failed and not done:
        status, error = RunStatus.FAILED, f"all {failed} session analyses failed; first: {first_error}"
    elif failed:
        status, error = RunStatus.PARTIAL, f"{failed} of {done + failed} session analyses failed; first: {first_error}"
    else:
        status, error = RunStatus.SUCCEEDED, ""
    with rls.team_scope(team_id):
        DreamRun.objects.filter(pk=run_id).update(status=status, error=error[:4000], finished_at=timezone.now())
        run.refresh_from_db()
        log.info(
            "dream #%s %s: %s proposals (%s applied, %s conflicts), %s sessions, %s failed",
            run_id,
            status,
            run.proposals_count,
            applied["applied"],
            applied["conflict"],
            done,
            failed,
        )
        if run.dry_run:
            previews = [draft_report(d) for d in screened.new]
            previews += [draft_report(d) for d in result.proposals if d.signature in screened.waiting]
            return build_report(run, proposals=previews, isolated=list(result.isolated[:cap]))
        return build_report(run)


def _hash_of(memory: list[dict]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for m in memory:
        digest.update(
            f"{m['key']}\x00{m['scope_agent'] or ''}\x00{m['scope_task'] or ''}\x00{m['content_hash']}\n".encode()
        )
    return digest.hexdigest()


def _cost(label: str, tokens_in: int, tokens_out: int) -> Decimal:
    from .analysis.openai_analyzer import estimate_cost

    return Decimal(str(round(estimate_cost(registry.model_of(label), tokens_in, tokens_out), 4)))


# --- the report (dream-output.schema.json) -----------------------------------------------------------------------


def draft_report(d) -> dict:
    """A draft as the dry run reports it (status preview, no id)."""
    return {
        "id": None,
        "operation": d.operation,
        "target_kind": d.target_kind,
        "targets": list(d.targets or []),
        "content": d.content,
        "key_hint": d.key_hint,
        "scope": {"agent": d.scope_agent, "task": d.scope_task},
        "kind": d.kind,
        "rationale": d.rationale,
        "prevalence": {"sessions": d.prevalence_sessions, "of": d.prevalence_of},
        "supporting_sessions": sorted({str(e.get("external_id")) for e in d.evidence if e.get("external_id")}),
        "confidence": float(d.confidence),
        "risk": d.risk,
        "risk_reasons": list(d.risk_reasons or []),
        "status": "preview",
        "signature": d.signature,
    }


def proposal_report(p: Proposal, supporting: list[str]) -> dict:
    return {
        "id": p.pk,
        "operation": p.operation,
        "target_kind": p.target_kind,
        "targets": list(p.targets or []),
        "content": p.content,
        "key_hint": p.key_hint,
        "scope": {"agent": p.scope_agent, "task": p.scope_task},
        "kind": p.kind,
        "rationale": p.rationale,
        "prevalence": {"sessions": p.prevalence_sessions, "of": p.prevalence_of},
        "supporting_sessions": supporting,
        "confidence": float(p.confidence),
        "risk": p.risk,
        "risk_reasons": list(p.risk_reasons or []),
        "status": p.status,
        "signature": p.signature,
        "applied_versions": list(p.applied_versions or []),
    }


def run_proposals(run: DreamRun) -> list[dict]:
    """The run's proposals as reported: the ones it stored, then the ones already waiting that it found again."""
    ids = list(Proposal.objects.filter(run=run).values_list("id", flat=True))
    ids += [pk for pk in (run.options or {}).get("waiting", []) if pk not in ids]
    proposals = {p.pk: p for p in Proposal.objects.filter(pk__in=ids, store_id=run.store_id)}
    supporting: dict[int, set[str]] = {}
    for pid, eid in ProposalEvidence.objects.filter(proposal_id__in=ids).values_list(
        "proposal_id", "session__external_id"
    ):
        supporting.setdefault(pid, set()).add(eid)
    return [proposal_report(proposals[pk], sorted(supporting.get(pk, ()))) for pk in ids if pk in proposals]


def build_report(run: DreamRun, *, proposals: list[dict] | None = None, isolated: list | None = None) -> dict:
    """The dream-output.schema.json document of a run (call inside the run's team scope)."""
    return {
        "store": run.store.slug,
        "run": {
            "id": None if run.dry_run else run.pk,
            "status": run.status,
            "trigger": run.trigger,
            "dry_run": run.dry_run,
            "analyzer": run.analyzer,
            "memory_hash": run.memory_hash,
            "sessions_selected": run.sessions_selected,
            "sessions_analysed": run.sessions_analysed,
            "sessions_failed": run.sessions_failed,
            "tokens": {"input": run.tokens_input, "output": run.tokens_output},
            "cost_usd": float(run.cost_usd or 0),
            "seconds": round(run.seconds or 0.0, 3),
            "error": run.error,
        },
        "proposals": run_proposals(run) if proposals is None else proposals,
        "isolated": list(run.isolated if isolated is None else isolated),
    }


def report(run: DreamRun) -> dict:
    """The report of a finished run: a dry run carries its own; a real one is read back from the database."""
    if getattr(run, "report", None) is not None:
        return run.report
    with rls.team_scope(run.team_id):
        run = DreamRun.objects.select_related("store").get(pk=run.pk)
        return build_report(run)
