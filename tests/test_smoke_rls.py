"""The database wall: row-level security as the application role, with raw SQL that no queryset protects."""

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


def _count(table: str) -> int:
    with connection.cursor() as c:
        c.execute(f'SELECT count(*) FROM "{table}"')
        return c.fetchone()[0]


@pytest.fixture
def two_teams():
    with all_teams():
        a, b = TeamFactory(slug="rls-a"), TeamFactory(slug="rls-b")
        sa, sb = StoreFactory(team=a, slug="s"), StoreFactory(team=b, slug="s")
        make_entry(sa, key="a-entry")
        make_entry(sb, key="b-entry")
        SessionFactory(team=a, external_id="a-1")
        SessionFactory(team=b, external_id="b-1")
    return a, b


def test_app_role_is_not_superuser_nor_owner():
    with connection.cursor() as c:
        c.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert c.fetchone() == (False, False)
        c.execute("SELECT count(*) FROM pg_tables WHERE schemaname='public' AND tableowner = current_user")
        assert c.fetchone()[0] == 0


def test_no_team_set_sees_no_rows(two_teams):
    for table in [
        "dreamweb_team",
        "memory_memorystore",
        "memory_memoryentry",
        "memory_memoryversion",
        "memory_agentsession",
    ]:
        assert _count(table) == 0, table


def test_team_a_cannot_read_or_write_team_b(two_teams):
    a, b = two_teams
    with rls.team_scope(a):
        with connection.cursor() as c:
            c.execute("SELECT DISTINCT team_id FROM memory_memoryentry")
            assert [r[0] for r in c.fetchall()] == [a.pk]
            c.execute("UPDATE memory_memoryentry SET content = 'x' WHERE team_id = %s", [b.pk])
            assert c.rowcount == 0
            c.execute("DELETE FROM memory_agentsession WHERE team_id = %s", [b.pk])
            assert c.rowcount == 0
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as c:
            c.execute(
                "INSERT INTO memory_memorystore"
                " (team_id, slug, name, kind, agents_may_write, description, agents, created_at)"
                " VALUES (%s, 'sneaky', '', 'project', false, '', '[]', now())",
                [b.pk],
            )
    with rls.team_scope(b):
        assert _count("memory_memoryentry") == 1


def test_every_team_table_has_rls_forced_and_a_policy():
    with connection.cursor() as c:
        c.execute(
            """
            SELECT t.relname, t.relrowsecurity, t.relforcerowsecurity,
                   EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = t.oid)
            FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
            WHERE n.nspname = 'public' AND t.relkind = 'r' AND (
                EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attname = 'team_id'
                        AND NOT a.attisdropped)
                OR t.relname = 'dreamweb_team')
            """
        )
        rows = c.fetchall()
    assert len(rows) >= 16
    unprotected = [name for name, enabled, forced, policy in rows if not (enabled and forced and policy)]
    assert unprotected == []
