"""Team-scoped querysets: the only way views, API and tasks reach team-owned rows.

Every team-owned model has a ``team`` foreign key and a manager built on TeamQuerySet, so a new view starts from
``Model.objects.for_user(user)`` or ``.for_agent_key(key)`` and cannot forget the team.
"""

from __future__ import annotations

from django.db import models

# dreamweb.models builds its managers on TeamQuerySet, so the two modules need each other: models are looked up
# when a query is built, not when this module loads.


def team_key(name: str) -> models.UniqueConstraint:
    """``(id, team)`` unique: what the composite foreign keys of other team-owned rows point at, so that the
    database refuses a row that references another team's row (dreamweb.rls.same_team_foreign_keys)."""
    return models.UniqueConstraint(fields=["id", "team"], name=name)


def role_at_least(role: str) -> list[str]:
    from .models import ROLE_RANK

    return [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]


class TeamQuerySet(models.QuerySet):
    def for_team(self, team):
        return self.filter(team=team)

    def for_user(self, user, role: str = "viewer", *, team=None):
        """Rows of the teams where the user holds at least ``role``; only ``team``'s when given (a page listing
        the team it shows)."""
        if user is None or not user.is_authenticated:
            return self.none()
        from .models import Membership

        team_ids = Membership.objects.filter(user=user, role__in=role_at_least(role)).values("team_id")
        rows = self.filter(team_id__in=team_ids)
        return rows if team is None else rows.filter(team=team)

    def for_agent_key(self, key):
        if key is None:
            return self.none()
        return self.filter(team_id=key.team_id)
