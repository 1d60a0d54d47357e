# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Budget impact on the card: a proposal that adds or lengthens an entry says which entries it would push out of
each affected agent's context at the store's budget (ranked as the context API ranks, cut as it cuts)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.budget import budget_impact
from memory.context import MEMORY_HEADER, render_item
from memory.models import MemoryEntry
from reviews.models import AutonomyPolicy
from tests.factories import make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@pytest.fixture
def small_budget(settings):
    settings.DREAMWEB_CONTEXT_DEFAULT_ITEMS = 3
    settings.DREAMWEB_CONTEXT_DEFAULT_TOKENS = 1000


@pytest.fixture
def store(world):
    store = world.store_a
    make_entry(store, key="bot-only", content="Bot: use the release branch.", scope_agent="bot")
    make_entry(store, key="liked", content="Tag before releasing.")
    make_entry(store, key="disliked", content="Ping the channel.")
    MemoryEntry.objects.filter(key="liked").update(rating=1.0, rating_count=3)
    MemoryEntry.objects.filter(key="disliked").update(rating=-1.0, rating_count=3)
    AutonomyPolicy.objects.create(team=world.team_a, store=store)
    store.agents = ["bot", "ops"]  # the agents the store serves
    store.save()
    return store


def by_agent(impacts) -> dict:
    return {i.agent: ([e.key for e in i.pushed_out], i.gets_in) for i in impacts}


def test_an_added_entry_pushes_out_the_lowest_ranked_entry_of_a_full_context(world, store, small_budget):
    impacts = budget_impact(store, content="Run the tests first.", agents=["bot", "ops"], max_items=3)
    # bot's context was full (its own entry, liked, disliked): the new entry outranks disliked, which goes.
    # ops never saw bot-only: two entries, room for the new one.
    assert by_agent(impacts) == {"bot": (["disliked"], True), "ops": ([], True)}
    # Scoped to ops: only ops is affected, and its scoped entry outranks every store-wide one.
    assert by_agent(budget_impact(store, content="Ops: page Ann.", scope_agent="ops", max_items=2)) == {
        "ops": (["disliked"], True)
    }


def test_a_lengthened_entry_pushes_out_by_tokens(world, store):
    long_text = "Tag before releasing. " + "Then check the changelog and the version file. " * 12
    # Room for the lengthened entry, not for it and the next one as well.
    budget = (len(MEMORY_HEADER + render_item("liked", long_text)) + 3) // 4 + 2
    impacts = budget_impact(
        store, content=long_text, targets=["liked"], agents=["ops"], max_items=10, max_tokens=budget
    )
    (ops,) = impacts
    assert [e.key for e in ops.pushed_out] == ["disliked"] and ops.gets_in  # liked is replaced, not pushed out


def test_the_card_loads_the_impact_and_the_page_shows_it(client, world, store, small_budget):
    add = make_proposal(store, operation="add", content="Run the tests first.", key_hint="tests-first")
    remove = make_proposal(store, operation="remove", targets=["disliked"], content=None)
    shorter = make_proposal(store, operation="update", targets=["liked"], content="Tag.")
    client.force_login(world.victor)
    queue = client.get(reverse("reviews:queue")).text
    url = reverse("reviews:budget", args=[add.pk])
    assert f'hx-get="{url}"' in queue and f'href="{url}"' in queue and 'hx-trigger="toggle once"' in queue
    assert reverse("reviews:budget", args=[remove.pk]) not in queue
    partial = client.get(url, HTTP_HX_REQUEST="true").text
    assert "<html" not in partial and "pushes out" in partial and "disliked" in partial
    page = client.get(url).text
    assert "<html" in page and "at 3 entries" in page
    assert "adds nothing" in client.get(reverse("reviews:budget", args=[shorter.pk])).text


def test_budget_impact_is_for_the_team_only_and_escapes_keys(client, world, store, small_budget):
    MemoryEntry.objects.filter(key="disliked").update(key="<b>disliked</b>")
    add = make_proposal(store, operation="add", content="Run the tests first.", key_hint="tests-first")
    client.force_login(world.bob)
    assert client.get(reverse("reviews:budget", args=[add.pk])).status_code == 404
    client.force_login(world.victor)
    html = client.get(reverse("reviews:budget", args=[add.pk])).text
    assert "&lt;b&gt;disliked&lt;/b&gt;" in html and "<b>disliked</b>" not in html
    assert client.post(reverse("reviews:budget", args=[add.pk])).status_code == 405


def test_budget_impact_query_count_does_not_grow_with_the_store(client, world, small_budget):
    counts = []
    for n in (5, 60):
        store = world.store_a.__class__.objects.create(team=world.team_a, slug=f"s{n}")
        for i in range(n):
            make_entry(store, key=f"e{i}", content=f"lesson {i}", scope_agent="bot" if i % 2 else None)
        add = make_proposal(store, operation="add", content="New lesson.", key_hint=f"new-{n}", evidence_count=1)
        client.force_login(world.alice)
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("reviews:budget", args=[add.pk]), HTTP_HX_REQUEST="true").status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]
