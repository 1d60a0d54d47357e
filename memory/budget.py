"""Budget impact of a proposed change: which entries it would push out of each affected agent's context.

An agent's context holds what fits in the injection budget (memory.context.fit, the same rule the context API cuts
with), in the order of memory.ranking. A change that adds an entry or lengthens one takes a place and tokens there:
this module ranks the store's entries for the agent as the context would (no query: what any request gets at
least), puts the changed entry where it would rank (its scope level; its standing as just written: the target's
rating, or none for a new entry, and full recency), cuts both lists to the budget, and reports the entries that were
in before and are out after. The entries the change itself replaces (its targets) are not "pushed out".

Plain data in and out, so that the review card (reviews) asks without memory knowing what a proposal is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace

from django.utils import timezone

from .context import clamp_budget, fit
from .models import ContextServe, MemoryEntry
from .ranking import AGENT_LEVEL, TASK_LEVEL, ContextItem, standing
from .ranking_cache import ranked_entries

MAX_AGENTS = 6
RECENT_DAYS = 30


@dataclass
class Impact:
    agent: str  # "" for an agent with nothing of its own: the store-wide entries only
    task: str | None
    pushed_out: list[ContextItem] = field(default_factory=list)
    gets_in: bool = True  # whether the changed entry itself fits
    before: int = 0  # entries in the context now
    after: int = 0


def served_agents(store, *, days: int = RECENT_DAYS, limit: int = MAX_AGENTS) -> list[str]:
    """The agents this store's context went to lately (ContextServe), most served first."""
    since = timezone.now() - timedelta(days=days)
    rows = (
        ContextServe.objects.filter(store=store, created_at__gte=since)
        .exclude(agent="")
        .order_by()
        .values_list("agent", flat=True)
        .distinct()
    )
    return sorted(rows)[:limit]


def budget_impact(
    store,
    *,
    content: str,
    targets: list[str] = (),
    scope_agent: str | None = None,
    scope_task: str | None = None,
    agents: list[str] = (),
    max_items: int | None = None,
    max_tokens: int | None = None,
) -> list[Impact]:
    """For each affected agent, what the change pushes out of its context at the budget (the context's defaults
    unless given). An agent-scoped change affects that agent only; a store-wide one every agent in ``agents``
    (else the store's recently served agents, else an unnamed agent)."""
    max_items, max_tokens = clamp_budget(max_items, max_tokens)
    if scope_agent:
        agents = [scope_agent]
    agents = list(agents)[:MAX_AGENTS] or served_agents(store) or [""]
    targets = list(targets)
    base = MemoryEntry.objects.filter(store=store, key__in=targets).only("rating", "rating_count", "id")
    rated = max(base, key=lambda e: e.rating_count, default=None)
    level = (TASK_LEVEL if scope_task else 0) + (AGENT_LEVEL if scope_agent else 0)
    new = ContextItem(
        entry_id=0,
        key=(targets[0] if targets else "(new entry)"),
        store=store.slug,
        content=content,
        scope_agent=scope_agent,
        scope_task=scope_task,
        version=0,
        content_hash="",
        scope_rank=level,
        score=standing(rated.rating, rated.rating_count, 0) if rated else standing(0.0, 0, 0),
    )
    key = SimpleNamespace(team_id=store.team_id)
    impacts = []
    for agent in agents:
        ranked = ranked_entries(
            key, store=store, agent=agent or None, task=scope_task, limit=max_items + min(max_items, 20) + 1
        )
        before = fit(ranked, max_items, max_tokens)
        others = [i for i in ranked if i.key not in targets]
        # Where the changed entry ranks: ahead of every entry it outranks or ties (it is the most recent).
        at = next((n for n, i in enumerate(others) if (i.scope_rank, i.score) <= (new.scope_rank, new.score)), None)
        after = fit(others[:at] + [new] + others[at:] if at is not None else [*others, new], max_items, max_tokens)
        kept = {i.entry_id for i in after}
        impacts.append(
            Impact(
                agent=agent,
                task=scope_task,
                pushed_out=[i for i in before if i.entry_id not in kept and i.key not in targets],
                gets_in=any(i is new for i in after),
                before=len(before),
                after=len(after),
            )
        )
    return impacts
