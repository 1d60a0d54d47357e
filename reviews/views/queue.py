"""The review queue: pending proposals of the current team, filtered and sorted, as cards; htmx swaps the list and
the counters, and every link and form also works as a plain page."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from dreamweb.gates import membership_for
from dreamweb.models import Role
from dreamweb.views import current_team_or_404
from memory.models import MemoryStore

from ..forms import PER_PAGE, SORTS, QueueFilterForm
from ..models import Proposal, ProposalStatus, Risk
from . import cards

FILTER_NAMES = ("store", "operation", "kind", "risk", "agent", "sort", "per")


def filtered(queryset, f: dict):
    if f.get("store"):
        queryset = queryset.filter(store_id=f["store"])
    if f.get("operation"):
        queryset = queryset.filter(operation=f["operation"])
    if f.get("kind"):
        queryset = queryset.filter(kind=f["kind"])
    if f.get("risk"):
        queryset = queryset.filter(risk=f["risk"])
    if f.get("agent") == "_none":
        queryset = queryset.filter(scope_agent__isnull=True)
    elif f.get("agent"):
        queryset = queryset.filter(scope_agent=f["agent"])
    return queryset


def counts(user, team, store_id=None) -> dict:
    """Pending cards per risk and decided cards per status, in one query (the live counters)."""
    base = Proposal.objects.for_user(user).filter(team=team)
    if store_id:
        base = base.filter(store_id=store_id)
    pending = Q(status=ProposalStatus.PENDING)
    return base.aggregate(
        pending=Count("id", filter=pending),
        low=Count("id", filter=pending & Q(risk=Risk.LOW)),
        medium=Count("id", filter=pending & Q(risk=Risk.MEDIUM)),
        high=Count("id", filter=pending & Q(risk=Risk.HIGH)),
        applied=Count("id", filter=Q(status=ProposalStatus.APPLIED)),
        rejected=Count("id", filter=Q(status=ProposalStatus.REJECTED)),
        conflict=Count("id", filter=Q(status=ProposalStatus.CONFLICT)),
    )


def store_from_next(next_url: str):
    """The store filter of the queue page a decision came from, so its counters stay about that store."""
    query = QueryDict(urlsplit(next_url or "").query)
    try:
        return int(query.get("store") or 0) or None
    except ValueError:
        return None


def counters_context(request, team, store_id=None) -> dict:
    base = {"store": store_id} if store_id else {}
    return {
        "counts": counts(request.user, team, store_id),
        "risk_links": {r: "?" + urlencode({**base, "risk": r}) for r in Risk.values},
        "counts_store": store_id,
    }


@login_required
@vary_on_headers("HX-Request")
@require_GET
def queue(request):
    membership = current_team_or_404(request)
    team = membership.team
    stores = list(MemoryStore.objects.for_user(request.user).filter(team=team).order_by("slug"))
    pending = Proposal.objects.for_user(request.user).filter(team=team).pending()
    kinds = pending.exclude(kind="").order_by("kind").values_list("kind", flat=True).distinct()
    agents = (
        pending.exclude(scope_agent__isnull=True).order_by("scope_agent").values_list("scope_agent", flat=True)
    ).distinct()
    form = QueueFilterForm(request.GET, stores=stores, kinds=list(kinds), agents=list(agents))
    f = form.filters()
    ordered = filtered(pending, f).order_by(*SORTS[f["sort"]][1])
    page = Paginator(cards.with_card_data(ordered), f["per"]).get_page(request.GET.get("page"))
    defaults = {"sort": "prevalence", "per": PER_PAGE}
    keep = {k: v for k, v in f.items() if v and defaults.get(k) != v}
    context = {
        "form": form,
        "filters": f,
        "page": page,
        "proposals": cards.decorate(list(page.object_list)),
        "query": urlencode(keep),
        "next": request.get_full_path(),
        "can_decide": membership.allows(Role.REVIEWER),
        "team": team,
        "stores": stores,
        **counters_context(request, team, f.get("store")),
    }
    if request.htmx and not request.htmx.boosted:
        # Paging, filters and bulk decisions swap the list; counters and messages ride along out of band.
        return render(request, "reviews/queue_list_response.html", context)
    return render(request, "reviews/queue.html", context)


def may_decide(user, proposal) -> bool:
    membership = membership_for(user, proposal.team_id)
    return membership is not None and membership.allows(Role.REVIEWER)
