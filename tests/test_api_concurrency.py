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
