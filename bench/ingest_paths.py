#!/usr/bin/env python
"""Benchmark: three ways of writing the same sessions into PostgreSQL, interleaved in one run, to choose the
import's write path (memory.sessions._insert_ignoring_existing).

    .venv/bin/python bench/ingest_paths.py [--sessions 5000] [--rounds 3] [--batch 500]

* raw COPY: every session as one JSON line into a bare table of one jsonb column (the server's own limit);
* staging: per batch, COPY into a temporary table (ON COMMIT DROP), then one INSERT ... SELECT ... ON CONFLICT
  DO NOTHING RETURNING into the real table;
* unnest: per batch, one INSERT ... SELECT FROM unnest(arrays bound in binary) ON CONFLICT DO NOTHING RETURNING.
The target table has the sessions table's shape that matters (a bigserial key, a unique (team, external id), two
jsonb columns); the JSON is written by orjson in all three. Reported: seconds per round (median and all), client
encoding included. Runs in a scratch database (dreamweb_bench_ingest_paths), dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _scratch import OWNER_URL, with_db  # noqa: E402

from demo.data import generate_sessions  # noqa: E402

DB = "dreamweb_bench_ingest_paths"
TABLE = (
    "CREATE TABLE t (id bigserial PRIMARY KEY, team_id bigint NOT NULL, external_id varchar(200) NOT NULL, "
    "agent varchar(100) NOT NULL, metadata jsonb NOT NULL, events jsonb NOT NULL, UNIQUE (team_id, external_id))"
)


def copy_text(data: bytes) -> bytes:
    return data.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n").replace(b"\r", b"\\r")


def raw_copy(conn, docs, batch):
    with (
        conn.cursor() as cur,
        cur.copy("COPY r FROM STDIN WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')") as cp,
    ):
        for d in docs:
            cp.write(orjson.dumps(d) + b"\n")
    conn.commit()


def staging(conn, docs, batch):
    with conn.cursor() as cur:
        for start in range(0, len(docs), batch):
            cur.execute(
                "CREATE TEMPORARY TABLE s (ord int, external_id text, agent text, metadata jsonb, events jsonb) "
                "ON COMMIT DROP"
            )
            with cur.copy("COPY s FROM STDIN") as cp:
                for i, d in enumerate(docs[start : start + batch]):
                    cells = [str(i).encode(), d["external_id"].encode(), d["agent"].encode()]
                    cells += [orjson.dumps(d.get("metadata") or {}), orjson.dumps(d["events"])]
                    cp.write(b"\t".join(map(copy_text, cells)) + b"\n")
            cur.execute(
                "INSERT INTO t (team_id, external_id, agent, metadata, events) SELECT 1, external_id, agent, "
                "metadata, events FROM s ORDER BY ord ON CONFLICT DO NOTHING RETURNING external_id"
            )
            cur.fetchall()
            conn.commit()


def unnest(conn, docs, batch):
    with conn.cursor() as cur:
        for start in range(0, len(docs), batch):
            chunk = docs[start : start + batch]
            cur.execute(
                "INSERT INTO t (team_id, external_id, agent, metadata, events) SELECT 1, * FROM "
                "unnest(%b::text[], %b::text[], %b::jsonb[], %b::jsonb[]) ON CONFLICT DO NOTHING RETURNING external_id",
                [
                    [d["external_id"] for d in chunk],
                    [d["agent"] for d in chunk],
                    [orjson.dumps(d.get("metadata") or {}).decode() for d in chunk],
                    [orjson.dumps(d["events"]).decode() for d in chunk],
                ],
            )
            cur.fetchall()
            conn.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    docs = list(generate_sessions("bench", args.sessions, start=datetime(2026, 11, 1, tzinfo=UTC)))
    admin = with_db(OWNER_URL, "postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    times: dict[str, list[float]] = {}
    try:
        with psycopg.connect(with_db(OWNER_URL, DB)) as conn:
            for _ in range(args.rounds):
                for name, write in (("raw COPY", raw_copy), ("staging + INSERT", staging), ("unnest INSERT", unnest)):
                    conn.execute("DROP TABLE IF EXISTS t, r")
                    conn.execute(TABLE)
                    conn.execute("CREATE TABLE r (doc jsonb)")
                    conn.commit()
                    t0 = time.perf_counter()
                    write(conn, docs, args.batch)
                    times.setdefault(name, []).append(time.perf_counter() - t0)
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    raw = statistics.median(times["raw COPY"])
    print(f"{args.sessions:,} sessions, batches of {args.batch}, load average {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        med = statistics.median(values)
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(
            f"  {name}: median {med:.2f} s ({args.sessions / med:,.0f} sessions/s, {raw / med:.2f}x raw COPY); {runs}"
        )


if __name__ == "__main__":
    main()
