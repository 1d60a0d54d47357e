"""The API key's lookup (dreamweb.api_auth._lookup): the key and its team read by one statement written out, the
same values the ORM's ``select_related("team")`` lookup reads, without building an ORM query on every request."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import transaction
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone

from dreamweb import api_auth
from dreamweb.models import AgentKey, hash_key
from tests.api_support import make_key
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def _key(team, **kwargs) -> AgentKey:
    raw = make_key(team, **kwargs)
    return AgentKey.objects.get(prefix=api_auth.parse_prefix(raw))


def test_the_key_and_its_team_as_the_orm_reads_them():
    team = TeamFactory(slug="lookup", allowed_hosts=["example.com"])
    made = [
        _key(team, name="full"),
        _key(team, name="narrow", scopes=["memory:read"], writable_stores=["eng", "docs"]),
        _key(team, name="expiring", expires_at=timezone.now() + timedelta(days=3)),
    ]
    AgentKey.objects.filter(pk=made[1].pk).update(revoked_at=timezone.now(), last_used_at=timezone.now())
    for key in made:
        orm = AgentKey.objects.select_related("team").get(pk=key.pk)
        with transaction.atomic():
            read = api_auth._lookup(key.prefix)
        assert {f.attname: getattr(read, f.attname) for f in AgentKey._meta.concrete_fields} == {
            f.attname: getattr(orm, f.attname) for f in AgentKey._meta.concrete_fields
        }
        assert {f.attname: getattr(read.team, f.attname) for f in type(orm.team)._meta.concrete_fields} == {
            f.attname: getattr(orm.team, f.attname) for f in type(orm.team)._meta.concrete_fields
        }
        assert isinstance(read.scopes, list) and isinstance(read.team.allowed_hosts, list)
        assert not read._state.adding and read._state.db == "default"
    with transaction.atomic():
        assert api_auth._lookup("nosuchkey") is None


def test_the_lookup_builds_no_orm_query():
    """Building the ORM's query for the key on every API request cost more CPU than the rest of the key's check
    (docs/benchmarks.md, issue 15, stop 20): the lookup is written out once per process."""
    key = _key(TeamFactory(slug="no-orm"))
    with transaction.atomic(), mock.patch.object(SQLCompiler, "as_sql", side_effect=AssertionError("ORM query")):
        read = api_auth._lookup(key.prefix)
        assert read.pk == key.pk and read.team.slug == "no-orm"  # the team is read with the key: no query


@pytest.mark.skipif(not is_postgres(), reason="the extra columns are read on PostgreSQL only")
def test_a_views_extra_columns_are_read_only_for_the_accepted_key():
    """A view's extra columns ride the key's statement (the context's ranking check), gated in the database on the
    presented secret's hash, revocation and expiry: for any key authenticate would refuse, they read nothing and say
    so (``read`` false), and the key itself is read the same."""
    team = TeamFactory(slug="gated")
    StoreFactory(team=team, slug="eng")
    raws = {
        "good": make_key(team, name="good"),
        "revoked": make_key(team, name="revoked"),
        "expired": make_key(team, name="expired"),
    }
    AgentKey.objects.filter(name="revoked", team=team).update(revoked_at=timezone.now())
    AgentKey.objects.filter(name="expired", team=team).update(expires_at=timezone.now() - timedelta(minutes=1))

    def read(raw: str, presented: str):
        extra = api_auth.KeyStatementExtra(
            "s.id, s.slug, now()",
            f"LEFT JOIN memory_memorystore s ON s.team_id = {api_auth.KEY_TEAM_COLUMN} AND s.slug = %s",
            ["eng"],
        )
        with transaction.atomic():
            key = api_auth._lookup(api_auth.parse_prefix(raw), extra, presented)
        assert key is not None  # the key itself is read the same
        return extra.read, extra.values

    read_, values = read(raws["good"], hash_key(raws["good"]))
    assert read_ and values[1] == "eng" and values[0] is not None and values[2] is not None
    # Refused: not read, so that no NULL of a refused row is ever taken for an answer ("no such store").
    assert read(raws["good"], hash_key(raws["good"] + "x")) == (False, ())
    assert read(raws["revoked"], hash_key(raws["revoked"])) == (False, ())
    assert read(raws["expired"], hash_key(raws["expired"])) == (False, ())


@pytest.mark.skipif(not is_postgres(), reason="the extra columns are read on PostgreSQL only")
def test_a_views_extra_columns_are_read_only_for_a_key_holding_the_views_scope():
    """A key the view's permission will refuse (403) reads nothing of the team's either: the gate also asks for the
    scope the view names; a key holding it, among others, is read as before."""
    team = TeamFactory(slug="scoped-gate")
    StoreFactory(team=team, slug="eng")
    without = make_key(team, name="writer", scopes=["sessions:write"])
    holding = make_key(team, name="reader", scopes=["sessions:write", "memory:read"])

    def read(raw: str, scope: str):
        extra = api_auth.KeyStatementExtra(
            "s.slug",
            f"LEFT JOIN memory_memorystore s ON s.team_id = {api_auth.KEY_TEAM_COLUMN} AND s.slug = %s",
            ["eng"],
            scope=scope,
        )
        with transaction.atomic():
            key = api_auth._lookup(api_auth.parse_prefix(raw), extra, hash_key(raw))
        assert key is not None
        return extra.read, extra.values

    assert read(without, "memory:read") == (False, ())
    assert read(holding, "memory:read") == (True, ("eng",))
    # A scope named like a prefix of another, or in another case, is not held.
    assert read(holding, "memory") == (False, ())
    assert read(holding, "MEMORY:READ") == (False, ())
    assert read(without, "") == (True, ("eng",))  # no scope asked for: the secret's gate alone
