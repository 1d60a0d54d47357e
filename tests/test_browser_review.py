# ruff: noqa: F811 - the page_support and browser fixtures are imported by name
"""The reviewer's day in a real browser (issue 14): the evidence card with "n more", approving writes exactly the
key shown, a conflict rebased and approved, bulk confirmation with counts, keyboard decisions acting on the card in
view, and the demo queue's weight (HTML size, card heights)."""

from __future__ import annotations

import io
import os

import pytest
from django.core.management import call_command

from dreamweb.provenance import Author
from memory.models import MemoryEntry
from memory.services import update_entry
from reviews.models import Proposal, ProposalEvidence
from tests.conftest import chromium_path
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing  # noqa: F401 - fixture
from tests.scoping import no_scope
from tests.test_browser import browser, page, shoot, sign_in  # noqa: F401 - fixtures

CHROMIUM = chromium_path() or "/usr/bin/chromium"
SCREEN = {"width": 1360, "height": 900}

pytestmark = [
    pytest.mark.all_teams,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium (DREAMWEB_CHROMIUM or chromium on PATH)"),
]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def expect():
    return pytest.importorskip("playwright.sync_api").expect


def _evidence(proposal, sessions, excerpt="make: *** No rule to make target 'deploy'."):
    proposal.evidence.all().delete()
    for s in sessions:
        ProposalEvidence.objects.create(
            team_id=proposal.team_id,
            proposal=proposal,
            session=s,
            event_index=2,
            excerpt=excerpt,
            trust="tool",
            context=[[1, "call bash", '{"command": "make deploy"}'], [2, "result (failed)", excerpt]],
        )
    return proposal


def test_three_session_card_with_n_more_and_approve_writes_the_key_shown(page, live_server, world, expect):
    sessions = [
        SessionFactory(team=world.team_a, external_id=f"deploy-{i:02d}", agent=("deploy-bot", "ci-bot")[i % 2])
        for i in range(7)
    ]
    key = "command-psql-h-warehouse-internal-u-etl-c-select"
    proposal = _evidence(
        make_proposal(world.store_a, content="Check the warehouse with psql -h warehouse.internal.", key_hint=key),
        sessions,
    )
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{proposal.pk}")
    expect(card.locator(".ev-session")).to_have_count(3)
    more = card.locator("details.more-sessions")
    expect(more.locator("summary")).to_have_text("4 more sessions")
    assert more.get_attribute("open") is None  # collapsed by default
    more.locator("summary").click()
    expect(more.locator(".sessions-more li")).to_have_count(4)
    shown = card.locator(".ev-session [data-session]").evaluate_all("els => els.map(e => e.textContent)")
    listed = more.locator(".sessions-more li a").evaluate_all("els => els.map(e => e.textContent)")
    assert len(set(shown) | set(listed)) == 7  # every session once, none repeated
    shoot(card, "card-evidence.png")

    shown_key = card.locator("[data-write-key]").inner_text()
    assert shown_key == key
    card.locator("[data-action=approve]").click()
    expect(card).to_have_count(0)
    expect(page.get_by_text("Nothing to review")).to_be_visible()  # the queue refilled
    page.wait_for_load_state("networkidle")  # no request left in flight when the test's database is flushed
    assert MemoryEntry.objects.filter(store=world.store_a, key=shown_key).exists()


def test_conflict_rebased_and_approved(page, live_server, world, expect):
    entry = make_entry(world.store_a, key="deploy-command", content="Deploy with `make deploy`.")
    proposal = make_proposal(
        world.store_a, operation="update", targets=["deploy-command"], content="Deploy with `make release`."
    )
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Deploy by hand.")
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{proposal.pk}")
    expect(card.locator("[data-conflict]")).to_contain_text("deploy-command changed by adam since the dream read it")
    expect(card.locator("[data-action=approve]")).to_have_count(0)
    shoot(card, "card-conflict.png")

    card.locator("[data-action=rebase]").click()
    expect(card.locator("[data-conflict]")).to_have_count(0)
    expect(card.locator(".diff del")).to_contain_text("by hand")
    card.locator("[data-action=approve]").click()
    expect(card).to_have_count(0)
    expect(page.get_by_text("Nothing to review")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert MemoryEntry.objects.get(pk=entry.pk).content == "Deploy with `make release`."


def test_bulk_asks_for_confirmation_with_counts(page, live_server, world, expect):
    low = [make_proposal(world.store_a, content=f"Fact {i}.") for i in range(3)]
    high = make_proposal(world.store_a, content="Risky fact.", risk="high")
    sign_in(page, live_server, "alice")
    page.locator("[data-select-all]").check()
    page.locator("#bulk button[value=approve]").click()
    confirm = page.locator("[data-bulk-confirm]")
    expect(confirm.locator("h2")).to_have_text("Approve 4 cards?")
    expect(confirm).to_contain_text("1 high risk")
    expect(confirm).to_contain_text("3 low risk")
    assert not Proposal.objects.filter(status="applied").exists()
    shoot(confirm, "bulk-confirm.png")
    confirm.locator("[data-confirm-bulk]").click()
    expect(page.locator("#flash")).to_contain_text("Bulk approval: 4 applied.")
    assert Proposal.objects.filter(pk__in=[p.pk for p in [*low, high]], status="applied").count() == 4


def test_keyboard_decisions_act_on_the_card_in_view(page, live_server, world, expect):
    sessions = [SessionFactory(team=world.team_a, external_id=f"s-{i}") for i in range(3)]
    cards = [
        _evidence(make_proposal(world.store_a, content=f"Fact number {i}.", prevalence=(9 - i, 10)), sessions)
        for i in range(6)
    ]
    sign_in(page, live_server, "alice")
    page.locator("h1").click()
    page.keyboard.press("j")
    first = page.locator(f"#card-{cards[0].pk}")
    expect(first).to_have_class(__import__("re").compile("is-current"))

    # Scroll with the wheel to the fourth card: `a` approves the card in view, not the highlighted first one.
    page.locator(f"#card-{cards[3].pk}").evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(100)
    page.keyboard.press("a")
    expect(page.locator(f"#card-{cards[3].pk}")).to_have_count(0)
    assert Proposal.objects.get(pk=cards[0].pk).status == "pending"

    # After a decision the next card is current and in view.
    current = page.locator("[data-card].is-current")
    expect(current).to_have_count(1)
    box = current.bounding_box()
    assert box is not None and 0 <= box["y"] < SCREEN["height"] / 2

    # `r` opens the reason box of the card in view, near its top.
    current_id = current.get_attribute("id")
    page.keyboard.press("r")
    reason = page.locator(f"#{current_id} [data-reason]")
    expect(reason).to_be_focused()
    assert reason.bounding_box()["y"] - current.bounding_box()["y"] < 200
    reason.fill("not true")
    reason.press("Enter")
    expect(page.locator(f"#{current_id}")).to_have_count(0)
    assert Proposal.objects.get(pk=int(current_id.removeprefix("card-"))).decision_reason == "not true"


def test_the_demo_queue_is_light_and_no_card_is_taller_than_a_screen(page, live_server, world, expect):
    with no_scope():
        call_command("seed_demo", "--insecure-ok", stdout=io.StringIO(), stderr=io.StringIO())
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "reviewer")
    page.fill("#id_password", "reviewer-demo")
    page.click("button[type=submit]")
    response = page.goto(f"{live_server.url}/reviews/")
    html = response.body()
    cards = page.locator("[data-card]")
    count = cards.count()
    assert count >= 10, count
    heights = cards.evaluate_all("els => els.map(e => e.getBoundingClientRect().height)")
    # Issue 14 asks for the demo queue under 60 KiB: about 58 KiB for its 10 cards since the cards' buttons share one
    # form (one CSRF token per page, reviews/_decide_form.html) and repeat less markup.
    assert len(html) < 60 * 1024 and max(heights) <= SCREEN["height"], (len(html), count, heights)
    shoot(page, "queue.png")


def test_decided_view_lists_a_policy_applied_change(page, live_server, world, expect):
    from reviews import services

    applied = services.apply_proposal(
        make_proposal(world.store_a, content="Policy fact."), reason="applied by dream #7", policy="auto_low_risk"
    )
    services.reject(make_proposal(world.store_a, content="Noise."), user=world.alice, reason="duplicate")
    sign_in(page, live_server, "alice")
    page.get_by_role("link", name="All decisions →").click()
    expect(page.locator("[data-decided]")).to_have_count(2)
    page.select_option("select[name=by]", "policy")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("[data-decided]")).to_have_count(1)
    row = page.locator(f'[data-decided="{applied.pk}"]')
    expect(row).to_contain_text("policy: apply low-risk changes at once")
    expect(row).to_contain_text("applied by dream #7")
    shoot(page, "decided.png")
