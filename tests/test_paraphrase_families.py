"""Wordings of one lesson read as one, from the blind corpora of stop 27 (tests/data/blind/scenario-blind-7..10):
notes in German, French or Spanish (words of any script, their function words), an identifier glued to words
(`GRCh38-Analysis-Set`, `hg19-BAMs`), verbs a paraphrase swaps (wipe / delete / clear, rebuild / build), and a CLI
wrapped as a tool whose argument names it again. And what must stay apart."""

from __future__ import annotations

import pytest

from reviews.analysis import normalize as nz
from tests.test_analysis_aggregate import _note_docs, filler, mem, run
from tests.test_analysis_rules import S


@pytest.mark.parametrize(
    "wordings,anchor",
    [
        (
            [
                "Für Release-Builds immer das Image node20-alpine nehmen; node18 ist abgekündigt.",
                "node18 nicht mehr verwenden: das Image für Release-Builds ist node20-alpine.",
                "Release-Builds laufen ausschließlich auf node20-Images, node18 fliegt raus.",
            ],
            "node20",
        ),
        (
            [
                "Les exports comptables passent par le connecteur SAP-B1 v10 ; l'ancien connecteur v9 est coupé.",
                "Connecteur v9 coupé : pour les exports, utiliser SAP-B1 v10.",
                "Exports vers la compta : toujours le connecteur v10 (SAP-B1), jamais la v9.",
            ],
            "v10",
        ),
        (
            [
                "Las migraciones de la base se lanzan con flyway11, nunca con el flyway9 del contenedor viejo.",
                "Para migrar la base: flyway11; el flyway9 del contenedor viejo ya no sirve.",
                "Nada de flyway9: las migraciones van con flyway11.",
            ],
            "flyway11",
        ),
    ],
)
def test_paraphrased_notes_in_another_language_are_one_pattern(wordings, anchor):
    res = run(_note_docs(wordings * 2) + [filler(i) for i in range(4)])
    assert len(res.proposals) == 1, [p.content for p in res.proposals]
    (p,) = res.proposals
    assert p.operation == "add" and p.prevalence_sessions == 6 and anchor in p.content.lower()


def test_the_same_code_with_other_numbers_stays_two_facts():
    res = run(
        _note_docs(
            ["Index builds on GRCh38 take 3 hours on the long partition."] * 3
            + ["Index builds on GRCh38 take 9 hours on the long partition."] * 3
        )
    )
    assert sorted(p.prevalence_sessions for p in res.proposals) == [3, 3]


def test_words_of_any_script_are_whole_words():
    assert "zuläss" in nz.salient("die einzige zulässige Referenz")
    assert nz.salient("l'agrément des associés") == {"agrém", "associ"}
    assert not any(len(w) < 3 for w in nz.salient("vérifier l'agrément prévu à l'article"))


@pytest.mark.parametrize(
    "text",
    [
        "Das ist die Referenz für alle Läufe",
        "C'est la référence pour tous les lancements",
        "Es la referencia para todas las ejecuciones",
    ],
)
def test_function_words_of_other_languages_say_nothing(text):
    sal = nz.salient(text)
    assert not sal & {"das", "ist", "die", "für", "est", "la", "pour", "les", "es", "para", "las"}
    assert any(w.startswith(("refer", "référ")) for w in sal)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("niemals hg19-Dateien mischen", {"hg19"}),
        ("nur das GRCh38-Analysis-Set", {"grch38"}),
        ("alte hg19-BAMs nicht weiterverwenden", {"hg19"}),
        ("see LUM-2290", {"lum-2290"}),  # a ticket key stays whole
        ("built for x86-64", {"x86-64"}),
        ("install py3-dev", {"py3-dev"}),
    ],
)
def test_an_identifier_glued_to_words_is_the_identifier(text, expected):
    assert nz.anchors(text) == expected


@pytest.mark.parametrize(
    "a,b",
    [
        ("wipe the shader cache", "delete the shader cache"),
        ("clear the shader cache", "remove the shader cache"),
        ("wiped the shader cache", "deleting the shader cache"),
        ("rebuild the player", "build the player"),
    ],
)
def test_verbs_a_paraphrase_swaps_are_one_word(a, b):
    assert nz.salient(a) == nz.salient(b)


def _wrapped_cli_session(i: int, tool: str = "kubectl"):
    s = S(f"k-{i}", "ops-bot", "deploy").say("user", "Check the pods.")
    s.doc["events"].append(
        {"type": "tool_call", "id": "c1", "name": tool, "arguments": {"command": "kubectl get pods -n legacy"}}
    )
    s.doc["events"].append(
        {"type": "tool_result", "call_id": "c1", "is_error": True, "content": f'namespace "legacy" not found ({i})'}
    )
    s.doc["events"].append(
        {"type": "tool_call", "id": "c2", "name": tool, "arguments": {"command": "kubectl get pods -n apps"}}
    )
    s.doc["events"].append({"type": "tool_result", "call_id": "c2", "content": f"web-{i} Running"})
    return s.doc


@pytest.mark.parametrize("tool", ["kubectl", "mcp__ops__kubectl", "functions.kubectl"])
def test_a_cli_wrapped_as_a_tool_reads_as_its_command_and_updates_the_entry_that_names_it(tool):
    entry = mem("pods", "List the pods with `kubectl get pods -n legacy`.", agent="ops-bot")
    res = run([_wrapped_cli_session(i, tool) for i in range(4)], memory=[entry])
    (p,) = res.proposals
    assert p.operation == "update" and p.targets == ["pods"]
    assert "kubectl get pods -n apps" in p.content and "kubectl kubectl" not in p.content and "__" not in p.content


LONG_WORDINGS = [
    "Heads up for whoever touches the billing exports: the ledger table stores amounts in cents, so every sum in "
    "the finance report has to be divided by one hundred before it is compared.",
    "Spent the morning on a report that was off by a factor of a hundred: ledger amounts are cents, and the finance "
    "report compares them as if they were euros.",
    "Reminder: ledger amounts are stored as cents; divide by a hundred before any finance report comparison.",
]


def test_long_wordings_of_one_fact_are_one_pattern():
    res = run(_note_docs(LONG_WORDINGS * 2) + [filler(i) for i in range(4)])
    assert [p.prevalence_sessions for p in res.proposals] == [6], [p.content for p in res.proposals]


def test_long_notes_on_one_topic_that_say_different_things_stay_apart():
    res = run(
        _note_docs(
            [
                "The ledger table stores amounts in cents; divide by a hundred before any finance report comparison.",
            ]
            * 3
            + [
                "The ledger table is rebuilt every night at two; finance reports run before that see yesterday's "
                "rows only.",
            ]
            * 3
        )
    )
    assert sorted(p.prevalence_sessions for p in res.proposals) == [3, 3]


def _flag_correction(i: int):
    s = S(f"fl-{i}", "api-dev", "feature")
    s.call("bash", "./mvnw spring-boot:run -Dspring-boot.run.profiles=dev", f"Started in {i}.2 s")
    s.say("user", "Locally it's -Dspring-boot.run.profiles=local from now on, not dev.")
    s.call("bash", "./mvnw spring-boot:run -Dspring-boot.run.profiles=local", f"Started in {i}.4 s")
    return s.doc


def test_a_lesson_names_a_flag_as_the_command_writes_it():
    (p,) = run([_flag_correction(i) for i in range(4)]).proposals
    assert "`-Dspring-boot.run.profiles=local`" in p.content and "-dspring" not in p.content


def test_a_stale_entry_gets_the_flag_in_its_own_case():
    entry = mem(
        "run-local", "Run the app with `./mvnw spring-boot:run -Dspring-boot.run.profiles=dev`.", agent="api-dev"
    )
    (p,) = run([_flag_correction(i) for i in range(4)], memory=[entry]).proposals
    assert p.operation == "update" and "-Dspring-boot.run.profiles=local" in p.content
    assert "-dspring" not in p.content


ERRORS = [
    "ERROR: failed to pull data from the cloud - Checkout failed for following targets: data/raw/{i}.parquet",
    "ERROR: unexpected error - AccessDenied when calling GetObject (request id {i})",
    "WARNING: Some cache files do not exist locally nor on remote: data/interim/{i}.parquet",
]


def _scattered(i: int):
    s = S(f"sc-{i}", "pipeline-bot", "train")
    s.call("bash", "dvc pull", ERRORS[i % 3].format(i=i), error=True, exit_code=1)
    s.call("bash", "dvc pull -r gcs-main", f"{i} files fetched")
    return s.doc


def test_a_fix_whose_errors_differ_says_so_instead_of_scattered_words():
    (p,) = run([_scattered(i) for i in range(6)]).proposals
    assert "dvc pull -r gcs-main" in p.content
    assert "differ from session to session" in p.content and "…" not in p.content
