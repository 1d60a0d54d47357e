"""The agents a store serves move from its autonomy policy to the store itself (memory.MemoryStore.agents, in the
export/import contract): each policy's list is copied to its store, then the policy's field goes."""

from django.db import migrations


def copy_agents(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # As the tables' owner, every team's rows (dreamweb.rls): this transaction only.
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
    AutonomyPolicy = apps.get_model("reviews", "AutonomyPolicy")
    MemoryStore = apps.get_model("memory", "MemoryStore")
    for store_id, agents in AutonomyPolicy.objects.exclude(agents=[]).values_list("store_id", "agents"):
        names = sorted({a.strip() for a in agents or [] if isinstance(a, str) and a.strip()})
        if names:
            MemoryStore.objects.filter(pk=store_id).update(agents=names)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0011_store_agents"),
        ("reviews", "0012_related_proposal_indexes"),
    ]

    operations = [
        migrations.RunPython(copy_agents, migrations.RunPython.noop),
        migrations.RemoveField(model_name="autonomypolicy", name="agents"),
    ]
