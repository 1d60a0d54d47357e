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
    try:
        return [input_guard.parse(line)[0]]
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
    return values


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

    def head_values(self) -> list:
        """The JSON values of the head's lines; a line that is not JSON gives None."""
        values: list = []
        for _, line, _ in self.head():
            if line is None:
                values.append(None)
                continue
            if not line.strip():
                continue
            try:
                values.extend(json_values(line))
            except (ValueError, UnicodeDecodeError):
                values.append(None)
        return values

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
        for number, line, size in self.lines(limit):
            if line is None:
                yield number, None, f"line is {size} bytes; the limit is {limit} bytes (DREAMWEB_MAX_REQUEST_BYTES)"
                continue
            if not line.strip():
                continue
            try:
                yield number, json_values(line), None
            except (ValueError, UnicodeDecodeError) as exc:
                yield number, None, json_error(exc)

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
