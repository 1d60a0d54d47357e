"""Sessions at scale (see memory.models.AgentSession): newest-first indexes for the session list and a cycle's
selection, a partial index of the sessions whose events retention has kept, and ``events_pruned_at``.

The newest-first indexes order ``started_at DESC NULLS LAST`` on PostgreSQL, the order the queries ask for
(memory.models.NEWEST). SQLite cannot say NULLS LAST in an index (it sorts NULL first ascending, so last when
descending, which is the same order): there the index is written without the clause. The state says plain DESC
(as the model does): SQLite rebuilds a table's indexes from the state when a later migration adds a column."""

from django.db import migrations, models

NEWEST = {
    "agentsession_team_newest": '"team_id", "started_at" DESC{nulls}, "id" DESC',
    "agentsession_team_agent_newest": '"team_id", "agent", "started_at" DESC{nulls}, "id" DESC',
}


def create(apps, schema_editor):
    nulls = " NULLS LAST" if schema_editor.connection.vendor == "postgresql" else ""
    for name, columns in NEWEST.items():
        schema_editor.execute(f'CREATE INDEX "{name}" ON "memory_agentsession" ({columns.format(nulls=nulls)})')


def drop(apps, schema_editor):
    for name in NEWEST:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("dreamweb", "0004_tenancy_wall"),
        ("memory", "0008_store_content_version"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="agentsession", name="agentsession_team_agent"),
        migrations.AddField(
            model_name="agentsession",
            name="events_pruned_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(
                    model_name="agentsession",
                    index=models.Index(
                        models.F("team"),
                        models.OrderBy(models.F("started_at"), descending=True),
                        models.OrderBy(models.F("id"), descending=True),
                        name="agentsession_team_newest",
                    ),
                ),
                migrations.AddIndex(
                    model_name="agentsession",
                    index=models.Index(
                        models.F("team"),
                        models.F("agent"),
                        models.OrderBy(models.F("started_at"), descending=True),
                        models.OrderBy(models.F("id"), descending=True),
                        name="agentsession_team_agent_newest",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(create, drop)],
        ),
        migrations.AddIndex(
            model_name="agentsession",
            index=models.Index(
                condition=models.Q(("events_pruned_at__isnull", True)),
                fields=["team", "ingested_at"],
                name="agentsession_events_kept",
            ),
        ),
    ]
