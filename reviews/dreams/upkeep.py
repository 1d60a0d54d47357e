"""What a dream proposes about the memory itself, from its measured effectiveness: removal (archive) of entries
that do not earn their place (``analysis/forgetting.py``), then a re-scope, a rewording or a split of what is hard to
retrieve (``analysis/reorganise.py``; never for an entry proposed for removal). Read at finalize, after the run's
analyses are stored, so the run's own sessions count."""

from __future__ import annotations

from django.utils import timezone

from memory.models import EntryStatus, MemoryEntry

from .. import effectiveness
from ..analysis.forgetting import removal_drafts
from ..analysis.reorganise import reorganise_drafts
from ..analysis.risk import assess, redact_draft
from ..models import AutonomyPolicy, DreamRun


def upkeep_proposals(run: DreamRun, policy: AutonomyPolicy, *, sessions_analysed: int) -> list:
    store = run.store
    entries = list(MemoryEntry.objects.filter(team_id=store.team_id, store=store))
    if not entries:
        return []
    effects = effectiveness.store_effects(store, entries)
    active = {e.key: (e.content, e.content_hash) for e in entries if e.status == EntryStatus.ACTIVE}
    removals = removal_drafts(
        effects,
        content_hashes={key: chash for key, (_, chash) in active.items()},
        now=timezone.now(),
        unused_days=policy.forget_after_days,
        risk=policy.removal_risk,
        sessions_analysed=sessions_analysed,
    )
    going = {key for d in removals for key in d.targets}
    kept = [e for e in effects if e.key not in going]
    queries = effectiveness.context_queries(store, [s.external_id for e in kept for s in e.misses])
    reorganised = reorganise_drafts(kept, entries=active, queries=queries, sessions_analysed=sessions_analysed)
    origins = {e.key: e.origin for e in entries}
    for draft in reorganised:
        # A rewording carries words agents sent: screened like any other draft, and never below medium.
        risk, reasons = assess(
            draft, store_kind=store.kind, allowed_hosts=list(run.team.allowed_hosts or []), target_origins=origins
        )
        draft.risk = max(draft.risk, risk, key=RISK_ORDER.index)
        draft.risk_reasons = list(dict.fromkeys([*draft.risk_reasons, *reasons]))
        redact_draft(draft)
    return removals + reorganised


RISK_ORDER = ["low", "medium", "high"]
