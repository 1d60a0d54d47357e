"""What an autonomy policy would do, before it is saved, and applying what it allows among the waiting proposals.

Both ask ``services.policy_allows`` (the one rule of what applies without a reviewer) about each proposal, so the
preview cannot drift from what a dream's policy step does. The preview reads plain rows (risk, confidence, target
kind, status; the long texts are left out): two queries whatever the number of proposals.

Thresholds that decide what a dream *proposes* (recurrent from n sessions, share) act on the next dreams, not on
the proposals that exist; the preview says so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from dreamweb.provenance import Author

from .models import AutonomyPolicy, PolicyMode, Proposal, ProposalStatus, Risk
from .services import POLICY_FIELDS, NotPending, apply_proposal, policy_allows

RECENT_DAYS = 30
APPLY_AT_ONCE = 200  # proposals applied by one click; the page offers the rest again
# What the preview does not read: long texts (policy_allows weighs risk, confidence, kind and counts, not words).
_LONG = ("content", "original_content", "rationale", "decision_reason")


@dataclass
class Impact:
    mode: str
    pending: int = 0
    pending_allowed: int = 0
    pending_by_risk: dict = field(default_factory=dict)  # risk -> [allowed, total]
    recent: int = 0
    recent_allowed: int = 0
    recent_allowed_rejected: int = 0  # the policy would have applied these; reviewers rejected them
    recent_allowed_by_people: int = 0  # ...reviewers applied them
    recent_applied_by_policy: int = 0  # what the saved policy did apply itself in that window
    examples: list = field(default_factory=list)  # ids of waiting proposals it would apply (a few)

    @property
    def manual(self) -> bool:
        return self.mode == PolicyMode.MANUAL


def impact(store, policy: AutonomyPolicy, *, now=None) -> Impact:
    """What ``policy`` (saved or not) would apply among the store's waiting proposals, and what it would have
    applied among those of the last RECENT_DAYS days, beside what people decided about them."""
    now = now or timezone.now()
    result = Impact(mode=policy.mode, pending_by_risk={r: [0, 0] for r in Risk.values})
    mine = Proposal.objects.for_store(store).defer(*_LONG).order_by("id")
    for p in mine.filter(status=ProposalStatus.PENDING).iterator(chunk_size=2000):
        result.pending += 1
        result.pending_by_risk[p.risk][1] += 1
        if policy_allows(p, policy):
            result.pending_allowed += 1
            result.pending_by_risk[p.risk][0] += 1
            if len(result.examples) < 5:
                result.examples.append(p.pk)
    since = now - timedelta(days=RECENT_DAYS)
    decided = mine.filter(created_at__gte=since).exclude(status=ProposalStatus.PENDING)
    for p in decided.iterator(chunk_size=2000):
        result.recent += 1
        by_policy = p.status == ProposalStatus.APPLIED and p.decided_by_id is None
        result.recent_applied_by_policy += by_policy
        if policy_allows(p, policy):
            result.recent_allowed += 1
            if p.status == ProposalStatus.REJECTED:
                result.recent_allowed_rejected += 1
            elif p.status == ProposalStatus.APPLIED and not by_policy:
                result.recent_allowed_by_people += 1
    return result


def draft_policy(store, values: dict) -> AutonomyPolicy:
    """An unsaved policy with these values over the saved one (or the defaults): what the preview asks about."""
    saved = AutonomyPolicy.objects.filter(store=store).first()
    draft = AutonomyPolicy(store=store, team_id=store.team_id)
    for name in POLICY_FIELDS:
        setattr(draft, name, values.get(name, getattr(saved or draft, name)))
    return draft


def apply_pending(store, *, user) -> dict[str, int]:
    """Apply the store's waiting proposals that its SAVED policy allows, as the policy's own step would (each one
    all-or-nothing, a stale target gives a conflict), at most APPLY_AT_ONCE; the versions say the policy applied
    them and the decision's reason names who asked. Returns counts: applied, conflict, left (allowed, not done)."""
    policy = AutonomyPolicy.objects.filter(store=store).first()
    counts = {"applied": 0, "conflict": 0, "left": 0}
    if policy is None or policy.mode == PolicyMode.MANUAL:
        return counts
    waiting = Proposal.objects.for_store(store).pending().select_related("store", "team", "run").order_by("id")
    allowed = [p for p in waiting if policy_allows(p, policy)]
    for proposal in allowed[:APPLY_AT_ONCE]:
        try:
            done = apply_proposal(
                proposal,
                author=Author.dream(proposal.run_id),
                reason=f"applied by the store's policy ({policy.get_mode_display().lower()}), "
                f"at {user.get_username()}'s request",
                policy=policy.mode,  # the policy applied it, as its own step records it
            )
        except NotPending:
            continue
        counts["applied" if done.status == ProposalStatus.APPLIED else "conflict"] += 1
    counts["left"] = max(0, len(allowed) - APPLY_AT_ONCE)
    return counts


def readable_changes(changes: dict, labels: dict) -> list[tuple[str, str, str]]:
    """A policy change ({field: [old, new]}) as people read it: the form's labels, modes by their description,
    booleans as on/off, an empty agent list as "every agent"."""
    modes = dict(PolicyMode.choices)

    def show(name: str, value) -> str:
        if name == "mode":
            return modes.get(value, str(value))
        if isinstance(value, bool):
            return "on" if value else "off"
        if name == "agents":
            return ", ".join(value) if value else "every agent"
        if value is None or value == "":
            return "—"
        return str(value)

    return [
        (labels.get(name, name.replace("_", " ")), show(name, old), show(name, new))
        for name, (old, new) in changes.items()
    ]
