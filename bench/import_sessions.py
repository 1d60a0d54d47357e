#!/usr/bin/env python
"""Benchmark: `manage.py import_sessions` throughput and peak memory, on PostgreSQL and SQLite, for the canonical
format and for Claude Code folders.

    .venv/bin/python bench/import_sessions.py [--sessions 10000] [--runs 3] [--small 2500] [--real-copies 4]
                                              [--backend postgres|sqlite|both] [--workloads canonical,claude-code,real]
                                              [--write-docs]

Workloads, each imported by `manage.py import_sessions PATH --team bench` in a subprocess (bench/import_child.py, which
times the command from inside, once Python and Django have started), on a fresh database each time:
* canonical: realistic generated sessions (demo data: 15-48 events, median ~26, ~4 KB a line) in one .jsonl;
* claude-code: the same sessions written as Claude Code transcripts (bench/render_corpus.py), one file a session, in
  one folder (format recognised by content);
* real: the 43 real Claude Code sessions of ../shared/real/transcripts/entire-cli (39 MB, 0.5-4 MB a file), copied
  --real-copies times under new session ids: large files, to show that memory stays flat.
Sessions/s is the sessions imported over the import process's wall time (Python and Django start-up included); MB/s
the input bytes over the same time; peak RSS is that process's own maximum resident set (os.wait4), so migrate and
the benchmark itself are not counted. Against the raw COPY (PostgreSQL), side by side: wall (the command's own time,
start-up excluded, against the COPY's) and CPU (the command's CPU, every thread, start-up excluded, and its server
backends', against the COPY backend's: in total, and overlapped, the longest of the parts that run at once: its process,
its server, its workers' share, at least all of it spread over the cores: critical_cpu). On a loaded machine the
wall ratio measures the scheduler as much as the code; the CPU ratios do not. Reported: the median of the runs.
Memory flatness: one more import of a workload a quarter as large (one copy for `real`), to compare peak RSS.

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
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from _procfs import process_cpu
from _raw_copy import file_chunks, raw_copy
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
CHILD = Path(__file__).resolve().parent / "import_child.py"
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


def manage(env: dict, *args: str, timed: bool = False) -> tuple[float, int, float, str, dict | None]:
    """Run manage.py; return (wall seconds, peak RSS in KiB, CPU seconds of that very process, stdout, and with
    ``timed`` the command's own {"wall", "cpu"} past start-up, from bench/import_child.py)."""
    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.NamedTemporaryFile("r", suffix=".json") as times,
    ):
        argv = [PYTHON, str(CHILD), times.name, *args] if timed else [PYTHON, "manage.py", *args]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=err)
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN would mix in migrate and the earlier runs).
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{err.read()[-2000:]}")
        own = json.loads(times.read()) if timed else None
        return elapsed, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, out.read(), own


def base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DATABASE_OWNER_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="dreamweb.settings", DEBUG="false")
    return env


class ServerCPU(threading.Thread):
    """Samples the CPU time of every PostgreSQL backend connected to the database (but the sampler's own) every
    50 ms while a command runs; ``seconds`` is the sum of each backend's last reading. What a backend spends in its
    last 50 ms is missed (a few ms a connection). PostgreSQL runs on this machine, so /proc shows its processes."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.done, self.last = url, threading.Event(), {}

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.is_set():
                pids = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend'"
                ).fetchall()
                for (pid,) in pids:
                    cpu = process_cpu(pid)
                    if cpu is not None:
                        first = self.last.setdefault(pid, (cpu, cpu))[0]
                        self.last[pid] = (first, cpu)
                self.done.wait(0.05)

    @property
    def seconds(self) -> float:
        return sum(last - first for first, last in self.last.values())


def input_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.jsonl") if p.is_file()) if path.is_dir() else [path]


class Postgres:
    name = "PostgreSQL"

    def __init__(self):
        self.db = ScratchDatabase(PG_DB, owner_url=pg_url(OWNER, PG_DB), app_url=pg_url(APP, PG_DB))

    def fresh(self) -> dict:
        env = base_env()
        app = {**env, "DATABASE_URL": self.db.create(env=env).app_url}
        manage(app, "create_team", "bench")
        return app

    def raw_copy(self, path: Path) -> tuple[float, float]:
        """Seconds to COPY every line of the input (a file, or every file of a folder) as it is into a bare table,
        in 1 MiB chunks, and its server backend's CPU seconds (bench/_raw_copy.py)."""
        return raw_copy(self.db.owner_url, file_chunks(input_files(path)))

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


def measure(backend, path: Path, count: int) -> dict:
    """One run on a fresh database: the raw COPY of the same input first (PostgreSQL), then the import, with the CPU
    of the import process and (PostgreSQL) of the server backends serving it."""
    env = backend.fresh()
    run: dict = {}
    if hasattr(backend, "raw_copy"):
        copy_s, run["raw_cpu"] = backend.raw_copy(path)
        run["raw"] = count / copy_s
    extra = ["--agent", "bench-agent"] if path.is_dir() else []
    sampler = ServerCPU(backend.db.owner_url) if hasattr(backend, "db") else None
    if sampler is not None:
        sampler.start()
    try:
        seconds, run["rss"], run["cpu"], out, own = manage(
            env, "import_sessions", str(path), "--team", "bench", *extra, timed=True
        )
    finally:
        if sampler is not None:
            sampler.done.set()
            sampler.join()
    run["server_cpu"] = sampler.seconds if sampler is not None else None
    expected = f"imported {count}, unchanged 0, rejected 0"
    if out.strip() != expected:
        raise SystemExit(f"{backend.name}: unexpected summary {out.strip()!r} (wanted {expected!r})")
    run["rate"] = count / seconds
    # The command's own time and CPU, from inside the process once Django was ready: start-up excluded by
    # measurement, not by subtracting another process's (which a loaded machine makes meaningless).
    run["own_wall"], run["client_cpu"] = own["wall"], own["cpu"]
    run["workers_cpu"] = own.get("workers_cpu", 0.0)  # of client_cpu: the processes converting a folder's files
    run["startup_wall"], run["startup_cpu"] = seconds - own["wall"], run["cpu"] - own["cpu"]
    if "raw" in run:
        run["ratio"] = (count / own["wall"]) / run["raw"]
        run["cpu_ratio"] = run["raw_cpu"] / (run["client_cpu"] + run["server_cpu"])
        run["overlap_ratio"] = run["raw_cpu"] / critical_cpu(run)
    return run


def critical_cpu(run: dict) -> float:
    """The CPU seconds an import needs on idle cores: the longest of its parts that run at once (its process, its
    server, and its worker processes, spread over the pool's workers as memory.importing.pool_size counts them), and
    no less than all of its CPU spread over the machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = run.get("workers_cpu", 0.0)
    parts = (run["client_cpu"] - workers, workers / min(cores, 4), run["server_cpu"])
    return max(*parts, (run["client_cpu"] + run["server_cpu"]) / cores)


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
                    runs, loads = [], []
                    for i in range(args.runs):
                        before = load()
                        loads.append(os.getloadavg()[0])
                        run = measure(backend, big, count)
                        runs.append(run)
                        vs_raw = ""
                        if "raw" in run:
                            vs_raw = (
                                f"; raw COPY {run['raw']:,.0f} sessions/s ({run['raw_cpu']:.2f} s server CPU); "
                                f"import/COPY: wall {run['ratio']:.2f} (the command's own {run['own_wall']:.1f} s), "
                                f"CPU {run['cpu_ratio']:.2f} in total, {run['overlap_ratio']:.2f} overlapped (import "
                                f"{run['client_cpu']:.2f} s past start-up, {run['workers_cpu']:.2f} s in workers, "
                                f"+ server {run['server_cpu']:.2f} s)"
                            )
                        print(
                            f"  {backend.name}, {LABELS[name]}, run {i + 1}: {run['rate']:,.0f} sessions/s, "
                            f"{run['rate'] * size / count / 1e6:,.1f} MB/s, peak RSS {run['rss'] / 1024:.0f} MiB, "
                            f"import process CPU {run['cpu']:.1f} s (start-up {run['startup_cpu']:.1f} s CPU, "
                            f"{run['startup_wall']:.1f} s wall){vs_raw} (load average before: {before})"
                        )
                    small_rss = measure(backend, small, small_count)["rss"]

                    def med(key, runs=runs):
                        values = [r[key] for r in runs if key in r]
                        return statistics.median(values) if values else None

                    r = results[(backend.name, name)] = {
                        "startup": med("startup_wall"),
                        "startup_cpu": med("startup_cpu"),
                        "raw": med("raw"),
                        "ratio": med("ratio"),
                        "cpu_ratio": med("cpu_ratio"),
                        "overlap_ratio": med("overlap_ratio"),
                        "client_cpu_ms": 1000 * med("client_cpu") / count,
                        "server_cpu_ms": 1000 * med("server_cpu") / count if med("server_cpu") else None,
                        "raw_cpu_ms": 1000 * med("raw_cpu") / count if med("raw_cpu") else None,
                        "rate": med("rate"),
                        "own_rate": count / med("own_wall"),
                        "rates": [r["rate"] for r in runs],
                        "mb_s": med("rate") * size / count / 1e6,
                        "rss": med("rss"),
                        "small_rss": small_rss,
                        "cpu_ms": 1000 * med("cpu") / count,
                        "loads": loads,
                        "sessions": count,
                        "small_sessions": small_count,
                        "bytes": size,
                    }
                    vs_raw = (
                        f"; raw COPY {r['raw']:,.0f} sessions/s; import/COPY: wall {r['ratio']:.2f} (start-up "
                        f"excluded), CPU {r['cpu_ratio']:.2f} in total, {r['overlap_ratio']:.2f} overlapped"
                        if r["raw"]
                        else ""
                    )
                    print(
                        f"{backend.name}, {LABELS[name]}: median {r['rate']:,.0f} sessions/s ({r['mb_s']:,.1f} MB/s), "
                        f"{r['own_rate']:,.0f} past start-up{vs_raw}; import CPU {r['client_cpu_ms']:.3f} ms a session "
                        f"past start-up; peak RSS {r['rss'] / 1024:.0f} MiB at {count:,} sessions, "
                        f"{small_rss / 1024:.0f} MiB at {small_count:,}"
                    )
            finally:
                backend.cleanup()
    if args.write_docs:
        write_docs(results, args)


def write_docs(results: dict, args) -> None:
    docs = ROOT / "docs" / "benchmarks.md"

    def opt(value, fmt):
        return "–" if value is None else format(value, fmt)

    lines = [
        SECTION,
        "",
        "`bench/import_sessions.py`: `manage.py import_sessions` in a subprocess that times the command from inside "
        "once Django is ready (bench/import_child.py), on a fresh database each run "
        "(PostgreSQL as the application role, row-level security on; SQLite in a temporary file), workloads: "
        f"{args.sessions:,} generated sessions (demo data: 15-48 events, median ~26) as one canonical JSON Lines "
        "file; the same sessions as Claude Code transcripts, one file a session in a folder (format recognised by "
        "content)"
        + (
            f"; and the 43 real Claude Code sessions of `entire-cli` (0.5-4 MB a file) copied {args.real_copies} "
            "times under new ids"
            if "real" in args.workloads
            else ""
        )
        + ". Sessions/s: sessions over the import process's wall time, start-up included; median "
        f"of {args.runs} runs. Raw COPY (PostgreSQL, the same run, the same fresh database, just before the "
        "import): every line of the same input, verbatim, into a bare table of one jsonb column over one "
        "connection, the server's own cost of receiving, parsing and writing that JSON. The wall-clock ratio "
        "compares the command's own time (start-up excluded, measured inside the process) with the COPY's. CPU: "
        "the import process's past its start-up (measured inside it), and the PostgreSQL backends' serving it "
        "(sampled from /proc every "
        "50 ms), against the COPY backend's: 'total' compares all CPU spent (a machine with no core to spare), "
        "'overlapped' the longest of the import's parts that run at once (its process parses while the server "
        "writes and, for a folder, worker processes convert files; at least all its CPU spread over the cores), "
        "so on idle cores the import takes about that long. The import's CPU includes its workers'. Peak RSS: the "
        "import process's own maximum resident set (its largest worker's if larger), at the full workload and at "
        "a quarter of it.",
        "",
        "| backend | workload | sessions | input | sessions/s (median) | runs | raw COPY sessions/s | import/COPY, "
        "wall (start-up excluded) | CPU per session: import, its server, COPY's server | COPY/import by CPU: total, "
        "overlapped | peak RSS | peak RSS, smaller input |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (backend, name), r in results.items():
        runs = ", ".join(f"{x:,.0f}" for x in r["rates"])
        ratio = f"{r['ratio']:.2f}" if r["raw"] else "–"
        cpu = (
            f"{r['client_cpu_ms']:.2f} ms, {opt(r['server_cpu_ms'], '.2f')} ms, {opt(r['raw_cpu_ms'], '.2f')} ms"
            if r["raw"]
            else f"{r['client_cpu_ms']:.2f} ms (in process)"
        )
        by_cpu = f"**{r['cpu_ratio']:.2f}**, **{r['overlap_ratio']:.2f}**" if r["raw"] else "–"
        lines.append(
            f"| {backend} | {LABELS[name]} | {r['sessions']:,} | {r['bytes'] / 1e6:,.0f} MB | {r['rate']:,.0f} "
            f"| {runs} | {opt(r['raw'], ',.0f')} | {ratio} | {cpu} | {by_cpu} | {r['rss'] / 1024:.0f} MiB "
            f"| {r['small_rss'] / 1024:.0f} MiB at {r['small_sessions']:,} |"
        )
    loads = [x for r in results.values() for x in r["loads"]]
    startups = sorted({f"{r['startup']:.1f} s ({r['startup_cpu']:.1f} s CPU)" for r in results.values()})
    lines += [
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}, PostgreSQL on the "
        f"same machine; measured {datetime.now(UTC):%Y-%m-%d} while other work shared the cores (1-minute load "
        f"average {min(loads):.1f} to {max(loads):.1f} at the start of the runs), so the wall-clock rates, and the "
        f"import's start-up ({', '.join(startups)}), are pessimistic and noisy; the CPU figures do not depend on "
        "that load.",
        "",
        "How: a file is read line by line (orjson; the standard parser for the rare text orjson would read "
        "differently, see dreamweb/input_guard.py) and its sessions stored in batches (500 sessions or 4 MB, "
        "whichever comes first), one transaction each, by a writer thread while the next batch is parsed (at most "
        "three batches in memory, hence the flat peak RSS); a folder's files are converted by worker processes, one a "
        "core, a few files a task, at most two tasks a worker in flight (memory.importing.convert_in_pool). On "
        "PostgreSQL a batch goes by COPY into a temporary "
        "staging table and one `INSERT ... SELECT ... ON CONFLICT DO NOTHING RETURNING` from it, in the team's "
        "row-level-security scope (memory.sessions._copy_and_insert); `bench/ingest_paths.py` measured that at "
        "about the raw COPY's own rate, where one `INSERT ... SELECT FROM unnest(...)` of arrays bound in binary "
        "(the previous path) ran at 0.7x of it. A Claude Code file is one session (plus its subagents) read line "
        "by line: its memory is that session's, whatever the folder's size.",
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
