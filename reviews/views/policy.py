"""A store's autonomy policy: everyone in the team reads it, admins change it, and every change is audited.

Before saving, the page previews the policy's impact (``reviews.policy_impact``): what it would apply among the
waiting proposals and among the last 30 days' (beside what reviewers decided about them). Once saved, an admin can
apply the waiting proposals it allows, through the same checks a dream's policy step makes."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from dreamweb.gates import get_for_user, membership_for
from dreamweb.models import Role
from memory.models import MemoryStore
from memory.sessions import agent_sources, describe_source

from .. import policy_impact, services
from ..analysis import registry
from ..forms import PolicyForm
from ..models import AutonomyPolicy, PolicyChange


def _store(request, store_pk: int, *, admin: bool):
    store = get_for_user(MemoryStore.objects.select_related("team"), request.user, pk=store_pk)
    is_admin = membership_for(request.user, store.team_id).allows(Role.ADMIN)
    if admin and not is_admin:
        raise PermissionDenied("Only the team's admins change autonomy policies.")
    return store, is_admin


@login_required
@require_http_methods(["GET", "POST"])
def policy(request, store_pk: int):
    store, is_admin = _store(request, store_pk, admin=request.method == "POST")
    current = AutonomyPolicy.objects.filter(store=store).first() or AutonomyPolicy(store=store, team=store.team)
    # The htmx preview is a GET without the CSRF token; the no-JS "Preview impact" button posts the form (a GET would
    # put the form's CSRF token in the URL, hence in logs and history) and saves nothing.
    previewing = "preview" in (request.POST if request.method == "POST" else request.GET)
    draft = current
    if request.method == "POST" and not previewing:
        form = PolicyForm(request.POST, instance=AutonomyPolicy(store=store, team=store.team))
        if form.is_valid():
            values = {name: form.cleaned_data[name] for name in (*services.POLICY_FIELDS, *services.STORE_FIELDS)}
            saved, change = services.update_policy(store, user=request.user, values=values)
            if change is None:
                messages.info(request, "Nothing changed.")
            else:
                labels = PolicyForm.labels()
                messages.success(request, f"Policy saved ({', '.join(labels.get(n, n) for n in change.changes)}).")
                waiting = policy_impact.impact(store, saved).pending_allowed
                if "mode" in change.changes and waiting:
                    messages.info(
                        request,
                        f"{waiting} waiting proposal{'s' if waiting != 1 else ''} pass{'' if waiting != 1 else 'es'} "
                        "this policy. A policy acts on what the next dreams propose: these stay in the queue until "
                        "someone decides them, or you apply them below.",
                    )
            return redirect("reviews:policy", store_pk=store.pk)
        draft = None
    elif previewing:
        form = PolicyForm(
            request.POST if request.method == "POST" else request.GET,
            instance=AutonomyPolicy(store=store, team=store.team),
        )
        draft = policy_impact.draft_policy(store, form.cleaned_data) if form.is_valid() else None
    else:
        form = PolicyForm(instance=current, initial={"agents": list(store.agents or [])})
    if not is_admin:
        for field in form.fields.values():
            field.disabled = True
    context = {
        "store": store,
        "form": form,
        "is_admin": is_admin,
        "policy": current,
        "team": store.team,
        "previewing": previewing,
        "impact": policy_impact.impact(store, draft) if draft is not None else None,
        "recent_days": policy_impact.RECENT_DAYS,
        "llm_configured": registry.openai_configured(),
    }
    if previewing and request.htmx:
        return render(request, "reviews/policy.html#impact", context)
    history = []
    shared_source = _one_key_for_all(store)
    if current.pk:
        history = PolicyChange.objects.filter(policy=current).select_related("changed_by").order_by("-created_at")[:100]
    labels = PolicyForm.labels()
    context["history"] = [(c, policy_impact.readable_changes(c.changes, labels)) for c in history]
    context["shared_source"] = shared_source
    return render(request, "reviews/policy.html", context)


@login_required
@require_POST
def apply_pending(request, store_pk: int):
    """Apply the waiting proposals the saved policy allows (admins; through services.policy_allows)."""
    store, _ = _store(request, store_pk, admin=True)
    counts = policy_impact.apply_pending(store, user=request.user)
    text = f"The policy applied {counts['applied']} waiting proposal{'s' if counts['applied'] != 1 else ''}"
    if counts["conflict"]:
        text += f"; {counts['conflict']} became conflicts (their target changed since the dream)"
    if counts["left"]:
        text += f"; {counts['left']} more are left: apply again"
    messages.success(request, text + ".")
    return redirect("reviews:policy", store_pk=store.pk)


def _one_key_for_all(store: MemoryStore) -> dict | None:
    """When one credential delivered the sessions of every agent this store serves (several of them): who, and
    which agents. A dream counts them as one source, so nothing they teach applies without a reviewer."""
    sources = agent_sources(store.team_id, store.agents or ())
    if len(sources) != 1:
        return None
    ((source, agents),) = sources.items()
    if len(agents) < 2:
        return None
    return {"label": describe_source(store.team_id, source), "agents": sorted(agents)}
