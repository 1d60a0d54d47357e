"""The stores of the current team, with their sizes: one query whatever the number of stores."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max, Q
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dreamweb.views import current_team_or_404

from ..models import EntryStatus, MemoryStore


@login_required
@require_GET
def store_list(request):
    membership = current_team_or_404(request)
    stores = (
        MemoryStore.objects.for_user(request.user)
        .filter(team=membership.team)
        .annotate(
            active_count=Count("entries", filter=Q(entries__status=EntryStatus.ACTIVE)),
            archived_count=Count("entries", filter=Q(entries__status=EntryStatus.ARCHIVED)),
            last_change=Max("entries__updated_at"),
        )
        .order_by("slug")
    )
    return render(request, "memory/stores.html", {"stores": stores, "team": membership.team})
