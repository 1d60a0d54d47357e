"""A conflict re-checks itself: when a memory entry or a skill is written, the conflicts that name it are looked at
again, and those whose targets are back to the very text the dream read wait for a reviewer again
(services.recheck_conflicts). Connected in ReviewsConfig.ready; memory and skills know nothing of it."""

from __future__ import annotations

from .models import Proposal, ProposalStatus, TargetKind
from .services import recheck_conflicts


def entry_saved(sender, instance, **kwargs) -> None:
    conflicts = Proposal.objects.filter(
        store_id=instance.store_id, target_kind=TargetKind.MEMORY, status=ProposalStatus.CONFLICT
    )
    recheck_conflicts([p for p in conflicts if instance.key in (p.targets or [])])


def skill_saved(sender, instance, **kwargs) -> None:
    conflicts = Proposal.objects.filter(
        team_id=instance.team_id, target_kind=TargetKind.SKILL, status=ProposalStatus.CONFLICT
    )
    recheck_conflicts([p for p in conflicts if instance.name in (p.targets or [])])
