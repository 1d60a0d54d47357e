"""Prepared statements for the few statements every API request sends (docs/scaling.md, "Prepared statements").

Django's psycopg cursors bind parameters client-side, so PostgreSQL parses, rewrites (row-level security) and plans
every statement every time. For the statements of the agents' hot path (the request's scope, the key's scope and
row, the ranking's check, the audit row) that planning cost more of PostgreSQL's CPU than running them: 1.6 ms a
context request against 0.7 prepared (docs/benchmarks.md, "Issue 15: context, stop 21"). ``cursor()`` is Django's
cursor (its execute wrappers, query logging and error translation all apply) over a psycopg cursor that binds
server-side and prepares what it executes, once per connection and statement text; psycopg keeps the names
(``prepared_max`` per connection, the least recently used deallocated).

A prepared statement lives in the server session, not in the transaction. PgBouncer in transaction pooling mode
hands each transaction whichever server connection is free, so before PgBouncer 1.21 (and with its
``max_prepared_statements`` at 0) a statement prepared on one would be missing on the next: set
``DATABASE_PREPARED_STATEMENTS=false`` there (docker-compose.yml does), and ``cursor()`` is Django's plain cursor.
Plans stay correct without anything here: PostgreSQL re-plans a prepared statement when a table it reads changes,
when the role changes, and reads the team scope at run time (dreamweb.rls: the policy's settings are InitPlans).
"""

from __future__ import annotations

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections


def _classes():
    from django.db.backends.postgresql.base import CursorDebugWrapper, ServerBindingCursor
    from django.db.backends.utils import CursorWrapper

    class PreparingCursor(ServerBindingCursor):
        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    class DebugWrapper(CursorDebugWrapper):
        # Django logs a statement as psycopg last sent it, which a prepared execution does not keep: logged here as
        # Django's own cursor would have sent it (the statement with its values), for DEBUG and the query-count tests.
        def execute(self, sql, params=None):
            with self.debug_sql(self.db.ops.compose_sql(sql, params)):
                return CursorWrapper.execute(self, sql, params)

    return PreparingCursor, DebugWrapper


_classes_built = None
# Django turns psycopg's preparing off for the connection (prepare_threshold None), which also refuses prepare=True.
# A count no statement reaches instead: only these cursors' statements are prepared, never another by repetition.
_NEVER_BY_COUNT = 2**62


def cursor():
    """A cursor whose statements are prepared (Django's own cursor when prepared statements are off, or on SQLite).
    For constant statement texts only: each distinct text is one prepared statement on the connection."""
    global _classes_built
    # The thread's connection looked up once: each attribute read through django.db.connection is a lookup of its
    # own (a few microseconds each, five cursors a request).
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql" or not settings.DREAMWEB_DB_PREPARED_STATEMENTS:
        return db.cursor()
    if _classes_built is None:
        _classes_built = _classes()
    preparing, debug = _classes_built
    db.close_if_health_check_failed()
    db.ensure_connection()
    raw = db.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = _NEVER_BY_COUNT
    with db.wrap_database_errors:
        db.validate_thread_sharing()
        made = preparing(raw)
        return debug(made, db) if db.queries_logged else db.make_cursor(made)
