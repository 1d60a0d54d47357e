"""Diffs on proposal cards: what a change does to each target's current text.

The word-level diff itself lives with the memory it compares (memory.diffs; reviews depends on memory, never the
other way). Segments are ``(op, text)`` pairs that the template renders with auto-escaping: nothing here is HTML.
"""

from __future__ import annotations

from memory.diffs import DEL, EQ, INS, stats, tokens, word_diff

__all__ = ["DEL", "EQ", "INS", "only_added", "only_removed", "stats", "tokens", "word_diff"]


def only_added(text: str | None) -> list[tuple[str, str]]:
    """An ``add``: the whole new text is inserted."""
    return [(INS, text)] if text else []


def only_removed(text: str | None) -> list[tuple[str, str]]:
    """A ``remove``: the target's whole current text goes away (the entry is archived, its history kept)."""
    return [(DEL, text)] if text else []
