"""What looks like a lesson and is not (reviews.analysis.rules and risk), each as a family:
- a person's one-off word between a failure and its replacement ("just this once", "only for today", in several
  languages) makes the replacement that decision, never a lesson, whichever path found it;
- a step after which the same call still failed fixed nothing (the agent's own detour);
- a lesson that rode on a secret is high risk even once the secret is redacted, and the variable's name stays."""

from __future__ import annotations

import pytest

from dreamweb.secret_scan import REDACTED, redact
from reviews.analysis import risk
from reviews.analysis.rules import analyze
from tests.test_analysis_aggregate import filler, run
from tests.test_analysis_rules import S

ONE_OFFS = [
    "Just this once, run only the unit tests; the e2e box is down today.",
    "Only for today: `make test-unit` is enough.",
    "Exceptionally, run make test-unit. Tomorrow the full suite again.",
    "Skip the end-to-end part just for now, make test-unit will do.",
    "make test-unit, but don't make it a rule.",
    "Fine, make test-unit. Not a habit!",
    "Nur heute: make test-unit reicht.",
    "Ausnahmsweise nur make test-unit.",
    "Juste cette fois, lance make test-unit.",
    "Exceptionnellement, make test-unit suffit.",
    "Solo por esta vez, ejecuta make test-unit.",
    "Solo per oggi, make test-unit basta.",
]


def once_session(i, said, failing=True):
    s = S(f"o-{i}", ["a", "b"][i % 2], "ci").say("user", "Run the tests.")
    s.call("bash", "make test", "e2e: browser farm unreachable\nmake: *** [test] Error 1", error=failing, exit_code=2)
    s.say("user", said)
    s.call("bash", "make test-unit", "40 passed")
    return s.doc


@pytest.mark.parametrize("said", ONE_OFFS)
def test_a_one_off_between_a_failure_and_its_replacement_is_no_finding(said):
    kinds = [f["kind"] for f in analyze(once_session(0, said)).findings]
    assert not {"corrected_command", "correction"} & set(kinds), kinds


def test_one_offs_in_many_sessions_stay_one_offs():
    docs = [once_session(i, said) for i, said in enumerate(ONE_OFFS[:4])]
    assert run(docs + [filler(i) for i in range(3)]).proposals == []


def test_the_same_replacement_without_a_one_off_is_still_a_lesson():
    docs = [once_session(i, "Run the unit tests with make test-unit instead.") for i in range(3)]
    (p,) = run(docs + [filler(i) for i in range(3)]).proposals
    assert "make test-unit" in p.content


def test_a_one_off_before_a_prep_step_makes_it_no_lesson():
    s = S("p-1", "a").say("user", "Run it.")
    s.call("bash", "pytest -q", "ERROR: db unreachable", error=True)
    s.say("user", "Just this once, start the db by hand.")
    s.call("bash", "docker start pg", "pg")
    s.call("bash", "pytest -q", "5 passed")
    assert not [f for f in analyze(s.doc).findings if f.get("new")], analyze(s.doc).findings


# ---------------------------------------------------------------- the agent's own detour

DETOURS = [
    ("npm test -- cart", "npm cache clean --force"),
    ("cargo test", "cargo clean"),
    ("pytest tests/test_api.py", "pip install -r requirements.txt"),
]


@pytest.mark.parametrize("cmd,detour", DETOURS)
def test_a_step_after_which_the_same_call_still_failed_is_not_the_fix(cmd, detour):
    s = S("d-1", "a").say("user", "The tests fail, fix them.")
    s.call("bash", cmd, "FAIL: expected 2 received 1", error=True)
    s.call("bash", detour, "done")
    s.call("bash", cmd, "FAIL: expected 2 received 1", error=True)
    s.call("Edit", "src/x.py", "The file has been updated.")
    s.call("bash", cmd, "9 passed")
    found = [f for f in analyze(s.doc).findings if f.get("new")]
    assert not found, found


def test_a_step_after_the_last_failure_is_still_the_fix():
    s = S("d-2", "a").say("user", "Run the tests.")
    s.call("bash", "pytest -q", "ModuleNotFoundError: No module named 'httpx'", error=True)
    s.call("bash", "pytest -q", "ModuleNotFoundError: No module named 'httpx'", error=True)
    s.call("bash", "pip install -r requirements.txt", "Successfully installed httpx")
    s.call("bash", "pytest -q", "5 passed")
    assert {f["new"] for f in analyze(s.doc).findings if f.get("new")} == {"pip install -r requirements.txt"}


# ---------------------------------------------------------------- a lesson that rode on a secret

SECRET_COMMANDS = [
    ("GH_TOKEN=ghp_Q8vX2mK9pW4xLz7RtY3nB6cD1fG5hJ0sA2eU gh release create v1", "GH_TOKEN="),
    ("NPM_TOKEN=npm_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5 npm publish", "NPM_TOKEN="),
    ("AWS_SECRET_ACCESS_KEY=q8Hk2LmZ0pXr7TvB1nC4yW9dF6gJ3sA5eR2uI0oP aws s3 ls", "AWS_SECRET_ACCESS_KEY="),
]


@pytest.mark.parametrize("cmd,name", SECRET_COMMANDS)
def test_a_variables_name_stays_when_its_value_is_redacted(cmd, name):
    out = redact(cmd)
    assert out.startswith(name + REDACTED), out


@pytest.mark.parametrize("cmd,name", SECRET_COMMANDS)
def test_a_lesson_that_rode_on_a_redacted_secret_is_high_risk(cmd, name):
    docs = []
    for i in range(3):
        plain = cmd.split(" ", 1)[1]
        s = S(f"t-{i}", ["a", "b"][i % 2], "release").say("user", "Publish it.")
        s.call("bash", plain, f"error: {name[:-1]} is not set", error=True, exit_code=4)
        s.call("bash", cmd, "ok")
        docs.append(s.doc)
    proposals = run(docs + [filler(i) for i in range(3)]).proposals
    assert proposals, "the lesson itself (set the variable) is still proposed"
    for p in proposals:
        assert p.risk == "high" and risk.REASON_SECRET in p.risk_reasons, (p.risk, p.risk_reasons, p.content)
        assert cmd.split("=", 1)[1].split()[0] not in p.content


def test_a_draft_naming_redacted_text_is_high_risk():
    level, reasons = risk.assess({"operation": "add", "content": f"Use `X={REDACTED} tool run`.", "evidence": []})
    assert level == "high" and risk.REASON_SECRET in reasons


# ---------------------------------------------------------------- a request for the step the agent forgot


@pytest.mark.parametrize(
    "said",
    [
        "Looks good. You forgot the changelog though: please add a changelog entry for this.",
        "Nice. Now add an entry to the changelog too, we always do that.",
        "One more thing before we wrap up: add a line to the CHANGELOG for this fix.",
        "Could you also write a changelog note?",
    ],
)
def test_a_request_for_a_piece_of_something_is_keyed_by_that_something(said):
    s = S("q-1", "a").say("user", "Fix the bug.").call("bash", "pytest -q", "5 passed").say("user", said)
    keys = [f["key"] for f in analyze(s.doc).findings if f["kind"] == "request"]
    assert len(keys) == 1 and keys[0].endswith(" changelog"), keys


@pytest.mark.parametrize(
    "said",
    [
        "Don't add a changelog entry for this one.",
        "Why did you add an entry to the changelog?",
        "Add it.",
    ],
)
def test_what_is_no_request_for_a_forgotten_step_stays_quiet(said):
    s = S("q-2", "a").say("user", "Fix the bug.").call("bash", "pytest -q", "5 passed").say("user", said)
    assert not [f for f in analyze(s.doc).findings if f["kind"] == "request"]


def test_requests_for_pieces_of_different_things_stay_apart():
    docs = []
    for i, said in enumerate(
        ["Add a line to the README.", "Add an entry to the changelog.", "Add a note in the docs."]
    ):
        s = S(f"r-{i}", "a").say("user", "Fix it.").call("bash", "pytest -q", "ok").say("user", said)
        docs.append(s.doc)
    assert run(docs + [filler(i) for i in range(3)]).proposals == []


def test_a_lessons_function_words_are_never_elided():
    from reviews.analysis.aggregate import _shared_wording

    named = "Use `pnpm`, not `npm`: run `pnpm i` instead of `npm i`."  # the most common wording: the one kept
    texts = {1: named, 2: named, 3: "Use `pnpm`: run `pnpm i` instead of `npm i`.", 4: "Prefer `pnpm` (x).", 5: "y"}
    out = _shared_wording(texts)  # "not" is in 2 of 5 texts: elided as a detail before
    assert out.startswith("Use `pnpm`, not `npm`"), out
    assert "instead of" in out, out
