"""Request facts that depend on how the site is deployed."""

from __future__ import annotations

from django.conf import settings


def client_ip(request) -> str | None:
    """The client's address: REMOTE_ADDR, or behind DREAMWEB_PROXY_COUNT trusted proxies the address the nearest of
    them saw (X-Forwarded-For is read from the right, so a client cannot pick its own address by sending one)."""
    proxies = int(getattr(settings, "DREAMWEB_PROXY_COUNT", 0))
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if proxies and len(forwarded) >= proxies:
        return forwarded[-proxies]
    return request.META.get("REMOTE_ADDR")
