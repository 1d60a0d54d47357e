# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The skills index a worker process keeps per team (skills_registry.index): a change made anywhere else (another
process, another connection, raw SQL) is in the very next context request, one team's index never reaches another,
and an unchanged index costs no statement of its own."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from skills_registry import index as skills_index
from skills_registry.models import Skill, SkillStatus
from tests.api_support import Api, fast_passwords, make_key  # noqa: F401 - fixtures
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory, make_skill
from tests.scoping import all_teams

pytestmark = pytest.mark.skipif(not is_postgres(), reason="the index is kept on PostgreSQL only")


def _skills(raw: str) -> list[tuple[str, str, int]]:
    r = Api(raw).get("/api/v1/context/", query={"store": "eng", "query": "deploy"})
    assert r.status_code == 200, r.content
    return [(s["name"], s["description"], s["version"]) for s in r.json()["skills"]]


def _elsewhere(team_id: int, sql: str, params=(), *, rows: int | None = 1) -> None:
    """A write on a connection of its own, committed, as another worker process would make it (nothing in this
    process hears of it)."""
    s = connection.settings_dict
    with psycopg.connect(
        host=s["HOST"],
        port=s["PORT"] or 5432,
        dbname=s["NAME"],
        user=s["USER"],
        password=s["PASSWORD"],
        autocommit=True,
    ) as other:
        other.execute("SELECT set_config('dreamweb.team_ids', %s, false)", [str(team_id)])
        changed = other.execute(sql, params).rowcount
        assert rows is None or changed == rows


@pytest.fixture
def team_and_key(transactional_db, fast_passwords):
    with all_teams():
        team = TeamFactory(slug="skilled")
        StoreFactory(team=team, slug="eng")
        make_skill(team, name="release", description="How to release.")
        draft = make_skill(team, name="rollback", description="How to roll back.")
        Skill.objects.filter(pk=draft.pk).update(status=SkillStatus.DRAFT)
        raw = make_key(team, name="reader")
    skills_index.clear()
    return team, raw


def test_a_change_made_elsewhere_is_in_the_next_request(team_and_key):
    team, raw = team_and_key
    assert _skills(raw) == [("release", "How to release.", 1)]
    changes = [
        # published elsewhere
        ("UPDATE skills_registry_skill SET status = 'published' WHERE team_id = %s AND name = 'rollback'", 1),
        # a new description and version
        (
            "UPDATE skills_registry_skill SET description = 'Roll back fast.', version = 2"
            " WHERE team_id = %s AND name = 'rollback'",
            1,
        ),
        # renamed
        ("UPDATE skills_registry_skill SET name = 'release-train' WHERE team_id = %s AND name = 'release'", 1),
        # unpublished (archived from the index)
        ("UPDATE skills_registry_skill SET status = 'draft' WHERE team_id = %s AND name = 'rollback'", 1),
        # deleted
        (
            "DELETE FROM skills_registry_skillversion WHERE team_id = %s AND skill_id IN"
            " (SELECT id FROM skills_registry_skill WHERE name = 'release-train')",
            None,
        ),
        ("DELETE FROM skills_registry_skill WHERE team_id = %s AND name = 'release-train'", 1),
    ]
    expected = [
        [("release", "How to release.", 1), ("rollback", "How to roll back.", 1)],
        [("release", "How to release.", 1), ("rollback", "Roll back fast.", 2)],
        [("release-train", "How to release.", 1), ("rollback", "Roll back fast.", 2)],
        [("release-train", "How to release.", 1)],
        [("release-train", "How to release.", 1)],
        [],
    ]
    for (sql, rows), want in zip(changes, expected, strict=True):
        _elsewhere(team.pk, sql, [team.pk], rows=rows)
        assert _skills(raw) == want, sql


def test_fields_are_told_apart_where_plain_concatenation_would_not(team_and_key):
    """Moving text between a skill's name and its description changes the fingerprint (each field is
    length-prefixed): joined with spaces, both indexes below read 'release 1 how 1 to release.', so a fingerprint
    of the joined text would keep the first one cached."""
    team, raw = team_and_key
    _elsewhere(
        team.pk,
        "UPDATE skills_registry_skill SET name = 'release 1 how', description = 'to release.'"
        " WHERE team_id = %s AND name = 'release'",
        [team.pk],
    )
    assert _skills(raw) == [("release 1 how", "to release.", 1)]
    _elsewhere(
        team.pk,
        "UPDATE skills_registry_skill SET name = 'release', description = 'how 1 to release.'"
        " WHERE team_id = %s AND name = 'release 1 how'",
        [team.pk],
    )
    assert _skills(raw) == [("release", "how 1 to release.", 1)]


def test_an_unchanged_index_is_served_from_the_process_without_a_statement(team_and_key):
    team, raw = team_and_key
    _skills(raw)
    kept = skills_index._cache[team.pk][1]
    with CaptureQueriesContext(connection) as captured:
        assert _skills(raw) == [("release", "How to release.", 1)]
    assert not [q["sql"] for q in captured.captured_queries if q["sql"].startswith('SELECT "name", "description"')]
    assert skills_index._cache[team.pk][1] is kept


def test_each_team_is_answered_from_its_own_index(transactional_db, fast_passwords):
    """Two teams, alternating on one process and one kept connection: each sees exactly its own skills, also when
    both teams' indexes hold the same text (the copy is kept per team, not per fingerprint)."""
    with all_teams():
        teams = [TeamFactory(slug="skills-a"), TeamFactory(slug="skills-b"), TeamFactory(slug="skills-c")]
        for team in teams:
            StoreFactory(team=team, slug="eng")
        make_skill(teams[0], name="alpha", description="Team A's own.")
        make_skill(teams[1], name="beta", description="Team B's own.")
        make_skill(teams[2], name="alpha", description="Team A's own.")  # the same index text as team A's
        raws = [make_key(team, name="k") for team in teams]
    skills_index.clear()
    for n in range(9):
        i = n % 3
        want = [("beta", "Team B's own.", 1)] if i == 1 else [("alpha", "Team A's own.", 1)]
        assert _skills(raws[i]) == want
    assert set(skills_index._cache) == {t.pk for t in teams}
    assert skills_index._cache[teams[0].pk][1] is not skills_index._cache[teams[2].pk][1]
    # A change in team C's index is not team A's, though both had the same text.
    _elsewhere(teams[2].pk, "UPDATE skills_registry_skill SET status = 'draft' WHERE team_id = %s", [teams[2].pk])
    assert _skills(raws[2]) == []
    assert _skills(raws[0]) == [("alpha", "Team A's own.", 1)]
