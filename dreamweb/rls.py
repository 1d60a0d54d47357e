"""PostgreSQL row-level security: the second wall behind the team-scoped querysets.

Every team-owned table has RLS enabled and forced, with one policy that admits a row only when its team id is
in the transaction-local setting ``dreamweb.team_ids`` (a comma-separated list of ids). With the setting unset or
empty, no row of any team is visible.

The application role cannot widen its own scope to every team: the value ``*`` ("all teams") counts only for a role
that has the table owner's privileges (migrations, and the SECURITY DEFINER functions below, which run as the
owner). Code that must look across teams before it knows its team asks one narrow question through such a function
and gets ids back, never rows: the team of an API key prefix, a person's teams, the team of a slug (and, in the
reviews app, the team of a dream run, the schedules that are due and the teams that dream). A new team's id is drawn
from its sequence first, so that its row is written inside its own scope.

Composite foreign keys ``(column, team_id) -> parent (id, team_id)`` make the database refuse a row that points at
another team's row (see ``same_team_foreign_keys``): a plain foreign key check bypasses row-level security.

On SQLite these functions fall back to plain queries and the querysets alone apply.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db import connection, connections, transaction

from . import prepared

SETTING = "dreamweb.team_ids"
# Only the owner role (and SECURITY DEFINER functions, which run as the owner) see every team with this value.
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


# SECURITY DEFINER lookups (dreamweb migration 0004, reviews migration 0005): ids across teams, never rows.
LOOKUP_FUNCTIONS = (
    "dreamweb_key_team(text)",
    "dreamweb_member_team_ids(bigint)",
    "dreamweb_team_by_slug(text)",
    "dreamweb_run_team(bigint)",
    "dreamweb_scheduled_policies()",
    "dreamweb_dreaming_teams()",
)


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
    """Migration operations that create the policy's functions in their first form and put the policy on the given
    tables (PostgreSQL only): for the migrations written before dreamweb 0004; a new one uses ``enable_operations``."""
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


def enable_operations(*tables: str, column: str = "team_id") -> list:
    """Migration operations that put the policy on tables added after the functions exist (PostgreSQL only).

    Use this, not ``rls_operations``, in a new migration: that one also (re)creates the policy's functions in their
    first form, which would undo the wall of dreamweb migration 0004 (the application role could then widen its scope
    with '*')."""
    from django.db import migrations

    def forward(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for table in tables:
                schema_editor.execute(enable_sql(table, column))

    def backward(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for table in tables:
                schema_editor.execute(disable_sql(table))

    return [migrations.RunPython(forward, backward)]


def _current() -> str:
    with prepared.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [SETTING])
        return cursor.fetchone()[0] or ""


def _set(value: str) -> None:
    with prepared.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [SETTING, value])


def _encode(team_ids: Iterable[int] | str) -> str:
    if isinstance(team_ids, str):
        return team_ids
    return ",".join(str(int(t)) for t in team_ids)


@contextlib.contextmanager
def scope(team_ids: Iterable[int] | str) -> Iterator[None]:
    """Run the block in a transaction that sees only these teams' rows (``"*"``: every team).

    The setting is transaction-local (``set_config(..., true)``); the previous value is restored on exit so that
    nested scopes behave like a stack (an outermost scope needs no restore: its transaction's end drops it).
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if not is_postgres():
            yield
            return
        if outermost:
            # The transaction starts here and its end drops the setting: nothing to read first or to restore (one
            # statement instead of three, on every task step and page that opens its own scope).
            _set(_encode(team_ids))
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


def _ask(sql: str, params: list):
    # Constant texts (the scope's statements are on every request's path: prepared, dreamweb.prepared).
    with prepared.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row[0] if row else None


def enter_key_scope(prefix: str) -> None:
    """Scope the rest of the transaction to the team of the API key with this public prefix (to no team when there
    is no such key), in one statement. The key is then read, and its secret checked, inside that scope."""
    if is_postgres() and connection.in_atomic_block:
        _ask(f"SELECT set_config('{SETTING}', COALESCE(dreamweb_key_team(%s)::text, ''), true)", [prefix])


def enter_member_scope(user_id: int) -> None:
    """Scope the rest of the transaction to the teams this person belongs to, in one statement."""
    if is_postgres() and connection.in_atomic_block:
        _ask(f"SELECT set_config('{SETTING}', array_to_string(dreamweb_member_team_ids(%s), ','), true)", [user_id])


def team_id_for_slug(slug: str) -> int | None:
    """The id of the team with this slug (commands name teams by slug)."""
    if is_postgres():
        return _ask("SELECT dreamweb_team_by_slug(%s)", [slug])
    from .models import Team

    return Team.objects.filter(slug=slug).values_list("pk", flat=True).first()


def new_team_id() -> int | None:
    """An id for a team about to be created, drawn from the table's sequence, so that the team's row can be written
    inside its own scope. None on SQLite (the database picks it)."""
    if not is_postgres():
        return None
    return _ask("SELECT nextval(pg_get_serial_sequence('dreamweb_team', 'id'))", [])


def same_team_foreign_keys(*links: tuple[str, str, str]) -> list:
    """Migration operations: for each (table, column, parent table), a foreign key ``(column, team_id)`` to the
    parent's ``(id, team_id)`` (which needs a unique constraint on the parent's (id, team)), so that a row can only
    point at a row of its own team. Deferred to the commit like Django's own foreign keys; a NULL column is not
    checked (MATCH SIMPLE). PostgreSQL only (SQLite cannot add constraints to a table)."""
    from django.db import migrations

    def name(table: str, column: str) -> str:
        return f"{table}_{column}_same_team"[:63]

    def forward(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for table, column, parent in links:
            schema_editor.execute(
                f'ALTER TABLE "{table}" ADD CONSTRAINT "{name(table, column)}" FOREIGN KEY ("{column}", "team_id") '
                f'REFERENCES "{parent}" ("id", "team_id") DEFERRABLE INITIALLY DEFERRED'
            )

    def backward(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for table, column, _ in links:
            schema_editor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT IF EXISTS "{name(table, column)}"')

    return [migrations.RunPython(forward, backward)]


def set_scope(team_ids: Iterable[int] | str) -> None:
    """Set the scope for the rest of the current transaction (used by middleware and API authentication)."""
    if is_postgres() and connection.in_atomic_block:
        _set(_encode(team_ids))


def grant_app_role(sender=None, using="default", **kwargs) -> None:
    """After migrate (run as the owner role), give the application role data access and nothing more."""
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
        for function in (
            "dreamweb_team_visible(bigint)",
            "dreamweb_team_ids()",
            "dreamweb_all_teams()",
            *LOOKUP_FUNCTIONS,
        ):
            cursor.execute("SELECT to_regprocedure(%s) IS NOT NULL", [function])
            if cursor.fetchone()[0]:
                cursor.execute(f'GRANT EXECUTE ON FUNCTION {function} TO "{role}"')
