"""A run's evidence rows kept on disk from the moment their draft is finished until they are stored.

A proposal stores a row per session of its pattern (up to three each): at 100,000 sessions about 56,000 rows, which
as dictionaries in the drafts held 10 MiB through the rest of finalize (the skill proposals' peak included), and ten
times less at 10,000. The aggregation hands each finished draft's rows (risk-assessed and redacted, as stored) to
``EvidenceSpill.keep``; the draft then holds a ``SpilledRows``, read back a draft at a time when the proposals are
stored or reported. Pickle round-trips the rows' strings and numbers exactly.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator, Sequence


class EvidenceSpill:
    """One temporary file for a finalize; closed (and so removed) on the way out of ``with``."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__

    def __enter__(self) -> EvidenceSpill:
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def keep(self, rows: list[dict]) -> Sequence[dict]:
        """The rows, written out a chunk at a time; what the draft holds instead (an empty list stays a list)."""
        if not rows:
            return rows
        self._file.seek(0, 2)
        chunks = []
        for start in range(0, len(rows), CHUNK_ROWS):
            data = pickle.dumps(rows[start : start + CHUNK_ROWS], protocol=pickle.HIGHEST_PROTOCOL)
            chunks.append((self._file.tell(), len(data)))
            self._file.write(data)
        return SpilledRows(self, tuple(chunks), len(rows))

    def _read(self, offset: int, size: int) -> list[dict]:
        self._file.seek(offset)
        return pickle.loads(self._file.read(size))  # noqa: S301 - written by this process, a moment ago


# Rows read back at a time: a proposal's rows are stored a chunk at a time (reviews.dreams.finalizing._persist), so
# the largest proposal's rows (16,500 at 100,000 sessions) are never all objects at once when they are stored.
CHUNK_ROWS = 2000


class SpilledRows(Sequence):
    """A draft's evidence rows as a read-only sequence of dictionaries, each reading a fresh copy from the file:
    risk screening, the proposals' writes and the reports iterate it as they did the list. ``chunks()`` gives them
    a chunk at a time."""

    __slots__ = ("_spill", "_chunks", "_count")

    def __init__(self, spill: EvidenceSpill, chunks: tuple, count: int) -> None:
        self._spill, self._chunks, self._count = spill, chunks, count

    def rows(self) -> list[dict]:
        return [row for chunk in self.chunks() for row in chunk]

    def chunks(self) -> Iterator[list[dict]]:
        for offset, size in self._chunks:
            yield self._spill._read(offset, size)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dict]:
        return (row for chunk in self.chunks() for row in chunk)

    def __getitem__(self, index):
        return self.rows()[index]

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment] - compared by content, like the list it stands for

    def __deepcopy__(self, memo) -> SpilledRows:
        return self  # nobody writes to the file's rows: a copy of a draft may share them
