"""Error answers outside the views: Django's 400/403/404/500 handlers and the input guard's 413.

Under /api/ every error is JSON in the API's shape (``{"detail", "code"}``), whatever raised it and whatever the
path holds (a newline included); pages get the site's own error pages (``templates/error_page.html``, with the header
and navigation, and ``templates/500.html``, which needs neither a request nor the database).
"""

from __future__ import annotations

import re

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.views import defaults


def is_api(request) -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def api_error(status: int, detail: str, code: str, **extra) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code, **extra}, status=status)


def too_large(request, size: int | None, limit: int, setting: str = "DREAMWEB_MAX_REQUEST_BYTES") -> HttpResponse:
    """413 for a body past the limit (DREAMWEB_MAX_REQUEST_BYTES, checked before anything reads the body)."""
    what = f"The request body is {size} bytes" if size is not None else "The request body is too large"
    detail = f"{what}; the limit is {limit} bytes ({setting})."
    if is_api(request):
        return api_error(413, detail + " Send less per request.", "too_large", limit=limit)
    return HttpResponse(
        '<!doctype html>\n<html lang="en"><head><title>Request too large</title></head>'
        f"<body><h1>Request too large</h1><p>{detail}</p></body></html>",
        status=413,
    )


PAGES = {
    400: ("Bad request", "The request could not be understood. Go back and try again.", False),
    403: ("You may not do this", "Your role in this team does not allow it; an admin of the team can change it.", True),
    404: ("Not found", "There is nothing here, or it belongs to a team you are not in.", False),
}


def error_page(request, status: int, exception=None, *, reason: str = "", sent=()) -> HttpResponse:
    """A branded error page. A 403 names what was needed (the gates' messages say which role); a 404 says nothing of
    what it looked for, so that another team's object and a missing one read the same. ``reason``: what the caller
    knows went wrong (a 400 of the input guard names the field)."""
    title, text, show_reason = PAGES[status]
    if not reason and show_reason and exception is not None:
        reason = str(exception)
    context = {"status": status, "error_title": title, "error_text": text, "reason": reason, "sent": sent}
    try:
        body = render_to_string("error_page.html", context, request=request)
    except Exception:  # noqa: BLE001 - an error page must not fail: Django's plain page, then
        return {400: defaults.bad_request, 403: defaults.permission_denied, 404: defaults.page_not_found}[status](
            request, exception
        )
    return HttpResponse(body, status=status)


def refused_input(request, refused) -> HttpResponse:
    """A page's query string or form that the input guard refuses (dreamweb.input_guard.param_problem), naming the
    field and what is wrong with it. htmx: the message in the page's flash area (htmx swaps no 4xx answer, and the
    card or list it targeted stays as it was). Otherwise a 400 page; for a form it shows back the text that was sent
    (the NUL marked ␀; never a password or the CSRF token), so nothing typed is lost."""
    from django.contrib import messages
    from django_htmx.http import reswap, retarget

    detail = f"“{refused.path}” {refused.message}. Nothing was searched or saved: remove it and try again."
    if getattr(request, "htmx", False):
        messages.error(request, detail)
        return retarget(reswap(render(request, "dreamweb/messages.html"), "innerHTML"), "#flash")
    sent = [
        (name, value.replace("\x00", "␀"))
        for name, values in (request.POST.lists() if request.method == "POST" else ())
        if not _SECRET_FIELD.search(name)
        for value in values
        if value.strip()
    ]
    return error_page(request, 400, reason=detail, sent=sent)


# Fields whose value a refusal page never shows back.
_SECRET_FIELD = re.compile(r"password|secret|token|csrf", re.IGNORECASE)


def not_found(request, exception=None) -> HttpResponse:
    if not is_api(request):
        return error_page(request, 404, exception)
    detail = f"No API endpoint at {request.path!r}."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.url_name != CATCH_ALL:
            detail += f" Did you mean {request.path}/ (with the trailing slash)?"
    return api_error(404, detail, "not_found")


CATCH_ALL = "api-not-found"  # the last route of /api/v1/ (dreamweb.api_urls): not a "did you mean" target


def bad_request(request, exception=None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        from django.conf import settings

        return too_large(request, None, settings.DATA_UPLOAD_MAX_MEMORY_SIZE, "DATA_UPLOAD_MAX_MEMORY_SIZE")
    if not is_api(request):
        return error_page(request, 400, exception)
    return api_error(400, "Bad request.", "bad_request")


def permission_denied(request, exception=None) -> HttpResponse:
    if not is_api(request):
        return error_page(request, 403, exception)
    return api_error(403, "You do not have permission to perform this action.", "permission_denied")


def server_error(request) -> HttpResponse:
    if not is_api(request):
        return defaults.server_error(request)
    # The request's transaction was rolled back: nothing it would have written was kept.
    return api_error(500, "The server failed on this request; nothing was changed. It has been logged.", "server_error")
