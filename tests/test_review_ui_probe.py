# ruff: noqa: F811 - the browser and page_support fixtures are imported by name
"""A blind probe of the review pages as a reviewer and an admin use them (Chromium through Playwright, live server).

Families: triage with keyboard and mouse (approve, reject, edit then approve, undo) and what the entry's history says
afterwards; two tabs on one proposal or entry (a stale write is refused, clearly, with nothing lost); the store's
autonomy policy form (save, errors that keep what was typed, a way back); hostile transcripts rendered as readable
text; empty states, filters, pagination, back and reload after an htmx action; a failing request shows an error; a
session that expired mid-triage; another team's objects. Screenshots go to /tmp/ui-probe/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory.models import MemoryEntry
from reviews.models import AutonomyPolicy, Proposal, ProposalEvidence
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing  # noqa: F401 - fixture
from tests.test_browser import browser, page, pytestmark, sign_in  # noqa: F401 - fixtures and marks

SHOTS = Path("/tmp/ui-probe")
ERROR_WORDS = re.compile(r"error|failed|could not|couldn.t|went wrong|try again|not saved|unavailable", re.I)


def expect(*args, **kwargs):
    return pytest.importorskip("playwright.sync_api").expect(*args, **kwargs)


def shoot(target, name: str) -> str:
    """A screenshot for people to look at (not an assertion). A card being swapped by htmx at that moment is waited
    for once more: on a loaded machine the swap outlasted the first 10 s."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    if hasattr(target, "goto"):
        target.screenshot(path=str(path), full_page=True)
        return str(path)
    timeout = pytest.importorskip("playwright.sync_api").TimeoutError
    try:
        target.screenshot(path=str(path))
    except timeout:
        try:
            target.screenshot(path=str(path), timeout=10_000)
        except timeout:
            # Gone from the page (a later swap replaced it): the whole page is what there is to look at; the test's
            # assertions, not its pictures, decide.
            target.page.screenshot(path=str(path), full_page=True)
    return str(path)


WIDER = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
    || (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible' && e.clientWidth))
  .slice(0, 4)
  .map(e => e.tagName.toLowerCase() + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


def overflow(page) -> tuple[int, list]:
    """How far the page scrolls sideways, and the first elements that stick out."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth"), page.evaluate(WIDER)


def assert_finished(page) -> None:
    """No template syntax leaked into what the person reads."""
    text = page.locator("body").inner_text()
    for raw in ("{{", "}}", "{%", "%}"):
        assert raw not in text, (page.url, raw)
    assert overflow(page)[0] <= 0, (page.url, overflow(page))


def card(page, proposal):
    return page.locator(f"#card-{proposal.pk}")


def settle(page) -> None:
    page.wait_for_load_state("networkidle")


@pytest.fixture
def triage(world):
    store = world.store_a
    sessions = [
        SessionFactory(team=world.team_a, external_id=f"tri-{i}", agent="deploy-bot", task="release") for i in range(3)
    ]
    make_entry(store, key="deploy", content="Deploy with make ship.")
    make_entry(store, key="lint", content="Lint with flake8.")
    make_entry(store, key="staging", content="Staging is at staging.example.")
    update = make_proposal(
        store,
        operation="update",
        targets=["deploy"],
        content="Deploy with make release.",
        sessions=sessions,
        prevalence=(5, 6),
    )
    lint = make_proposal(
        store, operation="update", targets=["lint"], content="Lint with ruff.", sessions=sessions, prevalence=(4, 6)
    )
    remove = make_proposal(
        store, operation="remove", targets=["staging"], content=None, sessions=sessions, prevalence=(3, 6), risk="high"
    )
    add = make_proposal(
        store,
        content="Announce releases in #deploys first.",
        key_hint="announce-releases",
        sessions=sessions,
        prevalence=(2, 6),
    )
    return {"update": update, "lint": lint, "remove": remove, "add": add, "sessions": sessions}


# --- triage -----------------------------------------------------------------------------------------------------


def test_triage_with_mouse_and_keyboard_then_history_and_provenance(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    expect(page.locator("[data-card]")).to_have_count(4)
    assert_finished(page)
    shoot(page, "triage-queue.png")

    # Mouse: approve the update.
    card(page, triage["update"]).locator("[data-action=approve]").click()
    expect(card(page, triage["update"])).to_have_count(0)
    expect(page.locator("#flash")).to_contain_text("deploy v2")
    expect(page.locator('[data-count="pending"]')).to_have_text("3")

    # Keyboard: reject the high-risk removal with a reason.
    page.locator("h1").click()
    card(page, triage["remove"]).evaluate("el => el.scrollIntoView({block: 'start'})")
    expect(card(page, triage["remove"])).to_be_in_viewport()
    page.keyboard.press("r")
    reason = card(page, triage["remove"]).locator("[data-reason]")
    expect(reason).to_be_focused()
    reason.fill("staging still exists")
    reason.press("Enter")
    expect(card(page, triage["remove"])).to_have_count(0)
    expect(page.locator('[data-count="rejected"]')).to_have_text("1")

    # Keyboard: move the highlight to the lint change (k), edit then approve it.
    current = page.locator("[data-card].is-current")
    expect(current).to_have_count(1)
    for _ in range(3):
        if current.get_attribute("id") == f"card-{triage['lint'].pk}":
            break
        page.keyboard.press("k")
    expect(card(page, triage["lint"])).to_have_class(re.compile("is-current"))
    page.keyboard.press("e")
    text = card(page, triage["lint"]).locator("textarea[name=content]")
    expect(text).to_be_focused()
    text.fill("Lint with ruff check --fix.")
    card(page, triage["lint"]).locator("input[name=reason]").fill("the fix flag matters")
    card(page, triage["lint"]).locator("button[data-action=approve]").click()
    expect(card(page, triage["lint"])).to_have_count(0)
    expect(page.locator('[data-count="pending"]')).to_have_text("1")

    # Undo the rejection from its toast? The toast now belongs to the last decision: undo that approval instead.
    page.locator("#flash [data-action=undo]").click()
    expect(page.locator("#flash")).to_contain_text(f"proposal #{triage['lint'].pk} is pending again")
    expect(card(page, triage["lint"])).to_have_count(1)
    expect(page.locator('[data-count="pending"]')).to_have_text("2")
    settle(page)

    lint = MemoryEntry.objects.get(store=world.store_a, key="lint")
    assert lint.content == "Lint with flake8."
    assert Proposal.objects.get(pk=triage["lint"].pk).content == "Lint with ruff."  # the edit was dropped
    assert Proposal.objects.get(pk=triage["remove"].pk).decision_reason == "staging still exists"

    # History of the approved entry: v2 by alice, from the proposal, quoting a session, with a working link.
    deploy = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    page.goto(f"{live_server.url}/memory/entries/{deploy.pk}/")
    v2 = page.locator("#version-2")
    expect(v2).to_contain_text("alice")
    expect(v2).to_contain_text(f"proposal #{triage['update'].pk}")
    expect(v2.locator("a", has_text="tri-0").first).to_be_visible()
    expect(page.locator(".entry-text").first).to_have_text("Deploy with make release.")
    assert_finished(page)
    shoot(page, "triage-entry-history.png")

    # The undone entry's history shows the apply and the undo, naming alice, and v1's text is current again.
    page.goto(f"{live_server.url}/memory/entries/{lint.pk}/")
    expect(page.locator("#version-2")).to_contain_text("alice")
    expect(page.locator("#version-3")).to_contain_text("alice")
    expect(page.locator(".entry-text").first).to_have_text("Lint with flake8.")
    shoot(page, "triage-undone-history.png")


def test_undo_a_rejection_brings_the_card_back_and_it_can_then_be_approved(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    c = card(page, triage["add"])
    c.locator("summary[data-action=reject]").click()
    c.locator("[data-reason]").fill("noise")
    c.locator("[data-reject]").click()
    expect(c).to_have_count(0)
    page.locator("#flash [data-action=undo]").click()
    expect(card(page, triage["add"])).to_have_count(1)
    expect(page.locator('[data-count="rejected"]')).to_have_text("0")
    card(page, triage["add"]).locator("[data-action=approve]").click()
    expect(card(page, triage["add"])).to_have_count(0)
    settle(page)
    entry = MemoryEntry.objects.get(store=world.store_a, key="announce-releases")
    page.goto(f"{live_server.url}/memory/entries/{entry.pk}/")
    expect(page.locator("#version-1")).to_contain_text("alice")
    expect(page.locator("#version-1")).to_contain_text(f"proposal #{triage['add'].pk}")


# --- two tabs ---------------------------------------------------------------------------------------------------


def test_two_tabs_approve_the_same_proposal(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    other = page.context.new_page()
    other.goto(f"{live_server.url}/reviews/")
    card(page, triage["update"]).locator("[data-action=approve]").click()
    expect(card(page, triage["update"])).to_have_count(0)
    settle(page)

    card(other, triage["update"]).locator("[data-action=approve]").click()
    # The second tab is told the proposal was already decided (by whom), and the stale card leaves.
    notice = other.locator(f"#flash, [role=alert], #card-{triage['update'].pk}")
    expect(
        notice.filter(has_text=re.compile(r"already|no longer pending|was (approved|applied)", re.I)).first
    ).to_be_visible()
    shoot(other, "two-tabs-approve.png")
    settle(other)
    entry = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    assert entry.version == 2 and entry.versions.count() == 2
    settle(other)
    other.close()


def test_two_tabs_edit_the_same_entry_the_stale_save_keeps_the_text(page, live_server, world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    sign_in(page, live_server, "alice")
    other = page.context.new_page()
    for tab in (page, other):
        tab.goto(f"{live_server.url}/memory/entries/{entry.pk}/edit/")
    page.fill("#id_content", "Deploy with make release (tab one).")
    page.get_by_role("button", name="Save as a new version").click()
    page.wait_for_url(re.compile(rf"/memory/entries/{entry.pk}/$"))

    other.fill("#id_content", "Deploy with make release --fast (tab two).")
    other.fill("#id_reason", "speed")
    other.get_by_role("button", name="Save as a new version").click()
    other.wait_for_load_state()
    expect(other.locator("main")).to_contain_text(re.compile(r"changed|newer version|since you", re.I))
    expect(other.locator("main")).to_contain_text("Deploy with make release (tab one).")
    expect(other.locator("#id_content")).to_have_value("Deploy with make release --fast (tab two).")
    assert_finished(other)
    shoot(other, "two-tabs-stale-edit.png")
    entry.refresh_from_db()
    assert entry.content == "Deploy with make release (tab one)." and entry.version == 2

    # The way forward: save again, now against the current version.
    other.get_by_role("button", name=re.compile("Save")).first.click()
    other.wait_for_url(re.compile(rf"/memory/entries/{entry.pk}/$"))
    entry.refresh_from_db()
    assert entry.content == "Deploy with make release --fast (tab two)." and entry.version == 3
    settle(other)
    other.close()


def test_edit_then_approve_while_the_entry_changes_in_another_tab(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    c = card(page, triage["update"])
    c.locator("[data-action=edit]").click()
    c.locator("textarea[name=content]").fill("Deploy with make release, then tag (alice's edit).")

    other = page.context.new_page()
    entry = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    other.goto(f"{live_server.url}/memory/entries/{entry.pk}/edit/")
    other.fill("#id_content", "Deploy by hand (other tab).")
    other.get_by_role("button", name="Save as a new version").click()
    other.wait_for_url(re.compile(rf"/memory/entries/{entry.pk}/$"))
    settle(other)
    other.close()

    c.locator("button[data-action=approve]").click()
    expect(c.locator("[data-conflict]")).to_contain_text("changed by alice")
    settle(page)
    entry.refresh_from_db()
    assert entry.content == "Deploy by hand (other tab)."  # nothing overwritten
    shoot(page, "two-tabs-edit-approve-conflict.png")
    # Nothing lost: the reviewer's edit is still on the screen (or in a field) to reuse against the current text.
    typed = "Deploy with make release, then tag (alice's edit)."
    shown = page.locator("main").inner_text()
    values = page.locator("main textarea").evaluate_all("els => els.map(e => e.value)")
    assert typed in shown or typed in values, (shown[-800:], values)


def test_pin_from_a_stale_entry_page_says_the_entry_changed(page, live_server, world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/memory/entries/{entry.pk}/")
    other = page.context.new_page()
    other.goto(f"{live_server.url}/memory/entries/{entry.pk}/edit/")
    other.fill("#id_content", "Deploy with make release.")
    other.get_by_role("button", name="Save as a new version").click()
    other.wait_for_url(re.compile(rf"/memory/entries/{entry.pk}/$"))
    settle(other)
    other.close()

    page.locator("[data-action=pin]").click()
    expect(page.locator("#flash")).to_contain_text(re.compile(r"changed|newer|version 2", re.I))
    settle(page)
    shoot(page, "stale-pin.png")
    entry.refresh_from_db()
    assert entry.version == 2 and not entry.pinned
    # The way forward: the page now shows the current text and pinning works.
    expect(page.locator(".entry-text").first).to_have_text("Deploy with make release.")
    with page.expect_response(lambda r: r.url.endswith("/pin/")) as answered:
        page.locator("[data-action=pin]").click()
    settle(page)
    shoot(page, "stale-pin-retry.png")
    entry.refresh_from_db()
    assert entry.pinned, (answered.value.status, page.locator("#flash").inner_text())


def test_edited_approval_with_a_blank_key_comes_back_with_everything_typed(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    c = card(page, triage["add"])
    c.locator("[data-action=edit]").click()
    c.get_by_label("Text to apply").fill("Announce every release in #deploys, then wait.")
    c.get_by_label("Agent scope").fill("deploy-bot")
    c.get_by_label("Note for the history (optional)").fill("tighter")
    # The key last, and seen blank before approving: filled first, right as the edit card arrived, it was sometimes
    # back to the proposed key by the time of the click (1 run in 3), and the approval then rightly applied.
    c.get_by_label("Key").fill("   ")
    expect(c.get_by_label("Key")).to_have_value("   ")
    c.get_by_role("button", name="Approve edited").click()
    # the refusal itself, not the form as it was before the answer came
    expect(c.locator(".form-error")).to_contain_text(re.compile(r"key", re.I))
    expect(c.get_by_label("Text to apply")).to_have_value("Announce every release in #deploys, then wait.")
    expect(c.get_by_label("Agent scope")).to_have_value("deploy-bot")
    expect(c.get_by_label("Note for the history (optional)")).to_have_value("tighter")
    settle(page)
    shoot(c, "edit-blank-key.png")
    assert Proposal.objects.get(pk=triage["add"].pk).status == "pending"


def test_the_conflict_message_after_a_late_approve_reads_cleanly(page, live_server, world, triage):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    sign_in(page, live_server, "alice")
    c = card(page, triage["update"])
    expect(c).to_be_visible()
    entry = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Deploy by hand.")
    c.locator("[data-action=approve]").click()
    flash = page.locator("#flash")
    expect(flash).to_contain_text(re.compile(r"not applied", re.I))
    expect(c.locator("[data-conflict]")).to_contain_text("changed by adam")
    shoot(page.locator("#flash"), "late-approve-toast.png")
    said = flash.inner_text()
    # One sentence, not the reason wrapped in its own prefix: "Not applied: (not applied: entry ...)".
    assert not re.search(r"not applied:\s*\(not applied", said, re.I), said
    settle(page)


# --- the policy page --------------------------------------------------------------------------------------------


def policy_url(live_server, store) -> str:
    return f"{live_server.url}/reviews/stores/{store.pk}/policy/"


def test_policy_set_save_and_reload(page, live_server, world, triage):
    sign_in(page, live_server, "adam")
    page.goto(policy_url(live_server, world.store_a))
    assert_finished(page)
    page.get_by_label("Apply low-risk changes at once").check()
    page.fill("#id_min_confidence_auto", "0.75")
    page.fill("#id_max_sessions", "250")
    page.fill("#id_agents", "deploy-bot, ci-bot")
    page.get_by_role("button", name="Save policy").click()
    expect(page.locator("#flash")).to_contain_text(re.compile(r"saved|policy", re.I))
    page.reload()
    expect(page.get_by_label("Apply low-risk changes at once")).to_be_checked()
    expect(page.locator("#id_min_confidence_auto")).to_have_value("0.75")
    expect(page.locator("#id_max_sessions")).to_have_value("250")
    expect(page.locator("#id_agents")).to_have_value(re.compile(r"(deploy-bot,\s*ci-bot|ci-bot,\s*deploy-bot)"))
    expect(page.locator(".history")).to_contain_text("adam")
    shoot(page, "policy-saved.png")
    policy = AutonomyPolicy.objects.get(store=world.store_a)
    assert policy.mode == "auto_low_risk" and policy.max_sessions == 250


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_sessions", "0"), ("min_confidence_auto", "1.5"), ("min_share", "-0.2"), ("schedule_minutes", "0")],
)
def test_policy_invalid_value_shows_an_error_and_keeps_what_was_typed(page, live_server, world, field, value):
    sign_in(page, live_server, "adam")
    page.goto(policy_url(live_server, world.store_a))
    page.get_by_label("Apply all but high-risk changes").check()
    page.fill("#id_agents", "deploy-bot")
    if field == "schedule_minutes":
        page.locator("#id_schedule_enabled").check()
    page.fill(f"#id_{field}", value)
    page.get_by_role("button", name="Save policy").click()
    page.wait_for_load_state()
    settle(page)
    # The error is next to the field, in words, and the form keeps everything typed.
    error = page.locator(f".field:has(#id_{field})").locator(".errorlist, .error, [role=alert], .field-error")
    expect(error.first).to_be_visible()
    expect(page.locator(f"#id_{field}")).to_have_value(value)
    expect(page.get_by_label("Apply all but high-risk changes")).to_be_checked()
    expect(page.locator("#id_agents")).to_have_value("deploy-bot")
    # A way back to the store.
    expect(page.locator(".crumbs a", has_text="eng")).to_be_visible()
    assert_finished(page)
    shoot(page, f"policy-invalid-{field}.png")
    policy = AutonomyPolicy.objects.filter(store=world.store_a).first()
    assert policy is None or policy.mode == "manual"  # nothing saved


# --- hostile transcripts ----------------------------------------------------------------------------------------

LONG = "x" * 3000
HOSTILE = [
    {
        "type": "message",
        "role": "user",
        "content": "<script>window.pwned=1</script>**bold** [click](javascript:alert(1))",
    },
    {"type": "message", "role": "assistant", "content": "LONG:" + LONG},
    {"type": "message", "role": "user", "content": "abc \u202eRTL-override-text\u202c def"},
    {"type": "message", "role": "assistant", "content": "pass\u200bword and emoji 🚀✅ done"},
    {
        "type": "tool_call",
        "id": "c1",
        "name": "bash",
        "arguments": {"command": "echo '<b onmouseover=alert(1)>hi</b>'"},
    },
    {"type": "tool_result", "call_id": "c1", "content": "<iframe src='/__marker__/frame'></iframe>" + "y" * 2000},
    {"type": "memory_write", "content": "# Heading\n\n<img src=/__marker__/img onerror=window.pwned=2>"},
]


def test_hostile_transcript_is_escaped_and_readable(page, live_server, world):
    session = SessionFactory(
        team=world.team_a, external_id="hostile-<b>x</b>", agent="<i>bot</i>", events=HOSTILE, event_count=len(HOSTILE)
    )
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/memory/sessions/{session.pk}/")
    expect(page.locator("#event-0")).to_contain_text(
        "<script>window.pwned=1</script>**bold** [click](javascript:alert(1))"
    )
    expect(page.locator("h1")).to_have_text("hostile-<b>x</b>")
    expect(page.locator("#event-3")).to_contain_text("emoji 🚀✅ done")
    expect(page.locator("#event-6")).to_contain_text("<img src=/__marker__/img")
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.locator("main b, main i, main iframe, main img").count() == 0
    page.locator("#event-5 summary").click()
    settle(page)
    assert page.evaluate("window.pwned") is None
    assert not [u for u in requested if "__marker__" in u]
    # Readable: the 3,000-character line wraps or scrolls inside its event, the page does not scroll sideways.
    assert overflow(page)[0] <= 0, overflow(page)
    box = page.locator("#event-1").bounding_box()
    assert box["x"] + box["width"] <= page.viewport_size["width"]
    # An RTL override in one event does not reorder the next one.
    rtl_next = page.locator("#event-3 .event-text")
    assert rtl_next.evaluate("el => getComputedStyle(el).direction") == "ltr"
    shoot(page, "hostile-session.png")

    page.goto(f"{live_server.url}/memory/sessions/")
    row = page.locator("tr", has_text="hostile-")
    expect(row).to_contain_text("hostile-<b>x</b>")
    expect(row).to_contain_text("<i>bot</i>")
    assert_finished(page)


def test_hostile_excerpt_and_rationale_on_a_card_stay_text(page, live_server, world):
    session = SessionFactory(team=world.team_a, external_id="evil-1", events=HOSTILE, event_count=len(HOSTILE))
    proposal = make_proposal(
        world.store_a,
        content="Use **ruff** <img src=/__marker__/c onerror=window.pwned=3> \u202eevil\u202c 🚀",
        key_hint="ruff-lint",
        rationale="<script>window.pwned=4</script> seen " + "z" * 1500,
        sessions=[],
    )
    ProposalEvidence.objects.create(
        team_id=world.team_a.pk,
        proposal=proposal,
        session=session,
        event_index=0,
        excerpt="<script>window.pwned=1</script>",
        trust="user",
    )
    sign_in(page, live_server, "alice")
    c = card(page, proposal)
    expect(c.locator(".excerpt")).to_contain_text("<script>window.pwned=1</script>")
    expect(c).to_contain_text("<img src=/__marker__/c onerror=window.pwned=3>")
    expect(c.locator(".rationale")).to_contain_text("<script>window.pwned=4</script>")
    settle(page)
    assert page.evaluate("window.pwned") is None
    shoot(page, "hostile-card-page.png")
    assert c.locator(".rationale").evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "rationale spills out"
    assert overflow(page)[0] <= 0, overflow(page)
    box = c.bounding_box()
    assert box["x"] + box["width"] <= page.viewport_size["width"]
    shoot(c, "hostile-card.png")


def test_hidden_direction_and_zero_width_characters_in_what_approval_writes_are_shown(page, live_server, world):
    """The card says exactly what approval writes: a right-to-left override or a zero-width space in the text must
    not make it read as something else ("\u202eevil" drawn as "live") without the reviewer being told."""
    proposal = make_proposal(
        world.store_a, content="Deploy to \u202eevil\u202c host with pass\u200bword.", key_hint="deploy-target"
    )
    sign_in(page, live_server, "alice")
    c = card(page, proposal)
    expect(c).to_be_visible()
    shoot(c, "hidden-chars-card.png")
    text = c.locator("[data-writes], .changes").all_inner_texts()
    text = "\n".join(text)
    flagged = re.search(r"U\+202E|U\+200B|hidden|invisible|direction|bidi", text, re.I)
    escaped = "\\u202e" in text.lower() or "<U+202E>" in text
    assert flagged or escaped, text[:600]


# --- empty states, filters, pagination, back and reload -----------------------------------------------------------


def test_empty_queue_and_a_filter_that_matches_nothing(page, live_server, world):
    sign_in(page, live_server, "alice")
    expect(page.get_by_text("Nothing to review")).to_be_visible()
    assert_finished(page)
    shoot(page, "empty-queue.png")
    make_proposal(world.store_a, content="A low fact.")
    page.goto(f"{live_server.url}/reviews/?risk=high")
    expect(page.locator("[data-card]")).to_have_count(0)
    # The person learns that the filter hides cards, and how to see them again.
    main = page.locator("#queue-list")
    expect(main).to_contain_text(re.compile(r"filter|match", re.I))
    expect(page.locator("main a[href='/reviews/'], main a[href='?'], main a:has-text('Clear')").first).to_be_visible()
    shoot(page, "empty-filtered.png")


def test_filter_url_survives_reload_and_back(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    expect(page.locator("[data-card]")).to_have_count(4)
    page.select_option("#id_risk", "high")
    expect(page.locator("[data-card]")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"risk=high"))
    page.reload()
    expect(page.locator("[data-card]")).to_have_count(1)
    expect(page.locator("#id_risk")).to_have_value("high")
    page.go_back()
    expect(page).to_have_url(re.compile(r"/reviews/$"))
    expect(page.locator("[data-card]")).to_have_count(4)
    shoot(page, "filter-back.png")
    expect(page.locator("nav.mainnav")).to_be_visible()
    expect(page.locator("form.filters")).to_be_visible()
    expect(page.locator("#id_risk")).to_have_value("")


def test_reload_and_back_after_an_htmx_approval(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    page.select_option("#id_sort", "newest")
    expect(page).to_have_url(re.compile(r"sort=newest"))
    card(page, triage["update"]).locator("[data-action=approve]").click()
    expect(card(page, triage["update"])).to_have_count(0)
    settle(page)
    expect(page).to_have_url(re.compile(r"/reviews/\?.*sort=newest"))
    page.reload()
    expect(page.locator("[data-card]")).to_have_count(3)
    expect(card(page, triage["update"])).to_have_count(0)
    expect(page.locator('[data-count="applied"]')).to_have_text("1")
    expect(page.locator("#id_sort")).to_have_value("newest")

    # Leave for a proposal page, come back: the decided card is not offered again.
    card(page, triage["lint"]).locator(".card-title a").click()
    page.wait_for_url(re.compile(rf"/reviews/proposals/{triage['lint'].pk}/$"))
    page.go_back()
    page.wait_for_load_state()
    expect(page.locator("[data-card]")).to_have_count(3)
    expect(card(page, triage["update"])).to_have_count(0)
    expect(page.locator('[data-count="pending"]')).to_have_text("3")


def test_pagination_reaches_every_card_once(page, live_server, world):
    sessions = [SessionFactory(team=world.team_a, external_id=f"pg-{i}") for i in range(2)]
    ids = {make_proposal(world.store_a, content=f"Paged fact number {i}.", sessions=sessions).pk for i in range(65)}
    sign_in(page, live_server, "alice")
    seen: list[int] = []
    cards = page.locator("[data-card]")
    for number in range(2, 12):
        expect(cards.first).to_be_visible()
        ids_here = cards.evaluate_all("els => els.map(e => +e.id.replace('card-', ''))")
        seen += ids_here
        nxt = page.locator("a[rel=next]")
        if not nxt.count():
            break
        first = cards.first.get_attribute("id")
        nxt.first.click()
        expect(page).to_have_url(re.compile(rf"page={number}"))
        expect(cards.first).not_to_have_id(first)
        settle(page)
    assert len(seen) == len(set(seen)), "a card shown on two pages"
    assert set(seen) == ids, (len(seen), len(ids))
    page.reload()  # a paged URL reloads to the same page
    expect(cards.first).to_be_visible()
    assert cards.evaluate_all("els => els.map(e => +e.id.replace('card-', ''))") == ids_here
    assert_finished(page)


# --- failing requests -------------------------------------------------------------------------------------------


def test_approve_that_gets_a_server_error_says_so(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    page.route("**/approve/", lambda route: route.fulfill(status=500, body="<h1>Server Error (500)</h1>"))
    with page.expect_response("**/approve/") as answered:
        card(page, triage["update"]).locator("[data-action=approve]").click()
    assert answered.value.status == 500  # the request went out and failed
    settle(page)
    shoot(page, "approve-500.png")
    expect(page.locator("main")).to_contain_text(ERROR_WORDS)  # anywhere: toast, card or banner
    expect(card(page, triage["update"])).to_be_visible()  # the card is still there to retry
    assert page.locator("main h1", has_text="Server Error").count() == 0  # not the raw body swapped into a card
    shoot(page, "approve-500.png")
    page.unroute("**/approve/")
    card(page, triage["update"]).locator("[data-action=approve]").click()
    expect(card(page, triage["update"])).to_have_count(0)
    settle(page)


def test_reject_when_the_network_drops_says_so(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    page.route("**/reject/", lambda route: route.abort("internetdisconnected"))
    c = card(page, triage["add"])
    c.locator("summary[data-action=reject]").click()
    c.locator("[data-reason]").fill("too vague")
    with page.expect_event("requestfailed", lambda r: "/reject/" in r.url):
        c.locator("[data-reject]").click()
    settle(page)
    shoot(page, "reject-network-drop.png")
    expect(page.locator("main")).to_contain_text(ERROR_WORDS)  # anywhere: toast, card or banner
    expect(c).to_be_visible()
    expect(c.locator("[data-reason]")).to_have_value("too vague")  # what was typed is kept for the retry
    shoot(page, "reject-network-drop.png")
    assert Proposal.objects.get(pk=triage["add"].pk).status == "pending"


def test_policy_preview_failure_is_not_silent(page, live_server, world, triage):
    sign_in(page, live_server, "adam")
    page.goto(policy_url(live_server, world.store_a))
    page.route(re.compile(r".*/policy/\?.*preview=1.*"), lambda route: route.fulfill(status=500, body="boom"))
    with page.expect_response(lambda r: "preview=1" in r.url) as answered:
        page.get_by_label("Apply low-risk changes at once").check()
    assert answered.value.status == 500
    settle(page)
    shoot(page, "policy-preview-500.png")
    expect(page.locator("main")).to_contain_text(ERROR_WORDS)  # anywhere: toast, preview box or banner
    shoot(page, "policy-preview-500.png")


# --- a session that expired mid-triage --------------------------------------------------------------------------


def test_signed_out_in_another_tab_then_approve_leads_to_login_and_back(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    page.select_option("#id_risk", "low")
    expect(page).to_have_url(re.compile(r"risk=low"))
    other = page.context.new_page()
    other.goto(f"{live_server.url}/memory/")
    other.get_by_role("button", name="Sign out").click()
    other.wait_for_load_state()
    settle(other)
    other.close()

    with page.expect_response("**/approve/") as answered:
        card(page, triage["update"]).locator("[data-action=approve]").click()
    shoot(page, "expired-after-click.png")
    assert answered.value.status < 400 or answered.value.status == 401, (
        answered.value.status,
        answered.value.text()[:300],
    )
    page.wait_for_url(re.compile(r"/accounts/login/"))
    assert page.locator("#id_username").is_visible()
    assert page.locator("[data-card]").count() == 0  # not a login form inside a card
    shoot(page, "expired-login.png")
    assert Proposal.objects.get(pk=triage["update"].pk).status == "pending"
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-for-tests")
    login_url = page.url
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert re.search(r"/reviews/\?.*risk=low", page.url), (login_url, page.url)  # back where the reviewer was
    card(page, triage["update"]).locator("[data-action=approve]").click()
    expect(card(page, triage["update"])).to_have_count(0)
    settle(page)
    assert Proposal.objects.get(pk=triage["update"].pk).status == "applied"


def test_signed_out_then_open_edit_form_leads_to_login(page, live_server, world, triage):
    sign_in(page, live_server, "alice")
    page.context.clear_cookies()
    card(page, triage["lint"]).locator("[data-action=edit]").click()
    page.wait_for_url(re.compile(r"/accounts/login/.*next="))
    assert page.locator("[data-card]").count() == 0


# --- another team's objects -------------------------------------------------------------------------------------


def test_another_teams_pages_are_not_reachable(page, live_server, world, triage):
    entry = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    pk = triage["update"].pk
    sign_in(page, live_server, "bob")
    expect(page.locator("[data-card]")).to_have_count(0)
    for path in (
        f"/reviews/proposals/{pk}/",
        f"/reviews/proposals/{pk}/edit/",
        f"/reviews/proposals/{pk}/evidence/",
        f"/memory/entries/{entry.pk}/",
        f"/memory/entries/{entry.pk}/edit/",
        f"/memory/stores/{world.store_a.pk}/",
        f"/memory/sessions/{triage['sessions'][0].pk}/",
        f"/reviews/stores/{world.store_a.pk}/policy/",
    ):
        response = page.goto(live_server.url + path)
        assert response.status == 404, (path, response.status)
        expect(page.locator("h1")).to_have_text("Not found")
        assert "deploy" not in page.locator("main").inner_text(), path
    shoot(page, "other-team-404.png")
    # A forged approve from bob's signed-in page is refused and changes nothing.
    status = page.evaluate(
        """async (pk) => {
            const token = document.querySelector('[name=csrfmiddlewaretoken]')?.value
              || JSON.parse(document.body.getAttribute('hx-headers') || '{}')['X-CSRFToken'];
            const r = await fetch(`/reviews/proposals/${pk}/approve/`, {method: 'POST',
              headers: {'X-CSRFToken': token || '', 'HX-Request': 'true'}});
            return r.status;
        }""",
        pk,
    )
    assert status in (403, 404), status
    assert Proposal.objects.get(pk=pk).status == "pending"


def test_viewer_sees_no_decision_buttons(page, live_server, world, triage):
    sign_in(page, live_server, "victor")
    expect(page.locator("[data-card]")).to_have_count(4)
    assert page.locator("[data-action=approve], [data-action=edit], summary[data-action=reject]").count() == 0
    page.goto(f"{live_server.url}/reviews/stores/{world.store_a.pk}/policy/")
    assert page.locator("button", has_text="Save policy").count() == 0
