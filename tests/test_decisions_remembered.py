# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""A lesson a reviewer rejected is not proposed again in any store of the team unless new evidence raises its
prevalence; then its card shows the earlier decision: who, when, why."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviews import services
from reviews.models import Proposal, ProposalStatus

from .dream_sessions import corrected_command, ingest, session_doc
from .factories import StoreFactory
from .page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = pytest.mark.all_teams


def _lesson(prefix: str, n: int, start: int = 0) -> list[dict]:
    return [session_doc(f"{prefix}-{i}", corrected_command(i), agent="deploy-bot", minute=start + i) for i in range(n)]


def test_a_rejected_lesson_is_not_proposed_again_in_a_sibling_store(client, world, cycle):
    support = StoreFactory(team=world.team_a, slug="support")
    ingest(world.team_a, _lesson("a", 4))
    first = cycle(world.store_a)
    (rejected,) = Proposal.objects.filter(run=first)
    services.reject(rejected, user=world.alice, reason="make release is being retired")

    # The sibling store's dream reads the same sessions: the same lesson, no more evidence: not proposed again.
    again = cycle(support)
    assert not Proposal.objects.filter(run=again).exists()
    assert again.outcome.suppressed_rejected == 1

    # More sessions show it again: proposed, and its card says who rejected it before, when and why.
    ingest(world.team_a, _lesson("b", 3, start=20))
    later = cycle(support, all_sessions=True)
    (proposal,) = Proposal.objects.filter(run=later)
    assert proposal.status == ProposalStatus.PENDING and proposal.prevalence_sessions == 7
    client.force_login(world.alice)
    html = client.get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    earlier = html[html.index("Earlier decisions on this change") :]
    assert "Rejected" in earlier and "by alice" in earlier and "in eng" in earlier
    assert "make release is being retired" in earlier


def test_a_rejection_in_another_team_is_not_this_teams_decision(world, cycle):
    """Team B rejected the same lesson: team A's dream proposes it all the same (decisions stay in their team)."""
    ingest(world.team_b, [dict(d, external_id=f"tb-{d['external_id']}") for d in _lesson("x", 4)])
    other = cycle(world.store_b)
    (theirs,) = Proposal.objects.filter(run=other)
    services.reject(theirs, user=world.bob, reason="not for us")
    ingest(world.team_a, _lesson("x", 4))
    mine = cycle(world.store_a)
    (proposal,) = Proposal.objects.filter(run=mine)
    assert proposal.signature == theirs.signature and proposal.status == ProposalStatus.PENDING
