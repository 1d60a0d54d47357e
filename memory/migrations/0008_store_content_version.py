"""A store's content version on PostgreSQL: what memory.ranking_cache checks, once per context request, to know
whether the ranking data it keeps in the worker process is still the store's.

``memory_memorystore.content_version`` takes a fresh value of one sequence when the store is created and whenever
one of its entries is inserted, deleted, or changed in anything the ranking reads (key, content, scope, status,
version, hash, rating, update time, validity window, store or team; not ``last_served_at``, which every served context moves). Triggers
set it, so no writer can forget it; values never repeat (a sequence is not rolled back), so a version seen inside
a transaction that was rolled back is never seen again. The column is not a model field: a store's ``save()``
must never write back a version it read earlier. SQLite (development) has no cache and no column.

INSERT and DELETE are statement triggers over their transition tables (one store update per statement, however
many rows); UPDATE is a row trigger whose WHEN clause skips, without calling anything, the updates that change
nothing the ranking reads.
"""

from django.db import migrations

RANKED_COLUMNS = (
    "store_id",
    "team_id",
    "key",
    "content",
    "scope_agent",
    "scope_task",
    "status",
    "version",
    "content_hash",
    "rating",
    "rating_count",
    "updated_at",
    "valid_from",
    "valid_until",
)
_CHANGED = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in RANKED_COLUMNS)

FORWARD = f"""
CREATE SEQUENCE IF NOT EXISTS memory_content_version_seq;
ALTER TABLE memory_memorystore ADD COLUMN IF NOT EXISTS content_version bigint NOT NULL
    DEFAULT nextval('memory_content_version_seq');

CREATE OR REPLACE FUNCTION memory_bump_version_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE memory_memorystore SET content_version = nextval('memory_content_version_seq')
        WHERE id IN (SELECT DISTINCT store_id FROM changed_rows);
    ELSE
        UPDATE memory_memorystore SET content_version = nextval('memory_content_version_seq')
        WHERE id IN (SELECT DISTINCT store_id FROM gone_rows);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_bump_version_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_memorystore SET content_version = nextval('memory_content_version_seq')
    WHERE id = NEW.store_id OR id = OLD.store_id;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS memoryentry_version_insert ON memory_memoryentry;
CREATE TRIGGER memoryentry_version_insert AFTER INSERT ON memory_memoryentry
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_bump_version_rows();
DROP TRIGGER IF EXISTS memoryentry_version_delete ON memory_memoryentry;
CREATE TRIGGER memoryentry_version_delete AFTER DELETE ON memory_memoryentry
    REFERENCING OLD TABLE AS gone_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_bump_version_rows();
DROP TRIGGER IF EXISTS memoryentry_version_update ON memory_memoryentry;
CREATE TRIGGER memoryentry_version_update AFTER UPDATE ON memory_memoryentry
    FOR EACH ROW WHEN ({_CHANGED}) EXECUTE FUNCTION memory_bump_version_row();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memoryentry_version_update ON memory_memoryentry;
DROP TRIGGER IF EXISTS memoryentry_version_delete ON memory_memoryentry;
DROP TRIGGER IF EXISTS memoryentry_version_insert ON memory_memoryentry;
DROP FUNCTION IF EXISTS memory_bump_version_row();
DROP FUNCTION IF EXISTS memory_bump_version_rows();
ALTER TABLE memory_memorystore DROP COLUMN IF EXISTS content_version;
DROP SEQUENCE IF EXISTS memory_content_version_seq;
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("memory", "0007_entry_origin_from_latest_version")]

    operations = [migrations.RunPython(forward, backward)]
