"""A lesson later sessions overturn gives way to theirs (reviews.analysis.drift), in each family that can drift: a
fix whose remedy later fails or whose failing step later works, a preference people later steer away from, a note
later denied. Left alone: patterns whose sessions interleave in time, patterns no agent shares, unknown times."""

from __future__ import annotations

from datetime import UTC, datetime

from reviews.analysis import aggregate as agg
from reviews.analysis.findings import SessionFindings
from reviews.analysis.rules import analyze
from tests.test_analysis_rules import S

JAN, JUN = datetime(2026, 1, 5, tzinfo=UTC).timestamp(), datetime(2026, 6, 5, tzinfo=UTC).timestamp()
DAY = 86400.0


def corrected(ext, failing, working, agent="bot", i=0):
    s = S(ext, agent, "release").say("user", ["Ship it.", "Release 4.2 please.", "Push the build out."][i % 3])
    s.call(
        "bash", failing, f"make: *** No rule to make target '{failing.split()[-1]}'.  Stop.", error=True, exit_code=2
    )
    return s.call("bash", working, f"Done, build {100 + i}.").doc


def steered(ext, wrong, right, words, agent="bot", i=0):
    s = S(ext, agent, "deps").say("user", ["Add the date-fns dependency.", "Install lodash.", "Add zod."][i % 3])
    s.call("bash", f"{wrong} install date-fns", "added 1 package")
    s.say("user", words[i % len(words)])
    return s.call("bash", f"{right} add date-fns", "Done in 1.2s").doc


def noted(ext, text, agent="bot"):
    return S(ext, agent, "staging").say("user", "Push this to staging.").note(text).say("assistant", "Noted.").doc


def filler(ext, agent="bot"):
    return S(ext, agent, "misc").say("user", "Check the build.").call("bash", "git status", "clean").doc


def run(timed, n_filler=4):
    """timed: [(doc, started epoch seconds or 0)]."""
    docs = timed + [(filler(f"f-{i}"), JAN + i * DAY) for i in range(n_filler)]
    sessions = [
        SessionFindings(i + 1, d["external_id"], d["agent"], d.get("task"), analyze(d).findings, started=t)
        for i, (d, t) in enumerate(docs)
    ]
    return agg.aggregate(sessions, sessions_analysed=len(sessions), memory=[])


def proposed(res, *words):
    return [p for p in res.proposals if all(w in (p.content or "") for w in words)]


def isolated_for(res, prefix):
    return [r for r in res.isolated if any(s.startswith(prefix) for s in r["supporting_sessions"])]


def test_a_remedy_that_later_fails_gives_way_to_the_later_fix():
    old = [(corrected(f"old-{i}", "make deploy", "make ship", i=i), JAN + i * DAY) for i in range(3)]
    new = [(corrected(f"new-{i}", "make ship", "make release", i=i), JUN + i * DAY) for i in range(3)]
    res = run(old + new)
    assert proposed(res, "make release"), [p.content for p in res.proposals]
    assert not [p for p in res.proposals if "make ship" in p.content and "make release" not in p.content]
    (row,) = isolated_for(res, "old-")
    assert row["reason"].startswith("overturned by 3 later sessions"), row
    assert "2026-06-05" in row["reason"] and "2026-01-07" in row["reason"], row


def test_a_step_that_failed_and_later_works_again_overturns_the_workaround():
    """January: `make ship` fails, agents use `make release`; June: `make release` fails, `make ship` works again."""
    old = [(corrected(f"old-{i}", "make ship", "make release", i=i), JAN + i * DAY) for i in range(3)]
    new = [(corrected(f"new-{i}", "make release", "make ship", i=i), JUN + i * DAY) for i in range(3)]
    res = run(old + new)
    assert [p.supporting_sessions for p in res.proposals] == [[f"new-{i}" for i in range(3)]], res.proposals
    assert isolated_for(res, "old-")[0]["reason"].startswith("overturned"), res.isolated


def test_order_of_arrival_does_not_matter_only_when_they_happened():
    new = [(corrected(f"new-{i}", "make ship", "make release", i=i), JUN + i * DAY) for i in range(3)]
    old = [(corrected(f"old-{i}", "make deploy", "make ship", i=i), JAN + i * DAY) for i in range(3)]
    res = run(new + old)
    assert [p.supporting_sessions for p in res.proposals] == [[f"new-{i}" for i in range(3)]], res.proposals


def test_a_preference_people_later_steer_away_from_gives_way():
    to_yarn = ["No, use yarn here, not npm.", "We install with yarn in this repo.", "Please use yarn instead of npm."]
    to_pnpm = ["Stop using yarn, we moved to pnpm.", "No yarn anymore: pnpm.", "Use pnpm instead of yarn now."]
    old = [(steered(f"old-{i}", "npm", "yarn", to_yarn, i=i), JAN + i * DAY) for i in range(3)]
    new = [(steered(f"new-{i}", "yarn", "pnpm", to_pnpm, i=i), JUN + i * DAY) for i in range(3)]
    res = run(old + new)
    assert proposed(res, "pnpm"), [p.content for p in res.proposals]
    assert not [p for p in res.proposals if "yarn" in p.content and "pnpm" not in p.content], [
        p.content for p in res.proposals
    ]
    assert isolated_for(res, "old-")[0]["reason"].startswith("overturned"), res.isolated


def test_a_note_later_denied_gives_way_to_the_denial():
    yes = ["Deploys to staging are allowed on Fridays.", "Staging deploys are allowed on Fridays."]
    no = ["Deploys to staging are not allowed on Fridays.", "Staging deploys are not allowed on Fridays."]
    old = [(noted(f"old-{i}", yes[i % 2]), JAN + i * DAY) for i in range(3)]
    new = [(noted(f"new-{i}", no[i % 2]), JUN + i * DAY) for i in range(3)]
    res = run(old + new)
    found = [p for p in res.proposals if "Friday" in (p.content or "")]
    assert len(found) == 1 and "not" in found[0].content, [p.content for p in found]
    assert found[0].supporting_sessions == [f"new-{i}" for i in range(3)]


def test_interleaved_in_time_both_stay_for_a_person_to_decide():
    old = [(corrected(f"old-{i}", "make deploy", "make ship", i=i), JAN + 2 * i * DAY) for i in range(3)]
    new = [(corrected(f"new-{i}", "make ship", "make release", i=i), JAN + (2 * i + 1) * DAY) for i in range(3)]
    res = run(old + new)
    assert proposed(res, "make release") and [
        p for p in res.proposals if "make ship" in p.content and "deploy" in p.content
    ]
    assert not [r for r in res.isolated if r["reason"].startswith("overturned")]


def test_unknown_times_change_nothing():
    old = [(corrected(f"old-{i}", "make deploy", "make ship", i=i), 0.0) for i in range(3)]
    new = [(corrected(f"new-{i}", "make ship", "make release", i=i), JUN + i * DAY) for i in range(3)]
    res = run(old + new)
    assert len([p for p in res.proposals if "make" in p.content]) == 2, [p.content for p in res.proposals]


def test_opposite_lessons_of_two_agents_are_no_drift_whenever_each_was_met():
    """The web app's sessions (January) say npm fails, use pnpm; the API's (June) say pnpm fails, use npm: each is
    its agent's lesson, not one overturning the other."""
    web = [(corrected(f"web-{i}", "make npm", "make pnpm", agent="web-bot", i=i), JAN + i * DAY) for i in range(3)]
    api = [(corrected(f"api-{i}", "make pnpm", "make npm", agent="api-bot", i=i), JUN + i * DAY) for i in range(3)]
    res = run(web + api)
    assert sorted(p.scope_agent for p in res.proposals) == ["api-bot", "web-bot"], [
        (p.scope_agent, p.content) for p in res.proposals
    ]


def test_unrelated_lessons_of_the_same_time_span_are_untouched():
    old = [(corrected(f"old-{i}", "make deploy", "make ship", i=i), JAN + i * DAY) for i in range(3)]
    other = [(corrected(f"oth-{i}", "make tests", "make test", i=i), JUN + i * DAY) for i in range(3)]
    res = run(old + other)
    assert len(res.proposals) == 2 and not [r for r in res.isolated if r["reason"].startswith("overturned")]
