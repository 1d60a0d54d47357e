"""The report of a run, in the shape of contracts/dream-output.schema.json: what `manage.py dream --format json`
prints, the API returns and a dry run carries."""

from __future__ import annotations

from dreamweb import rls

from ..models import DreamRun, Proposal, ProposalEvidence


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
        "prevalence": {
            "sessions": d.prevalence_sessions,
            "of": d.prevalence_of,
            "sources": d.prevalence_sources,
            "agents": d.prevalence_agents,
        },
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
        "prevalence": {
            "sessions": p.prevalence_sessions,
            "of": p.prevalence_of,
            "sources": p.prevalence_sources,
            "agents": p.prevalence_agents,
        },
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
    ids += [pk for pk in run.outcome.waiting if pk not in ids]
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
