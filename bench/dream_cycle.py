"""A 10,000-session dream cycle with the rules analyzer on PostgreSQL: time, peak memory, and the speed-up from one
to two Celery worker processes on Redis.

    .venv/bin/python bench/dream_cycle.py [--sessions 10000] [--repeat 3] [--skip-workers] [--aggregate] [--beside N]

1. A scratch database (dreamweb_bench_cycle, created and migrated by the owner role, used by the application role)
   gets N sessions: the shared dev corpus's sessions of team acme, replicated with new external ids and times, so
   the planted patterns recur at the same rates; and the corpus's memory.
2. In-process cycle (no broker, tasks eager) of `manage.py dream --all-sessions --max-sessions N` in a child process:
   wall time of the command and its peak RSS (ru_maxrss), median of --repeat runs. Proposals are deleted between
   runs so that each run stores its proposals again.
3. The same cycle through the queue (REDIS_URL=redis://127.0.0.1:6379/2, flushed first) with one, then two worker
   processes (`celery worker --concurrency=1` each, started and ready before timing): the run's own time
   (started_at → finished_at), median of --repeat runs, and the ratio. Each round runs in-process, one worker and
   two workers one after the other (interleaved), so the three see the same machine.
4. With --aggregate, bench/aggregate_scaling.py (aggregation alone at 1k / 10k / 100k findings) if present.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpus")
PY = sys.executable
# Kept after the run, so that --skip-setup can measure again without loading the sessions again.
DB = ScratchDatabase(os.environ.get("BENCH_CYCLE_DB", "dreamweb_bench_cycle"))  # another name: two runs at once
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2")  # flushed first


def base_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DREAMWEB_TEST_DB_NAME")}
    env.update({"DATABASE_URL": DB.app_url, "PYTHONUNBUFFERED": "1", **extra})
    return env


def setup(n: int) -> None:
    DB.create(env=base_env())
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [PY, str(CORPUS / "gen_corpus.py"), str(CORPUS / "dev-scenario.json"), tmp], check=True, capture_output=True
        )
        subprocess.run([PY, __file__, "--child-load", tmp, "--sessions", str(n)], cwd=ROOT, env=base_env(), check=True)


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    import django

    django.setup()


def child_load(corpus: Path, n: int) -> None:
    """Team acme, store acme-eng with the corpus memory, and n sessions replicated from the corpus."""
    django_setup()
    from datetime import datetime, timedelta

    from dreamweb import rls
    from dreamweb.provenance import Author
    from dreamweb.services import create_team
    from memory.models import MemoryStore
    from memory.services import create_entry
    from memory.sessions import store_batch, validate_session

    team, _ = create_team("acme", "Acme")
    memory = json.loads((corpus / "acme" / "memory.json").read_text())
    base = [json.loads(line) for line in (corpus / "acme" / "sessions.jsonl").read_text().splitlines() if line]
    start = datetime(2025, 1, 1)
    with rls.team_scope(team.pk):
        store = MemoryStore.objects.create(team=team, slug="acme-eng")
        for e in memory["entries"]:
            scope = e.get("scope") or {}
            create_entry(
                store,
                key=e["key"],
                content=e["content"],
                author=Author.system(),
                scope_agent=scope.get("agent"),
                scope_task=scope.get("task"),
            )
    batch = []
    for i in range(n):
        doc = dict(base[i % len(base)])
        doc["external_id"] = f"{doc['external_id']}-r{i // len(base):03d}"
        doc["started_at"] = (start + timedelta(minutes=i)).isoformat() + "Z"
        doc.pop("ended_at", None)
        batch.append(validate_session(doc))
        if len(batch) == 500 or i == n - 1:
            with rls.team_scope(team.pk):
                store_batch(team, batch)
            batch = []
    print(f"loaded {n} sessions", file=sys.stderr)


def clear_proposals() -> None:
    subprocess.run([PY, __file__, "--child-clear"], cwd=ROOT, env=base_env(), check=True)


def child_clear() -> None:
    django_setup()
    from dreamweb import rls
    from reviews.models import DreamRun, Proposal

    with rls.team_scope(rls.team_id_for_slug("acme")):
        Proposal.objects.all().delete()
        DreamRun.objects.all().delete()  # cascades to the session analyses


def last_run() -> dict:
    out = subprocess.run(
        [PY, __file__, "--child-run-info"], cwd=ROOT, env=base_env(), check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def child_run_info() -> None:
    django_setup()
    from dreamweb import rls
    from reviews.models import DreamRun

    with rls.team_scope(rls.team_id_for_slug("acme")):
        run = DreamRun.objects.order_by("-pk").first()
        print(
            json.dumps(
                {
                    "status": run.status,
                    "seconds": run.seconds,
                    "total": (run.finished_at - run.created_at).total_seconds(),
                    "analysed": run.sessions_analysed,
                    "proposals": run.proposals_count,
                }
            )
        )


def dream(n: int, env: dict) -> tuple[float, float, dict]:
    """(wall seconds, peak RSS MiB, the command's report) of one `manage.py dream` in a child process."""
    cmd = [PY, "manage.py", "dream", "--team", "acme", "--store", "acme-eng", "--all-sessions"]
    cmd += ["--max-sessions", str(n), "--format", "json", "-v0"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"dream failed:\n{err[-3000:]}")
    return wall, 0.0, json.loads(out)


def dream_measured(n: int, env: dict) -> tuple[float, float, dict, float]:
    """(wall seconds, peak RSS MiB, the command's report, CPU seconds) of one `manage.py dream` in a child."""
    cmd = [PY, "manage.py", "dream", "--team", "acme", "--store", "acme-eng", "--all-sessions"]
    cmd += ["--max-sessions", str(n), "--format", "json", "-v0"]
    out_file = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read back after the child exits
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out_file, stderr=subprocess.PIPE, text=True)
    # wait4 gives this child's own peak RSS (RUSAGE_CHILDREN would be the maximum over every child so far).
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"dream failed:\n{proc.stderr.read()[-3000:]}")
    out_file.seek(0)
    # CPU time of the command's own process (user + system): on a shared machine the wall time says little.
    return wall, usage.ru_maxrss / 1024, json.loads(out_file.read()), usage.ru_utime + usage.ru_stime


class Workers:
    def __init__(self, queue: str, tmp: Path):
        self.queue, self.tmp, self.procs = queue, tmp, []
        self.env = base_env(REDIS_URL=REDIS_URL, DREAMWEB_CELERY_QUEUE=queue)

    def start(self, count: int) -> None:
        for i in range(count):
            log = self.tmp / f"w{i}.log"
            self.procs.append(
                (
                    subprocess.Popen(
                        [str(ROOT / ".venv" / "bin" / "celery"), "-A", "dreamweb", "worker", "-Q", self.queue]
                        + ["--concurrency=1", "-n", f"bench{i}-{self.queue}@%h", "-l", "warning"]
                        + ["--without-gossip", "--without-mingle", "--without-heartbeat"],
                        cwd=ROOT,
                        env=self.env,
                        stdout=log.open("w"),
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    ),
                    log,
                )
            )
        time.sleep(8)  # Django and Celery start-up; not part of the timing

    def peak_rss(self) -> float:
        """The largest peak RSS (MiB) among the workers' processes (the main process and its pool children)."""
        peak = 0
        for proc, _ in self.procs:
            pids = [proc.pid]
            with contextlib.suppress(OSError):
                pids += [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
            for pid in pids:
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]))
                except OSError:
                    continue
        return peak / 1024

    def stop(self) -> None:
        for proc, _ in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs = []


def flush_redis() -> bool:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        client.flushdb()
        return True
    except Exception:  # noqa: BLE001 - no Redis: the worker part is skipped
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-workers", action="store_true")
    parser.add_argument("--skip-setup", action="store_true", help="reuse the database of an earlier run")
    parser.add_argument("--aggregate", action="store_true", help="also run bench/aggregate_scaling.py")
    parser.add_argument(
        "--beside", type=int, default=10_000, help="also run the in-process cycle over N sessions (0: not)"
    )
    parser.add_argument("--child-load", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-clear", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-run-info", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_load:
        child_load(args.child_load, args.sessions)
        return 0
    if args.child_clear:
        child_clear()
        return 0
    if args.child_run_info:
        child_run_info()
        return 0

    n = args.sessions
    if not args.skip_setup:
        t = time.perf_counter()
        setup(n)
        print(f"setup: {n} sessions loaded in {time.perf_counter() - t:.1f} s", flush=True)

    # Interleaved: each round runs the in-process cycle, then one worker, then two, so that the three see the same
    # machine (a shared machine's load moves by a factor of two within minutes).
    redis_ok = not args.skip_workers and flush_redis()
    if not args.skip_workers and not redis_ok:
        print("Redis not reachable: worker speed-up skipped")
    walls, peaks, inner = [], [], []
    times: dict[int, list[float]] = {1: [], 2: []}
    worker_rss: dict[int, list[float]] = {1: [], 2: []}
    beside = args.beside if 0 < args.beside < n else 0
    small: dict[str, list[float]] = {"wall": [], "run": [], "peak": [], "cpu": []}
    cpus = []
    for round_ in range(args.repeat):
        if beside:
            clear_proposals()  # the run's analyses go with it: upkeep reads only this run's
            wall, peak, doc, cpu = dream_measured(beside, base_env())
            for key, value in zip(
                ("wall", "run", "peak", "cpu"), (wall, doc["run"]["seconds"], peak, cpu), strict=True
            ):
                small[key].append(value)
            print(
                f"round {round_ + 1} in-process, {beside} sessions: {wall:.1f} s wall (run {doc['run']['seconds']:.1f}"
                f" s), {cpu:.1f} s CPU, peak RSS {peak:.0f} MiB, {doc['run']['sessions_analysed']} sessions,"
                f" {len(doc['proposals'])} proposals",
                flush=True,
            )
        clear_proposals()
        wall, peak, doc, cpu = dream_measured(n, base_env())
        cpus.append(cpu)
        walls.append(wall)
        peaks.append(peak)
        inner.append(doc["run"]["seconds"])
        print(
            f"round {round_ + 1} in-process: {wall:.1f} s wall (run {doc['run']['seconds']:.1f} s), {cpu:.1f} s CPU,"
            f" peak RSS {peak:.0f} MiB, {doc['run']['sessions_analysed']} sessions, {len(doc['proposals'])} proposals",
            flush=True,
        )
        if not redis_ok:
            continue
        for count in (1, 2):
            with tempfile.TemporaryDirectory() as tmp:
                workers = Workers(f"bench-{uuid.uuid4().hex[:6]}", Path(tmp))
                workers.start(count)
                try:
                    clear_proposals()
                    wall, _, doc = dream(n, workers.env)
                    info = last_run()
                    times[count].append(info["seconds"])
                    worker_rss[count].append(workers.peak_rss())
                    print(
                        f"round {round_ + 1} {count} worker(s): run {info['seconds']:.1f} s (queued→finished"
                        f" {info['total']:.1f} s, command {wall:.1f} s), {info['analysed']} sessions,"
                        f" largest worker RSS {worker_rss[count][-1]:.0f} MiB",
                        flush=True,
                    )
                finally:
                    workers.stop()
                    flush_redis()
    print(
        f"IN-PROCESS median: {statistics.median(walls):.1f} s wall, run {statistics.median(inner):.1f} s,"
        f" peak RSS {statistics.median(peaks):.0f} MiB",
        flush=True,
    )
    if beside:
        med = {key: statistics.median(values) for key, values in small.items()}
        big = {
            "wall": statistics.median(walls),
            "run": statistics.median(inner),
            "peak": statistics.median(peaks),
            "cpu": statistics.median(cpus),
        }
        print(f"BESIDE median, {beside} → {n} sessions (ratio):", flush=True)
        for key, label in (("wall", "wall s"), ("run", "run s"), ("cpu", "CPU s"), ("peak", "peak RSS MiB")):
            print(f"  {label}: {med[key]:.1f} → {big[key]:.1f} ({big[key] / med[key]:.2f}x)", flush=True)
    if redis_ok:
        one, two, here = statistics.median(times[1]), statistics.median(times[2]), statistics.median(inner)
        print(
            f"WORKERS median: 1 worker {one:.1f} s ({one / here:.2f}x the in-process run), 2 workers {two:.1f} s,"
            f" speed-up {one / two:.2f}x; per round 1→2: "
            + ", ".join(f"{a / b:.2f}x" for a, b in zip(times[1], times[2], strict=True))
            + "; per round 1 worker / in-process: "
            + ", ".join(f"{a / b:.2f}" for a, b in zip(times[1], inner, strict=True)),
            flush=True,
        )

    if args.aggregate:
        script = ROOT / "bench" / "aggregate_scaling.py"
        if script.exists():
            subprocess.run([PY, str(script)], cwd=ROOT, check=False)
        else:
            print("bench/aggregate_scaling.py not present: skipped")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"(machine: {os.cpu_count()} cores; largest child process: {peak:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
