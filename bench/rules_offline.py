"""Offline quality of the `rules` analyzer + aggregation, without a database.

    .venv/bin/python bench/rules_offline.py [SCENARIO.json ...] [--render claude-code|codex] [--keep DIR] [--verbose]

For each scenario: run the shared corpus generator into a temp dir, analyse every session with rules.analyze,
aggregate per team (memory from memory.json, min_sessions=3), write dream-output JSON per team
(contracts/dream-output.schema.json, status "preview") and run the shared scorer. Prints the scorer's summary line
per scenario (with --verbose, every line of it). Default scenario: the shared dev-scenario.json.

With --render, the sessions are first written as Claude Code or Codex files (bench/render_corpus.py) and read back
by the importers (memory.importers, by content, one folder per agent and task as `import_sessions DIR --agent A
--task T` would): the score must be the canonical corpus's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reviews.analysis import aggregate as agg  # noqa: E402
from reviews.analysis import rules  # noqa: E402
from reviews.analysis.findings import SessionFindings  # noqa: E402

CORPUS = Path("/work/shared/corpus")
if not CORPUS.exists():
    CORPUS = ROOT.parent / "shared" / "corpus"


def memory_dicts(memory_file: Path) -> list[dict]:
    data = json.loads(memory_file.read_text())
    out = []
    for e in data.get("entries", []):
        scope = e.get("scope") or {}
        out.append(
            {
                "key": e["key"],
                "content": e["content"],
                "content_hash": hashlib.sha256(e["content"].encode()).hexdigest(),
                "scope_agent": scope.get("agent"),
                "scope_task": scope.get("task"),
                "origin": "import",
            }
        )
    return out


def canonical_sessions(team_dir: Path):
    with open(team_dir / "sessions.jsonl") as fh:
        for line in fh:
            yield json.loads(line)


def rendered_sessions(team_dir: Path, format: str):
    """The team's sessions written as `format` files and imported back, folder by folder."""
    import django

    sys.path.insert(0, str(ROOT / "bench"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    django.setup()
    from render_corpus import render

    from memory.importers import Options, Source
    from memory.importers import read as read_file

    folders = render(format, team_dir / "sessions.jsonl", team_dir / format)
    for (agent, task), folder in sorted(folders.items(), key=lambda kv: str(kv[0])):
        for path in sorted(folder.iterdir()):
            with path.open("rb") as fh:
                found, items = read_file(Source(fh, str(path)), "auto", Options(agent=agent, task=task))
                assert found.name == format, (path, found.name)
                for item in items:
                    assert item.doc is not None, (path, item)
                    yield item.doc


def _epoch(stamp) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() if stamp else 0.0
    except ValueError:
        return 0.0


def dream_team(team_dir: Path, store: str, render: str | None = None) -> tuple[dict, float]:
    t0 = time.perf_counter()
    sessions = []
    docs = rendered_sessions(team_dir, render) if render else canonical_sessions(team_dir)
    for i, doc in enumerate(docs):
        res = rules.analyze(doc)
        # When each session started, as the dream reads it from the stored session (drift: a lesson later sessions
        # overturn gives way to theirs).
        started = _epoch(doc.get("started_at"))
        sessions.append(
            SessionFindings(i + 1, doc["external_id"], doc["agent"], doc.get("task"), res.findings, started=started)
        )
    result = agg.aggregate(
        sessions, sessions_analysed=len(sessions), memory=memory_dicts(team_dir / "memory.json"), min_sessions=3
    )
    seconds = time.perf_counter() - t0
    proposals = []
    for i, d in enumerate(result.proposals):
        proposals.append(
            {
                "id": f"p{i + 1}",
                "operation": d.operation,
                "target_kind": d.target_kind,
                "targets": d.targets,
                "content": d.content,
                "scope": {"agent": d.scope_agent, "task": d.scope_task},
                "kind": d.kind,
                "rationale": d.rationale,
                "prevalence": {"sessions": d.prevalence_sessions, "of": d.prevalence_of},
                "supporting_sessions": d.supporting_sessions,
                "confidence": d.confidence,
                "risk": d.risk,
                "risk_reasons": d.risk_reasons,
                "status": "preview",
            }
        )
    out = {
        "store": store,
        "run": {
            "id": None,
            "analyzer": "rules",
            "sessions_selected": len(sessions),
            "sessions_analysed": len(sessions),
            "sessions_failed": 0,
            "tokens": {"input": 0, "output": 0},
            "seconds": round(seconds, 3),
        },
        "proposals": proposals,
        "isolated": result.isolated,
    }
    return out, seconds


def run_scenario(scenario: Path, workdir: Path, verbose: bool = False, render: str | None = None) -> str:
    corpus = workdir / "corpus"
    subprocess.run(
        [sys.executable, str(CORPUS / "gen_corpus.py"), str(scenario), str(corpus)], check=True, capture_output=True
    )
    truth = json.loads((corpus / "truth.json").read_text())
    args = []
    for team, t in truth["teams"].items():
        out, _ = dream_team(corpus / team, t["store"], render)
        path = workdir / f"{team}.json"
        path.write_text(json.dumps(out, indent=2))
        args.append(f"{team}={path}")
    proc = subprocess.run(
        [sys.executable, str(CORPUS / "score.py"), str(corpus / "truth.json"), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    lines = proc.stdout.strip().splitlines()
    if verbose:
        print("\n".join(lines[:-1]))
    return lines[-1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", type=Path)
    ap.add_argument("--keep", type=Path, help="write corpus and outputs here instead of a temp dir")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--render", choices=["claude-code", "codex"], help="dream over the corpus written in this format")
    ns = ap.parse_args()
    scenarios = ns.scenarios or [CORPUS / "dev-scenario.json"]
    for sc in scenarios:
        if ns.keep:
            wd = ns.keep / sc.stem
            wd.mkdir(parents=True, exist_ok=True)
            line = run_scenario(sc, wd, ns.verbose, ns.render)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                line = run_scenario(sc, Path(tmp), ns.verbose, ns.render)
        print(f"{sc.name}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
