"""A proposal's evidence rows, written when finalize stores its proposals.

A pattern seen in most sessions has a row per session (up to three each): about 5,800 rows at 10,000 sessions and
57,000 at 100,000. Written through bulk_create, each row became a model instance, each of its values went through
the field's preparation, and Django's PostgreSQL backend quoted the values as array literals client-side: 0.2 s of
finalize's CPU at 10,000 sessions, all of it serial after the workers (docs/benchmarks.md, issue 15).

On PostgreSQL the rows go in as one ``INSERT ... SELECT FROM unnest(...) WITH ORDINALITY ... ORDER BY`` per
proposal, the columns as arrays bound in binary (no quoting, no model instance): the ids follow the rows' order as
bulk_create's did. The INSERT runs in the caller's transaction and team scope, so row-level security's WITH CHECK
refuses a row of a team outside the scope and the composite foreign keys refuse a proposal or a session of another
team, as they did for bulk_create. SQLite keeps bulk_create (the reference the PostgreSQL path is tested against).
"""

from __future__ import annotations

import functools
import json

from django.db import connection

from ..models import ProposalEvidence

# The fields written, in the order of the row's attributes (EvidenceRow.__slots__) and of the INSERT's values.
COLUMNS = ("team", "proposal", "session", "event_index", "excerpt", "trust", "context")
ARRAY_TYPES = ("bigint[]", "integer[]", "text[]", "text[]", "text[]")  # session .. context (context as JSON text)


class EvidenceRow:
    """One row to store: ProposalEvidence's columns and nothing else (finalize's _with_context sets ``context``)."""

    __slots__ = ("team_id", "proposal_id", "session_id", "event_index", "excerpt", "trust", "context")

    def __init__(self, team_id: int, proposal_id: int, session_id: int, event_index: int, excerpt: str, trust: str):
        self.team_id, self.proposal_id, self.session_id = team_id, proposal_id, session_id
        self.event_index, self.excerpt, self.trust = event_index, excerpt, trust
        self.context: list = []


def store(rows: list[EvidenceRow]) -> None:
    """Insert one proposal's rows (all of one team and one proposal), in their order."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        _insert_unnest(rows)
    else:
        _bulk_create(rows)


def _bulk_create(rows: list[EvidenceRow]) -> None:
    ProposalEvidence.objects.bulk_create(
        [ProposalEvidence(**{name: getattr(r, name) for name in EvidenceRow.__slots__}) for r in rows],
        batch_size=1000,
    )


@functools.cache
def _insert_sql():
    from psycopg import sql

    meta = ProposalEvidence._meta
    columns = sql.SQL(", ").join(sql.Identifier(meta.get_field(name).column) for name in COLUMNS)
    arrays = sql.SQL(", ").join(sql.SQL("%b::" + kind) for kind in ARRAY_TYPES)
    # Every value is a parameter. ORDER BY the ordinality: the ids are drawn in the rows' order.
    return sql.SQL(
        "INSERT INTO {table} ({columns}) SELECT %b, %b, s, e, x, t, c::jsonb "
        "FROM unnest({arrays}) WITH ORDINALITY AS u(s, e, x, t, c, n) ORDER BY n"
    ).format(table=sql.Identifier(meta.db_table), columns=columns, arrays=arrays)


def _insert_unnest(rows: list[EvidenceRow]) -> None:
    import psycopg

    first = rows[0]
    if any(r.team_id != first.team_id or r.proposal_id != first.proposal_id for r in rows):
        raise ValueError("one proposal's evidence rows at a time")
    params = [
        first.team_id,
        first.proposal_id,
        [r.session_id for r in rows],
        [r.event_index for r in rows],
        [r.excerpt for r in rows],
        [r.trust for r in rows],
        # Most rows have no context ([]); jsonb keeps the value, not the text, so the JSON's spelling does not matter.
        [json.dumps(r.context) if r.context else "[]" for r in rows],
    ]
    connection.ensure_connection()
    # A psycopg cursor of Django's connection (its transaction, its team scope): server-side binding, so that the
    # arrays go in binary; Django's own cursor binds client-side and quotes every element.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(_insert_sql(), params)
