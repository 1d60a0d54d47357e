"""Decisions on proposals: approve (optionally with edited text), reject (optionally with a reason), bulk.

Every decision is a POST with a CSRF token, loads the proposal through the gate with the reviewer role (another
team's card is a 404, a viewer gets a 403) and calls reviews.services, which claims the card with a
compare-and-set. With htmx the card leaves the queue (or turns into a conflict card) and the counters update out of
band; without JavaScript the same forms redirect back with a message.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from dreamweb.views import safe_next
from memory.models import MemoryVersion

from .. import services
from ..forms import BulkForm, DecisionForm
from ..models import Proposal, ProposalStatus
from . import cards
from .gates import decidable, may_decide_on, proposal_for
from .queue import counters_context, store_from_next


def _card(proposal: Proposal) -> Proposal:
    return cards.decorate([proposal])[0]


@login_required
@vary_on_headers("HX-Request")
@require_GET
def proposal_detail(request, pk: int):
    proposal = _card(proposal_for(request, pk, deciding=False))
    context = {"p": proposal, "can_decide": may_decide_on(request.user, proposal), "next": request.get_full_path()}
    if request.htmx:
        return render(request, "reviews/queue.html#card", context)
    versions = []
    if proposal.applied_versions:
        versions = list(MemoryVersion.objects.filter(pk__in=proposal.applied_versions).select_related("entry"))
    return render(request, "reviews/proposal.html", {**context, "versions": versions, "team": proposal.team})


@login_required
@vary_on_headers("HX-Request")
@require_GET
def edit(request, pk: int):
    proposal = _card(proposal_for(request, pk))
    context = {"p": proposal, "can_decide": True, "editing": True, "next": safe_next(request, reverse("reviews:queue"))}
    if request.htmx:
        return render(request, "reviews/queue.html#card-edit", context)
    return render(request, "reviews/proposal.html", {**context, "team": proposal.team})


def _outcome_message(request, proposal: Proposal) -> tuple[str, str]:
    if proposal.status == ProposalStatus.APPLIED:
        versions = MemoryVersion.objects.filter(pk__in=proposal.applied_versions).select_related("entry")
        written = ", ".join(f"{v.key} v{v.number}" for v in versions) or "the skill"
        return messages.SUCCESS, f"Approved and applied: {written}."
    if proposal.status == ProposalStatus.CONFLICT:
        return messages.WARNING, "Not applied: a target changed since the dream. Its current text is on the card."
    return messages.INFO, "Rejected."


def _respond(request, proposal: Proposal | None, level: str, text: str, *, keep_card: bool):
    """htmx: the card's replacement (nothing, or the card again) plus counters and message out of band."""
    next_url = safe_next(request, reverse("reviews:queue"))
    messages.add_message(request, level, text)
    if not request.htmx:
        if keep_card and proposal is not None:
            return redirect("reviews:proposal", pk=proposal.pk)
        return redirect(next_url)
    team = proposal.team if proposal is not None else None
    context = {
        "p": _card(proposal) if keep_card else None,
        "can_decide": True,
        "next": next_url,
        **counters_context(request, team, store_from_next(next_url)),
    }
    return render(request, "reviews/decision_response.html", context)


@login_required
@require_POST
def approve(request, pk: int):
    proposal = proposal_for(request, pk)
    form = DecisionForm(request.POST)
    form.is_valid()
    content = form.cleaned_data.get("content")
    reason = form.cleaned_data.get("reason") or ""
    try:
        result = services.approve(proposal, user=request.user, content=content or None, reason=reason)
    except services.NotPending as exc:
        return _respond(request, proposal_for(request, pk), messages.WARNING, str(exc), keep_card=False)
    except services.DecisionError as exc:
        return _respond(request, proposal_for(request, pk), messages.ERROR, str(exc), keep_card=True)
    level, text = _outcome_message(request, result)
    return _respond(request, proposal_for(request, pk), level, text, keep_card=result.status == ProposalStatus.CONFLICT)


@login_required
@require_POST
def reject(request, pk: int):
    proposal = proposal_for(request, pk)
    form = DecisionForm(request.POST)
    form.is_valid()
    try:
        services.reject(proposal, user=request.user, reason=form.cleaned_data.get("reason") or "")
    except services.NotPending as exc:
        return _respond(request, proposal, messages.WARNING, str(exc), keep_card=False)
    return _respond(request, proposal, messages.INFO, "Rejected.", keep_card=False)


@login_required
@require_POST
def bulk(request):
    """Decide the selected cards one by one (one conflict does not stop the rest), then show the queue again."""
    form = BulkForm(request.POST)
    next_url = safe_next(request, reverse("reviews:queue"))
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return redirect(next_url)
    ids = form.cleaned_data["ids"]
    # Only cards the person may decide: the others are not even looked at (and are not reported as existing).
    selected = list(decidable(request.user).filter(pk__in=ids).order_by("id"))
    if len(selected) != len(ids):
        messages.warning(request, f"{len(ids) - len(selected)} selected card(s) are not yours to decide; skipped.")
    approve_them = form.cleaned_data["action"] == "approve"
    done = services.bulk_decide(
        selected, user=request.user, approve_them=approve_them, reason=form.cleaned_data.get("reason") or ""
    )
    parts = [f"{len(v)} {k}" for k, v in done.items() if v]
    level = messages.WARNING if done["conflict"] or done["skipped"] else messages.SUCCESS
    what = "approval" if approve_them else "rejection"
    messages.add_message(request, level, f"Bulk {what}: {', '.join(parts)}.")
    # htmx follows the redirect with its headers, so the queue answers with the list partial and fresh counters.
    return redirect(next_url)
