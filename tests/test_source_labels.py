"""How a session's source reads on the policy page (memory.sessions.describe_source), and the team's agent list
(memory.sessions.team_agents): every kind of source, a key or a person gone since, another team's key never named."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dreamweb import rls
from dreamweb.models import AgentKey
from memory.sessions import describe_source, team_agents
from tests.api_support import make_key
from tests.factories import SessionFactory, TeamFactory, UserFactory
from tests.scoping import all_teams

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def two_teams():
    with all_teams():
        mine, theirs = TeamFactory(slug="mine"), TeamFactory(slug="theirs")
        make_key(mine, name="ci-runner")
        make_key(theirs, name="their-secret-bot")
        keys = {k.name: k.pk for k in AgentKey.objects.all()}
        gone = UserFactory(username="gone")
        person = UserFactory(username="dana")
        gone_id = gone.pk
        gone.delete()
    return mine, theirs, keys, person, gone_id


def test_every_kind_of_source_reads_as_a_person_would_say_it(two_teams):
    mine, _, keys, person, gone_id = two_teams
    with rls.team_scope(mine):
        labels = {
            source: describe_source(mine.pk, source)
            for source in (
                f"key:{keys['ci-runner']}",
                f"key:{keys['their-secret-bot']}",
                "key:999999",
                f"user:{person.pk}",
                f"user:{gone_id}",
                "import:42",
                "demo:acme",
                "",
                "key:abc",
                "user:",
                "something-else",
            )
        }
    assert list(labels.values()) == [
        "API key 'ci-runner'",
        "a deleted API key",  # another team's key is never named
        "a deleted API key",
        "dana (signed in)",
        "a deleted user",
        "one run of import_sessions",
        "the demo data of acme",
        "sessions stored before sources were recorded",
        "sessions stored before sources were recorded",
        "sessions stored before sources were recorded",
        "sessions stored before sources were recorded",
    ]


def test_team_agents_lists_each_agent_once_in_order_and_only_the_teams(two_teams):
    mine, theirs, *_ = two_teams
    with all_teams():
        for agent in ("zeta-bot", "alpha-bot", "alpha-bot", "mid-bot", "zeta-bot", "alpha-bot"):
            SessionFactory(team=mine, agent=agent)
        SessionFactory(team=theirs, agent="beta-bot")
    with rls.team_scope(mine), CaptureQueriesContext(connection) as queries:
        assert team_agents(mine.pk) == ["alpha-bot", "mid-bot", "zeta-bot"]
    with rls.team_scope(theirs):
        assert team_agents(theirs.pk) == ["beta-bot"]
        assert team_agents(mine.pk) == []  # another team's sessions are not its to list
    if connection.vendor == "postgresql":
        # One index probe per agent (a recursive skip scan), not a DISTINCT over every session of the team: the
        # session list's agent filter must not grow with the sessions stored.
        (query,) = [q["sql"] for q in queries.captured_queries if "agent" in q["sql"]]
        assert query.lstrip().startswith("WITH RECURSIVE") and "DISTINCT" not in query.upper()
