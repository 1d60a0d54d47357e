"""Tenancy the application role cannot widen (see dreamweb.rls and dreamweb migration 0004).

* Unique (id, team) on policies, runs and proposals, and composite foreign keys so that every reference between the
  review tables (and to stores and sessions) stays inside one team.
* Two SECURITY DEFINER lookups for the trusted steps that start without a team: the team of a dream run (a task gets
  only the run's id) and the enabled schedules (the beat scans every team's stores), ids and times only.
"""

from django.conf import settings
from django.db import migrations, models

from dreamweb.rls import same_team_foreign_keys

# As dreamweb migration 0004's: run as the owner with the all-teams value for the function's body only.
LOOKUPS = """
CREATE OR REPLACE FUNCTION dreamweb_run_team(run bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    previous text := COALESCE(current_setting('dreamweb.team_ids', true), '');
    answer bigint;
BEGIN
    PERFORM set_config('dreamweb.team_ids', '*', true);
    SELECT team_id INTO answer FROM reviews_dreamrun WHERE id = run;
    PERFORM set_config('dreamweb.team_ids', previous, true);
    RETURN answer;
END
$$;
CREATE OR REPLACE FUNCTION dreamweb_scheduled_policies()
RETURNS TABLE (policy bigint, team bigint, store bigint, last_at timestamptz, minutes integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    previous text := COALESCE(current_setting('dreamweb.team_ids', true), '');
BEGIN
    PERFORM set_config('dreamweb.team_ids', '*', true);
    RETURN QUERY SELECT p.id, p.team_id, p.store_id, p.last_scheduled_at, p.schedule_minutes::integer
        FROM reviews_autonomypolicy p WHERE p.schedule_enabled;
    PERFORM set_config('dreamweb.team_ids', previous, true);
END
$$;
"""
DROP_LOOKUPS = """
DROP FUNCTION IF EXISTS dreamweb_run_team(bigint);
DROP FUNCTION IF EXISTS dreamweb_scheduled_policies();
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(LOOKUPS)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_LOOKUPS)


class Migration(migrations.Migration):
    dependencies = [
        ("dreamweb", "0004_tenancy_wall"),
        ("memory", "0005_tenancy_wall"),
        ("reviews", "0004_queue_sort_and_decided_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="autonomypolicy",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="autonomypolicy_id_team"),
        ),
        migrations.AddConstraint(
            model_name="dreamrun",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="dreamrun_id_team"),
        ),
        migrations.AddConstraint(
            model_name="proposal",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="proposal_id_team"),
        ),
        *same_team_foreign_keys(
            ("reviews_autonomypolicy", "store_id", "memory_memorystore"),
            ("reviews_policychange", "policy_id", "reviews_autonomypolicy"),
            ("reviews_dreamrun", "store_id", "memory_memorystore"),
            ("reviews_sessionanalysis", "run_id", "reviews_dreamrun"),
            ("reviews_sessionanalysis", "session_id", "memory_agentsession"),
            ("reviews_proposal", "store_id", "memory_memorystore"),
            ("reviews_proposal", "run_id", "reviews_dreamrun"),
            ("reviews_proposalevidence", "proposal_id", "reviews_proposal"),
            ("reviews_proposalevidence", "session_id", "memory_agentsession"),
        ),
        migrations.RunPython(forward, backward),
    ]
