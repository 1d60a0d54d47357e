"""Taking decisions back: the Undo of the toast after approve or reject, and rolling back a whole dream run from its
page (a confirmation page first that lists what will be restored and what conflicts, then a POST).

Both need the reviewer role: another team's proposal or run is a 404, a viewer gets a 403. The rules live in
reviews.rollback; these views only ask and say what happened. Both work without JavaScript (POST, then a redirect
with a message); with htmx the forms are boosted.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from dreamweb.gates import get_for_user
from dreamweb.views import safe_next

from .. import rollback
from ..models import DreamRun, ProposalStatus, RunStatus
from .gates import DECIDER, proposal_for


@login_required
@require_POST
def undo(request, pk: int):
    proposal = proposal_for(request, pk)
    try:
        undone = rollback.undo_decision(proposal, user=request.user)
    except rollback.DecisionError as exc:
        messages.error(request, str(exc))
    else:
        twin = rollback.waiting_twin(undone) if undone.status == ProposalStatus.ROLLED_BACK else None
        if twin is not None:
            messages.success(
                request,
                f"Undone: what proposal #{undone.pk} applied is rolled back. A later dream proposed the same change "
                f"again: it waits as proposal #{twin.pk}, decide it there.",
            )
        else:
            messages.success(request, f"Undone: proposal #{undone.pk} is pending again.")
    return redirect(safe_next(request, reverse("reviews:queue")))


def may_roll_back(run: DreamRun) -> bool:
    """A finished, recorded run not rolled back yet (whether it applied anything shows on the confirmation)."""
    return not run.dry_run and run.rolled_back_at is None and run.status in RunStatus.finished()


@login_required
@require_http_methods(["GET", "POST"])
def run_rollback(request, pk: int):
    run = get_for_user(DreamRun.objects.select_related("store", "team"), request.user, role=DECIDER, pk=pk)
    if not may_roll_back(run):
        messages.error(request, f"Dream #{run.pk} cannot be rolled back (not finished, a dry run, or done already).")
        return redirect("reviews:run", pk=run.pk)
    if request.method == "POST":
        try:
            done = rollback.rollback_run(run, user=request.user, reason=(request.POST.get("reason") or "")[:2000])
        except rollback.DecisionError as exc:
            messages.error(request, str(exc))
        else:
            level = messages.WARNING if done.conflicts else messages.SUCCESS
            n = len(done.restored)
            text = f"Rolled back dream #{run.pk}: {n} entr{'y' if n == 1 else 'ies'} restored"
            if done.conflicts:
                text += f", {len(done.conflicts)} changed since and left as they are (listed on the run)"
            messages.add_message(request, level, text + ".")
        return redirect("reviews:run", pk=run.pk)
    plan = rollback.plan_run_rollback(run)
    return render(request, "reviews/run_rollback.html", {"run": run, "plan": plan, "team": run.team})
