"""The optional LLM consolidation step (reviews/analysis/consolidate.py): the model points at paraphrases and
contradictions by id; code builds the proposals, keeps texts as they are and never lets one apply by itself."""

from __future__ import annotations

import json

import pytest
from openai import OpenAI

from reviews.analysis import consolidate as cs
from reviews.analysis import structured_output as so
from reviews.analysis.findings import ProposalDraft, signature

from .fake_openai import FakeOpenAI

SECRET = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"


def entry(key, content, *, agent=None, pinned=False, origin="dream"):
    return {
        "key": key,
        "content": content,
        "content_hash": f"h-{key}",
        "scope_agent": agent,
        "scope_task": None,
        "origin": origin,
        "pinned": pinned,
    }


def lesson(content, *, agent=None):
    return ProposalDraft(
        target_kind="memory",
        operation="add",
        targets=[],
        target_hashes={},
        content=content,
        scope_agent=agent,
        scope_task=None,
        kind="correction",
        rationale="Seen in 4 of 20 sessions.",
        prevalence_sessions=4,
        prevalence_of=20,
        confidence=0.8,
        risk="low",
        risk_reasons=[],
        signature=signature("add", "memory", [], content),
        evidence=[{"session_id": 1, "external_id": "s1", "event_index": 2, "excerpt": "use pnpm", "trust": "user"}],
    )


MEMORY = [
    entry("deploy-cmd", "Deploy with make release."),
    entry("deploy-howto", "To ship to production, run `make release`."),
    entry("node-pm", "Install packages with npm.", origin="human"),
    entry("review-rule", "Every pull request needs one approving review.", pinned=True),
    entry("review-two", "Pull requests need two approvals before merge."),
    entry("bot-only", "The deploy bot releases on Fridays.", agent="deploy-bot"),
    entry("secret-note", f"The eval key is {SECRET}"),
]


@pytest.fixture
def server():
    fake = FakeOpenAI(family="llama-cpp-python").start()
    yield fake
    so.forget(fake.base_url, "m")
    fake.stop()


def run(server, groups, drafts=None, memory=MEMORY):
    server.consolidation = {"groups": groups}
    client = OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=5)
    return cs.consolidate(client, model="m", memory=memory, drafts=drafts or [], max_tokens=800)


def test_paraphrased_entries_become_a_merge_that_keeps_one_text_word_for_word(server):
    result = run(
        server, [{"relation": "same", "items": ["E2", "E1"], "keep": "E2", "reason": "Both say make release."}]
    )
    (merge,) = result.drafts
    assert merge.operation == "merge" and merge.targets == ["deploy-howto", "deploy-cmd"]  # the kept one first
    assert merge.content == "To ship to production, run `make release`."
    assert merge.target_hashes == {"deploy-howto": "h-deploy-howto", "deploy-cmd": "h-deploy-cmd"}
    assert merge.kind == "duplicate" and merge.risk == "medium" and cs.REASON_MODEL in merge.risk_reasons
    assert "Both say make release." in merge.rationale
    # The same keys give the same signature as the aggregation's own merge: one pending proposal, not two.
    assert merge.signature == signature(
        "merge", "memory", ["deploy-cmd", "deploy-howto"], "merge:deploy-cmd,deploy-howto"
    )
    assert result.proposed == 1 and result.tokens_input == 1200 and not result.error
    # What was asked: json_object with the schema (llama-cpp-python), items by id, each on one line, as data.
    user = server.requests[-1]["messages"][1]["content"]
    assert "E1 [agent *, task *]: Deploy with make release." in user and "<<<ITEMS " in user
    assert server.formats() == ["json_schema", "json_object"]


def test_a_contradiction_between_entries_merges_into_the_one_kept(server):
    result = run(server, [{"relation": "contradicts", "items": ["E4", "E5"], "keep": "E4", "reason": "one or two"}])
    (merge,) = result.drafts
    assert merge.targets == ["review-rule", "review-two"] and merge.kind == "contradiction"
    assert merge.content == "Every pull request needs one approving review."


def test_a_pinned_entry_is_never_folded_away(server):
    result = run(server, [{"relation": "contradicts", "items": ["E4", "E5"], "keep": "E5", "reason": "two"}])
    assert result.drafts == [] and result.proposed == 0
    assert "pinned" in result.skipped[0]


def test_a_new_lesson_that_contradicts_an_entry_becomes_its_update(server):
    pnpm = lesson("Install packages with pnpm, not npm.")
    other = lesson("Run the linter before pushing.")
    result = run(
        server,
        [{"relation": "contradicts", "items": ["P1", "E3"], "keep": "P1", "reason": "The team moved to pnpm."}],
        drafts=[pnpm, other],
    )
    update, untouched = result.drafts
    assert untouched is other
    assert (
        update.operation == "update"
        and update.targets == ["node-pm"]
        and update.target_hashes == {"node-pm": "h-node-pm"}
    )
    assert update.content == "Install packages with pnpm, not npm." and update.evidence == pnpm.evidence
    assert update.signature != pnpm.signature and pnpm.operation == "add"  # the original draft is not changed
    # Rewrites a human-written entry: medium, and the model's reason.
    assert update.risk == "medium" and any("human-written" in r for r in update.risk_reasons)
    assert cs.REASON_MODEL in update.risk_reasons and "moved to pnpm" in update.rationale


@pytest.mark.parametrize(
    ("relation", "keep", "words"),
    [("same", "E1", "to say the same as"), ("contradicts", "E1", "to contradict, and kept")],
)
def test_a_new_lesson_like_an_entry_stays_for_a_reviewer(server, relation, keep, words):
    draft = lesson("Ship with `make release`.")
    result = run(server, [{"relation": relation, "items": ["P1", "E1"], "keep": keep, "reason": "r"}], drafts=[draft])
    (same,) = result.drafts
    assert same.operation == "add" and same.content == draft.content
    assert words in same.rationale and "`deploy-cmd`" in same.rationale
    assert same.risk == "medium"  # never applies by itself under auto_low_risk


@pytest.mark.parametrize(
    ("group", "why"),
    [
        ({"relation": "same", "items": ["E1", "E99"], "keep": "E1", "reason": ""}, "unknown ids"),
        ({"relation": "same", "items": ["E1"], "keep": "E1", "reason": ""}, "fewer than two"),
        ({"relation": "same", "items": ["E1", "E2"], "keep": "E3", "reason": ""}, "not among them"),
        ({"relation": "same", "items": ["deploy-cmd", "E2"], "keep": "E2", "reason": ""}, "unknown ids"),
        ({"relation": "same", "items": ["E1", "E6"], "keep": "E1", "reason": ""}, "different scopes"),
    ],
)
def test_groups_that_do_not_hold_are_skipped_with_the_reason(server, group, why):
    result = run(server, [group])
    assert result.drafts == [] and why in result.skipped[0]


def test_an_item_is_in_one_group_at_most(server):
    groups = [
        {"relation": "same", "items": ["E1", "E2"], "keep": "E1", "reason": ""},
        {"relation": "same", "items": ["E2", "E7"], "keep": "E2", "reason": ""},
    ]
    result = run(server, groups)
    assert len(result.drafts) == 1 and "already in another group" in result.skipped[0]


def test_secrets_never_leave_and_a_failed_model_leaves_the_drafts_as_they_were(server):
    draft = lesson("Run the linter before pushing.")
    server.consolidation = {"no": "groups"}
    client = OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=5)
    result = cs.consolidate(client, model="m", memory=MEMORY, drafts=[draft], max_tokens=800)
    assert result.drafts == [draft] and result.proposed == 0
    assert result.error.startswith("MalformedAnswer: answer does not match the consolidation schema")
    assert result.tokens_input == 2 * 1200  # the answer and its repair
    assert SECRET not in json.dumps(server.requests) and "[REDACTED]" in json.dumps(server.requests)


def test_nothing_to_compare_asks_nothing(server):
    result = run(server, [], memory=MEMORY[:1])
    assert result.drafts == [] and server.requests == []


NOTE_MEMORY = [
    entry("deploy-cmd", "Deploy with `make release` from the repository root.", origin="human"),
    entry("deploy-quick", "Deploy with `make release --skip-checks`, it is faster.", origin="agent"),
    entry("deploy-note", "Deploys go through `make release`.", origin="agent"),
]


@pytest.mark.parametrize("vouched", ["human", "import", "dream"])
def test_the_same_thing_keeps_the_vouched_wording_not_an_agents_note(server, vouched):
    """The model keeps an agent's in-band note and folds a person's (imported, reviewed) entry into it: the merge
    keeps the vouched entry's text and key instead; the note is what is archived."""
    memory = [dict(NOTE_MEMORY[0], origin=vouched), NOTE_MEMORY[2]]
    result = run(server, [{"relation": "same", "items": ["E1", "E2"], "keep": "E2", "reason": "same"}], memory=memory)
    (merge,) = result.drafts
    assert merge.targets == ["deploy-cmd", "deploy-note"] and merge.content == NOTE_MEMORY[0]["content"]


def test_a_contradiction_settled_for_an_agents_note_against_a_persons_entry_is_not_proposed(server):
    result = run(
        server, [{"relation": "contradicts", "items": ["E1", "E2"], "keep": "E2", "reason": "x"}], memory=NOTE_MEMORY
    )
    assert result.drafts == [] and "agent's note" in result.skipped[0]


def test_two_agents_notes_may_still_be_folded_either_way(server):
    result = run(
        server,
        [{"relation": "contradicts", "items": ["E2", "E3"], "keep": "E3", "reason": "x"}],
        memory=NOTE_MEMORY,
    )
    (merge,) = result.drafts
    assert merge.targets == ["deploy-note", "deploy-quick"] and merge.content == NOTE_MEMORY[2]["content"]
