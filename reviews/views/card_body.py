"""The body of a proposal card (its changes, why, budget box and evidence), written in one pass in Python; the frame
around it is reviews.views.card_frame, which says why. Every value is escaped (``esc``); the diffs and evidence
sessions come from reviews.views.card_html, escaped there. The edit card and the live preview use the same parts.
"""

from __future__ import annotations

from django.utils.formats import localize

from dreamweb.hidden_chars import reveal, warning

from .card_html import cut, esc

MORE_EXCERPT_CHARS = 160  # an excerpt in the "n more" list is cut to this many characters


def _s(n) -> str:
    """The pluralize filter."""
    return "" if n == 1 else "s"


def template(context, name: str) -> str:
    """A part that stays a template, rendered as an include would be (the page's context, ``p`` in it)."""
    with context.push():
        return context.template.engine.get_template(name).render(context)


def changes(p) -> str:
    # Invisible or direction-control characters in the text approval writes: said once, above the diffs that mark them.
    parts = [warning(p.content)] if p.operation != "remove" else []
    if p.operation == "add":
        parts.append(
            f'<div class="target"><div class="target-head"><span class="target-key">{esc(p.write_key)}</span> '
            f'<span class="muted">new {esc(p.target_kind)}</span></div>{p.card_add_diff}</div>'
        )
    parts.append("\n")
    parts += [target(p, t) for t in p.card_targets]
    if p.card_dropped:
        clauses = "".join(f"<li>“{esc(c)}”</li>" for c in p.card_dropped)
        parts.append(
            '<div class="callout callout-warn dropped" role="note" data-dropped><strong>Not in the merged text:'
            f"</strong><ul>{clauses}</ul></div>"
        )
    parts.append("\n")
    if p.card_edited:
        parts.append(
            '<details class="edited"><summary>Edited by the reviewer; the dream proposed something else</summary>'
            f"{p.card_edit_diff}</details>"
        )
    parts.append("\n")
    return "".join(parts)


def target(p, t) -> str:
    classes = (" target-changed" if t.changed else "") + (" target-archived" if t.archiving else "")
    if t.object_id and p.target_kind == "memory":
        key = f'<a class="target-key" href="{esc(t.entry_url)}">{esc(t.key)}</a>'
    else:
        key = f'<span class="target-key">{esc(t.key)}</span>'
    if t.archiving:
        badge = '<span class="badge badge-archived">archived, text kept in history</span>'
        body = f'<div class="diff diff-archived" aria-label="Archived text">{reveal(t.current or "")}</div>'
    else:
        if t.unchanged:
            badge = '<span class="diffstat">text unchanged</span>'
        else:
            stats = t.stats
            block = " · rewritten, shown by lines" if t.block else ""
            badge = (
                f'<span class="diffstat"><span class="plus">+{stats["added"]}</span> '
                f'<span class="minus">−{stats["removed"]}</span> words{block}</span>'
            )
        body = t.diff_html
    return (
        f'<div class="target{classes}">\n<div class="target-head">{key} <span class="muted">{esc(t.role)}</span>\n'
        f"{badge}</div>\n{body}</div>\n"
    )


def _rationale(p, context) -> str:
    """The proposal's page shows the whole rationale (it is the reason to approve); a card in the queue shows its
    start and links to that page for the rest (a link, not the text again: the queue stays light)."""
    if not p.rationale:
        return ""
    if context.get("full_evidence") or p.card_rationale == p.rationale:
        return f'<p class="rationale">{esc(p.rationale)}</p>'
    return (
        f'<p class="rationale">{esc(p.card_rationale)} <a href="{esc(p.card_urls["proposal"])}">whole rationale</a></p>'
    )


def why(p, context) -> str:
    rationale = _rationale(p, context)
    percent = p.card_percent
    if p.prevalence_sessions and p.prevalence_sources == 1:
        sources = '<strong class="warn">1 source</strong>'
    else:
        sources = f"{p.prevalence_sources} source{_s(p.prevalence_sources)}"
    span = f" · {esc(p.card_span)}" if p.card_span else ""
    reasons = ""
    if p.risk_reasons:
        items = "".join(f"<li>{esc(r)}</li>" for r in p.risk_reasons)
        reasons = f'<ul class="risk-reasons risk-{esc(p.risk)}">{items}</ul>'
    earlier = template(context, "reviews/card/_earlier.html") if p.card_earlier else ""
    return (
        f'<aside class="why">{rationale}\n'
        f'<div class="prevalence"><div class="bar" aria-hidden="true"><span style="width: {percent}%"></span></div>'
        f'<span class="prevalence-label">{p.prevalence_sessions} of {p.prevalence_of} sessions ({percent} %)</span>'
        "</div>\n"
        f'<p class="trust-figures small muted">{sources} · {p.prevalence_agents} agent{_s(p.prevalence_agents)}'
        f"{span}</p>\n"
        f'<dl class="facts"><div><dt>Confidence</dt><dd><meter value="{esc(localize(p.confidence))}" low="0.4" '
        f'high="0.75" optimum="1"></meter> {esc(p.card_confidence)}</dd></div></dl>\n'
        f"{reasons}\n{earlier}</aside>\n"
    )


def budget(p) -> str:
    """The budget impact, asked for when the person opens it (no request while the queue renders); without
    JavaScript the opened box holds a link to the same figures."""
    u = esc(p.card_urls["budget"])
    return (
        f'\n<details class="budget-impact" hx-get="{u}" hx-trigger="toggle once" hx-target="find div">'
        f'<summary data-action="budget">Budget impact</summary><div><a href="{u}">Show</a></div></details>\n'
    )


def evidence(p, context) -> str:
    """Evidence by session: a few representative sessions with the lines around each excerpt; the rest behind a
    toggle, collapsed, loaded when opened (the queue page stays small). A session appears once."""
    n = p.card_session_count
    if not n:
        return "\n\n"
    more = ""
    if p.card_more_count:
        full = context.get("full_evidence")
        if full:
            inside = more_sessions(p)
        else:
            inside = (
                f'<div hx-get="{esc(p.card_urls["evidence"])}" hx-trigger="intersect once" hx-target="this" '
                f'hx-swap="outerHTML"><a href="{esc(p.card_urls["proposal"])}">Show them on the proposal\'s page</a>'
                "</div>"
            )
        m = p.card_more_count
        more = (
            f'<details class="more-sessions" data-more{" open" if full else ""}><summary>{m} more session{_s(m)}'
            f"</summary>{inside}</details>"
        )
    return (
        f'\n<section class="evidence" aria-label="Evidence"><h3 class="evidence-title">Evidence from {n} '
        f'session{_s(n)}</h3>\n<ol class="sessions">{p.card_shown_html}</ol>\n{more}\n</section>\n'
    )


def more_sessions(p) -> str:
    items = []
    for g in p.card_more:
        ev = g.first
        more = f' <span class="muted small">+{g.more_events}</span>' if g.more_events else ""
        items.append(
            f'<li><a href="{esc(ev.viewer_url)}">{esc(ev.session.external_id)}</a> <span class="muted small">'
            f'{esc(ev.session.agent)}</span> <q class="excerpt-inline">{esc(cut(ev.excerpt, MORE_EXCERPT_CHARS))}</q>'
            f"{more}</li>"
        )
    return f'<ol class="sessions sessions-more">{"".join(items)}</ol>\n'
