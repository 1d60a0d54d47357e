"""``{{ value|reveal_hidden }}``: the exact text to be written, escaped, with its invisible and direction-control
characters shown as ⟨U+202E⟩ markers (dreamweb.hidden_chars says why)."""

from django import template

from dreamweb.hidden_chars import reveal

register = template.Library()


@register.filter
def reveal_hidden(value):
    return reveal(value)
