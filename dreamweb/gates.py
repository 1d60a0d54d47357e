"""One gate per object type: load an object for a person, 404 when their team cannot see it, 403 when their role
is too low. Views call these instead of filtering by hand."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404

from .models import Membership, Role


class NoTeam(Http404):
    """The person belongs to no team, so a page that lists one team's things has nothing to list:
    dreamweb.middleware.NoTeamMiddleware answers with a page that says what to do (not a 404)."""


def membership_for(user, team_id) -> Membership | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, team_id=team_id).first()


def get_for_user(queryset, user, *, role: str = Role.VIEWER, **lookup):
    """The object if the user's team can see it (else 404) and the user's role allows ``role`` (else 403)."""
    obj = get_object_or_404(queryset.for_user(user), **lookup)
    membership = membership_for(user, obj.team_id)
    if membership is None or not membership.allows(role):
        raise PermissionDenied(f"This needs the {role} role in team {obj.team_id}.")
    return obj


def require_role(user, team, role: str) -> Membership:
    membership = membership_for(user, getattr(team, "pk", team))
    if membership is None:
        raise Http404("No such team.")
    if not membership.allows(role):
        raise PermissionDenied(f"This needs the {role} role.")
    return membership
