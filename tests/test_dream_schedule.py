"""Periodic dreams: due policies start one run each (trigger schedule), claimed with a compare-and-set so two beats
cannot double-start; disabled or not-yet-due policies start nothing; every team's stores are scanned."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviews import schedule, tasks
from reviews.models import AutonomyPolicy, DreamRun, RunStatus, Trigger

from .factories import SessionFactory, StoreFactory, TeamFactory
from .scoping import no_scope

pytestmark = pytest.mark.all_teams


@pytest.fixture
def policies(db):
    made = []
    for slug in ("team-a", "team-b"):
        team = TeamFactory(slug=slug)
        store = StoreFactory(team=team, slug=f"{slug}-eng")
        SessionFactory(team=team)
        made.append(AutonomyPolicy.objects.create(team=team, store=store, schedule_enabled=True, schedule_minutes=60))
    return made


def test_due_policies_of_every_team_start_a_scheduled_run(policies, django_capture_on_commit_callbacks):
    # The beat task opens its own scopes (a cross-team scan, then each team's); never the test's.
    with no_scope(), django_capture_on_commit_callbacks(execute=True):
        started = tasks.run_scheduled_dreams()
    runs = DreamRun.objects.filter(pk__in=started)
    assert {r.team_id for r in runs} == {p.team_id for p in policies}
    assert all(r.trigger == Trigger.SCHEDULE and r.status == RunStatus.SUCCEEDED for r in runs)
    for p in policies:
        p.refresh_from_db()
        assert p.last_scheduled_at is not None
    # Not due again before schedule_minutes have passed.
    with no_scope():
        assert schedule.run_due() == []
    later = timezone.now() + timedelta(minutes=61)
    with no_scope(), django_capture_on_commit_callbacks(execute=True):
        assert len(schedule.run_due(later)) == 2


def test_disabled_policy_starts_nothing(policies):
    AutonomyPolicy.objects.update(schedule_enabled=False)
    with no_scope():
        assert schedule.run_due() == []
    assert not DreamRun.objects.exists()


def test_two_beats_claim_a_due_policy_once(policies):
    policy = policies[0]
    now = timezone.now()
    with no_scope():
        assert schedule.claim(policy.pk, policy.team_id, None, now) is True
        assert schedule.claim(policy.pk, policy.team_id, None, now) is False  # the other beat read the same value
        # The first tick claimed both; the second starts nothing more.
        assert len(schedule.run_due(now + timedelta(seconds=1))) == 1  # only the unclaimed policy of team B
        assert schedule.run_due(now + timedelta(seconds=2)) == []
    assert DreamRun.objects.count() == 1


def test_a_store_with_a_run_in_progress_is_skipped(policies):
    policy = policies[0]
    DreamRun.objects.create(team_id=policy.team_id, store_id=policy.store_id, status=RunStatus.RUNNING)
    with no_scope():
        started = schedule.run_due()
    assert DreamRun.objects.filter(pk__in=started, store_id=policy.store_id).count() == 0
    policy.refresh_from_db()
    assert policy.last_scheduled_at is None  # not claimed: it is tried again on the next tick
