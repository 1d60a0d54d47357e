"""Reorganise what is hard to retrieve: a retrieval miss (the lesson's mistake recurring in sessions not served it
although it existed) becomes a re-scope or a rewording proposal with the misses as evidence; an entry holding
unrelated lessons is split. The context ranking decides what is served: a reworded entry then reaches the query."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dreamweb.provenance import Author
from memory import ranking_cache
from memory.models import ContextServe, MemoryEntry
from memory.services import apply_change
from reviews.analysis.reorganise import lessons_in
from reviews.dreams.upkeep import upkeep_proposals
from reviews.models import AutonomyPolicy, DreamRun

from .effectiveness_history import build
from .factories import StoreFactory, make_entry

pytestmark = pytest.mark.all_teams


def proposals(h):
    run = DreamRun.objects.select_related("store", "team").get(pk=h.run.pk)
    policy = AutonomyPolicy(store=h.store, team=h.store.team)
    return upkeep_proposals(run, policy, sessions_analysed=11)


def pulled_context(h, query: str = "") -> None:
    """ops-bot's sessions (not served the lesson; two made its mistake) asked for context and got the other entry."""
    for analysis in h.run.analyses.select_related("session").filter(session__agent="ops-bot"):
        ContextServe.objects.create(
            team_id=h.store.team_id,
            store=h.store,
            agent="ops-bot",
            session_external_id=analysis.session.external_id,
            query=query,
            entries=[{"entry_id": h.unused.pk, "key": h.unused.key}],
        )


def test_misses_outside_the_scope_become_a_rescope(db):
    h = build(StoreFactory(), not_served_pull=False)  # the sessions not served it: ops-bot's; two made the mistake
    MemoryEntry.objects.filter(pk=h.lesson.pk).update(scope_agent="deploy-bot")
    assert [p for p in proposals(h) if p.kind == "rescope"] == []  # they never asked for context: no miss
    pulled_context(h)
    (d,) = [p for p in proposals(h) if p.kind == "rescope"]
    assert d.operation == "update" and d.targets == ["release-command"]
    assert (d.scope_agent, d.scope_task) == (None, None) and d.content == h.lesson.content
    assert "recurred in 2 sessions outside its scope (agent deploy-bot, task any)" in d.rationale
    assert "ops-bot (release) ×2" in d.rationale
    missed = {a.session.external_id for a in h.run.analyses.select_related("session") if a.session.agent == "ops-bot"}
    assert len(d.evidence) == 2 and {e["external_id"] for e in d.evidence} <= missed
    assert all(e["excerpt"] == "make deploy" for e in d.evidence)
    assert d.risk in ("medium", "high")


def test_misses_inside_the_scope_become_a_rewording_with_their_words(db):
    h = build(StoreFactory(), not_served_pull=False)  # store-wide lesson: ops-bot's sessions could have got it
    pulled_context(h, "publish the payments bundle")
    (d,) = [p for p in proposals(h) if p.kind == "reword"]
    assert d.targets == ["release-command"] and d.scope_agent is None
    assert d.content.startswith(h.lesson.content)
    last = d.content.splitlines()[-1]
    assert last.startswith("Applies when:") and {"publish", "payments", "bundle"} <= set(last[14:-1].split(", "))
    assert "make" not in last  # words it already holds are not repeated
    assert "publish the payments bundle" in d.rationale and len(d.evidence) == 2


def test_a_reworded_entry_then_wins_the_query_that_missed_it(db):
    """The ranking is the oracle: before the rewording a competitor wins the missed sessions' query, after it the
    lesson does."""
    store = StoreFactory()
    lesson = make_entry(store, key="release-command", content="Ship with `make release`; `make deploy` is gone.")
    make_entry(store, key="payments-owner", content="The payments bundle belongs to the billing team.")
    key = SimpleNamespace(team_id=store.team_id)

    def top():
        return ranking_cache.ranked_entries(key, store=store, query="publish the payments bundle", limit=1)[0].key

    assert top() == "payments-owner"
    apply_change(
        store,
        operation="update",
        targets=[lesson.key],
        target_hashes={lesson.key: lesson.content_hash},
        content=lesson.content + "\nApplies when: publish, payments, bundle.",
        author=Author.system(),
    )
    assert top() == "release-command"


def test_an_entry_of_unrelated_lessons_is_split(db):
    store = StoreFactory()
    make_entry(
        store,
        key="grab-bag",
        content="- Ship builds with `make release` from the main branch\n"
        "- The staging database restarts Sundays at noon",
    )
    make_entry(store, key="one-lesson", content="Run `make release` to ship.\nIt tags the release branch first.")
    h = SimpleNamespace(store=store, run=DreamRun.objects.create(team_id=store.team_id, store=store))
    drafts = [p for p in proposals(h) if p.kind == "split"]
    assert [(p.operation, p.targets, p.content) for p in drafts] == [
        ("update", ["grab-bag"], "Ship builds with `make release` from the main branch"),
        ("add", [], "The staging database restarts Sundays at noon"),
    ]
    assert len(lessons_in("Run `make release` to ship.\nIt tags the release branch first.")) == 1
