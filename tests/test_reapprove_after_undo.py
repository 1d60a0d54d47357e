"""An add approved, undone, and approved again: its own archived entry comes back; any other holder of the key
stays a conflict (memory.services.revivable_by, one rule for the decision and for the card)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dreamweb.provenance import Author
from memory import services
from memory.models import MemoryEntry, MemoryVersion
from reviews.models import Proposal
from reviews.rollback import undo_decision
from reviews.services import approve

from .factories import make_entry, make_proposal
from .page_support import PageClient
from .scoping import all_teams

pytestmark = pytest.mark.django_db


def _entry(store, key):
    return MemoryEntry.objects.get(store=store, key=key)


def _queue_html(user) -> str:
    c = PageClient()
    c.force_login(user)
    return c.get(reverse("reviews:queue")).content.decode()


def test_approve_undo_approve_again_brings_the_same_entry_back_as_a_new_version(world):
    with all_teams():
        p = approve(make_proposal(world.store_a), user=world.alice)
        key = p.write_key
        undo_decision(p, user=world.alice)
        assert _entry(world.store_a, key).status == "archived"
        p = approve(Proposal.objects.get(pk=p.pk), user=world.alice, reason="again")
        assert p.status == "applied", p.decision_reason
        entry = _entry(world.store_a, key)
        assert entry.status == "active" and entry.content == p.content
        history = list(MemoryVersion.objects.filter(entry=entry).order_by("number"))
        assert [(v.operation, v.status) for v in history] == [
            ("create", "active"),
            ("rollback", "archived"),
            ("restore", "active"),
        ], [(v.operation, v.status) for v in history]
        assert history[-1].proposal_id == p.pk and p.applied_versions == [history[-1].pk]
        # And the second approval undoes like the first.
        undo_decision(Proposal.objects.get(pk=p.pk), user=world.alice)
        assert _entry(world.store_a, key).status == "archived"


def test_the_edited_text_of_the_second_approval_is_what_comes_back(world):
    with all_teams():
        p = approve(make_proposal(world.store_a), user=world.alice)
        undo_decision(p, user=world.alice)
        p = approve(Proposal.objects.get(pk=p.pk), user=world.alice, content="Release with `make release` only.")
        assert p.status == "applied", p.decision_reason
        assert _entry(world.store_a, p.write_key).content == "Release with `make release` only."


@pytest.mark.parametrize("holder", ["person", "other_proposal", "own_but_active"])
def test_any_other_holder_of_the_key_stays_a_conflict(world, holder):
    with all_teams():
        p = make_proposal(world.store_a)
        key = p.write_key
        if holder == "person":  # a person's entry, archived: not the proposal's to revive
            e = make_entry(world.store_a, key=key, content="Someone's own note.")
            services.archive_entry(e, base_hash=e.content_hash, author=Author.person(world.alice))
        elif holder == "other_proposal":  # another proposal's undone add
            other = approve(make_proposal(world.store_a, key_hint=key, content="Other text."), user=world.alice)
            assert other.write_key == key, other.decision_reason
            undo_decision(other, user=world.alice)
        else:  # its own entry, still active (undone, then restored by a person): nothing to revive
            p = approve(p, user=world.alice)
            undo_decision(p, user=world.alice)
            e = _entry(world.store_a, key)
            services.restore_entry(e, base_hash=e.content_hash, author=Author.person(world.alice))
            p = Proposal.objects.get(pk=p.pk)
        before = MemoryVersion.objects.filter(entry__store=world.store_a, entry__key=key).count()
        held = _entry(world.store_a, key)
        p = approve(p, user=world.alice)
        assert p.status == "conflict", p.status
        assert MemoryVersion.objects.filter(entry__store=world.store_a, entry__key=key).count() == before
        assert _entry(world.store_a, key).status == held.status


def test_the_card_of_an_undone_add_offers_approval_and_another_proposal_with_that_key_does_not(world):
    with all_teams():
        p = approve(make_proposal(world.store_a), user=world.alice)
        undo_decision(p, user=world.alice)
    html = _queue_html(world.alice)
    assert "Choose another key" not in html
    with all_teams():
        make_proposal(world.store_a, key_hint=p.write_key, content="A different lesson wanting the same key.")
    assert "Choose another key" in _queue_html(world.alice)
