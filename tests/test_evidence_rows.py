"""Finalize's write of a proposal's evidence rows (reviews.dreams.evidence_rows): on PostgreSQL one INSERT from
arrays bound in binary stores exactly the rows bulk_create stores (every column, the ids in the rows' order) and
cannot write outside the caller's team scope; elsewhere bulk_create stores them."""

from __future__ import annotations

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from dreamweb import rls
from reviews.dreams import evidence_rows
from reviews.dreams.evidence_rows import EvidenceRow
from reviews.models import ProposalEvidence
from tests.conftest import is_postgres
from tests.factories import SessionFactory, StoreFactory, TeamFactory, make_proposal
from tests.scoping import all_teams

postgres_only = pytest.mark.skipif(not is_postgres(), reason="the INSERT from arrays is PostgreSQL's")

AWKWARD = "tab\there, newline\nthere, CR\r, backslash \\ and \\N, quote \" and ', {a,b} NULL é, 日本, 😀, \\u0041"
CONTEXTS = [
    [],
    [[3, "user", AWKWARD], [4, "tool_call", "bash: make release"], [5, "tool_result", ""]],
    [[0, "assistant", "null"], [1, "note", '{"not": "an object"}']],
]


def _proposal_with_sessions(team, n: int):
    """A proposal of the team with no evidence yet, and n sessions of the team."""
    with rls.team_scope(team):
        store = StoreFactory(team=team)
        sessions = [SessionFactory(team=team) for _ in range(n)]
        proposal = make_proposal(store, sessions=[])
    return proposal, sessions


def _rows(proposal, sessions) -> list[EvidenceRow]:
    """Rows in an order that is not the sessions' (the ids must follow the rows, not the session ids), with every
    kind of value the columns take: empty and awkward excerpts, both trusts, large event indexes, contexts."""
    rows = []
    for i, session in enumerate(reversed(sessions)):
        for repeat in range(2):
            row = EvidenceRow(
                proposal.team_id,
                proposal.pk,
                session.pk,
                [0, 7, 2_147_483_647][i % 3],
                ["", AWKWARD, f"line {i}.{repeat}", "x" * 5000][(i + repeat) % 4],
                ["agent", "tool"][(i + repeat) % 2],
            )
            row.context = CONTEXTS[(i * 2 + repeat) % len(CONTEXTS)]
            rows.append(row)
    return rows


def _stored(proposal) -> list[dict]:
    """The proposal's rows in id order, every column but the id and the proposal."""
    with rls.team_scope(proposal.team_id):
        rows = ProposalEvidence.objects.filter(proposal=proposal).order_by("pk").values()
        return [{k: v for k, v in r.items() if k not in {"id", "proposal_id"}} for r in rows]


@postgres_only
@pytest.mark.django_db
def test_the_array_insert_stores_exactly_what_bulk_create_stores(monkeypatch):
    with all_teams():
        team = TeamFactory(slug="evidence-rows")
    fast, sessions = _proposal_with_sessions(team, 7)
    with rls.team_scope(team):
        store = StoreFactory(team=team)
        reference = make_proposal(store, sessions=[])
    calls = []
    real = evidence_rows._insert_unnest
    monkeypatch.setattr(evidence_rows, "_insert_unnest", lambda rows: calls.append(len(rows)) or real(rows))
    with rls.team_scope(team):
        evidence_rows.store(_rows(fast, sessions))
        evidence_rows._bulk_create(_rows(reference, sessions))
    assert calls == [14]
    via_arrays, via_orm = _stored(fast), _stored(reference)
    assert len(via_arrays) == 14
    assert via_arrays == via_orm
    assert [r["session_id"] for r in via_arrays[::2]] == [s.pk for s in reversed(sessions)]
    assert {r["excerpt"] for r in via_arrays} >= {"", AWKWARD} and via_arrays[1]["context"] == CONTEXTS[1]


@postgres_only
@pytest.mark.django_db
def test_the_array_insert_cannot_write_another_teams_rows():
    """The INSERT runs in the caller's team scope: row-level security refuses a row of a team outside it, and the
    composite foreign keys a row of the caller's team that points at another team's proposal or session."""
    with all_teams():
        mine, theirs = TeamFactory(slug="mine"), TeamFactory(slug="theirs")
    my_proposal, my_sessions = _proposal_with_sessions(mine, 2)
    their_proposal, their_sessions = _proposal_with_sessions(theirs, 2)
    refused = (DatabaseError, psycopg.Error)
    with pytest.raises(refused, match="row-level security"), rls.team_scope(mine), transaction.atomic():
        evidence_rows.store(_rows(their_proposal, their_sessions))
    for proposal_id, session in ((their_proposal.pk, my_sessions[0]), (my_proposal.pk, their_sessions[0])):
        row = EvidenceRow(mine.pk, proposal_id, session.pk, 1, "intruder", "agent")
        with pytest.raises(refused, match="same_team"), rls.team_scope(mine), transaction.atomic():
            with connection.cursor() as c:
                c.execute("SET CONSTRAINTS ALL IMMEDIATE")  # checked at the statement, not at the commit
            evidence_rows.store([row])
    with all_teams():
        assert not ProposalEvidence.objects.filter(proposal__in=[my_proposal, their_proposal]).exists()
    with rls.team_scope(mine):
        evidence_rows.store(_rows(my_proposal, my_sessions))
    assert len(_stored(my_proposal)) == 4


@pytest.mark.django_db
def test_a_proposals_rows_are_stored_in_their_order_everywhere():
    """SQLite's path (bulk_create), and PostgreSQL's through whichever path it takes."""
    with all_teams():
        team = TeamFactory(slug="evidence-anywhere")
    proposal, sessions = _proposal_with_sessions(team, 3)
    with rls.team_scope(team):
        evidence_rows.store(_rows(proposal, sessions))
        evidence_rows.store([])
    stored = _stored(proposal)
    assert [(r["session_id"], r["excerpt"], r["context"]) for r in stored] == [
        (r.session_id, r.excerpt, r.context) for r in _rows(proposal, sessions)
    ]
