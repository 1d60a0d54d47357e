"""The budget impact of a proposal: for a change that adds or lengthens an entry, which entries it would push out of
each affected agent's context at the store's budget (memory.budget). Read-only, for every member of the team (another
team's proposal is a 404). The card loads it when it comes into view (htmx) and links to this page without
JavaScript."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memory.budget import budget_impact
from memory.context import clamp_budget
from memory.models import MemoryEntry

from ..models import Proposal, ProposalOperation, TargetKind
from .gates import proposal_for


def grows(proposal: Proposal, target_lengths: dict[str, int]) -> bool:
    """Whether the change adds an entry or makes one longer than the longest of those it replaces."""
    if proposal.target_kind != TargetKind.MEMORY or not proposal.content:
        return False
    if proposal.operation == ProposalOperation.ADD:
        return True
    if proposal.operation in (ProposalOperation.UPDATE, ProposalOperation.MERGE):
        return len(proposal.content) > max(target_lengths.values(), default=0)
    return False


def impact_for(proposal: Proposal) -> dict:
    max_items, max_tokens = clamp_budget(None, None)
    lengths = {
        key: len(content)
        for key, content in MemoryEntry.objects.filter(
            store_id=proposal.store_id, key__in=list(proposal.targets or [])
        ).values_list("key", "content")
    }
    context = {"applies": grows(proposal, lengths), "impacts": [], "max_items": max_items, "max_tokens": max_tokens}
    if context["applies"]:
        agents = list(proposal.store.agents or [])  # the agents the store serves (memory.MemoryStore.agents)
        context["impacts"] = budget_impact(
            proposal.store,
            content=proposal.content,
            targets=list(proposal.targets or []),
            scope_agent=proposal.scope_agent,
            scope_task=proposal.scope_task,
            agents=[a for a in agents or [] if isinstance(a, str) and a],
            max_items=max_items,
            max_tokens=max_tokens,
        )
    return context


@login_required
@require_GET
def budget(request, pk: int):
    proposal = proposal_for(request, pk, deciding=False)
    context = {"p": proposal, "impact": impact_for(proposal), "team": proposal.team}
    if request.htmx:
        return render(request, "reviews/_budget_impact.html", context)
    return render(request, "reviews/budget.html", context)
