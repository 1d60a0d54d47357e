"""Streaming import of session files in any format memory.importers reads (Dreamweb's own JSON Lines, Claude Code,
Codex, Gemini CLI, OpenAI and Anthropic conversations), from a file, standard input or every file of a directory.

A file is read front to back and its sessions are validated and stored in batches, so memory stays flat however long
the file or the folder is: at most three batches of sessions are held (see _Writer), bounded in count and in bytes,
and a canonical line longer than the size limit is skipped in chunks without being held whole. Each batch is its own
transaction in the team's row-level-security scope, so an interrupted import keeps what it stored, and a re-run
skips it (idempotent on external_id); the writer thread's batches do not wait for their flush to disk, the import's
end waits for all of them (_Writer). A session whose external_id is stored with other content is a conflict:
reported and counted as rejected, never replaced and never "unchanged".
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import queue
import threading
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import connection, connections, transaction

from dreamweb import rls

from . import importers
from .importers import AUTO, Options, Parsed, Source, UnknownFormat, dreamweb
from .importers.source import read_lines  # noqa: F401 - part of this module's interface (tests, benchmarks)
from .sessions import (
    SOURCE_IMPORT,
    CleanSession,
    JSONText,
    SessionInvalid,
    SessionTooLarge,
    copy_row,
    fingerprint,
    source_of,
    store_batch,
    validate_session,
)

DEFAULT_BATCH = 500
# Sessions of foreign formats are far larger than canonical ones (a real Claude Code session is often 0.1-1 MB once
# converted): a batch is also cut at this many bytes of JSON, which bounds memory whatever the sessions' size (three
# batches in flight, each several times its JSON size as Python objects). Large rows gain nothing from longer INSERTs.
BATCH_BYTES = 4 * 1024 * 1024
SUFFIXES = (".jsonl", ".json")
# The writer thread idles until the first batch reaches it, and the server with it: a first batch of this many
# sessions starts both after a fifth of a full batch's parsing (the pipeline's fill), for one more transaction.
FIRST_BATCH = 100


@dataclass
class ImportStats:
    lines: int = 0  # what was read: lines of a canonical file, sessions (and failures) of other formats
    imported: int = 0
    unchanged: int = 0
    rejected: int = 0
    files: int = 0
    formats: Counter = field(default_factory=Counter)

    @property
    def stored_or_skipped(self) -> int:
        return self.imported + self.unchanged

    def summary(self) -> str:
        return f"imported {self.imported}, unchanged {self.unchanged}, rejected {self.rejected}"


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """For a process of its own (the import command): the cyclic garbage collector's passes made rarer and cheaper.

    An import allocates a dictionary per event and keeps batches alive long enough for them to reach the older
    generations, so the collector's passes ran often and each walked every object of Django as well: a third of the
    CPU of parsing and validating a canonical line (measured: 97-117 us a line, 67 with collection off). Nothing an
    import builds is cyclic (JSON trees are freed by reference counting), so the objects present at the start are
    frozen (never walked again; forked workers share their pages unwritten) and a pass waits for 10,000 allocations
    instead of 700. Undone on the way out."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def conflict_message(external_id: str) -> str:
    return (
        f"conflict: a different session with external_id {external_id!r} is already stored; it was kept and this "
        "one was not imported (give it an external_id of its own)"
    )


def _store(
    team, batch: list[CleanSession], key, stats: ImportStats, source: str | None = None, *, wait: bool = True
) -> list[int]:
    """Store one batch; return the positions of its sessions that conflict with what is stored. Without ``wait``
    (PostgreSQL), its commit returns before the server has flushed it to disk: see _Writer."""
    with rls.team_scope(team):
        if not wait and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
        result = store_batch(team, batch, key=key, source=source)
    # A session that grew (sent again with more events after its own) is imported: its stored row changed.
    stats.imported += len(result.created) + len(result.grown)
    stats.unchanged += len(result.unchanged)
    return result.conflicts


def _wait_for_commits() -> None:
    """Return once everything this connection committed is on disk: a transaction with a transaction id commits
    with the server's default ``synchronous_commit`` (on), and waiting for its own flush waits for the log before it,
    every earlier commit's included."""
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT txid_current()")


Batch = list[tuple[str, CleanSession]]


class _Writer(threading.Thread):
    """Stores batches on its own database connection while the caller parses the next one.

    Parsing and validating is Python work, storing is mostly the database's (PostgreSQL parses every jsonb): done
    one after the other they add up, overlapped they do not. The queue holds one batch, so at most three batches
    exist at once (being parsed, waiting, being stored) and memory stays flat. Conflicts go back to the caller's
    thread through ``conflicts``, which reports them.

    On PostgreSQL each batch commits without waiting for its flush to disk (``synchronous_commit = off`` for that
    transaction: the commit's wait, 12-18 ms a batch under load, was a tenth of the writer's time, which is the
    import's critical path), and after the last batch one small transaction that does wait flushes the log up to
    it, so every batch is on disk before the import reports its end (_wait_for_commits). The writer's batches are
    committed in order and seen by other sessions as soon as committed; what only a crash of the server itself
    could lose (the last few hundred milliseconds of batches, not yet reported) a re-run imports (idempotent).
    """

    def __init__(self, team, key, stats: ImportStats, source: str):
        super().__init__(name="import-sessions-writer", daemon=True)
        self.team, self.key, self.stats, self.source = team, key, stats, source
        self.queue: queue.Queue[Batch | None] = queue.Queue(maxsize=1)
        self.conflicts: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.stored = False  # a batch was committed (without waiting for its flush)

    def run(self) -> None:
        try:
            while (batch := self.queue.get()) is not None:
                if self.error is None:
                    try:
                        sessions = [c for _, c in batch]
                        for pos in _store(self.team, sessions, self.key, self.stats, self.source, wait=False):
                            self.conflicts.put((batch[pos][0], batch[pos][1].fields["external_id"]))
                        self.stored = True
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller by check()
                        self.error = exc
            if self.error is None and self.stored:
                try:
                    _wait_for_commits()
                except BaseException as exc:  # noqa: BLE001 - handed to the caller by check()
                    self.error = exc
        finally:
            connections.close_all()  # this thread's connections only

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def put(self, batch: Batch) -> None:
        self.check()
        self.queue.put(batch)

    def finish(self) -> None:
        self.queue.put(None)
        self.join()


class Importer:
    """One import run: any number of files into one team, through one writer."""

    def __init__(
        self,
        team,
        *,
        batch_size: int = DEFAULT_BATCH,
        on_reject: Callable[[str, str], None] | None = None,
        on_notice: Callable[[str, str], None] | None = None,
        on_progress: Callable[[ImportStats], None] | None = None,
        key=None,
        overlap: bool = True,
        workers: int | None = None,
    ):
        self.team, self.key, self.batch_size = team, key, batch_size
        self.workers = workers  # processes converting a folder's files (feed_path); None: pool_size(), 1: none
        # Without a key, this run is the source of what it imports: one source for the whole run, whatever the
        # sessions say of themselves (AgentSession.source).
        self.source = source_of(key) if key is not None else f"{SOURCE_IMPORT}{uuid.uuid4().hex[:16]}"
        self.on_reject, self.on_notice, self.on_progress = on_reject, on_notice, on_progress
        self.stats = ImportStats()
        self.pending: Batch = []
        self.pending_bytes = 0
        self.handed_over = False  # a batch went to the writer: the next ones are full (FIRST_BATCH)
        # A caller's open transaction holds rows another connection could not see: store on this one then.
        self.writer = (
            _Writer(team, key, self.stats, self.source) if overlap and not connection.in_atomic_block else None
        )

    def __enter__(self) -> Importer:
        if self.writer is not None:
            self.writer.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
        finally:
            if self.writer is not None:
                self.writer.finish()
        if exc_type is None and self.writer is not None:
            self.report_conflicts()
            self.writer.check()
            if self.on_progress is not None:
                self.on_progress(self.stats)

    def reject(self, where: str, message: str) -> None:
        self.stats.rejected += 1
        if self.on_reject is not None:
            self.on_reject(where, message)

    def report_conflicts(self) -> None:
        if self.writer is not None:
            while not self.writer.conflicts.empty():
                where, external_id = self.writer.conflicts.get()
                self.reject(where, conflict_message(external_id))

    def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        if self.writer is not None:
            self.writer.put(batch)
            self.handed_over = True
        else:
            for pos in _store(self.team, [c for _, c in batch], self.key, self.stats, self.source):
                self.reject(batch[pos][0], conflict_message(batch[pos][1].fields["external_id"]))
        self.report_conflicts()
        if self.on_progress is not None:
            self.on_progress(self.stats)

    def add(self, where: str, clean: CleanSession) -> None:
        self.pending.append((where, clean))
        self.pending_bytes += clean.size
        full = self.batch_size if self.handed_over or self.writer is None else min(self.batch_size, FIRST_BATCH)
        if len(self.pending) >= full or self.pending_bytes >= BATCH_BYTES:
            self.flush()

    def apply(self, outcome: Outcome) -> None:
        """Count and report one outcome of a file (file_outcomes), or queue its session for storing."""
        kind, where, payload = outcome
        if kind == SESSION:
            self.stats.lines += 1
            self.add(where, payload)
        elif kind == REJECTED:
            self.stats.lines += 1
            self.reject(where, payload)
        elif kind == NOTICE:
            if self.on_notice is not None:
                self.on_notice(where, payload)
        elif kind == FOUND:
            self.stats.formats[payload] += 1
        else:  # UNREADABLE: a file that could not be opened is no line read
            self.reject(where, payload)

    def feed(
        self, stream: BinaryIO, *, format: str = AUTO, options: Options | None = None, name: str = "", prefix: str = ""
    ) -> None:
        """Import one file's sessions. ``prefix`` starts every message (the file's name in a folder import)."""
        self.stats.files += 1
        for outcome in outcomes(stream, format, options, name, prefix):
            self.apply(outcome)

    def feed_path(self, path: Path, *, format: str = AUTO, options: Options | None = None) -> None:
        """Import a file, or every *.jsonl / *.json file under a directory (recursively, in name order).

        A folder of enough files is converted by a pool of worker processes (see convert_in_pool), one file a
        task, and imported in the folder's order as if read here."""
        files = list(files_of(path))
        workers = self.workers if self.workers is not None else pool_size()
        if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            workers = 1
        if workers > 1 and len(files) >= POOL_MIN_FILES:
            for outcome in convert_in_pool(files, format, options, workers):
                if outcome[0] == OPENED:
                    self.stats.files += 1
                else:
                    self.apply(outcome)
            return
        for file, label in files:
            self.stats.files += 1
            for outcome in file_outcomes(file, label, format, options, workers):
                self.apply(outcome)


# What reading a file gives, in its order: (kind, where, payload). The same whether a file is read in this process or
# by a pool's worker (whose outcomes come back pickled), so that both count and report alike (Importer.apply).
Outcome = tuple[str, str, object]
OPENED = "opened"  # a file of a folder begins (pooled outcomes only: Importer.feed_path counts it)
FOUND = "found"  # payload: the format recognised or named
NOTICE = "notice"  # payload: a remark on a part skipped (not a rejection)
REJECTED = "rejected"  # payload: why this line or session was rejected
SESSION = "session"  # payload: a CleanSession to store
UNREADABLE = "unreadable"  # payload: why the file could not be opened
FAILED = "failed"  # payload: the exception that stopped a pool's worker (convert_in_pool raises it in its turn)


def outcomes(
    stream: BinaryIO,
    format: str = AUTO,
    options: Options | None = None,
    name: str = "",
    prefix: str = "",
    workers: int = 1,
) -> Iterator[Outcome]:
    """One file's outcomes: its format, then each session validated, each rejected part and each notice, as read
    (lazily: a long file is never held whole). With ``workers`` (more than one), a canonical file's lines are
    parsed and validated by that many processes (read_in_pool), with the same outcomes."""
    source = Source(stream, name)
    try:
        found, items = importers.read(source, format, options)
    except (UnknownFormat, importers.WrongFormat) as exc:
        yield REJECTED, name or "input", str(exc)
        return
    yield FOUND, "", found.name
    if workers > 1 and found is importers.FORMATS["dreamweb"]:
        items.close()  # not started: it has read nothing
        yield from read_in_pool(source, options or Options(), prefix, workers)
        return
    for item in items:
        where = f"{prefix}{item.where}"
        if item.notice is not None:
            yield NOTICE, where, item.notice
            continue
        clean = validated(item, found.name)
        if isinstance(clean, str):
            yield REJECTED, where, clean
        else:
            yield SESSION, where, clean


def file_outcomes(
    file: Path, label: str, format: str = AUTO, options: Options | None = None, workers: int = 1
) -> Iterator[Outcome]:
    """``workers``: processes that may parse a canonical file's lines, used for a file of POOL_LINES_MIN_BYTES or
    more (a smaller one does not pay for starting them)."""
    try:
        stream = open(file, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        yield UNREADABLE, str(file), f"cannot read: {exc.strerror}"
        return
    with stream:
        if workers > 1 and os.fstat(stream.fileno()).st_size < POOL_LINES_MIN_BYTES:
            workers = 1
        try:
            yield from outcomes(stream, format, options, name=str(file), prefix=label, workers=workers)
        except OSError as exc:
            # Opened, but a read failed (an I/O error, a special file): this file is one error, the others go on.
            # What it gave before the error was applied already; nothing after it is read.
            yield UNREADABLE, str(file), f"cannot read: {exc.strerror or exc}"


class TooLarge(str):
    """The message of a session refused for its size (the API answers 413 for it, as for a body too large)."""


def validated(item: Parsed, format_name: str) -> CleanSession | str:
    """The item's session validated, or the message saying why it was rejected."""
    if item.error is not None:
        return item.error
    try:
        clean = validate_session(item.doc, size=item.size, raw=item.raw, hints=item.hints)
    except SessionTooLarge as exc:
        return TooLarge(exc)
    except SessionInvalid as exc:
        return "; ".join(exc.errors)
    except TypeError as exc:  # e.g. an event type that is an object: invalid input, not a crash
        return f"session: malformed ({exc})"
    if format_name != "dreamweb":
        clean.fields["source_format"] = format_name
    return clean


def files_of(path: Path) -> Iterator[tuple[Path, str]]:
    """(file, prefix for its messages): the file itself, or every session file under a directory."""
    if not path.is_dir():
        yield path, ""
        return
    found = sorted(
        (p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file()),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    for file in found:
        rel = file.relative_to(path)
        if not any(part.startswith(".") for part in rel.parts):  # .git and other hidden folders
            yield file, f"{rel.as_posix()}: "


def import_sessions(
    stream: BinaryIO,
    team,
    *,
    format: str = AUTO,
    options: Options | None = None,
    name: str = "",
    batch_size: int = DEFAULT_BATCH,
    on_reject: Callable[[str, str], None] | None = None,
    on_notice: Callable[[str, str], None] | None = None,
    on_progress: Callable[[ImportStats], None] | None = None,
    key=None,
    overlap: bool = True,
) -> ImportStats:
    """Import every valid session of one stream for ``team``; report each rejected part through ``on_reject``.

    With ``overlap`` (and no transaction open by the caller, whose uncommitted rows another connection could not
    see) batches are stored by a writer thread while the next batch is parsed.
    """
    run = Importer(
        team,
        batch_size=batch_size,
        on_reject=on_reject,
        on_notice=on_notice,
        on_progress=on_progress,
        key=key,
        overlap=overlap,
    )
    with run:
        run.feed(stream, format=format, options=options, name=name)
    return run.stats


# A folder of agent files (Claude Code, Codex...) costs a millisecond or more of Python per file to convert, several
# times what storing the session costs the database: on one core the import runs far below the database's own rate.
# Files are independent, so worker processes convert them (the GIL keeps threads from it) while this process stores.
POOL_MIN_FILES = 16  # fewer files do not pay for starting the workers
POOL_FILE_BYTES = 8 * 1024 * 1024  # a larger file is read here, streamed: a worker holds a file's outcomes whole
# A task is a run of files in the folder's order, up to this many or these bytes: a task costs a few hundred
# microseconds of the pool's own work (pickling, pipes, its threads), more than a small file's conversion saves.
TASK_FILES = 16
TASK_BYTES = 2 * 1024 * 1024
POOL_BYTES = 32 * 1024 * 1024  # bytes of files in flight, and so their outcomes in memory, at most


def pool_size() -> int:
    """The workers for a folder: one per core this process may run on (at most 4: storing needs cores too)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(cores, 4)


def handed_over(clean: CleanSession) -> CleanSession:
    """A session as a pool's worker hands it back: its events and metadata as JSONText (bytes cost nothing to pickle,
    where a tree of dictionaries costs twice what writing it as JSON does), and on PostgreSQL its COPY row made here
    (CleanSession.row): made by the writer thread, the rows cost the importer's process as much CPU as everything
    else it does, under the one GIL its reading and unpickling need too."""
    fields = clean.fields
    fields["events"] = JSONText.of(fields["events"])
    fields["metadata"] = JSONText.of(fields["metadata"])
    fields["fingerprint"] = fingerprint(fields)  # from the events' text just written
    if connection.vendor == "postgresql":
        clean.row = copy_row(fields)
    return clean


def _converted(files: list[tuple[Path, str]], format: str, options: Options | None) -> list[Outcome]:
    """A worker's task: the outcomes of a run of files, OPENED before each file's, whole (pickled back; a session's
    events and metadata as JSONText: bytes cost nothing to pickle, where a tree of dictionaries costs twice what
    writing it as JSON does). An error ends the task with a FAILED outcome after the outcomes before it, as a serial
    import would have applied them."""
    out: list[Outcome] = []
    for file, label in files:
        out.append((OPENED, "", None))
        try:
            for outcome in file_outcomes(file, label, format, options):
                if outcome[0] == SESSION:
                    handed_over(outcome[2])
                out.append(outcome)
        except Exception as exc:
            exc.add_note(f"in a worker converting {file}:\n{traceback.format_exc()}")
            out.append((FAILED, str(file), exc))
            break
    return out


def convert_in_pool(
    files: list[tuple[Path, str]], format: str, options: Options | None, workers: int
) -> Iterator[Outcome]:
    """The outcomes of every file, OPENED before each file's, in the files' order, converted by ``workers`` processes.

    Bounded: at most 2 tasks a worker (a task: up to TASK_FILES files, TASK_BYTES), and POOL_BYTES of files, are in
    flight, so memory stays flat however many files the folder holds; a file over POOL_FILE_BYTES is read in this
    process, streamed, in its turn. A worker's error is raised here in its file's turn, after the outcomes of every
    earlier file (and of that file's parts read before it), and the files not yet read are dropped. The workers are
    forked (Django and the importers already loaded, the collector's frozen objects shared): they read files and
    never touch the database, and a forked psycopg connection is never closed by a child (psycopg checks the process
    id)."""
    window = 2 * workers
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    flight: deque[tuple[Future, int]] = deque()
    flight_bytes = 0
    task: list[tuple[Path, str]] = []
    task_bytes = 0

    def submit() -> None:
        nonlocal task, task_bytes, flight_bytes
        flight.append((pool.submit(_converted, task, format, options), task_bytes))
        flight_bytes += task_bytes
        task, task_bytes = [], 0

    def oldest() -> Iterator[Outcome]:
        nonlocal flight_bytes
        future, size = flight.popleft()
        flight_bytes -= size
        for outcome in future.result():
            if outcome[0] == FAILED:
                raise outcome[2]
            yield outcome

    try:
        for file, label in files:
            try:
                size = file.stat().st_size
            except OSError:
                size = 0  # file_outcomes reports it as unreadable
            if size > POOL_FILE_BYTES:
                if task:
                    submit()
                while flight:
                    yield from oldest()
                yield OPENED, "", None
                yield from file_outcomes(file, label, format, options)
                continue
            if task and task_bytes + size > TASK_BYTES:
                submit()
            while flight and (len(flight) >= window or flight_bytes + task_bytes + size > POOL_BYTES):
                yield from oldest()
            task.append((file, label))
            task_bytes += size
            if len(task) >= TASK_FILES:
                submit()
        if task:
            submit()
        while flight:
            yield from oldest()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# One large canonical file: parsing and validating a line (~70 us of Python) and building the writer's rows share
# this process's GIL, so the import used about one core and a fifth of two. Its lines are independent: runs of them
# are parsed and validated by worker processes, which hand each session's events and metadata back as JSONText
# (COPY stores it as it is), while this process reads the lines, applies the outcomes in the file's order and stores.
POOL_LINES_MIN_BYTES = 4 * 1024 * 1024
TASK_LINES = 100
TASK_LINE_BYTES = 512 * 1024


def _parsed_lines(lines: list[tuple[int, bytes | None, int]], limit: int, options: Options, prefix: str):
    """A worker's task: the outcomes of a run of a canonical file's lines, as outcomes() gives them serially. An
    error ends the task with a FAILED outcome after the outcomes before it."""
    out: list[Outcome] = []
    for number, line, size in lines:
        try:
            item = dreamweb.parse_line(number, line, size, limit, options)
            if item is None:
                continue
            clean = validated(item, dreamweb.FORMAT.name)
        except Exception as exc:
            exc.add_note(f"in a worker parsing line {number}:\n{traceback.format_exc()}")
            out.append((FAILED, f"{prefix}line {number}", exc))
            break
        where = f"{prefix}{item.where}"
        if isinstance(clean, str):
            out.append((REJECTED, where, clean))
            continue
        out.append((SESSION, where, handed_over(clean)))
    return out


def read_in_pool(source: Source, options: Options, prefix: str, workers: int) -> Iterator[Outcome]:
    """A canonical file's outcomes after FOUND, in its order, its lines parsed and validated by ``workers`` forked
    processes in runs of up to TASK_LINES lines (TASK_LINE_BYTES). The lines are read here, as the serial reader
    reads them (Source.lines: numbers, lines over the limit read past), so every message is the serial one. At most
    2 tasks a worker are in flight, so memory stays flat; a worker's error is raised in its line's turn, after the
    outcomes before it."""
    limit = settings.DREAMWEB_MAX_SESSION_BYTES
    window = 2 * workers
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    flight: deque[Future] = deque()
    task: list[tuple[int, bytes | None, int]] = []
    task_bytes = 0

    def oldest() -> Iterator[Outcome]:
        for outcome in flight.popleft().result():
            if outcome[0] == FAILED:
                raise outcome[2]
            yield outcome

    try:
        for item in source.lines(limit):
            task.append(item)
            task_bytes += item[2] if item[1] is not None else 0
            if len(task) >= TASK_LINES or task_bytes >= TASK_LINE_BYTES:
                while len(flight) >= window:
                    yield from oldest()
                flight.append(pool.submit(_parsed_lines, task, limit, options, prefix))
                task, task_bytes = [], 0
        if task:
            flight.append(pool.submit(_parsed_lines, task, limit, options, prefix))
        while flight:
            yield from oldest()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
