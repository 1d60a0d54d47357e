"""Benchmark: the review queue page with 10,000 pending proposals, the decided view with as many decided ones, and
the approve round trip.

Creates a scratch PostgreSQL database (as the owner role), migrates it, seeds one team with 10,000 pending
proposals (three evidence rows each with their context lines, a quarter of them updates of existing entries) and
as many decided ones (applied by a reviewer or by the store's policy, rejected with a reason, conflicts), and drives
the pages in-process
with the Django test client as the application role (row-level security in force, the full middleware stack):
server time, without the network. Medians of several requests after warm-up. The database is dropped at the end.

    .venv/bin/python bench/review_queue.py [--proposals 10000] [--requests 15] [--approvals 30] [--heavy 20]

``--heavy 20`` gives the 20 proposals of the first page ``--evidence`` (600) evidence rows each, over as many
sessions (the million-session bench found patterns seen in hundreds of sessions): the queue must not grow with them.

Environment: DATABASE_URL (app role) and DATABASE_OWNER_URL (owner role) of the PostgreSQL server.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import psycopg
from _scratch import ScratchDatabase, scratch_database

ROOT = Path(__file__).resolve().parent.parent
WORDS = """
deploy release migration database index cache retry timeout token budget branch merge review lint test docker compose
secret rotate backup restore schema queue worker celery redis postgres latency rollback feature flag canary incident
""".split()  # noqa: SIM905 - a word list reads better as text


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def setup_django(db: ScratchDatabase) -> None:
    os.environ["DATABASE_URL"] = db.app_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def seed(n: int, *, heavy: int = 0, per_heavy: int = 3):
    """``n`` pending proposals with three evidence rows each, except the ``heavy`` most prevalent (the queue's first
    page), which have ``per_heavy`` rows each (a pattern seen in hundreds of sessions), and as many decided ones."""
    from django.contrib.auth import get_user_model

    from dreamweb import rls
    from dreamweb.models import Membership
    from dreamweb.provenance import content_hash
    from dreamweb.services import create_team
    from memory.models import AgentSession, MemoryEntry, MemoryStore
    from reviews.models import Proposal, ProposalEvidence

    rng = random.Random(11)
    team, _ = create_team("bench", "Bench")
    with rls.team_scope(team):
        store = MemoryStore.objects.create(team=team, slug="main", name="Main")
        user = get_user_model().objects.create_user("reviewer", password="x")
        Membership.objects.create(team=team, user=user, role="reviewer")
        sessions = AgentSession.objects.bulk_create(
            AgentSession(
                team=team,
                external_id=f"s-{i:05d}",
                agent=f"agent-{i % 12}",
                task="t",
                events=[{"type": "message", "role": "user", "content": sentence(rng, 40)}] * 20,
                event_count=20,
            )
            for i in range(max(300, per_heavy))
        )
        updates = n // 4
        entries = MemoryEntry.objects.bulk_create(
            MemoryEntry(
                team=team,
                store=store,
                key=f"entry-{i:05d}",
                content=(text := sentence(rng, 25)),
                content_hash=content_hash(text),
            )
            for i in range(updates)
        )
        proposals = []
        for i in range(n):
            is_update = i < updates
            entry = entries[i] if is_update else None
            proposals.append(
                Proposal(
                    team=team,
                    store=store,
                    operation="update" if is_update else "add",
                    targets=[entry.key] if entry else [],
                    target_hashes={entry.key: entry.content_hash} if entry else {},
                    content=sentence(rng, 25),
                    key_hint="" if entry else f"new-{i}",
                    kind=rng.choice(["corrected_command", "preference", "tool_failure", "rediscovered_knowledge"]),
                    rationale=sentence(rng, 20),
                    # The heavy ones above every other: they make the first page.
                    prevalence_sessions=61 if i >= n - heavy else rng.randint(3, 60),
                    prevalence_of=60,
                    confidence=rng.random(),
                    risk=rng.choice(["low", "low", "medium", "high"]),
                    scope_agent=rng.choice([None, None, f"agent-{i % 12}"]),
                    signature=f"sig-{i}",
                )
            )
        proposals = Proposal.objects.bulk_create(proposals, batch_size=2000)
        ProposalEvidence.objects.bulk_create(
            (
                ProposalEvidence(
                    team=team,
                    proposal=p,
                    session=sessions[(p.pk * 7 + k) % len(sessions)],
                    event_index=k,
                    excerpt=sentence(rng, 12),
                    trust="tool",
                    context=[[k, "call bash", sentence(rng, 10)], [k + 1, "result (failed)", sentence(rng, 14)]],
                )
                for p in proposals
                for k in range(per_heavy if p.prevalence_sessions == 61 else 3)
            ),
            batch_size=5000,
        )
        _decided(team, store, user, rng, n)
    return user, proposals


def _decided(team, store, user, rng, n: int) -> None:
    """``n`` decided proposals: a third applied (half by a reviewer, half by the policy), a third rejected with a
    reason, the rest conflicts, decided over the last 60 days."""
    from datetime import timedelta

    from django.utils import timezone

    from reviews.models import Proposal

    now = timezone.now()
    rows = []
    for i in range(n):
        status = ("applied", "rejected", "conflict")[i % 3]
        by_policy = status == "applied" and i % 2 == 0
        rows.append(
            Proposal(
                team=team,
                store=store,
                operation="add",
                content=sentence(rng, 20),
                key_hint=f"decided-{i}",
                kind="preference",
                rationale=sentence(rng, 12),
                prevalence_sessions=rng.randint(3, 60),
                prevalence_of=60,
                confidence=rng.random(),
                status=status,
                decided_by=None if by_policy else user,
                decided_by_policy="auto_low_risk" if by_policy else "",
                decided_at=now - timedelta(minutes=rng.randint(1, 60 * 24 * 60)),
                decision_reason=sentence(rng, 10) if status != "applied" else "",
                signature=f"decided-sig-{i}",
            )
        )
    Proposal.objects.bulk_create(rows, batch_size=2000)


def vacuum_analyze(db: ScratchDatabase) -> None:
    """What autovacuum does on a live system: statistics and the visibility map (only the owner may run it)."""
    with psycopg.connect(db.owner_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def median_ms(fn, requests: int, warmup: int = 3) -> tuple[float, float, float]:
    """Median and p90 wall time, and median CPU time of this process (Django's share; PostgreSQL's is the rest)."""
    for _ in range(warmup):
        fn()
    times, cpu = [], []
    for _ in range(requests):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9) - 1], statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proposals", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--approvals", type=int, default=30)
    parser.add_argument("--db", default="dreamweb_bench_h3")
    parser.add_argument("--heavy", type=int, default=0, help="proposals (the first page) with --evidence rows each")
    parser.add_argument("--evidence", type=int, default=600, help="evidence rows of each --heavy proposal")
    args = parser.parse_args()

    with scratch_database(args.db) as db:
        setup_django(db)
        t0 = time.perf_counter()
        user, proposals = seed(args.proposals, heavy=args.heavy, per_heavy=args.evidence if args.heavy else 3)
        vacuum_analyze(db)
        print(f"seeded {len(proposals)} pending and as many decided proposals in {time.perf_counter() - t0:.1f} s")

        from django.test import Client

        client = Client()
        client.force_login(user)

        def get(params=None, path="/reviews/", marker=b'id="card-', **headers):
            def run():
                response = client.get(path, params or {}, **headers)
                assert response.status_code == 200, response.status_code
                assert marker in response.content

            return run

        rows = []
        for label, params, headers in [
            ("queue, first page (most sessions)", {}, {}),
            ("queue, sorted by confidence", {"sort": "confidence"}, {}),
            ("queue, high risk of one agent scope", {"risk": "high", "agent": "agent-3"}, {}),
            ("queue, page 200 (htmx partial)", {"page": 200}, {"HTTP_HX_REQUEST": "true"}),
            ("queue, 100 cards per page", {"per": 100}, {}),
        ]:
            rows.append((label, *median_ms(get(params, **headers), args.requests)))
        for label, params in [
            ("decided view, first page (50 rows)", {}),
            ("decided view, applied by a policy", {"by": "policy"}),
            ("decided view, conflicts, page 20", {"status": "conflict", "page": 20}),
        ]:
            rows.append(
                (label, *median_ms(get(params, path="/reviews/decided/", marker=b"data-decided"), args.requests))
            )

        # Approve round trip: POST with htmx, the service applies (one entry version), counters re-computed.
        pool = [p for p in proposals if p.operation == "update"][: args.approvals // 2]
        pool += [p for p in proposals if p.operation == "add"][: args.approvals - len(pool)]
        random.Random(3).shuffle(pool)
        times, cpu = [], []
        for p in pool:
            start, start_cpu = time.perf_counter(), time.process_time()
            response = client.post(f"/reviews/proposals/{p.pk}/approve/", {"next": "/reviews/"}, HTTP_HX_REQUEST="true")
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
            assert response.status_code == 200 and b"Approved and applied" in response.content, response.content[:300]
        times.sort()
        label = f"approve round trip ({len(pool)} cards, htmx)"
        rows.append((label, statistics.median(times), times[int(len(times) * 0.9) - 1], statistics.median(cpu)))

        print(f"load average before: {os.getloadavg()[0]:.1f}")
        n = f"{args.proposals:,}"
        heavy = f"; the first {args.heavy} with {args.evidence} evidence rows each" if args.heavy else ""
        print(f"\n| request ({n} pending{heavy}, {n} decided) | median ms | p90 ms | Django CPU ms |")
        print("|---|---:|---:|---:|")
        for label, med, p90, cpu_ms in rows:
            print(f"| {label} | {med:.1f} | {p90:.1f} | {cpu_ms:.1f} |")


if __name__ == "__main__":
    main()
