#!/usr/bin/env python
"""Benchmark: `manage.py import_sessions` throughput and peak memory, on PostgreSQL and SQLite, for the canonical
format and for Claude Code folders.

    .venv/bin/python bench/import_sessions.py [--sessions 10000] [--runs 3] [--small 2500] [--real-copies 4]
                                              [--backend postgres|sqlite|both] [--workloads canonical,claude-code,real]
                                              [--write-docs]

Workloads, each imported by `manage.py import_sessions PATH --team bench` as a subprocess, on a fresh database each
time:
* canonical: realistic generated sessions (demo data: 15-48 events, median ~26, ~4 KB a line) in one .jsonl;
* claude-code: the same sessions written as Claude Code transcripts (bench/render_corpus.py), one file a session, in
  one folder (format recognised by content);
* real: the 43 real Claude Code sessions of ../shared/real/transcripts/entire-cli (39 MB, 0.5-4 MB a file), copied
  --real-copies times under new session ids: large files, to show that memory stays flat.
Sessions/s is the sessions imported over the import process's wall time (Python and Django start-up included); MB/s
the input bytes over the same time; peak RSS is that process's own maximum resident set (os.wait4), so migrate and
the benchmark itself are not counted. Reported: the median of the runs. Memory flatness: one more import of a
workload a quarter as large (one copy for `real`), to compare peak RSS.

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
import uuid
from datetime import UTC, datetime
from pathlib import Path

from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
try:  # pure Python, no Django needed
    from demo.data import generate_sessions  # noqa: E402
except ImportError:  # before demo data had an app of its own
    from memory.demo import generate_sessions  # noqa: E402
from render_corpus import ClaudeCodeFile  # noqa: E402

REAL = ROOT.parent / "shared" / "real" / "transcripts" / "entire-cli" / "claude-code"
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts/entire-cli/claude-code")

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


def write_claude_code_folder(folder: Path, count: int) -> int:
    """The same generated sessions as write_file, as Claude Code transcripts: one file a session."""
    folder.mkdir()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    size = 0
    for doc in generate_sessions("bench", count, start=start):
        path = folder / f"{doc['external_id']}.jsonl"
        with path.open("w") as fh:
            for line in ClaudeCodeFile(doc).render():
                fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        size += path.stat().st_size
    return size


def write_real_copies(folder: Path, copies: int) -> tuple[int, int]:
    """(sessions, bytes): the real Claude Code files, each copied under new session ids."""
    folder.mkdir()
    sessions = size = 0
    for path in sorted(REAL.glob("*.jsonl")):
        data = path.read_bytes()
        old = path.stem.encode()
        for k in range(copies):
            new = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{path.stem}/{k}")).encode()
            (folder / f"{new.decode()}.jsonl").write_bytes(data.replace(old, new))
            sessions += 1
            size += len(data)
    return sessions, size


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
    extra = ["--agent", "bench-agent"] if path.is_dir() else []
    seconds, rss, cpu, out = manage(env, "import_sessions", str(path), "--team", "bench", *extra)
    expected = f"imported {count}, unchanged 0, rejected 0"
    if out.strip() != expected:
        raise SystemExit(f"{backend.name}: unexpected summary {out.strip()!r} (wanted {expected!r})")
    return count / seconds, rss, cpu


LABELS = {
    "canonical": "canonical JSON Lines",
    "claude-code": "Claude Code folder (the same sessions)",
    "real": "Claude Code folder (real entire-cli files)",
}


def prepare(tmp: Path, args) -> dict[str, dict]:
    """Each workload's big and small input: {name: {"big": (path, sessions, bytes), "small": (...)}}."""
    work: dict[str, dict] = {}
    for name in args.workloads:
        if name == "canonical":
            big, small = tmp / "big.jsonl", tmp / "small.jsonl"
            work[name] = {
                "big": (big, args.sessions, write_file(big, args.sessions)),
                "small": (small, args.small, write_file(small, args.small)),
            }
        elif name == "claude-code":
            big, small = tmp / "cc-big", tmp / "cc-small"
            work[name] = {
                "big": (big, args.sessions, write_claude_code_folder(big, args.sessions)),
                "small": (small, args.small, write_claude_code_folder(small, args.small)),
            }
        elif name == "real":
            big, small = tmp / "real-big", tmp / "real-small"
            work[name] = {
                "big": (big, *write_real_copies(big, args.real_copies)),
                "small": (small, *write_real_copies(small, 1)),
            }
    for name, w in work.items():
        (_, n, size), (_, n_small, size_small) = w["big"], w["small"]
        print(f"{LABELS[name]}: {n} sessions, {size / 1e6:.1f} MB; {n_small} sessions, {size_small / 1e6:.1f} MB")
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=2_500)
    parser.add_argument("--real-copies", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument(
        "--workloads", type=lambda v: [w for w in v.split(",") if w], default=["canonical", "claude-code", "real"]
    )
    parser.add_argument("--write-docs", action="store_true", help="Write the figures into docs/benchmarks.md.")
    args = parser.parse_args()
    unknown = set(args.workloads) - set(LABELS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))} (known: {', '.join(LABELS)})")

    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="dw-bench-") as tmp:
        work = prepare(Path(tmp), args)
        backends = []
        if args.backend in ("postgres", "both"):
            backends.append(Postgres())
        if args.backend in ("sqlite", "both"):
            backends.append(Sqlite(Path(tmp)))
        for backend in backends:
            try:
                for name, w in work.items():
                    (big, count, size), (small, small_count, _) = w["big"], w["small"]
                    rates, peaks, cpus, loads = [], [], [], []
                    for i in range(args.runs):
                        before = load()
                        loads.append(os.getloadavg()[0])
                        rate, rss, cpu = measure(backend, big, count)
                        rates.append(rate)
                        peaks.append(rss)
                        cpus.append(cpu)
                        print(
                            f"  {backend.name}, {LABELS[name]}, run {i + 1}: {rate:,.0f} sessions/s, "
                            f"{rate * size / count / 1e6:,.1f} MB/s, peak RSS {rss / 1024:.0f} MiB, import process CPU "
                            f"{cpu:.1f} s (load average before: {before})"
                        )
                    _, small_rss, _ = measure(backend, small, small_count)
                    r = results[(backend.name, name)] = {
                        "rate": statistics.median(rates),
                        "rates": rates,
                        "mb_s": statistics.median(rates) * size / count / 1e6,
                        "rss": statistics.median(peaks),
                        "small_rss": small_rss,
                        "cpu_ms": 1000 * statistics.median(cpus) / count,
                        "loads": loads,
                        "sessions": count,
                        "small_sessions": small_count,
                        "bytes": size,
                    }
                    print(
                        f"{backend.name}, {LABELS[name]}: median {r['rate']:,.0f} sessions/s ({r['mb_s']:,.1f} MB/s); "
                        f"peak RSS {r['rss'] / 1024:.0f} MiB at {count:,} sessions, {small_rss / 1024:.0f} MiB at "
                        f"{small_count:,}"
                    )
            finally:
                backend.cleanup()
    if args.write_docs:
        write_docs(results, args)


def write_docs(results: dict, args) -> None:
    docs = ROOT / "docs" / "benchmarks.md"
    lines = [
        SECTION,
        "",
        "`bench/import_sessions.py`: `manage.py import_sessions` as a subprocess, on a fresh database each run "
        "(PostgreSQL as the application role, row-level security on; SQLite in a temporary file), three workloads: "
        f"{args.sessions:,} generated sessions (demo data: 15-48 events, median ~26) as one canonical JSON Lines "
        "file; the same sessions as Claude Code transcripts, one file a session in a folder (format recognised by "
        f"content); and the 43 real Claude Code sessions of `entire-cli` (0.5-4 MB a file) copied {args.real_copies} "
        "times under new ids. Sessions/s: sessions over the import process's wall time, start-up included; median "
        f"of {args.runs} runs. MB/s: input bytes over the same time. Peak RSS: the import process's own maximum "
        "resident set, at the full workload and at a quarter of it (one copy for the real files).",
        "",
        "| backend | workload | sessions | input | sessions/s (median) | MB/s | runs "
        "| import process CPU per session (start-up included; not the server's) | peak RSS | peak RSS, smaller input |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (backend, name), r in results.items():
        runs = ", ".join(f"{x:,.0f}" for x in r["rates"])
        lines.append(
            f"| {backend} | {LABELS[name]} | {r['sessions']:,} | {r['bytes'] / 1e6:,.0f} MB | {r['rate']:,.0f} "
            f"| {r['mb_s']:,.1f} | {runs} | {r['cpu_ms']:.2f} ms | {r['rss'] / 1024:.0f} MiB "
            f"| {r['small_rss'] / 1024:.0f} MiB at {r['small_sessions']:,} |"
        )
    loads = [x for r in results.values() for x in r["loads"]]
    lines += [
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}, PostgreSQL on the "
        f"same machine; measured {datetime.now(UTC):%Y-%m-%d} while other work shared the cores (1-minute load "
        f"average {min(loads):.1f} to {max(loads):.1f} at the start of the runs), so the wall-clock rates are "
        f"pessimistic; the import process's own CPU per session does not depend on that load.",
        "",
        "How: a file is read line by line and its sessions stored in batches (500 sessions or 4 MB, whichever comes "
        "first), one transaction each, by a writer thread while the next batch is parsed (at most three batches in "
        "memory, hence the flat peak RSS). On PostgreSQL a batch is one `INSERT ... SELECT FROM unnest(...) ON "
        "CONFLICT DO NOTHING RETURNING` with the columns bound server-side in binary; Django's `bulk_create` (UNNEST "
        "with client-side quoting of every JSON document) ran at about 225 sessions/s on the same machine (2,000 "
        "sessions, similar load). A Claude Code file is one session (plus its subagents) read line by line: its "
        "memory is that session's, whatever the folder's size.",
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
