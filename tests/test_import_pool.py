"""A folder's files converted by worker processes (memory.importing.convert_in_pool): the same outcomes, in the same
order, and the same rows as a serial import; a worker's error reaches the caller with nothing half-written; files in
flight are bounded; the writer thread still stores in the team's scope."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from dreamweb import rls
from memory import importing, sessions
from memory.models import AgentSession
from tests.conftest import is_postgres
from tests.factories import TeamFactory
from tests.scoping import no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def canonical(eid: str, **over) -> str:
    doc = {"external_id": eid, "agent": "bot", "events": [{"type": "message", "role": "user", "content": eid}]}
    doc.update(over)
    return json.dumps(doc) + "\n"


def claude_code(sid: str, text: str) -> str:
    base = {"sessionId": sid, "cwd": "/repo", "timestamp": "2026-11-01T10:00:00Z"}
    lines = [
        {**base, "type": "user", "uuid": f"{sid}-1", "message": {"role": "user", "content": text}},
        {
            **base,
            "type": "assistant",
            "uuid": f"{sid}-2",
            "message": {
                "id": "m1",
                "model": "claude-x",
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
            },
        },
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def folder(tmp_path, count: int = 30):
    """Claude Code and canonical files, with a file in no known format, a rejected line, a conflict within the
    folder and a skipped (noted) line among them."""
    for i in range(count):
        (tmp_path / f"cc-{i:03}.jsonl").write_text(claude_code(f"sid-{i}", f"task {i}"))
    (tmp_path / "cc-005.jsonl").write_text(claude_code("sid-5", "task 5") + "{broken\n")  # a notice
    (tmp_path / "m-a.jsonl").write_text(canonical("a1") + canonical("a2") + '{"agent": "x"}\n')
    (tmp_path / "m-b.jsonl").write_text("".join(json.dumps({"note": i}) + "\n" for i in range(3)))
    (tmp_path / "m-c.jsonl").write_text(canonical("a1", task="other"))  # a conflict with m-a.jsonl's a1
    return tmp_path


def run(team, path, **kwargs):
    said = []
    with no_scope():
        run = importing.Importer(
            team,
            on_reject=lambda where, msg: said.append(("reject", where, msg)),
            on_notice=lambda where, msg: said.append(("notice", where, msg)),
            **kwargs,
        )
        with run:
            run.feed_path(path)
    return run.stats, said


def rows(team) -> list[tuple]:
    with rls.team_scope(team):
        found = AgentSession.objects.filter(team=team).order_by("external_id")
        return [(s.external_id, s.events, s.metadata, s.outcome, s.task, s.started_at) for s in found]


def test_a_pooled_folder_reports_counts_and_stores_what_a_serial_import_does(tmp_path):
    path = folder(tmp_path)
    serial_team, pooled_team = TeamFactory(), TeamFactory()
    serial = run(serial_team, path, workers=1, batch_size=7)
    pooled = run(pooled_team, path, workers=2, batch_size=7)
    assert pooled == serial
    stats, said = pooled
    assert (stats.files, stats.imported, stats.rejected) == (33, 32, 3)
    assert [kind for kind, _, _ in said] == ["notice", "reject", "reject", "reject"]
    assert said[0][1] == "cc-005.jsonl: line 3" and said[3][1] == "m-c.jsonl: line 1"
    assert rows(pooled_team) == rows(serial_team) and len(rows(pooled_team)) == 32
    # Again: every session is found unchanged and the conflict is still one (a pooled session's events and metadata
    # come as JSON text, compared with the stored ones by value).
    again = run(pooled_team, path, workers=2, batch_size=7)
    assert again == run(serial_team, path, workers=1, batch_size=7)
    assert (again[0].imported, again[0].unchanged, again[0].rejected) == (0, 32, 3)


def test_a_file_over_the_pool_limit_is_read_here_in_its_turn(tmp_path, monkeypatch):
    path = folder(tmp_path, count=20)
    (path / "cc-010.jsonl").write_text(claude_code("sid-10", "x" * 5000))
    monkeypatch.setattr(importing, "POOL_FILE_BYTES", 4000)
    seen = []
    real = importing.file_outcomes

    def spy(file, *args):
        seen.append((file.name, threading.current_thread().name))
        return real(file, *args)

    monkeypatch.setattr(importing, "file_outcomes", spy)  # called here only for the large file (workers: _converted)
    serial = run(TeamFactory(), path, workers=1)
    seen.clear()
    assert run(TeamFactory(), path, workers=2) == serial
    assert seen == [("cc-010.jsonl", "MainThread")]


def test_an_error_in_a_worker_reaches_the_caller_after_every_earlier_file_and_stores_nothing_after(
    tmp_path, monkeypatch
):
    path = folder(tmp_path, count=24)
    real = importing.validated

    def broken(item, format_name):
        if item.doc is not None and item.doc["external_id"] == "sid-12":
            raise RuntimeError("converter bug")
        return real(item, format_name)

    monkeypatch.setattr(importing, "validated", broken)  # the workers are forked: they run this too
    team = TeamFactory()
    with pytest.raises(RuntimeError, match="converter bug"):
        run(team, path, workers=2, batch_size=1)
    assert {eid for eid, *_ in rows(team)} == {f"sid-{i}" for i in range(12)}  # cc-000 to cc-011


def test_files_in_flight_are_bounded(tmp_path, monkeypatch):
    path = folder(tmp_path, count=40)
    submitted = []

    class Counting(importing.ProcessPoolExecutor):
        def submit(self, *args, **kwargs):
            submitted.append([file.name for file, _ in args[1]])
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(importing, "ProcessPoolExecutor", Counting)
    monkeypatch.setattr(importing, "TASK_FILES", 3)
    outcomes = importing.convert_in_pool(list(importing.files_of(path)), "auto", None, workers=2)
    assert next(outcomes)[0] == importing.OPENED
    assert len(submitted) == 4  # two tasks a worker
    rest = list(outcomes)
    assert [len(task) for task in submitted] == [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1]
    assert sum(submitted, []) == [file.name for file, _ in importing.files_of(path)]
    assert sum(1 for kind, _, _ in rest if kind == importing.OPENED) == 42


@pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature")
@pytest.mark.django_db(transaction=True)
def test_the_writer_thread_stores_a_pooled_folder_in_the_team_scope(tmp_path, store_threads):
    path = folder(tmp_path)
    team, other = TeamFactory(), TeamFactory()
    stats, _ = run(team, path, workers=2, batch_size=10)
    assert stats.imported == 32 and set(store_threads) == {"import-sessions-writer"}
    assert len(rows(team)) == 32
    with no_scope():
        assert AgentSession.objects.count() == 0  # invisible outside a scope
        with rls.team_scope(other):
            assert AgentSession.objects.count() == 0  # and from another team's
        with rls.team_scope(team):
            assert AgentSession.objects.count() == 32


def canonical_file(tmp_path):
    """A canonical file of many lines with every kind of line: rejected ones (not JSON, invalid, over the size
    limit), blank ones, a session twice (the same content: unchanged the second time) and an external_id twice with
    other content (a conflict)."""
    lines = [canonical(f"c{i}") for i in range(40)]
    lines[3] = "{broken\n"
    lines[7] = "\n"
    lines[9] = json.dumps({"external_id": "no-events", "agent": "bot"}) + "\n"
    lines[12] = canonical("big", metadata={"pad": "x" * 3000})
    lines[15] = canonical("c1")
    lines[37] = canonical("c2", task="other")  # after every other rejection: a conflict is reported when found
    lines[22] = "   \r\n"
    lines[30] = json.dumps({"external_id": "no-agent", "events": []}) + "\n"
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(lines))
    return path


def test_a_large_canonical_file_parsed_by_workers_reports_and_stores_what_a_serial_import_does(
    tmp_path, monkeypatch, settings
):
    settings.DREAMWEB_MAX_SESSION_BYTES = 2000
    path = canonical_file(tmp_path)
    submitted = []

    class Counting(importing.ProcessPoolExecutor):
        def submit(self, *args, **kwargs):
            submitted.append([number for number, _, _ in args[1]])
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(importing, "ProcessPoolExecutor", Counting)
    monkeypatch.setattr(importing, "POOL_LINES_MIN_BYTES", 0)
    monkeypatch.setattr(importing, "TASK_LINES", 3)
    serial_team, pooled_team = TeamFactory(), TeamFactory()
    serial = run(serial_team, path, workers=1, batch_size=4)
    assert submitted == []
    pooled = run(pooled_team, path, workers=2, batch_size=4)
    assert sum(submitted, []) == list(range(1, 41)) and max(map(len, submitted)) == 3  # every line, in runs
    assert pooled == serial
    stats, said = pooled
    assert (stats.lines, stats.imported, stats.unchanged, stats.rejected) == (38, 32, 1, 5)
    assert [where for _, where, _ in said] == ["line 4", "line 10", "line 13", "line 31", "line 38"]
    assert "limit is 2000 bytes" in said[2][2] and "conflict" in said[4][2]
    assert rows(pooled_team) == rows(serial_team) and len(rows(pooled_team)) == 32
    again = run(pooled_team, path, workers=2, batch_size=4)
    assert again == run(serial_team, path, workers=1, batch_size=4)
    assert (again[0].imported, again[0].unchanged, again[0].rejected) == (0, 33, 5)


def test_a_small_canonical_file_is_parsed_here(tmp_path, monkeypatch):
    path = canonical_file(tmp_path)
    monkeypatch.setattr(importing, "POOL_LINES_MIN_BYTES", path.stat().st_size + 1)
    monkeypatch.setattr(importing, "read_in_pool", None)  # would fail if called
    stats, _ = run(TeamFactory(), path, workers=2)
    assert stats.imported == 33


def test_an_error_in_a_line_worker_reaches_the_caller_after_the_lines_before_it(tmp_path, monkeypatch):
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(canonical(f"c{i:02}") for i in range(30)))
    real = importing.validated

    def broken(item, format_name):
        if item.doc["external_id"] == "c17":
            raise RuntimeError("validator bug")
        return real(item, format_name)

    monkeypatch.setattr(importing, "validated", broken)  # the workers are forked: they run this too
    monkeypatch.setattr(importing, "POOL_LINES_MIN_BYTES", 0)
    monkeypatch.setattr(importing, "TASK_LINES", 4)
    team = TeamFactory()
    with pytest.raises(RuntimeError, match="validator bug"):
        run(team, path, workers=2, batch_size=1)
    assert {eid for eid, *_ in rows(team)} == {f"c{i:02}" for i in range(17)}


def full_rows(team) -> list[dict]:
    """Every column a session's row holds but those that differ between two runs by design."""
    with rls.team_scope(team):
        found = AgentSession.objects.filter(team=team).order_by("external_id").values()
        return [{k: v for k, v in r.items() if k not in {"id", "team_id", "ingested_at", "source"}} for r in found]


@pytest.mark.skipif(not is_postgres(), reason="COPY rows are PostgreSQL's")
def test_a_pooled_canonical_import_hands_over_copy_rows_that_store_what_rows_made_here_store(
    tmp_path, monkeypatch, settings
):
    """The workers make each session's COPY row (CleanSession.row): the importer's process makes none, and the rows
    stored are those of a serial import, which makes them in its writer."""
    settings.DREAMWEB_MAX_SESSION_BYTES = 2000
    path = canonical_file(tmp_path)
    monkeypatch.setattr(importing, "POOL_LINES_MIN_BYTES", 0)
    monkeypatch.setattr(importing, "TASK_LINES", 3)
    serial_team, pooled_team = TeamFactory(), TeamFactory()
    serial = run(serial_team, path, workers=1, batch_size=4)
    made_here = []
    real = sessions.copy_row
    monkeypatch.setattr(sessions, "copy_row", lambda fields: made_here.append(fields["external_id"]) or real(fields))
    assert run(pooled_team, path, workers=2, batch_size=4) == serial
    assert made_here == []
    assert full_rows(pooled_team) == full_rows(serial_team) and len(full_rows(pooled_team)) == 32


@pytest.mark.django_db(transaction=True)  # no transaction open, so that the import has its writer thread
def test_the_first_batch_is_small_so_that_the_writer_starts_early(tmp_path, monkeypatch):
    """The writer thread (and the server) wait for the first batch: it is handed over at FIRST_BATCH sessions, the
    rest in full batches. Without a writer (a caller's transaction open) every batch is full."""
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(canonical(f"c{i:03}") for i in range(250)))
    stored = []
    real = importing._store
    monkeypatch.setattr(
        importing,
        "_store",
        lambda team, batch, *rest, **kw: stored.append(len(batch)) or real(team, batch, *rest, **kw),
    )
    monkeypatch.setattr(importing, "FIRST_BATCH", 30)
    stats, _ = run(TeamFactory(), path, workers=1, batch_size=100)
    assert stats.imported == 250 and stored == [30, 100, 100, 20], "the writer thread stored them"
    stored.clear()
    stats, _ = run(TeamFactory(), path, workers=1, batch_size=100, overlap=False)
    assert stats.imported == 250 and stored == [100, 100, 50]


@pytest.mark.skipif(not is_postgres(), reason="synchronous_commit is PostgreSQL's")
@pytest.mark.django_db(transaction=True)  # no transaction open, so that the import has its writer thread
def test_the_writers_batches_commit_without_waiting_and_the_import_ends_on_a_commit_that_waits(tmp_path, monkeypatch):
    """Each batch of the writer thread commits without waiting for its flush; one transaction that waits follows
    the last batch (and flushes every batch before it), before the import ends. A caller's own storing (no writer)
    waits at every commit, as before."""
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(canonical(f"c{i:03}") for i in range(25)))
    said = []
    real_store, real_wait = importing.store_batch, importing._wait_for_commits

    def store(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('synchronous_commit')")
            said.append(cursor.fetchone()[0])
        return real_store(*args, **kwargs)

    monkeypatch.setattr(importing, "store_batch", store)
    monkeypatch.setattr(importing, "_wait_for_commits", lambda: said.append("wait") or real_wait())
    team = TeamFactory()
    stats, _ = run(team, path, workers=1, batch_size=10)
    assert stats.imported == 25 and said == ["off", "off", "off", "wait"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone()[0] == "on"  # the setting was each batch's own
    said.clear()
    stats, _ = run(TeamFactory(), path, workers=1, batch_size=10, overlap=False)
    assert stats.imported == 25 and said == ["on", "on", "on"]
