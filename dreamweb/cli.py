"""Helpers shared by management commands: finding a team by slug (a cross-team lookup, so it runs in the system
scope) with an error that says what to do."""

from __future__ import annotations

from django.core.management.base import CommandError

from . import rls
from .models import Team


def get_team(slug: str) -> Team:
    with rls.system_scope():
        team = Team.objects.filter(slug=slug).first()
    if team is None:
        raise CommandError(f"no team {slug!r}; create it first with: python manage.py create_team {slug}")
    return team
