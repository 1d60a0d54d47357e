"""``{{ value|redacted }}``: text an agent sent (a session's id, agent, task, model), shown with its secrets replaced by
[REDACTED] (dreamweb.secret_scan): a key pasted into a task name is not shown to every reviewer who opens a page."""

from django import template

from dreamweb.secret_scan import redact

register = template.Library()


@register.filter
def redacted(value):
    if value is None or value == "":
        return value
    return redact(str(value))
