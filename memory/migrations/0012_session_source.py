"""Every session records the credential that delivered it (AgentSession.source). Sessions stored before: those
pushed with a key get that key's source; the rest (imported or seeded, by whom is not known any more) are one source
together, "unattributed", so that nothing they alone support can apply itself."""

from django.db import migrations, models
from django.db.models import CharField, Value
from django.db.models.functions import Cast, Concat


def backfill(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # As the tables' owner, every team's rows (dreamweb.rls): this transaction only.
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
    AgentSession = apps.get_model("memory", "AgentSession")
    AgentSession.objects.filter(ingested_by__isnull=False).update(
        source=Concat(Value("key:"), Cast("ingested_by_id", output_field=CharField()))
    )
    AgentSession.objects.filter(ingested_by__isnull=True).update(source="unattributed")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0011_store_agents"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="source",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
