"""A proposal card and its parts, written in one pass by reviews.views.card_frame and card_body: ``{% card p %}``
(the queue, the proposal's page, decision responses), and the parts the edit card shares with it."""

from __future__ import annotations

from django import template
from django.utils.safestring import mark_safe

from ..views import card_body, card_frame

register = template.Library()


@register.simple_tag(takes_context=True)
def card(context, p):
    return card_frame.render(p, context)


@register.simple_tag(takes_context=True)
def card_head(context, p):
    return mark_safe(card_frame.head(p, context))  # noqa: S308 - the parts escape every value


@register.simple_tag
def card_changes(p):
    return mark_safe(card_body.changes(p))  # noqa: S308 - the parts escape every value


@register.simple_tag(takes_context=True)
def card_why(context, p):
    return mark_safe(card_body.why(p, context))  # noqa: S308 - the parts escape every value


@register.simple_tag(takes_context=True)
def card_evidence(context, p):
    return mark_safe(card_body.evidence(p, context))  # noqa: S308 - the parts escape every value
