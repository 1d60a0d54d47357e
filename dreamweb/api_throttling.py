"""Per-key rate limit: each agent key has its own budget per window (rate ``DEFAULT_THROTTLE_RATES["agent_key"]``).

The count is one atomic counter per key and window in Django's cache (``add`` then ``incr``), so concurrent requests
cannot lose counts. With Redis configured (settings.CACHES follows REDIS_URL) every worker process shares the
counter: the limit holds for the whole deployment, not per process. Fixed windows: a key gets at most the rate in
each window, and ``Retry-After`` says when the next window starts.
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

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_end = (window + 1) * self.duration
        counter = f"{self.key}:{window}"
        self.cache.add(counter, 0, timeout=self.duration + 1)
        try:
            count = self.cache.incr(counter)
        except ValueError:  # the counter expired between add and incr: this request opens it again
            self.cache.add(counter, 1, timeout=self.duration + 1)
            count = 1
        return count <= self.num_requests

    def wait(self) -> float:
        return max(0.0, self.window_end - self.timer())
