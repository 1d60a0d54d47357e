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
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _procfs import process_cpu
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


def dream_measured(n: int, env: dict, on_start=None) -> tuple[float, float, dict, float]:
    """(wall seconds, peak RSS MiB, the command's report, CPU seconds) of one `manage.py dream` in a child."""
    cmd = [PY, "manage.py", "dream", "--team", "acme", "--store", "acme-eng", "--all-sessions"]
    cmd += ["--max-sessions", str(n), "--format", "json", "-v0"]
    out_file = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read back after the child exits
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out_file, stderr=subprocess.PIPE, text=True)
    if on_start:
        on_start(proc.pid)
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
    def __init__(self, queue: str, tmp: Path, extra: list[str] | None = None):
        self.queue, self.tmp, self.procs, self.extra = queue, tmp, [], extra or []
        self.env = base_env(REDIS_URL=REDIS_URL, DREAMWEB_CELERY_QUEUE=queue)

    def start(self, count: int) -> None:
        for i in range(count):
            log = self.tmp / f"w{i}.log"
            self.procs.append(
                (
                    subprocess.Popen(
                        [str(ROOT / ".venv" / "bin" / "celery"), "-A", "dreamweb", "worker", "-Q", self.queue]
                        + ["--concurrency=1", "-n", f"bench{i}-{self.queue}@%h", "-l", "warning"]
                        + ["--without-gossip", "--without-mingle", "--without-heartbeat", *self.extra],
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

    def pids(self) -> list[int]:
        """Every worker process: each main process and its pool children."""
        pids = []
        for proc, _ in self.procs:
            pids.append(proc.pid)
            with contextlib.suppress(OSError):
                pids += [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        return pids

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


def _pids_named(name: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == name:
                    pids.append(int(entry.name))
    return pids


def _machine_busy() -> tuple[float, float, float]:
    """(busy, total, steal) CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait; steal:
    the hypervisor ran something else while this machine wanted the CPU, counted in busy)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - values[3] - values[4]) / tick, sum(values) / tick, values[7] / tick


class CpuAccount:
    """CPU seconds per kind of process while a cycle runs through the workers: the worker processes (main and pool
    child), the PostgreSQL backends of the bench's database (sampled from pg_stat_activity every 0.2 s: the
    workers' and the command's connections live through the run), PostgreSQL's other processes (WAL writer,
    checkpointer, autovacuum; on a shared machine also other databases' backends), Redis, the polling command
    (from wait4), and the machine as a whole (/proc/stat), so a quiet run shows where the cores go besides the
    analysis."""

    def __init__(self, worker_pids: list[int]):
        self.workers = worker_pids
        self.backends: dict[int, tuple[float, float]] = {}  # pid → (CPU at start or 0 for a new one, last seen)
        self.stop_event = threading.Event()
        self.command_pid = 0
        self.command: list[tuple[float, float]] = [(0.0, 0.0)]  # (time, CPU) samples of the polling command
        self.autovacuum: set[str] = set()  # what autovacuum worked on in the bench's database during the run

    def _sample(self, conn, first: bool = False) -> None:
        rows = conn.execute(
            "SELECT pid, backend_type, query FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [DB.name],
        ).fetchall()
        for pid, kind, query in rows:
            if kind == "autovacuum worker":  # counted with the backends; named, since it is not the run's work
                self.autovacuum.add((query or "").removeprefix("autovacuum: "))
            cpu = process_cpu(pid)
            if cpu is None:
                continue
            start = self.backends.get(pid, (cpu if first else 0.0, 0.0))[0]
            self.backends[pid] = (start, cpu)

    def _loop(self, conn) -> None:
        while not self.stop_event.wait(0.2):
            self._sample(conn)
            if self.command_pid:
                self.command.append((time.time(), process_cpu(self.command_pid) or self.command[-1][1]))

    def watch(self, command_pid: int) -> None:
        self.command_pid = command_pid

    def command_during(self, start: float, end: float) -> float:
        """The polling command's CPU between two moments (its start-up and its report are outside the run)."""

        def at(moment: float) -> float:
            return next((cpu for t, cpu in self.command if t >= moment), self.command[-1][1] if self.command else 0)

        return at(end) - at(start)

    def start(self) -> None:
        import psycopg

        self.conn = psycopg.connect(DB._maintenance_url, autocommit=True)
        self._sample(self.conn, first=True)
        self.checkpoints0 = _checkpoints(self.conn)
        self.pg_all0 = {pid: process_cpu(pid) or 0.0 for pid in _pids_named("postgres")}
        self.redis0 = {pid: process_cpu(pid) or 0.0 for pid in _pids_named("redis-server")}
        self.workers0 = sum(process_cpu(p) or 0.0 for p in self.workers)
        self.machine0 = _machine_busy()
        self.me0 = time.process_time()
        self.thread = threading.Thread(target=self._loop, args=(self.conn,), daemon=True)
        self.thread.start()

    def stop(self, command_cpu: float) -> dict:
        self._sample(self.conn)
        self.stop_event.set()
        self.thread.join()
        checkpoints = _checkpoints(self.conn) - self.checkpoints0
        self.conn.close()
        machine = _machine_busy()
        backends = sum(last - start for start, last in self.backends.values())
        pg_all = sum((process_cpu(pid) or 0.0) - self.pg_all0.get(pid, 0.0) for pid in _pids_named("postgres"))
        return {
            "workers": sum(process_cpu(p) or 0.0 for p in self.workers) - self.workers0,
            "postgres": backends,
            "postgres_other": max(0.0, pg_all - backends),
            "redis": sum((process_cpu(pid) or 0.0) - self.redis0.get(pid, 0.0) for pid in _pids_named("redis-server")),
            "command_all": command_cpu,
            "bench": time.process_time() - self.me0,
            "machine": machine[0] - self.machine0[0],
            "machine_of": machine[1] - self.machine0[1],
            "steal": machine[2] - self.machine0[2],
            "checkpoints": checkpoints,
            "autovacuum": len(self.autovacuum),
            "autovacuum_of": ", ".join(sorted(self.autovacuum)),
        }


def _checkpoints(conn) -> int:
    """Checkpoints of the server so far (timed and requested): one during a run writes whole pages again."""
    return sum(conn.execute("SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter").fetchone())


def vacuum() -> float:
    """VACUUM (ANALYZE) the bench's database as its owner, outside the timing; the seconds it took. Every round
    deletes the last run (its 10,000 analyses) and writes a run: without it autovacuum woke up during some timed runs
    (on one of the two cores) and the planner's statistics were those of whatever round came before."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(DB.owner_url, autocommit=True) as conn:
        public = conn.execute("SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public'")
        tables = [t for (t,) in public]
        conn.execute(f"VACUUM (ANALYZE) {', '.join(tables)}")  # the application's tables (not the shared catalogs)
    return time.perf_counter() - started


def phases() -> dict:
    """Wall seconds of the last run's parts from its timestamps: dispatch (started → its first analysis saved:
    the analysis rows written, the messages sent and one batch), the batches (first → last analysis saved), finalize
    (last analysis → finished)."""
    out = subprocess.run(
        [PY, __file__, "--child-phases"], cwd=ROOT, env=base_env(), check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def child_phases() -> None:
    django_setup()
    from django.db.models import Max, Min

    from dreamweb import rls
    from reviews.models import DreamRun, SessionAnalysis

    with rls.team_scope(rls.team_id_for_slug("acme")):
        run = DreamRun.objects.order_by("-pk").first()
        span = SessionAnalysis.objects.filter(run=run).aggregate(first=Min("finished_at"), last=Max("finished_at"))
        print(
            json.dumps(
                {
                    "started": run.started_at.timestamp(),
                    "finished": run.finished_at.timestamp(),
                    "queued": (run.started_at - run.created_at).total_seconds(),
                    "dispatch": (span["first"] - run.started_at).total_seconds(),
                    "batches": (span["last"] - span["first"]).total_seconds(),
                    "finalize": (run.finished_at - span["last"]).total_seconds(),
                }
            )
        )


def describe(used: dict, n: int) -> str:
    """One line: where the run's time and the machine's CPU went (ms of CPU per session, per kind of process)."""
    kinds = ("workers", "postgres", "postgres_other", "redis", "command", "bench")  # command: while the run ran
    per = ", ".join(f"{k} {used[k] * 1000 / n:.2f}" for k in kinds)
    non_worker = sum(used[k] for k in kinds[1:])
    # What the machine spent beyond the bench's own processes (other people's work, the command's start-up): on a
    # quiet machine near 0; when it is not, two workers cannot have two cores.
    others = used["machine"] - used["workers"] - used["postgres"] - used["postgres_other"] - used["redis"]
    others -= used["command_all"] + used["bench"]
    return (
        f"CPU ms/session: {per}; other CPU per worker CPU s {non_worker / max(used['workers'], 1e-9):.2f};"
        f" machine busy {used['machine']:.1f} of {used['machine_of']:.1f} CPU s"
        f" ({used['machine'] / max(used['machine_of'], 1e-9):.0%}), of which processes not the bench's"
        f" {max(0.0, others):.1f} s (steal {used['steal']:.1f} s); checkpoints {used['checkpoints']:.0f};"
        f" autovacuum {used.get('autovacuum_of') or used['autovacuum'] or 'none'};"
        f" wall s: queued {used['wall_queued']:.2f}, dispatch {used['wall_dispatch']:.2f},"
        f" batches {used['wall_batches']:.2f}, finalize {used['wall_finalize']:.2f}"
    )


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
    parser.add_argument("--child-phases", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip-inprocess", action="store_true", help="only the worker runs (no ratio to in-process)")
    parser.add_argument(
        "--worker-args", default="", help="more arguments for each `celery worker`, e.g. '--pool solo' (one string)"
    )
    parser.add_argument("--workers", default="1,2", help="the worker counts to run, in order (default 1,2)")
    parser.add_argument(
        "--vacuum",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="VACUUM (ANALYZE) the bench's database before each timed run, untimed (default: yes)",
    )
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
    if args.child_phases:
        child_phases()
        return 0

    n = args.sessions
    counts = [int(c) for c in args.workers.split(",")]
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
    times: dict[int, list[float]] = {c: [] for c in counts}
    worker_rss: dict[int, list[float]] = {c: [] for c in counts}
    beside = args.beside if 0 < args.beside < n else 0
    small: dict[str, list[float]] = {"wall": [], "run": [], "peak": [], "cpu": []}
    cpus = []
    accounts: dict[int, list[dict]] = {c: [] for c in counts}
    for round_ in range(args.repeat):
        if beside and not args.skip_inprocess:
            clear_proposals()  # the run's analyses go with it: upkeep reads only this run's
            if args.vacuum:
                vacuum()
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
        if args.vacuum:
            vacuum()
        if args.skip_inprocess:
            wall, peak, doc, cpu = 0.0, 0.0, {"run": {"seconds": 1.0, "sessions_analysed": 0}, "proposals": []}, 0.0
        else:
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
        for count in counts:
            with tempfile.TemporaryDirectory() as tmp:
                workers = Workers(f"bench-{uuid.uuid4().hex[:6]}", Path(tmp), shlex.split(args.worker_args))
                workers.start(count)
                try:
                    clear_proposals()
                    if args.vacuum:
                        vacuum()
                    account = CpuAccount(workers.pids())
                    account.start()
                    wall, _, doc, command_cpu = dream_measured(n, workers.env, on_start=account.watch)
                    used = account.stop(command_cpu)
                    info = last_run()
                    parts = phases()
                    used["command"] = account.command_during(parts.pop("started"), parts.pop("finished"))
                    used.update(seconds=info["seconds"], **{f"wall_{k}": v for k, v in parts.items()})
                    accounts[count].append(used)
                    times[count].append(info["seconds"])
                    worker_rss[count].append(workers.peak_rss())
                    print(
                        f"round {round_ + 1} {count} worker(s): run {info['seconds']:.1f} s (queued→finished"
                        f" {info['total']:.1f} s, command {wall:.1f} s), {info['analysed']} sessions,"
                        f" largest worker RSS {worker_rss[count][-1]:.0f} MiB",
                        flush=True,
                    )
                    print("  " + describe(used, n), flush=True)
                finally:
                    workers.stop()
                    flush_redis()
    print(
        f"IN-PROCESS median: {statistics.median(walls):.1f} s wall, run {statistics.median(inner):.1f} s,"
        f" peak RSS {statistics.median(peaks):.0f} MiB",
        flush=True,
    )
    if beside and small["wall"]:  # not with --skip-inprocess
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
    if redis_ok and counts == [1, 2]:
        one, two, here = statistics.median(times[1]), statistics.median(times[2]), statistics.median(inner)
        print(
            f"WORKERS median: 1 worker {one:.1f} s ({one / here:.2f}x the in-process run), 2 workers {two:.1f} s,"
            f" speed-up {one / two:.2f}x; per round 1→2: "
            + ", ".join(f"{a / b:.2f}x" for a, b in zip(times[1], times[2], strict=True))
            + "; per round 1 worker / in-process: "
            + ", ".join(f"{a / b:.2f}" for a, b in zip(times[1], inner, strict=True)),
            flush=True,
        )

    if redis_ok:
        for count in counts:
            med = {
                key: statistics.median(a[key] for a in accounts[count])
                for key, value in accounts[count][0].items()
                if not isinstance(value, str)
            }
            print(f"CPU median, {count} worker(s): " + describe(med, n), flush=True)

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
