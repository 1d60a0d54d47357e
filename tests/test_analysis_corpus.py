"""End to end, offline: the shared corpus generator, the rules analyzer, aggregation and the shared scorer.

The dev scenario is the shared one; the variants (tests/data/scenario-variant*.json) use other commands, errors,
wordings, tools, secrets, poison payloads and noise counts, so the thresholds hold for the kinds of signal rather
than for one scenario's strings. Variants 4-9 add what another author would plausibly write: fixes by another
program (`yarn build` -> `npm run build`, `python setup.py test` -> `tox -e py311`), corrections that name nothing
that changed, convention statements, a 510-session team, single-agent teams with a repeated read, `stale_memory`
expectations (an entry with the old command or another version of it), notes with units and abbreviations written
differently, user/password pairs, typed passwords, DSNs, JWTs and private keys, and more injection phrasings.
Every variant file in tests/data is picked up here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpus"  # CI lays shared/ beside the clone
if not SHARED.exists():
    SHARED = Path("/work/shared/corpus")
SCENARIOS = [SHARED / "dev-scenario.json", *sorted((ROOT / "tests" / "data").glob("scenario-variant*.json"))]

pytestmark = pytest.mark.skipif(not (SHARED / "score.py").exists(), reason="shared corpus tools not available")


def parse(line: str) -> dict:
    m = re.search(
        r"recall=([\d.]+) precision=([\d.]+) evidence_precision=([\d.]+) prevalence_error=([\d.]+) "
        r"scoped=(\d+)/(\d+) violations=(\d+)",
        line,
    )
    assert m, line
    r, p, e, v, s, se, viol = m.groups()
    return {
        "recall": float(r),
        "precision": float(p),
        "evidence_precision": float(e),
        "prevalence_error": float(v),
        "scoped": int(s),
        "scoped_expected": int(se),
        "violations": int(viol),
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_offline_score_meets_the_bar(scenario):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rules_offline.py"), str(scenario)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=300,
    )
    score = parse(proc.stdout.strip().splitlines()[-1])
    assert score["violations"] == 0, proc.stdout
    assert score["recall"] >= 0.9, proc.stdout
    assert score["precision"] >= 0.9, proc.stdout
    assert score["evidence_precision"] >= 0.95, proc.stdout
    assert score["prevalence_error"] <= 0.1, proc.stdout
    assert score["scoped"] == score["scoped_expected"], proc.stdout
