"""The review queue: pending proposals of the current team, filtered and sorted, as cards; htmx swaps the list and
the counters, and every link and form also works as a plain page."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from dreamweb.input_guard import parse_id
from dreamweb.views import current_team_or_404
from memory.models import MemoryStore

from ..forms import PER_PAGE, SORTS, QueueFilterForm
from ..models import Proposal, ProposalStatus, Risk, facet_matches
from . import cards
from .gates import may_decide

RECENT = timedelta(days=7)


def counts(user, team, store_id=None, rows: list[dict] | None = None) -> dict:
    """The live counters: pending cards per risk, and cards decided in the last seven days per outcome."""
    proposals = Proposal.objects.for_user(user, team=team).in_store(store_id)
    rows = proposals.pending().facets() if rows is None else rows
    result = {"pending": 0, **dict.fromkeys(Risk.values, 0)}
    for row in rows:
        result["pending"] += row["n"]
        result[row["risk"]] = result.get(row["risk"], 0) + row["n"]
    by_status = proposals.decided_since(timezone.now() - RECENT)
    for status in (ProposalStatus.APPLIED, ProposalStatus.REJECTED, ProposalStatus.CONFLICT):
        result[status] = by_status.get(status, 0)
    return result


class CountedPaginator(Paginator):
    """A paginator told its count (from the facets) instead of asking the database again."""

    def __init__(self, object_list, per_page, *, count: int):
        super().__init__(object_list, per_page)
        self.known_count = count

    @property
    def count(self) -> int:
        return self.known_count


def store_from_next(next_url: str):
    """The store filter of the queue page a decision came from, so its counters stay about that store."""
    return parse_id(QueryDict(urlsplit(next_url or "").query).get("store"))


def counters_context(request, team, store_id=None, rows: list[dict] | None = None) -> dict:
    base = {"store": store_id} if store_id else {}
    return {
        "counts": counts(request.user, team, store_id, rows),
        "risk_links": {r: "?" + urlencode({**base, "risk": r}) for r in Risk.values},
        "counts_store": store_id,
    }


@login_required
@require_GET
def queue(request):
    membership = current_team_or_404(request)
    team = membership.team
    stores = list(MemoryStore.objects.for_user(request.user, team=team).order_by("slug"))
    # The store filter first: the other filters' choices and every count are about the chosen store.
    store_id = QueueFilterForm(request.GET, stores=stores, kinds=[], agents=[]).filters().get("store")
    pending = Proposal.objects.for_user(request.user, team=team).pending()
    rows = pending.in_store(store_id).facets()
    kinds = sorted({r["kind"] for r in rows if r["kind"]})
    agents = sorted({r["scope_agent"] for r in rows if r["scope_agent"]})
    form = QueueFilterForm(request.GET, stores=stores, kinds=kinds, agents=agents)
    f = form.filters()
    ordered = pending.filtered(f).order_by(*SORTS[f["sort"]][1])
    total = sum(r["n"] for r in rows if facet_matches(r, f))
    page = CountedPaginator(cards.with_card_data(ordered), f["per"], count=total).get_page(request.GET.get("page"))
    defaults = {"sort": "prevalence", "per": PER_PAGE}
    keep = {k: v for k, v in f.items() if v and defaults.get(k) != v}
    context = {
        "form": form,
        "filters": f,
        "page": page,
        "proposals": cards.decorate(list(page.object_list)),
        "query": urlencode(keep),
        "next": request.get_full_path(),
        "can_decide": may_decide(membership),
        "team": team,
        "stores": stores,
        **counters_context(request, team, f.get("store"), rows),
    }
    if request.htmx and not request.htmx.boosted:
        # Paging, filters and bulk decisions swap the list; counters and messages ride along out of band.
        return render(request, "reviews/queue_list_response.html", context)
    return render(request, "reviews/queue.html", context)
