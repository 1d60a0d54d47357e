# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""The card is written in Python (reviews.views.card_frame, card_body), not by auto-escaping templates: every value
a dream, an agent, a transcript or a person wrote is escaped wherever the card shows it (queue, proposal page, edit
card, live preview, "n more" list)."""

from __future__ import annotations

from html import escape

import pytest
from django.urls import reverse

from reviews.models import Proposal, ProposalEvidence, ProposalStatus
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def evil(field: str) -> str:
    """Markup, both quotes and an ampersand (short: some columns hold 40 characters), named after the field so that
    each one is checked on its own."""
    return f"<i>{field}</i>\"'&amp;"


def assert_escaped(html: str, *fields: str) -> None:
    """Each field's value is shown whole and escaped, never as markup."""
    for field in fields:
        assert f"<i>{field}" not in html, f"{field} is markup"
        assert escape(evil(field)) in html, f"{field} is not shown escaped"


def assert_not_markup(html: str, *fields: str) -> None:
    """For text shown in a diff (cut into segments at words and marks, each escaped): shown, never as markup (no
    page of these tests has an <i> element: every one would come from a value)."""
    assert "<i>" not in html and "&lt;i&gt;" in html
    for field in fields:
        assert f">{field}<" in html, f"{field} is not shown"


@pytest.fixture
def evil_card(world):
    store = world.store_a
    store.name = evil("store")
    store.save()
    entry = make_entry(store, key="deploy", content=evil("old clause") + " Connect first.")
    other = make_entry(store, key="other", content="Deploy with care.")
    sessions = [
        SessionFactory(
            team=world.team_a,
            external_id=evil(f"external{i}"),
            agent=evil(f"agent{i}"),
            task=evil(f"task{i}"),
        )
        for i in range(5)
    ]
    proposal = make_proposal(
        store,
        operation="merge",
        targets=["deploy", "other"],
        content=evil("content"),
        rationale=evil("rationale"),
        risk_reasons=[evil("reason")],
        scope_agent=evil("scope agent"),
        scope_task=evil("scope task"),
        kind=evil("kind"),
        original_content=evil("original"),
        evidence_count=0,
    )
    for i, session in enumerate(sessions):
        ProposalEvidence.objects.create(
            team_id=store.team_id,
            proposal=proposal,
            session=session,
            event_index=1,
            excerpt=evil(f"excerpt{i}"),
            context=[[0, evil(f"label{i}"), evil(f"line{i}")], [1, "result", "cited"]],
        )
    skill_add = make_proposal(
        store, target_kind="skill", key_hint=evil("skill key"), content="A skill.", rationale="", evidence_count=1
    )
    return proposal, skill_add, entry, other


def test_every_value_on_a_queue_card_is_escaped(client, world, evil_card):
    client.force_login(world.alice)
    html = client.get(reverse("reviews:queue")).content.decode()
    assert_escaped(html, "store", "rationale", "reason", "scope agent", "scope task", "kind")
    assert_escaped(html, "skill key", "old clause")  # a skill add's key; a merge's dropped clause
    assert_not_markup(html, "content", "original")  # the merge's diff, the reviewer's edit against the dream's text
    # The three sessions shown: their names, agents, tasks, outcomes, excerpts and context lines.
    shown = [i for i in range(5) if escape(evil(f"external{i}")) in html]
    assert len(shown) == 3
    for i in shown:
        assert_escaped(html, f"external{i}", f"agent{i}", f"task{i}", f"excerpt{i}", f"label{i}", f"line{i}")


def test_every_value_on_the_proposal_page_edit_card_and_more_list_is_escaped(client, world, evil_card):
    proposal, *_ = evil_card
    client.force_login(world.alice)
    page = client.get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    # The proposal's page lists every session, the "n more" ones with their agents and (cut) excerpts.
    assert_escaped(page, *(f"external{i}" for i in range(5)), *(f"agent{i}" for i in range(5)))
    assert_escaped(page, *(f"excerpt{i}" for i in range(5)))
    more = client.get(reverse("reviews:evidence", args=[proposal.pk])).content.decode()
    assert "<i>" not in more and more.count("&lt;i&gt;excerpt") == 2
    edit = client.get(reverse("reviews:edit", args=[proposal.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert_escaped(edit, "content", "rationale", "reason", "store")  # the text to edit is whole in its box
    preview = client.post(reverse("reviews:preview", args=[proposal.pk]), {"content": evil("typed")})
    assert_not_markup(preview.content.decode(), "typed")


def test_a_decided_cards_reason_and_decider_are_escaped(client, world, evil_card):
    proposal, *_ = evil_card
    Proposal.objects.filter(pk=proposal.pk).update(status=ProposalStatus.REJECTED, decision_reason=evil("decision"))
    client.force_login(world.alice)
    page = client.get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    assert 'class="status-banner status-rejected"' in page
    assert_escaped(page, "decision")
    assert_not_markup(page, "content")
