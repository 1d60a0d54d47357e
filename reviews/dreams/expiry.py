"""Expired entries, proposed for removal or renewal by every dream of their store.

An entry past its ``valid_until`` is no longer served (memory.ranking) but stays in the store, shown as expired. A
dream turns each into one proposal, with the figures a reviewer needs in its rationale (since when it expired, when
it was last served, its rating):

* ``remove`` (archive it): the default, since whoever set the end date meant it to end. High risk, like every
  removal: it waits for a reviewer unless the policy says otherwise.
* ``update`` of kind ``expired`` that renews it (the same text, the end date cleared: ``Proposal.renews``) when it is
  pinned (a pinned entry is never proposed for removal) or rated helpful. Medium risk. Renewed for ratings, its
  ``prevalence_sources`` is the number of distinct raters who rated it up, which the policy's ``min_sources`` counts.

The signature names the end date, so a rejected proposal is not made again for the same expiry, and an entry renewed
with a new end date that expires again is proposed again. Pure over the rows it reads; no session is evidence here.
"""

from __future__ import annotations

from django.utils import timezone

from memory.effectiveness import ratings_by_entry
from memory.models import MemoryEntry

from ..analysis.findings import ProposalDraft, signature
from ..models import EXPIRED_KIND

MAX_EXPIRED = 50  # per run: the oldest first
RISK_REMOVE = "removal: archives an entry (its end date has passed)"
RISK_RENEW = "renewal: an expired entry would be served again, without an end date"


def _figures(entry: MemoryEntry, now) -> str:
    days = max(0, (now - entry.valid_until).days)
    ago = "today" if days == 0 else f"{days} day{'s' if days != 1 else ''} ago"
    served = f"last served {entry.last_served_at:%Y-%m-%d}" if entry.last_served_at else "never served"
    rated = f"rated {entry.rating:+.2f} by {entry.rating_count}" if entry.rating_count else "not rated"
    return f"`{entry.key}` expired on {entry.valid_until:%Y-%m-%d %H:%M} UTC ({ago}); {served}; {rated}"


def should_renew(entry: MemoryEntry) -> bool:
    """Pinned entries are never proposed for removal; an entry rated helpful is worth renewing."""
    return entry.pinned or (entry.rating_count > 0 and entry.rating > 0)


def expiry_drafts(store, now=None) -> list[ProposalDraft]:
    now = now or timezone.now()
    rows = (
        MemoryEntry.objects.for_store(store)
        .expired(now)
        .only(
            "id",
            "team",
            "store",
            "key",
            "content",
            "content_hash",
            "scope_agent",
            "scope_task",
            "pinned",
            "valid_until",
            "last_served_at",
            "rating",
            "rating_count",
        )
        .order_by("valid_until", "key")[:MAX_EXPIRED]
    )
    rows = list(rows)
    # A renewal for ratings stands on its raters as a removal for ratings does (policy_allows counts them against the
    # policy's min_sources): one credential's ratings never bring an expired entry back by themselves.
    raters = {i: r.up_raters for i, r in ratings_by_entry(store, [e.pk for e in rows if not e.pinned]).items()}
    drafts = []
    for entry in rows:
        renew = should_renew(entry)
        figures = _figures(entry, now)
        if renew:
            why = "it is pinned" if entry.pinned else "agents rated it helpful"
            operation, content, risk, reasons, confidence = "update", entry.content, "medium", [RISK_RENEW], 0.6
            rationale = f"{figures}. Renew it (same text, no end date): {why}. Reject to leave it expired."
        else:
            operation, content, risk, reasons, confidence = "remove", None, "high", [RISK_REMOVE], 0.9
            rationale = f"{figures}. No longer served since then: archive it, or edit its end date to keep it."
        drafts.append(
            ProposalDraft(
                target_kind="memory",
                operation=operation,
                targets=[entry.key],
                target_hashes={entry.key: entry.content_hash},
                content=content,
                scope_agent=entry.scope_agent,
                scope_task=entry.scope_task,
                kind=EXPIRED_KIND,
                rationale=rationale,
                prevalence_sessions=0,
                prevalence_sources=raters.get(entry.pk, 0) if renew and not entry.pinned else 0,
                prevalence_of=0,
                confidence=confidence,
                risk=risk,
                risk_reasons=reasons,
                signature=signature(operation, "memory", [entry.key], f"expired:{entry.valid_until.isoformat()}"),
                key_hint=entry.key,
            )
        )
    return drafts
