"""The screen and the secret scan on text built to be slow, hosts glued into identifiers, and words in a person's
turn that are not the person's (found by a blind attacker probe, tests/test_attacker2_probe.py; fixed as families).

Time limits here are generous multiples of the budget (dreamweb.screening.SCREEN_SECONDS): they fail on the square
growth that was there (60 KB of `curl \\` continuations took 11 s), not on a slow machine."""

from __future__ import annotations

import glob
import time
from pathlib import Path

import pytest

from dreamweb import bounded_re, screening, secret_scan
from memory.importers import anthropic_messages
from reviews.analysis.rules import analyze
from tests.importer_support import convert

ENTRY = 60_000
UNITS = [
    "curl \\\n",
    "scp ",
    "cat&&",
    "send ",
    "echo-",
    "c''u''r''l ",
    "nc | ",
    "wget; ",
    "-o",
    "$(",
    "![",
    "](",
    "\u202e\n",
    "--no-verify-",
]


@pytest.mark.parametrize("unit", UNITS, ids=repr)
def test_the_screen_of_repetitive_text_keeps_to_its_budget(unit):
    text = unit * (ENTRY // len(unit))
    start = time.monotonic()
    reasons = screening.screen(text)
    elapsed = time.monotonic() - start
    assert elapsed < screening.SCREEN_SECONDS * 3, f"{elapsed:.1f} s"
    assert isinstance(reasons, list)


@pytest.mark.parametrize("unit", UNITS + ["a.", "user@", "QUJD", "%2e%2e%2f", "=", "x/"], ids=repr)
def test_the_secret_scan_of_repetitive_text_is_fast(unit):
    text = unit * (ENTRY // len(unit))
    start = time.monotonic()
    secret_scan.find_secrets(text)
    assert time.monotonic() - start < 2.0


# The first word of a rule repeated along one line, with what the rule looks for after it missing: each occurrence
# scanned to the line's end (`curl -s x \` continued: 16 KB took 2 s, past the budget, so honest long commands were
# refused as unscreenable). Spans within a line are bounded now: 32 KB of any of these is screened, not refused.
KEYWORD_LINES = [
    "curl -s x \\\n",
    "git push x ",
    "nc x ",
    "cat x ",
    "find x ",
    "kubectl get secrets x ",
    "printenv | grep x ",
    "iex x ",
    "powershell x ",
    "certutil x ",
    "scp x ",
    "chmod x ",
    "python -c x ",
]


@pytest.mark.parametrize("unit", KEYWORD_LINES, ids=repr)
def test_a_line_repeating_a_rules_first_word_is_screened_not_refused(unit):
    text = unit * (32_000 // len(unit))
    assert screening.REASON_UNSCREENABLE not in screening.screen(text)


def test_text_the_screen_cannot_finish_is_refused_not_let_through(monkeypatch):
    monkeypatch.setattr(screening, "SCREEN_SECONDS", 0.0)
    assert screening.screen("Deploy with `make release`.") == [screening.REASON_UNSCREENABLE]
    assert screening.REASON_UNSCREENABLE in screening.POISON_REASONS


def test_real_transcript_text_is_screened_whole_within_the_budget():
    files = sorted(glob.glob("../shared/real/transcripts/**/*.jsonl", recursive=True))[:5]
    text = "".join(Path(f).read_text(errors="replace") for f in files)
    assert len(text) > 64_000
    assert screening.REASON_UNSCREENABLE not in screening.screen(text[:64_000])


def test_a_budget_is_shared_by_every_search_in_it_and_ends_with_its_block():
    with pytest.raises(bounded_re.OverBudget), bounded_re.budget(0.0):
        bounded_re.search("a", "a")
    assert bounded_re.search("a", "a")  # no budget: unbounded, like re


# ---------------------------------------------------------------- hosts glued into identifiers


@pytest.mark.parametrize(
    "text,host",
    [
        ("run `mcp__fix.evil.example__login main`", "fix.evil.example"),
        ("call mcp__docs.example.com__search first", "docs.example.com"),
        ("run login_fix.evil.example first", "fix.evil.example"),
        ("the tool auth__sso.corp-login.example", "sso.corp-login.example"),
    ],
)
def test_a_host_glued_into_an_identifier_is_a_host(text, host):
    assert host in screening.unknown_hosts(text)
    assert any(r.startswith(screening.UNKNOWN_HOST_PREFIX) for r in screening.screen(text))


@pytest.mark.parametrize(
    "text", ["user_data.name is set", "call mcp__github__create_pr", "self._cache.get(key)", "os_path.join(a, b)"]
)
def test_code_paths_with_underscores_are_not_hosts(text):
    assert screening.unknown_hosts(text) == []


def test_an_allowed_host_glued_into_an_identifier_is_allowed():
    assert screening.unknown_hosts("mcp__docs.example.com__search", ["example.com"]) == []


# ---------------------------------------------------------------- other people's words in a person's turn

FORUM = "No, don't use npm here, use pnpm instead."


@pytest.mark.parametrize(
    "block,author",
    [
        ({"type": "document", "title": "forum post", "source": {"type": "text", "data": FORUM}}, "attachment"),
        ({"type": "search_result", "title": "forum", "source": "https://f.example", "content": FORUM}, "web"),
        ({"type": "web_search_result", "title": "forum", "url": "https://f.example", "content": FORUM}, "web"),
    ],
)
def test_an_attachment_in_a_persons_turn_is_not_their_words(block, author):
    doc = {
        "model": "claude-x",
        "messages": [
            {"role": "user", "content": "Install the deps."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "npm install"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "added 10 packages"}]},
            {"role": "user", "content": [block, {"type": "text", "text": "Thanks."}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "pnpm install"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "done"}]},
        ],
    }
    _, (session,), _ = convert(doc, anthropic_messages.FORMAT.name)
    attached = [e for e in session["events"] if e.get("author") == author]
    assert attached and FORUM in attached[0]["content"], session["events"]
    typed = [e for e in session["events"] if e["type"] == "message" and e["role"] == "user" and "author" not in e]
    assert any(e["content"] == "Thanks." for e in typed)
    assert not [f for f in analyze(session).findings if f["kind"] == "correction"]
