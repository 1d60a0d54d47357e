# ruff: noqa: F811 - fixtures imported by name
"""Effectiveness pages and API: what they show, team isolation (another team's store or entry: 404), the key's
scope, and a constant number of queries for the store overview whatever the number of entries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.api_support import Api, keys  # noqa: F401 - fixtures
from tests.effectiveness_history import build, rate
from tests.factories import make_entry
from tests.page_support import _fast_password_hashing, client  # noqa: F401
from tests.personas import world  # noqa: F401
from tests.scoping import all_teams

pytestmark = pytest.mark.django_db


def test_store_overview_shows_the_chart_and_each_entrys_figures(client, world):
    with all_teams():
        h = build(world.store_a)
    client.force_login(world.victor)  # a viewer may read it
    body = client.get(reverse("reviews:effectiveness", args=[world.store_a.pk])).content.decode()
    assert '<svg class="chart overview-chart"' in body
    assert 'data-verdict="helpful" data-n="1"' in body and 'data-verdict="never_served" data-n="1"' in body
    assert 'data-entry="release-command"' in body and "3/4" in body and "1/4" in body and "2/3" in body
    only = client.get(reverse("reviews:effectiveness", args=[world.store_a.pk]), {"verdict": "never_served"})
    assert 'data-entry="unused-tip"' in only.content.decode()
    assert 'data-entry="release-command"' not in only.content.decode()
    assert h.lesson.key in body


def test_entry_panel_full_page_and_htmx_partial(client, world):
    with all_teams():
        h = build(world.store_a)
        rate(h.lesson, True, True)
    client.force_login(world.alice)
    url = reverse("reviews:entry-effectiveness", args=[h.lesson.pk])
    page = client.get(url).content.decode()
    assert "<html" in page and 'id="effectiveness"' in page
    assert 'data-group="served" data-recurred="1" data-sessions="4"' in page
    assert 'data-group="not_served" data-recurred="2" data-sessions="3"' in page
    assert 'data-group="before" data-recurred="3" data-sessions="4"' in page
    assert 'data-figure="times_served">4<' in page and 'data-figure="ratings">2<' in page
    partial = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in partial and partial.lstrip().startswith('<section id="effectiveness"')
    entry_page = client.get(reverse("memory:entry", args=[h.lesson.pk])).content.decode()
    assert f'hx-get="{url}"' in entry_page and f'href="{url}"' in entry_page


def test_untrusted_keys_are_escaped(client, world):
    with all_teams():
        make_entry(world.store_a, key="<script>x</script>", content="text")
    client.force_login(world.alice)
    body = client.get(reverse("reviews:effectiveness", args=[world.store_a.pk])).content.decode()
    assert "<script>x</script>" not in body and "&lt;script&gt;" in body


def test_another_teams_store_and_entry_are_404(client, world):
    with all_teams():
        h = build(world.store_a)
    client.force_login(world.bob)
    assert client.get(reverse("reviews:effectiveness", args=[world.store_a.pk])).status_code == 404
    assert client.get(reverse("reviews:entry-effectiveness", args=[h.lesson.pk])).status_code == 404
    client.logout()
    assert client.get(reverse("reviews:effectiveness", args=[world.store_a.pk])).status_code == 302


def test_overview_queries_do_not_grow_with_entries(client, world):
    with all_teams():
        build(world.store_a)
    client.force_login(world.alice)
    url = reverse("reviews:effectiveness", args=[world.store_a.pk])

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    few = count()
    with all_teams():
        for i in range(30):
            make_entry(world.store_a, key=f"more-{i}", content=f"Another lesson number {i}.")
    assert count() == few


def test_api_lists_and_shows_effectiveness_in_the_keys_team_only(world, keys):
    with all_teams():
        build(world.store_a)
    api = Api(keys.reader)
    r = api.get("/api/v1/stores/eng/effectiveness/")
    assert r.status_code == 200, r.content
    rows = {row["key"]: row for row in r.json()["results"]}
    lesson = rows["release-command"]
    assert lesson["verdict"] == "helpful" and lesson["times_served"] == 4
    assert lesson["recurrence"]["served"] == {"sessions": 4, "recurred": 1, "rate": 0.25}
    assert lesson["recurrence"]["not_served"]["recurred"] == 2 and lesson["retrieval_misses"] == 2
    assert lesson["recurrence"]["after_live"] == {"sessions": 7, "recurred": 3, "rate": 0.4286}
    assert rows["unused-tip"]["verdict"] == "never_served"
    only = api.get("/api/v1/stores/eng/effectiveness/", {"verdict": "never_served"}).json()["results"]
    assert [row["key"] for row in only] == ["unused-tip"]
    assert api.get("/api/v1/stores/eng/effectiveness/", {"verdict": "nope"}).status_code == 400
    one = api.get("/api/v1/stores/eng/entries/release-command/effectiveness/")
    assert one.status_code == 200 and one.json()["recurrence"]["before_live"]["recurred"] == 3
    other = Api(keys.other_team)
    assert other.get("/api/v1/stores/eng/effectiveness/").status_code == 404
    assert other.get("/api/v1/stores/eng/entries/release-command/effectiveness/").status_code == 404
    assert Api(keys.no_scopes).get("/api/v1/stores/eng/effectiveness/").status_code == 403
    assert Api(keys.reader).get("/api/v1/stores/eng/entries/nope/effectiveness/").status_code == 404
