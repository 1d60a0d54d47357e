"""Personas, in the healthchecks style: alice reviews team A, victor only views it, adam administers it, bob is a
reviewer of team B. Every mutating page and endpoint is tested against them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dreamweb.models import Role

from .factories import MembershipFactory, StoreFactory, TeamFactory, UserFactory
from .scoping import all_teams


@dataclass
class World:
    team_a: object
    team_b: object
    store_a: object
    store_b: object
    alice: object  # reviewer of A
    victor: object  # viewer of A
    adam: object  # admin of A
    bob: object  # reviewer of B


@pytest.fixture
def world(db) -> World:
    with all_teams():
        return _world()


def _world() -> World:
    team_a = TeamFactory(slug="team-a", name="Team A")
    team_b = TeamFactory(slug="team-b", name="Team B")
    alice, victor, adam, bob = (UserFactory(username=n) for n in ("alice", "victor", "adam", "bob"))
    MembershipFactory(team=team_a, user=alice, role=Role.REVIEWER)
    MembershipFactory(team=team_a, user=victor, role=Role.VIEWER)
    MembershipFactory(team=team_a, user=adam, role=Role.ADMIN)
    MembershipFactory(team=team_b, user=bob, role=Role.REVIEWER)
    store_a = StoreFactory(team=team_a, slug="eng")
    store_b = StoreFactory(team=team_b, slug="ops")
    return World(team_a, team_b, store_a, store_b, alice, victor, adam, bob)


__all__ = ["World", "world"]
