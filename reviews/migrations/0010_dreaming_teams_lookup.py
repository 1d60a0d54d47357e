"""A SECURITY DEFINER lookup for retention (reviews.retention): the ids of the teams that have dream runs, across
teams (the beat prunes every team, each in its own scope). Ids only, as the other lookups of migration 0005."""

from django.db import migrations

LOOKUP = """
CREATE OR REPLACE FUNCTION dreamweb_dreaming_teams() RETURNS TABLE (team bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    previous text := COALESCE(current_setting('dreamweb.team_ids', true), '');
BEGIN
    PERFORM set_config('dreamweb.team_ids', '*', true);
    RETURN QUERY SELECT DISTINCT r.team_id FROM reviews_dreamrun r ORDER BY 1;
    PERFORM set_config('dreamweb.team_ids', previous, true);
END
$$;
"""
DROP = "DROP FUNCTION IF EXISTS dreamweb_dreaming_teams();"


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(LOOKUP)  # the application role is granted EXECUTE after migrate (dreamweb.rls)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0009_policy_forgetting")]

    operations = [migrations.RunPython(forward, backward)]
