"""A store's entries (search, scope filter) and one entry's history: who, what, when, why, from which sessions and
which proposal; a diff between any two versions; revert (a new version, never a rewrite of history)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dreamweb.gates import get_for_user, membership_for
from dreamweb.models import Role

from .. import services
from ..diffs import stats, word_diff
from ..models import EntryStatus, MemoryEntry, MemoryStore, MemoryVersion
from .forms import EntrySearchForm, RevertForm

LIST_FIELDS = (
    "id",
    "team",
    "store",
    "key",
    "content",
    "scope_agent",
    "scope_task",
    "status",
    "pinned",
    "valid_from",
    "valid_until",
    "origin",
    "version",
    "updated_at",
    "rating",
    "rating_count",
)


def filtered(entries, f: dict):
    if f.get("q"):
        words = f["q"].split()
        for word in words[:8]:
            entries = entries.filter(Q(key__icontains=word) | Q(content__icontains=word))
    if f.get("scope") == "_none":
        entries = entries.filter(scope_agent__isnull=True)
    elif f.get("scope"):
        entries = entries.filter(scope_agent=f["scope"])
    if f.get("status") == "expired":
        entries = entries.expired()
    elif f.get("status") == "pinned":
        entries = entries.filter(pinned=True)
    elif f.get("status") in (EntryStatus.ACTIVE, EntryStatus.ARCHIVED, EntryStatus.SUPERSEDED):
        entries = entries.filter(status=f["status"])
    return entries


@login_required
@require_GET
def entry_list(request, store_pk: int):
    store = get_for_user(MemoryStore.objects.select_related("team"), request.user, pk=store_pk)
    entries = MemoryEntry.objects.for_user(request.user).for_store(store)
    agents = entries.exclude(scope_agent__isnull=True).order_by("scope_agent").values_list("scope_agent", flat=True)
    form = EntrySearchForm(request.GET, agents=list(agents.distinct()))
    f = form.filters()
    rows = filtered(entries, f).only(*LIST_FIELDS).order_by("key")
    page = Paginator(rows, f["per"]).get_page(request.GET.get("page"))
    query = urlencode({k: request.GET[k] for k in ("q", "scope", "status") if request.GET.get(k)})
    membership = membership_for(request.user, store.team_id)
    context = {
        "store": store,
        "team": store.team,
        "form": form,
        "page": page,
        "query": query,
        "filters": f,
        "can_curate": membership is not None and membership.allows(Role.REVIEWER),
    }
    if request.htmx and not request.htmx.boosted:
        return render(request, "memory/entries.html#entry-rows", context)
    return render(request, "memory/entries.html", context)


def _version_pair(request, versions: list[MemoryVersion]):
    """The two versions to compare: ?a=&b= when given, else the one before the latest against the latest."""
    by_number = {v.number: v for v in versions}

    def pick(name, default):
        try:
            return by_number.get(int(request.GET.get(name, "")), default)
        except ValueError:
            return default

    latest = versions[0] if versions else None
    previous = versions[1] if len(versions) > 1 else latest
    return pick("a", previous), pick("b", latest)


@login_required
@require_GET
def entry_detail(request, pk: int):
    entry = get_for_user(MemoryEntry.objects.select_related("store", "team", "superseded_by"), request.user, pk=pk)
    versions = list(
        MemoryVersion.objects.filter(entry=entry)
        .select_related("author_user", "author_key", "session")
        .defer("session__events", "session__metadata")
        .order_by("-number")
    )
    a, b = _version_pair(request, versions)
    segments = word_diff(a.content if a else "", b.content if b else "")
    membership = membership_for(request.user, entry.team_id)
    context = {
        "entry": entry,
        "store": entry.store,
        "team": entry.team,
        "versions": versions,
        "a": a,
        "b": b,
        "segments": segments,
        "diff_stats": stats(segments),
        "can_revert": membership is not None and membership.allows(Role.REVIEWER),
        "can_curate": membership is not None and membership.allows(Role.REVIEWER),
        "supersedes": list(entry.supersedes.only("id", "key", "team", "superseded_by")),
    }
    if request.htmx and request.htmx.target == "version-diff":
        return render(request, "memory/entry.html#version-diff", context)
    return render(request, "memory/entry.html", context)


@login_required
@require_POST
def revert(request, pk: int):
    """Bring back an earlier version as a new one. The form names the version the person saw: if someone changed the
    entry meanwhile, nothing is written and the page says so."""
    entry = get_for_user(MemoryEntry.objects.all(), request.user, role=Role.REVIEWER, pk=pk)
    form = RevertForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Pick a version to revert to.")
        return redirect("memory:entry", pk=entry.pk)
    number = form.cleaned_data["number"]
    if not MemoryVersion.objects.filter(entry=entry, number=number).exists():
        messages.error(request, f"There is no version {number}.")
        return redirect("memory:entry", pk=entry.pk)
    try:
        updated = services.revert_entry(
            entry,
            to_number=number,
            base_version=form.cleaned_data["base_version"],
            author=services.Author.person(request.user),
            reason=form.cleaned_data.get("reason") or "",
        )
    except services.StaleWrite:
        messages.error(request, "Not reverted: the entry changed since you opened it. Here is its latest state.")
    except services.ArchivedEntry:
        messages.error(request, f"Not reverted: version {number} is archived too. Pick an active version to restore.")
    except services.InvalidChange as exc:
        old = MemoryVersion.objects.filter(entry=entry, number=number).values_list("content", flat=True).first()
        if over := services.content_oversize(old or ""):  # an old text past today's size limit, said for people
            messages.error(
                request,
                f"Not reverted: version {number} is {over[0]:,} bytes, over the {over[1]:,}-byte limit an entry has "
                "now. Edit the entry to a shorter text instead.",
            )
        else:
            messages.error(request, f"Not reverted: {exc}.")
    else:
        messages.success(request, f"Reverted to version {number}, saved as version {updated.version}.")
    return redirect("memory:entry", pk=entry.pk)
