#!/usr/bin/env python
"""Benchmark: `manage.py import_sessions` throughput and peak memory, on PostgreSQL and SQLite.

    .venv/bin/python bench/import_sessions.py [--sessions 10000] [--runs 3] [--small 2500] [--write-docs]

Generates realistic sessions (memory.demo: 15-48 events, median ~26, ~4 KB a line) into a temporary .jsonl, then
for each backend runs, on a fresh database each time: migrate, create_team, and the measured
`manage.py import_sessions FILE --team bench` as a subprocess. Sessions/s is the file's session count divided by
the import process's wall time (Python and Django start-up included); peak RSS is that process's own maximum
resident set (os.wait4), so migrate and the benchmark itself are not counted. Reported: the median of the runs.
Memory flatness: one more import of a file a quarter as long, to compare peak RSS at --small vs --sessions.

PostgreSQL: a scratch database (dreamweb_bench_h1) is created and migrated by the owner role and dropped at the
end; the import runs as the application role, with row-level security in force, as in production.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory.demo import generate_sessions  # noqa: E402 - after the path is set; pure Python, no Django needed

PYTHON = sys.executable
PG_HOST = os.environ.get("BENCH_PG", "127.0.0.1:5432")
PG_DB = os.environ.get("BENCH_PG_DB", "dreamweb_bench_h1")
OWNER = os.environ.get("BENCH_PG_OWNER", "dreamweb_owner:dreamweb_owner")
APP = os.environ.get("BENCH_PG_APP", "dreamweb_app:dreamweb_app")
SECTION = "## Session import (`import_sessions`)"


def pg_url(creds: str, db: str) -> str:
    return f"postgres://{creds}@{PG_HOST}/{db}"


def write_file(path: Path, count: int) -> int:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with path.open("w") as fh:
        for doc in generate_sessions("bench", count, start=start):
            fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
    return path.stat().st_size


def manage(env: dict, *args: str) -> tuple[float, int, float, str]:
    """Run manage.py; return (wall seconds, peak RSS in KiB, CPU seconds of that very process, stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([PYTHON, "manage.py", *args], cwd=ROOT, env=env, stdout=out, stderr=err)
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN would mix in migrate and the earlier runs).
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{err.read()[-2000:]}")
        return elapsed, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, out.read()


def base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DATABASE_OWNER_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="dreamweb.settings", DEBUG="false")
    return env


class Postgres:
    name = "PostgreSQL"

    def __init__(self):
        self.db = ScratchDatabase(PG_DB, owner_url=pg_url(OWNER, PG_DB), app_url=pg_url(APP, PG_DB))

    def fresh(self) -> dict:
        env = base_env()
        app = {**env, "DATABASE_URL": self.db.create(env=env).app_url}
        manage(app, "create_team", "bench")
        return app

    def cleanup(self) -> None:
        self.db.drop()


class Sqlite:
    name = "SQLite"

    def __init__(self, tmp: Path):
        self.path = tmp / "bench.sqlite3"

    def fresh(self) -> dict:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        env = {**base_env(), "DATABASE_URL": f"sqlite:///{self.path}"}
        manage(env, "migrate", "--no-input", "-v0")
        manage(env, "create_team", "bench")
        return env

    def cleanup(self) -> None:
        self.path.unlink(missing_ok=True)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(backend, path: Path, count: int) -> tuple[float, int, float]:
    env = backend.fresh()
    seconds, rss, cpu, out = manage(env, "import_sessions", str(path), "--team", "bench")
    expected = f"imported {count}, unchanged 0, rejected 0"
    if out.strip() != expected:
        raise SystemExit(f"{backend.name}: unexpected summary {out.strip()!r} (wanted {expected!r})")
    return count / seconds, rss, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=2_500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--write-docs", action="store_true", help="Write the figures into docs/benchmarks.md.")
    args = parser.parse_args()

    results = {}
    with tempfile.TemporaryDirectory(prefix="dw-bench-") as tmp:
        tmp = Path(tmp)
        big, small = tmp / "big.jsonl", tmp / "small.jsonl"
        big_bytes = write_file(big, args.sessions)
        small_bytes = write_file(small, args.small)
        print(f"{args.sessions} sessions, {big_bytes / 1e6:.1f} MB; {args.small} sessions, {small_bytes / 1e6:.1f} MB")
        backends = []
        if args.backend in ("postgres", "both"):
            backends.append(Postgres())
        if args.backend in ("sqlite", "both"):
            backends.append(Sqlite(tmp))
        for backend in backends:
            try:
                rates, peaks, cpus, loads = [], [], [], []
                for i in range(args.runs):
                    before = load()
                    loads.append(os.getloadavg()[0])
                    rate, rss, cpu = measure(backend, big, args.sessions)
                    rates.append(rate)
                    peaks.append(rss)
                    cpus.append(cpu)
                    print(
                        f"  {backend.name} run {i + 1}: {rate:,.0f} sessions/s, peak RSS {rss / 1024:.0f} MiB, "
                        f"import process CPU {cpu:.1f} s (load average before: {before})"
                    )
                _, small_rss, _ = measure(backend, small, args.small)
                results[backend.name] = {
                    "rate": statistics.median(rates),
                    "rates": rates,
                    "rss": statistics.median(peaks),
                    "small_rss": small_rss,
                    "cpu_ms": 1000 * statistics.median(cpus) / args.sessions,
                    "loads": loads,
                }
                r = results[backend.name]
                print(
                    f"{backend.name}: median {r['rate']:,.0f} sessions/s; peak RSS {r['rss'] / 1024:.0f} MiB at "
                    f"{args.sessions}, {small_rss / 1024:.0f} MiB at {args.small}"
                )
            finally:
                backend.cleanup()
    if args.write_docs:
        write_docs(results, args, big_bytes)


def write_docs(results: dict, args, big_bytes: int) -> None:
    docs = ROOT / "docs" / "benchmarks.md"
    lines = [
        SECTION,
        "",
        f"`bench/import_sessions.py`: {args.sessions:,} generated sessions (memory.demo: 15-48 events, median ~26; "
        f"{big_bytes / 1e6:.0f} MB of JSON Lines) imported by `manage.py import_sessions` as a subprocess, on a fresh "
        f"database each run (PostgreSQL as the application role, row-level security on; SQLite in a temporary file). "
        f"Sessions/s: sessions in the file over the import process's wall time, start-up included; median of "
        f"{args.runs} runs. "
        f"Peak RSS: the import process's own maximum resident set.",
        "",
        "| backend | sessions/s (median) | runs "
        "| import process CPU per session (start-up included; not the server's) "
        f"| peak RSS at {args.sessions:,} "
        f"| peak RSS at {args.small:,} |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        runs = ", ".join(f"{x:,.0f}" for x in r["rates"])
        lines.append(
            f"| {name} | {r['rate']:,.0f} | {runs} | {r['cpu_ms']:.2f} ms | {r['rss'] / 1024:.0f} MiB "
            f"| {r['small_rss'] / 1024:.0f} MiB |"
        )
    loads = [x for r in results.values() for x in r["loads"]]
    lines += [
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}, PostgreSQL on the "
        f"same machine; measured {datetime.now(UTC):%Y-%m-%d} while other work shared the cores (1-minute load "
        f"average {min(loads):.1f} to {max(loads):.1f} at the start of the runs), so the wall-clock rates are "
        f"pessimistic; the import process's own CPU per session does not depend on that load.",
        "",
        "How: the file is read line by line and stored in batches of 500, one transaction each, by a writer thread "
        "while the next batch is parsed (at most three batches in memory, hence the flat peak RSS). On PostgreSQL a "
        "batch is one `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING RETURNING` with the columns bound "
        "server-side in binary; Django's `bulk_create` (UNNEST with client-side quoting of every JSON document) ran "
        "at about 225 sessions/s on the same machine (2,000 sessions, similar load).",
    ]
    wrapped = [line if line.startswith("|") else textwrap.fill(line, 120, break_on_hyphens=False) for line in lines]
    section = "\n".join(wrapped) + "\n"
    text = docs.read_text() if docs.exists() else "# Benchmarks\n\nFigures measured on this project's own machine.\n"
    if SECTION in text:
        head, rest = text.split(SECTION, 1)
        nxt = rest.find("\n## ")
        text = head + section + ("\n" + rest[nxt + 1 :] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    docs.write_text(text)
    print(f"wrote {docs.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
