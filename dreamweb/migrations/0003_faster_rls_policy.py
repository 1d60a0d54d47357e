"""Row-level security, same semantics, cheaper per row: every ``team_isolation`` policy is rewritten from
``dreamweb_team_visible(team_id)`` (current_setting + string_to_array + a cast, evaluated for every row) to
``(SELECT dreamweb_all_teams()) OR team_id = ANY ((SELECT dreamweb_team_ids())::bigint[])``, whose two sub-selects
PostgreSQL evaluates once per statement (InitPlans). See dreamweb.rls.

The policies are found in pg_policy, so every table that has one is covered, whichever app created it; the SQL is
frozen here (not taken from dreamweb.rls) so that this migration keeps doing what it did when later code changes.
"""

import re

from django.db import migrations

FUNCTIONS = """
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

NEW = '((SELECT dreamweb_all_teams()) OR "{column}" = ANY ((SELECT dreamweb_team_ids())::bigint[]))'
OLD = '(dreamweb_team_visible("{column}"))'

# The column a policy tests, in either form as pg_get_expr prints it.
OLD_COLUMN = re.compile(r'dreamweb_team_visible\(\s*"?(\w+)"?\s*\)')
NEW_COLUMN = re.compile(r'"?(\w+)"?\s*=\s*ANY\s*\(\s*\(\s*SELECT dreamweb_team_ids\(\)')


def _policies(schema_editor) -> list[tuple[str, str]]:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, pg_get_expr(p.polqual, p.polrelid)
            FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE p.polname = 'team_isolation' AND n.nspname = current_schema()
            ORDER BY c.relname
            """
        )
        return cursor.fetchall()


def _rewrite(schema_editor, pattern, template) -> None:
    for table, qual in _policies(schema_editor):
        match = pattern.search(qual or "")
        if match is None:
            continue  # already in the target form
        expr = template.format(column=match.group(1))
        schema_editor.execute(f'ALTER POLICY team_isolation ON "{table}" USING {expr} WITH CHECK {expr}')


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTIONS)
    _rewrite(schema_editor, OLD_COLUMN, NEW)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    _rewrite(schema_editor, NEW_COLUMN, OLD)


class Migration(migrations.Migration):
    # After every app's row-level-security migration, so that all existing policies are rewritten; tables that get a
    # policy later get the new form from dreamweb.rls.enable_sql.
    dependencies = [
        ("dreamweb", "0002_row_level_security"),
        ("memory", "0002_row_level_security"),
        ("reviews", "0002_row_level_security"),
        ("skills_registry", "0002_row_level_security"),
    ]

    operations = [migrations.RunPython(forward, backward)]
