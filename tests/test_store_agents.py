# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""A store serves named agents (memory.MemoryStore.agents): its dream reads only their sessions and counts prevalence
among them; the list is set on the policy page, through the API and by import, and exported."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from memory.portability import export_document, import_document
from reviews.models import PolicyChange, Proposal

from .api_support import Api, make_key
from .dream_sessions import corrected_command, ingest, session_doc
from .page_support import _fast_password_hashing, client  # noqa: F401 - fixtures
from .scoping import all_teams

pytestmark = pytest.mark.all_teams


def _corpus(team):
    """The same recurring lesson in 4 sessions of deploy-bot and 5 of support-bot."""
    docs = [session_doc(f"d-{i}", corrected_command(i), agent="deploy-bot", minute=i) for i in range(4)]
    docs += [session_doc(f"s-{i}", corrected_command(i), agent="support-bot", minute=10 + i) for i in range(5)]
    ingest(team, docs)


def test_a_stores_dream_reads_only_its_agents_and_counts_prevalence_among_them(world, cycle):
    _corpus(world.team_a)
    world.store_a.agents = ["deploy-bot"]
    world.store_a.save()
    run = cycle(world.store_a)
    assert run.sessions_selected == 4 and run.inputs.agents == ["deploy-bot"]
    (proposal,) = Proposal.objects.filter(run=run)
    sessions = set(proposal.evidence.values_list("session__external_id", flat=True))
    assert sessions == {f"d-{i}" for i in range(4)}
    assert (proposal.prevalence_sessions, proposal.prevalence_of) == (4, 4)


def test_a_store_without_agents_serves_every_agent(world, cycle):
    _corpus(world.team_a)
    run = cycle(world.store_a)
    assert run.sessions_selected == 9


def test_the_command_refuses_an_agent_the_store_does_not_serve(world):
    world.store_a.agents = ["deploy-bot"]
    world.store_a.save()
    with pytest.raises(CommandError, match="serves only deploy-bot"):
        call_command("dream", "--team", "team-a", "--store", "eng", "--agent", "support-bot", "--dry-run")


def test_policy_page_sets_the_stores_agents_and_audits_it(client, world):
    client.force_login(world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    assert 'name="agents"' in client.get(url).content.decode()
    data = {
        "mode": "manual",
        "min_sessions": 3,
        "min_share": 0,
        "min_confidence_auto": 0.6,
        "max_sessions": 1000,
        "token_budget": 100000,
        "agents": "support-bot, deploy-bot, deploy-bot",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    assert client.post(url, data).status_code == 302
    world.store_a.refresh_from_db()
    assert world.store_a.agents == ["deploy-bot", "support-bot"]
    assert PolicyChange.objects.get().changes["agents"] == [[], ["deploy-bot", "support-bot"]]
    assert "deploy-bot, support-bot" in client.get(url).content.decode()


def test_api_reads_and_sets_a_stores_agents(world):
    with all_teams():
        raw = make_key(world.team_a, "tooling", scopes=["dreams", "memory:read"])
    api = Api(raw)
    assert api.get("/api/v1/stores/eng/agents/").json() == {"agents": []}
    response = api.put("/api/v1/stores/eng/agents/", {"agents": [" deploy-bot ", "a"]})
    assert response.status_code == 200 and response.json() == {"agents": ["a", "deploy-bot"]}
    world.store_a.refresh_from_db()
    assert world.store_a.agents == ["a", "deploy-bot"]
    listed = {s["slug"]: s for s in api.get("/api/v1/stores/").json()["results"]}
    assert listed["eng"]["agents"] == ["a", "deploy-bot"]
    bad = api.put("/api/v1/stores/eng/agents/", {"agents": "deploy-bot"})
    assert bad.status_code == 400
    assert api.put("/api/v1/stores/ops/agents/", {"agents": []}).status_code == 404  # team B's store


def test_export_writes_and_import_sets_the_agents(world):
    world.store_a.agents = ["deploy-bot"]
    world.store_a.save()
    doc = export_document(world.store_a)
    assert doc["agents"] == ["deploy-bot"]
    doc["store"] = "copy"
    report = import_document(world.team_a, doc)
    assert report.store.agents == ["deploy-bot"]
    # A document that does not say leaves the store's list as it is; one that says [] serves every agent again.
    import_document(world.team_a, {"store": "copy", "entries": []})
    report.store.refresh_from_db()
    assert report.store.agents == ["deploy-bot"]
    import_document(world.team_a, {"store": "copy", "agents": [], "entries": []})
    report.store.refresh_from_db()
    assert report.store.agents == []
