"""The audit of served context keeps the indexes its readers use, and no more: one row is written per context request
(docs/benchmarks.md, issue 15). The readers look a team's serves up by session: one index (team, session) replaces
the team's and the session id's (and the session id's pattern index, which nothing used)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dreamweb", "0005_members_audit_and_invitations"),
        ("memory", "0012_session_source"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="contextserve",
            index=models.Index(fields=["team", "session_external_id"], name="contextserve_session"),
        ),
        migrations.AlterField(
            model_name="contextserve",
            name="session_external_id",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AlterField(
            model_name="contextserve",
            name="team",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="dreamweb.team"
            ),
        ),
    ]
