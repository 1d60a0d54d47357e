"""Request middleware: the input guard's size limit, then one transaction per request whose row-level-security
scope is the signed-in person's teams; htmx requests that need a sign-in; the input guard's rule for pages' query
strings and forms.

Agent API requests start with an empty scope; the API-key authentication narrows it to the key's team once the key
is known (see dreamweb.api_auth). Anonymous requests see no team's rows at all. Superusers are no exception: the web
app cannot see every team at once (dreamweb.rls), so the admin shows a superuser the teams they belong to.
"""

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.shortcuts import resolve_url
from django.utils.cache import patch_vary_headers
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails
from django_htmx.middleware import HtmxMiddleware as BaseHtmxMiddleware

from . import errors, input_guard, rls


class InputGuardMiddleware:
    """Refuse a body past DREAMWEB_MAX_REQUEST_BYTES from its Content-Length, before anything reads it: 413, JSON
    under /api/ (see dreamweb.input_guard for the rest of the guard)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isascii() and declared.isdigit():
            limit = settings.DREAMWEB_MAX_REQUEST_BYTES
            # Past 18 digits it is beyond any limit (and int() of a huge digit string is refused by Python).
            size = int(declared) if len(declared) <= 18 else None
            if size is None or size > limit:
                return errors.too_large(request, size, limit)
        return self.get_response(request)


class TeamScopeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with transaction.atomic():
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                rls.enter_member_scope(user.pk)
            else:
                rls.set_scope("")
            return self.get_response(request)


class PageHtmxDetails(HtmxDetails):
    """``request.htmx`` as the views read it: a history-restore request (htmx after Back or Forward, when the page
    is not in its history cache, which is off here: base.html) is not an htmx request but a request for the whole
    page, since htmx puts what it gets in place of the whole body. Counted as htmx it would get the fragment the view
    answers htmx with (the queue's card list) and the page would lose its header and navigation."""

    def __bool__(self) -> bool:
        return super().__bool__() and not self.history_restore_request


class HtmxMiddleware(BaseHtmxMiddleware):
    """django-htmx's middleware with PageHtmxDetails, and ``Vary: HX-Request, HX-History-Restore-Request`` on every
    HTML answer: a URL that is a whole page and, for htmx, a fragment (the queue, an entry's diff, a run's progress,
    the policy preview, the skills list, ...) must not be served from the browser's cache in the other form. Here
    rather than on each view, so that a new view that answers htmx cannot forget it."""

    async_capable = False  # the app is served by WSGI; this __call__ is the sync one

    def __call__(self, request):
        request.htmx = PageHtmxDetails(request)
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            patch_vary_headers(response, ["HX-Request", "HX-History-Restore-Request"])
        return response


class HtmxLoginMiddleware:
    """An htmx request that needs a sign-in (the session expired, or the person signed out in another tab) is sent to
    the sign-in page as a whole page: htmx would follow Django's plain redirect and swap the sign-in form into the
    card or the list. The redirect becomes an ``HX-Redirect`` to the sign-in page whose ``next`` is the page the
    person was on (``HX-Current-URL``, same origin only), not the partial or the POST that asked: after signing in
    they land on the page, not on a fragment or a 405. Every page's ``login_required`` goes through here; requests
    without htmx keep Django's redirect."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not getattr(request, "htmx", False) or response.status_code != 302 or not _to_sign_in(response):
            return response
        page = request.htmx.current_url_abs_path
        login = redirect_to_login(page).url if page else resolve_url(settings.LOGIN_URL)
        answer = HttpResponseClientRedirect(login)
        patch_vary_headers(answer, ["HX-Request"])
        return answer


def _to_sign_in(response) -> bool:
    return urlsplit(response.get("Location", "")).path == resolve_url(settings.LOGIN_URL)


class PageInputMiddleware:
    """A page's query string or form holding text PostgreSQL cannot store (NUL) is answered with a 400 page naming
    the field, before any view filters or saves with it: a filter or a save with a NUL is a DataError, a 500. One
    rule for every page, present and future, instead of a check in each view and form (Django's CharField refuses
    NUL, but views read query strings directly and fields that split text into lists skip its check). Under /api/
    the serializers refuse the same text with the API's JSON 400 (and dreamweb.input_guard checks its bodies)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not errors.is_api(request):
            problem = input_guard.param_problem(request.GET)
            if problem is None and request.method == "POST":
                problem = input_guard.param_problem(request.POST)
            if problem is not None:
                return errors.refused_input(request, problem)
        return self.get_response(request)


class NoTeamMiddleware:
    """A page that lists the current team's things, opened by someone in no team (a fresh superuser, a person whose
    last membership was removed), answers with a page that says how to get into a team, not with a 404."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from .gates import NoTeam
        from .views import no_team

        if isinstance(exception, NoTeam) and not errors.is_api(request):
            return no_team(request)
        return None
