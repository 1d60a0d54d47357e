"""Dream quality end to end, exactly as ../shared/corpus/README.md runs it, through manage.py.

    .venv/bin/python bench/dream_quality.py [SCENARIO.json ...] [--postgres] [--keep DIR] [--verbose]

For each scenario (default: the shared dev-scenario.json): gen_corpus.py → a scratch database (a SQLite file; with
--postgres a scratch PostgreSQL database created and migrated by the owner role and used by the application role)
→ migrate → create_team / import_memory / import_sessions per team → dream --dry-run --all-sessions --format json
per team → score.py. Prints the scorer's summary line per scenario and the wall time of each step.

--postgres uses DATABASE_OWNER_URL and DATABASE_URL from the environment (defaults: the local dreamweb roles) and
the database name dreamweb_bench_quality, which it drops and creates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpus")
PY = sys.executable
BENCH_DB = ScratchDatabase("dreamweb_bench_quality")


def manage(env: dict, *args: str, stdout=None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        [PY, "manage.py", *args], cwd=ROOT, env=env, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


def run_scenario(scenario: Path, work: Path, *, postgres: bool, verbose: bool) -> str:
    corpus = work / "corpus"
    subprocess.run([PY, str(CORPUS / "gen_corpus.py"), str(scenario), str(corpus)], check=True, capture_output=True)
    truth = json.loads((corpus / "truth.json").read_text())
    env = dict(os.environ)
    env.pop("REDIS_URL", None)  # a dry run always runs in-process; no broker needed
    if postgres:
        env["DATABASE_URL"] = BENCH_DB.create(env=env).app_url
    else:
        env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
        manage(env, "migrate", "-v0")
    times: dict[str, float] = {"import": 0.0, "dream": 0.0}
    outputs = []
    for team in truth["teams"]:
        memory = corpus / team / "memory.json"
        store = json.loads(memory.read_text()).get("store") or truth["teams"][team]["store"]
        times["import"] += manage(env, "create_team", team)
        times["import"] += manage(env, "import_memory", str(memory), "--team", team, "--store", store)
        times["import"] += manage(env, "import_sessions", str(corpus / team / "sessions.jsonl"), "--team", team)
        out = work / f"{team}.json"
        with out.open("w") as fh:
            times["dream"] += manage(
                env,
                "dream",
                "--team",
                team,
                "--store",
                store,
                "--dry-run",
                "--all-sessions",
                "--format",
                "json",
                stdout=fh,
            )
        json.loads(out.read_text())  # exactly one JSON document on stdout
        outputs.append(f"{team}={out}")
    score = subprocess.run(
        [PY, str(CORPUS / "score.py"), str(corpus / "truth.json"), *outputs], capture_output=True, text=True, check=True
    )
    lines = score.stdout.strip().splitlines()
    if verbose:
        print("\n".join(lines[:-1]))
    db = "PostgreSQL" if postgres else "SQLite"
    sessions = sum(int(t.get("sessions") or 0) for t in truth["teams"].values())
    print(
        f"{scenario.name} on {db}: {lines[-1]}  (import {times['import']:.1f} s, dream {times['dream']:.1f} s"
        f"{f', {sessions} sessions' if sessions else ''})"
    )
    return lines[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--postgres", action="store_true", help="also run on a scratch PostgreSQL database")
    parser.add_argument("--keep", type=Path, help="keep the corpus, database and outputs in this directory")
    parser.add_argument("--verbose", action="store_true", help="print every line of the scorer")
    args = parser.parse_args()
    scenarios = args.scenarios or [CORPUS / "dev-scenario.json"]
    for scenario in scenarios:
        for postgres in [False, True] if args.postgres else [False]:
            if args.keep:
                work = args.keep / f"{scenario.stem}-{'pg' if postgres else 'sqlite'}"
                work.mkdir(parents=True, exist_ok=True)
                run_scenario(scenario, work, postgres=postgres, verbose=args.verbose)
            else:
                with tempfile.TemporaryDirectory(prefix="dream-quality-") as tmp:
                    run_scenario(scenario, Path(tmp), postgres=postgres, verbose=args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
