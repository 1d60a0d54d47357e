"""The aggregation reads a dream's findings as finalize loads them (compact read-only Records, reviews.dreams.records)
exactly as it reads plain dicts: every proposal, rationale, risk, evidence row and isolated pattern the same. A check
written for dicts only (`isinstance(x, dict)`) once made every real dream's rationale credit "the agent" with what a
person said, while the tests over dicts passed."""

from __future__ import annotations

import pytest

from reviews.analysis import aggregate as agg
from reviews.analysis.findings import SessionFindings, evidence_findings
from reviews.analysis.rules import analyze
from reviews.dreams.records import Record, Shapes
from reviews.dreams.run_findings import _shared_keys
from tests.dream_sessions import mixed_corpus


def as_records(sessions):
    names, shapes = {}, Shapes()
    out = []
    for s in sessions:
        found = [_shared_keys(f, names, shapes) for f in evidence_findings(s.findings)]
        out.append(SessionFindings(s.session_id, s.external_id, s.agent, s.task, found, source=s.source))
    return out


def drafts(result):
    return [
        (
            d.operation,
            d.content,
            d.rationale,
            d.risk,
            tuple(d.risk_reasons),
            d.prevalence_sessions,
            d.prevalence_sources,
            tuple((e["external_id"], e["event_index"], e["excerpt"], e["trust"]) for e in d.evidence),
        )
        for d in result.proposals
    ]


@pytest.fixture(scope="module")
def sessions():
    docs = mixed_corpus(n_each=4) + mixed_corpus("t", n_each=3, agent="review-bot")
    return [
        SessionFindings(i + 1, d["external_id"], d["agent"], d.get("task"), analyze(d).findings, source=f"key:{i % 3}")
        for i, d in enumerate(docs)
    ]


def test_records_are_what_finalize_reads(sessions):
    recs = as_records(sessions)
    assert any(isinstance(f, Record) for s in recs for f in s.findings)
    assert not any(isinstance(f, dict) for s in recs for f in s.findings)


def test_the_aggregation_of_records_is_the_aggregation_of_dicts(sessions):
    plain = agg.aggregate(sessions, sessions_analysed=len(sessions), memory=[])
    loaded = agg.aggregate(as_records(sessions), sessions_analysed=len(sessions), memory=[])
    assert plain.proposals, "the corpus plants recurring lessons"
    assert drafts(loaded) == drafts(plain)
    assert loaded.isolated == plain.isolated and loaded.withheld == plain.withheld


def test_a_persons_correction_is_credited_to_the_person_when_read_as_records(sessions):
    loaded = agg.aggregate(as_records(sessions), sessions_analysed=len(sessions), memory=[])
    (pnpm,) = [d for d in loaded.proposals if "pnpm" in d.content]
    assert "the person corrected the agent" in pnpm.rationale, pnpm.rationale
