"""Scopes of agent keys as DRF permissions: ``permission_classes = [HasScope("memory:read")]``.

No key (or a key that failed authentication) is 401; a valid key without the scope is 403. Which team's objects
the key may reach is not decided here: views start from ``Model.objects.for_agent_key(key)`` (404 for other
teams), and row-level security repeats it in the database.
"""

from __future__ import annotations

from functools import cache

from rest_framework import exceptions, permissions

from .models import AgentKey, Scope


class _HasScope(permissions.BasePermission):
    scope: str = ""

    def has_permission(self, request, view) -> bool:
        key = request.auth
        if not isinstance(key, AgentKey):
            raise exceptions.NotAuthenticated("Authentication required: send `Authorization: Api-Key <key>`.")
        if not key.has_scope(self.scope):
            raise exceptions.PermissionDenied(f"This API key lacks the `{self.scope}` scope.")
        return True


@cache
def HasScope(scope: str) -> type[permissions.BasePermission]:  # noqa: N802 - reads like a class in views
    """A permission class requiring ``scope`` (one of dreamweb.models.Scope)."""
    if scope not in Scope.values:
        raise ValueError(f"unknown scope {scope!r}")
    return type(f"HasScope[{scope}]", (_HasScope,), {"scope": scope})


class IsAgent(_HasScope):
    """Any valid key, whatever its scopes (e.g. the ping endpoint)."""

    def has_permission(self, request, view) -> bool:
        if not isinstance(request.auth, AgentKey):
            raise exceptions.NotAuthenticated("Authentication required: send `Authorization: Api-Key <key>`.")
        return True
