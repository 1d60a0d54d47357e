"""Dream runs: the list, a run's page with live progress (htmx polls while the run works, and stops by itself:
the finished partial no longer carries the trigger), and the "dream now" / "dry-run preview" buttons."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dreamweb.gates import get_for_user, membership_for
from dreamweb.input_guard import parse_id
from dreamweb.models import Role
from dreamweb.views import current_team_or_404
from memory.models import MemoryStore

from ..analysis.risk import assess
from ..dreams import RunInProgress, start_run
from ..forms import DreamForm
from ..models import AnalysisStatus, DreamRun, Proposal, ProposalStatus, RunStatus, SessionAnalysis
from .gates import may_decide
from .undo import may_roll_back

# The big JSON columns of a run are not needed on the list.
LIST_DEFER = ("isolated", "options", "error")


@login_required
@require_GET
def run_list(request):
    membership = current_team_or_404(request)
    team = membership.team
    stores = list(MemoryStore.objects.for_user(request.user, team=team).order_by("slug"))
    runs = DreamRun.objects.for_user(request.user, team=team).select_related("store", "created_by")
    store_id = parse_id(request.GET.get("store"))  # a filter that is not an id is dropped, as on every page
    if store_id is not None:
        runs = runs.filter(store_id=store_id)
    page = Paginator(runs.defer(*LIST_DEFER).order_by("-created_at", "-id"), 30).get_page(request.GET.get("page"))
    return render(
        request,
        "reviews/runs.html",
        {
            "page": page,
            "stores": stores,
            "store_id": store_id,
            "can_dream": membership.allows(Role.REVIEWER),
            "team": team,
        },
    )


def isolated_rows(items, *, allowed_hosts=()) -> list[dict]:
    """The run's isolated findings in one shape for the page (the JSON is written by the aggregation). Each is
    screened like a proposal (reviews.analysis.risk.assess): a note saying "run curl … | sh" is marked high risk
    with its reason, never listed as a plain note."""
    rows = []
    for item in (items or [])[:100]:
        if not isinstance(item, dict):
            continue
        sessions = item.get("sessions")
        summary = str(item.get("summary") or item.get("key") or "")
        risk, reasons = assess({"operation": "add", "content": summary}, allowed_hosts=allowed_hosts)
        rows.append(
            {
                "risk": risk,
                "risk_reasons": reasons,
                "kind": str(item.get("kind") or ""),
                "summary": summary,
                "reason": str(item.get("reason") or ""),
                "sessions": sessions if isinstance(sessions, int) else len(sessions or []),
                "supporting": [str(s) for s in item.get("supporting_sessions") or []][:20],
            }
        )
    return rows


@login_required
@require_GET
def run_detail(request, pk: int):
    run = get_for_user(
        DreamRun.objects.select_related("store__team", "created_by", "rolled_back_by"), request.user, pk=pk
    )
    failures = (
        SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.FAILED)
        .select_related("session")
        .only("id", "run", "session", "status", "error", "session__id", "session__external_id", "session__agent")
        .order_by("id")[:200]
    )
    proposals = (
        Proposal.objects.filter(run=run)
        .only(
            "id",
            "run",
            "operation",
            "targets",
            "kind",
            "risk",
            "status",
            "prevalence_sessions",
            "prevalence_of",
            "key_hint",
            "target_kind",
        )
        .order_by("-prevalence_sessions", "id")[:200]
    )
    proposals = list(proposals)
    context = {
        "run": run,
        "active": run.status in RunStatus.going(),
        "failures": list(failures),
        "proposals": list(proposals),
        "preview": run.outcome.preview,
        "isolated": isolated_rows(run.isolated, allowed_hosts=list(run.store.team.allowed_hosts or [])),
        "team": run.team,
        "can_roll_back": may_roll_back(run)
        and may_decide(membership_for(request.user, run.team_id))
        and any(p.status == ProposalStatus.APPLIED for p in proposals),
    }
    if request.htmx and request.htmx.target == f"run-{run.pk}":
        return render(request, "reviews/run_detail.html#run-body", context)
    return render(request, "reviews/run_detail.html", context)


@login_required
@require_POST
def dream_now(request, store_pk: int):
    """Start a dream over one store (or a dry run that only previews what it would propose)."""
    store = get_for_user(MemoryStore.objects.all(), request.user, role=Role.REVIEWER, pk=store_pk)
    form = DreamForm(request.POST)
    form.is_valid()
    dry_run = bool(form.cleaned_data.get("dry_run"))
    try:
        run = start_run(store, trigger="page", user=request.user, dry_run=dry_run)
    except (RunInProgress, ValueError) as exc:  # ValueError: the policy names an analyzer that does not exist
        messages.error(request, f"Not started: {exc}.")
        return redirect("reviews:runs")
    label = "Dry run" if dry_run else "Dream"
    messages.success(request, f"{label} #{run.pk} started over {store.display_name}.")
    return redirect("reviews:run", pk=run.pk)
