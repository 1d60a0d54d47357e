"""Each request runs in one transaction whose row-level-security scope is the signed-in person's teams.

Agent API requests start with an empty scope; the API-key authentication narrows it to the key's team once the key
is known (see dreamweb.api_auth). Anonymous requests see no team's rows at all. Superusers are no exception: the web
app cannot see every team at once (dreamweb.rls), so the admin shows a superuser the teams they belong to.
"""

from django.db import transaction

from . import rls


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
