"""A proposal card written in one pass in Python: its frame (head, status, writes, conflict, actions) here, its body
(changes, why, evidence) in reviews.views.card_body.

Through templates, a card cost some 15 includes and 60 variable lookups: most of a 100-card page's time. Here each
part is one function and a few format strings, and the HTML is the same byte for byte as the templates wrote it.
Every value is escaped (``esc``, what auto-escaping does); only the parts built by reviews.views.card_html (diffs and
evidence sessions, themselves escaped) go in as they are. The parts few cards have (the conflict box with its forms,
earlier decisions) stay templates, rendered in the page's context.

Requests made inside the card replace the card: its ``hx-target`` and ``hx-swap`` are inherited by every action.
"""

from __future__ import annotations

from django.template.defaultfilters import timesince_filter, urlencode
from django.utils.safestring import SafeString, mark_safe

from .card_body import budget, changes, evidence, template, why
from .card_html import esc


def render(p, context) -> SafeString:
    """The whole card of ``p`` in ``context`` (the page's: can_decide, editing, next, full_evidence, csrf_token)."""
    pending = p.status == "pending"
    parts = [
        f'\n<article class="card proposal risk-edge-{esc(p.risk)} status-{esc(p.status)}'
        f'{" is-conflict" if p.card_conflict else ""}" id="card-{p.pk}" data-card tabindex="-1" '
        f'aria-labelledby="card-{p.pk}-title" hx-target="this" hx-swap="outerHTML swap:150ms">\n',
        head(p, context),
        "" if pending else _status(p),
        _writes(p),
    ]
    if p.card_conflict and pending or p.status == "conflict":
        parts.append(template(context, "reviews/card/_conflict.html"))
    parts += [_actions(p, context), '<div class="card-body"><div class="changes">', changes(p), "</div>"]
    parts.append(why(p, context))
    if p.target_kind == "memory" and p.content and p.operation != "remove":
        parts.append(budget(p))
    parts += ["</div>\n", evidence(p, context), "\n</article>\n"]
    return mark_safe("".join(parts))  # noqa: S308 - every value above is escaped


def head(p, context) -> str:
    select = ""
    if context.get("can_decide") and p.status == "pending" and not context.get("editing"):
        select = (
            f'<label class="select-card"><input type="checkbox" name="ids" value="{p.pk}" form="bulk" data-select '
            f'aria-label="Select: {esc(p.card_title)}"></label>'
        )
    badges = '<span class="badge badge-skill">skill</span>' if p.target_kind == "skill" else ""
    if p.kind:
        badges += f'<span class="badge badge-kind">{esc(p.card_kind)}</span>'
    run = f' · <a href="{esc(p.card_run_url)}">dream #{p.run_id}</a>' if p.run_id else ""
    return (
        f'<header class="card-head">{select}\n'
        f'<span class="op op-{esc(p.operation)}">{esc(p.get_operation_display())}</span> <h2 class="card-title" '
        f'id="card-{p.pk}-title"><a href="{esc(p.card_urls["proposal"])}">{esc(p.card_title)}</a></h2>\n'
        f"{badges}\n"
        f'<span class="badge risk risk-{esc(p.risk)}">{esc(p.get_risk_display())} risk</span>\n'
        f'<span class="card-meta muted">{esc(p.store.display_name)}{run} · {esc(p.card_age)} ago</span></header>\n'
    )


def _status(p) -> str:
    """A decided card's banner (the proposal's page shows decided ones)."""
    who = ""
    if p.decided_by:
        who = f" by {esc(p.decided_by.get_username())}"
    elif p.decided_by_policy:
        who = f" by the store's policy ({esc(p.get_decided_by_policy_display().lower())})"
    when = f", {esc(timesince_filter(p.decided_at))} ago" if p.decided_at else ""
    reason = f": {esc(p.decision_reason)}" if p.decision_reason else ""
    return (
        f'<div class="status-banner status-{esc(p.status)}" role="status"><strong>{esc(p.get_status_display())}'
        f"</strong>{who}{when}{reason}</div>"
    )


def _writes(p) -> str:
    """Exactly what approval writes: the same values reviews.services.apply_proposal uses, never rebuilt."""
    writes = " · ".join(
        f'<span class="write write-{esc(w["verb"])}">{esc(w["verb"])} <code data-write-key>{esc(w["key"])}</code>'
        "</span>"
        for w in p.card_writes
    )
    scope = ""
    if p.operation != "remove":
        who = f"agent <code>{esc(p.scope_agent)}</code>" if p.scope_agent else "every agent"
        task = f", task <code>{esc(p.scope_task)}</code>" if p.scope_task else ""
        scope = f' <span class="writes-scope">· scope {who}{task}</span>'
    elsewhere = ""
    if p.card_elsewhere:
        stores = ", ".join(esc(o.store.display_name) for o in p.card_elsewhere)
        elsewhere = f' <span class="writes-elsewhere">· also in {stores} (same change, one decision)</span>'
    return (
        f'\n<p class="writes" data-writes><span class="writes-label">Approving '
        f"{'will' if p.status == 'pending' else 'would'}</span>\n"
        f'{writes} <span class="muted">in {esc(p.store.display_name)}</span>{scope}{elsewhere}</p>\n'
    )


def _actions(p, context) -> str:
    if not (context.get("can_decide") and p.status == "pending"):
        return "\n"
    urls = p.card_urls
    approve, reject, edit = esc(urls["approve"]), esc(urls["reject"]), esc(urls["edit"])
    also = f' name="also" value="{esc(p.card_also)}"' if p.card_elsewhere else ""
    parts = ['\n<div class="card-actions">']
    if not p.card_conflict:
        stores = f" in {len(p.card_elsewhere) + 1} stores" if p.card_elsewhere else ""
        edit_url = f"{edit}?next={esc(urlencode(context.get('next', '')))}"
        parts.append(
            f'<button form="decide" formaction="{approve}" hx-post="{approve}" class="btn primary" '
            f'data-action="approve"{also}>Approve{stores} <kbd>a</kbd></button>\n'
            f'<a class="btn" href="{edit_url}" hx-get="{edit_url}" hx-swap="outerHTML" data-action="edit">Edit, then '
            "approve <kbd>e</kbd></a>"
        )
    parts.append(
        '\n<details class="reject"><summary class="btn" data-action="reject">Reject… <kbd>r</kbd></summary>'
        '<span class="reject-form"><input type="text" form="decide" '
        f'aria-label="Reason for rejecting {esc(p.card_title)}" name="reason-{p.pk}" '
        'data-reason maxlength="2000" placeholder="Why not? (optional)"><button form="decide" '
        f'formaction="{reject}" hx-post="{reject}" class="btn danger" data-reject{also}>Reject</button></span>'
        "</details></div>\n\n"
    )
    return "".join(parts)
