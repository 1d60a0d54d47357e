"""The optional LLM consolidation step wired into the dream (policy.consolidate, issue 11 item 6): off by default
and then no request; on, the configured model's groups become merge proposals of medium risk (never applied under
auto_low_risk); a failing or missing model leaves the cycle to finish with the aggregation's proposals and says why."""

from __future__ import annotations

import pytest

from reviews import dreams
from reviews.analysis import consolidate as cs
from reviews.analysis import structured_output as so
from reviews.models import AutonomyPolicy, PolicyMode, Proposal, ProposalStatus, RunStatus

from .dream_sessions import corrected_command, ingest, session_doc
from .factories import StoreFactory, TeamFactory, make_entry
from .fake_openai import FakeOpenAI

pytestmark = pytest.mark.all_teams


@pytest.fixture
def fake():
    server = FakeOpenAI(family="openai").start()
    yield server
    so.forget(server.base_url, "m-fake")
    server.stop()


@pytest.fixture
def llm(settings, fake):
    settings.OPENAI_BASE_URL = fake.base_url
    settings.OPENAI_API_KEY = "sk-test-not-a-real-key"
    settings.DREAMWEB_LLM_MODEL = "m-fake"
    settings.DREAMWEB_LLM_TIMEOUT = 2
    settings.DREAMWEB_LLM_MAX_RETRIES = 0
    return fake


def _world(mode=PolicyMode.AUTONOMOUS, consolidate=True, pinned=False):
    team = TeamFactory(slug="tidy")
    store = StoreFactory(team=team, slug="tidy-eng")
    # Paraphrases with no word in common: beyond the lexical aggregation, the model's to point at.
    make_entry(store, key="gpu-etiquette", content="Free the accelerators you have stopped using.")
    make_entry(store, key="idle-cards", content="Do not keep idle graphics cards reserved.", pinned=pinned)
    make_entry(store, key="tz", content="Reports are in UTC.")
    AutonomyPolicy.objects.create(team=team, store=store, mode=mode, min_confidence_auto=0.0, consolidate=consolidate)
    ingest(team, [session_doc(f"s{i}", corrected_command(i), minute=i) for i in range(4)])
    return team, store


def _dream(store, capture):
    with capture(execute=True):
        run = dreams.start_run(store)
    run.refresh_from_db()
    return run


def _merge_groups():
    # E ids follow the memory's key order: gpu-etiquette (E1), idle-cards (E2), tz (E3).
    return {"groups": [{"relation": "same", "items": ["E1", "E2"], "keep": "E1", "reason": "Both: release GPUs."}]}


def test_consolidation_on_proposes_a_merge_that_waits_under_auto_low_risk(llm, db, django_capture_on_commit_callbacks):
    _, store = _world(mode=PolicyMode.AUTO_LOW_RISK)
    llm.consolidation = _merge_groups()
    run = _dream(store, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    merge = Proposal.objects.get(run=run, operation="merge")
    assert (
        merge.targets == ["gpu-etiquette", "idle-cards"]
        and merge.content == "Free the accelerators you have stopped using."
    )
    assert merge.risk == "medium" and cs.REASON_MODEL in merge.risk_reasons
    assert merge.status == ProposalStatus.PENDING  # a model's judgement is medium risk: a reviewer decides
    # the sessions' own lesson still comes from the rules, untouched by the step
    assert Proposal.objects.filter(run=run).exclude(operation="merge").exists()
    outcome = run.outcome
    assert outcome.consolidation["proposed"] == 1 and outcome.consolidation["error"] == ""
    assert run.tokens_input > 0  # the step's tokens are the run's
    asked = [r for r in llm.requests if "memory for AI agents tidy" in r["messages"][0]["content"]]
    assert len(asked) == 1 and "Free the accelerators" in asked[0]["messages"][1]["content"]


def test_consolidation_off_asks_no_model(llm, db, django_capture_on_commit_callbacks):
    _, store = _world(consolidate=False)
    llm.consolidation = _merge_groups()
    run = _dream(store, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED and llm.requests == []
    assert not Proposal.objects.filter(run=run, operation="merge").exists()
    assert run.outcome.consolidation == {}


def test_a_failing_model_leaves_the_cycle_to_finish(llm, db, django_capture_on_commit_callbacks):
    _, store = _world()
    llm.consolidation = {"not": "groups"}  # not the schema, also after the repair request
    run = _dream(store, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert run.outcome.consolidation["error"].startswith("MalformedAnswer")
    assert Proposal.objects.filter(run=run).exclude(operation="merge").exists()
    assert not Proposal.objects.filter(run=run, operation="merge").exists()


def test_no_model_configured_is_said_not_failed(settings, db, django_capture_on_commit_callbacks):
    settings.DREAMWEB_LLM_MODEL = ""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    _, store = _world()
    run = _dream(store, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert "no language model is configured" in run.outcome.consolidation["error"]


def test_a_pinned_entry_is_not_folded_into_another(llm, db, django_capture_on_commit_callbacks):
    _, store = _world(pinned=True)
    llm.consolidation = _merge_groups()  # keeps gpu-etiquette, folding the pinned idle-cards away: refused
    run = _dream(store, django_capture_on_commit_callbacks)
    assert not Proposal.objects.filter(run=run, operation="merge").exists()
    assert "pinned" in run.outcome.consolidation["skipped"][0]
