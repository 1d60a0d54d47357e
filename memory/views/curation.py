"""People curate memory directly: create, edit, archive, restore, pin and unpin an entry.

Every change goes through memory.services (a new version with its author and reason) and names the version the
person's page was loaded with: if someone changed the entry meanwhile, nothing is written, the page says so and
shows the current state (an edit keeps the person's text in the form). Reviewers and admins only; another team's
store or entry is a 404 (dreamweb.gates.get_for_user). Every form works without JavaScript (POST, then a redirect
with a message); with htmx the action buttons are boosted, so the page refreshes in place.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from dreamweb.gates import get_for_user
from dreamweb.models import Role
from dreamweb.provenance import Author, Provenance

from .. import services
from ..models import MemoryEntry, MemoryStore
from .forms import EntryActionForm, EntryForm

CURATOR = Role.REVIEWER


def _initial(entry: MemoryEntry) -> dict:
    return {
        "content": entry.content,
        "scope_agent": entry.scope_agent or "",
        "scope_task": entry.scope_task or "",
        "tags": ", ".join(entry.tags or []),
        # As the form shows them (to the minute), so that a date sent back untouched counts as unchanged.
        "valid_from": _to_the_minute(entry.valid_from),
        "valid_until": _to_the_minute(entry.valid_until),
        "base_version": entry.version,
    }


def _to_the_minute(moment):
    return moment.replace(second=0, microsecond=0) if moment else moment


EDITABLE = ("content", "scope_agent", "scope_task", "tags", "valid_from", "valid_until")


@login_required
@require_http_methods(["GET", "POST"])
def entry_create(request, store_pk: int):
    store = get_for_user(MemoryStore.objects.select_related("team"), request.user, role=CURATOR, pk=store_pk)
    form = EntryForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            entry = services.create_entry(
                store,
                key=d["key"],
                content=d["content"],
                author=Author.person(request.user),
                scope_agent=d["scope_agent"],
                scope_task=d["scope_task"],
                tags=d["tags"],
                valid_from=d["valid_from"],
                valid_until=d["valid_until"],
                provenance=Provenance(reason=d["reason"]),
            )
        except services.EntryExists:
            form.add_error("key", "An entry with this key exists in this store already.")
        except services.InvalidChange as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Created {entry.key} (version 1).")
            return redirect("memory:entry", pk=entry.pk)
    context = {"form": form, "store": store, "team": store.team, "entry": None}
    return render(request, "memory/entry_form.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def entry_edit(request, pk: int):
    entry = get_for_user(MemoryEntry.objects.select_related("store", "team"), request.user, role=CURATOR, pk=pk)
    form = EntryForm(request.POST or None, initial=_initial(entry), editing=True)
    status = 200
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        # Only what the person changed: a field sent back as the form showed it (a date to the minute, a text with
        # the browser's line ends) is not a change, and an edit that changes nothing writes no version.
        changes = {name: d[name] for name in EDITABLE if name in form.changed_data}
        try:
            updated = services.update_entry(
                entry,
                base_version=d["base_version"],
                author=Author.person(request.user),
                provenance=Provenance(reason=d["reason"]),
                skip_unchanged=True,
                **changes,
            )
        except services.StaleWrite as exc:
            entry = exc.entry
            status = 412
            form.add_error(
                None,
                f"Not saved: someone changed this entry since you opened it (now version {entry.version}). "
                "Your text is kept below; the current text is shown beside it. Save again to replace it.",
            )
            # The next save is prepared against what the person now sees.
            data = request.POST.copy()
            data["base_version"] = entry.version
            form.data = data
        except services.ArchivedEntry:
            messages.error(request, f"Not saved: {entry.key} is {entry.status}. Restore it first.")
            return redirect("memory:entry", pk=entry.pk)
        except services.InvalidChange as exc:
            form.add_error(None, str(exc))
        else:
            if updated.version == d["base_version"]:
                messages.info(request, f"Nothing changed: {updated.key} stays at version {updated.version}.")
            else:
                messages.success(request, f"Saved {updated.key} as version {updated.version}.")
            return redirect("memory:entry", pk=updated.pk)
    if form.errors and status == 200:
        status = 400
    context = {"form": form, "store": entry.store, "team": entry.team, "entry": entry, "stale": status == 412}
    return render(request, "memory/entry_form.html", context, status=status)


def _act(request, pk: int, verb: str, write, done: str):
    """One state change on the entry page (archive, restore, pin, unpin): the gate, the form, the service, a message."""
    entry = get_for_user(MemoryEntry.objects.all(), request.user, role=CURATOR, pk=pk)
    form = EntryActionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not {verb}: the page lost the version it showed. Here is the entry again.")
        return redirect("memory:entry", pk=entry.pk)
    try:
        updated = write(
            entry,
            base_version=form.cleaned_data["base_version"],
            author=Author.person(request.user),
            provenance=Provenance(reason=form.cleaned_data.get("reason") or ""),
        )
    except services.StaleWrite:
        messages.error(request, f"Not {verb}: the entry changed since you opened it. Here is its latest state.")
    except services.InvalidChange as exc:
        messages.error(request, f"Not {verb}: {exc}.")
    else:
        messages.success(request, f"{done} {updated.key} (version {updated.version}).")
    return redirect("memory:entry", pk=entry.pk)


@login_required
@require_POST
def archive(request, pk: int):
    return _act(request, pk, "archived", services.archive_entry, "Archived")


@login_required
@require_POST
def restore(request, pk: int):
    return _act(request, pk, "restored", services.restore_entry, "Restored")


@login_required
@require_POST
def pin(request, pk: int):
    def write(entry, **kw):
        return services.set_pinned(entry, pinned=True, **kw)

    return _act(request, pk, "pinned", write, "Pinned")


@login_required
@require_POST
def unpin(request, pk: int):
    def write(entry, **kw):
        return services.set_pinned(entry, pinned=False, **kw)

    return _act(request, pk, "unpinned", write, "Unpinned")
