"""Who may decide a proposal (approve, edit, reject, bulk): one definition for every page that asks."""

from __future__ import annotations

from dreamweb.gates import get_for_user, membership_for
from dreamweb.models import Membership, Role

from ..models import Proposal
from . import cards

DECIDER = Role.REVIEWER


def may_decide(membership: Membership | None) -> bool:
    return membership is not None and membership.allows(DECIDER)


def may_decide_on(user, proposal: Proposal) -> bool:
    return may_decide(membership_for(user, proposal.team_id))


def proposal_for(request, pk: int, *, deciding: bool = True) -> Proposal:
    """A proposal with its card data: 404 outside the person's teams, 403 when deciding needs a role they lack."""
    role = DECIDER if deciding else Role.VIEWER
    return get_for_user(cards.with_card_data(Proposal.objects.all()), request.user, role=role, pk=pk)


def decidable(user):
    """The proposals this person may decide (the others are not even looked at)."""
    return Proposal.objects.for_user(user, role=DECIDER)
