"""Families found by blind scenarios 14 and 15 (a game-server team, a privacy desk, hardware verification, a
Haskell/Nix team), each tested with wordings of its own: options as facts in look-alike entries, units spelt short,
an entry that paraphrases the argument a fix took away, a search answered by the text read next, a value read
from a key-value store after a missed file, and a tool's search asked again in another form after an error."""

from __future__ import annotations

import pytest

from reviews.analysis import aggregate as ag
from reviews.analysis import normalize as nz
from reviews.analysis import rules

from .dream_sessions import session_doc


def _pair(a: str, b: str) -> tuple[ag.Entry, ag.Entry]:
    x, y = ag.MemoryIndex([{"key": "a", "content": a}, {"key": "b", "content": b}]).entries
    return x, y


@pytest.mark.parametrize(
    "a, b",
    [
        ("Library components build with -Wall -Werror.", "Executables build with -Wall -threaded -rtsopts."),
        ("Unit tests run with pytest -x --ff.", "Integration tests run with pytest -x --runslow."),
        ("Release builds use -O2 -flto.", "Debug builds use -O0 -g."),
        ("The nightly job runs make -j8 --keep-going.", "The smoke job runs make -j2 --silent."),
    ],
)
def test_entries_that_set_different_options_are_not_one_rule(a, b):
    assert not ag.entries_alike(*_pair(a, b))


@pytest.mark.parametrize(
    "a, b",
    [
        (
            "Use Verilator 5.020 or later; older releases lack --timing.",
            "The cocotb testbenches rely on --timing, so Verilator must be >= 5.020.",
        ),
        (
            "Install Terraform 1.7.5; the CI plan needs -lockfile=readonly.",
            "Our CI runs terraform with -lockfile=readonly, which is why Terraform 1.7.5 is pinned.",
        ),
    ],
)
def test_the_same_version_and_option_of_one_tool_in_other_sentences_is_one_rule(a, b):
    assert ag.entries_alike(*_pair(a, b))


@pytest.mark.parametrize(
    "short, long",
    [("72h", "72 hours"), ("10 s", "10 seconds"), ("30d", "30 days"), ("5 min", "5 minutes"), ("2 hrs", "2 hours")],
)
def test_a_unit_spelt_short_is_the_unit(short, long):
    assert nz.qualified_numbers(f"within {short}") == nz.qualified_numbers(f"within {long}")


def test_a_deadline_worded_twice_with_the_unit_spelt_short_is_one_rule_and_another_unit_is_not():
    a = "Personal-data breaches must be reported to the supervisory authority within 72 hours."
    assert ag.entries_alike(*_pair(a, "Notify the DPA no later than 72h after becoming aware of a breach."))
    assert not ag.entries_alike(*_pair(a, "Notify the DPA no later than 72 minutes after becoming aware of a breach."))


def _fix(old: str, new: str) -> dict:
    return {"old": old, "new": new, "error": "422 unsupported"}


@pytest.mark.parametrize(
    "content, old, new",
    [
        (
            "Export a data subject's records with dsar_export using format=pdf scope=all.",
            "dsar_export subject=current format=pdf scope=all",
            "dsar_export subject=current format=jsonl-zip scope=all",
        ),
        (
            "To publish a report call report_publish and pass channel=email-legacy.",
            "report_publish id=7 channel=email-legacy",
            "report_publish id=7 channel=portal",
        ),
        (
            "Quarterly invoices: run mcp_billing with mode=batch-v1 and the quarter.",
            "mcp__tools__mcp_billing quarter=Q3 mode=batch-v1",
            "mcp__tools__mcp_billing quarter=Q3 mode=batch-v2",
        ),
    ],
)
def test_an_entry_in_its_own_words_naming_what_a_fix_took_away_is_stale(content, old, new):
    index = ag.MemoryIndex([{"key": "k", "content": content}])
    hit = ag._delta_stale(_fix(old, new), index, None)
    assert hit is not None and hit[0].key == "k"
    removed = next(iter(nz.command_words(old) - nz.command_words(new)))
    added = next(iter(nz.command_words(new) - nz.command_words(old)))
    assert hit[1] == (removed, added)


@pytest.mark.parametrize(
    "content",
    [
        "Export a data subject's records with dsar_export using format=jsonl-zip.",  # already the new way
        "Reports are sent with format=pdf to the regulator by post.",  # the value, not the tool
    ],
)
def test_an_entry_that_already_says_the_new_way_or_another_tool_is_not_stale(content):
    index = ag.MemoryIndex([{"key": "k", "content": content}])
    fix = _fix("dsar_export format=pdf scope=all", "dsar_export format=jsonl-zip scope=all")
    assert ag._delta_stale(fix, index, None) is None


def _calls(*steps) -> list[dict]:
    ev = [{"type": "message", "role": "user", "content": "Please look into it."}]
    for i, (name, args, out, error) in enumerate(steps):
        ev.append({"type": "tool_call", "id": f"c{i}", "name": name, "arguments": args})
        ev.append({"type": "tool_result", "call_id": f"c{i}", "content": out, "is_error": error})
    return ev


def _kinds(*steps) -> dict[str, list[dict]]:
    """The findings of a session of these calls, by kind."""
    out: dict[str, list[dict]] = {}
    for f in rules.analyze(session_doc("s", _calls(*steps))).findings:
        out.setdefault(f["kind"], []).append(f)
    return out


def _located(kinds: dict[str, list[dict]]) -> list[str]:
    return [f.get("location", "") for f in kinds.get("rediscovered_knowledge", [])]


@pytest.mark.parametrize(
    "query, path, text",
    [
        (
            "erlang node name distribution",
            "rel/env.sh.eex",
            "# node name for the release\nexport RELEASE_DISTRIBUTION=name\nexport RELEASE_NODE=arena@host",
        ),
        (
            "payment retry backoff",
            "ops/runbook-7.md",
            "## Retries\nFailed payment calls retry with exponential backoff, capped at 5 attempts.",
        ),
    ],
)
def test_a_search_that_found_nothing_answered_by_the_file_read_next_is_a_lookup(query, path, text):
    kinds = _kinds(
        ("search", {"query": query}, "No matches found.", False),
        ("read_file", {"path": path}, text, False),
    )
    assert any(path in loc for loc in _located(kinds)), kinds


def test_a_file_read_after_an_unrelated_empty_search_is_not_a_lookup():
    kinds = _kinds(
        ("search", {"query": "payment retry backoff"}, "No matches found.", False),
        ("read_file", {"path": "docs/team.md"}, "# Team\nWho is on call this week.", False),
    )
    assert "rediscovered_knowledge" not in kinds


@pytest.mark.parametrize(
    "command",
    [
        "consul kv get -recurse arena/matchmaker/",
        "vault kv get secret/matchmaker",
        "etcdctl get /config/matchmaker --prefix",
    ],
)
def test_a_value_read_from_its_store_after_a_missing_file_is_a_lookup(command):
    kinds = _kinds(
        ("read_file", {"path": "config/matchmaker.toml"}, "Error: No such file or directory", True),
        ("bash", {"command": command}, "matchmaker/queue_timeout:45", False),
    )
    assert any(command in loc for loc in _located(kinds)), kinds


def test_a_passing_test_run_after_a_missing_file_is_not_a_lookup():
    kinds = _kinds(
        ("read_file", {"path": "src/matchmaker.py"}, "Error: No such file or directory", True),
        ("bash", {"command": "pytest tests/test_matchmaker.py"}, "3 passed", False),
    )
    assert "rediscovered_knowledge" not in kinds


@pytest.mark.parametrize(
    "tool, old, new, error",
    [
        ("case_search", "email=a@example.org", "subject_hash=3b7f0c9a", "403 policy: plaintext identifiers blocked"),
        ("ticket_search", "text:'refund' AND", "text:refund", "400 query syntax error near AND"),
    ],
)
def test_a_tools_search_asked_again_in_another_form_after_an_error_is_a_correction(tool, old, new, error):
    kinds = _kinds(
        (tool, {"query": old}, error, True),
        (tool, {"query": new}, "3 results", False),
    )
    assert [f["new"] for f in kinds.get("corrected_command", [])] == [f"{tool} {new}"], kinds


def test_a_shell_search_for_another_term_after_an_error_is_not_a_correction():
    kinds = _kinds(
        ("bash", {"command": "grep -P 'a(?=b' src"}, "grep: unmatched ( or \\(", True),
        ("bash", {"command": "grep -rn TODO src"}, "src/a.py:1: # TODO", False),
    )
    assert "corrected_command" not in kinds
