# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Honest prevalence and sources: sessions are distinct sessions, `of` is the lesson's scope, sources are the
credentials that delivered the evidence (not the agent names the sessions claim), and what one credential pushed is
never low risk and never applies itself."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.importing import import_sessions
from memory.models import AgentSession, MemoryEntry
from reviews import dreams
from reviews.analysis.risk import REASON_ONE_SOURCE
from reviews.models import AutonomyPolicy, PolicyMode, Proposal, ProposalStatus
from reviews.services import policy_allows

from .api_support import Api, make_key
from .dream_sessions import corrected_command, ingest, noise, session_doc
from .page_support import _fast_password_hashing, client  # noqa: F401 - fixtures
from .scoping import all_teams

pytestmark = pytest.mark.all_teams


@pytest.fixture(autouse=True)
def _fresh_keys():
    _KEYS.clear()


_KEYS: dict = {}


def _push(team, key_name: str, docs: list[dict]) -> None:
    raw = _KEYS.get((team.pk, key_name))
    if raw is None:
        with all_teams():
            raw = _KEYS[(team.pk, key_name)] = make_key(team, key_name, scopes=["sessions:write"])
    response = Api(raw).post("/api/v1/sessions/", docs)
    assert response.status_code in (200, 201), response.content


def _set_mode(store, mode: str) -> None:
    AutonomyPolicy.objects.update_or_create(store=store, defaults={"team": store.team, "mode": mode})


def _lesson(prefix: str, n: int, *, agents=None, start=0) -> list[dict]:
    agents = agents or [f"bot-{i}" for i in range(n)]
    return [session_doc(f"{prefix}-{i}", corrected_command(i), agent=agents[i], minute=start + i) for i in range(n)]


@pytest.mark.parametrize("mode", [PolicyMode.AUTO_LOW_RISK, PolicyMode.AUTONOMOUS])
def test_one_key_flood_stays_pending_named_and_counted_as_one_source(world, cycle, mode):
    # One sessions:write key pushes the same lesson five times, under five agent names.
    _push(world.team_a, "flood", _lesson("flood", 5))
    _set_mode(world.store_a, mode)
    run = cycle(world.store_a)
    (proposal,) = Proposal.objects.filter(run=run)
    assert proposal.status == ProposalStatus.PENDING
    assert proposal.risk != "low" and REASON_ONE_SOURCE in proposal.risk_reasons
    assert (proposal.prevalence_sessions, proposal.prevalence_sources, proposal.prevalence_agents) == (5, 1, 5)
    assert not MemoryEntry.objects.filter(store=world.store_a).exists()
    report = dreams.report(run)["proposals"][0]
    assert report["prevalence"] == {"sessions": 5, "of": 5, "sources": 1, "agents": 5}


def test_the_same_lesson_from_several_keys_is_low_risk_and_applies_under_auto_low_risk(world, cycle):
    docs = _lesson("many", 4)
    for i, doc in enumerate(docs):
        _push(world.team_a, f"key-{i % 2}", [doc])  # two keys, two sessions each
    _set_mode(world.store_a, PolicyMode.AUTO_LOW_RISK)
    run = cycle(world.store_a)
    (proposal,) = Proposal.objects.filter(run=run)
    assert proposal.risk == "low" and proposal.risk_reasons == []
    assert (proposal.prevalence_sessions, proposal.prevalence_sources) == (4, 2)
    assert proposal.status == ProposalStatus.APPLIED
    assert MemoryEntry.objects.filter(store=world.store_a).count() == 1


def test_a_policy_asking_for_more_sources_keeps_it_waiting(world, cycle):
    for i, doc in enumerate(_lesson("two", 4)):
        _push(world.team_a, f"key-{i % 2}", [doc])
    _set_mode(world.store_a, PolicyMode.AUTONOMOUS)
    AutonomyPolicy.objects.filter(store=world.store_a).update(min_sources=3)
    run = cycle(world.store_a)
    (proposal,) = Proposal.objects.filter(run=run)
    assert proposal.prevalence_sources == 2 and proposal.status == ProposalStatus.PENDING
    assert not policy_allows(proposal, AutonomyPolicy.objects.get(store=world.store_a))


def test_one_import_run_is_one_source_and_a_pusher_cannot_claim_another(world, cycle):
    import io
    import json

    docs = _lesson("imp", 4)
    for doc in docs:
        doc["metadata"] = {"source": "key:1", "ingested_by": "someone-else"}  # claims are only data
    stream = io.BytesIO("\n".join(json.dumps(d) for d in docs).encode())
    import_sessions(stream, world.team_a, overlap=False)
    sources = set(AgentSession.objects.filter(team=world.team_a).values_list("source", flat=True))
    assert len(sources) == 1 and next(iter(sources)).startswith("import:")
    _set_mode(world.store_a, PolicyMode.AUTONOMOUS)
    run = cycle(world.store_a)
    (proposal,) = Proposal.objects.filter(run=run)
    assert proposal.prevalence_sources == 1 and proposal.status == ProposalStatus.PENDING


def test_agent_scoped_prevalence_counts_among_that_agents_sessions(world, cycle):
    # deploy-bot: the lesson in 4 of its 7 sessions; 20 sessions of other agents.
    docs = _lesson("dep", 4, agents=["deploy-bot"] * 4)
    docs += [session_doc(f"dep-noise-{i}", noise(i), agent="deploy-bot", minute=10 + i) for i in range(3)]
    docs += [session_doc(f"other-{i}", noise(100 + i), agent=f"other-{i % 4}", minute=20 + i) for i in range(20)]
    ingest(world.team_a, docs)
    run = cycle(world.store_a)
    assert run.sessions_analysed == 27
    (proposal,) = Proposal.objects.filter(run=run, scope_agent="deploy-bot")
    assert (proposal.prevalence_sessions, proposal.prevalence_of) == (4, 7)
    assert "4 of 7 sessions" in proposal.rationale
    assert proposal.prevalence_agents == 1


def test_prevalence_counts_distinct_sessions_not_excerpts(world, cycle):
    # Each session repeats the failing command twice: several excerpts per session, one session each.
    docs = []
    for i in range(3):
        events = corrected_command(i) + corrected_command(i + 10)
        docs.append(session_doc(f"rep-{i}", events, agent="bot", minute=i))
    ingest(world.team_a, docs)
    run = cycle(world.store_a)
    proposals = list(Proposal.objects.filter(run=run))
    assert proposals
    for proposal in proposals:
        sessions = set(proposal.evidence.values_list("session_id", flat=True))
        assert proposal.prevalence_sessions == len(sessions) == 3
    assert any(p.evidence.count() > 3 for p in proposals)


def test_card_shows_sources_agents_and_time_span(client, world, cycle):
    _push(world.team_a, "flood", _lesson("card", 3))
    run = cycle(world.store_a)
    (proposal,) = Proposal.objects.filter(run=run)
    client.force_login(world.alice)
    html = client.get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    figures = html[html.index('class="trust-figures') :]
    figures = figures[: figures.index("</p>")]
    assert ">1 source</strong>" in figures and "3 agents" in figures
    assert "· 2025-03-01 10:00–10:02" in figures  # within a day: the minutes
    assert "3 of 3 sessions" in html


def test_policy_page_says_plainly_when_one_key_serves_all_agents(client, world):
    _push(world.team_a, "shared", _lesson("p", 3))
    client.force_login(world.alice)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    html = client.get(url).content.decode()
    assert "One key for all agents" in html and "API key &#x27;shared&#x27;" in html
    assert "bot-0, bot-1, bot-2" in html
    # A second key for one of the agents: no longer one key for all.
    _push(world.team_a, "own", [session_doc("p-own", noise(1), agent="bot-0")])
    assert "One key for all agents" not in client.get(url).content.decode()


def test_policy_page_sets_min_sources(client, world):
    client.force_login(world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    data = {
        "mode": "manual",
        "min_sessions": 3,
        "min_share": 0,
        "min_confidence_auto": 0.6,
        "min_sources": 3,
        "max_sessions": 1000,
        "token_budget": 100000,
        "agents": "",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    assert client.post(url, data).status_code == 302
    assert AutonomyPolicy.objects.get(store=world.store_a).min_sources == 3
    bad = client.post(url, {**data, "min_sources": 0})
    assert bad.status_code == 200 and "At least 1 source." in bad.content.decode()
