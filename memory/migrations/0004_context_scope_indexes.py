"""Indexes for the context ranking (memory.context): the entries scoped to one agent, or to one task, of a team.

memory.context ranks the scoped entries (scope levels task+agent, task, agent) apart from the store-wide ones, so it
needs them without scanning the store: partial indexes hold only the entries that have such a scope. They are plain
SQL rather than Meta.indexes so that the model stays as it is; both PostgreSQL and SQLite accept them.
"""

from django.db import migrations

FORWARD = [
    "CREATE INDEX IF NOT EXISTS memoryentry_scope_agent ON memory_memoryentry (team_id, scope_agent)"
    " WHERE scope_agent IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS memoryentry_scope_task ON memory_memoryentry (team_id, scope_task)"
    " WHERE scope_task IS NOT NULL",
]
BACKWARD = [
    "DROP INDEX IF EXISTS memoryentry_scope_task",
    "DROP INDEX IF EXISTS memoryentry_scope_agent",
]


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_entry_search_vector")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
