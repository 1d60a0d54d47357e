"""The corpus rendered as Claude Code and Codex files (bench/render_corpus.py), imported back by content, dreams
with the very scores of the canonical corpus: the rendering is faithful to the real formats, and the import maps
every shape back to the signals the analysis reads. Offline (bench/rules_offline.py), for the dev scenario, every
variant and every blind scenario."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from rules_offline import CORPUS, run_scenario  # noqa: E402

SCENARIOS = [
    CORPUS / "dev-scenario.json",
    *sorted((ROOT / "tests" / "data").glob("scenario-variant*.json")),
    *sorted((ROOT / "tests" / "data" / "blind").glob("scenario-blind-*.json")),
]

pytestmark = pytest.mark.skipif(not (CORPUS / "score.py").exists(), reason="shared corpus tools not available")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_rendered_corpora_dream_with_the_canonical_scores(scenario, tmp_path):
    canonical = run_scenario(scenario, tmp_path / "canonical")
    assert "violations=0" in canonical
    for format in ("claude-code", "codex"):
        assert run_scenario(scenario, tmp_path / format, render=format) == canonical, format
