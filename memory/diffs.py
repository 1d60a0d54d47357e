"""Word-level diffs of memory text, for the pages (entry history here, proposal cards in reviews).

A diff is a list of ``(op, text)`` segments, ``op`` one of ``"eq"``, ``"ins"``, ``"del"``. The templates render
each segment as plain (auto-escaped) text inside ``<span>``, ``<ins>`` or ``<del>``: nothing here builds HTML, so
memory and transcript text can never become markup.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

EQ, INS, DEL = "eq", "ins", "del"

# Words, runs of whitespace and single punctuation marks: a changed comma does not repaint the whole word.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text or "")


def _push(segments: list[tuple[str, str]], op: str, text: str) -> None:
    if not text:
        return
    if segments and segments[-1][0] == op:
        segments[-1] = (op, segments[-1][1] + text)
    else:
        segments.append((op, text))


def word_diff(old: str | None, new: str | None) -> list[tuple[str, str]]:
    """Segments turning ``old`` into ``new``; an absent side is the empty text. Joining the ``eq`` and ``del``
    segments gives ``old`` back, joining ``eq`` and ``ins`` gives ``new``."""
    a, b = tokens(old or ""), tokens(new or "")
    segments: list[tuple[str, str]] = []
    # autojunk off: memory entries are short, and the heuristic would hide repeated words such as "the".
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _push(segments, EQ, "".join(a[i1:i2]))
        else:
            _push(segments, DEL, "".join(a[i1:i2]))
            _push(segments, INS, "".join(b[j1:j2]))
    return segments


def stats(segments: list[tuple[str, str]]) -> dict[str, int]:
    """Words added and removed, for a summary line."""
    counts = {INS: 0, DEL: 0}
    for op, text in segments:
        if op in counts:
            counts[op] += len(re.findall(r"\w+", text))
    return {"added": counts[INS], "removed": counts[DEL]}
