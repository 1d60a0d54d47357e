"""One input file (or standard input, or a request body) read once, front to back.

Detection needs to look at the first lines before a reader starts; a pipe cannot be rewound, so the lines looked at
are kept and replayed. JSON Lines readers get the lines (a line longer than their limit comes back as None, read
past in chunks, never held whole); document readers get the whole text parsed once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

from django.conf import settings

from dreamweb import input_guard

_DRAIN_CHUNK = 1 << 16
HEAD_LINES = 8
HEAD_BYTES = 1 << 20
_BLANK = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() strips
_BOM = b"\xef\xbb\xbf"


def read_lines(stream: BinaryIO, max_bytes: int, start: int = 0) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield (line number, line, size in bytes without the line break) for every line of a binary stream.

    A line longer than ``max_bytes`` is yielded as None with its true size, after reading past it in chunks.
    """
    limit = max_bytes + 2  # room for "\r\n" after a line of exactly max_bytes
    number = start
    while True:
        chunk = stream.readline(limit)
        if not chunk:
            return
        number += 1
        if number == 1 and chunk.startswith(_BOM):
            chunk = chunk[len(_BOM) :]  # a UTF-8 byte order mark (editors on Windows write one) is not content
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


def json_values(line: bytes) -> list:
    """The JSON values on one line: usually one, but a writer that lost a newline leaves two objects glued together
    (seen in a real Claude Code file), and both are kept. Raises ValueError when the line is not JSON."""
    return parse_values(line)[0]


def parse_values(line: bytes) -> tuple[list, input_guard.Hints]:
    """json_values, with the input guard's hints for them (input_guard.parse): which checks values built from them
    still need. Glued objects are read by the standard decoder, which takes NaN: they need every check."""
    try:
        value, hints = input_guard.parse(line)
        return [value], hints
    except input_guard.Refused as exc:  # a ValueError; nesting past the parser is refused here, not a crash
        cause = exc.__cause__
        if not (isinstance(cause, json.JSONDecodeError) and cause.msg.startswith("Extra data")):
            raise
    text = line.decode()
    decoder = json.JSONDecoder()
    values, pos = [], 0
    while pos < len(text):
        value, pos = decoder.raw_decode(text, pos)
        values.append(value)
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
    return values, input_guard.EVERYTHING


def json_error(exc: Exception) -> str:
    if isinstance(exc, input_guard.Refused):
        if exc.code != "not_json" or exc.__cause__ is None:
            return str(exc)  # nested too deeply
        exc = exc.__cause__
    if isinstance(exc, json.JSONDecodeError):
        # The decoder's own "line 1 column 45" would be confused with the file's line number.
        return f"not valid JSON: {exc.msg} (column {exc.pos + 1})"
    if isinstance(exc, UnicodeDecodeError):
        return f"not valid UTF-8 at byte {exc.start}"
    return f"not valid JSON: {exc}"


def _too_long(size: int, limit: int) -> str:
    return f"line is {size} bytes; the limit is {limit} bytes (DREAMWEB_MAX_REQUEST_BYTES)"


class Source:
    """A binary stream with its first lines kept for detection."""

    def __init__(self, stream: BinaryIO, name: str = ""):
        self.stream = stream
        self.name = name
        self._head: list[tuple[int, bytes | None, int]] | None = None
        self._document: object = None
        self._document_error: str | None = None
        self._document_read = False
        self._consumed = False
        self._head_values: list[tuple[int, list | None, str | None]] | None = None
        # What every value read by values() so far may still hold (input_guard.Hints, joined over the lines): a
        # session built from them needs only these checks (see hints).
        self._strings = self._numbers = False

    @property
    def line_limit(self) -> int:
        # A transcript line can be far larger than the canonical session it becomes (a Claude Code line repeats the
        # whole file it edited), so foreign lines get the request limit; the canonical reader applies its own.
        return max(settings.DREAMWEB_MAX_SESSION_BYTES, settings.DREAMWEB_MAX_REQUEST_BYTES)

    def head(self) -> list[tuple[int, bytes | None, int]]:
        """The first non-blank lines (at most HEAD_LINES, or fewer once HEAD_BYTES are read)."""
        if self._head is None:
            self._head = []
            total = 0
            for item in read_lines(self.stream, self.line_limit):
                self._head.append(item)
                if item[1] is not None and item[1].strip():
                    total += item[2]
                if sum(1 for _, line, _ in self._head if line is None or line.strip()) >= HEAD_LINES:
                    break
                if total >= HEAD_BYTES:
                    break
        return self._head

    def _parsed_head(self) -> list[tuple[int, list | None, str | None]]:
        """(line number, the line's JSON values or None, error) for the head's non-blank lines, parsed once: every
        sniffer looks at them, and values() hands the same values on instead of parsing the lines again."""
        if self._head_values is None:
            self._head_values = []
            limit = self.line_limit
            for number, line, size in self.head():
                if line is None or size > limit:  # as lines() reads the head
                    self._head_values.append((number, None, _too_long(size, limit)))
                elif line.strip():
                    self._head_values.append((number, *self._parse(line)))
        return self._head_values

    def _parse(self, line: bytes) -> tuple[list | None, str | None]:
        """(values, None), or (None, why the line is skipped), or (values, a notice): a line that is JSON but for a
        few bytes that are not UTF-8 (a tool's output in Latin-1) is read with U+FFFD in their place, not lost."""
        try:
            values, hints = parse_values(line)
        except (ValueError, UnicodeDecodeError) as exc:
            bad = exc if isinstance(exc, UnicodeDecodeError) else exc.__cause__
            if not isinstance(bad, UnicodeDecodeError):
                return None, json_error(exc)
            readable = line.decode("utf-8", "replace").encode()
            if readable == line:  # nothing to replace: the line is UTF-8 and not JSON
                return None, json_error(exc)
            repaired, notice = self._parse(readable)
            if repaired is None:
                return None, json_error(exc)
            return repaired, f"not valid UTF-8 at byte {bad.start}: read with U+FFFD in place of the bytes"
        if hints.strings:
            self._strings = True
        if hints.numbers:
            self._numbers = True
        return values, None

    def head_values(self) -> list:
        """The JSON values of the head's lines; a line that is not JSON gives None."""
        values: list = []
        for _, parsed, _ in self._parsed_head():
            if parsed is None:
                values.append(None)
            else:
                values.extend(parsed)
        return values

    @property
    def hints(self) -> input_guard.Hints:
        """The checks a value built from the values read so far (values()) still needs: the strings' only when a line
        held an escape that could carry an unstorable character, the numbers' only when one held a non-finite
        number. A converted session's strings and numbers all come from its lines (or are the converter's own, which
        hold neither), so these hints hold for it. Depth is always checked: a converter may nest a value deeper
        than its line did."""
        return input_guard.Hints(strings=self._strings, numbers=self._numbers, depth=True)

    def looks_like_document(self) -> bool:
        """The first line is the start of a JSON document that spans lines (a pretty-printed file)."""
        values = self.head_values()
        first = next((line for _, line, _ in self.head() if line is None or line.strip()), None)
        return bool(values) and values[0] is None and first is not None and first.lstrip()[:1] in (b"{", b"[")

    def lines(self, max_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
        """Every line from the first, once."""
        if self._consumed:
            raise RuntimeError("the source was already read")
        self._consumed = True
        number = 0
        for number, line, size in self.head():
            if line is not None and size > max_bytes:
                line = None
            yield number, line, size
        yield from read_lines(self.stream, max_bytes, start=number)

    def values(self) -> Iterator[tuple[int, list | None, str | None]]:
        """(line number, the line's JSON values or None, error) for every non-blank line."""
        limit = self.line_limit
        head = self._parsed_head() if self._head is not None else []
        if self._consumed:
            raise RuntimeError("the source was already read")
        self._consumed = True
        yield from head
        start = self._head[-1][0] if self._head else 0
        for number, line, size in read_lines(self.stream, limit, start=start):
            if line is None:
                yield number, None, _too_long(size, limit)
                continue
            if line[0] in _BLANK and not line.strip():  # a line that starts with no blank is not blank: no copy
                continue
            yield (number, *self._parse(line))

    def document(self):
        """The whole input parsed as one JSON value; raises ValueError with a readable message."""
        if not self._document_read:
            self._document_read = True
            limit = self.line_limit
            parts = []
            size = 0
            for _, line, line_size in self.lines(limit):
                size += line_size + 1
                if line is None or size > limit:
                    self._document_error = f"the document is over {limit} bytes (DREAMWEB_MAX_REQUEST_BYTES)"
                    break
                parts.append(line)
            if self._document_error is None:
                try:
                    self._document = input_guard.parse(b"".join(parts))[0]
                except input_guard.Refused as exc:
                    cause = exc.__cause__
                    if isinstance(cause, json.JSONDecodeError):
                        self._document_error = (
                            f"not valid JSON: {cause.msg} (line {cause.lineno}, column {cause.colno})"
                        )
                    else:
                        self._document_error = json_error(exc)
        if self._document_error is not None:
            raise ValueError(self._document_error)
        return self._document
