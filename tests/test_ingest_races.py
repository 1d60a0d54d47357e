"""Concurrent batches that overlap, sent in opposite orders, never fail: rows are inserted in one order (so two
batches cannot wait for each other's rows in a cycle), and a deadlock that still happens (with rows locked by other
statements of the caller's transaction) is retried inside the service, in a savepoint. Real PostgreSQL transactions."""

from __future__ import annotations

import threading

import httpx
import psycopg
import pytest
from django.db import DatabaseError, OperationalError, connection, connections, transaction

from dreamweb import rls
from dreamweb.models import AgentKey
from memory import sessions as ingest
from memory.models import AgentSession
from memory.sessions import store_batch, validate_session
from tests.api_support import session_doc
from tests.conftest import is_postgres
from tests.factories import TeamFactory

pytestmark = [
    pytest.mark.all_teams,
    pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (real concurrent transactions)"),
    pytest.mark.django_db(transaction=True),
]

IDS = [f"race-{i:03d}" for i in range(100)]


def _clean(ids):
    return [validate_session(session_doc(external_id=eid)) for eid in ids]


def _run_together(*jobs) -> list[BaseException]:
    """Run each job in its own thread (own connection and transaction), started together; return their errors."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job):
        try:
            barrier.wait()
            job()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_opposite_order_batches_never_fail_and_insert_each_id_once():
    team = TeamFactory(slug="ingest-race")
    rounds = 8
    for round_ in range(rounds):
        ids = [f"{eid}-r{round_}" for eid in IDS]
        cleans = {eid: validate_session(_big(eid)) for eid in ids}
        results = {}

        def batch(name, order):
            def job():
                with rls.team_scope(team):
                    results[name] = store_batch(team, [cleans[eid] for eid in order])

            return job

        errors = _run_together(batch("up", ids), batch("down", ids[::-1]))
        assert errors == []
        created = results["up"].created + results["down"].created
        assert sorted(created) == sorted(ids)  # each id created by exactly one of the two
        assert sorted(results["up"].created + results["up"].unchanged) == sorted(ids)
    assert AgentSession.objects.filter(team=team).count() == rounds * len(IDS)


def _big(external_id: str) -> dict:
    """A session of about 20 KB, so that a batch's INSERT lasts long enough for two of them to overlap."""
    doc = session_doc(external_id=external_id)
    doc["events"] += [{"type": "message", "role": "assistant", "content": f"step {i} " * 120} for i in range(20)]
    return doc


def test_the_rows_go_in_in_one_order_whatever_the_batch_order(monkeypatch):
    team = TeamFactory(slug="ingest-order")
    seen = []
    original = ingest._insert_ignoring_existing

    def spy(team, sessions, *rest):
        seen.append([s.fields["external_id"] for s in sessions])
        return original(team, sessions, *rest)

    monkeypatch.setattr(ingest, "_insert_ignoring_existing", spy)
    with rls.team_scope(team):
        store_batch(team, _clean(["b", "c", "a"]))
        store_batch(team, _clean(["e", "a", "d"]))
    assert seen == [["a", "b", "c"], ["d", "e"]]


def _raise_in_postgres(sqlstate: str, raw: bool) -> None:
    """A real error of that SQLSTATE from the server (the statement fails and the transaction is aborted), through
    Django's cursor (a wrapped error) or a raw psycopg cursor (psycopg's own error, as the bulk insert uses)."""
    sql = f"DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}'; END $$"
    if raw:
        import psycopg

        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql)
    with connection.cursor() as cursor:
        cursor.execute(sql)


def _failing_first(monkeypatch, sqlstate: str, times: int, raw: bool = False) -> list[int]:
    """Make the first ``times`` inserts of store_batch fail in PostgreSQL with ``sqlstate``; count the attempts."""
    calls = []
    original = ingest._insert_ignoring_existing

    def flaky(team, sessions, *rest):
        calls.append(len(sessions))
        if len(calls) <= times:
            _raise_in_postgres(sqlstate, raw)
        return original(team, sessions, *rest)

    monkeypatch.setattr(ingest, "_insert_ignoring_existing", flaky)
    return calls


@pytest.mark.parametrize("raw", [False, True], ids=["django-cursor", "psycopg-cursor"])
@pytest.mark.parametrize("deadlocks", [1, ingest.DEADLOCK_ATTEMPTS - 1])
def test_a_deadlock_is_retried_inside_the_service_and_the_callers_transaction_goes_on(monkeypatch, deadlocks, raw):
    team = TeamFactory(slug="ingest-deadlock")
    calls = _failing_first(monkeypatch, "40P01", deadlocks, raw)
    with transaction.atomic(), rls.team_scope(team):
        result = store_batch(team, _clean(["a", "b"]))
        # The caller's transaction is still usable after the failed attempts (they ran in a savepoint).
        assert AgentSession.objects.filter(team=team).count() == 2
    assert sorted(result.created) == ["a", "b"] and result.unchanged == []
    assert calls == [2] * (deadlocks + 1)
    assert AgentSession.objects.filter(team=team).count() == 2


@pytest.mark.parametrize("raw", [False, True], ids=["django-cursor", "psycopg-cursor"])
def test_deadlock_retries_are_bounded(monkeypatch, raw):
    team = TeamFactory(slug="ingest-deadlock-bounded")
    calls = _failing_first(monkeypatch, "40P01", ingest.DEADLOCK_ATTEMPTS, raw)
    with pytest.raises((OperationalError, psycopg.errors.DeadlockDetected), match="injected"), rls.team_scope(team):
        store_batch(team, _clean(["a"]))
    assert len(calls) == ingest.DEADLOCK_ATTEMPTS
    assert not AgentSession.objects.filter(team=team).exists()


@pytest.mark.parametrize("raw", [False, True], ids=["django-cursor", "psycopg-cursor"])
@pytest.mark.parametrize("sqlstate", ["40001", "57014", "23505"])
def test_other_database_errors_are_not_retried(monkeypatch, sqlstate, raw):
    team = TeamFactory(slug="ingest-other-error")
    calls = _failing_first(monkeypatch, sqlstate, 1, raw)
    with pytest.raises((DatabaseError, psycopg.Error), match="injected"), rls.team_scope(team):
        store_batch(team, _clean(["a"]))
    assert calls == [1]


@pytest.mark.live
def test_opposite_order_batches_over_the_api(live_server):
    team = TeamFactory(slug="ingest-api-race")
    _, raw = AgentKey.generate(team=team, name="pusher", scopes=["sessions:write"])
    url = f"{live_server.url}/api/v1/sessions/"
    headers = {"Authorization": f"Api-Key {raw}"}
    for round_ in range(6):
        docs = [_big(f"{eid}-r{round_}") for eid in IDS]
        responses = {}

        def push(name, body):
            def job():
                with httpx.Client(headers=headers, timeout=60) as client:
                    responses[name] = client.post(url, json=body)

            return job

        assert _run_together(push("up", docs), push("down", docs[::-1])) == []
        assert sorted(r.status_code for r in responses.values()) in ([200, 201], [201, 201])
        assert sum(r.json()["created"] for r in responses.values()) == len(IDS)
    assert AgentSession.objects.filter(team=team).count() == 6 * len(IDS)
