"""Benchmark: GET /api/v1/context/ under load, beside a trivial endpoint of the same app, and batch session ingest.

Creates a scratch PostgreSQL database (as the owner role), migrates it, seeds 10,000 memory entries in one store,
starts gunicorn on 127.0.0.1 as the application role (row-level security in force), and drives it with 50
concurrent clients (httpx, one thread each; a closed loop: each client sends its next request when the previous one
is answered). Phases alternate (ping, context, ping, context, ...) so both endpoints see the same machine state;
medians over the rounds are reported, with the CPU time per request of gunicorn, of PostgreSQL and of the load
generator itself (which shares the machine).

Then, because a closed loop of 50 clients on a small machine measures queueing (latency ~ clients / throughput),
the same requests at fixed open-loop arrival rates (``--rates``; latency counted from the scheduled send time, so a
slow server is not hidden by clients that wait), and a variant of the context request that ranks the store-wide entries
(no agent, no task: every store-wide entry is scored).

    .venv/bin/python bench/api_context.py [--entries 10000] [--clients 50] [--requests 3000] [--rounds 3]
        [--workers 5] [--worker-class sync|gthread] [--threads 4] [--rates 50,100,200]

Environment: DATABASE_URL (app role) and DATABASE_OWNER_URL (owner role) of the PostgreSQL server; the bench
database name is taken from --db (default dreamweb_bench_api).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
APP_URL = os.environ.get("DATABASE_URL", "postgres://dreamweb_app:dreamweb_app@127.0.0.1:5432/dreamweb")
OWNER_URL = os.environ.get("DATABASE_OWNER_URL", "postgres://dreamweb_owner:dreamweb_owner@127.0.0.1:5432/dreamweb")

AGENTS = [f"agent-{i:02d}" for i in range(20)]
TASKS = [f"task-{i:02d}" for i in range(10)]
WORDS = """
deploy release migration database index cache retry timeout token budget branch merge review lint test docker compose
kubernetes secret rotate backup restore schema queue worker celery redis postgres latency throughput rollback feature
flag canary incident alert dashboard metric log trace span http grpc proxy tls certificate dns bucket upload download
parser config environment variable python django pytest ruff
""".split()  # noqa: SIM905 - a word list reads better as text


def with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def admin(sql: str) -> None:
    with psycopg.connect(OWNER_URL, autocommit=True) as conn:
        conn.execute(sql)


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def seed(db: str, entries: int) -> str:
    """Migrate as the owner, seed as the app role inside the system scope; returns a raw API key."""
    env = {**os.environ, "DATABASE_URL": with_db(OWNER_URL, db), "DATABASE_OWNER_URL": ""}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    os.environ["DATABASE_URL"] = with_db(APP_URL, db)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.utils import timezone

    from dreamweb import rls
    from dreamweb.models import AgentKey, Scope
    from dreamweb.provenance import content_hash
    from dreamweb.services import create_team
    from memory.models import MemoryEntry, MemoryStore, MemoryVersion

    rng = random.Random(7)
    team, _ = create_team("bench", "Bench")  # the app role sees no other team: it writes inside the new one's scope
    with rls.team_scope(team):
        store = MemoryStore.objects.create(team=team, slug="main", agents_may_write=True)
        now = timezone.now()
        rows = []
        for i in range(entries):
            r = rng.random()
            agent = rng.choice(AGENTS) if r < 0.3 else None
            task = rng.choice(TASKS) if 0.2 < r < 0.45 else None
            content = " ".join(sentence(rng, rng.randint(6, 30)) for _ in range(rng.randint(1, 4)))
            rows.append(
                MemoryEntry(
                    team=team,
                    store=store,
                    key=f"lesson-{i:05d}",
                    content=content,
                    content_hash=content_hash(content),
                    scope_agent=agent,
                    scope_task=task,
                    rating=rng.choice([0.0, 0.0, 0.0, 0.5, -0.5, 1.0]),
                    rating_count=rng.randint(0, 5),
                    updated_at=now - timedelta(days=rng.randint(0, 365)),
                )
            )
        created = MemoryEntry.objects.bulk_create(rows, batch_size=1000)
        MemoryVersion.objects.bulk_create(
            [
                MemoryVersion(
                    team=team,
                    entry=e,
                    number=1,
                    operation="create",
                    key=e.key,
                    content=e.content,
                    content_hash=e.content_hash,
                    author_kind="system",
                )
                for e in created
            ],
            batch_size=1000,
        )
        _, raw = AgentKey.generate(team=team, name="bench", scopes=[s.value for s in Scope], writable_stores=["*"])
    from django.db import connection

    connection.close()
    with psycopg.connect(with_db(OWNER_URL, db), autocommit=True) as conn:
        conn.execute("ANALYZE")
    return raw


def start_server(
    db: str,
    port: int,
    workers: int,
    worker_class: str,
    threads: int,
    trace: str | None = None,
    config: str | None = None,
) -> subprocess.Popen:
    """gunicorn serving the bench database; ``trace`` adds bench/gunicorn_trace.py's hooks, ``config`` another
    gunicorn configuration file (bench/context_floor.py's)."""
    env = {
        **os.environ,
        "DATABASE_URL": with_db(APP_URL, db),
        # Persistent connections: the row-level-security scope is transaction-local, so a kept connection carries
        # nothing from one request to the next (tests/test_context_ranking.py checks it).
        "CONN_MAX_AGE": "600",
        "DREAMWEB_API_KEY_RATE": "100000000/min",
        "LOG_LEVEL": "ERROR",
    }
    cmd = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "dreamweb.wsgi:application",
        "-w",
        str(workers),
        "-k",
        worker_class,
        "-b",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
        "--backlog",
        "2048",
    ]
    if worker_class == "gthread":
        cmd += ["--threads", str(threads)]
    if trace:
        cmd += ["-c", str(ROOT / "bench" / "gunicorn_trace.py")]
        env["BENCH_TRACE_DIR"] = trace
    if config:
        cmd += ["-c", config]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    deadline = time.time() + 180  # a loaded machine boots five Django workers slowly
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("gunicorn did not start")


def _cpu_seconds(pids: list[int]) -> float:
    """utime + stime of these processes (Linux /proc), in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


class CpuMeter:
    """CPU time spent by gunicorn (master and workers), by the PostgreSQL backends serving the bench database and
    by this process (the load generator) between start() and stop()."""

    def __init__(self, server: subprocess.Popen, db: str):
        self.server = server
        self.db = db

    def _pids(self) -> tuple[list[int], list[int]]:
        children = Path(f"/proc/{self.server.pid}/task/{self.server.pid}/children").read_text().split()
        with psycopg.connect(OWNER_URL, autocommit=True) as conn:
            backends = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [self.db])]
        return [self.server.pid, *map(int, children)], backends

    def start(self) -> None:
        self.gunicorn, self.postgres = self._pids()
        self.t0 = (_cpu_seconds(self.gunicorn), _cpu_seconds(self.postgres), time.process_time())

    def stop(self) -> dict:
        gunicorn, postgres = self._pids()
        # Backends that appeared during the phase are counted from zero (persistent connections: rarely any).
        before_pg = self.t0[1] - _cpu_seconds([p for p in self.postgres if p not in postgres])
        return {
            "cpu_gunicorn_s": _cpu_seconds(gunicorn) - self.t0[0],
            "cpu_postgres_s": _cpu_seconds(postgres) - before_pg,
            "cpu_client_s": time.process_time() - self.t0[2],
        }


def load(
    base: str,
    headers: dict,
    make_request,
    total: int,
    clients: int,
    rate: float | None = None,
    trace: tuple[str, str] | None = None,
) -> dict:
    """``total`` requests from ``clients`` threads; returns latency percentiles (ms) and throughput.

    Closed loop (``rate`` None): each client sends its next request as soon as the previous one is answered.
    Open loop (``rate`` in requests/s): request i is due at i / rate (Poisson arrivals); a client takes the next due
    request, waits for its time and sends it; latency is counted from the due time, so queueing behind a slow
    server is part of it (no coordinated omission), as long as ``clients`` suffices to keep up with the rate.
    ``late_p99_ms`` is how late the generator itself sent (send time minus due time; open loop only).

    The generator's own cyclic garbage collector is kept out of the phase (collected before the clock, paused until
    the phase ends): this process holds Django from the seeding and some 100,000 objects, and a full pass (60-250 ms
    of CPU here, every minute or so) stops every client thread at once, so every request due or in flight during it
    counted the pause as the server's latency: the 50 requests/s p99 of whichever phase it fell in.

    ``trace`` (a directory and this phase's name): each request carries an ``X-Bench-Id`` header and its due, send
    and answer times go to DIR/client.jsonl, for ``trace_split``."""
    with _collector_paused():
        return _load(base, headers, make_request, total, clients, rate, trace)


@contextmanager
def _collector_paused():
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load(
    base: str, headers: dict, make_request, total: int, clients: int, rate: float | None, trace: tuple[str, str] | None
) -> dict:
    latencies: list[float] = []
    records: list[dict] = []
    late: list[float] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(total))
    counter_lock = threading.Lock()
    due: list[float] = []
    if rate:
        rng = random.Random(5)
        t = 0.0
        for _ in range(total):
            due.append(t)
            t += rng.expovariate(rate)
    clock: list[float] = []

    def start_clock() -> None:
        clock.append(time.perf_counter())
        clock.append(time.time())

    # Every client is built before the clock starts (an httpx.Client costs tens of milliseconds of CPU, mostly its
    # TLS context): otherwise the first requests of a phase would wait for the load generator, not for the server.
    ready = threading.Barrier(clients, action=start_clock)

    def worker(seed_: int) -> None:
        nonlocal errors
        rng = random.Random(seed_)
        mine: list[float] = []
        mine_late: list[float] = []
        mine_records: list[dict] = []
        bad = 0
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            ready.wait()
            start, epoch = clock
            while True:
                with counter_lock:
                    i = next(counter, None)
                if i is None:
                    break
                method, path, kwargs = make_request(rng)
                if rate:
                    t0 = start + due[i]
                    delay = t0 - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    mine_late.append((time.perf_counter() - t0) * 1000)
                else:
                    t0 = time.perf_counter()
                if trace:
                    kwargs = {**kwargs, "headers": {**kwargs.get("headers", {}), "X-Bench-Id": f"{trace[1]}-{i}"}}
                    sent = time.perf_counter()
                r = client.request(method, path, **kwargs)
                mine.append((time.perf_counter() - t0) * 1000)
                if trace:
                    mine_records.append(
                        {"id": f"{trace[1]}-{i}", "latency_ms": mine[-1], "sent": epoch + sent - start}
                        | {"late_ms": (sent - t0) * 1000}
                    )
                if r.status_code >= 400:
                    bad += 1
            finished = time.perf_counter()
        with lock:
            latencies.extend(mine)
            late.extend(mine_late)
            records.extend(mine_records)
            errors += bad
            ends.append(finished)

    ends: list[float] = []
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = max(ends) - clock[0]
    if trace:
        with open(Path(trace[0]) / "client.jsonl", "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
    latencies.sort()
    result = {
        "requests": len(latencies),
        "errors": errors,
        "median_ms": statistics.median(latencies),
        "p99_ms": _p99(latencies),
        "rps": len(latencies) / wall,
    }
    if rate:
        result["late_p99_ms"] = _p99(sorted(late))
    return result


def _p99(ordered: list[float]) -> float:
    return ordered[int(0.99 * (len(ordered) - 1))]


def trace_split(directory: str) -> dict:
    """Per traced phase, where the latency went (ms, p99 unless named): ``late``, the generator sent after the due
    time; ``queue``, sent until a worker started the request (the listen backlog, the connection); ``server_wall``,
    the worker's time, of which ``server_cpu`` its process's CPU and ``server_sql`` its statements; ``gc_passes_2``,
    requests during which the worker ran a full collection. Joined by request id with bench/gunicorn_trace.py's logs."""
    server = {}
    for log in Path(directory).glob("server-*.log"):
        for line in log.read_text().splitlines():
            rid, start, wall, cpu, sql, gc_ms, gens, _ = line.split()
            server[rid] = (float(start), float(wall), float(cpu), float(sql), gens)
    phases: dict[str, list] = {}
    for line in (Path(directory) / "client.jsonl").read_text().splitlines():
        client = json.loads(line)
        if client["id"] in server:
            phases.setdefault(client["id"].rsplit("-", 1)[0], []).append((client, server[client["id"]]))
    split = {}
    for phase, pairs in phases.items():
        columns = {
            "latency": [c["latency_ms"] for c, _ in pairs],
            "late": [c["late_ms"] for c, _ in pairs],
            "queue": [(s[0] - c["sent"]) * 1000 for c, s in pairs],
            "server_wall": [s[1] for _, s in pairs],
            "server_cpu": [s[2] for _, s in pairs],
            "server_sql": [s[3] for _, s in pairs],
        }
        split[phase] = {
            "requests": len(pairs),
            "latency_median": round(statistics.median(columns["latency"]), 1),
            **{name: round(_p99(sorted(values)), 1) for name, values in columns.items()},
            "gc_passes_2": sum("2" in s[4] for _, s in pairs),
        }
    return split


def context_request(rng: random.Random):
    """The agent and the task named: the ranking finds the task's and the agent's entries through indexes."""
    params = {
        "store": "main",
        "agent": rng.choice(AGENTS),
        "task": rng.choice(TASKS),
        "query": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))),
        "max_items": 20,
        "max_tokens": 2000,
    }
    return "GET", "/api/v1/context/", {"params": params}


def context_store_wide_request(rng: random.Random):
    """Neither agent nor task: only store-wide entries may be served, so all ~5,500 of them are ranked (text rank
    for every one that matches a query word). (With an agent named, its ~100 scoped entries fill the 20 + 20 rows.)"""
    method, path, kwargs = context_request(rng)
    del kwargs["params"]["agent"], kwargs["params"]["task"]
    return method, path, kwargs


def ping_request(rng: random.Random):
    return "GET", "/api/v1/ping/", {}


def ingest(base: str, headers: dict, sessions: int, batch: int, clients: int) -> dict:
    rng = random.Random(3)

    def session(i: int) -> dict:
        events = []
        for j in range(20):
            kind = j % 4
            if kind == 0:
                events.append({"type": "message", "role": "user", "content": sentence(rng, 12)})
            elif kind == 1:
                events.append({"type": "tool_call", "id": f"c{j}", "name": "bash", "arguments": {"cmd": "make test"}})
            elif kind == 2:
                events.append({"type": "tool_result", "call_id": f"c{j - 1}", "content": sentence(rng, 20)})
            else:
                events.append({"type": "message", "role": "assistant", "content": sentence(rng, 15)})
        return {
            "external_id": f"bench-{i:06d}",
            "agent": rng.choice(AGENTS),
            "task": rng.choice(TASKS),
            "events": events,
        }

    batches = [[session(i) for i in range(s, min(s + batch, sessions))] for s in range(0, sessions, batch)]
    queue = iter(batches)
    lock = threading.Lock()
    created = 0

    def worker() -> None:
        nonlocal created
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            while True:
                with lock:
                    body = next(queue, None)
                if body is None:
                    return
                r = client.post("/api/v1/sessions/", json=body)
                r.raise_for_status()
                with lock:
                    created += r.json()["created"]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "sessions": sessions,
        "created": created,
        "batch": batch,
        "clients": clients,
        "sessions_per_s": sessions / wall,
    }


def _measured(meter: CpuMeter, *args, **kwargs) -> dict:
    meter.start()
    result = load(*args, **kwargs)
    cpu = meter.stop()
    # CPU milliseconds per request: what a request costs the machine, whatever the load around it.
    return result | {k[:-2] + "_ms_per_req": v * 1000 / result["requests"] for k, v in cpu.items()}


def _median(results: list[dict]) -> dict:
    keys = [k for k in results[0] if k not in ("requests", "errors")]
    return {k: statistics.median(r[k] for r in results) for k in keys} | {"errors": sum(r["errors"] for r in results)}


def add_server_arguments(parser: argparse.ArgumentParser, *, db: str, requests: int, port: int) -> None:
    """The bench store's, its server's and the closed loop's options (this bench's and bench/context_floor.py's)."""
    parser.add_argument("--db", default=db)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=requests, help="requests per phase per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    parser.add_argument("--port", type=int, default=port)


def setup_summary(args) -> dict:
    """What a run's summary says of its setup (``add_server_arguments``' options, the machine, the load at its end)."""
    return {
        "entries": args.entries,
        "clients": args.clients,
        "requests_per_round": args.requests,
        "rounds": args.rounds,
        "gunicorn_workers": args.workers,
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
    }


@contextmanager
def scratch_server(args, *, keep_db: bool = False, **server):
    """A scratch database (``args.db``) seeded with the bench store, and gunicorn serving it (``start_server``'s
    options in ``server``): yields the server and a raw API key; the server is stopped, and the database dropped
    unless kept, whatever happens."""
    admin(f'DROP DATABASE IF EXISTS "{args.db}"')
    admin(f'CREATE DATABASE "{args.db}"')
    process = None
    try:
        t0 = time.perf_counter()
        raw = seed(args.db, args.entries)
        print(f"seeded {args.entries} entries in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        process = start_server(args.db, args.port, args.workers, **server)
        yield process, raw
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        if not keep_db:
            admin(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(parser, db="dreamweb_bench_api", requests=3000, port=8764)
    parser.add_argument("--worker-class", default="sync", choices=["sync", "gthread"])
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (gthread)")
    parser.add_argument("--rates", default="50,100,200", help="open-loop arrival rates, requests/s ('' for none)")
    parser.add_argument("--open-requests", type=int, default=1500, help="requests per open-loop phase")
    parser.add_argument("--ingest-sessions", type=int, default=5000)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument(
        "--trace",
        metavar="DIR",
        help="split the open-loop latency per request: generator lateness, wait for a worker, the worker's wall, CPU"
        " and SQL time (bench/gunicorn_trace.py); logs in DIR, the split in the summary's open_loop_split",
    )
    args = parser.parse_args()
    load_at_start = os.getloadavg()

    if args.trace:
        Path(args.trace).mkdir(parents=True, exist_ok=True)
        for old in [*Path(args.trace).glob("server-*.log"), Path(args.trace) / "client.jsonl"]:
            old.unlink(missing_ok=True)
    with scratch_server(
        args, keep_db=args.keep_db, worker_class=args.worker_class, threads=args.threads, trace=args.trace
    ) as (server, raw):
        meter = CpuMeter(server, args.db)
        base = f"http://127.0.0.1:{args.port}"
        headers = {"Authorization": f"Api-Key {raw}"}
        load(base, headers, context_request, 300, 10)  # warm-up: connections, caches, plans
        load(base, headers, context_store_wide_request, 100, 10)
        load(base, headers, ping_request, 300, 10)
        phases = (
            ("ping", ping_request),
            ("context", context_request),
            ("context_store_wide", context_store_wide_request),
        )
        rounds: dict[str, list[dict]] = {name: [] for name, _ in phases}
        for n in range(args.rounds):
            for name, make in phases:
                result = _measured(meter, base, headers, make, args.requests, args.clients)
                rounds[name].append(result)
                shown = {k: round(v, 2) for k, v in result.items()}
                print(f"round {n + 1} {name}: {json.dumps(shown)}", file=sys.stderr)
        summary: dict = {name: _median(results) for name, results in rounds.items()}
        summary["throughput_ratio_context_vs_ping"] = summary["context"]["rps"] / summary["ping"]["rps"]
        summary["throughput_ratio_context_store_wide_vs_ping"] = (
            summary["context_store_wide"]["rps"] / summary["ping"]["rps"]
        )
        summary["ratio_rounds"] = [c["rps"] / p["rps"] for c, p in zip(rounds["context"], rounds["ping"], strict=True)]
        open_loop = {}
        for rate in [float(r) for r in args.rates.split(",") if r.strip()]:
            for name, make in phases:
                trace = (args.trace, f"{name}@{rate:g}") if args.trace else None
                result = _measured(meter, base, headers, make, args.open_requests, args.clients, rate=rate, trace=trace)
                open_loop[f"{name}@{rate:g}/s"] = result
                print(
                    f"open loop {rate:g}/s {name}: {json.dumps({k: round(v, 2) for k, v in result.items()})}",
                    file=sys.stderr,
                )
        summary["open_loop"] = open_loop
        if args.trace:
            summary["open_loop_split"] = trace_split(args.trace)
        single = {}
        for name, make in phases:
            single[name] = _measured(meter, base, headers, make, 300, 1)
        summary["one_client"] = single
        if args.ingest_sessions:
            summary["ingest"] = ingest(base, headers, args.ingest_sessions, 100, 4)
        summary["setup"] = setup_summary(args) | {
            "worker_class": args.worker_class,
            "threads": args.threads if args.worker_class == "gthread" else 1,
            "load_average_at_start": load_at_start,
        }
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
