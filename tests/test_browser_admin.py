# ruff: noqa: F811 - the fixtures of tests/test_browser.py and page_support are imported by name
"""The admin's pages and the look in a real browser (Debian's Chromium, Playwright, a live server): the policy impact
preview, then applying the waiting proposals it allows; inviting a member with a link and changing a role; at 390 px
every section of the navigation reachable and no page scrolling sideways; dark mode (prefers-color-scheme) with event
anchors and muted text at >= 4.5:1 contrast. Saves screenshots (tests/test_browser.py SHOTS)."""

from __future__ import annotations

import re

import pytest

from dreamweb.models import Membership, Role
from reviews.models import Proposal, ProposalStatus
from tests.page_support import _fast_password_hashing  # noqa: F401 - fixture
from tests.test_browser import (  # noqa: F401 - fixtures
    ARGS,
    CHROMIUM,
    browser,
    page,
    pytestmark,
    queue_data,
    shoot,
    sign_in,
)


def sign_in_as(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_load_state()


def expect():
    return pytest.importorskip("playwright.sync_api").expect


def test_policy_preview_then_apply_in_the_browser(page, live_server, world, queue_data):
    sign_in(page, live_server, "adam")
    page.goto(f"{live_server.url}/reviews/stores/{world.store_a.pk}/policy/")
    impact = page.locator("#impact")
    expect()(impact).to_contain_text("Nothing applies by itself")
    page.get_by_label("Apply low-risk changes at once").check()  # htmx asks for the preview on change
    expect()(impact).to_contain_text("Preview: what this policy would do")
    expect()(page.get_by_test_id("pending-allowed")).to_have_text("2")
    assert Proposal.objects.filter(status=ProposalStatus.PENDING).count() == 4  # nothing saved, nothing applied
    page.get_by_label("Apply all but high-risk changes").check()
    expect()(page.get_by_test_id("pending-allowed")).to_have_text("3")
    page.get_by_label("Apply low-risk changes at once").check()
    expect()(page.get_by_test_id("pending-allowed")).to_have_text("2")
    shoot(page, "policy-preview.png")

    page.get_by_role("button", name="Save policy").click()
    expect()(page.locator("#flash")).to_contain_text("2 waiting proposals pass this policy")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile("Apply the 2 waiting proposals")).click()
    expect()(page.locator("#flash")).to_contain_text("The policy applied 2 waiting proposals")
    applied = Proposal.objects.filter(status=ProposalStatus.APPLIED)
    assert sorted(p.operation for p in applied) == ["merge", "update"]
    expect()(page.locator(".changes-table")).to_contain_text("Apply low-risk changes at once")


def test_invite_a_member_and_change_a_role_in_the_browser(browser, page, live_server, world):
    sign_in(page, live_server, "adam")
    page.get_by_role("link", name="Team").first.click()
    page.get_by_label("For (optional)").fill("erin@example.org")
    page.get_by_label("Role", exact=True).last.select_option("reviewer")
    page.get_by_role("button", name="Create invitation link").click()
    link = page.locator("#invite-link").input_value()
    assert "/join/" in link

    guest = browser.new_context(viewport={"width": 1360, "height": 900})
    try:
        invited = guest.new_page()
        invited.goto(link)
        expect()(invited.locator("h1")).to_have_text("Join Team A")
        invited.fill("#id_username", "erin")
        invited.fill("#id_password1", "a-Long-passw0rd!")
        invited.fill("#id_password2", "a-Long-passw0rd!")
        invited.get_by_role("button", name="Create account and join").click()
        invited.wait_for_url(re.compile(r"/reviews/$"))
        expect()(invited.locator("#flash")).to_contain_text("Welcome to Team A")
    finally:
        guest.close()

    page.goto(f"{live_server.url}/teams/{world.team_a.slug}/members/")  # not a reload: that would post again
    expect()(page.locator("text=Open invitations")).to_have_count(0)  # the link was used
    row = page.locator("tr", has_text="erin")
    expect()(row.locator("select")).to_have_value("reviewer")
    row.locator("select").select_option("admin")
    row.get_by_role("button", name="Change").click()
    expect()(page.locator("#flash")).to_contain_text("erin's role is now Admin")
    membership = Membership.objects.get(team=world.team_a, user__username="erin")
    assert membership.role == Role.ADMIN
    expect()(page.locator(".member-history")).to_contain_text("changed the role erin: Reviewer → Admin")
    expect()(page.locator(".member-history")).to_contain_text("joined with an invitation erin as reviewer")
    shoot(page, "members.png")


NAV = ["Review queue", "Memory", "Sessions", "Dream runs", "Skills", "Team"]


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_390px_layout_reaches_every_nav_item_without_sideways_scrolling(browser, live_server, world, queue_data):
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        sign_in(page, live_server, "adam")
        shoot(page, "narrow-queue.png")
        nav = page.locator("nav.mainnav")
        for name in NAV:
            link = nav.get_by_role("link", name=name, exact=True)
            expect()(link).to_be_visible()
            box = link.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (name, box)  # on screen, no scrolling
            link.click()
            page.wait_for_load_state()
            assert _overflow(page) <= 0, (name, page.url, _overflow(page))
        entry = world.store_a.entries.first()
        session = queue_data["sessions"][0]
        for path in (
            f"/memory/stores/{world.store_a.pk}/",
            f"/memory/entries/{entry.pk}/",
            f"/memory/sessions/{session.pk}/",
            f"/reviews/stores/{world.store_a.pk}/policy/",
            f"/teams/{world.team_a.slug}/keys/",
            f"/reviews/proposals/{queue_data['update'].pk}/",
        ):
            page.goto(live_server.url + path)
            assert _overflow(page) <= 0, (path, _overflow(page))
    finally:
        context.close()


CONTRAST = """
(selector) => {
  const parse = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = parse(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  return [...document.querySelectorAll(selector)].map((el) => {
    const a = lum(parse(getComputedStyle(el).color).slice(0, 3)), b = lum(background(el));
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  });
}
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_dark_mode_and_contrast_of_event_anchors(browser, live_server, world, queue_data, scheme):
    context = browser.new_context(viewport={"width": 1360, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        sign_in(page, live_server, "alice")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(14, 19, 27)") == (scheme == "dark"), background
        if scheme == "dark":
            shoot(page, "dark-queue.png")
        page.goto(f"{live_server.url}/memory/sessions/{queue_data['sessions'][0].pk}/")
        ratios = page.evaluate(CONTRAST, ".event-anchor")
        assert ratios and min(ratios) >= 4.5, ratios
        muted = page.evaluate(CONTRAST, ".muted")
        assert muted and min(muted) >= 4.5, muted
        if scheme == "dark":
            shoot(page, "dark-session.png")
    finally:
        context.close()


def test_branded_404_and_the_no_team_page(page, live_server, world):
    from tests.factories import UserFactory

    sign_in(page, live_server, "alice")
    response = page.goto(f"{live_server.url}/memory/entries/987654/")
    assert response.status == 404
    expect()(page.locator("h1")).to_have_text("Not found")
    expect()(page.locator("nav.mainnav").get_by_role("link", name="Skills")).to_be_visible()
    shoot(page, "error-404.png")
    UserFactory(username="root", is_superuser=True, is_staff=True)
    page.get_by_role("button", name="Sign out").click()
    sign_in_as(page, live_server, "root")
    expect()(page.locator("h1")).to_have_text("You are not in a team yet")
    expect()(page.get_by_role("link", name="Create a team")).to_be_visible()
    shoot(page, "no-team.png")
