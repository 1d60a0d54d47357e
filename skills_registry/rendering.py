"""Skill markdown to safe HTML, and markdown diffs between two texts.

Skill text may come from a dream (i.e. from transcripts, i.e. from anyone), so it is treated as hostile:

1. markdown-it-py renders CommonMark with raw HTML *disabled*: ``<script>`` in the markdown becomes the visible
   text ``&lt;script&gt;``, never a tag; its link validator already refuses ``javascript:``/``vbscript:``/``data:``.
2. nh3 (ammonia) then cleans the result with an allow-list of tags and attributes as a second wall: no ``on*``,
   no ``hx-*`` (htmx would act on them in our pages), no ``style``, only http(s)/mailto links, and every link
   gets ``rel="noopener nofollow"``.

Only the output of ``render_markdown`` is marked safe, because it went through both walls.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "summary",
    "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},  # language-xxx from fenced code blocks
    "th": {"align"},
    "td": {"align"},
    "ol": {"start"},
}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "noopener nofollow"

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_md.enable("strikethrough")


def sanitize_html(html: str) -> str:
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel=LINK_REL,
        strip_comments=True,
    )


def render_markdown(text: str, *, top_level: int = 2) -> SafeString:
    """Markdown → HTML that is safe to put in a page as is.

    The text's headings are demoted so that its ``#`` becomes ``<h{top_level}>``: a page has one h1, its own title,
    and a screen reader's heading list must not show the skill's ``# Heading`` beside it (levels past h6 stay h6)."""
    tokens = _md.parse(text or "")
    shift = max(top_level, 1) - 1
    for token in tokens:
        if shift and token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + shift, 6)}"
    html = sanitize_html(_md.renderer.render(tokens, _md.options, {}))
    return mark_safe(html)  # noqa: S308 - rendered without raw HTML, then cleaned by nh3 (see module docstring)


# --- diffs -------------------------------------------------------------------------------------------------


@dataclass
class DiffLine:
    """One line of a diff. ``kind``: ctx | add | del | gap. ``parts``: [(changed, text)], for word highlights."""

    kind: str
    old_no: int | None = None
    new_no: int | None = None
    parts: list[tuple[bool, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(t for _, t in self.parts)


_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


def _word_parts(old: str, new: str) -> tuple[list[tuple[bool, str]], list[tuple[bool, str]]]:
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    old_parts: list[tuple[bool, str]] = []
    new_parts: list[tuple[bool, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            old_parts.append((False, "".join(a[i1:i2])))
            new_parts.append((False, "".join(b[j1:j2])))
            continue
        if i2 > i1:
            old_parts.append((True, "".join(a[i1:i2])))
        if j2 > j1:
            new_parts.append((True, "".join(b[j1:j2])))
    return old_parts, new_parts


def diff_lines(old: str, new: str, *, context: int = 3) -> list[DiffLine]:
    """A line diff of two markdown texts, with word-level highlights on changed line pairs.

    Plain data: templates escape every piece (the texts are untrusted).
    """
    a, b = (old or "").splitlines(), (new or "").splitlines()
    rows: list[DiffLine] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for n, group in enumerate(matcher.get_grouped_opcodes(context)):
        if n or (group and (group[0][1] > 0 or group[0][3] > 0)):
            rows.append(DiffLine("gap"))
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                for k in range(i2 - i1):
                    rows.append(DiffLine("ctx", i1 + k + 1, j1 + k + 1, [(False, a[i1 + k])]))
                continue
            olds, news = a[i1:i2], b[j1:j2]
            if op == "replace" and len(olds) == len(news):
                for k, (x, y) in enumerate(zip(olds, news, strict=True)):
                    old_parts, new_parts = _word_parts(x, y)
                    rows.append(DiffLine("del", i1 + k + 1, None, old_parts))
                    rows.append(DiffLine("add", None, j1 + k + 1, new_parts))
                continue
            rows.extend(DiffLine("del", i1 + k + 1, None, [(True, x)]) for k, x in enumerate(olds))
            rows.extend(DiffLine("add", None, j1 + k + 1, [(True, y)]) for k, y in enumerate(news))
    return rows


def unified_diff(old: str, new: str, *, old_label: str = "before", new_label: str = "after") -> str:
    """The same diff as text (for the CLI, logs and the review queue's plain views)."""
    return "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True), old_label, new_label
        )
    )
