"""Helpers shared by management commands: finding a team by slug (a cross-team lookup, answered by the database with
the team's id only: dreamweb.rls) with an error that says what to do."""

from __future__ import annotations

from django.core.management.base import CommandError

from . import rls
from .models import Team


def get_team(slug: str) -> Team:
    team_id = rls.team_id_for_slug(slug)
    if team_id is None:
        raise CommandError(f"no team {slug!r}; create it first with: python manage.py create_team {slug}")
    with rls.team_scope(team_id):
        return Team.objects.get(pk=team_id)
