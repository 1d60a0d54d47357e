"""A run whose process died does not hold its store; a second run is refused in one line; a failed session is named.

An in-process run (no broker) records its process: if that process is gone (killed, crashed), nothing will ever
finish the run, so the next start marks it failed in words and goes on (its sessions are read again). A run whose
process still lives, or that a worker runs, keeps the store."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from reviews import dreams
from reviews.models import DreamRun, RunStatus
from tests.dream_sessions import ingest, mixed_corpus
from tests.factories import StoreFactory
from tests.scoping import no_scope

pytestmark = pytest.mark.all_teams


@pytest.fixture
def store(db):
    store = StoreFactory(slug="eng")
    ingest(store.team, mixed_corpus("a", n_each=1))
    return store


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def going(store, process, status=RunStatus.RUNNING):
    import socket

    options = {"max_sessions": 100}
    if process is not None:
        options["process"] = {"host": socket.gethostname(), **process}
    return DreamRun.objects.create(team=store.team, store=store, status=status, options=options)


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AGGREGATING])
def test_a_run_whose_process_died_is_failed_in_words_and_the_store_dreams_again(store, status, cycle):
    dead = going(store, {"pid": dead_pid()}, status)
    run = cycle(store)
    assert run.status in RunStatus.finished()
    dead.refresh_from_db()
    assert dead.status == RunStatus.FAILED and dead.finished_at is not None
    assert dead.error.startswith("Stopped: the process that ran it") and "read again" in dead.error


def test_a_run_whose_process_lives_still_holds_the_store(store):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        going(store, {"pid": child.pid})
        with pytest.raises(dreams.RunInProgress):
            dreams.start_run(store)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("process", [None, {"pid": 1, "host": "another-machine"}])
def test_a_run_of_a_worker_or_of_another_machine_still_holds_the_store(store, process):
    run = going(store, None)
    if process:
        run.options["process"] = process
        run.save()
    with pytest.raises(dreams.RunInProgress):
        dreams.start_run(store)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


@pytest.mark.django_db(transaction=True)  # the command waits for its run outside any transaction
def test_a_second_dream_command_is_refused_in_one_line(store):
    going(store, None)
    with no_scope(), pytest.raises(CommandError) as refused:
        call_command("dream", "--team", store.team.slug, "--store", "eng", stdout=io.StringIO(), stderr=io.StringIO())
    assert str(refused.value).startswith("not started: dream #") and "still running" in str(refused.value)


def test_a_partial_runs_error_names_the_session_that_failed(store, cycle):
    from reviews.analysis import registry
    from reviews.analysis.rules import analyze

    def flaky(doc, served=()):
        if doc["external_id"] == "a-cmd-0":
            raise ValueError("this one is broken")
        return analyze(doc, served=served)

    registry.register("flaky", lambda label: registry.Analyzer("flaky", label, flaky))
    try:
        run = cycle(store, analyzer="flaky")
    finally:
        registry.unregister("flaky")
    assert run.status == RunStatus.PARTIAL
    assert "first: session a-cmd-0: ValueError: this one is broken" in run.error, run.error
