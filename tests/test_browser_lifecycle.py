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


def test_roll_back_a_run_from_its_page(page, live_server, world):
    from django.utils import timezone

    from dreamweb.provenance import Author
    from memory.services import update_entry
    from reviews import services
    from reviews.models import DreamRun, RunStatus
    from tests.factories import make_proposal

    expect = pytest.importorskip("playwright.sync_api").expect
    store = world.store_a
    make_entry(store, key="deploy", content="Deploy with make ship.")
    make_entry(store, key="tests", content="Run the tests with tox.")
    run = DreamRun.objects.create(
        team=world.team_a, store=store, status=RunStatus.SUCCEEDED, finished_at=timezone.now()
    )
    for target, text in (("deploy", "Deploy with make release."), ("tests", "Run the tests with nox.")):
        proposal = make_proposal(store, run=run, operation="update", targets=[target], content=text)
        services.apply_proposal(proposal, author=Author.dream(run.pk))
    tests = store.entries.get(key="tests")
    update_entry(tests, base_version=2, author=Author.person(world.adam), content="Use nox -s tests.")

    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/reviews/runs/{run.pk}/")
    page.locator("[data-action=rollback]").click()
    expect(page.locator("[data-restore]")).to_contain_text("deploy")
    expect(page.locator("[data-conflicts]")).to_contain_text("tests")
    expect(page.locator("[data-conflicts]")).to_contain_text("Written by adam")
    shoot(page, "run-rollback-confirm.png")
    page.fill("#rollback-reason", "The release target was renamed back.")
    page.locator("[data-action=confirm-rollback]").click()
    expect(page.locator("#flash")).to_contain_text("1 entry restored, 1 changed since")
    expect(page.locator("#rollback [data-restored]")).to_contain_text("deploy restored as v3")
    expect(page.locator("#rollback [data-conflicts]")).to_contain_text("tests")
    expect(page.locator("[data-action=rollback]")).to_have_count(0)
    shoot(page, "run-rolled-back.png")
    assert store.entries.get(key="deploy").content == "Deploy with make ship."
    assert store.entries.get(key="tests").content == "Use nox -s tests."


def test_undo_an_approval_from_the_toast(page, live_server, world):
    from tests.factories import make_proposal

    expect = pytest.importorskip("playwright.sync_api").expect
    make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{proposal.pk}")
    card.locator("[data-action=approve]").click()
    expect(card).to_have_count(0)
    expect(page.locator("#flash")).to_contain_text("Approved and applied")
    shoot(page.locator("#flash"), "toast-undo.png")
    page.locator("#flash [data-action=undo]").click()
    expect(page.locator("#flash")).to_contain_text(f"Undone: proposal #{proposal.pk} is pending again.")
    expect(page.locator(f"#card-{proposal.pk}")).to_have_count(1)
    assert world.store_a.entries.get(key="deploy").content == "Deploy with make ship."


def test_the_card_shows_what_a_new_entry_pushes_out(page, live_server, world, settings):
    from memory.models import MemoryEntry
    from tests.factories import make_proposal

    expect = pytest.importorskip("playwright.sync_api").expect
    settings.DREAMWEB_CONTEXT_DEFAULT_ITEMS = 2
    make_entry(world.store_a, key="liked", content="Tag before releasing.")
    make_entry(world.store_a, key="disliked", content="Ping the channel.")
    MemoryEntry.objects.filter(key="liked").update(rating=1.0, rating_count=3)
    MemoryEntry.objects.filter(key="disliked").update(rating=-1.0, rating_count=3)
    proposal = make_proposal(world.store_a, operation="add", content="Run the tests first.", key_hint="tests-first")
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{proposal.pk}")
    card.locator("[data-action=budget]").click()
    expect(card.locator("[data-budget-impact]")).to_contain_text("pushes out disliked")
    expect(card.locator("[data-action=approve]")).to_have_count(1)  # the card itself is intact
    shoot(card, "card-budget-impact.png")
