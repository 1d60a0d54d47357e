"""Benchmark: what each part of a context request costs against the trivial endpoint, through gunicorn at 50 clients.

bench/api_context.py's store, server and load (closed loop), with phases interleaved in every round: the trivial
endpoint (ping); context as it is; context without its audit row (``no_audit``); and context answered with a body of
the same size and shape but no ranking and no statement beyond authentication (``fixed_body``, the floor of a
context-sized answer through the same view). The same for the store-wide request where it differs. The variants are
made by bench/gunicorn_floor.py, for this bench only.

The question it answers: which part of context keeps its throughput from the trivial endpoint's (issue 15 asks for
0.8 of it), and whether any change short of removing that part could reach the aim.

    .venv/bin/python bench/context_floor.py [--requests 1000] [--rounds 3] [--clients 50]

Environment: DATABASE_URL (app role) and DATABASE_OWNER_URL (owner role), as for bench/api_context.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_context as bench  # noqa: E402 - the bench store, server and load generator


def with_floor(make, variant: str):
    def request(rng):
        method, path, kwargs = make(rng)
        return method, path, {**kwargs, "headers": {"X-Bench-Floor": variant}}

    return request


PHASES = (
    ("ping", bench.ping_request),
    ("context", bench.context_request),
    ("context_no_audit", with_floor(bench.context_request, "no_audit")),
    ("context_fixed_body", with_floor(bench.context_request, "fixed_body")),
    ("store_wide", bench.context_store_wide_request),
    ("store_wide_no_audit", with_floor(bench.context_store_wide_request, "no_audit")),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_server_arguments(parser, db="dreamweb_bench_floor", requests=1000, port=8766)
    args = parser.parse_args()

    config = str(Path(__file__).resolve().parent / "gunicorn_floor.py")
    with bench.scratch_server(args, worker_class="sync", threads=1, config=config) as (server, raw):
        meter = bench.CpuMeter(server, args.db)
        base = f"http://127.0.0.1:{args.port}"
        headers = {"Authorization": f"Api-Key {raw}"}
        for _, make in PHASES:  # warm-up: connections, ranking data, plans, each worker's fixed body
            bench.load(base, headers, make, 200, 10)
        rounds: dict[str, list[dict]] = {name: [] for name, _ in PHASES}
        for n in range(args.rounds):
            for name, make in PHASES:
                result = bench._measured(meter, base, headers, make, args.requests, args.clients)
                rounds[name].append(result)
                print(
                    f"round {n + 1} {name}: {json.dumps({k: round(v, 2) for k, v in result.items()})}", file=sys.stderr
                )
        summary: dict = {}
        for name, results in rounds.items():
            ratios = [r["rps"] / p["rps"] for r, p in zip(results, rounds["ping"], strict=True)]
            summary[name] = bench._median(results) | {
                "ratio_to_ping": statistics.median(ratios),
                "ratio_rounds": [round(x, 3) for x in ratios],
                "machine_cpu_ms_per_req": statistics.median(
                    r["cpu_gunicorn_ms_per_req"] + r["cpu_postgres_ms_per_req"] + r["cpu_client_ms_per_req"]
                    for r in results
                ),
            }
        summary["setup"] = bench.setup_summary(args) | {
            "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        }
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
