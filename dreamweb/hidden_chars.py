"""Characters a reader cannot see, made visible where the exact text to be written is shown (a card's diff and
content, the edit preview, an entry's text and versions).

A right-to-left override (U+202E) draws "\u202eevil" as "live"; a zero-width space splits "pass\u200bword" so that a
search or an agent reading the entry finds another word than the reviewer saw. Every Unicode format character
(category Cf: bidi embeddings, overrides, isolates and marks, zero-width spaces and joiners, the word joiner, the
byte-order mark, the soft hyphen, ...) is shown as a marker ``⟨U+202E⟩`` in its own span, so the reviewer sees
exactly what approval writes. So is every control character but tab, newline and carriage return (category Cc: a
terminal's escape sequences, a bell, the C1 controls), which a browser draws as nothing or as an empty box. One rule
for every page: ``reveal`` here, ``{{ value|reveal_hidden }}`` in templates.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache
from html import escape

from django.utils.safestring import SafeString, mark_safe

# The controls among ASCII, found without building the whole class (the common text is ASCII).
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _control(code: int) -> bool:
    return unicodedata.category(chr(code)) == "Cc" and chr(code) not in "\t\n\r"


def _plain(text: str) -> bool:
    """Whether ``text`` certainly holds no hidden character: ASCII without a control (one C-level scan each)."""
    return text.isascii() and not _ASCII_CONTROL.search(text)


@cache
def _pattern() -> re.Pattern:
    """Every format character (Cf) of this Python's Unicode, as one character class: a scan in C instead of a
    category lookup per character in Python (built once, on first use: about 0.1 s)."""
    codes = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf" or _control(c)]
    ranges: list[list[int]] = []
    for c in codes:  # consecutive code points as ranges: a class of ranges is scanned much faster than a long list
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


@cache
def _runs() -> re.Pattern:
    """A run of one hidden character (the same one repeated)."""
    return re.compile(f"({_pattern().pattern})\\1*")


def _emoji_joiner(text: str, i: int) -> bool:
    """A zero-width joiner between two pictographs (a family, a profession emoji) is part of the emoji, not hidden
    text: it is drawn as one picture and left alone."""
    if text[i] != "\u200d" or i == 0 or i + 1 >= len(text):
        return False
    before, after = text[i - 1], text[i + 1]
    if before == "\ufe0f" and i >= 2:  # a variation selector between the pictograph and the joiner
        before = text[i - 2]
    return unicodedata.category(before) == "So" and unicodedata.category(after) == "So"


def hidden_chars(text) -> list[str]:
    """The distinct hidden characters of ``text`` as code points (``U+202E``), in order of appearance."""
    text = "" if text is None else str(text)
    if _plain(text):
        return []
    found: list[str] = []
    for m in _pattern().finditer(text):
        if not _emoji_joiner(text, m.start()):
            code = f"U+{ord(m.group()):04X}"
            if code not in found:
                found.append(code)
    return found


def marker(ch: str, count: int = 1) -> str:
    """One marker for a run of ``count`` of the same hidden character (⟨U+200B ×1,000⟩): a megabyte of zero-width
    spaces is one line on the page, not 70 MB of markers."""
    code = f"U+{ord(ch):04X}"
    kind = "control character" if unicodedata.category(ch) == "Cc" else "format character"
    name = unicodedata.name(ch, kind).lower()
    if count > 1:
        return f'<span class="hidden-char" title="{count:,} × {escape(name)}">⟨{code} ×{count:,}⟩</span>'
    return f'<span class="hidden-char" title="{escape(name)}">⟨{code}⟩</span>'


def reveal(text) -> SafeString:
    """``text`` escaped, each hidden character replaced by its marker. Escaping comes first for every run of
    ordinary text; the markers are our own markup (code point and Unicode name only), so nothing untrusted is
    ever marked safe unescaped."""
    text = "" if text is None else str(text)
    # ASCII holds no format character (the first is U+00AD): the common case costs one C-level check, which matters
    # on a queue page that draws thousands of diff segments.
    if _plain(text) or not _pattern().search(text):
        return mark_safe(escape(text))  # noqa: S308 - escaped
    parts: list[str] = []
    start = 0
    for m in _runs().finditer(text):
        i, run = m.start(), m.end() - m.start()
        if run > 1 or not _emoji_joiner(text, i):
            parts.append(escape(text[start:i]))
            parts.append(marker(text[i], run))
            start = m.end()
    parts.append(escape(text[start:]))
    return mark_safe("".join(parts))  # noqa: S308 - every run escaped, markers built from code points


def warning(text) -> str:
    """The card's short note when the text to be written holds hidden characters, or ""."""
    codes = hidden_chars(text)
    if not codes:
        return ""
    shown = ", ".join(codes[:6]) + (", …" if len(codes) > 6 else "")
    return (
        '<div class="callout callout-warn hidden-chars-note" role="note" data-hidden-chars><strong>Hidden '
        f"characters:</strong> this text holds invisible or direction-control characters ({escape(shown)}), "
        "shown as ⟨U+…⟩ markers. Approval writes them as they are.</div>"
    )
