"""Full-text search for context ranking on PostgreSQL: a stored tsvector of key + content, with a GIN index.

The column is not a model field (SQLite has no tsvector); memory.context reads it with SQL. PostgreSQL keeps it up
to date on every insert and update, so no writer has to remember it.
"""

from django.db import migrations

ADD = """
ALTER TABLE memory_memoryentry ADD COLUMN IF NOT EXISTS search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(key, '') || ' ' || coalesce(content, ''))) STORED;
CREATE INDEX IF NOT EXISTS memoryentry_search_gin ON memory_memoryentry USING GIN (search_vector);
"""
DROP = """
DROP INDEX IF EXISTS memoryentry_search_gin;
ALTER TABLE memory_memoryentry DROP COLUMN IF EXISTS search_vector;
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(ADD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_row_level_security")]

    operations = [migrations.RunPython(forward, backward)]
