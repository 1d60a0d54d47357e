"""Sessions at scale: retention drops the raw events of consumed sessions past the retention period (evidence
excerpts, session rows and unconsumed sessions kept), a cycle's selection skips them, and the selection of
unconsumed sessions, the session list and the list of agents read an index in order instead of the whole table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from dreamweb import rls
from memory.models import NEWEST, AgentSession
from memory.sessions import team_agents
from reviews import retention
from reviews.dreams.selection import select_sessions
from reviews.models import AnalysisStatus, DreamRun, ProposalEvidence, ProposalStatus, RunStatus, SessionAnalysis
from tests.conftest import is_postgres
from tests.factories import SessionFactory, StoreFactory, TeamFactory, make_proposal
from tests.scoping import all_teams, no_scope

pytestmark = pytest.mark.django_db

DAYS = 30


def _analysed(session, store, *, run_status=RunStatus.SUCCEEDED, dry_run=False, status=AnalysisStatus.DONE):
    run = DreamRun.objects.create(team_id=store.team_id, store=store, status=run_status, dry_run=dry_run)
    SessionAnalysis.objects.create(team_id=store.team_id, run=run, session=session, status=status)
    return run


@pytest.fixture
def world():
    with all_teams():
        team, other = TeamFactory(slug="keeper"), TeamFactory(slug="other")
        store, other_store = StoreFactory(team=team, slug="eng"), StoreFactory(team=other, slug="ops")
        old = timezone.now() - timedelta(days=DAYS + 5)
        recent = timezone.now() - timedelta(days=DAYS - 5)
        s = {
            name: SessionFactory(team=team, external_id=name, ingested_at=when)
            for name, when in [
                ("consumed-old", old),
                ("consumed-recent", recent),
                ("unconsumed-old", old),
                ("dry-run-only-old", old),
                ("failed-run-old", old),
                ("quoted-pending-old", old),
                ("quoted-decided-old", old),
            ]
        }
        s["other-team-consumed-old"] = SessionFactory(
            team=other, external_id="other-team-consumed-old", ingested_at=old
        )
        for name in ("consumed-old", "consumed-recent", "quoted-pending-old", "quoted-decided-old"):
            _analysed(s[name], store)
        _analysed(s["dry-run-only-old"], store, dry_run=True)
        _analysed(s["failed-run-old"], store, run_status=RunStatus.FAILED, status=AnalysisStatus.FAILED)
        _analysed(s["other-team-consumed-old"], other_store)
        make_proposal(store, sessions=[s["quoted-pending-old"]])
        decided = make_proposal(store, sessions=[s["quoted-decided-old"]])
        decided.status = ProposalStatus.APPLIED
        decided.save(update_fields=["status"])
    return type("World", (), {"team": team, "other": other, "store": store, "other_store": other_store, "s": s})


def _state():
    with all_teams():
        return {
            s.external_id: (len(s.events), s.events_pruned_at is not None, s.event_count)
            for s in AgentSession.objects.all()
        }


def test_retention_drops_only_the_events_of_consumed_sessions_past_the_period(world):
    with all_teams():  # the procedure steps an analysis kept of its transcript (for its run's finalize)
        SessionAnalysis.objects.update(steps=[{"index": 1, "step": "make release", "text": "make release"}])
    before = _state()
    assert all(n > 0 for n, _, _ in before.values())
    with no_scope():  # the entry point opens each team's scope itself
        done = retention.prune(days=DAYS)
    assert done == {world.team.pk: 2, world.other.pk: 1}
    after = _state()
    dropped = {eid for eid, (n, pruned, _) in after.items() if pruned}
    assert dropped == {"consumed-old", "quoted-decided-old", "other-team-consumed-old"}
    for eid, (n, pruned, count) in after.items():
        assert (n == 0) == pruned
        assert count == before[eid][2]  # what was received is still said
    for kept in ("unconsumed-old", "consumed-recent", "dry-run-only-old", "failed-run-old", "quoted-pending-old"):
        assert after[kept] == before[kept]
    with all_teams():  # the evidence excerpts stay; the kept steps go with the events
        assert set(ProposalEvidence.objects.values_list("excerpt", flat=True)) == {"make release"}
        kept_steps = set(SessionAnalysis.objects.exclude(steps=None).values_list("session__external_id", flat=True))
        assert kept_steps == set(before) - dropped - {"unconsumed-old"}
        assert ProposalEvidence.objects.filter(session__external_id="quoted-decided-old").count() == 1
    with no_scope():
        assert retention.prune(days=DAYS) == {world.team.pk: 0, world.other.pk: 0}  # idempotent


def test_retention_is_off_by_default_and_a_dry_run_changes_nothing(world, settings):
    settings.DREAMWEB_SESSION_EVENTS_RETENTION_DAYS = 0
    before = _state()
    with no_scope():
        assert retention.prune() == {}
        assert retention.prune(days=DAYS, dry_run=True) == {world.team.pk: 2, world.other.pk: 1}
        with pytest.raises(CommandError, match="retention is off"):
            call_command("prune_session_events")
    assert _state() == before


def test_the_command_and_the_beat_task_prune_every_team(world, settings, capsys):
    settings.DREAMWEB_SESSION_EVENTS_RETENTION_DAYS = DAYS
    from reviews.tasks import prune_session_events

    with no_scope():
        call_command("prune_session_events", "--dry-run")
        assert "would drop the events of 3 session(s)" in capsys.readouterr().out
        assert prune_session_events() == 3
        call_command("prune_session_events")
    assert "dropped the events of 0 session(s)" in capsys.readouterr().out
    assert settings.CELERY_BEAT_SCHEDULE["session-events-retention"]["task"] == "reviews.tasks.prune_session_events"


def test_one_teams_retention_does_not_touch_another_team(world):
    with no_scope():
        assert retention.prune_team(world.team.pk, days=DAYS) == 2
    assert _state()["other-team-consumed-old"][1] is False


def test_a_cycle_never_selects_a_session_whose_events_were_dropped(world):
    with no_scope():
        retention.prune(days=DAYS)
    with rls.team_scope(world.team):
        chosen = set(
            AgentSession.objects.filter(pk__in=select_sessions(world.store, limit=100, all_sessions=True)).values_list(
                "external_id", flat=True
            )
        )
        unconsumed = set(
            AgentSession.objects.filter(pk__in=select_sessions(world.store, limit=100)).values_list(
                "external_id", flat=True
            )
        )
    assert "consumed-old" not in chosen and "quoted-decided-old" not in chosen
    assert "unconsumed-old" in chosen and "consumed-recent" in chosen
    assert unconsumed == {"unconsumed-old", "dry-run-only-old", "failed-run-old"}


def test_the_session_page_says_the_events_were_dropped(world, client):
    from tests.factories import MembershipFactory, UserFactory

    with no_scope():
        retention.prune(days=DAYS)
    with all_teams():
        user = UserFactory()
        MembershipFactory(user=user, team=world.team)
        pruned = AgentSession.objects.get(external_id="consumed-old")
    client.force_login(user)
    with no_scope():
        page = client.get(f"/memory/sessions/{pruned.pk}/")
    assert page.status_code == 200
    assert b"dropped on" in page.content and b"by the retention policy" in page.content


def _plan(sql: str, params) -> str:
    with all_teams(), connection.cursor() as cursor:  # ANALYZE as the tables' owner
        cursor.execute("ANALYZE memory_agentsession, reviews_sessionanalysis, reviews_dreamrun")
    with connection.cursor() as cursor:  # the plan in the caller's scope, as the application role
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.skipif(not is_postgres(), reason="EXPLAIN of PostgreSQL's planner")
def test_selection_reads_the_newest_sessions_by_index_and_probes_consumption_per_row():
    """Thousands of sessions, most consumed: the plan walks the team's newest-first index and probes the analyses
    of each candidate (an anti join), never a scan of the sessions or a hash of every consumed id."""
    from memory.sessions import store_batch, validate_session

    with all_teams():
        team = TeamFactory(slug="big")
        store = StoreFactory(team=team, slug="eng")
        docs = [
            {
                "external_id": f"s-{i:05d}",
                "agent": f"agent-{i % 3}",
                # Each its own start: the same agent, start and events would be one run delivered twice.
                "started_at": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "events": [{"type": "message", "role": "user", "content": "hi"}],
            }
            for i in range(3000)
        ]
    with rls.team_scope(team):
        store_batch(team, [validate_session(d) for d in docs])
        run = DreamRun.objects.create(team_id=team.pk, store=store, status=RunStatus.SUCCEEDED)
        SessionAnalysis.objects.bulk_create(
            SessionAnalysis(team_id=team.pk, run=run, session_id=pk, status=AnalysisStatus.DONE)
            for pk in AgentSession.objects.order_by("?").values_list("pk", flat=True)[:2500]
        )
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            chosen = select_sessions(store, limit=25)
        assert len(chosen) == 25
        select = next(q for q in queries.captured_queries if "memory_agentsession" in q["sql"])
        plan = _plan(select["sql"], None)
    assert "agentsession_team_newest" in plan, plan
    assert "Seq Scan on memory_agentsession" not in plan, plan
    assert "hashed SubPlan" not in plan and "Hash Anti Join" not in plan, plan
    assert "Anti Join" in plan, plan


@pytest.mark.skipif(not is_postgres(), reason="EXPLAIN of PostgreSQL's planner")
@pytest.mark.parametrize("agent", ["", "agent-1"])
def test_the_session_list_reads_the_first_rows_of_the_newest_first_index(agent):
    """The list's first page, with or without an agent, in index order and stopped after a page: no sort of the
    team's sessions, whatever their number (sessions without a start time included, by their arrival)."""
    from memory.views.sessions import LIST_FIELDS, PER_PAGE

    with all_teams():
        team = TeamFactory(slug="listed")
        now = timezone.now()
        AgentSession.objects.bulk_create(
            AgentSession(
                team=team,
                external_id=f"s-{i:05d}",
                agent=f"agent-{i % 3}",
                started_at=None if i % 5 == 0 else now - timedelta(minutes=i),
                events=[],
            )
            for i in range(3000)
        )
    with rls.team_scope(team):
        sessions = AgentSession.objects.filter(team=team)
        if agent:
            sessions = sessions.filter(agent=agent)
        query = sessions.only(*LIST_FIELDS).order_by(*NEWEST)[:PER_PAGE].query
        sql, params = query.sql_with_params()
        plan = _plan(sql, params)
    assert ("agentsession_team_agent_newest" if agent else "agentsession_team_newest") in plan, plan
    assert "Sort" not in plan and "Seq Scan on memory_agentsession" not in plan, plan


@pytest.mark.skipif(not is_postgres(), reason="the skip scan is PostgreSQL's")
def test_the_list_of_agents_skips_through_the_index():
    with all_teams():
        team, other = TeamFactory(slug="agents"), TeamFactory(slug="agents-other")
        for i in range(30):
            SessionFactory(team=team, agent=f"bot-{i % 4}")
        SessionFactory(team=other, agent="someone-elses")
    with rls.team_scope(team):
        assert team_agents(team.pk) == ["bot-0", "bot-1", "bot-2", "bot-3"]
    with rls.team_scope(other):
        assert team_agents(team.pk) == []  # row-level security: another team's scope sees none of them


@pytest.mark.skipif(not is_postgres(), reason="EXPLAIN of PostgreSQL's planner")
def test_the_notes_delivered_live_are_found_through_their_index_not_a_scan_of_the_sessions():
    from django.test.utils import CaptureQueriesContext

    from memory.sessions import store_batch, validate_session
    from reviews.dreams.selection import delivered_notes

    with all_teams():
        team = TeamFactory(slug="notes")
    docs = [
        {"external_id": f"s-{i:05d}", "agent": "bot", "events": [{"type": "message", "role": "user", "content": "hi"}]}
        for i in range(3000)
    ]
    docs += [
        {
            "external_id": f"note-{i}",
            "agent": "bot",
            "metadata": {"note_of": f"s-{i:05d}"},
            "events": [{"type": "memory_write", "content": f"lesson {i}"}],
        }
        for i in range(5)
    ]
    with rls.team_scope(team):
        store_batch(team, [validate_session(d) for d in docs])
        sessions = list(AgentSession.objects.filter(external_id__in=["s-00001", "s-00002", "s-00100"]))
        with CaptureQueriesContext(connection) as queries:
            notes = delivered_notes(team.pk, sessions)
        assert notes == {"s-00001": ["lesson 1"], "s-00002": ["lesson 2"]}
        lookup = next(q for q in queries.captured_queries if "note_of" in q["sql"])
        plan = _plan(lookup["sql"], None)
    assert "agentsession_note_of" in plan, plan
    assert "Seq Scan on memory_agentsession" not in plan, plan
