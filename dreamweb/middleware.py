"""Each request runs in one transaction whose row-level-security scope is the signed-in person's teams.

Agent API requests start with an empty scope; the API-key authentication narrows it to the key's team once the key
is known (see dreamweb.api_auth). Anonymous requests see no team's rows at all.
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
                from .models import Membership

                if user.is_superuser:
                    rls.set_scope(rls.ALL_TEAMS)
                else:
                    with rls.system_scope():
                        team_ids = list(Membership.objects.filter(user=user).values_list("team_id", flat=True))
                    rls.set_scope(team_ids)
            else:
                rls.set_scope("")
            return self.get_response(request)
