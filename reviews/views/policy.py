"""A store's autonomy policy: everyone in the team reads it, admins change it, and every change is audited."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from dreamweb.gates import get_for_user, membership_for
from dreamweb.models import Role
from memory.models import MemoryStore
from memory.sessions import agent_sources, describe_source

from .. import services
from ..forms import PolicyForm
from ..models import AutonomyPolicy, PolicyChange


@login_required
@require_http_methods(["GET", "POST"])
def policy(request, store_pk: int):
    store = get_for_user(MemoryStore.objects.select_related("team"), request.user, pk=store_pk)
    is_admin = membership_for(request.user, store.team_id).allows(Role.ADMIN)
    if request.method == "POST" and not is_admin:
        raise PermissionDenied("Only the team's admins change autonomy policies.")
    current = AutonomyPolicy.objects.filter(store=store).first() or AutonomyPolicy(store=store, team=store.team)
    form = PolicyForm(request.POST or None, instance=AutonomyPolicy(store=store, team=store.team))
    if request.method == "GET":
        form = PolicyForm(instance=current, initial={"agents": list(store.agents or [])})
    elif form.is_valid():
        values = {name: form.cleaned_data[name] for name in (*services.POLICY_FIELDS, *services.STORE_FIELDS)}
        values = {name: value for name, value in values.items() if value is not None or name != "min_sources"}
        _, change = services.update_policy(store, user=request.user, values=values)
        if change is None:
            messages.info(request, "Nothing changed.")
        else:
            messages.success(request, f"Policy saved ({', '.join(change.changes)} changed).")
        return redirect("reviews:policy", store_pk=store.pk)
    if not is_admin:
        for field in form.fields.values():
            field.disabled = True
    history = []
    shared_source = _one_key_for_all(store)
    if current.pk:
        history = PolicyChange.objects.filter(policy=current).select_related("changed_by").order_by("-created_at")[:100]
    return render(
        request,
        "reviews/policy.html",
        {
            "store": store,
            "form": form,
            "history": history,
            "is_admin": is_admin,
            "policy": current,
            "team": store.team,
            "shared_source": shared_source,
        },
    )


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
