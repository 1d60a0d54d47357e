"""Reviewer decisions and applying a proposal. Views, the API and the dream's autonomy policy all come here.

Applying claims the proposal with a compare-and-set (pending → applying) so that two reviewers clicking at once
apply it once, then writes through the service of the app that owns the target, naming the target hashes the
dream saw: a target changed since then turns the proposal into a conflict instead of overwriting it.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.timesince import timesince

from dreamweb.provenance import Author, ChangeRefused, Provenance, WriteConflict
from memory.models import MemoryEntry
from memory.services import apply_change, set_store_agents, validate_key
from skills_registry.models import Skill
from skills_registry.services import apply_skill_change

from .analysis.forgetting import RATED_DOWN
from .models import (
    AutonomyPolicy,
    PolicyChange,
    PolicyMode,
    Proposal,
    ProposalStatus,
    Risk,
    TargetKind,
)

# The longest reason a decision keeps; a longer one is refused with a message and nothing is decided.
REASON_MAX = 2000


class DecisionError(Exception):
    """A decision that cannot be taken; the message is meant for the person who asked."""


class NotPending(DecisionError):
    """The proposal was decided (or is being applied) before this request: the message says by whom and when, from
    the decision recorded on the proposal, so the second of two reviewers knows what happened instead of guessing."""

    def __init__(self, proposal_id: int, status: str, decision: str = ""):
        self.status = status
        super().__init__(f"proposal {proposal_id} is {status}, not pending: {decision or 'someone decided it already'}")

    @classmethod
    def of(cls, proposal_id: int, proposal: Proposal | None = None) -> NotPending:
        """The refusal for ``proposal_id`` as it is now (read again unless given, locked, by the caller)."""
        if proposal is None:
            proposal = Proposal.objects.select_related("decided_by").filter(pk=proposal_id).first()
        if proposal is None:
            return cls(proposal_id, "gone", "it no longer exists")
        return cls(proposal_id, proposal.status, decision_said(proposal) + "; nothing was changed")


def decision_said(proposal: Proposal) -> str:
    """Who decided ``proposal``, how and when, in words: "alice rejected it 3 minutes ago"."""
    if proposal.decided_by is not None:
        who = proposal.decided_by.get_username()
    elif proposal.decided_by_policy:
        who = f"the store's policy ({proposal.get_decided_by_policy_display().lower()})"
    else:
        who = "someone"
    when = ""
    if proposal.decided_at:
        ago = timesince(proposal.decided_at)
        when = " just now" if ago.startswith("0\xa0") else f" {ago} ago"
    done = {
        ProposalStatus.APPLIED: "approved it",
        ProposalStatus.REJECTED: "rejected it",
        ProposalStatus.CONFLICT: "approved it and it ended in a conflict",
    }.get(proposal.status)
    if proposal.status == ProposalStatus.APPLYING:
        return "someone is applying it right now"
    if done is None:  # superseded, quarantined, rolled back: no one decided it in this sense
        return f"it is {proposal.get_status_display().lower()}"
    return f"{who} already {done}{when}"


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
            key=proposal.write_key,
            provenance=prov,
            supersede=proposal.supersedes,
            **({"valid_until": None} if proposal.renews else {}),
        )
    return [v.pk for v in versions]


def check_reason(reason: str) -> str:
    """A decision's reason, or DecisionError when it is too long (refused whole, never cut or dropped)."""
    reason = reason or ""
    if len(reason) > REASON_MAX:
        raise DecisionError(f"The reason is {len(reason)} characters; at most {REASON_MAX}. Nothing was decided.")
    return reason


def readable_refusal(exc: ChangeRefused) -> str:
    """Why the owning app refused the change, in words (no hashes)."""
    if isinstance(exc, WriteConflict):
        name = getattr(exc.obj, exc.name_field, "?")
        version = getattr(exc.obj, "version", None)
        now = f" (it is at version {version} now)" if version else ""
        return f"{exc.target} {name!r} changed since the dream read it{now}"
    return str(exc)


def conflict_reason(reason: str, refusal: str) -> str:
    """A conflict's ``decision_reason``: why the change was not applied, one clause in words, then the reviewer's
    own reason if they gave one. It carries no "not applied" prefix of its own: each place that shows it already
    says so (the toast's "Not applied: ...", the card's "Conflict" banner, the decided list's outcome column), and a
    prefix here read "Not applied: (not applied: ...)" there."""
    return f"{refusal}; the reviewer's reason: {reason}" if reason else refusal


def apply_proposal(
    proposal: Proposal,
    *,
    user=None,
    author: Author | None = None,
    content: str | None = None,
    reason: str = "",
    key: str | None = None,
    scope: tuple[str | None, str | None] | None = None,
    policy: str = "",
) -> Proposal:
    """Apply a pending proposal (optionally with a reviewer's edits: text, key of an add, scope (agent, task)).
    Returns it as applied or conflict; ``policy`` names the policy mode that applied it without a reviewer.

    Raises NotPending when someone else decided it first, DecisionError when an edit is refused.
    """
    reason = check_reason(reason)
    author = author or (Author.person(user) if user is not None else Author.dream(proposal.run_id))
    with transaction.atomic():
        if not _claim(proposal.pk):
            raise NotPending.of(proposal.pk)
        proposal.refresh_from_db()
        update_fields = ["status", "decided_by", "decided_at", "decision_reason", "applied_versions"]
        update_fields.append("decided_by_policy")
        if content is not None and content != proposal.content:
            if not content.strip():
                raise DecisionError("The edited text is empty.")
            proposal.original_content = proposal.content
            proposal.content = content
            update_fields += ["content", "original_content"]
        proposed = {
            "key_hint": proposal.key_hint,
            "scope_agent": proposal.scope_agent,
            "scope_task": proposal.scope_task,
        }
        if key is not None and proposal.operation == "add" and key != proposal.write_key:
            try:
                proposal.key_hint = validate_key(key)
            except ChangeRefused as exc:
                raise DecisionError(f"The key is refused: {exc}.") from exc
            update_fields.append("key_hint")
        if scope is not None:
            proposal.scope_agent, proposal.scope_task = (v.strip()[:100] or None if v else None for v in scope)
            update_fields += ["scope_agent", "scope_task"]
        if any(getattr(proposal, k) != v for k, v in proposed.items()):
            proposal.original_edit = proposed  # what an undo gives back
            update_fields.append("original_edit")
        proposal.decided_by = user
        proposal.decided_at = timezone.now()
        proposal.decision_reason = reason
        proposal.decided_by_policy = policy
        try:
            with transaction.atomic():
                proposal.applied_versions = _apply_target(proposal, author, _provenance(proposal, reason))
            proposal.status = ProposalStatus.APPLIED
        except ChangeRefused as exc:
            proposal.status = ProposalStatus.CONFLICT
            proposal.decision_reason = conflict_reason(reason, readable_refusal(exc))
        proposal.save(update_fields=update_fields)
    return proposal


def approve(proposal: Proposal, *, user, content: str | None = None, reason: str = "", **edits) -> Proposal:
    return apply_proposal(proposal, user=user, content=content, reason=reason, **edits)


def reject(proposal: Proposal, *, user, reason: str = "") -> Proposal:
    reason = check_reason(reason)
    updated = Proposal.objects.filter(pk=proposal.pk, status=ProposalStatus.PENDING).update(
        status=ProposalStatus.REJECTED, decided_by=user, decided_at=timezone.now(), decision_reason=reason
    )
    if updated != 1:
        raise NotPending.of(proposal.pk)
    proposal.refresh_from_db()
    return proposal


def bulk_decide(proposals, *, user, approve_them: bool, reason: str = "") -> dict[str, list[int]]:
    """Approve or reject several proposals; each is decided on its own (one conflict does not stop the rest)."""
    reason = check_reason(reason)
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


def bulk_summary(proposals) -> dict:
    """What a bulk decision would touch, for its confirmation: how many, by risk (high first) and by store."""
    by_risk = {r: 0 for r in (Risk.HIGH, Risk.MEDIUM, Risk.LOW)}
    by_store: dict[str, int] = {}
    for p in proposals:
        by_risk[p.risk] = by_risk.get(p.risk, 0) + 1
        by_store[p.store.display_name] = by_store.get(p.store.display_name, 0) + 1
    return {
        "total": len(proposals),
        "by_risk": [(Risk(r).label, n) for r, n in by_risk.items() if n],
        "by_store": sorted(by_store.items()),
    }


def current_targets(proposal: Proposal) -> dict[str, object]:
    """{key: the target as it is now (MemoryEntry or Skill)} of a proposal's targets that still exist."""
    if proposal.target_kind == TargetKind.SKILL:
        rows = Skill.objects.filter(team_id=proposal.team_id, name__in=proposal.targets or [])
        return {s.name: s for s in rows}
    rows = MemoryEntry.objects.filter(store_id=proposal.store_id, key__in=proposal.targets or [])
    return {e.key: e for e in rows}


def rebase(proposal: Proposal, *, user) -> Proposal:
    """Re-base a proposal whose targets changed onto their current text: it waits again (pending), prepared against
    the current hashes and versions, so the reviewer sees the diff against what is there now and decides again.

    Refused (DecisionError) when a target no longer exists or is archived: there is nothing to rebase onto.
    """
    with transaction.atomic():
        locked = Proposal.objects.select_for_update().filter(pk=proposal.pk).first()
        if locked is None or locked.status not in (ProposalStatus.PENDING, ProposalStatus.CONFLICT):
            raise NotPending.of(proposal.pk, locked)
        now = current_targets(locked)
        missing = [k for k in locked.targets or [] if k not in now or getattr(now[k], "status", "") == "archived"]
        if missing:
            raise DecisionError(f"Nothing to rebase onto: {', '.join(missing)} no longer exists or is archived.")
        if locked.operation == "add":
            raise DecisionError("An addition has no target text to rebase onto; edit its key instead.")
        locked.target_hashes = {k: now[k].content_hash for k in locked.targets}
        locked.target_versions = {k: now[k].version for k in locked.targets}
        note = f"rebased onto the current text by {user.get_username()}" if user is not None else "rebased"
        Proposal.objects.filter(pk=locked.pk).update(
            status=ProposalStatus.PENDING,
            target_hashes=locked.target_hashes,
            target_versions=locked.target_versions,
            decided_by=None,
            decided_at=None,
            decision_reason=note,
            applied_versions=[],
        )
    proposal.refresh_from_db()
    return proposal


def recheck_conflicts(proposals) -> list[int]:
    """Conflicts whose targets are back to the very text the dream saw wait again (conflict → pending, compare-and-
    set); returns their ids. Called when a target is written (reviews.apps connects it) and by the conflicts page."""
    back = []
    for p in proposals:
        if p.status != ProposalStatus.CONFLICT or not p.targets:
            continue
        now = current_targets(p)
        expected = p.target_hashes or {}
        if all(
            k in now and now[k].content_hash == expected.get(k) and getattr(now[k], "status", "") != "archived"
            for k in p.targets
        ):
            updated = Proposal.objects.filter(pk=p.pk, status=ProposalStatus.CONFLICT).update(
                status=ProposalStatus.PENDING,
                decided_by=None,
                decided_at=None,
                decision_reason="waiting again: the target is back to the text the dream read",
            )
            if updated:
                back.append(p.pk)
    return back


def same_elsewhere(proposal: Proposal):
    """The same change (same signature) waiting in the team's other stores: one decision covers them all."""
    return (
        Proposal.objects.filter(team_id=proposal.team_id, signature=proposal.signature, status=ProposalStatus.PENDING)
        .exclude(pk=proposal.pk)
        .select_related("store")
        .order_by("store__slug")
    )


def policy_allows(proposal: Proposal, policy) -> bool:
    """Whether the store's autonomy policy applies this proposal without a reviewer.

    Skills are promoted by people (never auto-applied); high risk is never auto-applied; below the policy's
    confidence floor nothing is, nor anything that sessions of fewer distinct sources (credentials) than the policy's
    ``min_sources`` support (a merge of existing entries has no sessions: the rule does not apply to it), nor a
    removal for ratings, or a renewal of an expired entry for ratings, given by fewer distinct raters than that.
    """
    if policy is None or proposal.target_kind == TargetKind.SKILL or proposal.risk == Risk.HIGH:
        return False
    if proposal.confidence < policy.min_confidence_auto:
        return False
    if proposal.prevalence_sessions and proposal.prevalence_sources < policy.min_sources:
        return False  # what fewer credentials than the policy asks for pushed waits for a person
    if proposal.kind == RATED_DOWN and proposal.prevalence_sources < policy.min_sources:
        return False  # rated down by fewer credentials than that: the same rule, ratings being its support
    if proposal.renews and proposal.prevalence_sources < policy.min_sources and not _pinned_target(proposal):
        return False  # renewed because it was rated helpful: by fewer raters than that, a person decides
    if policy.mode == PolicyMode.AUTO_LOW_RISK:
        return proposal.risk == Risk.LOW
    return policy.mode == PolicyMode.AUTONOMOUS


def _pinned_target(proposal: Proposal) -> bool:
    """A renewal of a pinned entry stands on the pin (a person's decision), not on ratings."""
    return MemoryEntry.objects.filter(store_id=proposal.store_id, key__in=proposal.targets or [], pinned=True).exists()


POLICY_FIELDS = (
    "mode",
    "min_sessions",
    "min_share",
    "min_confidence_auto",
    "min_sources",
    "max_sessions",
    "token_budget",
    "schedule_enabled",
    "schedule_minutes",
    "analyzer",
    "forget_after_days",
    "removal_risk",
    "consolidate",
)


# What the policy page and the API also set, though it belongs to the store (memory owns it): the agents it serves.
STORE_FIELDS = ("agents",)


def update_policy(store, *, user, values: dict):
    """Set a store's autonomy policy (and the agents the store serves) and audit the change as {field: [old, new]};
    returns (policy, change or None).

    The store's policy row is created on first save (until then the defaults apply, and the audit shows them as
    the old values). Nothing is recorded when nothing changed.
    """
    with transaction.atomic():
        policy, _ = AutonomyPolicy.objects.select_for_update().get_or_create(store=store, defaults={"team": store.team})
        changes = {}
        if "agents" in values:
            old, new = set_store_agents(store, values["agents"])
            if old != new:
                changes["agents"] = [old, new]
        for name in POLICY_FIELDS:
            if name not in values:
                continue
            old, new = getattr(policy, name), values[name]
            if old != new:
                changes[name] = [old, new]
                setattr(policy, name, new)
        if not changes:
            return policy, None
        # The fields' rules (reviews.models: shares, floors, the analyzer) whoever calls: ValidationError, no save.
        policy.clean_fields(exclude=[f.name for f in policy._meta.fields if f.name not in changes])
        policy.updated_by = user
        policy.updated_at = timezone.now()
        policy.save()
        change = PolicyChange.objects.create(team_id=policy.team_id, policy=policy, changed_by=user, changes=changes)
    return policy, change
