"""Streaming import of session files (JSON Lines, one session of contracts/session.schema.json per line).

The file is read line by line and stored in batches, so memory stays flat however long the file is: at most one
batch of parsed sessions is held, and a line longer than the size limit is skipped in chunks without being held
whole. Each batch is its own transaction in the team's row-level-security scope, so an interrupted import keeps
what it stored, and a re-run skips it (idempotent on external_id).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings

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


def import_sessions(
    stream: BinaryIO,
    team,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_reject: Callable[[int, str], None] | None = None,
    on_progress: Callable[[ImportStats], None] | None = None,
    key=None,
) -> ImportStats:
    """Import every valid session of the stream for ``team``; report each rejected line through ``on_reject``."""
    limit = settings.DREAMWEB_MAX_SESSION_BYTES
    stats = ImportStats()
    pending: list[CleanSession] = []

    def reject(number: int, message: str) -> None:
        stats.rejected += 1
        if on_reject is not None:
            on_reject(number, message)

    def flush() -> None:
        if not pending:
            return
        with rls.team_scope(team):
            result = store_batch(team, pending, key=key)
        stats.imported += len(result.created)
        stats.unchanged += len(result.unchanged)
        pending.clear()
        if on_progress is not None:
            on_progress(stats)

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
            pending.append(validate_session(doc, size=size))
        except SessionInvalid as exc:
            reject(number, "; ".join(exc.errors))
            continue
        except SessionTooLarge as exc:
            reject(number, str(exc))
            continue
        if len(pending) >= batch_size:
            flush()
    flush()
    return stats
