"""Forgetting, through review: which entries a dream proposes to remove (archive), each with its figures.

An active entry that is not pinned is proposed for removal when

* it was not served for ``unused_days`` days (never, or not since then) and has been live at least that long;
* it is rated down (a mean below 0 from at least ``MIN_RATINGS`` ratings);
* its mistake recurs as often in the sessions served it as in the comparable ones (the effectiveness verdict
  ``no_effect``): it takes room in the context and changes nothing.

A removal's risk is the policy's (high by default: it never applies without a person). Pure functions over the
effectiveness figures (``memory.effectiveness.Effect``); ``reviews.dreams.forgetting`` feeds them from a run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memory.effectiveness import MIN_RATINGS, NO_EFFECT

from .findings import ProposalDraft, signature, trim

UNUSED = "unused"
RATED_DOWN = "rated_down"
NO_EFFECT_KIND = "no_effect"
REMOVAL_REASON = "removal: archives an entry agents may rely on"
MAX_EVIDENCE = 10


def _day(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d") if at else "never"


def _raters(r) -> str:
    """Who rated: "2 raters", or "3 raters, 1 of whom rated it down" when not all of them did."""
    said = f"{r.raters} {'rater' if r.raters == 1 else 'raters'}"
    return said if r.down_raters == r.raters else f"{said}, {r.down_raters} of whom rated it down"


def reasons(e, *, now: datetime, unused_days: int) -> list[tuple[str, str]]:
    """(kind, rationale sentence with its figures) for each reason the entry should go; empty: it stays."""
    if e.status != "active" or e.pinned:
        return []
    out = []
    if e.ratings.count >= MIN_RATINGS and e.ratings.mean < 0:
        out.append(
            (
                RATED_DOWN,
                f"Rated down: mean {e.ratings.mean:+.2f} from {e.ratings.count} ratings "
                f"({e.ratings.up} up, {e.ratings.down} down) by {_raters(e.ratings)}.",
            )
        )
    if e.verdict == NO_EFFECT:
        out.append(
            (
                NO_EFFECT_KIND,
                f"No effect: its mistake recurred in {e.served.k} of {e.served.n} sessions served it, against "
                f"{e.not_served.k} of {e.not_served.n} not served it and {e.before.k} of {e.before.n} before it "
                f"went live.",
            )
        )
    if unused_days > 0:
        cutoff = now - timedelta(days=unused_days)
        if e.live_from <= cutoff and (e.last_served_at is None or e.last_served_at < cutoff):
            served = (
                f"never served (live since {_day(e.live_from)})"
                if not e.times_served
                else f"last served {_day(e.last_served_at)} ({e.times_served} times to {e.sessions_served} sessions "
                f"in all)"
            )
            out.append((UNUSED, f"Not served in the last {unused_days} days: {served}."))
    return out


def _evidence(e) -> list[dict]:
    """The sessions that show why: where the mistake recurred although the entry was served."""
    rows = []
    for sig in e.served_recurrences[:MAX_EVIDENCE]:
        if sig.session_id is None:
            continue
        index, excerpt = sig.evidence.get(e.entry_id, (0, ""))
        rows.append(
            {
                "session_id": sig.session_id,
                "external_id": sig.external_id,
                "event_index": int(index),
                "excerpt": trim(excerpt or f"the mistake recurred in {sig.external_id}"),
                "trust": "agent",
            }
        )
    return rows


def removal_drafts(
    effects, *, content_hashes: dict, now: datetime, unused_days: int, risk: str, sessions_analysed: int
) -> list[ProposalDraft]:
    """One ``remove`` draft per entry with a reason to go (``content_hashes``: key -> the hash it was measured at)."""
    drafts = []
    for e in effects:
        found = reasons(e, now=now, unused_days=unused_days)
        if not found or e.key not in content_hashes:
            continue
        kind = found[0][0]
        evidence = _evidence(e) if kind == NO_EFFECT_KIND else []
        figures = (
            f"Figures: served {e.times_served} times to {e.sessions_served} sessions; "
            f"{e.ratings.count} ratings; mistake recurred before live {e.before.k}/{e.before.n}, "
            f"served {e.served.k}/{e.served.n}, not served {e.not_served.k}/{e.not_served.n}."
        )
        rationale = " ".join(text for _, text in found) + " " + figures + " Archiving keeps every version."
        confidence = {RATED_DOWN: 0.8, NO_EFFECT_KIND: 0.7, UNUSED: 0.75}[kind]
        drafts.append(
            ProposalDraft(
                target_kind="memory",
                operation="remove",
                targets=[e.key],
                target_hashes={e.key: content_hashes[e.key]},
                content=None,
                scope_agent=e.scope_agent,
                scope_task=e.scope_task,
                kind=kind,
                rationale=rationale,
                prevalence_sessions=len({r["session_id"] for r in evidence}),
                # Ratings are a rated-down removal's support: the policy's min_sources counts those who rated it down
                # (reviews.services.policy_allows), so one credential's ratings never archive an entry by themselves,
                # however many others rated it up.
                prevalence_sources=e.ratings.down_raters if kind == RATED_DOWN else 0,
                prevalence_of=max(0, int(sessions_analysed)),
                confidence=confidence,
                risk=risk,
                risk_reasons=[REMOVAL_REASON] + [f"{k.replace('_', ' ')}" for k, _ in found],
                signature=signature("remove", "memory", [e.key], f"forget:{kind}:{content_hashes[e.key]}"),
                evidence=evidence,
                key_hint=e.key,
            )
        )
    return drafts
