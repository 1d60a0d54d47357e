"""Tenancy the application role cannot widen (see dreamweb.rls).

* The all-teams value ``*`` counts only for a role with the privileges of the role that owns these functions (the
  table owner: migrations, and the SECURITY DEFINER functions below). ``set_config('dreamweb.team_ids', '*')`` by the
  application role now shows no row at all.
* Three SECURITY DEFINER lookups answer, with ids only, the questions the application asks before it knows its team:
  the team of an API key prefix, the teams of a person, the team of a slug.
* AgentKey gets a unique (id, team): the target of the composite foreign keys of the other apps.

The SQL is frozen here (not taken from dreamweb.rls), like migration 0003's.
"""

from django.db import migrations, models

OWNER_ONLY = """
CREATE OR REPLACE FUNCTION dreamweb_all_teams() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(current_setting('dreamweb.team_ids', true), '') = '*'
       AND pg_has_role(current_user, (SELECT proowner FROM pg_proc WHERE oid = 'dreamweb_all_teams()'::regprocedure),
                       'USAGE')
$$;
CREATE OR REPLACE FUNCTION dreamweb_team_visible(tid bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE COALESCE(current_setting('dreamweb.team_ids', true), '')
        WHEN '' THEN false
        WHEN '*' THEN dreamweb_all_teams()
        ELSE tid = ANY (string_to_array(current_setting('dreamweb.team_ids', true), ',')::bigint[])
    END
$$;
"""

ANY_ROLE = """
CREATE OR REPLACE FUNCTION dreamweb_all_teams() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(current_setting('dreamweb.team_ids', true), '') = '*'
$$;
CREATE OR REPLACE FUNCTION dreamweb_team_visible(tid bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE COALESCE(current_setting('dreamweb.team_ids', true), '')
        WHEN '' THEN false
        WHEN '*' THEN true
        ELSE tid = ANY (string_to_array(current_setting('dreamweb.team_ids', true), ',')::bigint[])
    END
$$;
"""

# Each runs as the owner, with the all-teams value set for its own body only (the owner's privileges make it count;
# a function's SET clause cannot name a custom setting unless a superuser creates the function).
def definer(signature: str, returns: str, query: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION {signature} RETURNS {returns}
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    previous text := COALESCE(current_setting('dreamweb.team_ids', true), '');
    answer {returns};
BEGIN
    PERFORM set_config('dreamweb.team_ids', '*', true);
    {query} INTO answer;
    PERFORM set_config('dreamweb.team_ids', previous, true);
    RETURN answer;
END
$$;
"""


LOOKUPS = "".join(
    [
        definer("dreamweb_key_team(key_prefix text)", "bigint",
                "SELECT team_id FROM dreamweb_agentkey WHERE prefix = key_prefix"),
        definer("dreamweb_member_team_ids(uid bigint)", "bigint[]",
                "SELECT COALESCE(array_agg(team_id ORDER BY team_id), '{}') FROM dreamweb_membership WHERE user_id = uid"),
        definer("dreamweb_team_by_slug(team_slug text)", "bigint",
                "SELECT id FROM dreamweb_team WHERE slug = team_slug"),
    ]
)  # fmt: skip
DROP_LOOKUPS = """
DROP FUNCTION IF EXISTS dreamweb_key_team(text);
DROP FUNCTION IF EXISTS dreamweb_member_team_ids(bigint);
DROP FUNCTION IF EXISTS dreamweb_team_by_slug(text);
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(OWNER_ONLY)
        schema_editor.execute(LOOKUPS)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_LOOKUPS)
        schema_editor.execute(ANY_ROLE)


class Migration(migrations.Migration):
    dependencies = [("dreamweb", "0003_faster_rls_policy")]

    operations = [
        migrations.RunPython(forward, backward),
        migrations.AddConstraint(
            model_name="agentkey",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="agentkey_id_team"),
        ),
    ]
