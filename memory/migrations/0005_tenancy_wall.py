"""Unique (id, team) on stores, entries and sessions, and composite foreign keys so that every reference between
memory rows (and to agent keys) stays inside one team (dreamweb.rls.same_team_foreign_keys)."""

from django.db import migrations, models

from dreamweb.rls import same_team_foreign_keys


class Migration(migrations.Migration):
    dependencies = [
        ("dreamweb", "0004_tenancy_wall"),
        ("memory", "0004_context_scope_indexes"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="agentsession",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="agentsession_id_team"),
        ),
        migrations.AddConstraint(
            model_name="memoryentry",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="memoryentry_id_team"),
        ),
        migrations.AddConstraint(
            model_name="memorystore",
            constraint=models.UniqueConstraint(fields=("id", "team"), name="memorystore_id_team"),
        ),
        *same_team_foreign_keys(
            ("memory_memoryentry", "store_id", "memory_memorystore"),
            ("memory_memoryversion", "entry_id", "memory_memoryentry"),
            ("memory_memoryversion", "author_key_id", "dreamweb_agentkey"),
            ("memory_memoryversion", "session_id", "memory_agentsession"),
            ("memory_agentsession", "ingested_by_id", "dreamweb_agentkey"),
            ("memory_contextserve", "store_id", "memory_memorystore"),
            ("memory_contextserve", "agent_key_id", "dreamweb_agentkey"),
            ("memory_feedback", "entry_id", "memory_memoryentry"),
            ("memory_feedback", "agent_key_id", "dreamweb_agentkey"),
        ),
    ]
