"""The newest-first session indexes on a time every session has (memory.models.SESSION_TIME: its start, else its
arrival), so that a session without a start time is listed and selected among the sessions of its arrival instead of
after every other (it sank to the session list's last page). COALESCE is never NULL: the same index on SQLite and
PostgreSQL, no hand-made NULLS LAST index (0009) any more."""

import django.db.models.functions.comparison
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dreamweb', '0005_members_audit_and_invitations'),
        ('memory', '0013_contextserve_fewer_indexes'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='agentsession',
            name='agentsession_team_newest',
        ),
        migrations.RemoveIndex(
            model_name='agentsession',
            name='agentsession_team_agent_newest',
        ),
        migrations.AddIndex(
            model_name='agentsession',
            index=models.Index(models.F('team'), models.OrderBy(django.db.models.functions.comparison.Coalesce('started_at', 'ingested_at'), descending=True), models.OrderBy(models.F('id'), descending=True), name='agentsession_team_newest'),
        ),
        migrations.AddIndex(
            model_name='agentsession',
            index=models.Index(models.F('team'), models.F('agent'), models.OrderBy(django.db.models.functions.comparison.Coalesce('started_at', 'ingested_at'), descending=True), models.OrderBy(models.F('id'), descending=True), name='agentsession_team_agent_newest'),
        ),
    ]
