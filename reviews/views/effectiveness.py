"""Memory effectiveness pages: a store's overview (entries by verdict, a bar chart, the figures of each entry) and
one entry's panel (served, ratings, and the recurrence of its mistake with the counts behind each rate), which the
memory entry page loads with htmx. Both read only; a viewer may see them."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dreamweb.gates import get_for_user
from memory import effectiveness as eff
from memory.models import MemoryEntry, MemoryStore

from .. import effectiveness


@login_required
@require_GET
def store_effectiveness(request, store_pk: int):
    store = get_for_user(MemoryStore.objects.select_related("team"), request.user, pk=store_pk)
    effects = effectiveness.store_effects(store)
    chosen = request.GET.get("verdict")
    shown = [e for e in effects if e.verdict == chosen] if chosen in eff.VERDICTS else effects
    context = {
        "store": store,
        "team": store.team,
        "overview": eff.overview(effects),
        "effects": shown,
        "verdict": chosen if chosen in eff.VERDICTS else "",
        "labels": eff.VERDICT_LABELS,
    }
    return render(request, "reviews/effectiveness.html", context)


@login_required
@require_GET
def entry_effectiveness(request, pk: int):
    entry = get_for_user(MemoryEntry.objects.select_related("store", "team"), request.user, pk=pk)
    context = {"entry": entry, "store": entry.store, "team": entry.team, "e": effectiveness.entry_effect(entry)}
    if request.htmx:
        return render(request, "reviews/entry_effectiveness.html#panel", context)
    return render(request, "reviews/entry_effectiveness.html", context)
