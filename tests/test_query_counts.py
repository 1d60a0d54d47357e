# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Query-count baselines: the queue and the memory browser issue the same number of queries for 10 items as for 500
(an N+1 shows up here as a failing test, not in production as a slow page)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dreamweb.provenance import Author
from memory.models import MemoryEntry, MemoryVersion
from memory.services import update_entry
from reviews.models import Proposal, ProposalEvidence
from reviews.views import card_evidence
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def _proposals(store, n: int, sessions) -> None:
    """n pending proposals of every operation, each with three evidence rows, in bulk (fast for 500)."""
    entries = [make_entry(store, key=f"entry-{i}", content=f"old text {i}") for i in range(4)]
    rows = []
    for i in range(n):
        op = ("add", "update", "merge", "remove")[i % 4]
        targets = {"add": [], "update": ["entry-0"], "merge": ["entry-1", "entry-2"], "remove": ["entry-3"]}[op]
        rows.append(
            Proposal(
                team_id=store.team_id,
                store=store,
                operation=op,
                targets=targets,
                target_hashes={e.key: e.content_hash for e in entries if e.key in targets},
                content=None if op == "remove" else f"new text {i}",
                kind="corrected_command",
                rationale="r",
                prevalence_sessions=i % 7 + 1,
                prevalence_of=10,
                confidence=0.5,
                signature=f"sig-{store.pk}-{i}",
                scope_agent="bot" if i % 2 else None,
            )
        )
    created = Proposal.objects.bulk_create(rows)
    ProposalEvidence.objects.bulk_create(
        ProposalEvidence(team_id=store.team_id, proposal=p, session=s, event_index=1, excerpt="x")
        for p in created
        for s in sessions
    )


def _count(client, url, params=None) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params or {})
    assert response.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("params", [{}, {"per": 100}, {"sort": "confidence", "agent": "bot"}])
def test_queue_query_count_does_not_grow_with_the_queue(client, world, params):
    sessions = [SessionFactory(team=world.team_a) for _ in range(3)]
    other_store = world.store_a.__class__.objects.create(team=world.team_a, slug="small")
    big_store = world.store_a
    _proposals(other_store, 10, sessions)
    _proposals(big_store, 500, sessions)
    client.force_login(world.alice)
    url = reverse("reviews:queue")

    small = _count(client, url, {**params, "store": other_store.pk})
    big = _count(client, url, {**params, "store": big_store.pk})
    htmx_small = _count_htmx(client, url, {**params, "store": other_store.pk})
    htmx_big = _count_htmx(client, url, {**params, "store": big_store.pk})

    assert small == big
    assert htmx_small == htmx_big


def _count_htmx(client, url, params) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"<html" not in response.content
    return len(ctx.captured_queries)


def _data_queries(captured) -> list[str]:
    """The queries that read or write rows: not savepoints nor the row-level-security scope statements."""
    skip = ("SAVEPOINT", "RELEASE SAVEPOINT", "SELECT set_config", "SELECT current_setting", "SELECT current_user",
            "BEGIN", "COMMIT")  # fmt: skip
    return [q["sql"] for q in captured if not q["sql"].startswith(skip)]


def test_queue_query_count_baseline(client, world):
    """The absolute number, so that a new query on the page is a conscious change of this figure."""
    _proposals(world.store_a, 30, [SessionFactory(team=world.team_a)])
    client.force_login(world.alice)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("reviews:queue")).status_code == 200
    queries = _data_queries(ctx.captured_queries)
    # session, user, memberships (middleware), memberships (header and page), stores, facets (filter choices,
    # risk counters and the page count in one grouped scan), page, target entries, related proposals (earlier
    # decisions on the same change, the same change in other stores), evidence (sessions and span per card; the
    # first rows of each card; their sessions), recent decisions.
    # The same on SQLite and PostgreSQL (the scope statements are PostgreSQL's only and not counted).
    assert len(queries) == 12, "\n".join(q[:120] for q in queries)


def _evidence_rows(store, per_proposal: int, sessions) -> None:
    """Four pending proposals with ``per_proposal`` evidence rows each, spread over the sessions (some twice)."""
    created = Proposal.objects.bulk_create(
        Proposal(
            team_id=store.team_id,
            store=store,
            operation="add",
            content=f"text {i}",
            key_hint=f"key-{store.slug}-{i}",
            kind="corrected_command",
            prevalence_sessions=3,
            prevalence_of=10,
            confidence=0.5,
            signature=f"ev-{store.pk}-{i}",
        )
        for i in range(4)
    )
    ProposalEvidence.objects.bulk_create(
        ProposalEvidence(
            team_id=store.team_id,
            proposal=p,
            session=sessions[k % len(sessions)],
            event_index=k,
            excerpt=f"x {k}",
            context=[[k, "call bash", "make deploy"]],
        )
        for p in created
        for k in range(per_proposal)
    )


def test_queue_query_count_does_not_grow_with_evidence_rows(client, world):
    """A pattern seen in hundreds of sessions has hundreds of evidence rows: the card loads a bounded number."""
    sessions = [SessionFactory(team=world.team_a) for _ in range(250)]
    few = world.store_a.__class__.objects.create(team=world.team_a, slug="few")
    many = world.store_a
    _evidence_rows(few, 3, sessions[:3])
    _evidence_rows(many, 500, sessions)
    client.force_login(world.alice)
    url = reverse("reviews:queue")

    loaded = []

    def count(sender, instance, **kwargs):
        loaded.append(instance)

    post_init.connect(count, sender=ProposalEvidence)
    try:
        with CaptureQueriesContext(connection) as small:
            html_few = client.get(url, {"store": few.pk}).content.decode()
        with CaptureQueriesContext(connection) as big:
            html_many = client.get(url, {"store": many.pk}).content.decode()
    finally:
        post_init.disconnect(count, sender=ProposalEvidence)

    assert len(small.captured_queries) == len(big.captured_queries)
    # Rows reach Python in a bounded number: 4 cards × 3 rows + 4 × CANDIDATE_ROWS, not 4 × 500.
    assert len(loaded) <= 4 * 3 + 4 * card_evidence.CANDIDATE_ROWS, len(loaded)
    assert "Evidence from 3 sessions" in html_few and "Evidence from 250 sessions" in html_many
    # Each session has a second row far beyond the rows a card loads: the "+1" comes from the database's count.
    assert "247 more sessions" in html_many and "+1 more event" in html_many


def _entries(store, n: int) -> None:
    now_entries = [
        MemoryEntry(
            team_id=store.team_id,
            store=store,
            key=f"key-{i:04d}",
            content=f"content {i}",
            content_hash=f"{i:064d}",
            scope_agent="bot" if i % 3 == 0 else None,
        )
        for i in range(n)
    ]
    MemoryEntry.objects.bulk_create(now_entries)


def test_memory_browser_query_counts_do_not_grow(client, world):
    small_store = world.store_a.__class__.objects.create(team=world.team_a, slug="small")
    _entries(small_store, 10)
    _entries(world.store_a, 500)
    client.force_login(world.victor)

    assert _count(client, reverse("memory:entries", args=[small_store.pk]), {"per": 500}) == _count(
        client, reverse("memory:entries", args=[world.store_a.pk]), {"per": 500}
    )
    assert _count(client, reverse("memory:entries", args=[small_store.pk]), {"q": "content", "scope": "bot"}) == _count(
        client, reverse("memory:entries", args=[world.store_a.pk]), {"q": "content", "scope": "bot"}
    )
    # The store list: one row per store, the counts in the same query.
    for i in range(20):
        world.store_a.__class__.objects.create(team=world.team_a, slug=f"extra-{i}")
    few = _count(client, reverse("memory:stores"))
    for i in range(20, 60):
        world.store_a.__class__.objects.create(team=world.team_a, slug=f"extra-{i}")
    assert _count(client, reverse("memory:stores")) == few


def test_entry_history_query_count_does_not_grow_with_versions(client, world):
    session = SessionFactory(team=world.team_a)

    def entry_with(versions: int, key: str):
        entry = make_entry(world.store_a, key=key, content="v1")
        for n in range(2, versions + 1):
            entry = update_entry(
                entry, base_hash=entry.content_hash, author=Author.person(world.alice), content=f"v{n}"
            )
        MemoryVersion.objects.filter(entry=entry).update(session=session)
        return entry

    short, long = entry_with(3, "short"), entry_with(40, "long")
    client.force_login(world.victor)
    assert _count(client, reverse("memory:entry", args=[short.pk])) == _count(
        client, reverse("memory:entry", args=[long.pk])
    )


def test_decision_query_count_does_not_grow_with_evidence(client, world):
    few = make_proposal(world.store_a, content="few", evidence_count=1)
    many = make_proposal(world.store_a, content="many", evidence_count=30)
    client.force_login(world.alice)

    def approve(p) -> int:
        with CaptureQueriesContext(connection) as ctx:
            response = client.post(reverse("reviews:approve", args=[p.pk]), HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        return len(ctx.captured_queries)

    assert approve(few) == approve(many)
