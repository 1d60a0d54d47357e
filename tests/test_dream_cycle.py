"""The dream cycle end to end in-process (tasks eager): selection, idempotent analysis, finalize once, persistence,
deduplication against pending and rejected proposals, team isolation, served context, partial runs."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import openai
import pytest

from memory.models import ContextServe, MemoryVersion
from reviews import dreams, services
from reviews.analysis import registry
from reviews.analysis.findings import AnalysisResult, evidence, make_finding
from reviews.analysis.rules import analyze as rules_analyze
from reviews.models import (
    AnalysisStatus,
    AutonomyPolicy,
    DreamRun,
    Proposal,
    ProposalEvidence,
    ProposalStatus,
    RunStatus,
    SessionAnalysis,
)

from .dream_sessions import corrected_command, ingest, mixed_corpus, noise, session_doc
from .factories import SessionFactory, StoreFactory, TeamFactory, UserFactory, make_entry
from .scoping import no_scope

pytestmark = pytest.mark.all_teams


@pytest.fixture
def cycle(django_capture_on_commit_callbacks):
    """Run a (non-dry) cycle to its end in-process; the enqueue-on-commit callbacks are executed."""

    def run(store, **kwargs) -> DreamRun:
        # start_run and the tasks it enqueues open their own scopes; they must not lean on the test's.
        with no_scope(), django_capture_on_commit_callbacks(execute=True):
            started = dreams.start_run(store, **kwargs)
        started.refresh_from_db()
        return started

    return run


@pytest.fixture
def fake_analyzer():
    """Register analyzers built from a function in the test: name → analyze(doc, served)."""
    names = []

    def add(name, func, uses_tokens=False):
        registry.register(name, lambda label: registry.Analyzer(name, label, func, uses_tokens=uses_tokens))
        names.append(name)

    yield add
    for name in names:
        registry.unregister(name)


@pytest.fixture
def world(db):
    """Two teams with a store each (no users: password hashing is slow)."""
    team_a, team_b = TeamFactory(slug="team-a"), TeamFactory(slug="team-b")
    return SimpleNamespace(
        team_a=team_a,
        team_b=team_b,
        store_a=StoreFactory(team=team_a, slug="eng"),
        store_b=StoreFactory(team=team_b, slug="ops"),
    )


def test_cycle_persists_proposals_with_evidence_and_consumes_its_sessions(world, cycle):
    ingest(world.team_a, mixed_corpus("a"))
    make_entry(world.store_a, key="deploy-command", content="Deploy with `make deploy` from the repository root.")
    run = cycle(world.store_a)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.analyzer == "rules"
    assert run.sessions_selected == run.sessions_analysed == 20 and run.sessions_failed == 0
    assert run.memory_hash and run.started_at and run.finished_at
    assert SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.DONE).count() == 20
    proposals = list(Proposal.objects.filter(run=run))
    assert proposals and run.proposals_count == len(proposals)
    assert AutonomyPolicy.objects.filter(store=world.store_a, mode="manual").exists()  # default policy made
    for p in proposals:
        ev = list(ProposalEvidence.objects.filter(proposal=p))
        assert ev, p
        assert len({(e.session_id, e.event_index) for e in ev}) == len(ev)  # nothing twice
        assert p.prevalence_of == 20
    update = next(p for p in proposals if p.operation == "update")
    assert update.targets == ["deploy-command"] and "make release" in update.content
    # The report names entry keys and session external ids.
    report = dreams.report(run)
    item = next(i for i in report["proposals"] if i["id"] == update.pk)
    assert item["targets"] == ["deploy-command"]
    assert all(s.startswith("a-cmd-") for s in item["supporting_sessions"])
    assert item["prevalence"]["sessions"] == len(item["supporting_sessions"]) == 4

    # A second cycle over the same sessions consumes nothing new and proposes nothing.
    again = cycle(world.store_a)
    assert again.status == RunStatus.SUCCEEDED
    assert again.sessions_selected == 0
    assert Proposal.objects.filter(run=again).count() == 0
    assert Proposal.objects.filter(store=world.store_a).count() == len(proposals)


def test_pending_proposals_are_not_stored_twice_and_rejected_come_back_only_with_more_evidence(world, cycle):
    ingest(world.team_a, [session_doc(f"c-{i}", corrected_command(i), minute=i) for i in range(3)])
    first = cycle(world.store_a)
    cmd = Proposal.objects.get(run=first, content__icontains="make release")
    assert cmd.status == ProposalStatus.PENDING and cmd.prevalence_sessions == 3

    # Same sessions again: the pending one is reported again, not stored again.
    second = cycle(world.store_a, all_sessions=True)
    assert Proposal.objects.filter(store=world.store_a, signature=cmd.signature).count() == 1
    assert cmd.pk in [p["id"] for p in dreams.report(second)["proposals"]]

    services.reject(cmd, user=UserFactory(username="alice"), reason="we deploy by hand")
    third = cycle(world.store_a, all_sessions=True)
    assert not Proposal.objects.filter(run=third, signature=cmd.signature).exists()
    assert third.options["suppressed_rejected"] >= 1

    # New sessions show the same pattern: the prevalence grew past the rejection, so it is proposed again.
    ingest(world.team_a, [session_doc(f"c-{i}", corrected_command(i), minute=10 + i) for i in range(3, 5)])
    fourth = cycle(world.store_a, all_sessions=True)
    back = Proposal.objects.get(run=fourth, signature=cmd.signature)
    assert back.status == ProposalStatus.PENDING and back.prevalence_sessions == 5


def test_other_teams_sessions_are_never_selected(world, cycle):
    ingest(world.team_a, [session_doc(f"a-{i}", noise(i), minute=i) for i in range(2)])
    ingest(world.team_b, [session_doc(f"b-{i}", corrected_command(i), minute=i) for i in range(6)])
    run = cycle(world.store_a, all_sessions=True)
    selected = set(SessionAnalysis.objects.filter(run=run).values_list("session__team_id", flat=True))
    assert selected == {world.team_a.pk}
    assert run.sessions_selected == 2
    assert not Proposal.objects.filter(run=run).exists()
    assert not ProposalEvidence.objects.filter(proposal__run=run).exclude(team=world.team_a).exists()


def test_selection_newest_first_capped_and_by_agent(world, cycle, fake_analyzer):
    seen = []
    fake_analyzer("spy", lambda doc, served=(): seen.append(doc["external_id"]) or AnalysisResult())
    for i in range(6):
        SessionFactory(
            team=world.team_a,
            external_id=f"s{i}",
            agent="bot-x" if i % 2 else "bot-y",
            started_at=f"2025-01-0{i + 1}T00:00:00Z",
        )
    run = cycle(world.store_a, analyzer="spy", max_sessions=2)
    assert run.sessions_selected == 2 and sorted(seen) == ["s4", "s5"]
    seen.clear()
    run = cycle(world.store_a, analyzer="spy", agents=["bot-x"])
    assert sorted(seen) == ["s1", "s3"]  # s5 consumed by the first run


def test_served_context_is_passed_to_the_analyzer(world, cycle, fake_analyzer):
    got = {}
    fake_analyzer("spy", lambda doc, served=(): (got.setdefault(doc["external_id"], list(served)), AnalysisResult())[1])
    entry = make_entry(world.store_a, key="deploy", content="Deploy with `make release`.")
    SessionFactory(team=world.team_a, external_id="served-1")
    SessionFactory(team=world.team_a, external_id="plain-1")
    ContextServe.objects.create(
        team=world.team_a,
        store=world.store_a,
        session_external_id="served-1",
        entries=[{"entry_id": entry.pk, "key": "deploy", "version": 1, "content_hash": entry.content_hash}],
    )
    cycle(world.store_a, analyzer="spy")
    assert got == {"served-1": ["Deploy with `make release`."], "plain-1": []}


def test_redelivered_batches_and_a_second_finalize_add_nothing(world, fake_analyzer):
    ingest(world.team_a, [session_doc(f"c-{i}", corrected_command(i), minute=i) for i in range(4)])
    calls = []
    fake_analyzer("counting", lambda doc, served=(): calls.append(doc["external_id"]) or rules_analyze(doc, served))
    with no_scope():  # tasks open their own scope
        run = dreams.start_run(world.store_a, analyzer="counting")  # on_commit never fires in the test transaction
        batches = dreams.dispatch(run.pk)
        assert dreams.dispatch(run.pk) == batches  # a redelivered dispatch selects nothing new
        assert sum(map(len, batches)) == 4
        for batch in batches + batches:  # every batch delivered twice
            dreams.analyze_batch(run.pk, batch)
    assert len(calls) == 4
    run.refresh_from_db()
    assert (run.sessions_analysed, run.sessions_failed) == (4, 0)
    # The batch that left nothing pending enqueued finalize (eager here): it ran once; again, it does nothing.
    assert run.status == RunStatus.SUCCEEDED
    stored = Proposal.objects.filter(run=run).count()
    assert stored >= 1
    with no_scope():
        assert dreams.finalize(run.pk) is None
        assert dreams.maybe_finalize(run.pk, run.team_id) is False
    assert Proposal.objects.filter(run=run).count() == stored


def _timeout_error():
    return openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))


def test_transient_errors_are_retried_then_fail_the_session(world, cycle, fake_analyzer, settings):
    SessionFactory(team=world.team_a, external_id="flaky")
    SessionFactory(team=world.team_a, external_id="down")
    attempts = {"flaky": 0, "down": 0}

    def analyze(doc, served=()):
        attempts[doc["external_id"]] += 1
        if doc["external_id"] == "down" or attempts["flaky"] < 2:
            raise _timeout_error()
        return AnalysisResult(tokens_input=10, tokens_output=2)

    fake_analyzer("flaky", analyze, uses_tokens=True)
    settings.DREAMWEB_ANALYSIS_MAX_RETRIES = 2
    settings.DREAMWEB_DREAM_BATCH_SIZE = 1
    run = cycle(world.store_a, analyzer="flaky")
    assert attempts == {"flaky": 2, "down": 3}
    assert run.status == RunStatus.PARTIAL
    down = SessionAnalysis.objects.get(run=run, session__external_id="down")
    assert down.status == AnalysisStatus.FAILED and "APITimeoutError" in down.error
    assert SessionAnalysis.objects.get(run=run, session__external_id="flaky").status == AnalysisStatus.DONE
    assert (run.tokens_input, run.tokens_output) == (10, 2)


def test_token_budget_stops_the_analysis(world, cycle, fake_analyzer):
    for i in range(4):
        SessionFactory(team=world.team_a, external_id=f"t{i}")
    fake_analyzer("costly", lambda doc, served=(): AnalysisResult(tokens_input=600, tokens_output=100), True)
    AutonomyPolicy.objects.create(team=world.team_a, store=world.store_a, token_budget=1000)
    run = cycle(world.store_a, analyzer="costly")
    assert (run.sessions_analysed, run.sessions_failed) == (2, 2)
    assert run.status == RunStatus.PARTIAL and "token budget" in run.error


def test_all_sessions_failing_fails_the_run(world, cycle, fake_analyzer):
    SessionFactory(team=world.team_a, external_id="x1")

    def broken(doc, served=()):
        raise ValueError("analyzer bug")

    fake_analyzer("broken", broken)
    run = cycle(world.store_a, analyzer="broken")
    assert run.status == RunStatus.FAILED and "analyzer bug" in run.error


def test_aggregation_error_fails_the_run_with_its_error(world, cycle, monkeypatch):
    SessionFactory(team=world.team_a, external_id="x1")

    def boom(*args, **kwargs):
        raise RuntimeError("aggregation exploded")

    monkeypatch.setattr("reviews.analysis.aggregate.aggregate", boom)
    run = cycle(world.store_a)
    assert run.status == RunStatus.FAILED and "aggregation exploded" in run.error


def test_a_store_runs_one_cycle_at_a_time(world):
    dreams.start_run(world.store_a)  # stays queued: on_commit does not fire inside the test transaction
    with pytest.raises(dreams.RunInProgress):
        dreams.start_run(world.store_a)
    dreams.start_run(world.store_b)  # another store is free


def test_recorded_dry_run_keeps_only_the_run_row_with_its_preview(world, cycle):
    ingest(world.team_a, mixed_corpus("a"))
    run = cycle(world.store_a, dry_run=True)
    assert run.dry_run and run.status == RunStatus.SUCCEEDED
    assert run.options["preview"] and all(p["status"] == "preview" for p in run.options["preview"])
    assert run.sessions_analysed == 20
    assert not Proposal.objects.exists() and not SessionAnalysis.objects.exists()
    assert DreamRun.objects.count() == 1
    # A dry run consumes nothing: the next real cycle reads every session.
    real = cycle(world.store_a)
    assert real.sessions_selected == 20


def test_findings_shape_from_fake_analyzer_reaches_aggregation(world, cycle, fake_analyzer):
    """An analyzer's findings (any analyzer) are what the aggregation groups: three sessions with one lesson."""
    for i in range(3):
        SessionFactory(team=world.team_a, external_id=f"n{i}")

    def note(doc, served=()):
        ev = [evidence(0, "Ship it.", "user")]
        return AnalysisResult(
            findings=[make_finding("preference", "pref:ship", "Ship small changes.", evidence=ev, confidence=0.8)]
        )

    fake_analyzer("notes", note)
    run = cycle(world.store_a, analyzer="notes")
    assert run.status == RunStatus.SUCCEEDED
    assert not MemoryVersion.objects.filter(author_run_id=run.pk).exists()  # manual policy: nothing applied


def test_a_batch_that_cannot_be_stored_fails_its_sessions_and_the_run_still_ends(world, cycle, fake_analyzer):
    SessionFactory(team=world.team_a, external_id="odd")
    # A finding that cannot be stored as JSON: the batch fails, not the whole run forever.
    fake_analyzer("odd", lambda doc, served=(): AnalysisResult(findings=[{"kind": "note", "bad": object()}]))
    run = cycle(world.store_a, analyzer="odd")
    assert run.status == RunStatus.FAILED
    analysis = SessionAnalysis.objects.get(run=run)
    assert analysis.status == AnalysisStatus.FAILED and "TypeError" in analysis.error
