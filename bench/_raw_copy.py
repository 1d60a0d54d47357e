"""The physical limit an import is compared with: a raw COPY of the same JSON lines, verbatim, into a bare table of
one jsonb column (the server's own cost of receiving, parsing and writing the same JSON), shared by
bench/import_sessions.py and bench/million_sessions.py so that both measure the same thing.

    from _raw_copy import raw_copy

    seconds, server_cpu = raw_copy(db.owner_url, chunks)  # chunks: bytes of whole JSON lines
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from _procfs import process_cpu

# CSV with a quote and a delimiter no JSON text holds: every line goes in as it is, one value a line.
COPY_SQL = "COPY bench_raw_copy (doc) FROM STDIN WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')"


def raw_copy(owner_url: str, chunks: Iterable[bytes]) -> tuple[float, float | None]:
    """Seconds to COPY ``chunks`` (whole lines, each ending in a newline) on one connection in one transaction, and
    the CPU seconds its server backend spent (None when /proc does not show it: a server on another machine). The
    table is created before the clock starts and dropped afterwards."""
    import psycopg

    with psycopg.connect(owner_url) as conn:
        conn.execute("CREATE TABLE bench_raw_copy (doc jsonb)")
        conn.commit()
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        cpu0 = process_cpu(backend)
        t0 = time.perf_counter()
        with conn.cursor() as cur, cur.copy(COPY_SQL) as copy:
            for chunk in chunks:
                copy.write(chunk)
        conn.commit()
        seconds = time.perf_counter() - t0
        cpu1 = process_cpu(backend)
        conn.execute("DROP TABLE bench_raw_copy")
        conn.commit()
    return seconds, (cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None)


def file_chunks(files: Iterable[Path], size: int = 1 << 20) -> Iterable[bytes]:
    """The files' bytes in chunks of ``size``, a newline added after a file that does not end in one."""
    for file in files:
        last = b""
        with file.open("rb") as fh:
            while data := fh.read(size):
                yield (last := data)
        if not last.endswith(b"\n"):
            yield b"\n"


def bytes_chunks(data: bytes, size: int = 1 << 20) -> Iterable[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
