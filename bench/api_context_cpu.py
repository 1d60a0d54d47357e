"""Benchmark: CPU per request of GET /api/v1/ping/ and GET /api/v1/context/ in one process, without a load generator.

The bench store of bench/api_context.py (10,000 entries, the same requests) in a scratch database; requests go
through Django's WSGI handler (every middleware, key authentication, throttle, the request's transaction) as the
application role, on one kept connection. Phases alternate (ping, context, store-wide context, ping, ...) so that
each sees the same machine; a loaded machine inflates wall time, not the CPU time counted here:

- Django: this process's CPU time per request (CLOCK_PROCESS_CPUTIME_ID), the median of each phase's requests;
- PostgreSQL: the connection's backend process (utime + stime from /proc) over the phase, per request;
- statements: the number each request sends (BEGIN and COMMIT are not statements Django sends).

Medians over rounds. ``--profile NAME`` runs that request kind under cProfile instead and prints the top functions.

    .venv/bin/python bench/api_context_cpu.py [--db NAME] [--keep-db] [--reuse [--code CHECKOUT]] [--requests 300]
        [--rounds 5] [--profile ping|context|context_store_wide]

Before and after a change in one sitting: seed once with --keep-db, copy the database (CREATE DATABASE ... TEMPLATE),
migrate the copy with the new code, then alternate runs with --reuse on each: the old one with the old checkout's
Python, from its directory, and --code naming it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_context  # noqa: E402 - the bench store and its requests
from _procfs import process_cpu  # noqa: E402

ROOT = api_context.ROOT


def _raw_key(db: str) -> str:
    """A new key for a reused database (the raw key of the seeding run is not stored)."""
    from dreamweb import rls
    from dreamweb.models import AgentKey, Scope, Team

    with rls.scope([rls.team_id_for_slug("bench")]):
        team = Team.objects.get(slug="bench")
        _, raw = AgentKey.generate(
            team=team, name=f"cpu-{time.time_ns()}", scopes=[s.value for s in Scope], writable_stores=["*"]
        )
    return raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="dreamweb_bench_api_cpu")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300, help="requests per phase")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="use the database a --keep-db run left")
    parser.add_argument("--profile", choices=["ping", "context", "context_store_wide"])
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose code serves the requests (with --reuse)")
    args = parser.parse_args()

    os.environ["CONN_MAX_AGE"] = "600"
    os.environ["DREAMWEB_API_KEY_RATE"] = "100000000/min"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    if args.reuse:
        os.environ["DATABASE_URL"] = api_context.with_db(api_context.APP_URL, args.db)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
        sys.path.insert(0, args.code)
        import django

        django.setup()
        raw = _raw_key(args.db)
    else:
        api_context.admin(f'DROP DATABASE IF EXISTS "{args.db}"')
        api_context.admin(f'CREATE DATABASE "{args.db}"')
        raw = api_context.seed(args.db, args.entries)
    try:
        run(args, raw)
    finally:
        from django.db import connection

        connection.close()
        if not args.keep_db:
            api_context.admin(f'DROP DATABASE IF EXISTS "{args.db}"')


def run(args, raw: str, kinds: dict | None = None) -> None:
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection

    handler = WSGIHandler()
    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    def call(method_path_kwargs) -> tuple[int, bytes]:
        method, path, kwargs = method_path_kwargs
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": urlencode(kwargs.get("params", {})),
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Api-Key {raw}",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(b""),
            "wsgi.errors": sys.stderr,
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        status = []
        response = handler(environ, lambda s, h, exc_info=None: status.append(s))
        body = b"".join(response)
        response.close()
        return int(status[0].split()[0]), body

    kinds = kinds or {
        "ping": api_context.ping_request,
        "context": api_context.context_request,
        "context_store_wide": api_context.context_store_wide_request,
    }
    rng = random.Random(11)
    for make in kinds.values():  # warm-up: the connection, the ranking data, the plans
        for _ in range(50):
            code, body = call(make(rng))
            assert code == 200, body[:500]
    backend = connection.cursor().connection.info.backend_pid
    if args.profile:
        make = kinds[args.profile]
        requests = [make(rng) for _ in range(args.requests)]
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for request in requests:
            call(request)
        profiler.disable()
        if os.environ.get("PROFILE_OUT"):
            profiler.dump_stats(os.environ["PROFILE_OUT"])
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(60)
        stats.sort_stats("tottime").print_stats(40)
        print(out.getvalue())
        return

    results: dict[str, list[dict]] = {name: [] for name in kinds}
    with connection.execute_wrapper(count):
        for n in range(args.rounds):
            for name, make in kinds.items():
                requests = [make(rng) for _ in range(args.requests)]
                cpu, counts = [], []
                pg0 = process_cpu(backend)
                for request in requests:
                    statements[0] = 0
                    t0 = time.process_time()
                    code, _ = call(request)
                    cpu.append(time.process_time() - t0)
                    counts.append(statements[0])
                    assert code == 200
                pg = (process_cpu(backend) - pg0) / len(requests)
                result = {
                    "django_ms": 1000 * statistics.median(cpu),
                    "django_mean_ms": 1000 * statistics.fmean(cpu),
                    "postgres_ms": 1000 * pg,
                    "statements": statistics.median(counts),
                }
                results[name].append(result)
                print(
                    f"round {n + 1} {name}: {json.dumps({k: round(v, 3) for k, v in result.items()})}", file=sys.stderr
                )
    summary = {
        name: {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}
        for name, rounds in results.items()
    }
    for name in [k for k in kinds if k != "ping"]:
        ping, this = summary["ping"], summary[name]
        summary[f"{name}_over_ping"] = round(
            (this["django_ms"] + this["postgres_ms"]) / (ping["django_ms"] + ping["postgres_ms"]), 3
        )
    summary["load_average"] = os.getloadavg()
    summary["code"] = str(Path(sys.modules["memory"].__file__).parent.parent)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
