"""Two agents update one entry at the same moment with the same If-Match, against a live multi-threaded server on
PostgreSQL: exactly one gets 200, the other 412, and the history holds exactly the winner's version."""

from __future__ import annotations

import threading

import httpx
import pytest

from dreamweb.models import AgentKey
from memory.models import MemoryEntry, MemoryVersion
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory, make_entry

pytestmark = [
    pytest.mark.all_teams,
    pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (real concurrent transactions)"),
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]


def test_same_if_match_one_wins_one_412(live_server):
    team = TeamFactory(slug="race")
    store = StoreFactory(team=team, slug="shared", agents_may_write=True)
    entry = make_entry(store, key="deploy", content="Deploy with `make deploy`.")
    _, raw = AgentKey.generate(team=team, name="racer", scopes=["memory:read", "memory:write"], writable_stores=["*"])
    url = f"{live_server.url}/api/v1/stores/shared/entries/deploy/"
    headers = {"Authorization": f"Api-Key {raw}"}

    for round_ in range(3):
        with httpx.Client(headers=headers, timeout=30) as client:
            etag = client.get(url).headers["ETag"]
        barrier = threading.Barrier(2)
        results: dict[int, httpx.Response] = {}

        def writer(i: int) -> None:
            with httpx.Client(headers=headers, timeout=30) as client:
                barrier.wait()
                results[i] = client.put(url, json={"content": f"round {round_} writer {i}"}, headers={"If-Match": etag})

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        statuses = sorted(r.status_code for r in results.values())
        assert statuses == [200, 412], [r.text for r in results.values()]
        winner = next(i for i, r in results.items() if r.status_code == 200)
        loser = results[1 - winner]
        assert loser.json()["code"] == "stale"
        assert loser.headers["ETag"] == results[winner].headers["ETag"]

        entry.refresh_from_db()
        assert entry.content == f"round {round_} writer {winner}"
        assert entry.version == round_ + 2
        versions = list(MemoryVersion.objects.filter(entry=entry).order_by("number").values_list("number", "content"))
        assert [n for n, _ in versions] == list(range(1, round_ + 3))
        assert versions[-1][1] == f"round {round_} writer {winner}"
        assert not any(c == f"round {round_} writer {1 - winner}" for _, c in versions)
    assert MemoryEntry.objects.filter(store=store).count() == 1


# One write of each field kind an agent can change: 20 writers from one ETag, exactly one may win.
FIELD_WRITES = {
    "content": ("PUT", lambda i: {"content": f"writer {i}"}),
    "tags": ("PATCH", lambda i: {"tags": [f"writer-{i}"]}),
    "scope agent": ("PATCH", lambda i: {"scope": {"agent": f"bot-{i}"}}),
    "scope task": ("PATCH", lambda i: {"scope": {"task": f"task-{i}"}}),
    "archive": ("DELETE", lambda i: None),
    "mixed": (None, None),
}
WRITERS = 20


@pytest.mark.parametrize("kind", list(FIELD_WRITES))
def test_twenty_concurrent_writes_from_one_etag_one_wins(live_server, kind):
    team = TeamFactory(slug="race20")
    store = StoreFactory(team=team, slug="shared", agents_may_write=True)
    entry = make_entry(store, key="deploy", content="Deploy with `make deploy`.")
    _, raw = AgentKey.generate(team=team, name="racer", scopes=["memory:read", "memory:write"], writable_stores=["*"])
    url = f"{live_server.url}/api/v1/stores/shared/entries/deploy/"
    headers = {"Authorization": f"Api-Key {raw}"}
    with httpx.Client(headers=headers, timeout=60) as client:
        etag = client.get(url).headers["ETag"]
    kinds = [k for k in FIELD_WRITES if k != "mixed"]
    barrier = threading.Barrier(WRITERS)
    results: dict[int, httpx.Response] = {}

    def writer(i: int) -> None:
        method, body = FIELD_WRITES[kinds[i % len(kinds)] if kind == "mixed" else kind]
        with httpx.Client(headers=headers, timeout=60) as client:
            barrier.wait()
            results[i] = client.request(method, url, json=body(i), headers={"If-Match": etag})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    statuses = sorted(r.status_code for r in results.values())
    assert statuses == [200] + [412] * (WRITERS - 1), [r.text for r in results.values() if r.status_code != 412]
    winner = next(r for r in results.values() if r.status_code == 200)
    assert {r.json()["current_etag"] for r in results.values() if r.status_code == 412} == {winner.headers["ETag"]}
    entry.refresh_from_db()
    assert entry.version == 2
    assert list(MemoryVersion.objects.filter(entry=entry).order_by("number").values_list("number", flat=True)) == [1, 2]


def test_a_key_locked_elsewhere_does_not_hold_its_requests(live_server):
    """The minute's last_used_at write skips a key row another transaction holds (another process's touch, which
    keeps it until its request commits) instead of waiting behind that whole request."""
    from django.db import connection, transaction

    from dreamweb import rls

    team = TeamFactory(slug="touch")
    key, raw = AgentKey.generate(team=team, name="busy", scopes=["memory:read"], writable_stores=["*"])
    locked, release = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic(), rls.team_scope(team):
                AgentKey.objects.select_for_update(no_key=True).get(pk=key.pk)
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert locked.wait(10)
        with httpx.Client(headers={"Authorization": f"Api-Key {raw}"}, timeout=10) as client:
            response = client.get(f"{live_server.url}/api/v1/ping/")  # times out if it waits for the lock
        assert response.status_code == 200
    finally:
        release.set()
        thread.join()
    key.refresh_from_db()
    assert key.last_used_at is None  # skipped, not queued: the other transaction's write is the minute's
