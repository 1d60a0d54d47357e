# ruff: noqa: F811 - fixtures imported by name
"""The effectiveness chart in a real browser: the memory entry page loads its effectiveness panel (htmx) and the
chart's bars read the counts; the store overview's bars read the entries by verdict."""

from __future__ import annotations

import os

import pytest

from tests.effectiveness_history import build
from tests.page_support import _fast_password_hashing  # noqa: F401 - fixture
from tests.personas import world  # noqa: F401 - fixture
from tests.test_browser import CHROMIUM, browser, page, shoot, sign_in  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.all_teams,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium (DREAMWEB_CHROMIUM or chromium on PATH)"),
]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def bar(page, selector: str) -> dict:
    g = page.locator(selector)
    return {
        "recurred": int(g.get_attribute("data-recurred")),
        "sessions": int(g.get_attribute("data-sessions")),
        "text": g.locator(".chart-value").text_content(),
        "width": float(g.locator("rect.chart-fill").get_attribute("width")),
    }


def test_read_the_effectiveness_chart(page, live_server, world):
    h = build(world.store_a)
    sign_in(page, live_server, "victor")
    page.goto(f"{live_server.url}/memory/entries/{h.lesson.pk}/")
    panel = page.locator("section#effectiveness")
    panel.wait_for()  # loaded by htmx after the page
    assert panel.locator(".verdict").inner_text() == "helpful"
    served = bar(page, "svg.rate-chart g[data-group=served]")
    not_served = bar(page, "svg.rate-chart g[data-group=not_served]")
    before = bar(page, "svg.rate-chart g[data-group=before]")
    assert (served["recurred"], served["sessions"], served["text"]) == (1, 4, "1 of 4")
    assert (not_served["recurred"], not_served["sessions"], not_served["text"]) == (2, 3, "2 of 3")
    assert before["text"] == "3 of 4"
    # The bars are drawn to scale: served 1/4 is shorter than not served 2/3.
    assert served["width"] < not_served["width"] and served["width"] == 65
    shoot(page, "entry-effectiveness.png")

    page.click("text=Effectiveness of every entry")
    chart = page.locator("svg.overview-chart")
    chart.wait_for()
    assert chart.locator("g[data-verdict=helpful] .chart-value").text_content() == "1"
    assert chart.locator("g[data-verdict=never_served] .chart-value").text_content() == "1"
    assert chart.locator("g[data-verdict=no_effect] .chart-value").text_content() == "0"
    shoot(page, "effectiveness.png")
