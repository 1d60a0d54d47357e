"""import_sessions: idempotent on external_id, line-numbered rejections, stdin, progress only on a terminal."""

import gc
import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dreamweb import rls
from memory import importing
from memory.importing import read_lines
from memory.models import AgentSession
from tests.conftest import is_postgres
from tests.factories import TeamFactory
from tests.scoping import all_teams, no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"  # CI lays shared/ beside the clone
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpus")


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run(
        [sys.executable, str(CORPUS / "gen_corpus.py"), str(CORPUS / "dev-scenario.json"), str(out)],
        check=True,
        capture_output=True,
    )
    return out


def session(eid: str, **over) -> dict:
    doc = {
        "external_id": eid,
        "agent": "deploy-bot",
        "events": [
            {"type": "message", "role": "user", "content": "Ship it."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c1", "content": "ok", "exit_code": 0},
        ],
    }
    doc.update(over)
    return doc


def run_import(path, team="acme", **kwargs):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with no_scope():  # the command opens its own scope
            call_command("import_sessions", str(path), "--team", team, stdout=out, stderr=err, **kwargs)
    except CommandError as exc:
        if exc.returncode != 1 or "rejected" not in str(exc):
            raise
        code = exc.returncode
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def acme():
    return TeamFactory(slug="acme")


def test_importing_the_corpus_twice_adds_nothing_the_second_time(acme, corpus):
    path = corpus / "acme" / "sessions.jsonl"
    lines = sum(1 for _ in path.open())
    code, out, err = run_import(path)
    assert (code, out, err) == (0, f"imported {lines}, unchanged 0, rejected 0\n", "")
    assert AgentSession.objects.filter(team=acme).count() == lines
    code, out, _ = run_import(path, batch_size=37)  # batch boundaries do not matter
    assert (code, out) == (0, f"imported 0, unchanged {lines}, rejected 0\n")
    assert AgentSession.objects.filter(team=acme).count() == lines
    first = json.loads(path.open().readline())
    stored = AgentSession.objects.get(team=acme, external_id=first["external_id"])
    assert stored.events == first["events"] and stored.agent == first["agent"]
    assert stored.event_count == len(stored.events) > 0 and stored.size_bytes > 0


def test_broken_lines_are_named_the_rest_is_imported_and_the_exit_status_is_1(acme, tmp_path, settings):
    settings.DREAMWEB_MAX_SESSION_BYTES = 2000
    bad_role = session("s4")
    bad_role["events"][1:1] = [{"type": "message", "role": "robot", "content": "beep"}] * 2
    lines = [
        json.dumps(session("s1")),
        '{"external_id": "s2", "agent": ',  # truncated JSON
        json.dumps({k: v for k, v in session("s3").items() if k != "agent"}),
        json.dumps(bad_role),
        "",  # blank lines are skipped, not rejected
        json.dumps(session("s5", events=[{"type": "message", "role": "user", "content": "x" * 3000}])),
        json.dumps(session("s6")),
        json.dumps(session("s7", agent="nul\x00bot")),  # PostgreSQL cannot store NUL: refused, batch unharmed
        json.dumps(session("s8", outcome=None)),  # the API's validator: null is no outcome
    ]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run_import(path)
    assert code == 1
    assert out == "imported 2, unchanged 0, rejected 6\n"
    assert err.splitlines() == [
        "line 2: not valid JSON: Expecting value (column 32)",
        "line 3: agent: is required",
        "line 4: events[1].role: must be one of system, user, assistant (got 'robot'); "
        "events[2].role: must be one of system, user, assistant (got 'robot')",
        f"line 6: session is {len(lines[5])} bytes; the limit is 2000 bytes (DREAMWEB_MAX_SESSION_BYTES)",
        "line 8: agent: must not contain NUL characters (\\u0000)",
        "line 9: outcome: must be one of success, failure, abandoned, unknown (got null)",
    ]
    assert sorted(AgentSession.objects.filter(team=acme).values_list("external_id", flat=True)) == ["s1", "s6"]


def test_dash_reads_standard_input(acme, monkeypatch):
    data = "".join(json.dumps(session(f"in-{i}")) + "\n" for i in range(3))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    code, out, _ = run_import("-")
    assert (code, out) == (0, "imported 3, unchanged 0, rejected 0\n")
    assert AgentSession.objects.filter(team=acme).count() == 3


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_shown_on_a_terminal_only(acme, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(session(f"p-{i}")) + "\n" for i in range(5)))
    out, err = io.StringIO(), Terminal()
    call_command("import_sessions", str(path), "--team", "acme", "--batch-size", "2", stdout=out, stderr=err)
    assert "\r5 lines: imported 5, unchanged 0, rejected 0" in err.getvalue()
    assert "sessions/s" in err.getvalue() and err.getvalue().endswith("\r\033[K")
    assert out.getvalue() == "imported 5, unchanged 0, rejected 0\n"


def test_unknown_team_and_missing_file_are_clear_errors(acme, tmp_path):
    with pytest.raises(CommandError, match="no team 'ghost'; create it first with: python manage.py create_team"):
        run_import(tmp_path / "x.jsonl", team="ghost")
    with pytest.raises(CommandError, match="cannot read .*nope.jsonl: No such file"):
        run_import(tmp_path / "nope.jsonl")


def test_read_lines_skips_an_oversized_line_without_holding_it():
    stream = io.BytesIO(b'{"a": 1}\n' + b"x" * 100_000 + b"\r\n" + b"{}")
    got = list(read_lines(stream, max_bytes=50))
    assert got == [(1, b'{"a": 1}\n', 8), (2, None, 100_000), (3, b"{}", 2)]


def test_sessions_land_in_the_named_team_only(acme, tmp_path):
    other = TeamFactory(slug="other")
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(session("shared-id")) + "\n")
    run_import(path, team="other")
    code, out, _ = run_import(path)
    assert out == "imported 1, unchanged 0, rejected 0\n"  # the same id in another team is not "unchanged"
    assert AgentSession.objects.filter(team=acme).count() == AgentSession.objects.filter(team=other).count() == 1


@pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature")
def test_import_runs_in_the_teams_scope_under_rls(tmp_path):
    """The rows only get in because the command scopes its work to the team."""
    with all_teams():
        acme, other = TeamFactory(slug="acme"), TeamFactory(slug="other")
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(session(f"r-{i}")) + "\n" for i in range(4)))
    code, out, _ = run_import(path)
    assert (code, out) == (0, "imported 4, unchanged 0, rejected 0\n")
    with no_scope():
        assert AgentSession.objects.count() == 0  # invisible outside a scope
    with rls.team_scope(other):
        assert AgentSession.objects.count() == 0
    with rls.team_scope(acme):
        assert set(AgentSession.objects.values_list("team_id", flat=True)) == {acme.pk}
        assert AgentSession.objects.count() == 4


def _lines(count: int, prefix: str = "w") -> str:
    return "".join(json.dumps(session(f"{prefix}-{i}")) + "\n" for i in range(count))


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_batches_are_stored_by_the_writer_thread(tmp_path, store_threads):
    team = TeamFactory(slug="acme")
    path = tmp_path / "s.jsonl"
    path.write_text(_lines(25))
    code, out, _ = run_import(path, batch_size=10)
    assert (code, out) == (0, "imported 25, unchanged 0, rejected 0\n")
    assert store_threads == ["import-sessions-writer"] * 3
    with rls.team_scope(team):
        assert AgentSession.objects.filter(team=team).count() == 25


@pytest.mark.django_db(transaction=True)
def test_a_failure_in_the_writer_thread_stops_the_import_and_reaches_the_caller(monkeypatch):
    team = TeamFactory(slug="acme")
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("disk full")

    monkeypatch.setattr(importing, "_store", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        importing.import_sessions(io.BytesIO(_lines(50).encode()), team, batch_size=10)
    assert len(calls) == 1  # later batches are not attempted
    assert not any(t.name == "import-sessions-writer" for t in threading.enumerate())


def test_the_command_collects_garbage_less_often_while_it_imports_and_puts_the_collector_back(tmp_path, monkeypatch):
    TeamFactory(slug="acme")
    seen = []
    real_store = importing._store

    def spy(*args, **kwargs):
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return real_store(*args, **kwargs)

    monkeypatch.setattr(importing, "_store", spy)
    before = (gc.get_threshold(), gc.get_freeze_count())
    path = tmp_path / "s.jsonl"
    path.write_text(_lines(3))
    assert run_import(path)[:2] == (0, "imported 3, unchanged 0, rejected 0\n")
    assert seen == [((10_000, 10, 10), True)]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_an_import_and_the_api_agree_on_an_event_default_spelled_out(acme, tmp_path):
    """import_sessions (COPY, possibly a pool of workers) keeps the API's identity rule (memory.sessions.store_batch):
    an event's is_error false or exit_code / ts null is the same session as the field left out."""
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(session("d1")) + "\n")
    assert run_import(path)[1] == "imported 1, unchanged 0, rejected 0\n"
    spelled = session("d1")
    spelled["events"][2].update(is_error=False, ts=None)
    spelled["events"][0]["ts"] = None
    path.write_text(json.dumps(spelled) + "\n")
    assert run_import(path)[:2] == (0, "imported 0, unchanged 1, rejected 0\n")
    spelled["events"][2]["is_error"] = True
    path.write_text(json.dumps(spelled) + "\n")
    code, out, err = run_import(path)
    assert (code, out) == (1, "imported 0, unchanged 0, rejected 1\n") and "conflict" in err
