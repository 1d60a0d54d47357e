# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""Validity and supersession: /api/v1/context/ serves only entries valid now. An expired entry (past valid_until)
or one not valid yet (valid_from ahead) stays in the store and on the pages but is never served; a superseded entry
is never served, its replacement is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dreamweb.provenance import Author
from memory import services
from memory.models import EntryStatus, MemoryEntry, Operation
from reviews import dreams, rollback
from reviews import services as review
from reviews.dreams import finalizing
from reviews.dreams.expiry import expiry_drafts
from reviews.models import DreamRun, Proposal, ProposalStatus, RunStatus
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures
from tests.factories import make_entry, make_proposal
from tests.page_support import PageClient

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def served(raw, **query) -> list[str]:
    r = Api(raw).get("/api/v1/context/", query={"store": "eng", **query})
    assert r.status_code == 200, r.json()
    return [i["key"] for i in r.json()["items"]]


def test_expiry_and_a_window_not_yet_open(world, keys):
    now = timezone.now()
    make_entry(world.store_a, key="always", content="Always true.")
    expiring = make_entry(
        world.store_a, key="freeze", content="Code freeze: no deploys.", valid_until=now + timedelta(hours=1)
    )
    make_entry(world.store_a, key="gone", content="Old freeze.", valid_until=now - timedelta(minutes=1))
    make_entry(world.store_a, key="later", content="New API from next week.", valid_from=now + timedelta(days=7))
    make_entry(world.store_a, key="begun", content="Started yesterday.", valid_from=now - timedelta(days=1))
    assert sorted(served(keys.full)) == ["always", "begun", "freeze"]
    assert sorted(served(keys.full, q="freeze deploys")) == ["always", "begun", "freeze"]

    # The hour passes: the entry expires, without any write.
    MemoryEntry.objects.filter(pk=expiring.pk).update(valid_until=now - timedelta(seconds=1))
    assert sorted(served(keys.full)) == ["always", "begun"]
    assert set(MemoryEntry.objects.expired().values_list("key", flat=True)) == {"freeze", "gone"}

    # Renewed by a person: a new version, served again.
    entry = MemoryEntry.objects.get(pk=expiring.pk)
    services.update_entry(entry, base_version=entry.version, author=Author.person(world.alice), valid_until=None)
    assert "freeze" in served(keys.full)


def test_a_contradicting_update_supersedes_the_entry_and_context_serves_only_the_replacement(world, keys):
    old = make_entry(
        world.store_a, key="deploy-command", content="Deploy with make ship.", scope_agent="bot", pinned=True
    )
    make_entry(world.store_a, key="other", content="Unrelated.")
    assert "deploy-command" in served(keys.full, agent="bot")
    proposal = make_proposal(
        world.store_a,
        operation="update",
        targets=["deploy-command"],
        content="Deploy with make release.",
        kind="stale",
        scope_agent="bot",
    )
    assert proposal.supersedes
    assert review.approve(proposal, user=world.alice).status == ProposalStatus.APPLIED

    old.refresh_from_db()
    new = MemoryEntry.objects.get(store=world.store_a, key="deploy-command-v2")
    assert (old.status, old.superseded_by, old.content) == (EntryStatus.SUPERSEDED, new, "Deploy with make ship.")
    assert (new.content, new.scope_agent, new.pinned) == ("Deploy with make release.", "bot", True)
    assert [v.operation for v in old.versions.order_by("number")] == [Operation.CREATE, Operation.SUPERSEDE]
    assert old.versions.get(number=2).superseded_by_id == new.pk  # the link is in the history too
    got = served(keys.full, agent="bot")
    assert "deploy-command" not in got and "deploy-command-v2" in got
    # Both pages say so, with the link.
    client = PageClient()
    client.force_login(world.victor)
    old_page = client.get(reverse("memory:entry", args=[old.pk])).text
    assert "Superseded by" in old_page and reverse("memory:entry", args=[new.pk]) in old_page
    assert reverse("memory:entry", args=[old.pk]) in client.get(reverse("memory:entry", args=[new.pk])).text
    # Rolled back, the old entry is served again and the replacement archived.
    rollback.undo_decision(proposal, user=world.alice)
    old.refresh_from_db()
    assert (old.status, old.superseded_by) == (EntryStatus.ACTIVE, None)
    assert served(keys.full, agent="bot").count("deploy-command") == 1 and "deploy-command-v2" not in served(
        keys.full, agent="bot"
    )


def test_an_ordinary_update_still_rewrites_in_place(world):
    make_entry(world.store_a, key="k", content="old")
    proposal = make_proposal(world.store_a, operation="update", targets=["k"], content="new", kind="corrected_command")
    assert not proposal.supersedes
    review.approve(proposal, user=world.alice)
    assert list(MemoryEntry.objects.filter(store=world.store_a).values_list("key", "content", "status")) == [
        ("k", "new", "active")
    ]


def test_a_contradiction_merge_supersedes_the_folded_entries(world, keys):
    make_entry(world.store_a, key="tabs", content="Indent with tabs.")
    make_entry(world.store_a, key="spaces", content="Indent with four spaces.")
    proposal = make_proposal(
        world.store_a,
        operation="merge",
        targets=["spaces", "tabs"],
        content="Indent with four spaces.",
        kind="contradiction",
    )
    review.approve(proposal, user=world.alice)
    tabs = MemoryEntry.objects.get(store=world.store_a, key="tabs")
    assert (tabs.status, tabs.superseded_by.key) == (EntryStatus.SUPERSEDED, "spaces")
    assert served(keys.full) == ["spaces"]


def test_a_superseded_entry_cannot_be_edited_until_restored(world):
    old = make_entry(world.store_a, key="k", content="old")
    new, old = services.supersede_entry(old, base_version=1, content="new", author=Author.person(world.alice))
    with pytest.raises(services.ArchivedEntry):
        services.update_entry(old, base_version=2, author=Author.system(), content="x")
    restored = services.restore_entry(old, base_version=2, author=Author.person(world.alice))
    assert (restored.status, restored.superseded_by_id) == (EntryStatus.ACTIVE, None)


def test_a_dream_proposes_removal_or_renewal_of_expired_entries(world, keys):
    now = timezone.now()
    make_entry(world.store_a, key="fresh", content="Still valid.", valid_until=now + timedelta(days=1))
    plain = make_entry(world.store_a, key="freeze", content="Code freeze.", valid_until=now - timedelta(days=3))
    pinned = make_entry(
        world.store_a, key="oncall", content="Page Ann.", valid_until=now - timedelta(hours=2), pinned=True
    )
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.AGGREGATING)
    drafts = {d.targets[0]: d for d in expiry_drafts(world.store_a)}
    assert set(drafts) == {"freeze", "oncall"}
    assert (drafts["freeze"].operation, drafts["freeze"].risk, drafts["freeze"].kind) == ("remove", "high", "expired")
    assert "expired on" in drafts["freeze"].rationale and "3 days ago" in drafts["freeze"].rationale
    assert "never served" in drafts["freeze"].rationale
    assert (drafts["oncall"].operation, drafts["oncall"].content) == ("update", "Page Ann.")  # pinned: renewal only
    assert "pinned" in drafts["oncall"].rationale

    # Through a real finalize: the proposals are queued; renewing serves the entry again, removal archives.
    finalizing._persist(run, list(drafts.values()))
    renew = Proposal.objects.get(store=world.store_a, targets=["oncall"])
    remove = Proposal.objects.get(store=world.store_a, targets=["freeze"])
    assert renew.renews and not remove.renews
    assert "oncall" not in served(keys.full)
    review.approve(renew, user=world.alice)
    pinned.refresh_from_db()
    assert pinned.valid_until is None and "oncall" in served(keys.full)
    review.approve(remove, user=world.alice)
    plain.refresh_from_db()
    assert plain.status == EntryStatus.ARCHIVED
    assert expiry_drafts(world.store_a) == []
    # A rejected proposal is not made again for the same expiry.
    again = make_entry(world.store_a, key="sale", content="Sale.", valid_until=now - timedelta(days=1))
    (draft,) = expiry_drafts(world.store_a)
    finalizing._persist(run, [draft])
    review.reject(Proposal.objects.get(targets=["sale"]), user=world.alice)
    assert finalizing._screen(world.store_a, expiry_drafts(world.store_a)).new == []
    services.update_entry(again, base_version=1, author=Author.system(), valid_until=now - timedelta(hours=1))
    assert len(finalizing._screen(world.store_a, expiry_drafts(world.store_a)).new) == 1


def test_a_dream_run_queues_the_expired_entries(world, django_capture_on_commit_callbacks):
    make_entry(world.store_a, key="freeze", content="Code freeze.", valid_until=timezone.now() - timedelta(days=1))
    with django_capture_on_commit_callbacks(execute=True):
        run = dreams.start_run(world.store_a, trigger="command")
    run.refresh_from_db()
    assert list(Proposal.objects.filter(run=run).values_list("operation", "kind", "targets")) == [
        ("remove", "expired", ["freeze"])
    ]


def test_the_api_says_expired_and_superseded(world, keys):
    now = timezone.now()
    make_entry(world.store_a, key="gone", content="Old freeze.", valid_until=now - timedelta(minutes=1))
    old = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    services.supersede_entry(old, base_version=1, content="Deploy with make release.", author=Author.system())
    api = Api(keys.full)
    gone = api.get("/api/v1/stores/eng/entries/gone/").json()
    assert (gone["status"], gone["state"], gone["valid_until"] is not None) == ("active", "expired", True)
    deploy = api.get("/api/v1/stores/eng/entries/deploy/").json()
    assert (deploy["state"], deploy["superseded_by"]) == ("superseded", "deploy-v2")
    listed = api.get("/api/v1/stores/eng/entries/", query={"status": "superseded"}).json()
    assert [e["key"] for e in listed["results"]] == ["deploy"]
    assert api.get("/api/v1/stores/eng/entries/deploy-v2/").json()["superseded_by"] is None
