"""What a person says between two of the agent's steps is a correction only when it is about the last step: a
remark beside the work ("btw ..., fyi") or a request for more ("please also add ...") is not, and the step after it
is the work going on. A request for a piece of something ("an entry") is for the thing the person said was missing.
A search pointed at the file it then opens found nothing the agent did not know."""

from __future__ import annotations

import pytest

from reviews.analysis.rules import analyze
from tests.test_analysis_rules import S, kinds


def between(message, first="pnpm install", then="pnpm lint"):
    s = S("s-1", "bot").say("user", "Install the deps and lint.")
    s.call("bash", first, "Packages: +1187")
    s.say("user", message)
    return analyze(s.call("bash", then, "no lint errors").doc)


@pytest.mark.parametrize(
    "message",
    [
        "btw the staging cluster is called orca-7, just fyi",
        "By the way, standup moved to 10:30.",
        "FYI: prod is frozen until Monday",
        "Heads-up, CI is slow today",
        "P.S. I'm out tomorrow",
        "the release train leaves at 5, fyi",
        "Übrigens heißt der Cluster orca-7.",
        "Por cierto, el cluster se llama orca-7.",
    ],
)
def test_a_remark_beside_the_work_is_no_correction(message):
    assert "correction" not in kinds(between(message))


@pytest.mark.parametrize(
    "message",
    [
        "please also add a CHANGELOG entry for this",
        "Can you also run the linter?",
        "Also, bump the version.",
        "One more thing: update the docs.",
        "Run the linter as well.",
        "lint it too",
    ],
)
def test_asking_for_more_is_no_correction(message):
    assert "correction" not in kinds(between(message))


@pytest.mark.parametrize(
    "message",
    [
        "btw we use pnpm here, not npm",  # an aside that names the change is still the person's correction
        "Rotate through the script; it also updates the audit log.",  # "also" inside the reason, not more work
    ],
)
def test_a_correction_that_happens_to_share_a_word_is_still_one(message):
    if "pnpm" in message:
        res = between(message, first="npm install", then="pnpm install")
    else:
        res = between(message, first="vault kv put secret/app password=@pw.txt", then="scripts/rotate.sh app")
    assert "correction" in kinds(res), res.findings


def asked(message):
    s = S("s-1", "bot").say("user", "Fix the rounding bug.")
    s.call("bash", "sed -i 's/round(x, 2)/cents(x)/' billing/invoice.py", "")
    s.say("user", message)
    s.call("bash", "printf -- '- fix rounding\\n' >> CHANGELOG.md", "")
    return [f for f in analyze(s.doc).findings if f["kind"] == "request"]


@pytest.mark.parametrize(
    "message, noun",
    [
        ("Looks good, but you forgot the changelog - please add an entry.", "changelog"),
        ("Looks good. You forgot the changelog: please add an entry.", "changelog"),
        ("please also add a CHANGELOG entry for this", "changelog"),
        ("Nice. The README is missing — could you add a section?", "readme"),
        ("You left out the changelog. Please add a line.", "changelog"),
    ],
)
def test_a_request_for_a_piece_is_for_what_the_person_said_was_missing(message, noun):
    (f,) = asked(message)
    assert (f["verb"], f["noun"]) == ("add", noun), f


def test_a_piece_asked_for_with_nothing_named_stays_the_piece():
    (f,) = asked("Great, please add an entry.")
    assert f["noun"] == "entry"


def test_a_search_inside_the_file_it_then_edits_is_the_work():
    s = S("s-1", "bot").say("user", "Fix the rounding bug.")
    s.call("bash", "grep -n 'round(' billing/invoice.py", "billing/invoice.py:88:    total = round(subtotal, 2)")
    s.call("bash", "sed -i 's/round(subtotal, 2)/cents(subtotal)/' billing/invoice.py", "")
    s.call("read_file", "./billing/invoice.py", "total = cents(subtotal)")
    assert "rediscovered_knowledge" not in kinds(analyze(s.doc))


def test_a_search_of_a_folder_that_finds_the_file_is_still_a_rediscovery():
    s = S("s-1", "bot").say("user", "Fix the rounding bug.")
    s.call("bash", "grep -rn 'round(' billing/", "billing/invoice.py:88:    total = round(subtotal, 2)")
    s.call("read_file", "billing/invoice.py", "total = round(subtotal, 2)")
    assert "rediscovered_knowledge" in kinds(analyze(s.doc))
