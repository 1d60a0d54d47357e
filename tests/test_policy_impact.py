# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""The policy page's sense of impact (reviews.policy_impact): a preview of what a policy would apply over the
waiting proposals and the last 30 days before saving, what happens to waiting low-risk cards when switching to
auto-low-risk (and applying them through the policy's checks), a readable history, the analyzer as a select; team
isolation, roles and a fixed number of queries."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from memory.models import MemoryEntry, MemoryVersion
from reviews import policy_impact, services
from reviews.models import AutonomyPolicy, PolicyChange, PolicyMode, Proposal, ProposalStatus
from tests.factories import make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

FORM = {
    "mode": "manual",
    "min_sessions": 3,
    "min_share": 0.0,
    "min_confidence_auto": 0.6,
    "max_sessions": 1000,
    "token_budget": 2000000,
    "agents": "",
    "schedule_minutes": 1440,
    "analyzer": "rules",
}


def _mix(store, *, world):
    """Waiting: 3 low (one under the confidence floor), 2 medium, 1 high. Decided in the last 30 days: a low one a
    reviewer rejected, a low one a reviewer approved, a medium one rejected; and an old low one (40 days)."""
    for i, (risk, confidence) in enumerate(
        [("low", 0.9), ("low", 0.8), ("low", 0.3), ("medium", 0.9), ("medium", 0.9), ("high", 0.99)]
    ):
        make_proposal(store, risk=risk, confidence=confidence, content=f"waiting {i}", evidence_count=1)
    rejected = make_proposal(store, risk="low", confidence=0.9, content="rejected low", evidence_count=1)
    services.reject(rejected, user=world.alice, reason="wrong")
    approved = make_proposal(store, risk="low", confidence=0.9, content="approved low", evidence_count=1)
    services.approve(approved, user=world.alice)
    medium = make_proposal(store, risk="medium", confidence=0.9, content="rejected medium", evidence_count=1)
    services.reject(medium, user=world.alice)
    old = make_proposal(store, risk="low", confidence=0.9, content="old", evidence_count=1)
    services.reject(old, user=world.alice)
    Proposal.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))


def test_impact_counts_by_the_policy_rule(world):
    _mix(world.store_a, world=world)
    low = policy_impact.impact(world.store_a, policy_impact.draft_policy(world.store_a, {"mode": "auto_low_risk"}))
    assert (low.pending, low.pending_allowed) == (6, 2)
    assert low.pending_by_risk == {"low": [2, 3], "medium": [0, 2], "high": [0, 1]}
    assert (low.recent, low.recent_allowed, low.recent_allowed_rejected, low.recent_allowed_by_people) == (3, 2, 1, 1)
    auto = policy_impact.impact(world.store_a, policy_impact.draft_policy(world.store_a, {"mode": "autonomous"}))
    assert (auto.pending_allowed, auto.recent_allowed, auto.recent_allowed_rejected) == (4, 3, 2)
    floor = policy_impact.draft_policy(world.store_a, {"mode": "autonomous", "min_confidence_auto": 0.95})
    assert policy_impact.impact(world.store_a, floor).pending_allowed == 0
    manual = policy_impact.impact(world.store_a, policy_impact.draft_policy(world.store_a, {}))
    assert manual.manual and manual.pending_allowed == 0
    assert not AutonomyPolicy.objects.exists()  # a preview saves nothing


def test_preview_before_saving_saves_nothing(client, world):
    _mix(world.store_a, world=world)
    client.force_login(world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    html = client.get(url, {**FORM, "mode": "auto_low_risk", "preview": "1"}).content.decode()
    assert "Preview: what this policy would do" in html
    assert 'data-testid="pending-allowed">2</strong> of 6' in html
    assert 'data-testid="recent-allowed">2</strong> of 3' in html
    assert "<strong>1</strong> of those 2 were <strong>rejected</strong>" in html
    partial = client.get(url, {**FORM, "mode": "autonomous", "preview": "1"}, HTTP_HX_REQUEST="true")
    assert "<html" not in partial.content.decode() and 'pending-allowed">4</strong>' in partial.content.decode()
    assert not AutonomyPolicy.objects.exists()
    bad = client.get(url, {**FORM, "min_share": 7, "preview": "1"}).content.decode()
    assert "Fix the values above" in bad and "A share between 0 and 1." in bad


def test_the_no_js_preview_posts_the_form_and_saves_nothing(client, world):
    """Without htmx the "Preview impact" button submits the form, which carries the CSRF token: a GET would put that
    token in the URL. It posts, shows the preview and saves nothing."""
    _mix(world.store_a, world=world)
    client.force_login(world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    page = client.get(url).content.decode()
    button = re.search(r'<button[^>]*name="preview"[^>]*>', page).group(0)
    assert "formmethod" not in button
    response = client.post(url, {**FORM, "mode": "auto_low_risk", "preview": "1"})
    html = response.content.decode()
    assert response.status_code == 200 and "Preview: what this policy would do" in html
    assert 'data-testid="pending-allowed">2</strong> of 6' in html
    assert not AutonomyPolicy.objects.exists() and not PolicyChange.objects.exists()


def test_switching_to_auto_low_risk_says_what_happens_and_offers_to_apply(client, world):
    _mix(world.store_a, world=world)
    entry = make_entry(world.store_a, key="target", content="old text")
    stale = make_proposal(
        world.store_a,
        operation="update",
        targets=["target"],
        risk="low",
        confidence=0.9,
        content="new",
        evidence_count=1,
    )
    MemoryEntry.objects.filter(pk=entry.pk).update(content_hash="changed-since")  # the dream's base is gone
    client.force_login(world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    response = client.post(url, {**FORM, "mode": "auto_low_risk"}, follow=True)
    html = response.content.decode()
    assert "3 waiting proposals pass this policy" in html and "stay in the queue" in html
    assert "Apply the 3 waiting proposals this policy allows" in html
    assert Proposal.objects.filter(status=ProposalStatus.PENDING).count() == 7  # saving applied nothing

    html = client.post(reverse("reviews:policy-apply-pending", args=[world.store_a.pk]), follow=True).content.decode()
    assert "The policy applied 2 waiting proposals; 1 became conflicts" in html
    stale.refresh_from_db()
    assert stale.status == ProposalStatus.CONFLICT
    applied = Proposal.objects.filter(status=ProposalStatus.APPLIED, decided_by__isnull=True)
    assert sorted(p.content for p in applied) == ["waiting 0", "waiting 1"]
    assert all("at adam's request" in p.decision_reason for p in applied)
    version = MemoryVersion.objects.get(proposal_id=applied[0].pk)
    assert version.provenance_label == "Dream change applied by the store's policy"
    # Medium, high and under-the-floor proposals wait.
    assert Proposal.objects.filter(status=ProposalStatus.PENDING).count() == 4


def test_apply_pending_does_nothing_under_a_manual_policy(client, world):
    make_proposal(world.store_a, risk="low", confidence=0.9)
    client.force_login(world.adam)
    client.post(reverse("reviews:policy-apply-pending", args=[world.store_a.pk]))
    assert Proposal.objects.get().status == ProposalStatus.PENDING


@pytest.mark.parametrize("who, status", [("victor", 403), ("alice", 403), ("bob", 404)])
def test_apply_pending_is_for_the_teams_admins(client, world, who, status):
    AutonomyPolicy.objects.create(store=world.store_a, team=world.team_a, mode=PolicyMode.AUTONOMOUS)
    make_proposal(world.store_a, risk="low", confidence=0.9)
    client.force_login(getattr(world, who))
    assert client.post(reverse("reviews:policy-apply-pending", args=[world.store_a.pk])).status_code == status
    assert client.get(reverse("reviews:policy-apply-pending", args=[world.store_a.pk])).status_code in (405, status)
    assert Proposal.objects.get().status == ProposalStatus.PENDING


def test_preview_is_404_for_another_team_and_has_no_apply_for_viewers(client, world):
    client.force_login(world.bob)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    assert client.get(url, {**FORM, "preview": "1"}).status_code == 404
    AutonomyPolicy.objects.create(store=world.store_a, team=world.team_a, mode=PolicyMode.AUTONOMOUS)
    make_proposal(world.store_a, risk="low", confidence=0.9)
    client.force_login(world.victor)
    html = client.get(url).content.decode()
    assert 'pending-allowed">1</strong>' in html and "policy-apply-pending" not in html and "apply-pending" not in html


def test_analyzer_is_a_select_of_the_registered_analyzers(client, world):
    client.force_login(world.adam)
    html = client.get(reverse("reviews:policy", args=[world.store_a.pk])).content.decode()
    select = html.split('name="analyzer"')[1].split("</select>")[0]
    assert '<option value="rules" selected>' in select and '<option value="openai"' in select


def test_policy_page_queries_do_not_grow_with_proposals(client, world):
    client.force_login(world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    AutonomyPolicy.objects.create(store=world.store_a, team=world.team_a, mode=PolicyMode.AUTONOMOUS)
    counts = []
    for n in (10, 490):
        rows = [
            Proposal(
                team_id=world.team_a.pk,
                store=world.store_a,
                operation="add",
                content=f"text {n}-{i}",
                kind="note",
                rationale="r",
                prevalence_sessions=3,
                prevalence_of=5,
                confidence=0.9,
                risk=("low", "medium", "high")[i % 3],
                status=(ProposalStatus.PENDING, ProposalStatus.REJECTED)[i % 2],
                signature=f"sig-{n}-{i}",
            )
            for i in range(n)
        ]
        Proposal.objects.bulk_create(rows)
        for params in ({}, {**FORM, "mode": "auto_low_risk", "preview": "1"}):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url, params).status_code == 200
            counts.append(len(ctx.captured_queries))
    assert counts[:2] == counts[2:], counts
