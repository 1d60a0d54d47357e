"""No regular expression of the project takes exponential time on text an agent can send (tests/regex_sweep.py):
every pattern compiled while the analysis, the importers, the secret scan and the screen read a corpus is tried on
runs of small units with a failing tail. A nested quantifier in the secret scan made one 60-session corpus take
55 s to read (a 30-letter word then a capital and a digit), and one in the command normaliser doubled its time with
each `a=` after `export`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reviews.analysis.normalize import normalize_command

ROOT = Path(__file__).resolve().parent.parent


def test_no_pattern_backtracks_exponentially():
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.regex_sweep"], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        raise AssertionError("a pattern never returned: " + (out.strip().splitlines() or ["?"])[-1]) from None
    slow = [line for line in proc.stdout.splitlines() if line.startswith("SLOW")]
    assert proc.returncode == 0 and not slow, slow or proc.stderr[-2000:]
    assert "checked" in proc.stdout.splitlines()[-1]


def test_exported_variables_are_still_read_as_the_command_they_prefix():
    """The rewritten `export …` pattern reads what the old one read: one or more assignments, then && or ;."""
    assert normalize_command("export A=1 B=2 && make test") == "a=1 b=2 make test"
    assert normalize_command("export A=1 B=2; make test") == "a=1 b=2 make test"
    assert normalize_command("set NODE_ENV=prod && npm run build") == "node_env=prod npm run build"
    assert normalize_command("export A=x=y && make") == "a=x=y make"
    assert normalize_command("export A=1 make test") == "export a=1 make test"  # no && or ;: not a prefix
