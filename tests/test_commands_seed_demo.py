"""seed_demo: a living demo system, deterministic and idempotent."""

import io
import sys
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from demo.data import generate_sessions
from dreamweb.models import AgentKey, Membership, Team, hash_key
from memory.models import AgentSession, MemoryEntry, MemoryStore
from memory.sessions import validate_session
from tests.conftest import is_postgres
from tests.scoping import all_teams, no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def seed(*extra) -> str:
    out = io.StringIO()
    with no_scope():  # the command opens its own scopes
        call_command(
            "seed_demo",
            "--insecure-ok",
            "--sessions",
            "40",
            "--rival-sessions",
            "8",
            *extra,
            stdout=out,
            stderr=io.StringIO(),
        )
    return out.getvalue()


def counts() -> dict:
    return {
        "teams": Team.objects.count(),
        "users": get_user_model().objects.count(),
        "memberships": Membership.objects.count(),
        "stores": MemoryStore.objects.count(),
        "entries": MemoryEntry.objects.count(),
        "sessions": AgentSession.objects.count(),
        "keys": AgentKey.objects.count(),
    }


def test_generated_sessions_are_valid_deterministic_and_realistic():
    start = datetime(2026, 11, 1, tzinfo=UTC)
    first = list(generate_sessions("demo", 200, seed=7, start=start))
    assert first == list(generate_sessions("demo", 200, seed=7, start=start))
    assert first != list(generate_sessions("demo", 200, seed=8, start=start))
    for doc in first:
        validate_session(doc)
    assert len({d["external_id"] for d in first}) == 200
    assert len({d["agent"] for d in first}) == 5
    sizes = sorted(len(d["events"]) for d in first)
    assert 20 <= sizes[len(sizes) // 2] <= 40
    text = " ".join(e.get("content", "") for d in first for e in d["events"])
    for signal in ("No rule to make target 'deploy'", "use pnpm", "200 GBP", "one-off-"):
        assert signal.lower() in text.lower(), signal
    assert any(e["type"] == "memory_write" for d in first for e in d["events"])
    assert any(e.get("is_error") for d in first for e in d["events"])


def test_seed_demo_creates_a_living_system_and_running_it_again_adds_nothing():
    out = seed("--no-dream")
    assert "admin     / admin-demo" in out and "root      / root-demo" in out
    raw = next(line.strip() for line in out.splitlines() if line.strip().startswith("dw_"))
    key = AgentKey.objects.get(name="demo-agent")
    assert key.hashed_key == hash_key(raw) and key.team.slug == "demo"
    demo, rival = Team.objects.get(slug="demo"), Team.objects.get(slug="rival")
    assert AgentSession.objects.filter(team=demo).count() == 40
    assert AgentSession.objects.filter(team=rival).count() == 8
    assert set(MemoryStore.objects.filter(team=demo).values_list("slug", flat=True)) == {"eng", "support", "data"}
    assert MemoryEntry.objects.filter(store__slug="eng", team=demo).count() >= 8
    roles = dict(Membership.objects.filter(team=demo).values_list("user__username", "role"))
    assert roles == {"admin": "admin", "reviewer": "reviewer", "viewer": "viewer"}
    assert not Membership.objects.filter(team=demo, user__username="rival").exists()
    User = get_user_model()
    assert User.objects.get(username="reviewer").check_password("reviewer-demo")
    assert User.objects.get(username="root").is_superuser

    before = counts()
    out = seed("--no-dream")
    assert counts() == before
    assert "sessions of demo: 0 new, 40 in all" in out
    assert "demo-agent exists already" in out and "dw_" not in out


def test_seed_demo_refuses_without_debug_unless_told(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="known passwords"):
        call_command("seed_demo", stdout=io.StringIO())
    assert not Team.objects.exists()


def test_without_the_dream_pipeline_the_dream_is_skipped_with_a_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "reviews.dreams", None)  # makes the import fail
    out = seed()
    assert "Dream: skipped (the dream pipeline is not installed yet)" in out
    assert AgentSession.objects.count() == 48


@pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature")
def test_seed_demo_scopes_its_work_under_rls():
    seed("--no-dream")
    with all_teams():
        demo = Team.objects.get(slug="demo")
        assert AgentSession.objects.filter(team=demo).count() == 40
        assert set(MemoryEntry.objects.filter(store__team=demo).values_list("team_id", flat=True)) == {demo.pk}
