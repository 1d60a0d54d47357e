"""A conflict re-checks itself: when a memory entry or a skill is written, the conflicts that name it are looked at
again, and those whose targets are back to the very text the dream read wait for a reviewer again
(services.recheck_conflicts). Connected in ReviewsConfig.ready; memory and skills know nothing of it."""

from __future__ import annotations

from django.db import connection

from .models import Proposal, ProposalStatus, TargetKind
from .services import recheck_conflicts

FIELDS = ("id", "team_id", "store_id", "target_kind", "targets", "target_hashes", "status")


def _naming(conflicts, name: str) -> list[Proposal]:
    """The conflicts whose targets include ``name``: asked of the database where it can (a JSON containment on
    PostgreSQL, so a store with thousands of old conflicts costs one query), else filtered here."""
    if connection.vendor == "postgresql":
        return list(conflicts.filter(targets__contains=[name]).only(*FIELDS))
    return [p for p in conflicts.only(*FIELDS) if name in (p.targets or [])]


def entry_saved(sender, instance, **kwargs) -> None:
    conflicts = Proposal.objects.filter(
        store_id=instance.store_id, target_kind=TargetKind.MEMORY, status=ProposalStatus.CONFLICT
    )
    recheck_conflicts(_naming(conflicts, instance.key))


def skill_saved(sender, instance, **kwargs) -> None:
    conflicts = Proposal.objects.filter(
        team_id=instance.team_id, target_kind=TargetKind.SKILL, status=ProposalStatus.CONFLICT
    )
    recheck_conflicts(_naming(conflicts, instance.name))
