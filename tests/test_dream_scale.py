"""The dream cycle's work that could grow with the run: a batch finds its pending analyses by the unique (run,
session) index, not by reading every pending analysis of the run; dispatch writes its rows without a model instance
per row, finalize holds a chunk of rows as model instances at a time, not the whole run's; the findings finalize
keeps per session share their repeated strings, and a session without findings is only counted."""

from __future__ import annotations

import contextlib
import gc
import inspect
import tracemalloc
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dreamweb import rls, secret_scan
from memory.models import AgentSession
from memory.sessions import store_batch, validate_session
from reviews.analysis import aggregate as aggregate_mod
from reviews.analysis.findings import ProposalDraft
from reviews.dreams import evidence_rows, finalizing, run_findings, steps
from reviews.dreams import spill as spill_mod
from reviews.dreams.run_findings import RunFindings
from reviews.models import AnalysisStatus, DreamRun, Proposal, ProposalEvidence, RunStatus, SessionAnalysis
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory
from tests.scoping import all_teams

pytestmark = pytest.mark.django_db


def _team_with_sessions(slug: str, count: int):
    """A team, its store and ``count`` small sessions (their ids, oldest first)."""
    with all_teams():
        team = TeamFactory(slug=slug)
        store = StoreFactory(team=team, slug="eng")
    docs = [
        {"external_id": f"s-{i:05d}", "agent": "bot", "events": [{"type": "message", "role": "user", "content": "hi"}]}
        for i in range(count)
    ]
    with rls.team_scope(team):
        store_batch(team, [validate_session(d) for d in docs])
        ids = list(AgentSession.objects.filter(team=team).order_by("pk").values_list("pk", flat=True))
    return team, store, ids


def _running(team, store, session_ids, status=AnalysisStatus.PENDING) -> DreamRun:
    with rls.team_scope(team):
        run = DreamRun.objects.create(team=team, store=store, status=RunStatus.RUNNING, options={"batch_size": 25})
        SessionAnalysis.objects.bulk_create(
            SessionAnalysis(team=team, run=run, session_id=i, status=status) for i in session_ids
        )
    return run


@pytest.mark.skipif(not is_postgres(), reason="EXPLAIN of PostgreSQL's planner")
def test_a_batch_reads_its_own_analyses_by_run_and_session_not_every_pending_one_of_the_run():
    """A run's analyses are written pending after the planner's statistics were taken (as every new run's are): the
    batch's lookup must still probe (run, session) for its 25 sessions, not read the run's pending analyses."""
    team, store, ids = _team_with_sessions("batches", 3000)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    with all_teams(), connection.cursor() as cursor:  # statistics taken while nothing was pending, as the owner
        cursor.execute("ANALYZE reviews_sessionanalysis")
    with rls.team_scope(team):
        SessionAnalysis.objects.filter(run=run).update(status=AnalysisStatus.PENDING, findings=[])
    batch = ids[1000:1025]
    with CaptureQueriesContext(connection) as queries:
        steps.analyze_batch(run.pk, batch)
    lookup = next(
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and "reviews_sessionanalysis" in q["sql"] and str(batch[0]) in q["sql"]
    )
    with rls.team_scope(team), connection.cursor() as cursor:  # the plan as the application role, in the scope
        cursor.execute("EXPLAIN " + lookup)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Probed per session (the (run, session) index or the session index: a session has a row per run that read it),
    # never through an index of the run alone, whose rows grow with the run.
    probe = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "session_id = ANY" in probe, plan
    assert "sessionanalysis_run_pending" not in plan, plan
    assert "reviews_sessionanalysis_run_id_" not in plan, plan
    assert "Seq Scan" not in plan, plan
    with rls.team_scope(team):
        done = SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.DONE).values_list("session_id", flat=True)
        assert sorted(done) == batch


def test_a_batch_analyses_only_its_pending_sessions():
    team, store, ids = _team_with_sessions("pending-only", 6)
    run = _running(team, store, ids)
    with rls.team_scope(team):
        SessionAnalysis.objects.filter(run=run, session_id=ids[0]).update(status=AnalysisStatus.FAILED, error="x")
    steps.analyze_batch(run.pk, ids[:3])
    with rls.team_scope(team):
        status = dict(SessionAnalysis.objects.filter(run=run).values_list("session_id", "status"))
        run.refresh_from_db()
    assert [status[i] for i in ids] == [AnalysisStatus.FAILED] + [AnalysisStatus.DONE] * 2 + [
        AnalysisStatus.PENDING
    ] * 3
    assert run.sessions_analysed == 2


def test_dispatch_writes_the_analysis_rows_without_an_object_per_row_in_the_selections_order(monkeypatch):
    """On PostgreSQL one INSERT from an array of ids (no model instance at all); elsewhere bulk_create a chunk at a
    time. Either way one pending analysis per selected session, their ids in the selection's order (newest first),
    which is the order the batches and finalize read them in."""
    team, store, ids = _team_with_sessions("dispatch", 23)
    with rls.team_scope(team):
        run = DreamRun.objects.create(team=team, store=store, dry_run=True, all_sessions=True, options={})
    monkeypatch.setattr(steps, "ANALYSIS_ROWS_CHUNK", 10)
    sizes = []
    real = SessionAnalysis.objects.bulk_create

    def bulk_create(objs, *args, **kwargs):
        objs = list(objs)
        sizes.append(len(objs))
        return real(objs, *args, **kwargs)

    with mock.patch.object(SessionAnalysis.objects, "bulk_create", bulk_create):
        batches = steps.dispatch(run.pk)
    assert sizes == ([] if connection.vendor == "postgresql" else [10, 10, 3])
    newest_first = ids[::-1]  # the sessions have no start time: the newest is the last stored
    assert [i for batch in batches for i in batch] == newest_first
    with rls.team_scope(team):
        rows = SessionAnalysis.objects.filter(run=run).order_by("id")
        assert list(rows.values_list("session_id", flat=True)) == newest_first
        assert {(r.status, str(r.findings), r.tokens_input, r.tokens_output, r.error) for r in rows} == {
            (AnalysisStatus.PENDING, "[]", 0, 0, "")
        }
        assert all(r.team_id == team.pk and r.created_at is not None for r in rows)


def _note_draft(content: str, signature: str, evidence: list, *, of: int) -> ProposalDraft:
    """A low-risk memory note drafted from its evidence rows (what finalize persists)."""
    return ProposalDraft(
        target_kind="memory",
        operation="add",
        targets=[],
        target_hashes={},
        content=content,
        scope_agent=None,
        scope_task=None,
        kind="note",
        rationale="seen often",
        prevalence_sessions=len({row["session_id"] for row in evidence}),
        prevalence_of=of,
        confidence=0.7,
        risk="low",
        risk_reasons=[],
        signature=signature,
        evidence=evidence,
    )


def test_finalize_stores_one_proposals_evidence_at_a_time():
    team, store, ids = _team_with_sessions("evidence", 6)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    drafts = [
        _note_draft(
            f"Run `make check-{n}` before a release.",
            f"sig-{n}",
            [
                {"session_id": i, "external_id": f"s-{i}", "event_index": 0, "excerpt": "hi", "trust": "user"}
                for i in ids[n * 3 : n * 3 + 3]
            ],
            of=6,
        )
        for n in range(2)
    ]
    calls = []
    real = evidence_rows.store

    def store_rows(rows, *args, **kwargs):  # the write of either database's path (reviews.dreams.evidence_rows)
        calls.append({row.proposal_id for row in rows})
        return real(rows, *args, **kwargs)

    with rls.team_scope(team), mock.patch.object(evidence_rows, "store", store_rows):
        proposal_ids = finalizing._persist(run, drafts)
    assert len(proposal_ids) == 2
    assert calls == [{proposal_ids[0]}, {proposal_ids[1]}]
    with rls.team_scope(team):
        stored = ProposalEvidence.objects.filter(proposal_id__in=proposal_ids).values_list("proposal_id", "session_id")
        assert sorted(stored) == sorted(
            [(proposal_ids[0], i) for i in ids[:3]] + [(proposal_ids[1], i) for i in ids[3:6]]
        )


def test_a_spilled_proposals_rows_are_stored_a_chunk_at_a_time_in_their_order_with_context_on_its_first(
    monkeypatch,
):
    """The largest proposal's rows (16,500 at 100,000 sessions) go from the spill file to the database a chunk at a
    time; their ids follow their order, and the transcript context goes to the representatives among its first
    rows as when they were stored at once."""
    team, store, ids = _team_with_sessions("chunks", 7)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    monkeypatch.setattr(spill_mod, "CHUNK_ROWS", 3)
    rows = [
        {"session_id": i, "external_id": f"s-{n:05d}", "event_index": 0, "excerpt": f"row {n}", "trust": "user"}
        for n, i in enumerate(ids)
    ]
    calls = []
    real = evidence_rows.store

    def store_rows(chunk, *args, **kwargs):
        calls.append(len(chunk))
        return real(chunk, *args, **kwargs)

    def stored(spilled: bool) -> list:
        draft = _note_draft("Say hi first.", f"sig-{spilled}", list(rows), of=7)
        with rls.team_scope(team), spill_mod.EvidenceSpill() as spill:
            if spilled:
                draft.evidence = spill.keep(draft.evidence)
            with mock.patch.object(evidence_rows, "store", store_rows):
                (proposal_id,) = finalizing._persist(run, [draft])
            out = ProposalEvidence.objects.filter(proposal_id=proposal_id).order_by("pk")
            out = list(out.values_list("session_id", "excerpt", "context"))
            Proposal.objects.filter(pk=proposal_id).delete()
        return out

    at_once = stored(spilled=False)
    assert calls == [7]
    assert stored(spilled=True) == at_once
    assert calls == [7, 3, 3, 1]
    assert [session for session, _, _ in at_once] == ids and any(context for _, _, context in at_once)


def test_the_findings_finalize_keeps_share_their_names_and_sessions_without_findings_hold_nothing():
    team, store, ids = _team_with_sessions("findings", 3)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    finding = {
        "kind": "corrected_command",
        "key": "cmd:make deploy=>make release",
        "summary": "Use `make release` instead of `make deploy`: the deploy target is gone since the move to release.",
        "trust": "tool",
        "evidence": [{"event_index": 3, "excerpt": "make deploy", "trust": "agent"}],
    }
    with rls.team_scope(team):
        for sid in ids[:2]:
            SessionAnalysis.objects.filter(run=run, session_id=sid).update(findings=[finding])
        sessions = RunFindings(run)
        first, second = sessions
    # The session without findings is no object, only counted: among the analysed sessions and in the baseline of
    # the aggregation's agent and task scoping.
    assert sessions.analysed == 3
    assert {agent: dict(tasks) for agent, tasks in sessions.agent_tasks.items()} == {first.agent: {first.task: 3}}
    assert first.findings == second.findings == [finding]  # the same content, read back
    for a, b in zip(first.findings[0], second.findings[0], strict=True):
        assert a is b  # one string per key name, not one per decoded row
    assert first.findings[0]["kind"] is second.findings[0]["kind"]
    # A pattern's wording is one string whatever its length; an excerpt is shared with a text already kept only.
    assert first.findings[0]["summary"] is second.findings[0]["summary"]
    assert first.agent is second.agent
    assert not hasattr(first, "__dict__")  # slots: no dictionary per session


def _finalize_traced(run, aggregate, skill_proposals, *patches) -> None:
    """Finalize ``run`` under tracemalloc, with probes in place of the aggregation and the skill proposals."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(finalizing.aggregate_mod, "aggregate", aggregate))
        stack.enter_context(mock.patch.object(finalizing, "skill_proposals", skill_proposals))
        for patch in patches:
            stack.enter_context(patch)
        gc.collect()
        tracemalloc.start()
        try:
            finalizing.finalize(run.pk)
        finally:
            tracemalloc.stop()


def _held_by_finalize(slug: str, count: int) -> dict[str, int]:
    """Finalize a run of ``count`` analysed sessions without findings, measuring with tracemalloc what finalize holds
    when it aggregates, and what the skill proposals allocate on top of what they are given."""
    team, store, ids = _team_with_sessions(slug, count)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    seen: dict[str, int] = {}
    real_aggregate, real_skills = finalizing.aggregate_mod.aggregate, finalizing.skill_proposals

    def aggregate(sessions, **kwargs):
        gc.collect()  # what finalize holds, not garbage waiting for the collector
        seen["aggregating"] = tracemalloc.get_traced_memory()[0]
        seen["analysed"] = kwargs["sessions_analysed"]
        return real_aggregate(sessions, **kwargs)

    def skill_proposals(*args, **kwargs):
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = real_skills(*args, **kwargs)
        seen["skills"] = tracemalloc.get_traced_memory()[1] - start
        return out

    _finalize_traced(run, aggregate, skill_proposals)
    with rls.team_scope(team):
        assert DreamRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    return seen


def test_finalize_holds_nothing_per_session_without_findings():
    """A cycle's sessions are mostly without findings (two thirds in the dev corpus): finalize counts them and holds no
    object for them, so its memory follows the findings, not the run (100,000 sessions held 18 MiB of sessions
    alone). 600 sessions against 100, none with a finding: what finalize holds when it aggregates, and what the skill
    proposals add (they once kept a list and a dictionary of every session), stay within a few bytes a session;
    an object per session costs 150 bytes or more."""
    _held_by_finalize(
        "held-warm", 20
    )  # what the first finalize of a process caches (queries, patterns) is no session's
    small, big = _held_by_finalize("held-small", 100), _held_by_finalize("held-big", 600)
    assert (small["analysed"], big["analysed"]) == (100, 600)
    assert (big["aggregating"] - small["aggregating"]) / 500 < 30, (small, big)
    assert (big["skills"] - small["skills"]) / 500 < 30, (small, big)


def test_a_rules_run_takes_100_sessions_a_batch_a_model_run_25_unless_the_setting_says(settings):
    """The rules analyzer is about a millisecond a session, so a batch's own round trips weigh at 25 sessions; a
    model's seconds a session keep its batches small (spread over the workers, inside the visibility timeout)."""
    from reviews.dreams import runs

    settings.DREAMWEB_DREAM_BATCH_SIZE = 0
    assert runs.batch_size_for("rules") == 100
    assert runs.batch_size_for("openai:gpt-x") == 25
    team, store, ids = _team_with_sessions("batch-size", 230)
    with rls.team_scope(team):
        run = runs._create_run(store, "command", None, True, True, "rules", 1000, None)
    assert run.inputs.batch_size == 100
    assert [len(b) for b in steps.dispatch(run.pk)] == [100, 100, 30]
    settings.DREAMWEB_DREAM_BATCH_SIZE = 7
    assert runs.batch_size_for("rules") == runs.batch_size_for("openai:gpt-x") == 7


def test_finalize_reads_each_sessions_procedure_steps_from_its_analysis_not_its_transcript():
    """A batch keeps each analysed session's procedure steps with its analysis; finalize's procedures read them, not
    every transcript of the run again, and find what the transcripts give (an analysis without them, from before they
    were kept, makes finalize read the transcripts)."""
    from reviews.analysis.procedures import recurring_procedures
    from reviews.dreams.selection import get_policy
    from reviews.dreams.skills import run_procedures
    from tests.test_skills_proposals import rotate_session, tool

    with all_teams():
        team = TeamFactory(slug="procedures")
        store = StoreFactory(team=team, slug="eng")
    docs = [rotate_session(i) for i in range(1, 6)] + [rotate_session(9, outcome="failure")]
    docs += [{"external_id": f"o-{i}", "agent": "web-dev", "events": tool("x", "npm test")} for i in range(3)]
    for d in docs:
        d.pop("session_id", None)
    with rls.team_scope(team):
        store_batch(team, [validate_session(d) for d in docs])
        sessions = list(AgentSession.objects.filter(team=team).order_by("pk"))
        ids = [s.pk for s in sessions]
        run = _running(team, store, ids)
    steps.analyze_batch(run.pk, ids)
    with rls.team_scope(team):
        kept = dict(SessionAnalysis.objects.filter(run=run).values_list("session_id", "steps"))
        by_external = {s.external_id: len(kept[s.pk]) for s in sessions}
        assert by_external == {f"r-{i}": 4 for i in range(1, 6)} | {"r-9": 0} | {f"o-{i}": 1 for i in range(3)}
        policy = get_policy(store)
        expected = recurring_procedures(
            [
                {"session_id": s.pk, "external_id": s.external_id, "agent": s.agent, "task": s.task}
                | {"outcome": s.outcome, "events": s.events}
                for s in sessions
            ],
            min_sessions=policy.min_sessions,
            min_share=policy.min_share,
            sessions_analysed=len(ids),
        )
        assert expected and sorted(expected[0]["external_ids"]) == [f"r-{i}" for i in range(1, 6)]
        with CaptureQueriesContext(connection) as queries:
            assert run_procedures(run, policy, analysed=len(ids)) == expected
        assert not any('"events"' in q["sql"] for q in queries.captured_queries)
        SessionAnalysis.objects.filter(run=run, session_id=ids[0]).update(steps=None)
        with CaptureQueriesContext(connection) as queries:
            assert run_procedures(run, policy, analysed=len(ids)) == expected
        assert any('"events"' in q["sql"] for q in queries.captured_queries)


def _held_after_aggregating(slug: str, count: int) -> dict[str, int]:
    """Finalize a run of ``count`` sessions that each have one finding of the same fix (one proposal with a row of
    evidence per session), measuring with tracemalloc what finalize holds when it aggregates (the findings) and
    when the skill proposals start (the findings and the aggregation's drafts)."""
    team, store, ids = _team_with_sessions(slug, count)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    with rls.team_scope(team):
        for n, sid in enumerate(ids):
            # Each session's own excerpt and event, as real sessions have: nothing of a row is shared between them.
            finding = {
                "kind": "corrected_command",
                "key": "cmd:make deploy=>make release",
                "summary": "Use `make release` instead of `make deploy`: the deploy target is gone.",
                "old": "make deploy",
                "new": "make release",
                "error": "make: *** No rule to make target 'deploy'.",
                "trust": "agent",
                "evidence": [{"event_index": 300 + n, "excerpt": f"make deploy # try {n}", "trust": "agent"}],
            }
            SessionAnalysis.objects.filter(run=run, session_id=sid).update(findings=[finding])
    seen: dict[str, int] = {}
    real_aggregate, real_skills = finalizing.aggregate_mod.aggregate, finalizing.skill_proposals

    def aggregate(sessions, **kwargs):
        gc.collect()
        seen["aggregating"] = tracemalloc.get_traced_memory()[0]
        return real_aggregate(sessions, **kwargs)

    def skill_proposals(*args, **kwargs):
        gc.collect()
        seen["drafted"] = tracemalloc.get_traced_memory()[0]
        return real_skills(*args, **kwargs)

    # The secret scan's memo keeps up to 8,192 texts whatever the run's size: bounded, not held per finding.
    _finalize_traced(run, aggregate, skill_proposals, mock.patch.object(secret_scan, "SCAN_CACHE_CHARS", 0))
    with rls.team_scope(team):
        assert ProposalEvidence.objects.filter(proposal__run=run).count() == count  # a row per session, stored
    return seen


def test_what_finalize_holds_per_finding_stays_small():
    """Finalize holds a run's findings through the aggregation and the skill proposals (34,000 at 100,000 sessions),
    600 sessions with a finding against 100 (tracemalloc):
    * the findings as they are loaded: their JSON objects are records of one shape per kind of object
      (reviews.dreams.records), 710 bytes a finding here with its session, where dictionaries cost 900;
    * what the aggregation leaves behind: a proposal stores a row per session of its pattern, and as dictionaries in
      the drafts the rows stayed through the skill proposals, finalize's peak (200 bytes a row); they go to a file as
      each draft is finished (reviews.dreams.spill), so the drafts hold a few bytes a finding."""
    _held_after_aggregating("drafts-warm", 20)
    small, big = _held_after_aggregating("drafts-small", 100), _held_after_aggregating("drafts-big", 600)
    assert (big["aggregating"] - small["aggregating"]) / 500 < 800, (small, big)
    left = {size: seen["drafted"] - seen["aggregating"] for size, seen in ((100, small), (600, big))}
    assert (left[600] - left[100]) / 500 < 40, (small, big)


# Three fixes, each seen in a third of the sessions: three proposals.
FIXES = [("make deploy", "make release"), ("npm test", "npm run test:ci"), ("pytest", "pytest -p no:cacheprovider")]


def _held_between_patterns(slug: str, count: int) -> dict[str, int]:
    """Finalize a run of ``count`` sessions that each have one finding of one of three fixes (with its own excerpt
    and event), measuring with tracemalloc what finalize holds as it starts to read each pattern's findings for its
    draft (the largest), and when the skill proposals start."""
    team, store, ids = _team_with_sessions(slug, count)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    with rls.team_scope(team):
        for n, sid in enumerate(ids):
            old, new = FIXES[n % len(FIXES)]
            finding = {
                "kind": "corrected_command",
                "key": f"cmd:{old}=>{new}",
                "summary": f"Use `{new}` instead of `{old}`: the old one is gone.",
                "old": old,
                "new": new,
                "error": f"{old}: not found",
                "trust": "agent",
                "evidence": [{"event_index": 300 + n, "excerpt": f"{old} # try {n}", "trust": "agent"}],
            }
            SessionAnalysis.objects.filter(run=run, session_id=sid).update(findings=[finding])
    seen = {"between": 0}
    real_drafting, real_skills = aggregate_mod._drafting, finalizing.skill_proposals

    def drafting(*args, **kwargs):
        gc.collect()
        seen["between"] = max(seen["between"], tracemalloc.get_traced_memory()[0])
        return real_drafting(*args, **kwargs)

    def skill_proposals(*args, **kwargs):
        gc.collect()
        seen["skills"] = tracemalloc.get_traced_memory()[0]
        return real_skills(*args, **kwargs)

    patches = [
        mock.patch.object(secret_scan, "SCAN_CACHE_CHARS", 0),
        mock.patch.object(aggregate_mod, "_drafting", drafting),
    ]
    _finalize_traced(run, aggregate_mod.aggregate, skill_proposals, *patches)
    with rls.team_scope(team):
        assert ProposalEvidence.objects.filter(proposal__run=run).count() == count  # a row per session, stored
    return seen


def test_finalize_holds_a_few_words_per_finding_between_patterns():
    """Finalize reads a run's findings once in full to group them, keeping per pattern its counts, its first finding
    and a word per session, then again a pattern at a time for its draft (reviews.dreams.run_findings): it once held
    every finding through the aggregation and the skill proposals (34,000 at 100,000 sessions, 0.8 KiB each as
    records). 600 sessions with a finding against 100: what it holds as it starts to read a pattern, and when the
    skill proposals start (their groups keep an id and a confidence per finding), stays within a few words a
    finding; holding the findings costs 700 bytes a finding or more."""
    _held_between_patterns("flat-warm", 30)
    small, big = _held_between_patterns("flat-small", 100), _held_between_patterns("flat-big", 600)
    assert (big["between"] - small["between"]) / 500 < 100, (small, big)
    assert (big["skills"] - small["skills"]) / 500 < 100, (small, big)


def test_the_aggregation_reads_a_runs_findings_again_by_pattern_as_it_drafts_from_them_held(monkeypatch):
    """The aggregation over RunFindings (read in full, then each pattern's sessions again, a chunk of ids at a time)
    makes the same drafts, isolated and withheld rows as over the same sessions held in a list."""
    team, store, ids = _team_with_sessions("reread", 40)
    run = _running(team, store, ids, status=AnalysisStatus.DONE)
    with rls.team_scope(team):
        for n, sid in enumerate(ids):
            old, new = FIXES[n % len(FIXES)]
            found = [
                {
                    "kind": "corrected_command",
                    "key": f"cmd:{old}=>{new}",
                    "summary": f"Use `{new}` instead of `{old}`.",
                    "old": old,
                    "new": new,
                    "error": f"{old}: not found ({n})",
                    "evidence": [{"event_index": n, "excerpt": f"{old} # {n}", "trust": "agent"}],
                },
                {"kind": "note", "key": f"note:{n % 7}", "summary": f"The build cache lives in /tmp/cache-{n % 7}."},
            ]
            if n % 5:  # some sessions without findings: not read, only counted
                SessionAnalysis.objects.filter(run=run, session_id=sid).update(findings=found[: 1 + n % 2])
        monkeypatch.setattr(run_findings, "CHUNK", 7)
        read = RunFindings(run)
        kwargs = {"sessions_analysed": read.analysed, "agent_tasks": read.agent_tasks, "memory": []}
        again = aggregate_mod.aggregate(read, **kwargs)
        held = aggregate_mod.aggregate(list(RunFindings(run)), **kwargs)
    assert [d.signature for d in again.proposals] == [d.signature for d in held.proposals] != []
    assert again == held


def _dispatch_lines() -> set[int]:
    """dispatch's own lines (its commit's callback aside: that line is where the batches and finalize run from)
    and those of the selection it calls."""
    own: set[int] = set()
    for step in (steps.dispatch, steps._start):
        lines, first = inspect.getsourcelines(step)
        own |= {first + i for i, line in enumerate(lines) if "on_commit" not in line}
    lines, first = inspect.getsourcelines(steps._select)
    return own | set(range(first, first + len(lines)))


def _held_by_dispatch(snapshot: tracemalloc.Snapshot) -> int:
    """Bytes of the traces with a frame on one of dispatch's own lines."""
    own = {(steps.__file__, line) for line in _dispatch_lines()}
    # The snapshot's raw (domain, size, frames, ...) tuples: filter_traces and Trace objects took 10 s a snapshot.
    return sum(trace[1] for trace in snapshot.traces._traces if not own.isdisjoint(trace[2]))


def _held_from_dispatch_at_finalize(slug: str, count: int, capture) -> int:
    """Bytes that dispatch allocated still held at the start of finalize, in a run of ``count`` sessions cycled in
    this process (no broker: the batches and finalize run from dispatch's commit)."""
    from reviews.dreams import runs

    team, store, _ = _team_with_sessions(slug, count)
    with rls.team_scope(team):
        run = runs._create_run(store, "command", None, False, True, "rules", count, None)
    seen: list[int] = []
    real = finalizing.run_procedures

    def run_procedures(*args, **kwargs):
        gc.collect()  # what the run holds, not garbage waiting for the collector
        seen.append(_held_by_dispatch(tracemalloc.take_snapshot()))
        return real(*args, **kwargs)

    conf = steps.analyze_sessions.app.conf
    eager, conf.task_always_eager = conf.task_always_eager, True
    with mock.patch.object(finalizing, "run_procedures", run_procedures):
        gc.collect()
        tracemalloc.start(40)  # deep enough to reach dispatch from where the database driver makes an id
        try:
            with capture(execute=True):
                steps.dispatch(run.pk)
        finally:
            tracemalloc.stop()
            conf.task_always_eager = eager
    with rls.team_scope(team):
        assert DreamRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    assert len(seen) == 1
    return seen[0]


def test_a_run_in_this_process_holds_its_pending_ids_in_a_word_each_through_finalize(
    django_capture_on_commit_callbacks,
):
    """Without a broker the batches and finalize run inside dispatch's commit, so what dispatch holds stays through
    finalize's peak: the run's ids as lists of int objects (about 48 bytes a session, 100,000 sessions' ids held
    through finalize, the selection's list too) grew the in-process cycle's peak with the run. Held now: an array
    of the pending ids, 8 bytes a session."""
    capture = django_capture_on_commit_callbacks
    _held_from_dispatch_at_finalize("pending-warm", 20, capture)  # what the first dispatch of a process caches
    # 160 sessions apart: the old lists held about 7,700 bytes more, the array 1,300, and two runs of one size differ
    # by up to 800 here (tracing a run costs 0.1 s a session, so no more).
    small = _held_from_dispatch_at_finalize("pending-small", 40, capture)
    big = _held_from_dispatch_at_finalize("pending-big", 200, capture)
    assert (big - small) / 160 < 20, (small, big)


def _selection_peak(slug: str, count: int) -> int:
    """Peak bytes allocated while a queued run of ``count`` sessions selects them and writes its analyses."""
    from reviews.dreams import runs

    team, store, _ = _team_with_sessions(slug, count)
    with rls.team_scope(team):
        run = runs._create_run(store, "command", None, False, True, "rules", count, None)
        gc.collect()
        tracemalloc.start()
        try:
            assert steps._select(DreamRun.objects.select_related("store").get(pk=run.pk), team.pk)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert DreamRun.objects.get(pk=run.pk).sessions_selected == count
        assert SessionAnalysis.objects.filter(run=run).count() == count
    return peak


@pytest.mark.skipif(not is_postgres(), reason="the selection goes into the INSERT only on PostgreSQL")
def test_dispatch_writes_the_selection_without_reading_it():
    """The run's analyses are written from the selection's own query (INSERT … SELECT), so the selected ids never
    come to Python: at 100,000 sessions their list, the driver's result and the array parameter made of them were
    dispatch's peak (330 bytes a session here before; nothing per session now)."""
    _selection_peak("selection-warm", 20)  # what the first selection of a process caches
    small = _selection_peak("selection-small", 100)
    big = _selection_peak("selection-big", 2100)
    # Bytes a session: 330 before. Over 2,000 sessions, so that one buffer of a few KiB the allocator happens to
    # grow in one of the two runs (seen once in a full run: +4.0 KiB) is not taken for a cost per session.
    assert (big - small) / 2000 < 4, (small, big)


@pytest.mark.skipif(not is_postgres(), reason="PostgreSQL's catalog")
def test_a_runs_analyses_are_checked_against_their_same_team_keys_only():
    """Every foreign key of an analysis row is checked per row at the commit of dispatch's one INSERT (deferred):
    the plain keys on run, session and team are implied by the same-team ones (a missing run or session is refused
    by those, the team exists through the run), and the five checks per row were three quarters of dispatch's time
    at 10,000 sessions (reviews migration 0017)."""
    with connection.cursor() as c:
        c.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = 'reviews_sessionanalysis'::regclass"
        )
        assert sorted(name for (name,) in c.fetchall()) == [
            "reviews_sessionanalysis_run_id_same_team",
            "reviews_sessionanalysis_session_id_same_team",
        ]
