"""The audit of served context keeps only the same-team foreign keys on its store and key.

Every context request writes one ContextServe row, and each foreign key is checked at its commit. The plain keys on
``store_id`` and ``agent_key_id`` are implied by the composite ``(store_id, team_id)`` and ``(agent_key_id, team_id)``
keys of migration 0005 (a row naming a missing store or key is refused by those, ``team_id`` being NOT NULL), so they
only cost two more checks per serve. The columns' indexes stay (the store's readers, the SET NULL of a deleted key).
SQLite has no composite keys: there the ORM alone writes these rows.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dreamweb", "0005_members_audit_and_invitations"),
        ("memory", "0014_session_time_newest"),
    ]

    operations = [
        migrations.AlterField(
            model_name="contextserve",
            name="agent_key",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="dreamweb.agentkey",
            ),
        ),
        migrations.AlterField(
            model_name="contextserve",
            name="store",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="memory.memorystore",
            ),
        ),
    ]
