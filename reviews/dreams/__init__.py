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

The modules, in the order a run goes through them (each imports only the ones below it: runs → steps →
finalizing → skills, selection, reports, queue):

    runs        start a run (or a dry run, or a recorded preview) and wait for it; the preview_run task
    steps       dispatch, analyze a batch (save its results), fail a batch, maybe finalize; their tasks
    finalizing  finalize: aggregate, screen against waiting and rejected proposals, persist, apply the policy; its task
    skills      the run's skill proposals (reviews.analysis.skills over the team's published skills)
    selection   the store's policy, which sessions a run reads, what Dreamweb itself served into them
    reports     the run's report, in the shape of dream-output.schema.json
    queue       what the tasks share: their options, enqueue (in-process without a broker), backoff, run_info

Everything public is re-exported here (``from reviews.dreams import start_run``). A test that replaces a function
patches the module that looks it up (e.g. ``reviews.dreams.finalizing._apply_policy``), not this package.
"""

from .finalizing import WAITING, finalize
from .reports import build_report, draft_report, proposal_report, report, run_proposals
from .runs import STALE_AFTER, NotServed, QueueUnavailable, RunInProgress, preview, start_run, wait_for
from .selection import get_policy, select_sessions, served_texts
from .steps import RetryLater, analyze_batch, dispatch, fail_batch, maybe_finalize, transient_errors

__all__ = [
    "STALE_AFTER",
    "NotServed",
    "WAITING",
    "RetryLater",
    "QueueUnavailable",
    "RunInProgress",
    "analyze_batch",
    "build_report",
    "dispatch",
    "draft_report",
    "fail_batch",
    "finalize",
    "get_policy",
    "maybe_finalize",
    "preview",
    "proposal_report",
    "report",
    "run_proposals",
    "select_sessions",
    "served_texts",
    "start_run",
    "transient_errors",
    "wait_for",
]
