"""PostgreSQL row-level security: the second wall behind the team-scoped querysets.

Every team-owned table has RLS enabled and forced, with one policy that admits a row only when its team id is
in the transaction-local setting ``dreamweb.team_ids`` (a comma-separated list of ids, or ``*`` for trusted
system code such as the scheduler and key lookup). With the setting unset, no row of any team is visible.
On SQLite these functions do nothing and the querysets alone apply.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db import connection, transaction

SETTING = "dreamweb.team_ids"
ALL_TEAMS = "*"

# The policy reads the setting through two STABLE SQL functions, each wrapped in a scalar sub-select: PostgreSQL turns
# `(SELECT f())` into an InitPlan evaluated once per statement, so per row the policy is only `$all OR team_id = ANY
# ($ids)` (a boolean and a short array), not current_setting + string_to_array + a cast for every row.
# Semantics (unchanged from the first form): unset or '' -> no team; '*' -> every team; '1,2' -> those teams.
# dreamweb_team_visible is that first, per-row form, kept for migration 0003's way back.
FUNCTION_SQL = """
CREATE OR REPLACE FUNCTION dreamweb_team_visible(tid bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE COALESCE(current_setting('dreamweb.team_ids', true), '')
        WHEN '' THEN false
        WHEN '*' THEN true
        ELSE tid = ANY (string_to_array(current_setting('dreamweb.team_ids', true), ',')::bigint[])
    END
$$;
CREATE OR REPLACE FUNCTION dreamweb_team_ids() RETURNS bigint[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN COALESCE(current_setting('dreamweb.team_ids', true), '') IN ('', '*') THEN '{}'::bigint[]
        ELSE string_to_array(current_setting('dreamweb.team_ids', true), ',')::bigint[]
    END
$$;
CREATE OR REPLACE FUNCTION dreamweb_all_teams() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(current_setting('dreamweb.team_ids', true), '') = '*'
$$;
"""


def policy_expression(column: str = "team_id") -> str:
    """The row test of every team_isolation policy (USING and WITH CHECK)."""
    return f'((SELECT dreamweb_all_teams()) OR "{column}" = ANY ((SELECT dreamweb_team_ids())::bigint[]))'


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def enable_sql(table: str, column: str = "team_id") -> str:
    return (
        f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY; '
        f'ALTER TABLE "{table}" FORCE ROW LEVEL SECURITY; '
        f'DROP POLICY IF EXISTS team_isolation ON "{table}"; '
        f'CREATE POLICY team_isolation ON "{table}" USING {policy_expression(column)} '
        f"WITH CHECK {policy_expression(column)};"
    )


def disable_sql(table: str) -> str:
    return (
        f'DROP POLICY IF EXISTS team_isolation ON "{table}"; '
        f'ALTER TABLE "{table}" NO FORCE ROW LEVEL SECURITY; '
        f'ALTER TABLE "{table}" DISABLE ROW LEVEL SECURITY;'
    )


def rls_operations(*tables: str, column: str = "team_id") -> list:
    """Migration operations that put the policy on the given tables (PostgreSQL only)."""
    from django.db import migrations

    def forward(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        schema_editor.execute(FUNCTION_SQL)
        for table in tables:
            schema_editor.execute(enable_sql(table, column))

    def backward(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for table in tables:
            schema_editor.execute(disable_sql(table))

    return [migrations.RunPython(forward, backward)]


def _current() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [SETTING])
        return cursor.fetchone()[0] or ""


def _set(value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [SETTING, value])


def _encode(team_ids: Iterable[int] | str) -> str:
    if isinstance(team_ids, str):
        return team_ids
    return ",".join(str(int(t)) for t in team_ids)


@contextlib.contextmanager
def scope(team_ids: Iterable[int] | str) -> Iterator[None]:
    """Run the block in a transaction that sees only these teams' rows (``"*"``: every team).

    The setting is transaction-local (``set_config(..., true)``); the previous value is restored on exit so that
    nested scopes behave like a stack.
    """
    with transaction.atomic():
        if not is_postgres():
            yield
            return
        previous = _current()
        _set(_encode(team_ids))
        try:
            yield
        finally:
            if not connection.needs_rollback:
                _set(previous)


def team_scope(team_or_id) -> contextlib.AbstractContextManager[None]:
    team_id = getattr(team_or_id, "pk", team_or_id)
    return scope([team_id])


def system_scope() -> contextlib.AbstractContextManager[None]:
    """For trusted code that must look across teams: key lookup, memberships at sign-in, the scheduler."""
    return scope(ALL_TEAMS)


def set_scope(team_ids: Iterable[int] | str) -> None:
    """Set the scope for the rest of the current transaction (used by middleware and API authentication)."""
    if is_postgres() and connection.in_atomic_block:
        _set(_encode(team_ids))


def grant_app_role(sender=None, using="default", **kwargs) -> None:
    """After migrate (run as the owner role), give the application role data access and nothing more."""
    from django.db import connections

    conn = connections[using]
    if conn.vendor != "postgresql":
        return
    role = settings.DREAMWEB_DB_APP_ROLE
    with conn.cursor() as cursor:
        cursor.execute("SELECT current_user, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)", [role])
        current_user, exists = cursor.fetchone()
        if not exists or current_user == role:
            return
        cursor.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        cursor.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"')
        cursor.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
        for function in ("dreamweb_team_visible(bigint)", "dreamweb_team_ids()", "dreamweb_all_teams()"):
            cursor.execute("SELECT to_regprocedure(%s) IS NOT NULL", [function])
            if cursor.fetchone()[0]:
                cursor.execute(f'GRANT EXECUTE ON FUNCTION {function} TO "{role}"')
