"""Real Celery workers on Redis over the PostgreSQL test database.

Two worker processes share one cycle's per-session analyses; then a worker is killed (SIGKILL) in the middle of a
cycle and restarted: the task it held is delivered again (acks_late; the broker gives an unacknowledged task back
after the visibility timeout) and the cycle ends with the same proposals as an uninterrupted one, none twice.
The cycles are started with `manage.py dream` through the queue, exactly as a user would.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings

from reviews.models import DreamRun, Proposal, ProposalEvidence, RunStatus, SessionAnalysis

from .conftest import app_credentials, is_postgres
from .dream_sessions import ingest, mixed_corpus
from .factories import StoreFactory, TeamFactory, make_entry

# The database is flushed: scripts/test points it at one kept for tests (DREAMWEB_TEST_REDIS_URL).
REDIS_URL = os.environ.get("DREAMWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/2")
ROOT = Path(__file__).resolve().parent.parent
N_EACH = 40  # 5 kinds x 40 = 200 sessions, 8 batches of 25


def _redis():
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        client.ping()
        return client
    except Exception:  # noqa: BLE001 - any failure means: no Redis here
        return None


pytestmark = [
    pytest.mark.all_teams,
    pytest.mark.celery_worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not is_postgres(), reason="workers need the PostgreSQL test database"),
]


def _env(queue: str) -> dict:
    db = settings.DATABASES["default"]
    app = app_credentials()  # the workers log in as the application role (the tests' own login is the owner's)
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"postgres://{app['USER']}:{app['PASSWORD']}@{db['HOST'] or '127.0.0.1'}"
            f":{db['PORT'] or 5432}/{db['NAME']}",
            "REDIS_URL": REDIS_URL,
            "DREAMWEB_CELERY_QUEUE": queue,
            # A task held by a dead worker goes back to the queue after 8 s; workers look every second. The lock
            # around that look expires after 5 s (kombu's default is 300 s): a worker killed while holding it would
            # otherwise keep every other worker from restoring anything for five minutes.
            "DREAMWEB_BROKER_TRANSPORT_OPTIONS": json.dumps(
                {
                    "visibility_timeout": 8,
                    "unacked_restore_interval": 1,
                    "unacked_restore_throttle": 1,
                    "unacked_mutex_expire": 5,
                }
            ),
            "DREAMWEB_EXTRA_ANALYZERS": "slow=tests.dream_sessions:slow_rules",
            "DREAMWEB_TEST_ANALYZE_DELAY": "0.04",
            "DREAMWEB_DREAM_BATCH_SIZE": "25",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("DREAMWEB_TEST_DB_NAME", None)
    return env


class Workers:
    def __init__(self, tmp: Path, queue: str):
        self.tmp, self.queue, self.env = tmp, queue, _env(queue)
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(
            [
                str(ROOT / ".venv" / "bin" / "celery"),
                "-A",
                "dreamweb",
                "worker",
                "-Q",
                self.queue,
                "--concurrency=1",
                "-n",
                f"{name}@%h",
                "-l",
                "info",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: SIGKILL takes the pool child with it
        )

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def wait_ready(self, *names: str, timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(" ready." in self.log(n) for n in names):
                return
            for n in names:
                if self.procs[n].poll() is not None:
                    pytest.fail(f"worker {n} exited:\n{self.log(n)[-3000:]}")
            time.sleep(0.2)
        pytest.fail("workers not ready:\n" + "\n".join(self.log(n)[-2000:] for n in names))

    def kill(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)

    def received(self, name: str) -> list[str]:
        return re.findall(r"Task reviews\.tasks\.analyze_sessions\[([0-9a-f-]+)\] received", self.log(name))

    def succeeded(self, name: str) -> list[str]:
        return re.findall(r"Task reviews\.tasks\.analyze_sessions\[([0-9a-f-]+)\] succeeded", self.log(name))


@pytest.fixture
def workers(tmp_path):
    client = _redis()
    if client is None:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    client.flushdb()
    w = Workers(tmp_path, f"dreamtest-{uuid.uuid4().hex[:8]}")
    yield w
    w.stop_all()
    client.flushdb()


@pytest.fixture
def corpus(db):
    team = TeamFactory(slug="acme")
    stores = []
    for slug in ("eng", "eng-copy"):  # two stores with the same memory over the same sessions
        store = StoreFactory(team=team, slug=slug)
        make_entry(store, key="deploy-command", content="Deploy with `make deploy` from the repository root.")
        stores.append(store)
    ingest(team, mixed_corpus("w", n_each=N_EACH))
    return SimpleNamespace(team=team, stores=stores)


def _dream(env: dict, store: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "dream", "--team", "acme", "--store", store, "--analyzer", "slow"]
        + ["--format", "json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen, workers: Workers, timeout: float = 120) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        logs = "\n".join(f"--- {name}\n{workers.log(name)[-4000:]}" for name in workers.procs)
        pytest.fail(f"the dream did not end in {timeout:.0f} s; the workers' logs:\n{logs}")
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out)


def _shape(doc: dict) -> list[tuple]:
    return sorted(
        (
            p["operation"],
            tuple(p["targets"]),
            p["content"] or "",
            p["prevalence"]["sessions"],
            p["prevalence"]["of"],
            tuple(p["supporting_sessions"]),
            p["risk"],
            p["status"],
        )
        for p in doc["proposals"]
    )


def _assert_nothing_twice(run: DreamRun, n: int) -> None:
    assert SessionAnalysis.objects.filter(run=run).count() == n
    assert (run.sessions_analysed, run.sessions_failed) == (n, 0)
    signatures = list(Proposal.objects.filter(run=run).values_list("signature", flat=True))
    assert len(signatures) == len(set(signatures))
    pairs = list(
        ProposalEvidence.objects.filter(proposal__run=run).values_list("proposal_id", "session_id", "event_index")
    )
    assert len(pairs) == len(set(pairs))


def test_two_workers_share_a_cycle_and_a_killed_worker_changes_nothing(workers, corpus):
    n = 5 * N_EACH
    workers.start("alpha")
    workers.start("beta")
    workers.wait_ready("alpha", "beta")

    # 1. One uninterrupted cycle, its analyses shared by the two worker processes.
    first = _finish(_dream(workers.env, "eng"), workers)
    assert first["run"]["status"] == "succeeded" and first["run"]["sessions_analysed"] == n
    by_alpha, by_beta = len(workers.received("alpha")), len(workers.received("beta"))
    assert by_alpha > 0 and by_beta > 0, (by_alpha, by_beta)
    assert len(set(workers.received("alpha")) | set(workers.received("beta"))) == n // 25  # 8 batches
    run1 = DreamRun.objects.get(pk=first["run"]["id"])
    _assert_nothing_twice(run1, n)
    assert first["proposals"]

    # 2. The same cycle over the copy store; alpha is killed in the middle of it, then started again.
    before = set(workers.received("alpha"))
    proc = _dream(workers.env, "eng-copy")
    deadline = time.monotonic() + 60
    run2 = None
    while time.monotonic() < deadline:
        run2 = DreamRun.objects.filter(store=corpus.stores[1]).first()
        # Kill alpha while it holds a batch: received and not yet done (a batch takes about a second).
        holding = (set(workers.received("alpha")) - before) - set(workers.succeeded("alpha"))
        if run2 and run2.sessions_analysed >= 50 and holding:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the second cycle did not get going")
    workers.kill("alpha")
    in_flight = (set(workers.received("alpha")) - before) - set(workers.succeeded("alpha"))
    time.sleep(1)
    workers.start("alpha2")
    workers.wait_ready("alpha2")
    second = _finish(proc, workers)
    run2.refresh_from_db()
    assert run2.status == RunStatus.SUCCEEDED
    _assert_nothing_twice(run2, n)
    assert _shape(second) == _shape(first)
    # The task alpha held when it died was delivered again and finished by a live worker.
    assert in_flight, "alpha was killed between two tasks; the kill proved nothing"
    done_elsewhere = set(workers.succeeded("beta")) | set(workers.succeeded("alpha2"))
    assert in_flight <= done_elsewhere
