"""What a dream proposes about the memory itself, from its measured effectiveness: removal (archive) of entries
that do not earn their place (``analysis/forgetting.py``). Read at finalize, after the run's analyses are stored, so
the run's own sessions count."""

from __future__ import annotations

from django.utils import timezone

from memory.models import EntryStatus, MemoryEntry

from .. import effectiveness
from ..analysis.forgetting import removal_drafts
from ..models import AutonomyPolicy, DreamRun


def upkeep_proposals(run: DreamRun, policy: AutonomyPolicy, *, sessions_analysed: int) -> list:
    store = run.store
    entries = list(MemoryEntry.objects.filter(team_id=store.team_id, store=store))
    if not entries:
        return []
    effects = effectiveness.store_effects(store, entries)
    hashes = {e.key: e.content_hash for e in entries if e.status == EntryStatus.ACTIVE}
    return removal_drafts(
        effects,
        content_hashes=hashes,
        now=timezone.now(),
        unused_days=policy.forget_after_days,
        risk=policy.removal_risk,
        sessions_analysed=sessions_analysed,
    )
