"""Dream quality end to end, exactly as ../shared/corpus/README.md runs it, through manage.py.

    .venv/bin/python bench/dream_quality.py [SCENARIO.json ...] [--postgres] [--render claude-code|codex]
                                            [--keep DIR] [--verbose]
    .venv/bin/python bench/dream_quality.py --analyzer openai --base-url URL --model NAME [--max-sessions N] ...

For each scenario (default: the shared dev-scenario.json): gen_corpus.py → a scratch database (a SQLite file; with
--postgres a scratch PostgreSQL database created and migrated by the owner role and used by the application role)
→ migrate → create_team / import_memory / import_sessions per team → dream --dry-run --all-sessions --format json
per team → score.py. Prints the scorer's summary line per scenario and the wall time of each step.

--analyzer openai runs the same cycle with the language-model analyzer against any OpenAI-compatible endpoint
(--base-url, --model; the key, if the endpoint needs one, from the environment variable --api-key-env names, never
from the command line), so a team can compare `rules` with its own model on the shared corpus and its variants.
The line then also names the analyzer and counts the sessions analysed and failed and the tokens spent; a run that
fell back to `rules` (an endpoint not configured) is an error, not a score. --max-sessions N reads at most N
sessions per team (a slow local model on the whole corpus takes hours; the score then covers only what was read).

--render writes each team's sessions as Claude Code or Codex files first (bench/render_corpus.py, one folder per
agent and task) and imports those folders (`import_sessions DIR --agent A --task T`, format by content): the score
must be the canonical corpus's.

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
from dataclasses import dataclass
from pathlib import Path

from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpus")
PY = sys.executable
BENCH_DB = ScratchDatabase("dreamweb_bench_quality")


def manage(env: dict, *args: str, stdout=None, live: bool = False) -> float:
    """Run manage.py; ``live`` lets its progress lines through to this terminal (a model's cycle takes long)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [PY, "manage.py", *args],
        cwd=ROOT,
        env=env,
        stdout=stdout or subprocess.PIPE,
        stderr=None if live else subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{(proc.stderr or '')[-3000:]}")
    return time.perf_counter() - started


@dataclass
class Analyzer:
    """Which analyzer the dreams use, and the environment that configures it."""

    name: str = "rules"
    base_url: str = ""
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    max_sessions: int = 0

    def configure(self, env: dict) -> None:
        if self.name != "openai":
            return
        env["OPENAI_BASE_URL"] = self.base_url
        env["DREAMWEB_LLM_MODEL"] = self.model
        # A local server needs no key; the analyzer then sends a placeholder.
        env["OPENAI_API_KEY"] = os.environ.get(self.api_key_env, "")

    def dream_args(self) -> list[str]:
        args = ["--analyzer", self.name]
        if self.max_sessions:
            args += ["--max-sessions", str(self.max_sessions)]
        return args


def import_rendered(env: dict, format: str, sessions: Path, out: Path, team: str) -> float:
    from render_corpus import render

    seconds = 0.0
    for (agent, task), folder in render(format, sessions, out).items():
        seconds += manage(
            env, "import_sessions", str(folder), "--team", team, "--agent", agent, *(["--task", task] if task else [])
        )
    return seconds


def run_scenario(
    scenario: Path,
    work: Path,
    *,
    postgres: bool,
    verbose: bool,
    analyzer: Analyzer | None = None,
    render: str | None = None,
) -> str:
    analyzer = analyzer or Analyzer()
    corpus = work / "corpus"
    subprocess.run([PY, str(CORPUS / "gen_corpus.py"), str(scenario), str(corpus)], check=True, capture_output=True)
    truth = json.loads((corpus / "truth.json").read_text())
    env = dict(os.environ)
    env.pop("REDIS_URL", None)  # a dry run always runs in-process; no broker needed
    analyzer.configure(env)
    if postgres:
        env["DATABASE_URL"] = BENCH_DB.create(env=env).app_url
    else:
        env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
        manage(env, "migrate", "-v0")
    times: dict[str, float] = {"import": 0.0, "dream": 0.0}
    outputs = []
    runs = []
    for team in truth["teams"]:
        memory = corpus / team / "memory.json"
        store = json.loads(memory.read_text()).get("store") or truth["teams"][team]["store"]
        times["import"] += manage(env, "create_team", team)
        times["import"] += manage(env, "import_memory", str(memory), "--team", team, "--store", store)
        if render:
            rendered = work / render / team
            times["import"] += import_rendered(env, render, corpus / team / "sessions.jsonl", rendered, team)
        else:
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
                *analyzer.dream_args(),
                stdout=fh,
                live=analyzer.name != "rules",
            )
        run = json.loads(out.read_text())["run"]  # exactly one JSON document on stdout
        if not run["analyzer"].startswith(analyzer.name):
            sys.exit(f"the dream of {team} used {run['analyzer']!r}, not {analyzer.name}: is the endpoint configured?")
        runs.append(run)
        outputs.append(f"{team}={out}")
    score = subprocess.run(
        [PY, str(CORPUS / "score.py"), str(corpus / "truth.json"), *outputs], capture_output=True, text=True, check=True
    )
    lines = score.stdout.strip().splitlines()
    if verbose:
        print("\n".join(lines[:-1]))
    db = ("PostgreSQL" if postgres else "SQLite") + (f", rendered as {render}" if render else "")
    sessions = sum(int(t.get("sessions") or 0) for t in truth["teams"].values())
    model = ""
    if analyzer.name != "rules":
        analysed = sum(r["sessions_analysed"] for r in runs)
        failed = sum(r.get("sessions_failed") or 0 for r in runs)
        tokens_in = sum((r.get("tokens") or {}).get("input") or 0 for r in runs)
        tokens_out = sum((r.get("tokens") or {}).get("output") or 0 for r in runs)
        model = f"{runs[0]['analyzer']}: {analysed} analysed, {failed} failed, tokens {tokens_in}+{tokens_out}; "
    print(
        f"{scenario.name} on {db}: {lines[-1]}  ({model}import {times['import']:.1f} s, dream {times['dream']:.1f} s"
        f"{f', {sessions} sessions' if sessions else ''})"
    )
    return lines[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--postgres", action="store_true", help="also run on a scratch PostgreSQL database")
    parser.add_argument("--keep", type=Path, help="keep the corpus, database and outputs in this directory")
    parser.add_argument("--verbose", action="store_true", help="print every line of the scorer")
    parser.add_argument("--analyzer", choices=["rules", "openai"], default="rules")
    parser.add_argument("--base-url", default="", help="the OpenAI-compatible endpoint (with --analyzer openai)")
    parser.add_argument("--model", default="", help="the model name to ask for (with --analyzer openai)")
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="the environment variable that holds the endpoint's key"
    )
    parser.add_argument("--max-sessions", type=int, default=0, help="read at most N sessions per team")
    parser.add_argument("--render", choices=["claude-code", "codex"], help="import the corpus written in this format")
    args = parser.parse_args()
    if args.analyzer == "openai" and not (args.base_url and args.model):
        parser.error("--analyzer openai needs --base-url and --model")
    analyzer = Analyzer(args.analyzer, args.base_url, args.model, args.api_key_env, args.max_sessions)
    scenarios = args.scenarios or [CORPUS / "dev-scenario.json"]
    for scenario in scenarios:
        for postgres in [False, True] if args.postgres else [False]:
            options = {"postgres": postgres, "verbose": args.verbose, "analyzer": analyzer, "render": args.render}
            if args.keep:
                work = args.keep / f"{scenario.stem}-{'pg' if postgres else 'sqlite'}"
                work.mkdir(parents=True, exist_ok=True)
                run_scenario(scenario, work, **options)
            else:
                with tempfile.TemporaryDirectory(prefix="dream-quality-") as tmp:
                    run_scenario(scenario, Path(tmp), **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
