"""Helpers for the API tests: agent keys for the personas' teams and a small client that speaks Api-Key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dreamweb.models import AgentKey, Scope

from .scoping import all_teams, no_scope

ALL_SCOPES = [s.value for s in Scope]


def make_key(team, name="agent", scopes=None, writable_stores=("*",), **kwargs) -> str:
    """A key for the team; returns the raw secret (the model is reachable by its name)."""
    _, raw = AgentKey.generate(
        team=team,
        name=name,
        scopes=ALL_SCOPES if scopes is None else scopes,
        writable_stores=list(writable_stores),
        **kwargs,
    )
    return raw


class Api:
    """Django test client with the key header and JSON bodies. Each request starts from an empty team scope, as a
    real request does, and the test code gets its own scope back afterwards (tests/scoping.py)."""

    def __init__(self, raw: str | None = None):
        self.client = Client()
        self.raw = raw

    def _headers(self, headers: dict | None, raw) -> dict:
        out = dict(headers or {})
        key = self.raw if raw is ... else raw
        if key is not None:
            out.setdefault("Authorization", f"Api-Key {key}")
        return out

    def request(self, method: str, path: str, body=None, *, headers=None, raw=..., query=None):
        kwargs = {"headers": self._headers(headers, raw)}
        if body is not None:
            kwargs["data"] = body if isinstance(body, bytes | str) else json.dumps(body)
            kwargs["content_type"] = "application/json"
        if query is not None:
            kwargs["data"] = query
        with no_scope():
            return getattr(self.client, method.lower())(path, **kwargs)

    def get(self, path, query=None, **kw):
        return self.request("GET", path, query=query, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body if body is not None else {}, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body if body is not None else {}, **kw)

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, body if body is not None else {}, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


@dataclass
class Keys:
    full: str  # every scope, may write every store of team A
    reader: str  # memory:read only
    no_scopes: str
    revoked: str
    expired: str
    other_team: str  # every scope, team B


@pytest.fixture
def keys(world) -> Keys:
    with all_teams():
        full = make_key(world.team_a, "full")
        reader = make_key(world.team_a, "reader", scopes=["memory:read"], writable_stores=())
        no_scopes = make_key(world.team_a, "none", scopes=[])
        revoked = make_key(world.team_a, "revoked")
        AgentKey.objects.get(name="revoked").revoke()
        expired = make_key(world.team_a, "expired", expires_at=timezone.now() - timedelta(minutes=1))
        other = make_key(world.team_b, "b-full")
    return Keys(full, reader, no_scopes, revoked, expired, other)


def session_doc(external_id="s-1", agent="deploy-bot", **extra) -> dict:
    return {
        "external_id": external_id,
        "agent": agent,
        "task": "release",
        "outcome": "success",
        "events": [
            {"type": "message", "role": "user", "content": "Ship it."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c1", "content": "ok", "is_error": False, "exit_code": 0},
            {"type": "memory_write", "content": "Use make release."},
        ],
        **extra,
    }


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """The personas' passwords need not be hashed slowly in API tests (agents never log in)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
