"""Tenancy services: creating a team.

The application role cannot see other teams (dreamweb.rls), so a team cannot be created the usual way (insert, let
the database pick the id): the row would not be in any scope the role may write. Its id is drawn from the sequence
first and the row written inside that id's own scope; an existing slug is found through the database's slug lookup.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from . import rls
from .models import Membership, Role, Team


def _existing(slug: str) -> Team | None:
    team_id = rls.team_id_for_slug(slug)
    if team_id is None:
        return None
    with rls.team_scope(team_id):
        return Team.objects.get(pk=team_id)


def create_team(slug: str, name: str, *, admin=None) -> tuple[Team, bool]:
    """The team with this slug, created with this name when there is none; returns (team, created). ``admin``: a
    person who becomes the new team's admin (the Django admin's creator, who could not see the team otherwise)."""
    team = _existing(slug)
    if team is not None:
        return team, False
    team_id = rls.new_team_id()
    try:
        with rls.scope([team_id] if team_id is not None else ""), transaction.atomic():
            team = Team.objects.create(pk=team_id, slug=slug, name=name)
            if admin is not None:
                Membership.objects.create(team=team, user=admin, role=Role.ADMIN)
            return team, True
    except IntegrityError:
        team = _existing(slug)  # created by someone else meanwhile
        if team is None:
            raise
        return team, False
