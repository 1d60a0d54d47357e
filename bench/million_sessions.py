#!/usr/bin/env python
"""Benchmark: one store with a million sessions, every figure beside the same figure at ten thousand, in one run.

    .venv/bin/python bench/million_sessions.py [--sessions 1000000] [--sample 10000] [--requests 10]
                                               [--db dreamweb_bench_million] [--write-docs]

One scratch PostgreSQL database (created and migrated by the owner role, dropped at the end, also after an error);
everything the product does runs as the application role, row-level security in force.

1. Seed: a team, a store with 300 memory entries, a reviewer, an agent key.
2. At 10k: import --sample realistic sessions (demo data, ~4 KB each) with memory.importing (the import command's
   code, in this process), then measure (below).
3. Fill: up to --sessions with older sessions written by the server itself (INSERT ... SELECT over
   generate_series, the events of 200 realistic template sessions, as the owner): the fastest way to a big table
   (the brief allows a generator straight into the table); its rate is reported apart. Then VACUUM ANALYZE, as
   autovacuum would.
4. At 1M: import another --sample realistic sessions (newer than everything), then measure again.

Measured at each size: the import's rate (sessions/s, wall, and this process's CPU per session); a dream cycle over
the newest --sample sessions (`manage.py dream --max-sessions N` as a subprocess, tasks in-process); selecting those
sessions alone (reviews.dreams.selection); the session list (first page, page 100, one agent), the review queue's
first page and GET /api/v1/context/ through the Django test client (the full middleware stack, server time without
the network; medians of --requests after warm-up); and the sessions table's size per session (heap, TOAST and
indexes) and the database's.
"""

from __future__ import annotations

import argparse
import io
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

import psycopg
from _raw_copy import bytes_chunks, raw_copy
from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECTION = "## A million sessions (`bench/million_sessions.py`)"
TEMPLATES = 200


def setup_django(db: ScratchDatabase) -> None:
    os.environ["DATABASE_URL"] = db.app_url
    os.environ.pop("REDIS_URL", None)  # tasks in-process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    os.environ["DEBUG"] = "false"
    import django

    django.setup()


def seed():
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from dreamweb import rls
    from dreamweb.models import AgentKey, Membership, Scope
    from dreamweb.provenance import content_hash
    from dreamweb.services import create_team
    from memory.models import MemoryEntry, MemoryStore, MemoryVersion

    team, _ = create_team("bench", "Bench")
    with rls.team_scope(team):
        store = MemoryStore.objects.create(team=team, slug="main", name="Main", agents_may_write=True)
        user = get_user_model().objects.create_user("reviewer", password="x")
        Membership.objects.create(team=team, user=user, role="reviewer")
        now = timezone.now()
        entries = MemoryEntry.objects.bulk_create(
            MemoryEntry(
                team=team,
                store=store,
                key=f"lesson-{i:03d}",
                content=(text := f"Lesson {i}: run `make check-{i % 17}` before `make release`; deploy {i % 5}."),
                content_hash=content_hash(text),
                scope_agent=None if i % 3 else "deploy-bot",
                updated_at=now,
            )
            for i in range(300)
        )
        MemoryVersion.objects.bulk_create(
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
            for e in entries
        )
        _, raw_key = AgentKey.generate(team=team, name="bench", scopes=[s.value for s in Scope], writable_stores=["*"])
    return team, store, user, raw_key


def sample_file(count: int, *, phase: int, start: datetime) -> bytes:
    from demo.data import generate_sessions

    lines = []
    for i, doc in enumerate(generate_sessions("demo", count, seed=100 + phase, start=start)):
        doc["external_id"] = f"p{phase}-{i:06d}"
        lines.append(json.dumps(doc, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def import_sample(db: ScratchDatabase, team, data: bytes, count: int) -> dict:
    from memory.importing import import_sessions

    seconds, _ = raw_copy(db.owner_url, bytes_chunks(data))
    raw = count / seconds
    t0, c0 = time.perf_counter(), time.process_time()
    stats = import_sessions(io.BytesIO(data), team)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert stats.imported == count, stats.summary()
    rate = count / seconds
    return {"rate": rate, "cpu_ms": 1000 * cpu / count, "mb_s": len(data) / seconds / 1e6, "raw": raw}


def fill(db: ScratchDatabase, template: bytes, upto: int, team_id: int, chunk: int = 50_000) -> dict:
    """Sessions 'fill-N' up to ``upto`` in the team, older than the samples, written by the server."""
    docs = [json.loads(line) for line in template.splitlines()[:TEMPLATES]]
    t0 = time.perf_counter()
    with psycopg.connect(db.owner_url, autocommit=True) as conn:
        conn.execute("SELECT set_config('dreamweb.team_ids', '*', false)")
        conn.execute(
            "CREATE TEMPORARY TABLE bench_template (n int, agent text, task text, model text, outcome text, "
            "metadata jsonb, events jsonb, event_count int, size_bytes int)"
        )
        with conn.cursor().copy("COPY bench_template FROM STDIN") as copy:
            for n, d in enumerate(docs):
                size = len(json.dumps(d, separators=(",", ":")))
                copy.write_row(
                    [
                        n,
                        d["agent"],
                        d["task"],
                        d["model"],
                        d["outcome"],
                        json.dumps(d["metadata"]),
                        json.dumps(d["events"]),
                        len(d["events"]),
                        size,
                    ]
                )
        have = conn.execute("SELECT count(*) FROM memory_agentsession").fetchone()[0]
        first = 0
        while have < upto:
            n = min(chunk, upto - have)
            conn.execute(
                """INSERT INTO memory_agentsession (team_id, external_id, agent, task, model, outcome, started_at,
                       ended_at, metadata, events, event_count, size_bytes, source_format, ingested_at, source)
                   SELECT %(team)s, 'fill-' || g, t.agent, t.task, t.model, t.outcome,
                          timestamptz '2026-01-01' - g * interval '20 seconds',
                          timestamptz '2026-01-01' - g * interval '20 seconds' + interval '9 minutes',
                          t.metadata, t.events, t.event_count, t.size_bytes, 'dreamweb-session-v1',
                          timestamptz '2026-01-01' - g * interval '20 seconds' + interval '10 minutes',
                          'import:bench-fill'
                   FROM generate_series(%(a)s::bigint, %(b)s::bigint) g
                   JOIN bench_template t ON t.n = g %% %(k)s::int""",
                {"team": team_id, "a": first, "b": first + n - 1, "k": len(docs)},
            )
            first += n
            have += n
            print(f"  filled {have:,} sessions ({time.perf_counter() - t0:.0f} s)", flush=True)
        seconds = time.perf_counter() - t0
        conn.execute("VACUUM ANALYZE")
        vacuum = time.perf_counter() - t0 - seconds
    return {"sessions": first, "rate": first / seconds, "seconds": seconds, "vacuum": vacuum}


def median_ms(fn, requests: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def dream(db: ScratchDatabase, sample: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL"}}
    env.update(DATABASE_URL=db.app_url, DJANGO_SETTINGS_MODULE="dreamweb.settings", DEBUG="false")
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "dream", "--team", "bench", "--store", "main"]
            + ["--max-sessions", str(sample), "--format", "json"],
            cwd=ROOT,
            env=env,
            stdout=out_file,
            stderr=err_file,
            stdin=subprocess.DEVNULL,
        )
        # wait4: this child's own peak RSS (RUSAGE_CHILDREN would be the maximum over every child so far).
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        out_file.seek(0)
        err_file.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"dream failed: {err_file.read()[-2000:].decode(errors='replace')}")
        run = json.loads(out_file.read())["run"]
    return {
        "seconds": seconds,
        "read": run["sessions_analysed"],
        "selected": run["sessions_selected"],
        "rss_mib": usage.ru_maxrss / 1024,
    }


def measure(db, team, store, user, raw_key, sample: int, requests: int) -> dict:
    from django.db import connection
    from django.test import Client

    from dreamweb import rls
    from memory.models import AgentSession
    from reviews.dreams.selection import select_sessions

    out: dict = {}
    connection.close()
    out["dream"] = dream(db, sample)
    with rls.team_scope(team):
        # The newest sample, as the dream just consumed them: what a cycle with all_sessions reads first.
        out["select_ms"] = median_ms(
            lambda: select_sessions(store, limit=sample, all_sessions=True), max(3, requests // 3)
        )
        out["select_unconsumed_ms"] = median_ms(lambda: select_sessions(store, limit=sample), max(3, requests // 3))
        agent = AgentSession.objects.filter(team=team).order_by("-id").values_list("agent", flat=True).first()
    web = Client()
    web.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Api-Key {raw_key}")

    def page(client, url, params=None, status=200):
        def run():
            response = client.get(url, params or {})
            assert response.status_code == status, (url, response.status_code, response.content[:300])

        return run

    out["list_ms"] = median_ms(page(web, "/memory/sessions/"), requests)
    out["list_page100_ms"] = median_ms(page(web, "/memory/sessions/", {"page": 100}), requests)
    out["list_agent_ms"] = median_ms(page(web, "/memory/sessions/", {"agent": agent}), requests)
    out["queue_ms"] = median_ms(page(web, "/reviews/"), requests)
    out["queue100_ms"] = median_ms(page(web, "/reviews/", {"per": 100}), requests)
    out["ping_ms"] = median_ms(page(api, "/api/v1/ping/"), requests)
    out["context_ms"] = median_ms(
        page(api, "/api/v1/context/", {"store": "main", "agent": "deploy-bot", "task": "release", "query": "deploy"}),
        requests,
    )
    out["context_wide_ms"] = median_ms(page(api, "/api/v1/context/", {"store": "main", "query": "deploy"}), requests)
    with psycopg.connect(db.owner_url, autocommit=True) as conn:
        conn.execute("SELECT set_config('dreamweb.team_ids', '*', false)")
        count, heap, total, database, pending, evidence = conn.execute(
            "SELECT (SELECT count(*) FROM memory_agentsession), pg_relation_size('memory_agentsession'), "
            "pg_total_relation_size('memory_agentsession'), pg_database_size(current_database()), "
            "(SELECT count(*) FROM reviews_proposal WHERE status = 'pending'), "
            "(SELECT count(*) FROM reviews_proposalevidence e JOIN reviews_proposal p ON p.id = e.proposal_id "
            "WHERE p.status = 'pending')"
        ).fetchone()
    out.update(count=count, table_bytes=total / count, heap_bytes=heap / count, db_bytes=database / count)
    out["pending"], out["evidence"] = pending, evidence
    return out


ROWS = [
    ("sessions in the store", lambda m: f"{m['count']:,}"),
    ("import of the newest sample (sessions/s, wall)", lambda m: f"{m['import']['rate']:,.0f}"),
    ("import: this process's CPU per session", lambda m: f"{m['import']['cpu_ms']:.2f} ms"),
    ("raw COPY of the same lines into a bare jsonb table (sessions/s)", lambda m: f"{m['import']['raw']:,.0f}"),
    ("import / raw COPY (rates)", lambda m: f"{m['import']['rate'] / m['import']['raw']:.2f}"),
    (
        "dream over the newest sample (wall, `manage.py dream`; sessions read)",
        lambda m: f"{m['dream']['seconds']:.1f} s ({m['dream']['read']:,})",
    ),
    ("dream: peak RSS of the command", lambda m: f"{m['dream']['rss_mib']:.0f} MiB"),
    ("selecting the newest sample (all sessions)", lambda m: f"{m['select_ms']:.0f} ms"),
    (
        "selecting up to a sample of unconsumed sessions, after that dream",
        lambda m: f"{m['select_unconsumed_ms']:.0f} ms",
    ),
    ("session list, first page (median)", lambda m: f"{m['list_ms']:.0f} ms"),
    ("session list, page 100", lambda m: f"{m['list_page100_ms']:.0f} ms"),
    ("session list, one agent", lambda m: f"{m['list_agent_ms']:.0f} ms"),
    (
        "review queue, first page (pending proposals; their evidence rows)",
        lambda m: f"{m['queue_ms']:.0f} ms ({m['pending']:,}; {m['evidence']:,})",
    ),
    ("review queue, 100 cards on one page", lambda m: f"{m['queue100_ms']:.0f} ms"),
    ("GET /api/v1/ping/ (the trivial endpoint)", lambda m: f"{m['ping_ms']:.1f} ms"),
    ("GET /api/v1/context/ (agent, task, query)", lambda m: f"{m['context_ms']:.1f} ms"),
    ("GET /api/v1/context/ store-wide (query only)", lambda m: f"{m['context_wide_ms']:.1f} ms"),
    ("sessions table per session (heap + TOAST + indexes)", lambda m: f"{m['table_bytes'] / 1024:.1f} KiB"),
    ("sessions table heap per session", lambda m: f"{m['heap_bytes']:.0f} B"),
    ("whole database per session", lambda m: f"{m['db_bytes'] / 1024:.1f} KiB"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--db", default="dreamweb_bench_million")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--keep-db", action="store_true", help="keep the database at the end, to look into it")
    args = parser.parse_args()
    loads = [os.getloadavg()[0]]
    db = ScratchDatabase(args.db)
    try:
        db.create()
        setup_django(db)
        team, store, user, raw_key = seed()
        first = sample_file(args.sample, phase=1, start=datetime(2026, 6, 1, tzinfo=UTC))
        second = sample_file(args.sample, phase=2, start=datetime(2026, 11, 1, tzinfo=UTC))
        small = {"import": import_sample(db, team, first, args.sample)}
        small.update(measure(db, team, store, user, raw_key, args.sample, args.requests))
        print("at 10k:", json.dumps(small, default=str), flush=True)
        loads.append(os.getloadavg()[0])
        filled = fill(db, first, args.sessions - args.sample, team.pk)
        print(f"fill: {json.dumps(filled)}", flush=True)
        loads.append(os.getloadavg()[0])
        big = {"import": import_sample(db, team, second, args.sample)}
        big.update(measure(db, team, store, user, raw_key, args.sample, args.requests))
        print("at 1M:", json.dumps(big, default=str), flush=True)
        loads.append(os.getloadavg()[0])
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            db.drop()
    lines = [
        f"| figure | {small['count']:,} sessions | {big['count']:,} sessions |",
        "|---|---:|---:|",
        *(f"| {label} | {get(small)} | {get(big)} |" for label, get in ROWS),
    ]
    print("\n".join(lines))
    print(f"fill: {filled['sessions']:,} sessions in {filled['seconds']:.0f} s ({filled['rate']:,.0f}/s)")
    if args.write_docs:
        write_docs(lines, filled, args, loads)


def write_docs(table: list[str], filled: dict, args, loads: list[float]) -> None:
    docs = ROOT / "docs" / "benchmarks.md"
    intro = (
        "`bench/million_sessions.py`: one store filled to a million sessions in one scratch database, every figure "
        f"measured at {args.sample:,} sessions and again at {args.sessions:,}, in one run. The newest "
        f"{args.sample:,} sessions at each size are realistic (demo data, 15-48 events, ~4 KB) and imported with "
        "the import command's code (memory.importing, in the benchmark's process, as the application role under "
        "row-level security); the sessions between are written by the server itself from 200 realistic templates "
        f"(INSERT ... SELECT over generate_series: {filled['sessions']:,} sessions in {filled['seconds']:.0f} s, "
        f"{filled['rate']:,.0f}/s, then VACUUM ANALYZE in {filled['vacuum']:.0f} s). The dream is `manage.py dream "
        f"--max-sessions {args.sample}` (rules analyzer, tasks in-process); pages go through the Django test client "
        f"(full middleware, no network), medians of {args.requests} requests. The database is dropped at the end."
    )
    machine = (
        f"Machine: {os.cpu_count()} cores shared with other work (1-minute load average {min(loads):.1f} to "
        f"{max(loads):.1f} during the run), Python {platform.python_version()}, PostgreSQL on the same machine; "
        f"measured {datetime.now(UTC):%Y-%m-%d}. Wall-clock figures under that load are noisy and pessimistic; "
        "compare the two columns, measured minutes apart, not with figures from other runs."
    )
    section = (
        "\n".join(
            [
                SECTION,
                "",
                textwrap.fill(intro, 120, break_on_hyphens=False),
                "",
                *table,
                "",
                textwrap.fill(machine, 120, break_on_hyphens=False),
            ]
        )
        + "\n"
    )
    text = docs.read_text()
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
