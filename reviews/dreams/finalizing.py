"""Finalize a run, once: its sessions' findings are aggregated against the memory and the skills, the drafts are
screened against the proposals already waiting or rejected, stored with their evidence, and the autonomy policy is
applied; the run gets its counts, cost and status.

Deduplication (docs/dream-pipeline.md): a draft whose signature already waits in this store (pending or
quarantined) is not stored again and the waiting proposal is left as it is (a reviewer may be reading it); the
run lists it among its proposals. A draft whose signature was rejected in any store of the team is dropped unless
its prevalence (sessions) is now higher than at every rejection (its card then lists the earlier decisions: who,
when, why, in which store: reviews.views.cards). Proposals whose risk reasons say poisoning (what
dreamweb.screening finds: markup, remote code, credential reads, data sent away, text addressing agents, hosts the
team has not allowed; or a secret) are stored as ``quarantined``: never applied and never in the review queue,
whatever the policy, but kept with their evidence for the record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal

from celery import shared_task
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from dreamweb import rls
from dreamweb.provenance import Author
from memory.models import AgentSession, EntryStatus, MemoryEntry, MemoryStore
from memory.services import new_entry_key, snapshot, snapshot_hash
from skills_registry.models import Skill
from skills_registry.services import skill_snapshots

from .. import evidence

# The module, not its function: looked up when a run finalizes (tests replace aggregate.aggregate).
from ..analysis import aggregate as aggregate_mod
from ..analysis import registry
from ..analysis.findings import AggregateResult
from ..analysis.risk import is_poisoned, redact, scan_memo
from ..analysis.skills import FindingGroups, group_findings
from ..models import (
    AnalysisStatus,
    AutonomyPolicy,
    DreamRun,
    PolicyMode,
    Proposal,
    ProposalStatus,
    RunOutcome,
    RunStatus,
    SessionAnalysis,
)
from ..services import NotPending, apply_proposal, policy_allows
from . import evidence_rows
from .evidence_rows import EvidenceRow
from .expiry import expiry_drafts
from .queue import TASK_OPTIONS, run_info
from .reports import build_report, draft_report
from .run_findings import RunFindings
from .selection import get_policy
from .skills import run_procedures, skill_proposals
from .spill import EvidenceSpill, SpilledRows
from .upkeep import upkeep_proposals

# One logger for the whole pipeline: `manage.py dream` shows its progress lines by attaching a handler to it.
log = logging.getLogger("reviews.dreams")

NO_MODEL = "no language model is configured (DREAMWEB_LLM_MODEL, and OPENAI_API_KEY or OPENAI_BASE_URL)"

# Proposals that already wait for someone (or for nobody: quarantined): a new draft with the same signature is not
# stored twice.
WAITING = (ProposalStatus.PENDING, ProposalStatus.APPLYING, ProposalStatus.QUARANTINED)


@dataclass
class _Screened:
    new: list  # drafts to store
    waiting: dict  # signature → id of the proposal already waiting
    suppressed: list  # drafts dropped because a reviewer rejected them at the same or higher prevalence


def _screen(store: MemoryStore, drafts: list) -> _Screened:
    """Waiting proposals are this store's; rejections are the team's: a lesson a reviewer rejected in any store of
    the team is proposed again only when its prevalence is now higher than at every rejection."""
    unique: dict[str, object] = {}
    for d in drafts:
        unique.setdefault(d.signature, d)  # one proposal per signature, even if the aggregation repeated one
    waiting: dict[str, int] = {}
    rejected: dict[str, int] = {}
    rows = Proposal.objects.filter(team_id=store.team_id, signature__in=list(unique)).values_list(
        "id", "signature", "status", "prevalence_sessions", "store_id"
    )
    for pk, sig, status, prevalence, store_id in rows:
        if status in WAITING and store_id == store.pk:
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


def _target_versions(run: DreamRun, drafts: list) -> dict[tuple[str, str], int]:
    """{(target kind, key): version} of every target the drafts name whose current text is the one they were made
    against (one query per target kind): the card then says "the dream read version 3", not only a hash."""
    keys = {(d.target_kind, k) for d in drafts for k in d.targets or []}
    versions: dict[tuple[str, str], int] = {}
    memory_keys = [k for kind, k in keys if kind == "memory"]
    if memory_keys:
        rows = MemoryEntry.objects.filter(store_id=run.store_id, key__in=memory_keys)
        for key, version, digest in rows.values_list("key", "version", "content_hash"):
            versions[("memory", key)] = (version, digest)
    skill_names = [k for kind, k in keys if kind == "skill"]
    if skill_names:
        rows = Skill.objects.filter(team_id=run.team_id, name__in=skill_names)
        for name, version, digest in rows.values_list("name", "version", "content_hash"):
            versions[("skill", name)] = (version, digest)
    return versions


def _with_context(rows: list[EvidenceRow]) -> None:
    """Give the first evidence row of each draft's representative sessions (reviews.evidence) the transcript lines
    around it. Only those sessions' events are read, a few sessions at a time (a transcript can be megabytes)."""
    facts = dict(
        (sid, (agent, task, outcome))
        for sid, agent, task, outcome in AgentSession.objects.filter(id__in={r.session_id for r in rows}).values_list(
            "id", "agent", "task", "outcome"
        )
    )
    wanted: list[EvidenceRow] = []
    by_proposal: dict[int, list[EvidenceRow]] = {}
    for row in rows:
        by_proposal.setdefault(row.proposal_id, []).append(row)
    for proposal_rows in by_proposal.values():
        # Among the first rows only, as the card picks them (reviews.views.card_evidence): the same sessions.
        groups = evidence.group_by_session(proposal_rows[: evidence.CANDIDATE_ROWS], lambda r: r.session_id)
        for group in evidence.representatives(groups, lambda g: facts.get(g.session_id, ())):
            wanted.append(group.first)
    session_ids = sorted({r.session_id for r in wanted})
    for start in range(0, len(session_ids), 20):
        chunk = session_ids[start : start + 20]
        events = dict(AgentSession.objects.filter(id__in=chunk).values_list("id", "events"))
        for row in wanted:
            if row.session_id in events:
                row.context = evidence.context_lines(events[row.session_id], row.event_index)


def _persist(run: DreamRun, drafts: list) -> list[int]:
    """Store the drafts as proposals with their evidence (bulk); returns the new proposals' ids."""
    if not drafts:
        return []
    seen = _target_versions(run, drafts)

    def versions_of(d) -> dict:
        found = {}
        for key in d.targets or []:
            version, digest = seen.get((d.target_kind, key), (None, None))
            if version is not None and digest == (d.target_hashes or {}).get(key):
                found[key] = version
        return found

    objs = [
        Proposal(
            team_id=run.team_id,
            store_id=run.store_id,
            run=run,
            target_kind=d.target_kind,
            operation=d.operation,
            targets=list(d.targets or []),
            target_hashes=dict(d.target_hashes or {}),
            target_versions=versions_of(d),
            content=d.content,
            # An add's key is fixed here, whole (new_entry_key): the card shows it and approval writes exactly it.
            key_hint=new_entry_key(d.key_hint or "", d.content)[:200]
            if d.operation == "add" and d.target_kind == "memory"
            else _clip(d.key_hint or "", 200),
            scope_agent=_clip(d.scope_agent, 100),
            scope_task=_clip(d.scope_task, 100),
            kind=_clip(d.kind or "", 40),
            rationale=d.rationale or "",
            prevalence_sessions=d.prevalence_sessions,
            prevalence_of=d.prevalence_of,
            prevalence_sources=d.prevalence_sources,
            prevalence_agents=d.prevalence_agents,
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
    # One proposal's evidence rows at a time, a chunk at a time: a pattern seen in most sessions has a row per
    # session, so all the run's rows as model instances at once grew with the run (about 60,000 at 100,000
    # sessions), and the largest proposal's alone with it (16,500). The ids follow the rows' order across chunks.
    for d in drafts:
        if d.signature not in ids:
            continue
        proposal_id = ids[d.signature]
        chunks = d.evidence.chunks() if isinstance(d.evidence, SpilledRows) else [d.evidence]
        for n, chunk in enumerate(chunks):
            rows = [
                EvidenceRow(
                    run.team_id,
                    proposal_id,
                    e["session_id"],
                    int(e.get("event_index") or 0),
                    e.get("excerpt") or "",
                    e.get("trust") or "agent",
                )
                for e in chunk
            ]
            if n == 0:  # context only among a proposal's first rows (evidence.CANDIDATE_ROWS: fewer than a chunk)
                _with_context(rows)
            evidence_rows.store(rows)
    return sorted(ids.values())


def _apply_policy(run: DreamRun, proposal_ids: list[int], policy: AutonomyPolicy) -> dict[str, int]:
    """Apply what the store's policy allows, one proposal at a time (each all-or-nothing; a stale target gives
    conflict). Quarantined and high-risk proposals never get here (policy_allows says no)."""
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
                done = apply_proposal(
                    proposal, author=Author.dream(run.pk), reason=f"applied by dream #{run.pk}", policy=policy.mode
                )
            except NotPending:
                continue
        counts["applied" if done.status == ProposalStatus.APPLIED else "conflict"] += 1
    return counts


def finalize(run_id: int) -> dict | None:
    """Aggregate, persist and apply, once per run (running → aggregating compare-and-set); returns the run's
    report (dream-output.schema.json), or None when another finalize got there first."""
    info = run_info(run_id)
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


@dataclass
class _Analyses:
    """How the run's session analyses ended: the counters finalize writes and the run's status follows from."""

    done: int
    failed: int
    first_error: str | None
    tokens_input: int
    tokens_output: int

    def status(self) -> tuple[str, str]:
        """The run's final status and error: failed when every analysis failed, partial when some did."""
        if self.failed and not self.done:
            return RunStatus.FAILED, f"all {self.failed} session analyses failed; first: {self.first_error}"
        if self.failed:
            total = self.done + self.failed
            return RunStatus.PARTIAL, f"{self.failed} of {total} session analyses failed; first: {self.first_error}"
        return RunStatus.SUCCEEDED, ""


def _fail_unanalysed(run: DreamRun) -> None:
    """Anything still pending was never analysed (finalize reached by hand); it counts as failed."""
    SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.PENDING).update(
        status=AnalysisStatus.FAILED, error="not analysed before the run was finalized", finished_at=timezone.now()
    )


def _aggregate(run: DreamRun, policy: AutonomyPolicy, spill: EvidenceSpill) -> tuple[AggregateResult, int, str, dict]:
    """The run's drafts (memory and skills) against the store's memory and the team's skills, how many sessions it
    analysed, the hash of the memory it aggregated against, and what the optional consolidation step did. The
    memory drafts' evidence rows go to ``spill`` as each draft is finished, not held with the findings."""
    memory = snapshot(run.store)
    skills = skill_snapshots(run.team_id)
    analysed = SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.DONE).count()
    # Read before the findings are loaded: the procedures read every session's events again and upkeep up to 20,000
    # analyses, so their peaks do not stack on the findings finalize holds. They need no finding, only the count.
    procedures = run_procedures(run, policy, analysed=analysed)
    upkeep = upkeep_proposals(run, policy, sessions_analysed=analysed)
    # The findings are read as the aggregation needs them, never held at once; the skill proposals' groups are made
    # in the aggregation's full read (reviews.dreams.run_findings).
    grouping = FindingGroups(distinct=True)  # a run's sessions, each read once
    sessions = RunFindings(run, tap=grouping.add)
    result = aggregate_mod.aggregate(
        sessions,
        sessions_analysed=sessions.analysed,
        agent_tasks=sessions.agent_tasks,
        memory=memory,
        skills=skills,
        min_sessions=policy.min_sessions,
        min_share=policy.min_share,
        store_kind=run.store.kind,
        allowed_hosts=list(run.team.allowed_hosts or []),
        keep_evidence=spill.keep,
    )
    consolidation = _consolidate(run, policy, memory, result)
    groups = grouping.groups() if sessions.tapped else group_findings(RunFindings(run))
    result.proposals += skill_proposals(
        run, (), policy, skills, analysed=sessions.analysed, procedures=procedures, groups=groups
    )
    result.proposals += upkeep
    result.proposals += expiry_drafts(run.store)  # expired entries: remove or renew
    memory_hash = snapshot_hash((m["key"], m["scope_agent"], m["scope_task"], m["content_hash"]) for m in memory)
    return result, sessions.analysed, memory_hash, consolidation


def _consolidate(run: DreamRun, policy: AutonomyPolicy, memory: list[dict], result: AggregateResult) -> dict:
    """The optional LLM consolidation step (policy.consolidate, issue 11): the configured model points at entries
    and new lessons that say the same thing in other words or contradict each other, and
    reviews.analysis.consolidate turns that into merges and supersessions (medium risk at least: a reviewer decides).
    The model of an `openai:` run, else the configured one. Its failure, or no model configured, is recorded in the
    run's outcome and the cycle goes on with the aggregation's drafts. Returns consolidate.summary(), {} when off."""
    if not policy.consolidate:
        return {}
    if not registry.openai_configured():
        log.warning("dream #%s: consolidation is on but no language model is configured: skipped", run.pk)
        return {"proposed": 0, "skipped": [], "tokens": {"input": 0, "output": 0}, "error": NO_MODEL}
    # Imported only when the step runs: a rules-only worker does not load the language model's side.
    from ..analysis import consolidate as consolidate_mod
    from ..analysis.openai_analyzer import OpenAIAnalyzer

    model = registry.model_of(run.analyzer) if run.analyzer.startswith("openai:") else settings.DREAMWEB_LLM_MODEL
    # A pinned entry is never folded away into another (consolidate refuses such a group).
    pinned = set(
        MemoryEntry.objects.filter(store=run.store, status=EntryStatus.ACTIVE, pinned=True).values_list(
            "key", flat=True
        )
    )
    done = consolidate_mod.consolidate(
        OpenAIAnalyzer(model=model).client,
        model=model,
        memory=[{**m, "pinned": m["key"] in pinned} for m in memory],
        drafts=result.proposals,
        store_kind=run.store.kind,
        allowed_hosts=list(run.team.allowed_hosts or []),
        max_tokens=int(getattr(settings, "DREAMWEB_LLM_MAX_OUTPUT_TOKENS", 4000)),
    )
    result.proposals = done.drafts
    if done.error:
        log.warning("dream #%s: consolidation failed, the cycle goes on without it: %s", run.pk, done.error)
    else:
        log.info("dream #%s: consolidation proposed or changed %s proposals", run.pk, done.proposed)
    return consolidate_mod.summary(done)


def _named(row) -> str | None:
    """A failed analysis's error, with the session it was about (an operator looks that session up)."""
    if row is None:
        return None
    external_id, error = row
    return f"session {redact(external_id)}: {error}"


def _analyses(run: DreamRun, done: int) -> _Analyses:
    rows = SessionAnalysis.objects.filter(run=run)
    totals = rows.aggregate(tokens_input=Sum("tokens_input"), tokens_output=Sum("tokens_output"))
    failed = rows.filter(status=AnalysisStatus.FAILED)
    return _Analyses(
        done=done,
        failed=failed.count(),
        first_error=_named(failed.order_by("id").values_list("session__external_id", "error").first()),
        tokens_input=totals["tokens_input"] or 0,
        tokens_output=totals["tokens_output"] or 0,
    )


def _record(run: DreamRun, analyses: _Analyses, result: AggregateResult, outcome: RunOutcome, proposals: int) -> None:
    """The run's counters, cost, isolated patterns and outcome, before the policy applies anything."""
    cap = int(getattr(settings, "DREAMWEB_ISOLATED_CAP", 200))
    DreamRun.objects.filter(pk=run.pk).update(
        sessions_analysed=analyses.done,
        sessions_failed=analyses.failed,
        tokens_input=analyses.tokens_input,
        tokens_output=analyses.tokens_output,
        cost_usd=_cost(run.analyzer, analyses.tokens_input, analyses.tokens_output),
        isolated=list(result.isolated[:cap]),
        proposals_count=proposals,
        options=run.with_outcome(outcome),
    )


def _finalize(run_id: int, team_id: int) -> dict:
    """The steps of finalize: aggregate, screen, persist, record, apply the policy, end the run, report."""
    # The secret scan's memo: finalize assesses, then redacts, the same excerpts (reviews.analysis.risk).
    with EvidenceSpill() as spill, scan_memo():
        return _finalize_steps(run_id, team_id, spill)


def _finalize_steps(run_id: int, team_id: int, spill: EvidenceSpill) -> dict:
    with rls.team_scope(team_id):
        run = DreamRun.objects.select_related("store", "team").get(pk=run_id)
        _fail_unanalysed(run)
        policy = get_policy(run.store)
        result, analysed, memory_hash, consolidation = _aggregate(run, policy, spill)
        screened = _screen(run.store, list(result.proposals))
        analyses = _analyses(run, done=analysed)
        if consolidation:  # the step's tokens are the run's too (its cost, its budget's report)
            analyses.tokens_input += consolidation["tokens"]["input"]
            analyses.tokens_output += consolidation["tokens"]["output"]
        new_ids = [] if run.dry_run else _persist(run, screened.new)
        outcome = RunOutcome(
            waiting=sorted(screened.waiting.values()),
            suppressed_rejected=len(screened.suppressed),
            reinforced=len(result.reinforced),
            withheld=len(result.withheld),
            isolated_total=len(result.isolated),
            memory_hash_aggregated=memory_hash,
            consolidation=consolidation,
        )
        proposals = len(screened.new) + len(screened.waiting) if run.dry_run else len(new_ids)
        _record(run, analyses, result, outcome, proposals)
    applied = {"applied": 0, "conflict": 0} if run.dry_run else _apply_policy(run, new_ids, policy)
    status, error = analyses.status()
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
            analyses.done,
            analyses.failed,
        )
        if run.dry_run:
            cap = int(getattr(settings, "DREAMWEB_ISOLATED_CAP", 200))
            previews = [draft_report(d) for d in screened.new]
            previews += [draft_report(d) for d in result.proposals if d.signature in screened.waiting]
            return build_report(run, proposals=previews, isolated=list(result.isolated[:cap]))
        return build_report(run)


def _cost(label: str, tokens_in: int, tokens_out: int) -> Decimal:
    # Imported when a run ends, not with this module: the openai analyzer's module is the language model's side.
    from ..analysis.openai_analyzer import estimate_cost

    return Decimal(str(round(estimate_cost(registry.model_of(label), tokens_in, tokens_out), 4)))


@shared_task(name="reviews.tasks.finalize_run", **TASK_OPTIONS)
def finalize_run(run_id: int) -> None:
    """Aggregate the run's findings, persist its proposals and apply the store's policy (once)."""
    finalize(run_id)
