"""Per-key rate limit: each agent key has its own bucket (rate ``DEFAULT_THROTTLE_RATES["agent_key"]``).

The count lives in Django's cache; with the default local-memory cache each worker process counts separately, so
configure a shared cache (Redis) to make the limit exact across processes.
"""

from __future__ import annotations

from rest_framework.throttling import SimpleRateThrottle

from .models import AgentKey


class AgentKeyRateThrottle(SimpleRateThrottle):
    scope = "agent_key"

    def get_cache_key(self, request, view):
        key = request.auth
        if not isinstance(key, AgentKey):
            return None  # unauthenticated requests are refused before they cost anything
        return self.cache_format % {"scope": self.scope, "ident": key.prefix}
