"""The parts of a card that repeat (diff segments, evidence sessions and their context lines), written in one pass.

A page of 100 cards holds thousands of diff segments and hundreds of context lines; through template loops, tags and
filters they cost most of the page's time. Here each is one format string. Every value is escaped (``esc``, what the
templates' auto-escaping does): transcript text is untrusted and is never marked safe as it is.
"""

from __future__ import annotations

from html import escape

from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from dreamweb.hidden_chars import reveal
from dreamweb.secret_scan import redact

from ..diffs import DEL, INS

TAGS = {INS: "ins", DEL: "del"}
CONTEXT_CHARS = 80  # a context line beside the cited one is cut to this many characters


def diff(segments, block: bool = False) -> SafeString:
    """A diff's segments as ``<ins>``, ``<del>`` and ``<span>``; hidden characters shown as markers (the diff is
    what approval writes)."""
    parts = [f'<div class="diff{" diff-block" if block else ""}" aria-label="Changes">']
    for op, text in segments:
        tag = TAGS.get(op, "span")
        parts.append(f"<{tag}>{reveal(text)}</{tag}>")
    if not segments:
        parts.append('<span class="muted">(empty)</span>')
    parts.append("</div>\n")
    return mark_safe("".join(parts))  # noqa: S308 - every value above is escaped


def esc(value) -> str:
    """What auto-escaping prints for a plain value (django.utils.html.escape is this, wrapped as safe)."""
    return escape(str(value))


def cut(text, length: int) -> str:
    """The truncatechars filter (Truncator.chars) with a fast path: ASCII text has no combining characters."""
    text = str(text)
    if len(text) <= length:
        return text
    if text.isascii():
        return text[: length - 1] + "…"
    return Truncator(text).chars(length)


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def session(group) -> str:
    """One representative session: its head (agent, task, outcome, trust, more events) and the lines around the
    cited event, the excerpt marked."""
    ev = group.first
    s = ev.session
    # Names and ids an agent sent may carry a pasted key: shown redacted (dreamweb.secret_scan).
    who = esc(redact(s.agent))
    if s.task:
        who += f" / {esc(redact(s.task))}"
    if s.outcome and s.outcome != "unknown":
        who += f" · {esc(s.outcome)}"
    trust = f'<span class="badge trust trust-{esc(ev.trust)}">{esc(ev.trust)}</span>' if ev.trust != "agent" else ""
    more = group.more_events
    more = f' <span class="muted small">+{more} more event{_plural(more)}</span>' if more else ""
    head = (
        f'<li class="ev-session"><div class="evidence-head"><a href="{esc(ev.viewer_url)}" data-session>'
        f'{esc(redact(s.external_id))}</a> <span class="muted">{who}</span> {trust}{more}</div>\n'
    )
    excerpt = f"<mark>{esc(ev.excerpt)}</mark>"
    if not ev.context:
        return f'{head}<blockquote class="excerpt">{excerpt}</blockquote></li>\n'
    lines = []
    for index, label, text in ev.context:
        if index == ev.event_index:
            lines.append(f'<li class="cited"><b>{esc(label)}</b> {excerpt}</li>')
        else:
            lines.append(f"<li><b>{esc(label)}</b> {esc(cut(text, CONTEXT_CHARS))}</li>")
    return f'{head}<ol class="context">{"".join(lines)}</ol>\n</li>\n'


def sessions(groups) -> SafeString:
    return mark_safe("".join(session(g) for g in groups))  # noqa: S308 - session() escapes every value
