"""Reviewer decisions and applying a proposal. Views, the API and the dream's autonomy policy all come here.

Applying claims the proposal with a compare-and-set (pending → applying) so that two reviewers clicking at once
apply it once, then writes through the service of the app that owns the target, naming the target hashes the
dream saw: a target changed since then turns the proposal into a conflict instead of overwriting it.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from dreamweb.provenance import Author, InvalidChange, Provenance, WriteConflict
from memory.services import apply_change
from skills_registry.services import apply_skill_change

from .models import AutonomyPolicy, PolicyChange, PolicyMode, Proposal, ProposalStatus, Risk, TargetKind


class DecisionError(Exception):
    """A decision that cannot be taken; the message is meant for the person who asked."""


class NotPending(DecisionError):
    def __init__(self, proposal_id: int, status: str):
        self.status = status
        super().__init__(f"proposal {proposal_id} is {status}, not pending: someone decided it already")


def _claim(proposal_id: int) -> bool:
    return (
        Proposal.objects.filter(pk=proposal_id, status=ProposalStatus.PENDING).update(status=ProposalStatus.APPLYING)
        == 1
    )


def _provenance(proposal: Proposal, reason: str) -> Provenance:
    evidence = [
        {
            "session": ev.session.external_id,
            "session_id": ev.session_id,
            "event_index": ev.event_index,
            "excerpt": ev.excerpt,
            "trust": ev.trust,
        }
        for ev in proposal.evidence.select_related("session")
    ]
    first_session = proposal.evidence.select_related("session").first()
    return Provenance(
        session=first_session.session if first_session else None,
        proposal_id=proposal.pk,
        reason=reason or proposal.rationale,
        evidence=evidence,
    )


def _apply_target(proposal: Proposal, author: Author, prov: Provenance) -> list[int]:
    if proposal.target_kind == TargetKind.SKILL:
        versions = apply_skill_change(
            proposal.team,
            operation=proposal.operation,
            targets=proposal.targets,
            target_hashes=proposal.target_hashes,
            content=proposal.content,
            author=author,
            provenance=prov,
        )
    else:
        versions = apply_change(
            proposal.store,
            operation=proposal.operation,
            targets=proposal.targets,
            target_hashes=proposal.target_hashes,
            content=proposal.content,
            author=author,
            scope_agent=proposal.scope_agent,
            scope_task=proposal.scope_task,
            key_hint=proposal.key_hint,
            provenance=prov,
        )
    return [v.pk for v in versions]


def apply_proposal(
    proposal: Proposal, *, user=None, author: Author | None = None, content: str | None = None, reason: str = ""
) -> Proposal:
    """Apply a pending proposal (optionally with reviewer-edited content). Returns it as applied or conflict.

    Raises NotPending when someone else decided it first.
    """
    author = author or (Author.person(user) if user is not None else Author.dream(proposal.run_id))
    with transaction.atomic():
        if not _claim(proposal.pk):
            current = Proposal.objects.filter(pk=proposal.pk).values_list("status", flat=True).first()
            raise NotPending(proposal.pk, current or "gone")
        proposal.refresh_from_db()
        update_fields = ["status", "decided_by", "decided_at", "decision_reason", "applied_versions"]
        if content is not None and content != proposal.content:
            if not content.strip():
                raise DecisionError("The edited text is empty.")
            proposal.original_content = proposal.content
            proposal.content = content
            update_fields += ["content", "original_content"]
        proposal.decided_by = user
        proposal.decided_at = timezone.now()
        proposal.decision_reason = reason
        try:
            with transaction.atomic():
                proposal.applied_versions = _apply_target(proposal, author, _provenance(proposal, reason))
            proposal.status = ProposalStatus.APPLIED
        except (WriteConflict, InvalidChange) as exc:
            proposal.status = ProposalStatus.CONFLICT
            proposal.decision_reason = f"{reason} (not applied: {exc})".strip()
        proposal.save(update_fields=update_fields)
    return proposal


def approve(proposal: Proposal, *, user, content: str | None = None, reason: str = "") -> Proposal:
    return apply_proposal(proposal, user=user, content=content, reason=reason)


def reject(proposal: Proposal, *, user, reason: str = "") -> Proposal:
    updated = Proposal.objects.filter(pk=proposal.pk, status=ProposalStatus.PENDING).update(
        status=ProposalStatus.REJECTED, decided_by=user, decided_at=timezone.now(), decision_reason=reason
    )
    if updated != 1:
        current = Proposal.objects.filter(pk=proposal.pk).values_list("status", flat=True).first()
        raise NotPending(proposal.pk, current or "gone")
    proposal.refresh_from_db()
    return proposal


def bulk_decide(proposals, *, user, approve_them: bool, reason: str = "") -> dict[str, list[int]]:
    """Approve or reject several proposals; each is decided on its own (one conflict does not stop the rest)."""
    done: dict[str, list[int]] = {"applied": [], "rejected": [], "conflict": [], "skipped": []}
    for proposal in proposals:
        try:
            if approve_them:
                result = approve(proposal, user=user, reason=reason)
                done["applied" if result.status == ProposalStatus.APPLIED else "conflict"].append(proposal.pk)
            else:
                reject(proposal, user=user, reason=reason)
                done["rejected"].append(proposal.pk)
        except NotPending:
            done["skipped"].append(proposal.pk)
    return done


def policy_allows(proposal: Proposal, policy) -> bool:
    """Whether the store's autonomy policy applies this proposal without a reviewer.

    Skills are promoted by people (never auto-applied); high risk is never auto-applied; below the policy's
    confidence floor nothing is.
    """
    if policy is None or proposal.target_kind == TargetKind.SKILL or proposal.risk == Risk.HIGH:
        return False
    if proposal.confidence < policy.min_confidence_auto:
        return False
    if policy.mode == PolicyMode.AUTO_LOW_RISK:
        return proposal.risk == Risk.LOW
    return policy.mode == PolicyMode.AUTONOMOUS


POLICY_FIELDS = (
    "mode",
    "min_sessions",
    "min_share",
    "min_confidence_auto",
    "max_sessions",
    "token_budget",
    "agents",
    "schedule_enabled",
    "schedule_minutes",
    "analyzer",
)


def update_policy(store, *, user, values: dict):
    """Set a store's autonomy policy and audit the change as {field: [old, new]}; returns (policy, change or None).

    The store's policy row is created on first save (until then the defaults apply, and the audit shows them as
    the old values). Nothing is recorded when nothing changed.
    """
    with transaction.atomic():
        policy, _ = AutonomyPolicy.objects.select_for_update().get_or_create(store=store, defaults={"team": store.team})
        changes = {}
        for name in POLICY_FIELDS:
            if name not in values:
                continue
            old, new = getattr(policy, name), values[name]
            if old != new:
                changes[name] = [old, new]
                setattr(policy, name, new)
        if not changes:
            return policy, None
        policy.updated_by = user
        policy.updated_at = timezone.now()
        policy.save()
        change = PolicyChange.objects.create(team_id=policy.team_id, policy=policy, changed_by=user, changes=changes)
    return policy, change
