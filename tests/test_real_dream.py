"""A `rules` dream over the real transcripts of ../shared/real/transcripts (bench/real_dream.py, offline): the
kinds of lesson that really recur in the 45 entire-cli sessions are proposed, and none of the junk kinds of issue 10
(home paths and account names, routine reads, exec headers, polls, agents' prompts as a person's words, unrelated
steps paired as "use X instead of Y") is, there or in the 8 single files copied under new ids."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from real_dream import REAL, copies, dream, junk, sessions_of, users_of  # noqa: E402

pytestmark = pytest.mark.skipif(not (REAL / "entire-cli").exists(), reason="shared real transcripts not available")


def _dream(dirs, n=1):
    docs = sessions_of(dirs)
    prompts = [e["content"] for d in docs for e in d["events"] if e.get("author") == "agent"]
    out = dream(copies(docs, n), min_sessions=3)
    return out, {i: junk(p, users_of(docs), prompts) for i, p in enumerate(out["proposals"])}


def test_entire_cli_dream_proposes_the_recurring_kinds_and_no_junk():
    out, bad = _dream([REAL / "entire-cli"])
    assert out["sessions"] == 45
    assert not any(bad.values()), bad
    texts = [p["content"] for p in out["proposals"]]
    assert any("(nilerr)" in t for t in texts)  # a lint rule failing in session after session
    assert sum("`mise run lint` reports" in t for t in texts) >= 3  # and other rules of the same check
    # a rule listed late in a long report, and a check passing again first in an `&&` chain, still count
    assert any("(wrapcheck)" in t and "sig:" not in t for t in texts)
    # the person asking for the same addition once the work was done, in several sessions and other words
    assert any(
        t.startswith("In ") and "the person had to ask for it once the work was done: add tests" in t for t in texts
    )
    assert any("File has not been read yet" in t and "`Read` on the same target" in t for t in texts)
    assert any("Found 2 matches of the string to replace" in t and "more context" in t for t in texts)
    assert not any(t.lstrip().startswith("Use `Edit") for t in texts)
    assert any(t.startswith("Paths were guessed and not there: `Read`") for t in texts)


def test_single_real_files_copied_under_new_ids_dream_with_no_junk():
    out, bad = _dream([REAL / "claude-code", REAL / "codex"], n=4)
    assert out["proposals"] and not any(bad.values()), bad
