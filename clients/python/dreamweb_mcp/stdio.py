"""The stdio transport, with one repair the SDK does not make: a JSON string escape of a lone surrogate.

A client that cuts a string in the middle of an emoji (a Node-based agent slicing UTF-16) sends `"\\ud83d"` alone.
That is valid JSON, but not a valid Unicode string: the SDK's parser refuses the line, and since it cannot read the
request's id it cannot answer either, so the agent waits for its own timeout. Such a line is read here with Python's
parser (which keeps lone surrogates) and written again with each lone surrogate as U+FFFD; every other line passes
untouched.
"""

from __future__ import annotations

import io
import json
import re
import sys

import anyio
from mcp.server.stdio import stdio_server

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def repair_line(line: str) -> str:
    """The line with lone surrogates in its JSON strings replaced by U+FFFD (pairs kept), or the line as it was."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line  # not JSON at all: the SDK says so
    return json.dumps(_repaired(message), ensure_ascii=False) + "\n"


def _repaired(value):
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_repaired(v) for v in value]
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    return value


class _RepairedLines:
    def __init__(self, lines) -> None:
        self._lines = lines

    def __aiter__(self):
        return self._read()

    async def _read(self):
        async for line in self._lines:
            yield repair_line(line)


async def serve(lowlevel_server) -> None:
    """Serve ``lowlevel_server`` (an MCPServer's) over this process's stdin and stdout, lines repaired."""
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    async with stdio_server(stdin=_RepairedLines(stdin)) as (read_stream, write_stream):
        await lowlevel_server.run(read_stream, write_stream, lowlevel_server.create_initialization_options())
