"""Memory effectiveness on a hand-built history: times and sessions served, ratings, and the recurrence of a
lesson's mistake in sessions served it or not, before and after it went live, with the counts behind each rate."""

from __future__ import annotations

import pytest

from memory import effectiveness as eff
from reviews import effectiveness
from reviews.analysis.rules import analyze
from reviews.models import AnalysisStatus, SessionAnalysis

from .effectiveness_history import LESSON, build, other_finding, rate, serve
from .factories import SessionFactory, StoreFactory

pytestmark = pytest.mark.all_teams


def by_key(effects):
    return {e.key: e for e in effects}


def test_counts_on_a_hand_built_history(db):
    h = build(StoreFactory())
    serve(h.store, SessionFactory(team=h.store.team), [h.lesson])  # a serve whose session was never analysed
    # An agent that never faces the mistake and never got the lesson: its sessions are not compared.
    bystander = SessionFactory(team=h.store.team, agent="support-bot", started_at=h.live)
    SessionAnalysis.objects.create(
        team_id=h.store.team_id, run=h.run, session=bystander, status=AnalysisStatus.DONE, findings=[other_finding()]
    )
    rate(h.lesson, True, True, False)
    effects = by_key(effectiveness.store_effects(h.store))
    e = effects["release-command"]
    assert (e.times_served, e.sessions_served) == (5, 5)
    assert (e.ratings.count, e.ratings.up, e.ratings.down) == (3, 2, 1)
    assert (e.before.k, e.before.n) == (3, 4)
    assert (e.served.k, e.served.n) == (1, 4)  # the one recurrence repeats served memory (flagged): still counted
    assert (e.not_served.k, e.not_served.n) == (2, 3)
    assert len(e.misses) == 2 and all(m.agent == "ops-bot" for m in e.misses)
    assert e.verdict == eff.HELPFUL
    assert "1 of 4 served sessions vs 2 of 3 not served" in e.reason
    unused = effects["unused-tip"]
    assert (unused.times_served, unused.sessions_served) == (0, 0)
    # No agent ever made its mistake or got it: no session is comparable (another entry's mistake is not its mistake).
    assert (unused.served.n, unused.not_served.n, unused.before.n) == (0, 0, 0)
    assert unused.verdict == eff.NEVER_SERVED


def test_no_effect_when_the_mistake_recurs_as_often_when_served(db):
    h = build(StoreFactory(), served=(True, True, False, False), not_served=(True, False, True, False))
    e = by_key(effectiveness.store_effects(h.store))["release-command"]
    assert (e.served.k, e.served.n, e.not_served.k, e.not_served.n) == (2, 4, 2, 4)
    assert e.verdict == eff.NO_EFFECT


def test_before_live_is_the_baseline_when_too_few_sessions_were_not_served(db):
    h = build(StoreFactory(), not_served=(True,))
    e = by_key(effectiveness.store_effects(h.store))["release-command"]
    assert e.baseline[0] == "before it went live"
    assert e.verdict == eff.HELPFUL


def test_rated_down_is_contradicted_and_few_sessions_is_unmeasured(db):
    h = build(StoreFactory(), served=(False,), not_served=())
    rate(h.lesson, False, False)
    e = by_key(effectiveness.store_effects(h.store))["release-command"]
    assert e.verdict == eff.CONTRADICTED and "rated down" in e.reason
    h2 = build(StoreFactory(), served=(False,), not_served=(), before=())
    e2 = by_key(effectiveness.store_effects(h2.store))["release-command"]
    assert e2.verdict == eff.UNMEASURED


def test_a_lesson_born_from_a_finding_recognises_it_by_its_key(db):
    """An entry whose words share nothing with the finding is still its lesson when its version names the finding's
    session and event as evidence (what a dream's proposal writes)."""
    from memory.models import MemoryVersion

    h = build(StoreFactory(), before=(True, True, False), served=(False, False, False), not_served=())
    h.lesson.content = "Ship through the release target."  # no command words the matcher could find
    h.lesson.save()
    first = next(a for a in h.run.analyses.all() if a.findings[0]["key"].startswith("cmd:make deploy"))
    MemoryVersion.objects.filter(entry=h.lesson).update(
        evidence=[{"session_id": first.session_id, "event_index": 1, "excerpt": "make deploy"}]
    )
    e = by_key(effectiveness.store_effects(h.store))["release-command"]
    assert (e.before.k, e.before.n) == (2, 3)
    assert e.verdict == eff.HELPFUL


def test_rules_analyzer_keeps_a_served_lessons_recurrence_apart():
    doc = {
        "external_id": "x",
        "agent": "a",
        "events": [
            {"type": "tool_call", "id": "a", "name": "bash", "arguments": {"command": "make deploy"}},
            {
                "type": "tool_result",
                "call_id": "a",
                "content": "make: *** No rule to make target 'deploy'.",
                "exit_code": 2,
                "is_error": True,
            },
            {"type": "tool_call", "id": "b", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "b", "content": "Released.", "exit_code": 0},
        ],
    }
    fresh = analyze(doc)
    assert [f["kind"] for f in fresh.findings] == ["corrected_command"] and not fresh.served_findings
    again = analyze(doc, served=[LESSON])
    assert again.findings == []  # no new evidence for the served lesson
    assert [f["key"] for f in again.served_findings] == [fresh.findings[0]["key"]]


def test_overview_counts_each_verdict(db):
    h = build(StoreFactory())
    o = eff.overview(effectiveness.store_effects(h.store))
    assert o.total == 2 and o.counts[eff.HELPFUL] == 1 and o.counts[eff.NEVER_SERVED] == 1
    assert {b["verdict"]: b["pct"] for b in o.bars}[eff.HELPFUL] == 100


def _born_from_the_oldest_session():
    """A lesson born (its evidence) from the oldest session of its pattern, which is the last the stream reads, with
    a text the memory match cannot find: only its born identities make it recur. Returns the harness and that
    session's analysis."""
    from memory.models import MemoryVersion

    h = build(StoreFactory(), before=(False, False, True), served=(True, True, False), not_served=(True,))
    h.lesson.content = "Quarterly numbers are final on the fifth."  # nothing the memory match could find
    h.lesson.save()
    oldest = min(
        (a for a in h.run.analyses.all() if a.findings[0]["key"].startswith("cmd:make deploy")),
        key=lambda a: a.session.started_at,
    )
    MemoryVersion.objects.filter(entry=h.lesson).update(
        evidence=[{"session_id": oldest.session_id, "event_index": 1, "excerpt": "make deploy"}]
    )
    return h, oldest


def test_a_lesson_born_from_the_oldest_session_is_recognised_in_the_newer_ones_read_before_it(db):
    """The analyses are streamed newest first and a session's findings are not held: the identities a lesson was
    born from are read first, so a newer session (read before the session the lesson was born from) still counts its
    mistake, with its words and where it shows."""
    # Each group's first session is its newest: the oldest session of all is the last of `before`.
    h, oldest = _born_from_the_oldest_session()
    signals = sorted(effectiveness.session_signals(h.store), key=lambda s: s.at)
    assert signals[0].session_id == oldest.session_id
    recurred = [s for s in signals if s.recurred]
    assert [h.lesson.pk in s.recurred for s in signals] == [True, False, False, False, True, True, True]
    assert all(s.words[h.lesson.pk] == ["deploy"] for s in recurred)
    assert all(s.evidence[h.lesson.pk] == (1, "make deploy") for s in recurred)
    assert not any(s.contradicted for s in signals)


def test_each_distinct_finding_is_matched_against_memory_once(db, monkeypatch):
    """A pattern's findings say the same in each of its sessions (only their evidence differs): the memory match
    runs once per distinct finding, with the same figures."""
    h = build(StoreFactory())
    expected = [(e.key, e.before, e.served, e.not_served, e.verdict) for e in effectiveness.store_effects(h.store)]
    calls = []
    match = effectiveness.lesson_match
    monkeypatch.setattr(effectiveness, "lesson_match", lambda f, index: calls.append(f) or match(f, index))
    got = [(e.key, e.before, e.served, e.not_served, e.verdict) for e in effectiveness.store_effects(h.store)]
    assert got == expected
    # The mistake, the mistake flagged as served memory, and the other finding: 3 of the history's 11 findings.
    assert len(calls) == 3


def test_session_signals_hold_no_finding_that_concerns_no_entry(db, monkeypatch):
    """Upkeep reads up to 20,000 analysed sessions: a finding that is no entry's mistake is read and let go (they
    once were all held until every session was read: a dream's upkeep peak at 100,000 sessions)."""
    import gc
    import tracemalloc

    from memory.models import MemoryEntry
    from reviews.analysis.findings import evidence, make_finding

    def noise(i: int) -> list[dict]:
        return [
            make_finding(
                "user_correction",
                f"pref:tabs-{i}-{j}",
                f"Session {i} asked for thing {j}: " + "a long wording of a preference nobody holds. " * 12,
                evidence=[evidence(k, f"excerpt {i} {j} {k} " * 6, "user") for k in range(3)],
            )
            for j in range(3)
        ]

    def peak(n: int) -> float:
        h = build(StoreFactory(), before=(), served=(), not_served=())
        for i in range(n):
            s = SessionFactory(team=h.store.team, agent="deploy-bot")
            SessionAnalysis.objects.create(
                team_id=h.store.team_id, run=h.run, session=s, status=AnalysisStatus.DONE, findings=noise(i)
            )
        entries = list(MemoryEntry.objects.filter(store=h.store))
        effectiveness.session_signals(h.store, entries)  # warm: what the first call of a process caches
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            signals = effectiveness.session_signals(h.store, entries)
            top = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert len(signals) == n and not any(s.recurred or s.contradicted for s in signals)
        return top

    monkeypatch.setattr(effectiveness, "ROWS_PER_FETCH", 20)  # what a fetch holds is the same at both sizes
    small, big = peak(50), peak(250)
    # Each session's decoded findings are about 6 KB here (held, 11 KB a session of peak); a signal is a few hundred
    # bytes.
    assert (big - small) / 200 < 1500, (small, big)


def test_a_born_sessions_analysis_stored_while_upkeep_reads_is_counted_as_if_read_at_once(db, monkeypatch):
    """The born sessions' findings are read before the stream; one whose analysis is stored in between (another run
    finishing) is read by the stream, which reads again keeping its identities: the signals are those of one read."""
    h, oldest = _born_from_the_oldest_session()
    expected = [
        (s.session_id, s.recurred, dict(s.words), dict(s.evidence)) for s in effectiveness.session_signals(h.store)
    ]
    assert sum(bool(s[1]) for s in expected) == 4
    findings, session = oldest.findings, oldest.session
    oldest.delete()
    read_first = effectiveness._lessons_of_born_sessions

    def then_stored(store, born_of):
        out = read_first(store, born_of)
        SessionAnalysis.objects.create(
            team_id=h.store.team_id, run=h.run, session=session, status=AnalysisStatus.DONE, findings=findings
        )
        return out

    monkeypatch.setattr(effectiveness, "_lessons_of_born_sessions", then_stored)
    got = [(s.session_id, s.recurred, dict(s.words), dict(s.evidence)) for s in effectiveness.session_signals(h.store)]
    assert got == expected
