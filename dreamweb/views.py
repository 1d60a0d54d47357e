"""Pages of the tenancy app: home, health, the team switcher and the agent keys of a team (admins).

``current_membership(request)`` is the one place that decides which team a page lists: the team picked in the
switcher when the person still belongs to it, else their first team. Objects opened by id go through the gates
instead (dreamweb.gates), so a link to another of the person's teams still works.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, connection, transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .forms import AgentKeyForm
from .gates import NoTeam, get_for_user, require_role
from .models import AgentKey, Membership, Role, Team

SESSION_TEAM = "dw_team_id"


def memberships(request) -> list[Membership]:
    """The signed-in person's memberships, loaded once per request (the header and the page share them)."""
    cached = getattr(request, "_dw_memberships", None)
    if cached is None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            cached = []
        else:
            cached = list(Membership.objects.filter(user=user).select_related("team").order_by("team__slug"))
        request._dw_memberships = cached
    return cached


def current_membership(request) -> Membership | None:
    mine = memberships(request)
    wanted = request.session.get(SESSION_TEAM) if hasattr(request, "session") else None
    for membership in mine:
        if membership.team_id == wanted:
            return membership
    return mine[0] if mine else None


def current_team_or_404(request) -> Membership:
    membership = current_membership(request)
    if membership is None:
        raise NoTeam("You are not a member of any team yet.")
    return membership


def safe_next(request, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        return target
    return fallback


@login_required
def home(request):
    if not memberships(request):
        return no_team(request)
    return redirect("reviews:queue")


def no_team(request):
    """What a signed-in person in no team sees instead of a 404: how to get into one (a superuser: how to start one)."""
    return render(request, "dreamweb/no_team.html")


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico whatever a page links: the icon is one SVG among the static files."""
    return redirect(static("dreamweb/favicon.svg"), permanent=True)


def healthz(request):
    """Liveness for load balancers and compose: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


@login_required
@require_POST
def switch_team(request):
    """Remember which team the lists show. Only a team the person belongs to can be picked."""
    try:
        team_id = int(request.POST.get("team", ""))
    except ValueError as exc:
        raise Http404("No such team.") from exc
    membership = next((m for m in memberships(request) if m.team_id == team_id), None)
    if membership is None:
        raise Http404("No such team.")
    request.session[SESSION_TEAM] = team_id
    # The old page may show another team's store; the queue of the new team is the safe place to land.
    return redirect(safe_next(request, "/") if request.POST.get("keep_page") else "reviews:queue")


def _team_for_admin(request, slug: str) -> Team:
    team = get_object_or_404(Team.objects.for_user(request.user), slug=slug)
    require_role(request.user, team, Role.ADMIN)
    return team


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def agent_keys(request, slug: str):
    """List a team's agent keys and create one. The secret is in this one response and nowhere else."""
    team = _team_for_admin(request, slug)
    created = raw = None
    form = AgentKeyForm(request.POST or None, team=team)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                created, raw = AgentKey.generate(team=team, created_by=request.user, **form.key_arguments())
        except IntegrityError:
            form.add_error("name", "A key with this name exists already.")
        else:
            form = AgentKeyForm(team=team)
    keys = AgentKey.objects.for_team(team).select_related("created_by").order_by("revoked_at", "name")
    return render(
        request,
        "dreamweb/agent_keys.html",
        {"team": team, "form": form, "keys": keys, "created": created, "raw_key": raw},
        status=201 if created else 200,
    )


@login_required
@require_POST
def revoke_agent_key(request, pk: int):
    key = get_for_user(AgentKey.objects.all(), request.user, role=Role.ADMIN, pk=pk)
    if key.revoked_at is None:
        key.revoke()
        messages.success(request, f"Key “{key.name}” revoked: agents using it are refused from now on.")
    return redirect("agent-keys", slug=key.team.slug)


@login_required
@require_GET
def members(request, slug: str):
    team = get_object_or_404(Team.objects.for_user(request.user), slug=slug)
    membership = require_role(request.user, team, Role.VIEWER)
    rows = Membership.objects.for_team(team).select_related("user").order_by("user__username")
    return render(
        request, "dreamweb/members.html", {"team": team, "rows": rows, "is_admin": membership.allows(Role.ADMIN)}
    )
