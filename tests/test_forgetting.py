"""Forgetting through review: a dream proposes `remove` (archive) for entries never served in N days, rated down,
or without effect, each with its figures; high risk unless the policy lowers it; pinned entries never."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.effectiveness import Effect, Rate, Ratings
from memory.models import EntryStatus, MemoryEntry, MemoryVersion
from reviews import effectiveness
from reviews.analysis.forgetting import RATED_DOWN, UNUSED, removal_drafts
from reviews.models import AutonomyPolicy, PolicyMode, Proposal, ProposalStatus

from .dream_sessions import ingest, noise, session_doc
from .effectiveness_history import build, rate
from .factories import StoreFactory, make_entry

pytestmark = pytest.mark.all_teams


def age(entry, days: int) -> None:
    MemoryVersion.objects.filter(entry=entry).update(created_at=timezone.now() - timedelta(days=days))


def effect(**kw) -> Effect:
    now = timezone.now()
    base = dict(
        entry_id=1,
        key="tip",
        status="active",
        live_from=now - timedelta(days=90),
        scope_agent=None,
        scope_task=None,
    )
    base.update(kw)
    return Effect(**base)


def drafts(*effects, days=30, risk="high"):
    return removal_drafts(
        effects,
        content_hashes={e.key: "h" for e in effects},
        now=timezone.now(),
        unused_days=days,
        risk=risk,
        sessions_analysed=10,
    )


def test_a_dream_proposes_archiving_a_never_served_entry_with_its_figures(db, cycle):
    store = StoreFactory()
    old = make_entry(store, key="office-plants", content="The office plants are watered on Fridays.")
    age(old, 45)
    fresh = make_entry(store, key="fresh-tip", content="Builds run on the new runners since Monday.")
    pinned = make_entry(store, key="pinned-tip", content="The on-call phone is in the red drawer.", pinned=True)
    age(pinned, 90)  # as unused as the plants, but pinned: never proposed
    ingest(store.team, [session_doc(f"n-{i}", noise(i), minute=i) for i in range(3)])
    AutonomyPolicy.objects.create(team=store.team, store=store, mode=PolicyMode.AUTONOMOUS)
    run = cycle(store)
    removals = list(Proposal.objects.filter(run=run, operation="remove"))
    # The fresh one is not 30 days old yet; the pinned one is never proposed.
    assert [p.targets for p in removals] == [["office-plants"]]
    assert all("pinned-tip" not in p.targets for p in Proposal.objects.filter(run=run))
    p = removals[0]
    assert p.kind == UNUSED and p.risk == "high" and p.content is None
    assert p.status == ProposalStatus.PENDING  # high risk: never applied without a person, whatever the policy
    assert "Not served in the last 30 days: never served" in p.rationale
    assert "served 0 times to 0 sessions" in p.rationale
    assert p.target_hashes == {"office-plants": old.content_hash}
    assert MemoryEntry.objects.get(pk=old.pk).status == EntryStatus.ACTIVE
    assert fresh.key not in str([q.targets for q in Proposal.objects.filter(run=run)])


def test_the_removal_card_shows_its_figures(db, cycle):
    from django.urls import reverse

    from dreamweb.models import Role

    from .factories import MembershipFactory, UserFactory
    from .page_support import PageClient

    store = StoreFactory()
    age(make_entry(store, key="office-plants", content="The office plants are watered on Fridays."), 45)
    ingest(store.team, [session_doc("n-1", noise(1))])
    p = Proposal.objects.get(run=cycle(store), operation="remove")
    reviewer = UserFactory(username="rita")
    MembershipFactory(team=store.team, user=reviewer, role=Role.REVIEWER)
    client = PageClient()
    client.force_login(reviewer)
    body = client.get(reverse("reviews:proposal", args=[p.pk])).content.decode()
    assert "office-plants" in body and "Not served in the last 30 days: never served" in body


def test_a_policy_may_lower_the_risk_of_removal_and_then_it_applies(db, cycle):
    store = StoreFactory()
    old = make_entry(store, key="office-plants", content="The office plants are watered on Fridays.")
    age(old, 45)
    ingest(store.team, [session_doc("n-1", noise(1))])
    AutonomyPolicy.objects.create(
        team=store.team, store=store, mode=PolicyMode.AUTONOMOUS, removal_risk="medium", forget_after_days=30
    )
    run = cycle(store)
    p = Proposal.objects.get(run=run, operation="remove")
    assert p.risk == "medium" and p.status == ProposalStatus.APPLIED
    assert MemoryEntry.objects.get(pk=old.pk).status == EntryStatus.ARCHIVED
    version = MemoryVersion.objects.filter(entry=old).order_by("-number").first()
    assert version.operation == "archive" and version.proposal_id == p.pk


def test_a_served_entry_and_zero_days_are_never_proposed_as_unused():
    now = timezone.now()
    assert drafts(effect(times_served=3, sessions_served=3, last_served_at=now - timedelta(days=2))) == []
    assert drafts(effect(), days=0) == []
    old_serve = drafts(effect(times_served=3, sessions_served=2, last_served_at=now - timedelta(days=40)))
    assert "last served" in old_serve[0].rationale and "3 times to 2 sessions" in old_serve[0].rationale


def test_pinned_entries_are_never_proposed_for_removal():
    rated_down = Ratings(count=4, up=0, down=4, mean=-1.0)
    no_effect = dict(verdict="no_effect", served=Rate(2, 4), not_served=Rate(2, 4), times_served=4)
    assert drafts(effect(pinned=True), effect(key="b", pinned=True, ratings=rated_down)) == []
    assert drafts(effect(key="c", pinned=True, **no_effect)) == []
    assert [d.targets for d in drafts(effect(), effect(key="b", ratings=rated_down))] == [["tip"], ["b"]]
    assert drafts(effect(status="archived")) == []


def test_rated_down_and_no_effect_entries_are_proposed_with_their_evidence(db):
    h = build(StoreFactory(), served=(True, True, False, False), not_served=(True, False, True, False))
    rate(h.lesson, False, False, True)
    effects = effectiveness.store_effects(h.store)
    lesson = next(e for e in effects if e.key == "release-command")
    (d,) = drafts(lesson)
    assert d.kind == RATED_DOWN and "mean -0.33 from 3 ratings" in d.rationale
    h2 = build(StoreFactory(), served=(True, True, False, False), not_served=(True, False, True, False))
    lesson2 = next(e for e in effectiveness.store_effects(h2.store) if e.key == "release-command")
    (d2,) = drafts(lesson2)
    assert d2.kind == "no_effect"
    assert "recurred in 2 of 4 sessions served it, against 2 of 4 not served it" in d2.rationale
    assert len(d2.evidence) == 2 and d2.prevalence_sessions == 2
    assert {e["excerpt"] for e in d2.evidence} == {"make deploy"}


def _rated_down_store(raters):
    """An entry rated down by each of ``raters`` (an agent key or a person: how many times each), and a policy that
    lets removals apply by themselves from two sources on."""
    from django.contrib.auth import get_user_model

    from dreamweb.models import AgentKey
    from memory.feedback import record_feedback

    store = StoreFactory()
    entry = make_entry(store, key="deploy-cmd", content="Deploy with make release.")
    for i, times in enumerate(raters):
        if i % 2 == 0:
            who = {"agent_key": AgentKey.generate(team=store.team, name=f"rater-{i}")[0]}
        else:
            who = {"user": get_user_model().objects.create(username=f"person-{store.pk}-{i}")}
        for n in range(times):
            record_feedback(entry, helpful=False, source=f"claimed-{i}-{n}", **who)
    ingest(store.team, [session_doc("n-1", noise(1))])
    AutonomyPolicy.objects.create(
        team=store.team, store=store, mode=PolicyMode.AUTONOMOUS, removal_risk="low", min_confidence_auto=0
    )
    return store, entry


@pytest.mark.parametrize("raters", [(10,), (2, 0), (0, 7)])  # one key ten times, or twice; one person
def test_one_credentials_ratings_never_archive_an_entry_by_themselves(db, cycle, raters):
    store, entry = _rated_down_store(raters)
    run = cycle(store)
    p = Proposal.objects.get(run=run, operation="remove")
    assert p.kind == RATED_DOWN and p.prevalence_sources == 1 and "by 1 rater." in p.rationale
    assert p.status == ProposalStatus.PENDING  # a reviewer decides
    assert MemoryEntry.objects.get(pk=entry.pk).status == EntryStatus.ACTIVE


@pytest.mark.parametrize("raters", [(1, 1), (3, 0, 2)])  # a key and a person; two keys
def test_ratings_of_as_many_credentials_as_the_policy_asks_for_archive_by_policy(db, cycle, raters):
    store, entry = _rated_down_store(raters)
    run = cycle(store)
    p = Proposal.objects.get(run=run, operation="remove")
    assert p.prevalence_sources == 2 and "by 2 raters." in p.rationale
    assert p.status == ProposalStatus.APPLIED
    assert MemoryEntry.objects.get(pk=entry.pk).status == EntryStatus.ARCHIVED


def test_a_flood_of_one_keys_down_votes_against_a_persons_up_vote_is_one_voice_for_removal(db, cycle):
    """One key rates the entry down fifty times, a person rates it up once: two raters, but only one asks for the
    removal, so a policy that needs two sources leaves it to a reviewer."""
    from django.contrib.auth import get_user_model

    from dreamweb.models import AgentKey
    from memory.feedback import record_feedback

    store, entry = _rated_down_store(())
    key = AgentKey.generate(team=store.team, name="flooder")[0]
    for n in range(50):
        record_feedback(entry, helpful=False, source=f"flood-{n}", agent_key=key)
    record_feedback(entry, helpful=True, source="keeper", user=get_user_model().objects.create(username="keeper"))
    run = cycle(store)
    p = Proposal.objects.get(run=run, operation="remove")
    assert p.prevalence_sources == 1 and "by 2 raters, 1 of whom rated it down." in p.rationale, p.rationale
    assert p.status == ProposalStatus.PENDING
    assert MemoryEntry.objects.get(pk=entry.pk).status == EntryStatus.ACTIVE
