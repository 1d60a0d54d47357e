"""Pages of the tenancy app: home, health, the team switcher and the agent keys of a team (admins).

``current_membership(request)`` is the one place that decides which team a page lists: the team picked in the
switcher when the person still belongs to it, else their first team. Objects opened by id go through the gates
instead (dreamweb.gates), so a link to another of the person's teams still works.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.db import IntegrityError, connection, transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from . import members as members_service
from .forms import ALL_STORES, ALL_STORES_LABEL, AgentKeyForm, MemberAddForm
from .gates import NoTeam, get_for_user, require_role
from .models import AgentKey, Invitation, Membership, MembershipChange, Role, Team

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
    keys = list(AgentKey.objects.for_team(team).select_related("created_by").order_by("revoked_at", "name"))
    names = {ALL_STORES: ALL_STORES_LABEL, **team.store_names()}
    for key in keys:  # the stores by name, as every other page shows them (a key keeps slugs)
        key.writable_store_names = [names.get(slug, slug) for slug in key.writable_stores]
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
        # Revoking is final (a revoked key never works again), so the message says so and where the way on is.
        new_key = reverse("agent-keys", args=[key.team.slug]) + "#new-key-form"
        messages.success(
            request,
            format_html(
                "Key “{}” revoked: agents using it are refused from now on. This cannot be undone; "
                '<a href="{}">create a new key</a> for the agents that still need one.',
                key.name,
                new_key,
            ),
        )
    return redirect("agent-keys", slug=key.team.slug)


@login_required
@require_GET
def members(request, slug: str):
    """The team's members; for an admin also the forms to add, invite, change a role and remove, the open invitations
    and the history of changes. A fixed number of queries whatever the number of members."""
    team = get_object_or_404(Team.objects.for_user(request.user), slug=slug)
    membership = require_role(request.user, team, Role.VIEWER)
    return _members_page(request, team, membership)


def _members_page(request, team, membership, *, invite_link: str = "", add_form=None, status: int = 200):
    is_admin = membership.allows(Role.ADMIN)
    rows = list(Membership.objects.for_team(team).select_related("user").order_by("user__username"))
    admins = sum(1 for m in rows if m.role == Role.ADMIN)
    context = {
        "team": team,
        "rows": rows,
        "is_admin": is_admin,
        "roles": Role.choices,
        "last_admin": admins == 1,
        "invite_link": invite_link,
        "add_form": add_form or MemberAddForm(),
    }
    if is_admin:
        context["invitations"] = list(Invitation.objects.for_team(team).open().select_related("created_by"))
        context["history"] = list(MembershipChange.objects.for_team(team).order_by("-created_at", "-id")[:50])
    return render(request, "dreamweb/members.html", context, status=status)


def _member_action(view):
    """An admin's POST on the members page: the team by slug (404 outside it), the admin role (403), then the
    service; a refusal is shown as a message. Returns to the members page."""

    @login_required
    @require_POST
    def wrapper(request, slug: str, **kwargs):
        team = _team_for_admin(request, slug)
        try:
            response = view(request, team, **kwargs)
        except members_service.MemberError as exc:
            messages.error(request, str(exc))
            response = None
        return response or redirect("members", slug=team.slug)

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return wrapper


@_member_action
def add_member(request, team):
    """Add an existing account by username or e-mail address. A refusal (no such account, a member already) comes
    back as the page itself, the reason at the field and what was typed kept: a redirect would lose both."""
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            added = members_service.add_member(team, by=request.user, **form.cleaned_data)
        except members_service.MemberError as exc:
            form.add_error("identifier", str(exc))
            messages.error(request, str(exc))  # announced by the page's live region too
        else:
            messages.success(
                request, f"{added.user.get_username()} is now a {added.get_role_display().lower()} of {team.name}."
            )
            return None
    membership = require_role(request.user, team, Role.ADMIN)
    return _members_page(request, team, membership, add_form=form)


@_member_action
def invite_member(request, team):
    """Make an invitation link (shown once, on the page this answers with)."""
    invitation, token = members_service.create_invitation(
        team, by=request.user, role=request.POST.get("role", ""), note=request.POST.get("note", "")
    )
    link = request.build_absolute_uri(reverse("join", args=[team.slug, token]))
    membership = require_role(request.user, team, Role.ADMIN)
    return _members_page(request, team, membership, invite_link=link, status=201)


@_member_action
def change_member_role(request, team, pk: int):
    changed = members_service.change_role(team, by=request.user, membership_id=pk, role=request.POST.get("role", ""))
    messages.success(request, f"{changed.user.get_username()}'s role is now {changed.get_role_display()}.")


@_member_action
def remove_member(request, team, pk: int):
    removed = members_service.remove_member(team, by=request.user, membership_id=pk)
    messages.success(request, f"{removed.user.get_username()} was removed from {team.name}.")
    if removed.user_id == request.user.pk:
        return redirect("home")
    return None


@_member_action
def revoke_invitation(request, team, pk: int):
    members_service.revoke_invitation(team, by=request.user, invitation_id=pk)
    messages.success(request, "Invitation revoked: its link no longer works.")


@never_cache
@require_http_methods(["GET", "POST"])
def join(request, slug: str, token: str):
    """Open an invitation link: sign in (or create an account) and join the team with the invitation's role. A link
    that is unknown, used, revoked or expired is a 404, whoever opens it."""
    invitation = members_service.open_invitation(slug, token)
    if invitation is None:
        raise Http404("No such invitation.")
    signup = None
    if request.method == "POST":
        if not request.user.is_authenticated:
            signup = UserCreationForm(request.POST)
            if not signup.is_valid():
                return render(request, "dreamweb/join.html", {"invitation": invitation, "signup": signup}, status=400)
            user = signup.save()
            auth_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        try:
            membership = members_service.accept_invitation(invitation, user=request.user)
        except members_service.MemberError as exc:
            messages.error(request, str(exc))
            return redirect("home")
        request.session[SESSION_TEAM] = membership.team_id
        messages.success(
            request, f"Welcome to {invitation.team.name}: you are a {membership.get_role_display().lower()}."
        )
        return redirect("reviews:queue")
    if not request.user.is_authenticated:
        signup = UserCreationForm()
    return render(request, "dreamweb/join.html", {"invitation": invitation, "signup": signup})
