"""Streaming import of session files (JSON Lines, one session of contracts/session.schema.json per line).

The file is read line by line and stored in batches, so memory stays flat however long the file is: at most three
batches of parsed sessions are held (see _Writer), and a line longer than the size limit is skipped in chunks
without being held whole. Each batch is its own transaction in the team's row-level-security scope, so an
interrupted import keeps what it stored, and a re-run skips it (idempotent on external_id).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from django.db import connection, connections

from dreamweb import rls

from .sessions import CleanSession, SessionInvalid, SessionTooLarge, store_batch, validate_session

DEFAULT_BATCH = 500
_DRAIN_CHUNK = 1 << 16


@dataclass
class ImportStats:
    lines: int = 0
    imported: int = 0
    unchanged: int = 0
    rejected: int = 0

    @property
    def stored_or_skipped(self) -> int:
        return self.imported + self.unchanged

    def summary(self) -> str:
        return f"imported {self.imported}, unchanged {self.unchanged}, rejected {self.rejected}"


def read_lines(stream: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield (line number, line, size in bytes without the line break) for every line of a binary stream.

    A line longer than ``max_bytes`` is yielded as None with its true size, after reading past it in chunks.
    """
    limit = max_bytes + 2  # room for "\r\n" after a line of exactly max_bytes
    number = 0
    while True:
        chunk = stream.readline(limit)
        if not chunk:
            return
        number += 1
        if chunk.endswith(b"\n") or len(chunk) < limit:
            yield number, chunk, len(chunk.rstrip(b"\r\n"))
            continue
        size = len(chunk)
        while True:
            rest = stream.readline(_DRAIN_CHUNK)
            size += len(rest)
            if not rest or rest.endswith(b"\n"):
                break
        yield number, None, size - (2 if rest.endswith(b"\r\n") else 1 if rest.endswith(b"\n") else 0)


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        # The decoder's own "line 1 column 45" would be confused with the file's line number.
        return f"not valid JSON: {exc.msg} (column {exc.pos + 1})"
    if isinstance(exc, UnicodeDecodeError):
        return f"not valid UTF-8 at byte {exc.start}"
    return f"not valid JSON: {exc}"


def _store(team, batch: list[CleanSession], key, stats: ImportStats) -> None:
    with rls.team_scope(team):
        result = store_batch(team, batch, key=key)
    stats.imported += len(result.created)
    stats.unchanged += len(result.unchanged)


class _Writer(threading.Thread):
    """Stores batches on its own database connection while the caller parses the next one.

    Parsing and validating is Python work, storing is mostly the database's (PostgreSQL parses every jsonb): done
    one after the other they add up, overlapped they do not. The queue holds one batch, so at most three batches
    exist at once (being parsed, waiting, being stored) and memory stays flat.
    """

    def __init__(self, team, key, stats: ImportStats):
        super().__init__(name="import-sessions-writer", daemon=True)
        self.team, self.key, self.stats = team, key, stats
        self.queue: queue.Queue[list[CleanSession] | None] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while (batch := self.queue.get()) is not None:
                if self.error is None:
                    try:
                        _store(self.team, batch, self.key, self.stats)
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller by check()
                        self.error = exc
        finally:
            connections.close_all()  # this thread's connections only

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def put(self, batch: list[CleanSession]) -> None:
        self.check()
        self.queue.put(batch)

    def finish(self) -> None:
        self.queue.put(None)
        self.join()


def import_sessions(
    stream: BinaryIO,
    team,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_reject: Callable[[int, str], None] | None = None,
    on_progress: Callable[[ImportStats], None] | None = None,
    key=None,
    overlap: bool = True,
) -> ImportStats:
    """Import every valid session of the stream for ``team``; report each rejected line through ``on_reject``.

    With ``overlap`` (and no transaction open by the caller, whose uncommitted rows another connection could not
    see) batches are stored by a writer thread while the next batch is parsed.
    """
    limit = settings.DREAMWEB_MAX_SESSION_BYTES
    stats = ImportStats()
    pending: list[CleanSession] = []
    writer = _Writer(team, key, stats) if overlap and not connection.in_atomic_block else None
    if writer is not None:
        writer.start()

    def reject(number: int, message: str) -> None:
        stats.rejected += 1
        if on_reject is not None:
            on_reject(number, message)

    def flush() -> None:
        nonlocal pending
        if not pending:
            return
        if writer is not None:
            writer.put(pending)
        else:
            _store(team, pending, key, stats)
        pending = []
        if on_progress is not None:
            on_progress(stats)

    try:
        for number, line, size in read_lines(stream, limit):
            if line is not None and not line.strip():
                continue
            stats.lines += 1
            if line is None or size > limit:
                reject(number, str(SessionTooLarge(size, limit)))
                continue
            try:
                doc = json.loads(line.rstrip(b"\r\n"))
            except (ValueError, UnicodeDecodeError) as exc:
                reject(number, _json_error(exc))
                continue
            try:
                pending.append(validate_session(doc, size=size, raw=line))
            except SessionInvalid as exc:
                reject(number, "; ".join(exc.errors))
                continue
            except SessionTooLarge as exc:
                reject(number, str(exc))
                continue
            if len(pending) >= batch_size:
                flush()
        flush()
    finally:
        if writer is not None:
            writer.finish()
    if writer is not None:
        writer.check()
        if on_progress is not None:
            on_progress(stats)
    return stats
