"""The row-level-security policy (dreamweb migration 0003): the same rows as the first, per-row form for every value
of the setting, on every table, with the team list evaluated once per statement instead of once per row."""

import pytest
from django.db import DatabaseError, connection, transaction

from dreamweb import rls
from tests.conftest import is_postgres
from tests.factories import SessionFactory, StoreFactory, TeamFactory, make_entry
from tests.scoping import all_teams

pytestmark = [
    pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature"),
    pytest.mark.django_db,
]


def _policies() -> list[tuple[str, str, str]]:
    with connection.cursor() as c:
        c.execute(
            """
            SELECT c.relname, pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)
            FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
            WHERE p.polname = 'team_isolation' ORDER BY 1
            """
        )
        return c.fetchall()


def _rows(table: str, column: str) -> set[tuple[int, int]]:
    with connection.cursor() as c:
        c.execute(f'SELECT id, "{column}" FROM "{table}"')
        return set(c.fetchall())


@pytest.fixture
def three_teams():
    with all_teams():
        teams = [TeamFactory(slug=f"pol-{n}") for n in "abc"]
        for team in teams:
            store = StoreFactory(team=team, slug="s")
            make_entry(store, key="one")
            make_entry(store, key="two", scope_agent="bot")
            SessionFactory(team=team, external_id=f"{team.slug}-1")
    return teams


def test_every_policy_has_the_once_per_statement_form():
    policies = _policies()
    assert len(policies) >= 17
    for table, using, check in policies:
        assert using == check, table
        assert "dreamweb_all_teams()" in using and "dreamweb_team_ids()" in using, (table, using)
        assert "dreamweb_team_visible" not in using, table


@pytest.mark.parametrize("table, column", [("dreamweb_team", "id"), ("memory_memoryentry", "team_id")])
def test_same_rows_as_the_per_row_form_for_every_setting(three_teams, table, column):
    a, b, c = (t.pk for t in three_teams)
    with all_teams():
        everything = _rows(table, column)
    assert {team for _, team in everything} >= {a, b, c}
    settings = ["", "*", f"{a}", f"{b}", f"{a},{c}", f" {b} , {c}", f"{a},{b},{c}", "999999999"]
    for value in settings:
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("SELECT set_config('dreamweb.team_ids', %s, true)", [value])
                # The first form of the policy, as a function of the team id, is the reference.
                cur.execute("SELECT t, dreamweb_team_visible(t) FROM unnest(%s::bigint[]) AS t", [[a, b, c]])
                expected_teams = {team for team, visible in cur.fetchall() if visible}
            expected = {(row, team) for row, team in everything if team in expected_teams}
            assert _rows(table, column) == expected, value
    # Unset (not merely empty): nothing.
    assert _rows(table, column) == set()


def test_writes_are_checked_against_the_same_list(three_teams):
    a, b, _ = three_teams
    with rls.scope([a.pk]), pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as c:
        c.execute(
            "INSERT INTO memory_memorystore"
            " (team_id, slug, name, kind, agents_may_write, description, agents, created_at)"
            " VALUES (%s, 'sneaky', '', 'project', false, '', '[]', now())",
            [b.pk],
        )
    with rls.scope([a.pk, b.pk]), connection.cursor() as c:
        c.execute(
            "INSERT INTO memory_memorystore"
            " (team_id, slug, name, kind, agents_may_write, description, agents, created_at)"
            " VALUES (%s, 'allowed', '', 'project', false, '', '[]', now())",
            [b.pk],
        )
        assert c.rowcount == 1
    with rls.scope(""), pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as c:
        c.execute(
            "INSERT INTO memory_memorystore"
            " (team_id, slug, name, kind, agents_may_write, description, agents, created_at)"
            " VALUES (%s, 'nobody', '', 'project', false, '', '[]', now())",
            [a.pk],
        )


def test_team_list_is_evaluated_once_per_statement_not_per_row(three_teams):
    with rls.team_scope(three_teams[0]), connection.cursor() as c:
        c.execute("EXPLAIN SELECT id FROM memory_memoryentry WHERE content <> ''")
        plan = "\n".join(r[0] for r in c.fetchall())
    assert "InitPlan" in plan, plan
    assert "current_setting" not in plan and "string_to_array" not in plan, plan
