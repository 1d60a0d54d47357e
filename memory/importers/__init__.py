"""Importers: each format's file to canonical sessions (contracts/session.schema.json), behind one interface.

Each module of this package reads one format (see memory.importers.base for the interface); ``FORMATS`` lists them
in the order auto-detection tries them. ``detect`` looks at the start of a file's content, never at its name.
"""

from __future__ import annotations

from collections.abc import Iterator

from . import anthropic_messages, claude_code, codex, dreamweb, gemini_cli, openai_chat
from .base import AUTHOR_AGENT, Format, Options, Parsed
from .source import Source

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        dreamweb.FORMAT,
        claude_code.FORMAT,
        codex.FORMAT,
        gemini_cli.FORMAT,
        anthropic_messages.FORMAT,
        openai_chat.FORMAT,
    )
}
AUTO = "auto"
CHOICES = [AUTO, *FORMATS]

__all__ = ["AUTHOR_AGENT", "AUTO", "CHOICES", "FORMATS", "Format", "Options", "Parsed", "Source", "UnknownFormat"]


class UnknownFormat(ValueError):
    """The content is in none of the formats this project reads."""

    def __init__(self):
        known = "; ".join(f"{f.name} ({f.label})" for f in FORMATS.values())
        super().__init__(
            f"not a session file in a known format. The formats known are: {known}. Name one to skip detection."
        )


class WrongFormat(ValueError):
    """The format named for a file is not the one its content is in."""

    def __init__(self, named: Format, found: Format):
        super().__init__(
            f"named as {named.name} ({named.label}), but the content is {found.name} ({found.label}): name "
            f"{found.name}, or let detection choose"
        )


def detect(source: Source) -> Format | None:
    """The format of the file by its content, or None. An empty file is canonical (it holds no session)."""
    if not source.head_values():
        return FORMATS["dreamweb"]
    return next((f for f in FORMATS.values() if f.sniff(source)), None)


def read(source: Source, format: str = AUTO, options: Options | None = None) -> tuple[Format, Iterator[Parsed]]:
    """The file's format and its items; raises UnknownFormat when auto-detection finds none."""
    if format == AUTO:
        found = detect(source)
        if found is None:
            raise UnknownFormat()
    else:
        found = FORMATS[format]
        if not found.sniff(source) and not source.looks_like_document():
            # Named to skip detection (a file detection misses), but the content is plainly another format: reading
            # it as the named one would import a wrong transcript without a word (calls lost, results as messages).
            # Only lines are looked at (the head, kept for the reader): a document is read once, by its reader.
            other = detect(source)
            if other is not None and other is not found:
                raise WrongFormat(found, other)
    return found, found.read(source, options or Options())
