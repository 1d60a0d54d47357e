"""The migration helpers of dreamweb.rls, run for real on scratch tables (PostgreSQL): ``enable_operations`` puts the
team policy on a table and takes it off again, ``same_team_foreign_keys`` adds (and drops) the composite foreign key
that refuses a row pointing at another team's row, ``rls_operations`` also (re)creates the policy's functions.

The real tables got these operations when the test database was migrated (tests/test_tenancy_wall.py checks the
catalog); these tests run the operations themselves, so that a fault in them is seen even though the migrations
have already run. Everything happens inside the test's transaction and is rolled back with it (DDL is
transactional in PostgreSQL)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import DatabaseError, connection, transaction

from dreamweb import rls
from tests.conftest import is_postgres
from tests.scoping import all_teams, app_role, set_state

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not is_postgres(), reason="row-level security is PostgreSQL's"),
]

PARENT, CHILD = "rls_probe_parent", "rls_probe_child"


def _sql(*statements: str):
    with connection.cursor() as c:
        for sql in statements:
            c.execute(sql)
        return c.fetchall() if c.description else None


def _q(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as c:
        c.execute(sql, params)
        return c.fetchall()


def _run(operations, *, forward: bool = True) -> None:
    """Run RunPython operations the way migrate does (the owner's connection, a schema editor)."""
    with connection.schema_editor(atomic=False) as editor:
        for op in operations:
            (op.code if forward else op.reverse_code)(apps, editor)


@pytest.fixture
def probes():
    """Two scratch tables owned by the test's owner login, readable and writable by the application role."""
    with all_teams():
        _sql(
            f'CREATE TABLE "{PARENT}" (id bigint NOT NULL, team_id bigint NOT NULL, PRIMARY KEY (id), '
            "UNIQUE (id, team_id))",
            f'CREATE TABLE "{CHILD}" (id bigint PRIMARY KEY, team_id bigint NOT NULL, parent_id bigint)',
            f'GRANT SELECT, INSERT ON "{PARENT}", "{CHILD}" TO "{app_role()}"',
            f'INSERT INTO "{PARENT}" VALUES (1, 101), (2, 102)',
        )
        yield


def _rls_flags(table: str) -> tuple[bool, bool]:
    return tuple(_q("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = %s", [table])[0])


def _policies(table: str) -> list[tuple]:
    return _q("SELECT policyname, qual, with_check FROM pg_policies WHERE tablename = %s", [table])


def _as_app(team_ids: str):
    """Switch this transaction to the application role with this scope (the rest of the test runs so)."""
    set_state(app_role(), team_ids, local=True)


def test_enable_operations_put_the_team_policy_on_a_table_and_take_it_off(probes):
    with all_teams():
        assert _rls_flags(PARENT) == (False, False) and _policies(PARENT) == []
        _run(rls.enable_operations(PARENT, CHILD))
        assert _rls_flags(PARENT) == (True, True) and _rls_flags(CHILD) == (True, True)
        ((name, using, check),) = _policies(PARENT)
        assert name == "team_isolation" and using == check
        assert "dreamweb_all_teams()" in using and "dreamweb_team_ids()" in using and "team_id" in using
    _as_app("101")
    assert _sql(f'SELECT id FROM "{PARENT}" ORDER BY id') == [(1,)]  # only its team's row
    with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
        _sql(f'INSERT INTO "{PARENT}" VALUES (3, 102)')  # WITH CHECK: not another team's row
    _sql(f'INSERT INTO "{PARENT}" VALUES (4, 101)')
    _as_app("")
    assert _sql(f'SELECT id FROM "{PARENT}"') == []  # no scope, no rows
    _as_app("*")
    assert _sql(f'SELECT id FROM "{PARENT}"') == []  # the app role cannot widen its scope with '*'

    with all_teams():
        _run(rls.enable_operations(PARENT, CHILD), forward=False)
        assert _rls_flags(PARENT) == (False, False) and _rls_flags(CHILD) == (False, False)
        assert _policies(PARENT) == [] and _policies(CHILD) == []


def test_enable_operations_on_another_column(probes):
    with all_teams():
        _run(rls.enable_operations(CHILD, column="parent_id"))
        ((_, using, _),) = _policies(CHILD)
        assert "parent_id" in using and "team_id" not in using.replace("dreamweb_team_ids", "")
        _sql(f'INSERT INTO "{CHILD}" VALUES (10, 101, 7), (11, 101, 8)')
    _as_app("7")
    assert _sql(f'SELECT id FROM "{CHILD}"') == [(10,)]


def test_same_team_foreign_keys_refuse_a_row_pointing_at_another_team(probes):
    with all_teams():
        _run(rls.same_team_foreign_keys((CHILD, "parent_id", PARENT)))
        ((name, deferrable, deferred),) = _q(
            "SELECT conname, condeferrable, condeferred FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype = 'f'",
            [CHILD],
        )
        assert (name, deferrable, deferred) == (f"{CHILD}_parent_id_same_team", True, True)
        _sql("SET CONSTRAINTS ALL IMMEDIATE")
        _sql(f'INSERT INTO "{CHILD}" VALUES (1, 101, 1), (2, 101, NULL)')  # its own team's parent; or none
        with pytest.raises(DatabaseError, match="foreign key"), transaction.atomic():
            _sql(f'INSERT INTO "{CHILD}" VALUES (3, 101, 2)')  # parent 2 belongs to team 102
        with pytest.raises(DatabaseError, match="foreign key"), transaction.atomic():
            _sql(f'INSERT INTO "{CHILD}" VALUES (4, 101, 99)')  # no such parent
        _run(rls.same_team_foreign_keys((CHILD, "parent_id", PARENT)), forward=False)
        _sql(f'INSERT INTO "{CHILD}" VALUES (5, 101, 2)')  # without the constraint the database lets it through
        assert _q("SELECT count(*) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'", [CHILD]) == [
            (0,)
        ]


def test_rls_operations_create_the_functions_and_the_policy(probes):
    with all_teams():
        _sql("DROP FUNCTION dreamweb_team_visible(bigint)")
        _run(rls.rls_operations(PARENT))
        assert _sql("SELECT count(*) FROM pg_proc WHERE proname = 'dreamweb_team_visible'") == [(1,)]
        assert _rls_flags(PARENT) == (True, True) and [p[0] for p in _policies(PARENT)] == ["team_isolation"]
        _run(rls.rls_operations(PARENT), forward=False)
        assert _rls_flags(PARENT) == (False, False) and _policies(PARENT) == []


def test_the_operations_do_nothing_on_another_database(probes):
    """On SQLite the helpers must be no-ops (the querysets alone apply there): a schema editor of another vendor."""

    class Editor:
        class connection:  # noqa: N801 - stands in for the editor's connection attribute
            vendor = "sqlite"

        def execute(self, sql, params=None):  # pragma: no cover - must not be reached
            raise AssertionError(f"executed on sqlite: {sql}")

    for ops in (
        rls.enable_operations(PARENT),
        rls.rls_operations(PARENT),
        rls.same_team_foreign_keys((CHILD, "parent_id", PARENT)),
    ):
        for op in ops:
            op.code(apps, Editor())
            op.reverse_code(apps, Editor())
