"""bench/replay.py stays working: a small replay (scripted agents, context from the real API, two rounds around a
dream) on its own scratch SQLite database, in a subprocess as a person runs it. The loop must cut the planted
mistakes, the computed figures must match the simulation's counts, and the useless entry must be proposed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_replay_bench_shows_the_loop_works():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_OWNER_URL", "REDIS_URL")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "replay.py"), "--sessions", "12", "--offline", "0.25"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    m = re.fullmatch(r"repeat_before=([\d.]+) repeat_after=([\d.]+) useless_removed=(yes|no)", lines[-1])
    assert m, lines[-1]
    before, after = float(m[1]), float(m[2])
    assert before >= 0.75 and after <= before * 0.5 and m[3] == "yes"
    # Each lesson's computed counts are the simulation's truth.
    figures = [ln for ln in lines if "computed:" in ln]
    assert len(figures) == 3
    for ln in figures:
        computed = re.search(r"computed: served (\d+/\d+), not served (\d+/\d+)", ln).groups()
        truth = re.search(r"truth: served (\d+/\d+), not served (\d+/\d+)", ln).groups()
        assert computed == truth, ln
