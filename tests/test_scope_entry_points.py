"""Each entry point sets its own team scope, so a queryset that lost its team filter by mistake still gets no other
team's row from PostgreSQL: a page request, an API key, a Celery task, a management command and a beat tick.

Every test runs the careless code twice: as the entry point scopes it (only our team's rows come back), and once
more with the entry point's scope widened to both teams (the other team's rows come back), which shows that the
filter is really gone and that only the database wall held."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from django.core.management import call_command
from django.test import override_settings

from dreamweb import rls
from dreamweb.tenancy import TeamQuerySet
from memory.models import AgentSession
from reviews import dreams, tasks
from reviews.dreams import steps
from reviews.models import AutonomyPolicy, DreamRun, RunStatus, SessionAnalysis
from tests.api_support import Api, make_key
from tests.conftest import is_postgres
from tests.factories import MembershipFactory, SessionFactory, StoreFactory, TeamFactory, UserFactory, make_entry
from tests.page_support import PageClient
from tests.scoping import all_teams, no_scope

pytestmark = [
    pytest.mark.skipif(not is_postgres(), reason="the database wall is PostgreSQL row-level security"),
    pytest.mark.django_db,
]

MINE = {"stores": ["eng"], "entries": ["mine-entry"], "sessions": ["mine-session"]}
BOTH = {
    "stores": ["eng", "eng"],
    "entries": ["mine-entry", "other-entry"],
    "sessions": ["mine-session", "other-session"],
}


@pytest.fixture
def teams():
    """Our team ("mine") and another one ("another": it sorts first) with the same store slug."""
    with all_teams():
        mine, other = TeamFactory(slug="mine"), TeamFactory(slug="another")
        for team, prefix in ((mine, "mine"), (other, "other")):
            store = StoreFactory(team=team, slug="eng")
            make_entry(store, key=f"{prefix}-entry")
            SessionFactory(team=team, external_id=f"{prefix}-session")
            AutonomyPolicy.objects.create(team=team, store=store, schedule_enabled=True, schedule_minutes=60)
        mia = UserFactory(username="mia")
        MembershipFactory(team=mine, user=mia)
        raw = make_key(mine, "mine-key")
    return mine, other, mia, raw


@contextlib.contextmanager
def widened(monkeypatch, *teams):
    """The control: every scope an entry point sets becomes these teams (what a scope fault would do)."""
    ids = [t.pk for t in teams]
    real_set, real_scope = rls.set_scope, rls.scope
    monkeypatch.setattr(rls, "set_scope", lambda value: real_set(value if value in ("", rls.ALL_TEAMS) else ids))
    monkeypatch.setattr(rls, "enter_member_scope", lambda user_id: real_set(ids))
    monkeypatch.setattr(rls, "enter_key_scope", lambda prefix: real_set(ids))
    monkeypatch.setattr(rls, "team_scope", lambda team: real_scope(ids))
    yield
    monkeypatch.undo()


class CarelessSelection:
    """selected_sessions without its team filter (the query dispatch writes the run's analyses from); records what
    it saw. A probe (``write=False``) selects nothing, so that the control run writes no row: the composite foreign
    keys would refuse an analysis of another team's session anyway (tests/test_tenancy_wall.py)."""

    def __init__(self, *, write: bool = True):
        self.write = write
        self.seen: list[set[str]] = []

    def __call__(self, store, *, limit, **options):
        sessions = AgentSession.objects.order_by("external_id")
        self.seen.append(set(sessions.values_list("external_id", flat=True)[:limit]))
        return sessions.values_list("pk", flat=True)[: limit if self.write else 0]


@override_settings(ROOT_URLCONF="tests.careless_urls")
def test_page_request(teams, monkeypatch):
    _, other, mia, _ = teams
    client = PageClient()
    client.force_login(mia)
    assert client.get("/careless/page/").json() == MINE
    with widened(monkeypatch, teams[0], other):
        assert client.get("/careless/page/").json() == BOTH


@override_settings(ROOT_URLCONF="tests.careless_urls")
def test_api_key(teams, monkeypatch):
    mine, other, _, raw = teams
    assert Api(raw).get("/careless/api/").json() == MINE
    with widened(monkeypatch, mine, other):
        assert Api(raw).get("/careless/api/").json() == BOTH


def _analysed(run_ids) -> set[str]:
    with all_teams():
        return set(SessionAnalysis.objects.filter(run_id__in=run_ids).values_list("session__external_id", flat=True))


def test_celery_task(teams, monkeypatch):
    mine, other, _, _ = teams
    careless = CarelessSelection()
    monkeypatch.setattr(steps, "selected_sessions", careless)
    with all_teams():
        store = mine.stores.get()
    with no_scope():
        run = dreams.start_run(store)  # queued; its dispatch is enqueued on commit, which a test never reaches
        tasks.dispatch_run(run.pk)  # the task, as a worker runs it
    assert careless.seen == [{"mine-session"}] and _analysed([run.pk]) == {"mine-session"}

    with all_teams():
        DreamRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)  # the store is free for the control run
    probe = CarelessSelection(write=False)
    with widened(monkeypatch, mine, other), no_scope():
        monkeypatch.setattr(steps, "selected_sessions", probe)
        tasks.dispatch_run(dreams.start_run(store).pk)
    assert probe.seen == [{"mine-session", "other-session"}]


def _export(team: str) -> list[str]:
    out = io.StringIO()
    with no_scope():
        call_command("export_memory", "--team", team, "--store", "eng", stdout=out)
    return [e["key"] for e in json.loads(out.getvalue())["entries"]]


def test_management_command(teams, monkeypatch):
    mine, other, _, _ = teams
    monkeypatch.setattr(TeamQuerySet, "for_team", lambda self, team: self.all())
    assert _export("mine") == ["mine-entry"]
    with widened(monkeypatch, mine, other):
        monkeypatch.setattr(TeamQuerySet, "for_team", lambda self, team: self.all())
        assert _export("mine") == ["other-entry"]  # the first store "eng" of any team: the other team's


def test_beat(teams, monkeypatch, django_capture_on_commit_callbacks):
    mine, other, _, _ = teams
    careless = CarelessSelection()
    monkeypatch.setattr(steps, "selected_sessions", careless)

    def tick() -> list[int]:
        with no_scope(), django_capture_on_commit_callbacks(execute=True):
            return tasks.run_scheduled_dreams()

    started = tick()
    with all_teams():
        runs = {run.team.slug: run.pk for run in DreamRun.objects.filter(pk__in=started).select_related("team")}
        AutonomyPolicy.objects.update(last_scheduled_at=None)
    assert sorted(careless.seen, key=sorted) == [{"mine-session"}, {"other-session"}]
    assert _analysed([runs["mine"]]) == {"mine-session"} and _analysed([runs["another"]]) == {"other-session"}

    probe = CarelessSelection(write=False)
    with widened(monkeypatch, mine, other):
        monkeypatch.setattr(steps, "selected_sessions", probe)
        tick()
    assert probe.seen == [{"mine-session", "other-session"}] * 2
