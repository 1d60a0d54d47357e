"""Dispatch of a dream run alone, through a real broker: its wall and CPU time, its statements, what it allocates
(tracemalloc peak) and the process's peak RSS, for a before/after comparison of a change to dispatch (issue 15).

    BENCH_CYCLE_DB=bench_x .venv/bin/python bench/dream_cycle.py --sessions 100000 --repeat 0 --skip-workers
    BENCH_CYCLE_DB=bench_x .venv/bin/python bench/dispatch_probe.py --sessions 10000 [--repeat 5] [--profile]

Each round creates a queued run of N sessions (rules analyzer, every session) on the bench's database, and calls
`reviews.dreams.steps.dispatch` in this process with the broker at BENCH_REDIS_URL (default
redis://127.0.0.1:6379/2, flushed before and after) on a queue no worker reads: the selection, the run's analyses,
the pending ids and every batch's message, but no batch. Then the run is deleted. --profile prints a cProfile of
the last round; --memory runs the rounds under tracemalloc (slower) and reports its peak.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dream_cycle  # noqa: E402 - the bench's scratch database
from _procfs import status_mib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--statements", action="store_true", help="each statement of the last round and its time")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = dream_cycle.DB.app_url
    os.environ["REDIS_URL"] = dream_cycle.REDIS_URL
    os.environ["DREAMWEB_CELERY_QUEUE"] = f"probe-{uuid.uuid4().hex[:6]}"  # nobody reads it
    dream_cycle.django_setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dreamweb import rls
    from memory.models import MemoryStore
    from reviews.dreams import runs, steps
    from reviews.models import DreamRun

    dream_cycle.flush_redis()
    team_id = rls.team_id_for_slug("acme")
    with rls.team_scope(team_id):
        store = MemoryStore.objects.get(slug="acme-eng")
        DreamRun.objects.all().delete()
    walls, cpus, counts, peaks, hwms = [], [], [], [], []
    profiler = cProfile.Profile() if args.profile else None
    for round_ in range(args.repeat):
        with rls.team_scope(team_id):
            run = runs._create_run(store, "command", None, False, True, "rules", args.sessions, None)
        base = status_mib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM from here
        if args.memory:
            tracemalloc.start()
        if profiler and round_ == args.repeat - 1:
            profiler.enable()
        with CaptureQueriesContext(connection) as queries:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            steps.dispatch(run.pk)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if profiler and round_ == args.repeat - 1:
            profiler.disable()
        if args.memory:
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
        hwms.append(status_mib("VmHWM") - base)
        walls.append(wall)
        cpus.append(cpu)
        counts.append(len(queries))
        with rls.team_scope(team_id):
            run.refresh_from_db()
            selected = run.sessions_selected
            DreamRun.objects.filter(pk=run.pk).delete()
        dream_cycle.flush_redis()
        print(
            f"round {round_ + 1}: {selected} sessions, dispatch {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU,"
            f" {counts[-1]} statements, peak RSS +{hwms[-1]:.1f} MiB"
            + (f", tracemalloc peak {peaks[-1]:.2f} MiB" if args.memory else ""),
            flush=True,
        )
    print(
        f"median: {statistics.median(walls) * 1000:.0f} ms wall, {statistics.median(cpus) * 1000:.0f} ms CPU,"
        f" peak RSS +{statistics.median(hwms):.1f} MiB"
        + (f", tracemalloc peak {statistics.median(peaks):.2f} MiB" if args.memory else "")
        + f"; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    if args.statements:
        for q in queries.captured_queries:
            print(f"  {float(q['time']) * 1000:7.1f} ms  {q['sql'][:150]}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
    return 0


if __name__ == "__main__":
    sys.exit(main())
