"""Proposals count the distinct sources (credentials) and agents of their supporting sessions; policies get a minimum
number of sources for anything to apply without a reviewer (2). Stored proposals are counted from their evidence."""

from django.db import migrations, models
from django.db.models import Count


def backfill(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
    Proposal = apps.get_model("reviews", "Proposal")
    rows = Proposal.objects.annotate(
        sources=Count("evidence__session__source", distinct=True),
        agents=Count("evidence__session__agent", distinct=True),
    ).values_list("pk", "sources", "agents")
    for pk, sources, agents in rows.iterator(chunk_size=500):
        if sources or agents:
            Proposal.objects.filter(pk=pk).update(prevalence_sources=sources, prevalence_agents=agents)


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0013_store_agents_move"),
        ("memory", "0012_session_source"),
    ]

    operations = [
        migrations.AddField(
            model_name="autonomypolicy",
            name="min_sources",
            field=models.PositiveIntegerField(
                default=2,
                help_text="Fewest distinct credentials (API keys, people, import runs) whose sessions must support a change for it to apply without a reviewer.",
            ),
        ),
        migrations.AddField(
            model_name="proposal",
            name="prevalence_agents",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="proposal",
            name="prevalence_sources",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
