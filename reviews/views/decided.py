"""The decided view: what was applied (by whom, or by which policy), rejected (with the reason) and what ended in a
conflict, newest first, with filters. A conflict links to its card, which offers the rebase."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dreamweb.views import current_team_or_404
from memory.models import MemoryStore

from ..forms import DecidedFilterForm
from ..models import Proposal

PER_PAGE = 50
ROW_FIELDS = (
    "id",
    "team",
    "store",
    "run",
    "target_kind",
    "operation",
    "targets",
    "key_hint",
    "content",
    "kind",
    "risk",
    "status",
    "decided_by",
    "decided_at",
    "decided_by_policy",
    "decision_reason",
    "store__name",
    "store__slug",
    "decided_by__username",
)


@login_required
@require_GET
def decided(request):
    membership = current_team_or_404(request)
    team = membership.team
    stores = list(MemoryStore.objects.for_user(request.user, team=team).order_by("slug"))
    form = DecidedFilterForm(request.GET, stores=stores)
    f = form.filters()
    rows = Proposal.objects.for_user(request.user, team=team).decided().decided_by_kind(f.get("by") or "")
    if f.get("status"):
        rows = rows.filter(status=f["status"])
    if f.get("operation"):
        rows = rows.filter(operation=f["operation"])
    rows = rows.in_store(f.get("store"))
    rows = rows.select_related("store", "decided_by").only(*ROW_FIELDS).order_by("-decided_at", "-id")
    page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in f.items() if v})
    return render(
        request,
        "reviews/decided.html",
        {"form": form, "page": page, "query": query, "team": team, "filters": f},
    )
