"""Taking back what was decided: undo one decision (the toast's Undo in the queue) and roll back a whole dream run.

Both write through memory.services.rollback: every change that was applied becomes a new version that brings back
the entry's state before it (an entry the change created is archived), so history only grows. An entry changed
since (by a person, an agent or another proposal) is never overwritten: undoing one decision then refuses as a
whole, and a run's rollback lists it as a conflict and restores the others.

Skill changes are not rolled back here: a person promoted each of them, and reverts it on the skill's page.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from dreamweb.provenance import Author
from memory.models import MemoryVersion
from memory.services import Rollback, plan_rollback, rollback

from .models import DreamRun, Proposal, ProposalStatus, TargetKind
from .services import DecisionError


class CannotUndo(DecisionError):
    """The decision cannot be taken back; the message says why, for the person who asked."""


class AlreadyRolledBack(DecisionError):
    def __init__(self, run: DreamRun):
        super().__init__(f"dream run #{run.pk} was rolled back already")


def _applied(run: DreamRun):
    return Proposal.objects.filter(run=run, status=ProposalStatus.APPLIED, target_kind=TargetKind.MEMORY)


def run_version_ids(run: DreamRun) -> list[int]:
    """The memory versions the run's applied proposals wrote (by the policy or by a reviewer)."""
    return [v for versions in _applied(run).values_list("applied_versions", flat=True) for v in versions or []]


def plan_run_rollback(run: DreamRun) -> Rollback:
    """What rolling the run back would do (nothing is written): the run page's confirmation shows it."""
    return plan_rollback(run_version_ids(run))


def rollback_run(run: DreamRun, *, user, reason: str = "") -> Rollback:
    """Roll back every memory change the run applied; entries changed since are conflicts, left as they are.

    Claimed with a compare-and-set on ``rolled_back_at``, so two people clicking at once roll back once. A proposal
    all of whose entries were restored becomes ``rolled_back``; one with a conflicting entry stays ``applied``."""
    why = f"rollback of dream run #{run.pk}" + (f": {reason}" if reason else "")
    with transaction.atomic():
        claimed = DreamRun.objects.filter(pk=run.pk, rolled_back_at__isnull=True).update(
            rolled_back_at=timezone.now(), rolled_back_by=user
        )
        if claimed != 1:
            raise AlreadyRolledBack(run)
        proposals = list(_applied(run).select_for_update().only("id", "applied_versions"))
        done = rollback(
            [v for p in proposals for v in p.applied_versions or []], author=Author.person(user), reason=why
        )
        conflicting = {s.entry_id for s in done.conflicts}
        entry_of = _entries_of([v for p in proposals for v in p.applied_versions or []])
        undone = [p.pk for p in proposals if not {entry_of.get(v) for v in p.applied_versions or []} & conflicting]
        Proposal.objects.filter(pk__in=undone).update(status=ProposalStatus.ROLLED_BACK)
        DreamRun.objects.filter(pk=run.pk).update(
            rollback={
                "reason": reason,
                "restored": [s.as_dict() for s in done.restored],
                "conflicts": [s.as_dict() for s in done.conflicts],
                "proposals": undone,
            }
        )
    return done


def _entries_of(version_ids: list[int]) -> dict[int, int]:
    return dict(MemoryVersion.objects.filter(pk__in=version_ids).values_list("pk", "entry_id"))


def waiting_twin(proposal: Proposal) -> Proposal | None:
    """The pending proposal of the same change in the same store (a later dream proposed it again), if any: the one
    an undone decision leaves its place to (one pending proposal per change and store)."""
    return (
        Proposal.objects.filter(store_id=proposal.store_id, signature=proposal.signature, status=ProposalStatus.PENDING)
        .exclude(pk=proposal.pk)
        .first()
    )


def undo_decision(proposal: Proposal, *, user) -> Proposal:
    """Take back an approval or a rejection: the proposal is pending again.

    An approval's changes are rolled back first, all or nothing: if any entry it wrote changed since, nothing is
    undone (CannotUndo). If another pending proposal took its place meanwhile (same change), it stays
    ``rolled_back`` instead of pending (waiting_twin names the one that waits)."""
    with transaction.atomic():
        current = Proposal.objects.select_for_update().get(pk=proposal.pk)
        if current.status == ProposalStatus.REJECTED:
            pass
        elif current.status == ProposalStatus.APPLIED:
            if current.target_kind != TargetKind.MEMORY:
                raise CannotUndo(
                    "A skill change is not undone here: on the skill's page, revert it to an earlier version, or "
                    "unpublish a new skill."
                )
            plan = plan_rollback(current.applied_versions or [])
            if plan.conflicts:
                names = ", ".join(f"{s.key} (now v{s.current}: {s.changed_by or 'changed'})" for s in plan.conflicts)
                raise CannotUndo(f"Not undone: changed since the approval: {names}.")
            done = rollback(
                current.applied_versions or [],
                author=Author.person(user),
                reason=f"undo of the approval of proposal #{current.pk}",
            )
            if done.conflicts:  # changed between the plan and the locks
                raise CannotUndo("Not undone: an entry changed meanwhile.")
        else:
            raise CannotUndo(f"Proposal #{current.pk} is {current.get_status_display().lower()}: nothing to undo.")
        current.status = ProposalStatus.PENDING
        current.decided_by, current.decided_at, current.decision_reason = None, None, ""
        current.applied_versions = []
        if current.original_content is not None:  # the reviewer's edit goes with the decision
            current.content, current.original_content = current.original_content, None
        fields = ["status", "decided_by", "decided_at", "decision_reason", "applied_versions", "content"]
        fields.append("original_content")
        if current.original_edit:  # the key and scope the reviewer typed go too
            for name, value in current.original_edit.items():
                setattr(current, name, value)
            current.original_edit = None
            fields += ["key_hint", "scope_agent", "scope_task", "original_edit"]
        try:
            with transaction.atomic():
                current.save(update_fields=fields)
        except IntegrityError:  # one pending proposal per change and store: another one waits already
            current.status = ProposalStatus.ROLLED_BACK
            current.save(update_fields=fields)
    return current
