"""Decisions on proposals: approve (optionally with edited text), reject (optionally with a reason), bulk.

Every decision is a POST with a CSRF token, loads the proposal through the gate with the reviewer role (another
team's card is a 404, a viewer gets a 403) and calls reviews.services, which claims the card with a
compare-and-set. With htmx the card leaves the queue (or turns into a conflict card) and the counters update out of
band; without JavaScript the same forms redirect back with a message.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dreamweb.views import safe_next
from memory.models import MemoryVersion

from .. import services
from ..forms import BulkForm, DecisionForm
from ..models import Proposal, ProposalStatus, TargetKind
from . import card_body, cards
from .gates import decidable, may_decide_on, proposal_for
from .queue import counters_context, store_from_next


def _card(proposal: Proposal, *, every_session: bool = False) -> Proposal:
    return cards.decorate([proposal], every_session=every_session)[0]


@login_required
@require_GET
def proposal_detail(request, pk: int):
    # The page shows every session inline; the card swapped in by htmx loads "n more" when opened.
    proposal = _card(proposal_for(request, pk, deciding=False), every_session=not request.htmx)
    context = {"p": proposal, "can_decide": may_decide_on(request.user, proposal), "next": request.get_full_path()}
    if request.htmx:
        return render(request, "reviews/queue.html#card", context)
    versions = []
    if proposal.applied_versions:
        versions = list(MemoryVersion.objects.filter(pk__in=proposal.applied_versions).select_related("entry"))
    context.update(versions=versions, team=proposal.team, full_evidence=True)
    return render(request, "reviews/proposal.html", context)


@login_required
@require_GET
def evidence(request, pk: int):
    """Every session behind a card (the "n more" toggle loads it; the proposal's page shows it inline)."""
    proposal = _card(proposal_for(request, pk, deciding=False), every_session=True)
    return HttpResponse(card_body.more_sessions(proposal))


@login_required
@require_GET
def edit(request, pk: int):
    proposal = _card(proposal_for(request, pk), every_session=not request.htmx)
    context = {"p": proposal, "can_decide": True, "editing": True, "next": safe_next(request, reverse("reviews:queue"))}
    if request.htmx:
        return render(request, "reviews/queue.html#card-edit", context)
    return render(request, "reviews/proposal.html", {**context, "team": proposal.team, "full_evidence": True})


def _as_typed(proposal: Proposal, form: DecisionForm) -> Proposal:
    """The proposal as the edit form has it, nothing saved: its text and the key of an add, so the card's diff
    follows what was typed (the live preview, and the edit card shown again after a refusal)."""
    content = form.cleaned_data.get("content")
    if content and proposal.operation != "remove":
        proposal.content = content
    if (key := form.cleaned_data.get("key")) and proposal.operation == "add":
        proposal.key_hint = key
    return proposal


@login_required
@require_POST
def preview(request, pk: int):
    """The live diff of the edit form: the card's changes with the text as typed (nothing is saved)."""
    proposal = proposal_for(request, pk)
    form = DecisionForm(request.POST)
    form.is_valid()
    return HttpResponse(card_body.changes(_card(_as_typed(proposal, form))))


def _edit_again(request, proposal: Proposal, form: DecisionForm, error: str):
    """An edited approval that was refused (an empty or over-long key, an empty text, a reason too long): the edit
    card again with everything the reviewer typed (``typed``: text, key, scope, note) and why, so nothing of it is
    lost. htmx swaps it in place of the card (200: htmx swaps no error status); without JavaScript it is the
    proposal's page in edit mode (400), not a redirect that would drop the typed values."""
    next_url = safe_next(request, reverse("reviews:queue"))
    context = {
        "p": _card(_as_typed(proposal, form), every_session=not request.htmx),
        "can_decide": True,
        "editing": True,
        "typed": form.data,
        "edit_error": error,
        "next": next_url,
    }
    if request.htmx:
        context.update(counters_context(request, proposal.team, store_from_next(next_url)))
        return render(request, "reviews/decision_response.html", context)
    context.update(team=proposal.team, full_evidence=True)
    return render(request, "reviews/proposal.html", context, status=400)


def _outcome_message(request, proposal: Proposal, others: dict | None = None) -> tuple[str, str]:
    elsewhere = ""
    if others and any(others.values()):
        elsewhere = " Same change elsewhere: " + ", ".join(f"{len(v)} {k}" for k, v in others.items() if v) + "."
    if proposal.status == ProposalStatus.APPLIED:
        versions = MemoryVersion.objects.filter(pk__in=proposal.applied_versions).select_related("entry")
        written = ", ".join(f"{v.key} v{v.number}" for v in versions) or "the skill"
        return messages.SUCCESS, f"Approved and applied: {written}.{elsewhere}"
    if proposal.status == ProposalStatus.CONFLICT:
        why = (proposal.decision_reason or "a target changed").rstrip(". ")
        return messages.WARNING, f"Not applied: {why}.{elsewhere}"
    return messages.INFO, f"Rejected: {proposal.title}.{elsewhere}"


def _respond(
    request,
    proposal: Proposal | None,
    level: str,
    text: str,
    *,
    keep_card: bool,
    editing: bool = False,
    undo: bool = False,
):
    """htmx: the card's replacement (nothing, or the card again) plus counters and message out of band. ``undo``: the
    message offers to take the decision back (reviews/_undo.html reads the proposal's id from its tag)."""
    next_url = safe_next(request, reverse("reviews:queue"))
    messages.add_message(request, level, text, extra_tags=f"undo-{proposal.pk}" if undo and proposal else "")
    if not request.htmx:
        if keep_card and proposal is not None:
            return redirect("reviews:proposal", pk=proposal.pk)
        return redirect(next_url)
    team = proposal.team if proposal is not None else None
    context = {
        "p": _card(proposal) if keep_card else None,
        "can_decide": True,
        "editing": editing,
        "next": next_url,
        **counters_context(request, team, store_from_next(next_url)),
    }
    return render(request, "reviews/decision_response.html", context)


def _form_error(form) -> str:
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


def _same_elsewhere(request, proposal: Proposal, ids: list[int]) -> list[Proposal]:
    """The cards named in ``also`` that are the same change as ``proposal`` and this person may decide."""
    if not ids:
        return []
    return list(decidable(request.user).filter(pk__in=ids, signature=proposal.signature).exclude(pk=proposal.pk))


@login_required
@require_POST
def approve(request, pk: int):
    proposal = proposal_for(request, pk)
    form = DecisionForm(request.POST)
    edited = bool(request.POST.get("edited"))  # from the edit form: a refusal shows it again, as typed
    if not form.is_valid():
        if edited:
            return _edit_again(request, proposal, form, _form_error(form))
        return _respond(request, proposal, messages.ERROR, _form_error(form), keep_card=True)
    content = form.cleaned_data.get("content")
    reason = form.cleaned_data.get("reason") or ""
    others = _same_elsewhere(request, proposal, form.cleaned_data["also"])
    try:
        result = services.approve(proposal, user=request.user, content=content or None, reason=reason, **form.edits())
    except services.NotPending as exc:
        return _respond(request, proposal_for(request, pk), messages.WARNING, str(exc), keep_card=False)
    except services.DecisionError as exc:
        if edited:
            return _edit_again(request, proposal_for(request, pk), form, str(exc))
        return _respond(request, proposal_for(request, pk), messages.ERROR, str(exc), keep_card=True)
    done = services.bulk_decide(others, user=request.user, approve_them=True, reason=reason) if others else None
    level, text = _outcome_message(request, result, done)
    undoable = result.status == ProposalStatus.APPLIED and result.target_kind == TargetKind.MEMORY
    conflict = result.status == ProposalStatus.CONFLICT
    return _respond(request, proposal_for(request, pk), level, text, keep_card=conflict, undo=undoable)


def _card_reason(data, pk: int):
    """A card's reason box is in the page's shared form with every other card's (reviews/_decide_form.html), named
    reason-<id>: this card's is the reason."""
    key = f"reason-{pk}"
    if key not in data:
        return data
    data = data.copy()
    data["reason"] = data[key]
    return data


@login_required
@require_POST
def reject(request, pk: int):
    proposal = proposal_for(request, pk)
    form = DecisionForm(_card_reason(request.POST, pk))
    if not form.is_valid():
        # Refused whole: a reason over the limit is neither cut nor dropped, and nothing is rejected.
        return _respond(request, proposal, messages.ERROR, _form_error(form), keep_card=True)
    reason = form.cleaned_data.get("reason") or ""
    others = _same_elsewhere(request, proposal, form.cleaned_data["also"])
    try:
        services.reject(proposal, user=request.user, reason=reason)
    except services.NotPending as exc:
        return _respond(request, proposal, messages.WARNING, str(exc), keep_card=False)
    done = services.bulk_decide(others, user=request.user, approve_them=False, reason=reason) if others else None
    level, text = _outcome_message(request, proposal_for(request, pk), done)
    return _respond(request, proposal, level, text, keep_card=False, undo=True)


@login_required
@require_POST
def rebase(request, pk: int):
    """Re-base a card whose target changed onto the current text: it waits again with the diff against what is
    there now (and, with then=edit, opens the edit form on that text)."""
    proposal = proposal_for(request, pk)
    form = DecisionForm(request.POST)
    form.is_valid()
    try:
        services.rebase(proposal, user=request.user)
    except services.NotPending as exc:
        return _respond(request, proposal, messages.WARNING, str(exc), keep_card=False)
    except services.DecisionError as exc:
        return _respond(request, proposal, messages.ERROR, str(exc), keep_card=True)
    editing = form.cleaned_data.get("then") == "edit"
    text = "Rebased onto the current text: the diff below is against it. Decide again."
    if not request.htmx and editing:
        messages.info(request, text)
        return redirect(reverse("reviews:edit", args=[pk]) + "?" + urlencode({"next": safe_next(request, "")}))
    if editing and request.htmx:
        context = {"p": _card(proposal_for(request, pk)), "can_decide": True, "editing": True}
        context["next"] = safe_next(request, reverse("reviews:queue"))
        messages.info(request, text)
        return render(
            request, "reviews/decision_response.html", {**context, **counters_context(request, proposal.team)}
        )
    return _respond(request, proposal_for(request, pk), messages.INFO, text, keep_card=True)


@login_required
@require_POST
def bulk(request):
    """Decide the selected cards one by one (one conflict does not stop the rest), then show the queue again. The
    first post shows what would be decided (counts by risk and store) and asks to confirm; nothing is decided yet."""
    form = BulkForm(request.POST)
    next_url = safe_next(request, reverse("reviews:queue"))
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return redirect(next_url)
    ids = form.cleaned_data["ids"]
    # Only cards the person may decide: the others are not even looked at (and are not reported as existing).
    selected = list(decidable(request.user).filter(pk__in=ids).select_related("store").order_by("id"))
    approve_them = form.cleaned_data["action"] == "approve"
    what = "approval" if approve_them else "rejection"
    if not selected:
        messages.warning(request, f"Bulk {what}: nothing was decided (none of the selected cards is yours to decide).")
        return redirect(next_url)
    if not form.cleaned_data.get("confirmed"):
        context = {
            "summary": services.bulk_summary(selected),
            "ids": [p.pk for p in selected],
            "skipped": len(ids) - len(selected),
            "action": form.cleaned_data["action"],
            "reason": form.cleaned_data.get("reason") or "",
            "next": next_url,
        }
        template = "reviews/bulk_confirm.html#confirm" if request.htmx else "reviews/bulk_confirm.html"
        return render(request, template, context)
    if len(selected) != len(ids):
        messages.warning(request, f"{len(ids) - len(selected)} selected card(s) are not yours to decide; skipped.")
    done = services.bulk_decide(
        selected, user=request.user, approve_them=approve_them, reason=form.cleaned_data.get("reason") or ""
    )
    parts = [f"{len(v)} {k}" for k, v in done.items() if v]
    if not parts:
        messages.info(request, f"Bulk {what}: nothing was decided.")
        return redirect(next_url)
    level = messages.WARNING if done["conflict"] or done["skipped"] else messages.SUCCESS
    messages.add_message(request, level, f"Bulk {what}: {', '.join(parts)}.")
    # htmx follows the redirect with its headers, so the queue answers with the list partial and fresh counters.
    return redirect(next_url)
