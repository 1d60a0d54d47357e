"""Diffs on proposal cards: what a change does to each target's current text.

The word-level diff itself lives with the memory it compares (memory.diffs; reviews depends on memory, never the
other way). Segments are ``(op, text)`` pairs that the template renders with auto-escaping: nothing here is HTML.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from functools import lru_cache

from memory.diffs import DEL, EQ, INS, stats, tokens, word_diff

__all__ = [
    "DEL",
    "EQ",
    "INS",
    "block_diff",
    "dropped_clauses",
    "only_added",
    "only_removed",
    "readable_diff",
    "readable_diff_kept",
    "stats",
    "tokens",
    "word_diff",
]

# Below this share of the old text's words kept, a word diff interleaves so many fragments that it reads as word
# salad: the card shows the old and the new text as blocks instead.
WORD_DIFF_MIN_SHARED = 0.5


def only_added(text: str | None) -> list[tuple[str, str]]:
    """An ``add``: the whole new text is inserted."""
    return [(INS, text)] if text else []


def only_removed(text: str | None) -> list[tuple[str, str]]:
    """A ``remove``: the target's whole current text goes away (the entry is archived, its history kept)."""
    return [(DEL, text)] if text else []


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def block_diff(old: str | None, new: str | None) -> list[tuple[str, str]]:
    """Line by line: unchanged lines stay, each changed run of lines is shown whole, removed then added."""
    a, b = (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True)
    if a and not a[-1].endswith("\n"):
        a[-1] += "\n"
    if b and not b[-1].endswith("\n"):
        b[-1] += "\n"
    segments: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            segments.append((EQ, "".join(a[i1:i2])))
        else:
            if i2 > i1:
                segments.append((DEL, "".join(a[i1:i2])))
            if j2 > j1:
                segments.append((INS, "".join(b[j1:j2])))
    return segments


def readable_diff(old: str | None, new: str | None) -> tuple[list[tuple[str, str]], bool]:
    """(segments, is_block): a word diff while most words are shared, else a line/block diff (heavily changed
    text). The word counts of both are the same measure, so the card's "+n −m words" stays true either way."""
    segments = word_diff(old, new)
    shared = sum(_words(text) for op, text in segments if op == EQ)
    before = _words(old or "")
    # How much of the old text survives: an old text kept whole with words appended reads well word by word.
    if before and new and shared / before < WORD_DIFF_MIN_SHARED:
        return block_diff(old, new), True
    return segments, False


# A process keeps the diffs of this many pairs of texts, each pair up to KEPT_DIFF_CHARS long: some 20 MiB at worst
# (texts, segments and their tuples), 1-2 MiB for entries of a few hundred characters.
KEPT_DIFFS = 2048
KEPT_DIFF_CHARS = 2000


def readable_diff_kept(old: str | None, new: str | None) -> tuple[tuple[tuple[str, str], ...], bool]:
    """readable_diff, kept per process for the most recent pairs of short texts: a diff depends on the two texts
    alone, and the queue's cards show the same ones on every load (0.2-0.6 ms each, a quarter of a page's cards).
    Segments as a tuple: one kept diff is shared by every card that shows it."""
    old, new = old or "", new or ""  # the same diff (readable_diff reads an absent text as the empty one)
    if len(old) + len(new) > KEPT_DIFF_CHARS:
        segments, block = readable_diff(old, new)
        return tuple(segments), block
    return _kept_diff(old, new)


@lru_cache(maxsize=KEPT_DIFFS)
def _kept_diff(old: str, new: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    segments, block = readable_diff(old, new)
    return tuple(segments), block


_CLAUSE = re.compile(r"(?<=[.;!?])\s+|\n+|,\s+(?=(?:and|but|then|before|after|unless|or)\b)", re.IGNORECASE)


def _words_of(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.lower()) if len(w) > 2]


# A clause counts as kept when at least this share of its words is in the merged text (a paraphrase keeps most).
CLAUSE_KEPT_SHARE = 0.6


def dropped_clauses(sources: list[str | None], merged: str | None) -> list[str]:
    """Clauses of the merged texts whose words mostly are not in the merged text (a merge that drops "connect to the
    VPN before" must say so): each sentence or clause of each source, compared on its words of 3+ letters."""
    kept = set(_words_of(merged or ""))
    dropped: list[str] = []
    for text in sources:
        for clause in _CLAUSE.split(text or ""):
            words = _words_of(clause)
            if len(words) < 2 or clause.strip() in dropped:
                continue
            if sum(w in kept for w in words) / len(words) < CLAUSE_KEPT_SHARE:
                dropped.append(clause.strip())
    return dropped
