"""Blind probe: a dream run's life when things go wrong.

The model endpoint failing for some sessions (500, timeout, 429, reset, garbage), the endpoint down, dry runs that
fail, two runs of one store at once, sessions pushed during a run, a process killed mid-run, Redis down, a Celery
worker killed mid-run. Expectations come from docs/api.md, docs/dream-pipeline.md, docs/llm-servers.md,
docs/deploy.md, contracts/README.md and what a demanding operator expects.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings
from django.core.management import call_command

from reviews.models import DreamRun, Proposal, SessionAnalysis

from .api_support import Api, make_key
from .conftest import app_credentials, is_postgres
from .dream_sessions import corrected_command, ingest, mixed_corpus, session_doc
from .factories import StoreFactory, TeamFactory
from .scoping import all_teams, no_scope

pytestmark = [pytest.mark.all_teams]

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).parent / "data" / "dream-output.schema.json").read_text())
REDIS_URL = os.environ.get("DREAMWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/10")
GOING = ("queued", "running", "aggregating")


# --------------------------------------------------------------------------------------------- a faulty model server


class ModelServer:
    """An OpenAI-compatible chat completions server whose answer is chosen per session (external id in the prompt).

    modes: ok, e500 (HTTP 500 always), e429 (429 always, Retry-After 1), e429_once (429 once then ok), reset (TCP
    reset, no answer), timeout (sleeps past the client's timeout), garbage (200 with an HTML body), slow (ok after
    ``slow_delay`` seconds)."""

    def __init__(self):
        self.modes: dict[str, str] = {}
        self.slow_delay = 1.5
        self.sleep = 2.5
        self.requests = 0
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests += 1
                mode, session = fake.mode_of(body)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
                    fake.respond(self, mode, session)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def mode_of(self, body: dict) -> tuple[str, str]:
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
        for external_id in sorted(self.modes, key=len, reverse=True):
            if external_id in text:
                return self.modes[external_id], external_id
        return "ok", ""

    @staticmethod
    def _send(handler, status: int, payload, *, headers=None, raw: bytes | None = None):
        data = raw if raw is not None else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "text/html" if raw is not None else "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def completion(content: str) -> dict:
        return {
            "id": "chatcmpl-probe",
            "object": "chat.completion",
            "created": 1735689600,
            "model": "gpt-fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }

    def respond(self, handler, mode: str, session: str):
        if mode == "e429_once":
            with self._lock:
                self._seen[session] = self._seen.get(session, 0) + 1
                first = self._seen[session] == 1
            mode = "e429" if first else "ok"
        if mode == "e500":
            return self._send(handler, 500, {"error": {"message": "upstream exploded", "type": "server_error"}})
        if mode == "e429":
            return self._send(
                handler,
                429,
                {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
                headers={"Retry-After": "1"},
            )
        if mode == "reset":
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.connection.close()
            handler.close_connection = True
            return None
        if mode == "timeout":
            time.sleep(self.sleep)
            return self._send(handler, 200, self.completion('{"findings": []}'))
        if mode == "trickle":  # a server that keeps the connection busy with a byte now and then
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "4000")
            handler.end_headers()
            for _ in range(60):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.25)
            return None
        if mode == "garbage":
            return self._send(handler, 200, None, raw=b"<html><body>502 Bad Gateway (nginx)</body></html>")
        if mode == "slow":
            time.sleep(self.slow_delay)
        return self._send(handler, 200, self.completion('{"findings": []}'))


@pytest.fixture
def model():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm(settings, model):
    settings.OPENAI_BASE_URL = model.base_url
    settings.OPENAI_API_KEY = "sk-test-not-a-real-key"
    settings.DREAMWEB_LLM_MODEL = "gpt-fake"
    settings.DREAMWEB_LLM_TIMEOUT = 1.0
    settings.DREAMWEB_LLM_MAX_RETRIES = 0
    return model


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ------------------------------------------------------------------------------------------------ in-process world


class World:
    def __init__(self, n_ok=3, bad=("bad-0",), prefix="rf"):
        self.team = TeamFactory(slug=f"{prefix}-team")
        self.store = StoreFactory(team=self.team, slug="eng")
        self.key = make_key(self.team, "probe")
        self.api = Api(self.key)
        docs = [session_doc(f"ok-{i}", corrected_command(i), minute=i) for i in range(n_ok)]
        docs += [session_doc(b, corrected_command(10 + j), minute=20 + j) for j, b in enumerate(bad)]
        ingest(self.team, docs)


@pytest.fixture
def world(db):
    return World()


def start(world, capture, **body):
    """POST /stores/eng/dreams/ and let the run go to its end in this process (tasks run on commit)."""
    with no_scope(), capture(execute=True):
        response = world.api.post("/api/v1/stores/eng/dreams/", {"analyzer": "openai", **body})
    assert response.status_code == 202, response.content[:500]
    run = world.api.get(f"/api/v1/dream-runs/{response.json()['id']}/")
    assert run.status_code == 200
    return run.json()


# ---------------------------------------------------------------------------------------- the model failing per session


def test_http_500_for_one_session_run_is_partial_with_the_others_analysed(
    world, llm, django_capture_on_commit_callbacks
):
    """A 500 for one session fails that session only: the run is partial, the other three are analysed."""
    llm.modes["bad-0"] = "e500"
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("partial", 3, 1)


def test_http_500_run_error_names_the_failed_session_and_why(world, llm, django_capture_on_commit_callbacks):
    """The run's `error` (all the API gives an operator about a run) should say in words which session failed and
    why (its external id and the server's 500), so the operator need not dig in the database."""
    llm.modes["bad-0"] = "e500"
    run = start(world, django_capture_on_commit_callbacks)
    error = run.get("error") or ""
    assert "bad-0" in error and ("500" in error or "InternalServerError" in error), repr(error)


def test_failed_session_is_read_again_by_the_next_run(world, llm, django_capture_on_commit_callbacks):
    """A session the model failed on is not consumed: once the model is fixed, the next default run reads exactly that
    session (and not the three already analysed)."""
    llm.modes["bad-0"] = "e500"
    start(world, django_capture_on_commit_callbacks)
    llm.modes.clear()
    second = start(world, django_capture_on_commit_callbacks)
    assert (second["sessions_selected"], second["sessions_analysed"], second["status"]) == (1, 1, "succeeded")


def test_timeout_for_one_session_run_is_partial_with_the_others_analysed(
    world, llm, django_capture_on_commit_callbacks
):
    """A model that times out on one session (DREAMWEB_LLM_TIMEOUT) fails that session only."""
    llm.modes["bad-0"] = "timeout"
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("partial", 3, 1)


def test_timeout_run_error_says_timeout(world, llm, django_capture_on_commit_callbacks):
    """docs/llm-servers.md: the session fails with the SDK's APITimeoutError; the run should say so in its error."""
    llm.modes["bad-0"] = "timeout"
    run = start(world, django_capture_on_commit_callbacks)
    assert "timeout" in (run.get("error") or "").lower(), repr(run.get("error"))


def test_429_with_retry_after_once_is_retried_and_analysed(world, llm, settings, django_capture_on_commit_callbacks):
    """A 429 with Retry-After: 1 once, with DREAMWEB_LLM_MAX_RETRIES=2: the request is retried after the wait and the
    session is analysed; nothing fails."""
    settings.DREAMWEB_LLM_MAX_RETRIES = 2
    settings.DREAMWEB_LLM_TIMEOUT = 5.0
    llm.modes["bad-0"] = "e429_once"
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("succeeded", 4, 0)


def test_persistent_429_fails_the_session_with_rate_limit_in_words(world, llm, django_capture_on_commit_callbacks):
    """A model that keeps answering 429 fails that session; the run's error says it was rate limited (429)."""
    llm.modes["bad-0"] = "e429"
    run = start(world, django_capture_on_commit_callbacks)
    error = (run.get("error") or "").lower()
    assert run["sessions_failed"] == 1 and ("429" in error or "rate" in error), (run["sessions_failed"], error)


def test_connection_reset_for_one_session_run_is_partial(world, llm, django_capture_on_commit_callbacks):
    """A connection reset by the model server fails that session only; the run goes on and ends partial."""
    llm.modes["bad-0"] = "reset"
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("partial", 3, 1)


def test_html_body_instead_of_json_for_one_session_run_is_partial(world, llm, django_capture_on_commit_callbacks):
    """A 200 with an HTML body (a proxy's error page) is no answer: that session fails, the others are analysed."""
    llm.modes["bad-0"] = "garbage"
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("partial", 3, 1)


def test_trickling_server_is_cut_off_at_the_timeout(world, llm, django_capture_on_commit_callbacks):
    """docs/llm-servers.md: DREAMWEB_LLM_TIMEOUT is for the request whole; a server that trickles a byte every 0.25 s
    (for 15 s) is cut off at it (1 s): the run ends partial well before the trickle would end (8 s bound)."""
    llm.modes["bad-0"] = "trickle"
    started = time.monotonic()
    run = start(world, django_capture_on_commit_callbacks)
    took = time.monotonic() - started
    assert (run["status"], run["sessions_failed"]) == ("partial", 1) and took < 8.0, (run["status"], round(took, 1))


def test_api_dry_run_with_model_down_consumes_nothing(
    world, model_down, settings, model, django_capture_on_commit_callbacks
):
    """POST .../dreams/ with dry_run that fails (model down) consumes nothing: the next real run reads all four."""
    start(world, django_capture_on_commit_callbacks, dry_run=True)
    settings.OPENAI_BASE_URL = model.base_url
    run = start(world, django_capture_on_commit_callbacks)
    assert run["sessions_selected"] == 4, run


def test_api_dry_run_with_model_down_writes_no_proposal(world, model_down, django_capture_on_commit_callbacks):
    """A dry run started through the API never persists proposals, even when it fails."""
    start(world, django_capture_on_commit_callbacks, dry_run=True)
    with all_teams():
        assert Proposal.objects.count() == 0


def test_counts_add_up_for_a_partial_run(world, llm, django_capture_on_commit_callbacks):
    """sessions_selected = sessions_analysed + sessions_failed, whatever failed how."""
    world2 = ["bad-1", "bad-2"]
    ingest(world.team, [session_doc(b, corrected_command(30 + i), minute=40 + i) for i, b in enumerate(world2)])
    llm.modes.update({"bad-0": "e500", "bad-1": "reset", "bad-2": "garbage"})
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["sessions_selected"], run["sessions_analysed"], run["sessions_failed"]) == (6, 3, 3)


# ------------------------------------------------------------------------------------------- the model down entirely


@pytest.fixture
def model_down(settings):
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{_closed_port()}/v1"
    settings.OPENAI_API_KEY = "sk-test-not-a-real-key"
    settings.DREAMWEB_LLM_MODEL = "gpt-fake"
    settings.DREAMWEB_LLM_TIMEOUT = 1.0
    settings.DREAMWEB_LLM_MAX_RETRIES = 0


def test_model_down_run_is_failed_not_succeeded(world, model_down, django_capture_on_commit_callbacks):
    """Every session failing (the endpoint refuses connections) ends the run `failed`, never `succeeded`/`partial`."""
    run = start(world, django_capture_on_commit_callbacks)
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("failed", 0, 4)


def test_model_down_run_error_says_connection(world, model_down, django_capture_on_commit_callbacks):
    """The failed run's error says why in words: the model endpoint could not be reached (a connection error)."""
    run = start(world, django_capture_on_commit_callbacks)
    assert "connect" in (run.get("error") or "").lower(), repr(run.get("error"))


def test_model_down_sessions_stay_unconsumed(world, model_down, settings, model, django_capture_on_commit_callbacks):
    """Sessions a failed run could not analyse are read by the next run once the model is back."""
    start(world, django_capture_on_commit_callbacks)
    settings.OPENAI_BASE_URL = model.base_url
    second = start(world, django_capture_on_commit_callbacks)
    assert (second["sessions_selected"], second["sessions_analysed"]) == (4, 4)


def _dry(world):
    out, err = io.StringIO(), io.StringIO()
    failure = None
    with no_scope():
        try:
            call_command(
                "dream", "--team", world.team.slug, "--store", "eng", "--dry-run", "--analyzer", "openai",
                "--format", "json", stdout=out, stderr=err,
            )  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - a failing dry run may raise; what it left is the question
            failure = exc
    return out.getvalue(), err.getvalue(), failure


def test_failing_dry_run_persists_nothing(world, model_down):
    """contracts: `--dry-run` persists nothing, also when every session fails: no run, analysis or proposal row."""
    _dry(world)
    with all_teams():
        counts = (DreamRun.objects.count(), SessionAnalysis.objects.count(), Proposal.objects.count())
    assert counts == (0, 0, 0)


def test_failing_dry_run_does_not_consume_sessions(
    world, model_down, settings, model, django_capture_on_commit_callbacks
):
    """A failed dry run consumes nothing: the first real run afterwards reads all four sessions."""
    _dry(world)
    settings.OPENAI_BASE_URL = model.base_url
    run = start(world, django_capture_on_commit_callbacks)
    assert run["sessions_selected"] == 4


def test_dry_run_with_partial_failures_reports_them(world, llm):
    """A dry run's JSON still says how many sessions failed (`run.sessions_failed`, schema field)."""
    llm.modes["bad-0"] = "e500"
    out, err, failure = _dry(world)
    assert failure is None, f"{failure!r} {err[-500:]}"
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["run"]["sessions_analysed"], doc["run"].get("sessions_failed")) == (3, 1)


# ---------------------------------------------------------------------------------- rerunning: nothing duplicated


def test_rerun_over_the_same_sessions_does_not_duplicate_proposals(db, django_capture_on_commit_callbacks):
    """Two rules runs over the same sessions (--all-sessions): one pending proposal per signature and store."""
    team = TeamFactory(slug="rf-dup")
    StoreFactory(team=team, slug="eng")
    api = Api(make_key(team, "probe"))
    ingest(team, mixed_corpus("d"))
    for _ in range(2):
        with no_scope(), django_capture_on_commit_callbacks(execute=True):
            r = api.post("/api/v1/stores/eng/dreams/", {"all_sessions": True})
        assert r.status_code == 202, r.content[:300]
    with all_teams():
        sigs = list(Proposal.objects.filter(store__slug="eng", status="pending").values_list("signature", flat=True))
    assert sigs and len(sigs) == len(set(sigs)), sigs


# ------------------------------------------------------------------------------- processes: commands, concurrency


def _env(**extra) -> dict:
    db = settings.DATABASES["default"]
    app = app_credentials()
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env.pop("DREAMWEB_TEST_DB_NAME", None)
    env.update(
        {
            "DATABASE_URL": f"postgres://{app['USER']}:{app['PASSWORD']}@{db['HOST'] or '127.0.0.1'}"
            f":{db['PORT'] or 5432}/{db['NAME']}",
            "DREAMWEB_LLM_MODEL": "gpt-fake",
            "OPENAI_API_KEY": "sk-test-not-a-real-key",
            "DREAMWEB_LLM_MAX_RETRIES": "0",
            "DREAMWEB_LLM_TIMEOUT": "3",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def _dream_proc(env, team, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "dream", "--team", team, "--store", "eng", "--format", "json", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(proc, timeout=90) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        return -999, out, err
    return proc.returncode, out, err


def _runs(api, **query) -> list[dict]:
    r = api.get("/api/v1/dream-runs/", {"store": "eng", **query})
    assert r.status_code == 200, r.content[:300]
    return r.json()["results"]


def _wait_going(api, timeout=40) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        going = [r for r in _runs(api) if r["status"] in GOING]
        if going:
            return going[0]
        time.sleep(0.1)
    pytest.fail("no run got going")


needs_pg = pytest.mark.skipif(not is_postgres(), reason="other processes need the PostgreSQL test database")


@pytest.fixture
def pworld(transactional_db, model):
    model.modes.update({f"ok-{i}": "slow" for i in range(4)})
    model.slow_delay = 1.2
    with all_teams():
        team = TeamFactory(slug=f"rfp-{uuid.uuid4().hex[:6]}")
        StoreFactory(team=team, slug="eng")
        key = make_key(team, "probe")
        ingest(team, [session_doc(f"ok-{i}", corrected_command(i), minute=i) for i in range(4)])
    return team, Api(key), _env(OPENAI_BASE_URL=model.base_url)


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_api_refuses_a_second_run_while_a_command_run_is_going(pworld):
    """docs/api.md: POST /stores/{slug}/dreams/ answers 409 when a run of the store is running."""
    team, api, env = pworld
    proc = _dream_proc(env, team.slug, "--analyzer", "openai")
    try:
        _wait_going(api)
        r = api.post("/api/v1/stores/eng/dreams/", {"analyzer": "openai"})
    finally:
        _finish(proc)
    assert r.status_code == 409, (r.status_code, r.content[:300])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_two_commands_at_once_read_each_session_once(pworld):
    """Two `manage.py dream` of one store started together: one runs, the other is refused or queued; never do both
    read (and write proposals from) the same sessions: the runs' sessions_selected add up to 4."""
    team, api, env = pworld
    procs = [_dream_proc(env, team.slug, "--analyzer", "openai") for _ in range(2)]
    for p in procs:
        _finish(p)
    runs = [r for r in _runs(api) if not r["dry_run"]]
    assert sum(r["sessions_selected"] for r in runs) == 4, [
        (r["id"], r["status"], r["sessions_selected"]) for r in runs
    ]


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_a_second_command_while_one_runs_is_not_reported_as_success_with_nothing(pworld):
    """A `manage.py dream` started while another run of the store is going either waits its turn or is refused with
    a non-zero exit and a message saying a run is going; it never runs a second cycle over the same sessions."""
    team, api, env = pworld
    first = _dream_proc(env, team.slug, "--analyzer", "openai")
    try:
        _wait_going(api)
        code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"))
    finally:
        _finish(first)
    refused = code != 0 and re.search(r"running|going|already|in progress", err, re.I)
    waited = code == 0 and json.loads(out)["run"]["sessions_selected"] == 0
    assert refused or waited, (code, out[-300:], err[-500:])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_session_pushed_during_a_run_is_read_by_the_next_run(pworld):
    """A session pushed while a run is going is neither lost nor half-read: the next default run reads exactly it."""
    team, api, env = pworld
    proc = _dream_proc(env, team.slug, "--analyzer", "openai")
    try:
        _wait_going(api)
        time.sleep(0.5)
        pushed = api.post("/api/v1/sessions/", session_doc("late-0", corrected_command(50), minute=59))
        assert pushed.status_code == 201, pushed.content[:300]
    finally:
        code1, _, err1 = _finish(proc)
    assert code1 == 0, err1[-500:]
    code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"))
    assert code == 0, err[-500:]
    assert json.loads(out)["run"]["sessions_selected"] == 1, out[:500]


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_partial_run_json_is_schema_valid_and_counts_the_failure(pworld, model):
    """`dream --format json` of a partial run: one schema document, sessions_failed = 1, status partial."""
    team, api, env = pworld
    model.modes["ok-3"] = "e500"
    code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"))
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["run"].get("sessions_failed"), doc["run"].get("status")) == (1, "partial"), doc["run"]


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_command_exits_non_zero_when_every_session_fails(pworld):
    """An operator's cron wrapper needs the exit status: a run that analysed nothing (model down) is a failure."""
    team, api, env = pworld
    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"))
    assert code != 0, (code, out[-300:])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_killed_in_process_run_does_not_block_the_store_forever(pworld):
    """`manage.py dream` without a broker runs the cycle in its own process. Killed (-9) mid-run, its run row is left
    going; an operator then needs the store to dream again: a new run must be accepted and read the sessions (stale
    run detected or the dead run failed), not refused forever with 409 / 'already running'."""
    team, api, env = pworld
    proc = _dream_proc(env, team.slug, "--analyzer", "openai")
    _wait_going(api)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"), timeout=60)
    assert code == 0 and json.loads(out)["run"]["sessions_analysed"] == 4, (code, out[-300:], err[-500:])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_killed_in_process_run_does_not_stay_running(pworld):
    """After the process running a cycle died and a new dream was asked for, the dead run is not shown as going for
    ever in GET /dream-runs/ (it is marked failed with a reason, or resumed and finished)."""
    team, api, env = pworld
    proc = _dream_proc(env, team.slug, "--analyzer", "openai")
    dead = _wait_going(api)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    _finish(_dream_proc(env, team.slug, "--analyzer", "openai"), timeout=60)
    status = api.get(f"/api/v1/dream-runs/{dead['id']}/").json()["status"]
    assert status not in GOING, status


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_api_409_while_running_is_a_json_error_with_code(pworld):
    """docs/api.md: every error is JSON `{"detail", "code"}`; the 409 for a store already dreaming says so."""
    team, api, env = pworld
    proc = _dream_proc(env, team.slug, "--analyzer", "openai")
    try:
        _wait_going(api)
        r = api.post("/api/v1/stores/eng/dreams/", {"analyzer": "openai"})
    finally:
        _finish(proc)
    body = r.json() if r.headers.get("Content-Type", "").startswith("application/json") else {}
    assert r.status_code == 409 and body.get("detail") and body.get("code"), (r.status_code, r.content[:300])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_agents_changed_while_a_run_is_going_do_not_break_it(pworld):
    """The store's agents changed (PUT /stores/eng/agents/) while its run is going: the run ends succeeded over the
    sessions it selected at its start (4), nothing half-read."""
    team, api, env = pworld
    proc = _dream_proc(env, team.slug, "--analyzer", "openai")
    try:
        _wait_going(api)
        time.sleep(0.5)
        put = api.put("/api/v1/stores/eng/agents/", {"agents": ["other-bot"]})
        assert put.status_code == 200, put.content[:300]
        code, out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            _finish(proc)
    run = _runs(api)[0]
    assert (code, run["status"], run["sessions_analysed"]) == (0, "succeeded", 4), (code, run, err[-400:])


# ------------------------------------------------------------------------------------------------------ Redis down


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_command_with_redis_down_fails_quickly_and_clearly(pworld):
    """REDIS_URL pointing at nothing: `manage.py dream` exits non-zero within a minute with a message naming the
    broker/Redis, instead of hanging or pretending."""
    team, api, env = pworld
    env["REDIS_URL"] = f"redis://127.0.0.1:{_closed_port()}/0"
    started = time.monotonic()
    code, out, err = _finish(_dream_proc(env, team.slug), timeout=60)
    took = time.monotonic() - started
    assert code not in (0, -999) and re.search(r"redis|broker|queue", err, re.I), (code, round(took), err[-500:])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_command_with_redis_down_leaves_no_going_run(pworld):
    """Nothing half-created: a run that could not be enqueued is not left `queued` (it would block the store)."""
    team, api, env = pworld
    env["REDIS_URL"] = f"redis://127.0.0.1:{_closed_port()}/0"
    _finish(_dream_proc(env, team.slug), timeout=60)
    going = [(r["id"], r["status"]) for r in _runs(api) if r["status"] in GOING]
    assert going == [], going


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_api_start_with_redis_down_is_a_json_error_and_no_going_run(pworld, tmp_path):
    """POST /stores/{slug}/dreams/ on a server whose Redis is down: a JSON error (docs/api.md: every error under /api/
    is JSON) with a 5xx status, and no run left queued."""
    team, api, env = pworld
    port = _closed_port()
    env["REDIS_URL"] = f"redis://127.0.0.1:{_closed_port()}/0"
    env["DEBUG"] = "false"
    env["ALLOWED_HOSTS"] = "127.0.0.1,localhost"
    log = open(tmp_path / "web.log", "w")  # noqa: SIM115
    web = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        import httpx

        deadline = time.monotonic() + 40
        resp = None
        while time.monotonic() < deadline:
            try:
                resp = httpx.post(
                    f"http://127.0.0.1:{port}/api/v1/stores/eng/dreams/",
                    json={},
                    headers={"Authorization": f"Api-Key {api.raw}"},
                    timeout=45,
                )
                break
            except httpx.ConnectError:
                time.sleep(0.3)
        assert resp is not None, (tmp_path / "web.log").read_text()[-2000:]
    finally:
        os.killpg(web.pid, signal.SIGKILL)
        web.wait(10)
        log.close()
    going = [(r["id"], r["status"]) for r in _runs(api) if r["status"] in GOING]
    is_json = resp.headers.get("content-type", "").startswith("application/json")
    assert resp.status_code >= 500 and is_json and going == [], (resp.status_code, resp.text[:300], going)


# --------------------------------------------------------------------------------------------- a Celery worker dies


def _redis():
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        client.ping()
        return client
    except Exception:  # noqa: BLE001
        return None


@needs_pg
@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_run_finishes_after_its_only_worker_is_killed_and_another_starts(tmp_path):
    """docs/deploy.md: a batch held by a worker that died goes back to the queue after `visibility_timeout`. Kill the
    only worker (-9) while it holds a batch, start another: the run ends succeeded with every session analysed once."""
    client = _redis()
    if client is None:
        pytest.skip("no Redis")
    client.flushdb()
    queue = f"rfq-{uuid.uuid4().hex[:8]}"
    with all_teams():
        team = TeamFactory(slug=f"rfw-{uuid.uuid4().hex[:6]}")
        StoreFactory(team=team, slug="eng")
        api = Api(make_key(team, "probe"))
        ingest(team, mixed_corpus("w", n_each=4))  # 20 sessions
    env = _env(
        REDIS_URL=REDIS_URL,
        DREAMWEB_CELERY_QUEUE=queue,
        DREAMWEB_BROKER_TRANSPORT_OPTIONS=json.dumps(
            {
                "visibility_timeout": 6,
                "unacked_restore_interval": 1,
                "unacked_restore_throttle": 1,
                "unacked_mutex_expire": 4,
            }
        ),  # fmt: skip
        DREAMWEB_EXTRA_ANALYZERS="slow=tests.dream_sessions:slow_rules",
        DREAMWEB_TEST_ANALYZE_DELAY="0.25",
        DREAMWEB_DREAM_BATCH_SIZE="5",
    )
    procs = {}

    def worker(name):
        logf = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115
        procs[name] = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "celery"), "-A", "dreamweb", "worker", "-Q", queue, "--concurrency=1",
             "-n", f"{name}@%h", "-l", "info", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def log(name):
        return (tmp_path / f"{name}.log").read_text(errors="replace")

    def ready(name, timeout=40):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and " ready." not in log(name):
            time.sleep(0.2)
        assert " ready." in log(name), log(name)[-2000:]

    proc = None
    try:
        worker("one")
        ready("one")
        proc = _dream_proc(env, team.slug, "--analyzer", "slow")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            got = re.findall(r"analyze_sessions\[([0-9a-f-]+)\] received", log("one"))
            done = re.findall(r"analyze_sessions\[([0-9a-f-]+)\] succeeded", log("one"))
            if len(done) >= 1 and set(got) - set(done):
                break
            time.sleep(0.05)
        got = re.findall(r"analyze_sessions\[([0-9a-f-]+)\] received", log("one"))
        done = re.findall(r"analyze_sessions\[([0-9a-f-]+)\] succeeded", log("one"))
        os.killpg(procs["one"].pid, signal.SIGKILL)
        procs["one"].wait(10)
        if not set(got) - set(done):
            pytest.fail("the worker was killed between two batches: the kill proved nothing")
        worker("two")
        ready("two")
        code, out, err = _finish(proc, timeout=75)
        proc = None
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
        client.flushdb()
    run = _runs(api)[0]
    assert (code, run["status"], run["sessions_analysed"], run["sessions_failed"]) == (0, "succeeded", 20, 0), (
        code,
        run,
        err[-500:],
    )


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_refusal_of_a_second_command_is_a_message_not_a_traceback(pworld):
    """A `manage.py dream` refused because a run is going should say so in one clear line (a CommandError), not dump
    a Python traceback on the operator."""
    team, api, env = pworld
    first = _dream_proc(env, team.slug, "--analyzer", "openai")
    try:
        _wait_going(api)
        code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"))
    finally:
        _finish(first)
    assert code != 0 and "Traceback" not in err, (code, err[-800:])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_store_can_dream_again_after_a_redis_down_attempt(pworld):
    """After `manage.py dream` failed because Redis was down, the store is not blocked: a later dream (here in
    process, no broker) runs and reads the four sessions."""
    team, api, env = pworld
    down = dict(env, REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0")
    _finish(_dream_proc(down, team.slug), timeout=60)
    code, out, err = _finish(_dream_proc(env, team.slug), timeout=60)
    assert code == 0 and json.loads(out)["run"]["sessions_selected"] == 4, (code, out[-200:], err[-600:])


@needs_pg
@pytest.mark.django_db(transaction=True)
def test_failed_run_json_is_still_one_schema_document(pworld):
    """contracts: with --format json standard output carries exactly one dream-output document, also when the run
    failed (model down): an operator's script parses it to learn what happened."""
    team, api, env = pworld
    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out, err = _finish(_dream_proc(env, team.slug, "--analyzer", "openai"))
    try:
        doc = json.loads(out)
        jsonschema.validate(doc, SCHEMA)
    except (ValueError, jsonschema.ValidationError) as exc:
        pytest.fail(f"stdout is not one schema document: {exc!r}; stdout={out[:300]!r} stderr={err[-300:]!r}")
    assert doc["run"]["sessions_analysed"] == 0 and doc["run"].get("sessions_failed") == 4, doc["run"]


def _cut_run(tmp_path):
    """A run of 20 sessions on one Celery worker; every other backend of the test database is terminated once the
    first batch succeeded. Returns (the run as the API shows it, number of backends cut, api, team, env, log)."""
    from django.db import connection

    client = _redis()
    if client is None:
        pytest.skip("no Redis")
    client.flushdb()
    queue = f"rfq-{uuid.uuid4().hex[:8]}"
    with all_teams():
        team = TeamFactory(slug=f"rfd-{uuid.uuid4().hex[:6]}")
        StoreFactory(team=team, slug="eng")
        api = Api(make_key(team, "probe"))
        ingest(team, mixed_corpus("c", n_each=4))  # 20 sessions
    env = _env(
        REDIS_URL=REDIS_URL,
        DREAMWEB_CELERY_QUEUE=queue,
        DREAMWEB_EXTRA_ANALYZERS="slow=tests.dream_sessions:slow_rules",
        DREAMWEB_TEST_ANALYZE_DELAY="0.25",
        DREAMWEB_DREAM_BATCH_SIZE="5",
    )
    logf = open(tmp_path / "w.log", "w")  # noqa: SIM115
    w = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "celery"), "-A", "dreamweb", "worker", "-Q", queue, "--concurrency=1",
         "-n", "db@%h", "-l", "info", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    proc = None
    cut = 0
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and " ready." not in (tmp_path / "w.log").read_text(errors="replace"):
            time.sleep(0.2)
        proc = _dream_proc(env, team.slug, "--analyzer", "slow")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if "analyze_sessions" in (tmp_path / "w.log").read_text(errors="replace") and "succeeded" in (
                tmp_path / "w.log"
            ).read_text(errors="replace"):
                break
            time.sleep(0.05)
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            cut = cur.fetchone()[0]
        _finish(proc, timeout=60)
        proc = None
        deadline = time.monotonic() + 30
        run = _runs(api)[0]
        while run["status"] in GOING and time.monotonic() < deadline:
            time.sleep(0.5)
            run = _runs(api)[0]
    finally:
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(10)
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
        client.flushdb()
    return run, cut, api, team, env, (tmp_path / "w.log").read_text(errors="replace")


@needs_pg
@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_run_survives_database_connections_cut_mid_run(tmp_path):
    """The database connection lost for a moment during a run (every backend of the test database terminated while a
    worker analyses batches): the run still ends succeeded with every session analysed (tasks reconnect / retry),
    not stuck going and not losing sessions."""
    run, cut, api, team, env, log = _cut_run(tmp_path)
    assert cut > 0, "no connection was cut"
    assert (run["status"], run["sessions_analysed"], run["sessions_failed"]) == ("succeeded", 20, 0), (
        run.get("error"),
        run,
        log[-1500:],
    )


@needs_pg
@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_sessions_lost_to_a_cut_connection_are_read_by_the_next_run(tmp_path):
    """Whatever a cut connection cost the run, the sessions it did not analyse are not consumed: the next default
    run (here in process) reads exactly those (20 minus the ones analysed)."""
    run, cut, api, team, env, log = _cut_run(tmp_path)
    assert cut > 0, "no connection was cut"
    inproc = dict(env)
    inproc.pop("REDIS_URL", None)
    code, out, err = _finish(_dream_proc(inproc, team.slug, "--analyzer", "rules"), timeout=60)
    assert code == 0, err[-600:]
    assert json.loads(out)["run"]["sessions_selected"] == 20 - run["sessions_analysed"], (run, out[:300])
