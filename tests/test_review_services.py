# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""reviews.services decisions, called directly: approve applies with provenance, a stale target is a conflict that
overwrites nothing, two approvals apply once, reject, bulk, edit-then-approve, and the audited policy update."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.utils import timezone

from dreamweb.provenance import Author
from memory.models import MemoryEntry, MemoryVersion
from memory.services import update_entry
from reviews import services
from reviews.models import AutonomyPolicy, PolicyChange, Proposal, ProposalStatus
from tests.factories import SessionFactory, StoreFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def test_approve_add_applies_with_provenance(world):
    sessions = [SessionFactory(team=world.team_a, external_id=f"s-{i}") for i in range(2)]
    proposal = make_proposal(world.store_a, sessions=sessions)

    result = services.approve(proposal, user=world.alice, reason="seen it too")

    assert result.status == ProposalStatus.APPLIED
    assert result.decided_by == world.alice and result.decided_at is not None
    (version,) = MemoryVersion.objects.filter(pk__in=result.applied_versions)
    assert version.entry.content == proposal.content
    assert version.entry.key == "release-command"
    assert version.author_kind == "user" and version.author_user == world.alice
    assert version.proposal_id == proposal.pk
    assert version.session == sessions[0]
    assert version.reason == "seen it too"
    assert [e["session"] for e in version.evidence] == ["s-0", "s-1"]
    assert {e["excerpt"] for e in version.evidence} == {"make release"}


def test_approve_update_with_stale_target_is_a_conflict_and_overwrites_nothing(world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    # Someone edits the entry after the dream read it.
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Deploy by hand.")

    result = services.approve(proposal, user=world.alice)

    assert result.status == ProposalStatus.CONFLICT
    assert result.decision_reason == "entry 'deploy' changed since the dream read it (it is at version 2 now)"
    assert result.applied_versions == []
    entry.refresh_from_db()
    assert entry.content == "Deploy by hand." and entry.version == 2
    assert not MemoryVersion.objects.filter(proposal_id=proposal.pk).exists()


def test_approve_update_fresh_target_writes_a_new_version(world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")

    services.approve(proposal, user=world.alice)

    entry.refresh_from_db()
    assert entry.content == "Deploy with make release." and entry.version == 2
    assert entry.versions.get(number=2).previous_hash == proposal.target_hashes["deploy"]


def test_second_approval_raises_not_pending_and_applies_once(world):
    proposal = make_proposal(world.store_a)
    services.approve(proposal, user=world.alice)
    stale_copy = type(proposal).objects.get(pk=proposal.pk)
    stale_copy.status = ProposalStatus.PENDING  # what a second reviewer's page still believes

    with pytest.raises(services.NotPending) as caught:
        services.approve(stale_copy, user=world.adam)

    assert caught.value.status == ProposalStatus.APPLIED
    assert MemoryEntry.objects.filter(store=world.store_a).count() == 1
    assert MemoryVersion.objects.filter(proposal_id=proposal.pk).count() == 1
    proposal.refresh_from_db()
    assert proposal.decided_by == world.alice


def test_reject_records_who_and_why_and_writes_nothing(world):
    proposal = make_proposal(world.store_a)

    services.reject(proposal, user=world.alice, reason="too specific")

    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by, proposal.decision_reason) == ("rejected", world.alice, "too specific")
    assert not MemoryEntry.objects.exists()
    with pytest.raises(services.NotPending):
        services.reject(proposal, user=world.adam)
    with pytest.raises(services.NotPending):
        services.approve(proposal, user=world.adam)


def test_bulk_decides_each_on_its_own(world):
    entry = make_entry(world.store_a, key="deploy", content="old text")
    fresh = make_proposal(world.store_a, content="One fact.")
    stale = make_proposal(world.store_a, operation="update", targets=["deploy"], content="new text")
    decided = make_proposal(world.store_a, content="Another fact.")
    services.reject(decided, user=world.adam)
    update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="changed meanwhile")

    done = services.bulk_decide([fresh, stale, decided], user=world.alice, approve_them=True)

    assert done == {"applied": [fresh.pk], "rejected": [], "conflict": [stale.pk], "skipped": [decided.pk]}
    entry.refresh_from_db()
    assert entry.content == "changed meanwhile"


def test_bulk_reject(world):
    a, b = make_proposal(world.store_a, content="A."), make_proposal(world.store_a, content="B.")
    done = services.bulk_decide([a, b], user=world.alice, approve_them=False, reason="noise")
    assert done["rejected"] == [a.pk, b.pk]
    assert set(type(a).objects.values_list("status", "decision_reason")) == {("rejected", "noise")}


def test_edit_then_approve_keeps_original_content(world):
    proposal = make_proposal(world.store_a, content="Use make release.")

    result = services.approve(proposal, user=world.alice, content="Use `make release` (never make deploy).")

    assert result.original_content == "Use make release."
    assert result.content == "Use `make release` (never make deploy)."
    version = MemoryVersion.objects.get(pk=result.applied_versions[0])
    assert version.content == "Use `make release` (never make deploy)."


def test_edit_to_empty_text_is_refused_and_leaves_the_card_pending(world):
    proposal = make_proposal(world.store_a)
    with pytest.raises(services.DecisionError):
        services.approve(proposal, user=world.alice, content="   ")
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING and proposal.original_content is None


def test_update_policy_audits_old_and_new_values(world):
    policy, change = services.update_policy(
        world.store_a, user=world.adam, values={"mode": "auto_low_risk", "min_sessions": 3}
    )
    assert change.changes == {"mode": ["manual", "auto_low_risk"]}  # min_sessions 3 is the default: no change
    assert change.changed_by == world.adam and policy.updated_by == world.adam

    _, again = services.update_policy(world.store_a, user=world.adam, values={"mode": "auto_low_risk"})
    assert again is None
    _, third = services.update_policy(world.store_a, user=world.adam, values={"agents": ["bot"], "token_budget": 10})
    assert third.changes == {"agents": [[], ["bot"]], "token_budget": [2_000_000, 10]}
    assert AutonomyPolicy.objects.get(store=world.store_a).token_budget == 10
    assert PolicyChange.objects.filter(policy=policy).count() == 2


@pytest.mark.skipif(connection.vendor != "postgresql", reason="real concurrency needs PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_two_reviewers_approving_at_once_apply_it_once():
    from dreamweb import rls
    from tests.factories import MembershipFactory, StoreFactory, TeamFactory, UserFactory

    team = TeamFactory(slug="race-review")
    store = StoreFactory(team=team, slug="eng")
    entry = make_entry(store, key="deploy", content="old")
    reviewers = [UserFactory(username=f"r{i}") for i in range(2)]
    for user in reviewers:
        MembershipFactory(team=team, user=user, role="reviewer")
    proposal = make_proposal(store, operation="update", targets=["deploy"], content="new", evidence_count=1)
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def reviewer(user) -> None:
        try:
            with rls.team_scope(team.pk):
                mine = type(proposal).objects.get(pk=proposal.pk)
                barrier.wait(timeout=10)
                outcomes[user.username] = services.approve(mine, user=user).status
        except services.NotPending:
            outcomes[user.username] = "not pending"
        except Exception as exc:  # surfaced by the assertion below
            outcomes[user.username] = repr(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reviewer, args=(u,)) for u in reviewers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes.values()) == ["applied", "not pending"], outcomes
    entry.refresh_from_db()
    assert (entry.content, entry.version) == ("new", 2)
    assert MemoryVersion.objects.filter(proposal_id=proposal.pk).count() == 1


# ---- rebase, bulk confirmation, the same change in other stores (the service rules under the pages) ---------------


def test_rebase_prepares_the_proposal_against_the_current_text_and_clears_the_decision(world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    update_entry(
        entry, base_version=1, content="Deploy with make ship.", author=Author.person(world.adam)
    )  # the target moved on
    entry.refresh_from_db()
    Proposal.objects.filter(pk=proposal.pk).update(
        status=ProposalStatus.CONFLICT, decided_by=world.alice, decided_at=timezone.now(), applied_versions=[7]
    )
    rebased = services.rebase(proposal, user=world.alice)
    assert rebased.status == ProposalStatus.PENDING
    assert rebased.target_hashes == {"deploy": entry.content_hash} and rebased.target_versions == {"deploy": 2}
    assert (rebased.decided_by, rebased.decided_at, rebased.applied_versions) == (None, None, [])
    assert rebased.decision_reason == "rebased onto the current text by alice"
    assert services.rebase(rebased, user=None).decision_reason == "rebased"  # a pending one may be rebased too


@pytest.mark.parametrize("status", [ProposalStatus.APPLIED, ProposalStatus.REJECTED])
def test_rebase_refuses_a_decided_proposal(world, status):
    make_entry(world.store_a, key="deploy", content="Deploy with make.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    Proposal.objects.filter(pk=proposal.pk).update(status=status)
    with pytest.raises(services.NotPending, match=f"proposal {proposal.pk} is {status}, not pending") as refused:
        services.rebase(proposal, user=world.alice)
    assert refused.value.status == status


def test_rebase_of_a_deleted_proposal_says_it_is_gone(world):
    proposal = make_proposal(world.store_a)
    Proposal.objects.filter(pk=proposal.pk).delete()
    with pytest.raises(services.NotPending, match=f"proposal {proposal.pk} is gone") as refused:
        services.rebase(proposal, user=world.alice)
    assert refused.value.status == "gone"


def test_rebase_refuses_missing_or_archived_targets_and_additions(world):
    make_entry(world.store_a, key="kept", content="Kept.")
    archived = make_entry(world.store_a, key="old", content="Old.")
    merge = make_proposal(world.store_a, operation="merge", targets=["kept", "old", "gone"], content="Both.")
    MemoryEntry.objects.filter(pk=archived.pk).update(status="archived")
    with pytest.raises(services.DecisionError, match=r"^Nothing to rebase onto: old, gone no longer exists"):
        services.rebase(merge, user=world.alice)
    addition = make_proposal(world.store_a, operation="add")
    with pytest.raises(services.DecisionError, match=r"^An addition has no target text to rebase onto"):
        services.rebase(addition, user=world.alice)
    assert Proposal.objects.get(pk=merge.pk).status == ProposalStatus.PENDING  # nothing changed


def test_bulk_summary_counts_by_risk_high_first_and_by_store(world):
    other = StoreFactory(team=world.team_a, slug="ops", name="Operations")
    proposals = [
        make_proposal(world.store_a, risk="low", content="one"),
        make_proposal(world.store_a, risk="high", content="two"),
        make_proposal(other, risk="low", content="three"),
        make_proposal(other, risk="low", content="four"),
    ]
    summary = services.bulk_summary(list(Proposal.objects.filter(pk__in=[p.pk for p in proposals])))
    assert summary == {
        "total": 4,
        "by_risk": [("High", 1), ("Low", 3)],  # high first; a risk with none left out
        "by_store": sorted([(world.store_a.display_name, 2), ("Operations", 2)]),
    }
    assert services.bulk_summary([]) == {"total": 0, "by_risk": [], "by_store": []}


def test_the_same_change_elsewhere_is_the_teams_other_waiting_copies(world):
    signature = "same-change"
    here = make_proposal(world.store_a, signature=signature)
    ops = StoreFactory(team=world.team_a, slug="ops")
    docs = StoreFactory(team=world.team_a, slug="docs")
    in_ops, in_docs = make_proposal(ops, signature=signature), make_proposal(docs, signature=signature)
    decided = make_proposal(StoreFactory(team=world.team_a, slug="web"), signature=signature)
    Proposal.objects.filter(pk=decided.pk).update(status=ProposalStatus.REJECTED)
    make_proposal(world.store_b, signature=signature)  # another team's store: never one decision with it
    make_proposal(ops, signature="another-change")
    assert list(services.same_elsewhere(here)) == [in_docs, in_ops]  # by store slug
    assert {p.pk for p in services.same_elsewhere(in_ops)} == {here.pk, in_docs.pk}
