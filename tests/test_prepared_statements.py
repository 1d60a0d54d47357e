# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""dreamweb.prepared: the agents' API's hot statements are prepared once per connection, and answer as before."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.api_support import Api, fast_passwords, keys  # noqa: F401 - fixtures
from tests.conftest import is_postgres
from tests.factories import make_entry, make_skill
from tests.scoping import all_teams

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not is_postgres(), reason="prepared statements are PostgreSQL's"),
]

QUERY = {"store": "eng", "agent": "bot", "query": "deploy", "max_items": 5}


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [r[0] for r in cursor.fetchall()]


def _served(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "serve_id"}


def test_a_context_request_prepares_its_statements_and_answers_the_same(world, keys, settings):
    with all_teams():
        for i in range(8):
            make_entry(world.store_a, key=f"k{i}", content=f"deploy lesson {i}", scope_agent="bot" if i % 2 else None)
        make_skill(world.team_a, name="release", description="How to release.")
    settings.DREAMWEB_DB_PREPARED_STATEMENTS = False
    api = Api(keys.full)
    unprepared = api.get("/api/v1/context/", query=QUERY).json()
    assert not _prepared()
    settings.DREAMWEB_DB_PREPARED_STATEMENTS = True
    first = api.get("/api/v1/context/", query=QUERY).json()
    again = api.get("/api/v1/context/", query=QUERY).json()
    statements = _prepared()
    # The request's scope, the key's scope, the key's row with the ranking's check and the skills fingerprint (one
    # statement: memory.api.context), the audit row.
    for part in ("set_config($1, $2, true)", "dreamweb_key_team", "contextserve"):
        assert [s for s in statements if part in s], (part, statements)
    assert [s for s in statements if '"prefix" = $' in s and "content_version" in s and "skills_registry" in s]
    # Prepared once each: the second request added none.
    assert len(statements) == len(set(statements))
    assert _served(first) == _served(again) == _served(unprepared)
    assert len(first["items"]) == 5 and first["skills"] and first["serve_id"] != again["serve_id"]
