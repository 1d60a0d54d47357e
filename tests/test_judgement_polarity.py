"""What a statement says includes whether it denies it (reviews.analysis.normalize.negated, aggregate): notes of
the same words and opposite polarity are two facts, and a denial of an entry contradicts it; a contrast clause ("port
6380, not 6379") does not deny. With them, spellings that are one fact: `10k` = 10000, `-flag=value` = `-flag value`,
and a wait before a retry is one step whatever its duration. Found by a blind judgement probe (round 5)."""

from __future__ import annotations

import pytest

from reviews.analysis import normalize as nz
from tests.test_analysis_aggregate import filler, mem, run
from tests.test_analysis_rules import S


@pytest.mark.parametrize(
    "text",
    [
        "Staging deploys are not allowed on Fridays.",
        "Staging deploys aren't allowed on Fridays.",
        "Never deploy staging on Fridays.",
        "The nightly backup no longer runs on weekends.",
        "Staging-Deploys sind freitags nicht erlaubt.",
        "Les déploiements ne sont pas autorisés le vendredi.",
        "Los despliegues ya no se permiten los viernes.",
    ],
)
def test_a_denial_is_negated(text):
    assert nz.negated(text)


@pytest.mark.parametrize(
    "text",
    [
        "Staging deploys are allowed on Fridays.",
        "The test Redis runs on port 6380, not on 6379.",
        "The timeout must be 30 s (not the default 5 s).",
        "Der Test-Redis läuft auf Port 6380, nicht auf 6379.",
        "Le Redis de test écoute sur le port 6380, pas sur 6379.",
        "Use the staging key; nothing else.",
        "The orders table gets vacuumed on Sundays, never midweek.",
    ],
)
def test_an_affirmation_with_a_contrast_is_not_negated(text):
    assert not nz.negated(text)


def _notes(texts, prefix="n"):
    docs = []
    for i, text in enumerate(texts):
        s = S(f"{prefix}-{i}", ["a", "b"][i % 2], "ops").say("user", "Deploy staging.")
        s.call("bash", "make deploy-staging", "ok")
        s.events.append({"type": "memory_write", "content": text})
        docs.append(s.doc)
    return docs


YES = [
    "Staging deploys are allowed on Fridays.",
    "Staging deploys are allowed on Fridays now.",
    "On Fridays staging deploys are allowed.",
]
NO = [
    "Staging deploys are not allowed on Fridays.",
    "Staging deploys are never allowed on Fridays.",
    "On Fridays staging deploys are not allowed.",
]


def test_contradicting_notes_are_two_facts_never_one_lesson_of_both():
    res = run(_notes(YES, "y") + _notes(NO, "x") + [filler(i) for i in range(3)])
    for p in res.proposals:
        sides = {s[0] for s in p.supporting_sessions}
        assert len(sides) == 1, (p.content, p.supporting_sessions)


def test_notes_that_deny_an_entry_update_it_not_reinforce_it():
    entry = mem("backup", "The nightly backup job runs on weekends too.")
    notes = [
        "The nightly backup job does not run on weekends anymore.",
        "The nightly backup job no longer runs on weekends.",
        "Nightly backup job: it does not run on weekends.",
    ]
    res = run(_notes(notes) + [filler(i) for i in range(3)], memory=[entry])
    assert not [r for r in res.reinforced if r["key"] == "backup"], res.reinforced
    assert [p for p in res.proposals if p.targets == ["backup"] and p.operation == "update"], [
        (p.operation, p.targets, p.content) for p in res.proposals
    ]


def test_notes_that_agree_with_an_entry_still_reinforce_it():
    entry = mem("backup", "The nightly backup job runs on weekends too.")
    res = run(
        _notes(["The nightly backup job runs on weekends too."] * 3) + [filler(i) for i in range(3)], memory=[entry]
    )
    assert [r for r in res.reinforced if r["key"] == "backup"] and not res.proposals


@pytest.mark.parametrize("a,b", [("10k rows", "10,000 rows"), ("10k rows", "10000 rows"), ("limit 25k", "limit 25000")])
def test_a_thousand_multiplier_is_the_number(a, b):
    assert nz.anchors(a) == nz.anchors(b)


def test_a_flag_with_its_value_after_equals_is_the_same_command():
    assert nz.normalize_command("go test -timeout=30m ./...") == nz.normalize_command("go test -timeout 30m ./...")
    assert nz.normalize_command("A=1 make") == "a=1 make"  # an assignment is not a flag


def test_a_wait_before_a_retry_is_one_step_whatever_its_duration():
    docs = []
    for i, wait in enumerate(["sleep 5", "sleep 10", "sleep 3"]):
        s = S(f"w-{i}", ["a", "b"][i % 2], "ci").say("user", "Run the tests.")
        s.call("bash", "pytest -q", "FATAL: the database system is starting up", error=True)
        s.call("bash", wait, "")
        s.call("bash", "pytest -q", "5 passed")
        docs.append(s.doc)
    (p,) = run(docs + [filler(i) for i in range(3)]).proposals
    assert p.prevalence_sessions == 3 and "sleep" in p.content, p.content
