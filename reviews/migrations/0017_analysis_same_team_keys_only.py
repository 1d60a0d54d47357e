"""A run's analyses keep only the same-team foreign keys on their run and session.

Dispatch writes one SessionAnalysis row per selected session in one statement, and every foreign key is checked per
row at its commit (they are deferred). The plain keys on ``run_id``, ``session_id`` and ``team_id`` are implied: the
composite ``(run_id, team_id)`` and ``(session_id, team_id)`` keys of migration 0005 refuse a row that names a
missing run or session (``team_id`` is NOT NULL), and the team exists through the run's own key to it. The five
checks per row were 0.3 s of a 10,000-session dispatch's commit, the two left 0.1 s (docs/benchmarks.md, "Issue 15:
dispatch and the queue, stop 21"). The columns' indexes stay; CASCADE is Django's either way. SQLite has no
composite keys: there the ORM alone writes these rows.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dreamweb", "0005_members_audit_and_invitations"),
        ("memory", "0015_contextserve_composite_keys_only"),
        ("reviews", "0016_analysis_steps"),
    ]

    operations = [
        migrations.AlterField(
            model_name="sessionanalysis",
            name="run",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="analyses",
                to="reviews.dreamrun",
            ),
        ),
        migrations.AlterField(
            model_name="sessionanalysis",
            name="session",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="analyses",
                to="memory.agentsession",
            ),
        ),
        migrations.AlterField(
            model_name="sessionanalysis",
            name="team",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="dreamweb.team",
            ),
        ),
    ]
