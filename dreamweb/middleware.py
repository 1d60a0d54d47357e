"""Request middleware: the input guard's size limit, then one transaction per request whose row-level-security
scope is the signed-in person's teams.

Agent API requests start with an empty scope; the API-key authentication narrows it to the key's team once the key
is known (see dreamweb.api_auth). Anonymous requests see no team's rows at all. Superusers are no exception: the web
app cannot see every team at once (dreamweb.rls), so the admin shows a superuser the teams they belong to.
"""

from django.conf import settings
from django.db import transaction

from . import errors, rls


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
