# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Undo: roll back a whole dream run (each applied change becomes a new version restoring the previous state; an
entry changed since is a conflict, listed and never overwritten), and take back one decision from the toast."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dreamweb.provenance import Author
from memory import services as memory
from memory.models import EntryStatus, MemoryEntry, Operation
from reviews import rollback, services
from reviews.models import DreamRun, ProposalStatus, RunStatus
from tests.factories import make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def make_run(store, **fields) -> DreamRun:
    return DreamRun.objects.create(
        team=store.team, store=store, status=RunStatus.SUCCEEDED, finished_at=timezone.now(), **fields
    )


@pytest.fixture
def applied_run(world):
    """A run that applied four changes: it added an entry, updated two and archived one (by the policy and by a
    reviewer); then adam edited one of the updated entries by hand."""
    store = world.store_a
    make_entry(store, key="deploy", content="Deploy with make ship.")
    make_entry(store, key="tests", content="Run the tests with tox.")
    make_entry(store, key="staging", content="Staging is at staging.example.")
    run = make_run(store)
    add = make_proposal(store, run=run, operation="add", content="Tag before releasing.", key_hint="tag-first")
    upd = make_proposal(store, run=run, operation="update", targets=["deploy"], content="Deploy with make release.")
    upd2 = make_proposal(store, run=run, operation="update", targets=["tests"], content="Run the tests with nox.")
    rem = make_proposal(store, run=run, operation="remove", targets=["staging"], content=None)
    pending = make_proposal(store, run=run, operation="add", content="Still waiting.", key_hint="waiting")
    for p in (add, upd, rem):
        assert services.apply_proposal(p, author=Author.dream(run.pk)).status == ProposalStatus.APPLIED
    assert services.approve(upd2, user=world.alice).status == ProposalStatus.APPLIED
    tests_entry = MemoryEntry.objects.get(store=store, key="tests")
    memory.update_entry(tests_entry, base_version=2, author=Author.person(world.adam), content="Use nox -s tests.")
    return {"run": run, "add": add, "upd": upd, "upd2": upd2, "rem": rem, "pending": pending}


def entry(store, key) -> MemoryEntry:
    return MemoryEntry.objects.get(store=store, key=key)


def test_run_rollback_restores_each_change_and_lists_the_entry_changed_since(world, applied_run):
    run = applied_run["run"]
    plan = rollback.plan_run_rollback(run)
    assert sorted(s.key for s in plan.restored) == ["deploy", "staging", "tag-first"]
    assert [(s.key, s.last, s.current, s.changed_by) for s in plan.conflicts] == [("tests", 2, 3, "Written by adam")]

    done = rollback.rollback_run(run, user=world.alice, reason="bad batch")

    store = world.store_a
    deploy, staging, added, tests = (entry(store, k) for k in ("deploy", "staging", "tag-first", "tests"))
    assert (deploy.content, deploy.status, deploy.version) == ("Deploy with make ship.", EntryStatus.ACTIVE, 3)
    assert (staging.status, staging.version) == (EntryStatus.ACTIVE, 3)
    assert (added.status, added.version) == (EntryStatus.ARCHIVED, 2)
    assert (tests.content, tests.version) == ("Use nox -s tests.", 3)  # the conflict: not overwritten
    for e in (deploy, staging, added):
        v = e.versions.get(number=e.version)
        assert (v.operation, v.author_user, v.reason) == (
            Operation.ROLLBACK,
            world.alice,
            f"rollback of dream run #{run.pk}: bad batch",
        )
    # History is kept: the run's own versions are still there.
    assert list(deploy.versions.order_by("number").values_list("operation", flat=True)) == [
        "create",
        "update",
        "rollback",
    ]

    run.refresh_from_db()
    assert run.rolled_back_by == world.alice and run.rolled_back_at is not None
    assert [c["key"] for c in run.rollback["conflicts"]] == ["tests"] and len(done.restored) == 3
    statuses = {k: applied_run[k].__class__.objects.get(pk=applied_run[k].pk).status for k in applied_run if k != "run"}
    assert statuses == {
        "add": ProposalStatus.ROLLED_BACK,
        "upd": ProposalStatus.ROLLED_BACK,
        "rem": ProposalStatus.ROLLED_BACK,
        "upd2": ProposalStatus.APPLIED,  # its entry conflicted
        "pending": ProposalStatus.PENDING,
    }
    with pytest.raises(rollback.AlreadyRolledBack):
        rollback.rollback_run(run, user=world.adam)


def test_undo_of_an_approval_restores_the_entry_and_the_proposal_waits_again(world):
    make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    services.approve(proposal, user=world.alice, content="Deploy with `make release`.", reason="seen it")
    assert entry(world.store_a, "deploy").content == "Deploy with `make release`."

    undone = rollback.undo_decision(proposal, user=world.alice)

    e = entry(world.store_a, "deploy")
    assert (e.content, e.version) == ("Deploy with make ship.", 3)
    v3 = e.versions.get(number=3)
    # The person who undid it wrote the version (it carries no proposal: it is not a dream's text).
    assert (v3.operation, v3.proposal_id, v3.author_user) == (Operation.ROLLBACK, None, world.alice)
    assert v3.reason == f"undo of the approval of proposal #{proposal.pk}"
    assert (undone.status, undone.decided_by, undone.applied_versions) == (ProposalStatus.PENDING, None, [])
    assert undone.content == "Deploy with make release."  # the reviewer's edit went with the decision
    # It can be decided again: the entry is back at the text the proposal was prepared against.
    assert services.approve(undone, user=world.adam).status == ProposalStatus.APPLIED
    assert entry(world.store_a, "deploy").content == "Deploy with make release."


@pytest.mark.parametrize(
    "edits",
    [
        {"key": "my-own-key"},
        {"scope": ("ops-bot", "hotfix")},
        {"key": "my-own-key", "scope": ("ops-bot", None), "content": "Tag releases first, always."},
    ],
)
def test_undo_gives_the_proposal_back_as_proposed_whatever_the_reviewer_edited(world, edits):
    proposal = make_proposal(
        world.store_a, operation="add", content="Tag first.", key_hint="tag-first", scope_agent="deploy-bot"
    )
    services.approve(proposal, user=world.alice, **edits)
    undone = rollback.undo_decision(proposal, user=world.alice)
    assert (undone.key_hint, undone.scope_agent, undone.scope_task, undone.content) == (
        "tag-first",
        "deploy-bot",
        None,
        "Tag first.",
    )
    assert undone.original_edit is None and undone.original_content is None


def test_an_approval_without_edits_keeps_nothing_to_give_back(world):
    proposal = make_proposal(world.store_a, operation="add", content="Tag first.", key_hint="tag-first")
    assert services.approve(proposal, user=world.alice).original_edit is None


def test_undo_of_an_approval_refuses_when_the_entry_changed_since(world):
    make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    services.approve(proposal, user=world.alice)
    memory.update_entry(entry(world.store_a, "deploy"), base_version=2, author=Author.person(world.adam), tags=["x"])
    with pytest.raises(rollback.CannotUndo, match="changed since the approval: deploy"):
        rollback.undo_decision(proposal, user=world.alice)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.APPLIED and entry(world.store_a, "deploy").version == 3


def test_undo_of_a_rejection_and_of_an_added_entry(world):
    proposal = make_proposal(world.store_a, operation="add", content="Tag first.", key_hint="tag-first")
    services.reject(proposal, user=world.alice, reason="no")
    assert rollback.undo_decision(proposal, user=world.alice).status == ProposalStatus.PENDING
    services.approve(proposal, user=world.alice)
    rollback.undo_decision(proposal, user=world.alice)
    assert entry(world.store_a, "tag-first").status == EntryStatus.ARCHIVED
    with pytest.raises(rollback.CannotUndo):
        rollback.undo_decision(make_proposal(world.store_a, content="pending"), user=world.alice)


# ---- pages ------------------------------------------------------------------------------------------------------


def test_the_toast_after_an_approval_offers_undo_and_undo_works(client, world):
    make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    client.force_login(world.alice)
    response = client.post(
        reverse("reviews:approve", args=[proposal.pk]), {"next": reverse("reviews:queue")}, HTTP_HX_REQUEST="true"
    )
    undo_url = reverse("reviews:undo", args=[proposal.pk])
    assert f'action="{undo_url}"' in response.text and 'name="next" value="/reviews/"' in response.text
    done = client.post(undo_url, {"next": reverse("reviews:queue")}, follow=True)
    assert f"Undone: proposal #{proposal.pk} is pending again." in done.text
    assert f'id="card-{proposal.pk}"' in done.text  # back in the queue
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    assert entry(world.store_a, "deploy").content == "Deploy with make ship."
    # Without htmx the same toast comes on the next page.
    rejected = client.post(reverse("reviews:reject", args=[proposal.pk]), {"next": "/reviews/"}, follow=True)
    assert f'action="{undo_url}"' in rejected.text


def test_undo_and_rollback_need_a_reviewer_of_the_team(client, world, applied_run):
    run, proposal = applied_run["run"], applied_run["upd"]
    for user, code in ((world.victor, 403), (world.bob, 404)):
        client.force_login(user)
        assert client.post(reverse("reviews:undo", args=[proposal.pk])).status_code == code
        assert client.get(reverse("reviews:run-rollback", args=[run.pk])).status_code == code
        assert client.post(reverse("reviews:run-rollback", args=[run.pk])).status_code == code
    client.force_login(world.victor)
    assert reverse("reviews:run-rollback", args=[run.pk]) not in client.get(reverse("reviews:run", args=[run.pk])).text
    client.force_login(world.alice)
    assert client.get(reverse("reviews:undo", args=[proposal.pk])).status_code == 405
    run.refresh_from_db()
    proposal.refresh_from_db()
    assert run.rolled_back_at is None and proposal.status == ProposalStatus.APPLIED


def test_rollback_from_the_run_page_with_a_confirmation(client, world, applied_run):
    run = applied_run["run"]
    memory.update_entry(entry(world.store_a, "deploy"), base_version=2, author=Author.system(), tags=["<b>x</b>"])
    client.force_login(world.alice)
    page = client.get(reverse("reviews:run", args=[run.pk])).text
    confirm_url = reverse("reviews:run-rollback", args=[run.pk])
    assert confirm_url in page
    confirm = client.get(confirm_url).text
    assert "staging" in confirm and "tag-first" in confirm and "changed since" in confirm.lower()
    assert "now v3 (Written by adam)" in confirm and "now v3 (Imported)" in confirm
    done = client.post(confirm_url, {"reason": "<script>alert(1)</script>"}, follow=True)
    assert "Rolled back dream" in done.text and "2 changed since" in done.text
    assert "<script>alert(1)" not in done.text and "&lt;script&gt;alert(1)" in done.text
    assert confirm_url not in done.text  # done once
    assert entry(world.store_a, "staging").status == EntryStatus.ACTIVE
    # A second POST (another tab) changes nothing.
    again = client.post(confirm_url, follow=True)
    assert "cannot be rolled back" in again.text


def test_rollback_confirmation_query_count_does_not_grow(client, world):
    counts = []
    for n in (3, 30):
        run = make_run(world.store_a)
        for i in range(n):
            p = make_proposal(
                world.store_a, run=run, content=f"lesson {n} {i}", key_hint=f"l-{n}-{i}", evidence_count=1
            )
            services.apply_proposal(p, author=Author.dream(run.pk))
        conflicting = MemoryEntry.objects.get(key=f"l-{n}-0")
        memory.update_entry(conflicting, base_version=1, author=Author.person(world.adam), tags=["t"])
        client.force_login(world.alice)
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("reviews:run-rollback", args=[run.pk])).status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]
