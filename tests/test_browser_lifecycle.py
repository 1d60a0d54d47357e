# ruff: noqa: F811 - the browser fixtures are imported by name
"""Memory lifecycle in a real browser (Chromium through Playwright, against a live server): archive an entry with a
reason and restore it from its page, each a new version in its history."""

from __future__ import annotations

import os

import pytest

from memory.models import EntryStatus
from tests.factories import make_entry
from tests.page_support import _fast_password_hashing  # noqa: F401 - fixture
from tests.test_browser import CHROMIUM, browser, page, shoot, sign_in  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.all_teams,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium (DREAMWEB_CHROMIUM or chromium on PATH)"),
]


def test_archive_and_restore_an_entry(page, live_server, world):
    expect = pytest.importorskip("playwright.sync_api").expect
    entry = make_entry(world.store_a, key="deploy-command", content="Deploy with `make ship`.")
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/memory/entries/{entry.pk}/")

    page.locator("summary[data-action=archive]").click()
    page.locator("input[aria-label='Reason for archiving']").fill("The ship target is gone since 4.0.")
    page.get_by_role("button", name="Archive", exact=True).click()
    expect(page.locator("#flash")).to_contain_text("Archived deploy-command (version 2).")
    expect(page.locator("h1 .badge-state")).to_have_text("archived")
    expect(page.locator("#version-2")).to_contain_text("The ship target is gone since 4.0.")
    shoot(page, "entry-archived.png")
    entry.refresh_from_db()
    assert entry.status == EntryStatus.ARCHIVED

    page.locator("input[aria-label='Reason for restoring']").fill("Still used by the old branch.")
    page.locator("[data-action=restore]").click()
    expect(page.locator("#flash")).to_contain_text("Restored deploy-command (version 3).")
    expect(page.locator("h1 .badge-state")).to_have_count(0)
    expect(page.locator("#version-3")).to_contain_text("Restored")
    entry.refresh_from_db()
    assert (entry.status, entry.version) == (EntryStatus.ACTIVE, 3)
    assert list(entry.versions.order_by("number").values_list("operation", flat=True)) == [
        "create",
        "archive",
        "restore",
    ]
