"""create_team, create_agent_key and create_member, driven like a user drives them."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from dreamweb.models import AgentKey, Membership, Team, hash_key
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory
from tests.scoping import all_teams

pytestmark = pytest.mark.django_db


def run(*args, **kwargs) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


def test_create_team_then_again_is_a_no_op():
    out, _ = run("create_team", "acme", "--name", "Acme Corp")
    assert out == "created team acme (Acme Corp)\n"
    out, _ = run("create_team", "acme", "--name", "Something else")
    assert out == "team acme already exists; nothing to do\n"
    with all_teams():
        assert list(Team.objects.values_list("slug", "name")) == [("acme", "Acme Corp")]


def test_create_team_rejects_a_bad_slug():
    with pytest.raises(CommandError, match="not a valid team slug"):
        run("create_team", "two words")
    with all_teams():
        assert not Team.objects.exists()


def test_create_agent_key_prints_the_key_once_and_stores_only_its_hash():
    with all_teams():
        team = TeamFactory(slug="acme")
        StoreFactory(team=team, slug="eng")
    out, err = run(
        "create_agent_key", "--team", "acme", "--name", "ci", "--scope", "memory:read", "--store", "eng",
        "--expires-days", "30",
    )  # fmt: skip
    raw = out.strip()
    with all_teams():
        key = AgentKey.objects.get(team=team, name="ci")
    assert raw.startswith(f"dw_{key.prefix}_") and "\n" not in raw
    assert key.hashed_key == hash_key(raw) and raw not in key.hashed_key
    assert key.scopes == ["memory:read", "memory:write"]  # a key that may write a store needs memory:write
    assert key.writable_stores == ["eng"] and key.expires_at is not None
    assert "shown only this once" in err and raw not in err


def test_create_agent_key_defaults_and_refusals():
    with all_teams():
        TeamFactory(slug="acme")
    run("create_agent_key", "--team", "acme", "--name", "bot")
    with all_teams():
        assert AgentKey.objects.get(name="bot").scopes == ["sessions:write", "memory:read", "skills:read"]
    with pytest.raises(CommandError, match="already has a key named 'bot'"):
        run("create_agent_key", "--team", "acme", "--name", "bot")
    with pytest.raises(CommandError, match="no store nope in team acme"):
        run("create_agent_key", "--team", "acme", "--name", "writer", "--store", "nope")
    with pytest.raises(CommandError, match="no team 'ghost'; create it first"):
        run("create_agent_key", "--team", "ghost", "--name", "x")
    with all_teams():
        assert AgentKey.objects.count() == 1


def test_create_member_creates_user_and_changes_role():
    with all_teams():
        team = TeamFactory(slug="acme")
    out, _ = run("create_member", "--team", "acme", "--username", "rita", "--role", "reviewer", "--password", "pw-rita")
    assert out == "new user rita is now reviewer of acme\n"
    rita = get_user_model().objects.get(username="rita")
    assert rita.check_password("pw-rita")
    out, _ = run("create_member", "--team", "acme", "--username", "rita", "--role", "admin")
    assert out == "user rita is admin of acme\n"
    with all_teams():
        assert Membership.objects.get(team=team, user=rita).role == "admin"
    assert get_user_model().objects.get(username="rita").check_password("pw-rita")  # kept


def test_create_member_without_password_prints_a_random_one():
    with all_teams():
        TeamFactory(slug="acme")
    out, _ = run("create_member", "--team", "acme", "--username", "vic", "--role", "viewer")
    password = out.strip().splitlines()[-1].removeprefix("password (shown once): ")
    assert len(password) >= 12 and get_user_model().objects.get(username="vic").check_password(password)


@pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature")
def test_tenancy_commands_set_their_own_scope_under_rls():
    """Without the test's all-teams scope, only the commands' own scoping lets these writes through."""
    run("create_team", "walled")
    run("create_agent_key", "--team", "walled", "--name", "k")
    run("create_member", "--team", "walled", "--username", "wally", "--role", "viewer", "--password", "pw")
    with all_teams():
        team = Team.objects.get(slug="walled")
        assert AgentKey.objects.get(name="k").team_id == team.pk
        assert Membership.objects.get(user__username="wally").team_id == team.pk
    assert not Team.objects.filter(slug="walled").exists()  # and outside any scope it is invisible
