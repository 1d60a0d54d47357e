# ruff: noqa: F811 - the browser and page_support fixtures are imported by name
"""The review UI probe's findings, fixed as families, in a real browser (tests/test_review_ui_probe.py found them;
tests/test_review_ui_fixes.py checks what a plain client can):

* a run of 1,500 characters with no space (a URL, base64) wraps inside its box on every page that shows untrusted
  text: the queue's card, the proposal page, the decided list, the session, the entry, the run; at desk and phone
  widths, nothing scrolls sideways;
* a failed htmx request (a 5xx, a 4xx, no answer) says so in a toast (role=alert) on any page, and leaves the card,
  the form and what was typed in place; a preview box whose request failed says the preview is unavailable;
* Back after an htmx filter or search that pushed its URL shows the whole page (the queue, an entry list, skills);
* hidden and direction-control characters are drawn as markers, so "\u202eevil" does not read "live".
"""

from __future__ import annotations

import re

import pytest

from dreamweb.provenance import Author
from memory.services import update_entry
from reviews.models import DreamRun, Proposal, ProposalEvidence, ProposalStatus
from tests.factories import SessionFactory, make_entry, make_proposal, make_skill
from tests.page_support import _fast_password_hashing  # noqa: F401 - fixture
from tests.test_browser import browser, page, pytestmark, shoot, sign_in  # noqa: F401 - fixtures and marks

RUN = "https://example.com/" + "Zm9vYmFy" * 190  # 1,540 characters, no space
ERROR = re.compile(r"did not go through|refused", re.I)


def expect(*args, **kwargs):
    return pytest.importorskip("playwright.sync_api").expect(*args, **kwargs)


def sideways(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


WIDER = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.table-card, pre, .mainnav'))
  .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.className)"""


# --- 2. long unbroken runs wrap on every page of untrusted text ---------------------------------------------------


@pytest.fixture
def long_runs(world):
    store = world.store_a
    session = SessionFactory(
        team=world.team_a,
        external_id="long-" + "q" * 150,
        agent="bot",
        events=[
            {"type": "message", "role": "user", "content": "see " + RUN},
            {"type": "tool_result", "call_id": "c1", "content": RUN},
        ],
        event_count=2,
    )
    entry = make_entry(store, key="deploy", content="Deploy with " + RUN)
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Now " + RUN)
    proposal = make_proposal(store, content="Use " + RUN, key_hint="long-url", rationale="seen at " + RUN, sessions=[])
    ProposalEvidence.objects.create(
        team_id=world.team_a.pk, proposal=proposal, session=session, event_index=0, excerpt=RUN, trust="user"
    )
    decided = make_proposal(store, content="Decided " + RUN[:50], key_hint="decided-one")
    Proposal.objects.filter(pk=decided.pk).update(status=ProposalStatus.REJECTED, decision_reason="because " + RUN)
    run = DreamRun.objects.create(team=world.team_a, store=store, error="Traceback: " + RUN)
    return {
        "queue": "/reviews/",
        "proposal": f"/reviews/proposals/{proposal.pk}/",
        "decided": "/reviews/decided/",
        "decided proposal": f"/reviews/proposals/{decided.pk}/",
        "session": f"/memory/sessions/{session.pk}/",
        "sessions": "/memory/sessions/",
        "entry": f"/memory/entries/{entry.pk}/",
        "entries": f"/memory/stores/{store.pk}/",
        "run": f"/reviews/runs/{run.pk}/",
    }


TEXT_BOXES = (
    "main p, main .rationale, main .excerpt, main .diff, main td, main .event-text, main .entry-text, main .msg"
)
SPILLED = """(sel) => [...document.querySelectorAll(sel)]
  .filter(e => e.clientWidth && e.scrollWidth > e.clientWidth + 1
    && !['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && !e.closest('.table-card'))
  .map(e => e.tagName + '.' + e.className)"""


@pytest.mark.parametrize("width", [1360, 390])
def test_a_long_unbroken_run_wraps_inside_its_box_on_every_page(page, live_server, world, long_runs, width):
    sign_in(page, live_server, "alice")
    page.set_viewport_size({"width": width, "height": 900})
    for name, path in long_runs.items():
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        assert sideways(page) <= 0, (name, width, sideways(page), page.evaluate(WIDER))
        # Text boxes wrap it; pre blocks and wide tables may scroll, but only inside their own box.
        spilled = page.evaluate(SPILLED, TEXT_BOXES)
        assert not spilled, (name, width, spilled)
    shoot(page, f"long-run-{width}.png")


# --- 5/6. a failed htmx request says so, on every page ------------------------------------------------------------


@pytest.fixture
def two(world):
    make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    update = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    add = make_proposal(world.store_a, content="Announce releases first.", key_hint="announce")
    return {"update": update, "add": add}


def toast(page):
    return page.locator("#flash [role=alert]")


def test_a_server_error_on_approve_is_a_toast_and_the_card_stays(page, live_server, world, two):
    sign_in(page, live_server, "alice")
    page.route("**/approve/", lambda route: route.fulfill(status=502, body="<h1>Bad gateway</h1>"))
    card = page.locator(f"#card-{two['update'].pk}")
    card.locator("[data-action=approve]").click()
    expect(toast(page)).to_have_text("That did not go through (server error 502): nothing was changed. Try again.")
    expect(card).to_be_visible()
    assert page.locator("main h1", has_text="Bad gateway").count() == 0
    shoot(page, "approve-502-toast.png")
    # The same failure twice is said once; the retry works.
    card.locator("[data-action=approve]").click()
    page.wait_for_timeout(300)
    expect(toast(page)).to_have_count(1)
    page.unroute("**/approve/")
    card.locator("[data-action=approve]").click()
    expect(card).to_have_count(0)
    assert Proposal.objects.get(pk=two["update"].pk).status == "applied"


def test_an_edited_approval_that_finds_no_network_keeps_everything_typed(page, live_server, world, two):
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{two['add'].pk}")
    card.locator("[data-action=edit]").click()
    card.get_by_label("Text to apply").fill("Announce every release in #deploys.")
    page.route("**/approve/", lambda route: route.abort("internetdisconnected"))
    card.get_by_role("button", name="Approve edited").click()
    expect(toast(page)).to_contain_text("no answer from the server")
    expect(card.get_by_label("Text to apply")).to_have_value("Announce every release in #deploys.")
    assert Proposal.objects.get(pk=two["add"].pk).status == "pending"


def test_a_refused_request_says_refused(page, live_server, world, two):
    sign_in(page, live_server, "alice")
    page.route("**/reject/", lambda route: route.fulfill(status=403, body="no"))
    card = page.locator(f"#card-{two['add'].pk}")
    card.locator("summary[data-action=reject]").click()
    card.locator("[data-reason]").fill("vague")
    card.locator("[data-reject]").click()
    expect(toast(page)).to_contain_text("That was refused (error 403)")
    expect(card.locator("[data-reason]")).to_have_value("vague")


def test_a_failed_action_on_an_entry_page_says_so(page, live_server, world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/memory/entries/{entry.pk}/")
    page.route("**/pin/", lambda route: route.fulfill(status=500, body="boom"))
    page.locator("[data-action=pin]").click()
    expect(toast(page)).to_contain_text("server error 500")
    expect(page.locator("nav.mainnav")).to_be_visible()  # the page is still the page


def test_a_lazy_part_that_fails_to_load_says_so(page, live_server, world, two):
    sign_in(page, live_server, "alice")
    page.route("**/budget/", lambda route: route.fulfill(status=500, body="boom"))
    page.locator(f"#card-{two['add'].pk} details.budget-impact summary").click()
    expect(toast(page)).to_contain_text("server error 500")


# --- 7. a preview whose request failed says so --------------------------------------------------------------------


def test_the_policy_preview_says_unavailable_then_comes_back(page, live_server, world, two):
    sign_in(page, live_server, "adam")
    page.goto(f"{live_server.url}/reviews/stores/{world.store_a.pk}/policy/")
    box = page.locator("#impact")
    page.route(re.compile(r".*/policy/\?.*preview=1.*"), lambda route: route.fulfill(status=500, body="boom"))
    with page.expect_response(lambda r: "preview=1" in r.url):
        page.get_by_label("Apply low-risk changes at once").check()
    expect(box).to_contain_text("Preview unavailable")
    expect(box).not_to_contain_text("What the saved policy does")
    expect(toast(page)).to_contain_text("server error 500")
    shoot(page, "policy-preview-unavailable.png")
    page.unroute(re.compile(r".*/policy/\?.*preview=1.*"))
    page.get_by_label("Apply all but high-risk changes").check()
    expect(box).to_contain_text("Preview: what this policy would do")


def test_the_edit_cards_live_diff_says_unavailable(page, live_server, world, two):
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{two['add'].pk}")
    page.route("**/preview/", lambda route: route.fulfill(status=500, body="boom"))
    card.locator("[data-action=edit]").click()
    # The edit card is swapped in by htmx: typing before htmx has bound its textarea sends no preview at all.
    expect(card.get_by_label("Text to apply")).to_be_visible()
    page.wait_for_load_state("networkidle")
    card.get_by_label("Text to apply").fill("Announce it.")
    expect(card.locator(".live-diff")).to_contain_text("Preview unavailable")
    expect(card.get_by_label("Text to apply")).to_have_value("Announce it.")


# --- 4. Back after an htmx URL push shows the whole page ----------------------------------------------------------


def test_back_after_searching_an_entry_list_and_the_skills_shows_whole_pages(page, live_server, world):
    for i in range(3):
        make_entry(world.store_a, key=f"fact-{i}", content=f"Fact number {i}.")
    make_skill(world.team_a)
    sign_in(page, live_server, "alice")
    for path, field in ((f"/memory/stores/{world.store_a.pk}/", "input[name=q]"), ("/skills/", "#skill-q")):
        page.goto(live_server.url + path)
        page.locator(field).first.fill("fact-1" if "memory" in path else "release")
        expect(page).to_have_url(re.compile(r"q="))
        page.wait_for_load_state("networkidle")
        page.go_back()
        expect(page).not_to_have_url(re.compile(r"q="))
        expect(page.locator("nav.mainnav")).to_be_visible()
        expect(page.locator("h1")).to_be_visible()


def test_back_after_paging_the_queue_shows_the_whole_queue(page, live_server, world):
    for i in range(30):
        make_proposal(world.store_a, content=f"Paged fact {i}.")
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/reviews/?per=10")
    page.locator("a[rel=next]").first.click()
    expect(page).to_have_url(re.compile(r"page=2"))
    page.wait_for_load_state("networkidle")
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"page=2"))
    expect(page.locator("nav.mainnav")).to_be_visible()
    expect(page.locator("form.filters")).to_be_visible()


# --- 3. hidden characters are drawn as markers --------------------------------------------------------------------


def test_a_right_to_left_override_is_a_marker_not_a_reordering(page, live_server, world):
    proposal = make_proposal(world.store_a, content="Deploy to \u202eevil\u202c host.", key_hint="deploy-target")
    sign_in(page, live_server, "alice")
    card = page.locator(f"#card-{proposal.pk}")
    expect(card.locator("[data-hidden-chars]")).to_contain_text("U+202E")
    expect(card.locator(".diff").first).to_have_text("Deploy to ⟨U+202E⟩evil⟨U+202C⟩ host.")
    marker = card.locator(".hidden-char").first
    assert marker.get_attribute("title") == "right-to-left override"
    shoot(card, "hidden-chars-marked.png")
