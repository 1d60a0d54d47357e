"""An entry's origin is its latest version's (dreamweb.provenance.origin_of): it used to be set at creation only, so
an imported entry an agent rewrote still said "import", and a dream change a reviewer approved said "human".

The rule is restated in SQL here as it stood when this migration was written (a migration must not follow later
changes of the code)."""

from django.db import migrations

BACKFILL = """
UPDATE memory_memoryentry SET origin = COALESCE((
    SELECT CASE
        WHEN v.proposal_id IS NOT NULL THEN 'dream'
        WHEN v.author_kind = 'user' THEN 'human'
        WHEN v.author_kind = 'agent' THEN 'agent'
        WHEN v.author_kind = 'dream' THEN 'dream'
        ELSE 'import'
    END
    FROM memory_memoryversion v
    WHERE v.entry_id = memory_memoryentry.id AND v.number = memory_memoryentry.version
), origin)
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # Migrations run as the tables' owner, for whom '*' means every team (dreamweb.rls).
        schema_editor.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
    schema_editor.execute(BACKFILL)


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_entry_lifecycle")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
