# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Provenance labels follow the latest version, by one rule (dreamweb.provenance.origin_of, provenance_label): a dream
change approved by a reviewer is a dream change approved by that person, never "written by a person"; an imported
entry an agent rewrote is no longer "imported"; the same words on entry, list and skill pages."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dreamweb.models import AgentKey
from dreamweb.provenance import Author, AuthorKind, Origin, Provenance, origin_of, provenance_label
from memory.models import MemoryEntry
from memory.services import update_entry
from reviews import services
from tests.factories import make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@pytest.mark.parametrize(
    "kind, proposal, origin",
    [
        (AuthorKind.USER, None, Origin.HUMAN),
        (AuthorKind.USER, 7, Origin.DREAM),
        (AuthorKind.DREAM, 7, Origin.DREAM),
        (AuthorKind.AGENT, None, Origin.AGENT),
        (AuthorKind.SYSTEM, None, Origin.IMPORT),
    ],
)
def test_origin_of_a_version(kind, proposal, origin):
    assert origin_of(kind, proposal) == origin


def test_labels_name_who_and_how():
    assert provenance_label(AuthorKind.USER, proposal_id=3, user_name="alice") == "Dream change approved by alice"
    assert provenance_label(AuthorKind.DREAM, proposal_id=3, run_id=9) == "Dream change applied by the store's policy"
    assert provenance_label(AuthorKind.USER, user_name="adam") == "Written by adam"
    assert provenance_label(AuthorKind.USER) == "Written by a deleted user"
    assert provenance_label(AuthorKind.AGENT, key_name="ci") == "Written in-band by agent key ci"
    assert provenance_label(AuthorKind.SYSTEM) == "Imported"


def _entry_page(client, user, entry) -> str:
    client.force_login(user)
    return client.get(reverse("memory:entry", args=[entry.pk])).content.decode()


def test_approved_dream_change_is_labelled_as_such(client, world):
    proposal = make_proposal(world.store_a, content="Use make release.")
    services.approve(proposal, user=world.alice)
    entry = MemoryEntry.objects.get(store=world.store_a)
    assert entry.origin == Origin.DREAM
    html = _entry_page(client, world.victor, entry)
    assert "Dream change approved by alice" in html
    assert "written by a person" not in html.lower()


def test_agent_rewrite_of_an_imported_entry_is_no_longer_imported(client, world):
    entry = make_entry(world.store_a, key="deploy")
    assert entry.origin == Origin.IMPORT
    key, _ = AgentKey.generate(team=world.team_a, name="ci-bot")
    entry = update_entry(entry, base_hash=entry.content_hash, author=Author.agent(key), content="Deploy on Fridays.")
    assert entry.origin == Origin.AGENT
    html = _entry_page(client, world.victor, entry)
    assert "Written in-band by agent key ci-bot" in html.split("<h2>Current text</h2>")[0]
    listing = client.get(reverse("memory:entries", args=[world.store_a.pk])).content.decode()
    assert 'origin-agent"' in listing and "origin-import" not in listing


def test_a_person_editing_a_dream_entry_makes_it_human_again(world):
    proposal = make_proposal(world.store_a, content="Use make release.")
    services.approve(proposal, user=world.alice)
    entry = MemoryEntry.objects.get(store=world.store_a)
    entry = update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Release.")
    assert entry.origin == Origin.HUMAN
    entry = update_entry(
        entry, base_hash=entry.content_hash, author=Author.dream(4), content="R.", provenance=Provenance(proposal_id=9)
    )
    assert entry.origin == Origin.DREAM


def test_policy_applied_change_says_policy(client, world):
    proposal = make_proposal(world.store_a, content="Use make release.")
    services.apply_proposal(proposal, author=Author.dream(proposal.run_id))
    entry = MemoryEntry.objects.get(store=world.store_a)
    assert "Dream change applied by the store&#x27;s policy" in _entry_page(client, world.victor, entry)
