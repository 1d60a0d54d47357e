"""Lessons that later sessions overturn: the project changed, and what worked in January fails in June.

Two recurring patterns can each be right in their time: January's sessions fix a failed `make deploy` with
`make ship`, June's see `make ship` fail and use `make release`. Proposed side by side they contradict each other
(one tells agents to run what the other says fails), and a reviewer cannot tell which is current. When every session
of one pattern started before every session of the pattern that overturns it, the later pattern is the lesson and the
earlier one is kept on record only, with the reason. Patterns whose sessions interleave in time are left alone: both
may hold (two branches, two environments), and a person decides. So are patterns no agent shares: opposite lessons of
two agents (the web app wants pnpm, the API npm) are each scoped to their agent, whenever each was met.

Two patterns contradict each other when
- fix: one's remedy is what the other sees fail (the normalised command);
- preference: what one steers towards is what the other steers away from;
- note: the same statement with the opposite polarity ("deploys are allowed on Fridays" / "... not allowed ...").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from . import normalize as nz

# How much of their words two statements must share for opposite polarity to make them contradict each other.
CONTRADICTION_OVERLAP = 0.8


def contradicts(a_negated: bool, a_sal, b_negated: bool, b_sal) -> bool:
    """ "Deploys are allowed on Fridays" and "... are not allowed ...": the same words, opposite polarity. Paraphrases
    whose side clauses differ ("..., so don't leave data there") share fewer words and are not read so."""
    return a_negated != b_negated and nz.overlap(a_sal, b_sal) >= CONTRADICTION_OVERLAP


def conflicting(a, b) -> bool:
    """Whether patterns ``a`` and ``b`` (clusters of reviews.analysis.aggregate, their buckets' features computed)
    cannot both be followed."""
    if a.family != b.family:
        return False
    if a.family == "fix":
        return _remedy_fails(a, b) or _remedy_fails(b, a)
    if a.family == "pref":
        return _steers_away(a, b) or _steers_away(b, a)
    if a.family == "note":
        x, y = a.leader, b.leader
        return contradicts(x.negated, x.salient, y.negated, y.salient)
    return False


def _remedy_fails(a, b) -> bool:
    failing = {x.old for x in b.buckets if x.old}
    return any(x.new and x.new in failing for x in a.buckets)


def _steers_away(a, b) -> bool:
    avoided = set().union(*(x.said_old for x in b.buckets))
    return any(x.said_new and set(x.said_new) <= avoided for x in a.buckets)


def superseded(clusters: Sequence, sessions_of: Callable[[object], list[tuple[str, float]]]) -> dict[int, str]:
    """id(cluster) → why, for each cluster a later one overturns. ``sessions_of(cluster)``: (agent, start) of each
    of its sessions (epoch seconds, 0 when unknown); read only for clusters in conflict, which are few."""
    candidates = [c for c in clusters if c.family in ("fix", "pref", "note")]
    by_family = defaultdict(list)
    for c in candidates:
        by_family[c.family].append(c)
    spans: dict[int, tuple[float, float, frozenset] | None] = {}

    def span(c) -> tuple[float, float, frozenset] | None:
        if id(c) not in spans:
            seen = sessions_of(c)
            times = [t for _, t in seen]
            ok = times and all(times)
            spans[id(c)] = (min(times), max(times), frozenset(a for a, _ in seen)) if ok else None
        return spans[id(c)]

    out: dict[int, str] = {}
    for members in by_family.values():
        if len(members) < 2:
            continue
        for earlier in members:
            for later in members:
                if later is earlier or id(earlier) in out or not conflicting(later, earlier):
                    continue
                e, lt = span(earlier), span(later)
                if e is None or lt is None or not e[1] < lt[0] or not e[2] & lt[2]:
                    continue
                out[id(earlier)] = (
                    f"overturned by {len(later.sessions)} later sessions (from {_day(lt[0])}; this pattern's last "
                    f"was {_day(e[1])}): {_what(later)}"
                )
    return out


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _what(later) -> str:
    f = later.leader.items[0][1] if later.leader.items else {}
    return str(f.get("summary") or later.leader.key)[:160]
