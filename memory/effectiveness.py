"""Whether a memory entry earns its place: how often it was served, to how many sessions, how it was rated, and, for
a lesson, whether the mistake it addresses recurred less in the sessions that were served it.

Memory knows what it served (ContextServe), the ratings (Feedback) and when each entry went live; it does not know
what happened in a session. That comes in as an argument: one ``SessionSignal`` per analysed session, naming the
entries whose mistake recurred in it and those it contradicted (``reviews.effectiveness`` reads them from the dream's
session analyses). ``measure`` joins the two; ``verdict`` is the one rule that says helpful, no effect,
contradicted, never served or unmeasured, with the counts behind it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.db.models import Count, Min, Q

from .models import ContextServe, Feedback, MemoryEntry, MemoryStore, MemoryVersion

# A rate is compared only when each side has at least this many sessions.
MIN_GROUP = 3
# Ratings decide a verdict only from this many.
MIN_RATINGS = 2
# Sessions whose findings say the entry is wrong (a correction of what it says) before it counts as contradicted.
MIN_CONTRADICTIONS = 2

HELPFUL = "helpful"
NO_EFFECT = "no_effect"
CONTRADICTED = "contradicted"
NEVER_SERVED = "never_served"
UNMEASURED = "unmeasured"
VERDICTS = (HELPFUL, NO_EFFECT, CONTRADICTED, NEVER_SERVED, UNMEASURED)
VERDICT_LABELS = {
    HELPFUL: "helpful",
    NO_EFFECT: "no effect",
    CONTRADICTED: "contradicted",
    NEVER_SERVED: "never served",
    UNMEASURED: "not enough data",
}


# Slots: a dream's upkeep holds one per analysed session it reads (up to 20,000), most of them with nothing in them.
@dataclass(frozen=True, slots=True)
class SessionSignal:
    """One analysed session as effectiveness sees it: when it ran, who ran it, and which entries' mistakes recurred
    in it (``recurred``) or which entries it showed wrong (``contradicted``), by entry id."""

    external_id: str
    at: datetime
    agent: str = ""
    task: str | None = None
    recurred: frozenset = frozenset()
    contradicted: frozenset = frozenset()
    # The words the session used about each recurred mistake (entry id -> words), for a rewording.
    words: dict = field(default_factory=dict, hash=False, compare=False)
    # Where it shows (entry id -> (event index, excerpt)), and the session's id: evidence for a proposal.
    evidence: dict = field(default_factory=dict, hash=False, compare=False)
    session_id: int | None = None


@dataclass
class Rate:
    """k of n sessions: the counts behind a rate."""

    k: int = 0
    n: int = 0

    @property
    def rate(self) -> float | None:
        return round(self.k / self.n, 4) if self.n else None

    def add(self, hit: bool) -> None:
        self.n += 1
        self.k += int(hit)

    def to_dict(self) -> dict:
        return {"sessions": self.n, "recurred": self.k, "rate": self.rate}


@dataclass
class Ratings:
    count: int = 0
    up: int = 0
    down: int = 0
    mean: float = 0.0
    raters: int = 0  # distinct credentials (agent keys and people) that rated: one key's ten ratings are one rater
    # Of them, those that rated it down and those that rated it up: what a removal for ratings (or a renewal) stands on.
    # A person's one "keep it" is never a second voice for a removal one key's fifty down-votes ask for.
    down_raters: int = 0
    up_raters: int = 0


@dataclass
class Effect:
    """The effectiveness figures of one entry."""

    entry_id: int
    key: str
    status: str
    live_from: datetime
    scope_agent: str | None
    scope_task: str | None
    pinned: bool = False
    times_served: int = 0
    sessions_served: int = 0
    last_served_at: datetime | None = None
    ratings: Ratings = field(default_factory=Ratings)
    # Sessions analysed before the entry went live, and after it: served it, or not served it.
    before: Rate = field(default_factory=Rate)
    served: Rate = field(default_factory=Rate)
    not_served: Rate = field(default_factory=Rate)
    contradicted_sessions: int = 0
    # Retrieval misses: sessions after the entry went live that asked the store for context but were not served it,
    # in which its mistake recurred.
    misses: list[SessionSignal] = field(default_factory=list)
    # Sessions served it in which its mistake recurred all the same.
    served_recurrences: list[SessionSignal] = field(default_factory=list)
    verdict: str = UNMEASURED
    reason: str = ""

    @property
    def verdict_label(self) -> str:
        return VERDICT_LABELS[self.verdict]

    @property
    def rates(self) -> list[tuple[str, str, Rate]]:
        """The three recurrence rates in reading order, named (for the chart)."""
        return [
            ("before", "before live", self.before),
            ("served", "served it", self.served),
            ("not_served", "not served it", self.not_served),
        ]

    @property
    def baseline(self) -> tuple[str, Rate] | None:
        """What the served sessions are compared with: the sessions not served it since it went live when there are
        enough of them, else the sessions before it went live."""
        if self.not_served.n >= MIN_GROUP:
            return "not served", self.not_served
        if self.before.n >= MIN_GROUP:
            return "before it went live", self.before
        return None

    def to_dict(self) -> dict:
        return {
            "entry_id": self.entry_id,
            "key": self.key,
            "status": self.status,
            "pinned": self.pinned,
            "live_from": self.live_from.isoformat() if self.live_from else None,
            "scope": {"agent": self.scope_agent, "task": self.scope_task},
            "times_served": self.times_served,
            "sessions_served": self.sessions_served,
            "last_served_at": self.last_served_at.isoformat() if self.last_served_at else None,
            "ratings": asdict(self.ratings),
            "recurrence": {
                "before_live": self.before.to_dict(),
                "served": self.served.to_dict(),
                "not_served": self.not_served.to_dict(),
                "after_live": Rate(self.served.k + self.not_served.k, self.served.n + self.not_served.n).to_dict(),
            },
            "contradicted_sessions": self.contradicted_sessions,
            "retrieval_misses": len(self.misses),
            "verdict": self.verdict,
            "reason": self.reason,
        }


def verdict(e: Effect) -> tuple[str, str]:
    """The one rule: (verdict, why in words with the counts)."""
    if e.ratings.count >= MIN_RATINGS and e.ratings.mean < 0:
        return CONTRADICTED, f"rated down: mean {e.ratings.mean:+.2f} from {e.ratings.count} ratings"
    if e.contradicted_sessions >= MIN_CONTRADICTIONS:
        return CONTRADICTED, f"{e.contradicted_sessions} sessions corrected what it says"
    if not e.times_served:
        return NEVER_SERVED, "never served to an agent"
    base = e.baseline
    if base is not None and e.served.n >= MIN_GROUP and (base[1].k or e.served.k):
        name, rate = base
        figures = f"{e.served.k} of {e.served.n} served sessions vs {rate.k} of {rate.n} {name}"
        if e.served.k * rate.n < rate.k * e.served.n:  # served rate lower (exact, no floats)
            return HELPFUL, f"the mistake recurred less when served: {figures}"
        return NO_EFFECT, f"the mistake recurred as often when served: {figures}"
    if e.ratings.count >= MIN_RATINGS and e.ratings.mean > 0:
        return HELPFUL, f"rated up: mean {e.ratings.mean:+.2f} from {e.ratings.count} ratings"
    return UNMEASURED, (
        f"served to {e.sessions_served} sessions; too few comparable sessions or ratings to tell "
        f"(needs {MIN_GROUP} sessions each side or {MIN_RATINGS} ratings)"
    )


# --- what memory knows -------------------------------------------------------------------------------------------


@dataclass
class Served:
    times: int = 0
    sessions: set = field(default_factory=set)
    last: datetime | None = None


def serves_by_entry(
    store: MemoryStore, entry_ids: Iterable[int] | None = None, *, pulled: set | None = None
) -> dict[int, Served]:
    """Times served, distinct sessions served and the last serve, per entry id, from the store's ContextServe rows
    (one query; the entries of a serve are a JSON list, read in Python). ``pulled`` (a set) receives every session
    that asked the store for context."""
    wanted = set(entry_ids) if entry_ids is not None else None
    out: dict[int, Served] = defaultdict(Served)
    rows = ContextServe.objects.filter(team_id=store.team_id, store=store).values_list(
        "session_external_id", "entries", "created_at"
    )
    for session, entries, at in rows.iterator(chunk_size=2000):
        if pulled is not None and session:
            pulled.add(session)
        for item in entries or ():
            try:
                entry_id = int(item.get("entry_id") or 0)
            except (TypeError, ValueError, AttributeError):
                continue
            if not entry_id or (wanted is not None and entry_id not in wanted):
                continue
            s = out[entry_id]
            s.times += 1
            if session:
                s.sessions.add(session)
            if s.last is None or at > s.last:
                s.last = at
    return out


def ratings_by_entry(store: MemoryStore, entry_ids: Iterable[int] | None = None) -> dict[int, Ratings]:
    rows = Feedback.objects.filter(team_id=store.team_id, entry__store=store)
    if entry_ids is not None:
        rows = rows.filter(entry_id__in=list(entry_ids))
    rows = (
        rows.order_by()
        .values("entry_id")
        .annotate(
            n=Count("id"),
            up=Count("id", filter=Q(score__gt=0)),
            down=Count("id", filter=Q(score__lt=0)),
            keys=Count("agent_key", distinct=True),
            people=Count("user", distinct=True),
            down_keys=Count("agent_key", distinct=True, filter=Q(score__lt=0)),
            down_people=Count("user", distinct=True, filter=Q(score__lt=0)),
            up_keys=Count("agent_key", distinct=True, filter=Q(score__gt=0)),
            up_people=Count("user", distinct=True, filter=Q(score__gt=0)),
        )
    )
    return {
        r["entry_id"]: Ratings(
            count=r["n"],
            up=r["up"],
            down=r["down"],
            raters=r["keys"] + r["people"],
            down_raters=r["down_keys"] + r["down_people"],
            up_raters=r["up_keys"] + r["up_people"],
        )
        for r in rows
    }


def live_since(store: MemoryStore, entry_ids: Iterable[int] | None = None) -> dict[int, datetime]:
    """When each entry went live: its first version (an entry's created_at may be set by an import)."""
    rows = MemoryVersion.objects.filter(team_id=store.team_id, entry__store=store)
    if entry_ids is not None:
        rows = rows.filter(entry_id__in=list(entry_ids))
    return dict(rows.order_by().values("entry_id").annotate(first=Min("created_at")).values_list("entry_id", "first"))


def origin_evidence(store: MemoryStore, entry_ids: Iterable[int] | None = None) -> dict[int, set[tuple[int, int]]]:
    """The (session id, event index) pairs each entry's versions name as their evidence: the findings a lesson was
    born from (a dream's proposal writes its evidence into the version it applies)."""
    rows = MemoryVersion.objects.filter(team_id=store.team_id, entry__store=store).exclude(evidence=[])
    if entry_ids is not None:
        rows = rows.filter(entry_id__in=list(entry_ids))
    out: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for entry_id, evidence in rows.values_list("entry_id", "evidence"):
        for ev in evidence or ():
            if isinstance(ev, dict) and isinstance(ev.get("session_id"), int):
                out[entry_id].add((ev["session_id"], int(ev.get("event_index") or 0)))
    return out


def measure(
    store: MemoryStore,
    signals: Iterable[SessionSignal],
    *,
    entries=None,
) -> list[Effect]:
    """The figures of the store's entries (or of ``entries``: a queryset or list of them), in key order."""
    qs = entries if entries is not None else MemoryEntry.objects.filter(team_id=store.team_id, store=store)
    rows = sorted(qs, key=lambda e: e.key)
    ids = [r.pk for r in rows]
    pulled: set[str] = set()
    served = serves_by_entry(store, ids, pulled=pulled)
    ratings = ratings_by_entry(store, ids)
    live = live_since(store, ids)
    signals = sorted(signals, key=lambda s: (s.at, s.external_id))
    # Each entry reads only the sessions of its agents at risk (_at_risk): grouped once, by agent.
    by_agent: dict[str, list[SessionSignal]] = defaultdict(list)
    agent_of: dict[str, str] = {}
    recurring: dict[int, set[str]] = defaultdict(set)
    for sig in signals:
        by_agent[sig.agent].append(sig)
        agent_of[sig.external_id] = sig.agent
        for entry_id in sig.recurred:
            recurring[entry_id].add(sig.agent)
    effects = []
    for entry in rows:
        s = served.get(entry.pk, Served())
        e = Effect(
            entry_id=entry.pk,
            key=entry.key,
            status=entry.status,
            live_from=live.get(entry.pk) or entry.created_at,
            scope_agent=entry.scope_agent,
            scope_task=entry.scope_task,
            pinned=entry.pinned,
            times_served=s.times,
            sessions_served=len(s.sessions),
            last_served_at=s.last,
            ratings=ratings.get(entry.pk, Ratings()),
        )
        e.ratings.mean = round(entry.rating, 4) if e.ratings.count else 0.0
        at_risk = _at_risk(entry, recurring[entry.pk], {agent_of[x] for x in s.sessions if x in agent_of})
        for sig in (sig for agent in sorted(at_risk) for sig in by_agent.get(agent, ())):
            hit = entry.pk in sig.recurred
            if sig.at < e.live_from:
                e.before.add(hit)
                continue
            if sig.external_id in s.sessions:
                e.served.add(hit)
                if hit:
                    e.served_recurrences.append(sig)
                e.contradicted_sessions += int(entry.pk in sig.contradicted)
            else:
                e.not_served.add(hit)
                if hit and sig.external_id in pulled:
                    e.misses.append(sig)
        e.misses.sort(key=lambda sig: (sig.at, sig.external_id))
        e.served_recurrences.sort(key=lambda sig: (sig.at, sig.external_id))
        e.verdict, e.reason = verdict(e)
        effects.append(e)
    return effects


def _at_risk(entry: MemoryEntry, made_the_mistake: set[str], were_served: set[str]) -> set[str]:
    """The agents whose sessions are compared for this entry: those that made its mistake at least once, were served
    it, or are its scope. A session of an agent that never faces the mistake says nothing about the lesson (a deploy
    lesson is no better or worse for the support bot's sessions), and counting it would dilute every rate."""
    return made_the_mistake | were_served | ({entry.scope_agent} if entry.scope_agent else set())


@dataclass
class Overview:
    """A store's entries by verdict: what the overview chart shows."""

    counts: dict
    total: int

    @property
    def bars(self) -> list[dict]:
        """One bar per verdict, widths in percent of the largest (for the SVG chart)."""
        top = max(self.counts.values() or [0]) or 1
        return [
            {
                "verdict": v,
                "label": VERDICT_LABELS[v],
                "n": self.counts.get(v, 0),
                "pct": round(100 * self.counts.get(v, 0) / top),
            }
            for v in VERDICTS
        ]


def overview(effects: list[Effect]) -> Overview:
    counts = {v: 0 for v in VERDICTS}
    for e in effects:
        counts[e.verdict] += 1
    return Overview(counts=counts, total=len(effects))
