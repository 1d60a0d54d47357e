# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""The review pages: the queue, decisions (htmx and plain forms), conflicts, bulk, edit, policy, dream runs, with
the personas (alice reviews A, victor views A, adam administers A, bob reviews B)."""

from __future__ import annotations

import html as html_module
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dreamweb.provenance import Author
from memory.models import MemoryEntry, MemoryVersion
from memory.services import update_entry
from reviews.models import DreamRun, PolicyChange, Proposal, ProposalStatus, RunStatus
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import PageClient as Client
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HTMX = {"HTTP_HX_REQUEST": "true"}


def login(client, user):
    client.force_login(user)
    return client


def card_ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'id="card-(\d+)"', html)]


# --- the queue ---------------------------------------------------------------------------------------------------


def test_queue_shows_exactly_the_pending_cards_of_my_team(client, world):
    mine = make_proposal(world.store_a, content="Team A fact.")
    decided = make_proposal(world.store_a, content="Already rejected.")
    decided.status = ProposalStatus.REJECTED
    decided.save()
    theirs = make_proposal(world.store_b, content="Team B secret fact.")

    html = login(client, world.victor).get(reverse("reviews:queue")).content.decode()

    assert card_ids(html) == [mine.pk]
    assert "Team B secret fact" not in html
    assert theirs.pk not in card_ids(html)


def test_home_redirects_to_the_queue(client, world):
    response = login(client, world.alice).get("/")
    assert response.status_code == 302 and response.url == reverse("reviews:queue")


def test_anonymous_is_sent_to_sign_in(client, world):
    response = client.get(reverse("reviews:queue"))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_card_shows_diff_against_current_text_prevalence_and_evidence(client, world):
    make_entry(world.store_a, key="deploy", content="Deploy with make deploy today.")
    session = SessionFactory(team=world.team_a, external_id="sess-evidence")
    proposal = make_proposal(
        world.store_a,
        operation="update",
        targets=["deploy"],
        content="Deploy with make release today.",
        sessions=[session],
        prevalence=(4, 10),
        risk="medium",
        risk_reasons=["changes a command"],
    )

    html = login(client, world.alice).get(reverse("reviews:queue")).content.decode()

    assert "<del>deploy</del><ins>release</ins>" in html
    assert "4 of 10 sessions (40 %)" in html
    assert "Medium risk" in html and "changes a command" in html
    link = reverse("memory:session", args=[session.pk]) + "?event=1&amp;mark=make+release#event-1"
    assert link in html
    assert "<mark>make release</mark>" in html
    assert f'id="card-{proposal.pk}"' in html


def test_card_of_a_stale_target_warns_and_shows_the_current_text(client, world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="Deploy by hand, carefully.")

    html = login(client, world.alice).get(reverse("reviews:queue")).content.decode()

    # In words, with versions and no hashes; the diff is against the current text; no Approve that can only fail.
    assert "deploy changed by System since the dream read it: the dream read version 1, it is at version 2." in html
    assert "Deploy by hand, carefully." in html
    assert entry.content_hash not in html and 'data-action="approve"' not in html
    assert "Rebase onto the current text" in html and "Edit against current" in html


def test_queue_text_is_escaped(client, world):
    make_proposal(world.store_a, content="<script>alert(1)</script>", rationale="<b hx-get='/x'>bold</b>")
    html = login(client, world.alice).get(reverse("reviews:queue")).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b hx-get" not in html


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"risk": "high"}, ["high"]),
        ({"operation": "update"}, ["update"]),
        ({"kind": "preference"}, ["pref"]),
        ({"agent": "bot-1"}, ["scoped"]),
        ({"agent": "_none"}, ["high", "update", "pref"]),
    ],
)
def test_queue_filters(client, world, params, expected):
    make_entry(world.store_a, key="k", content="text")
    named = {
        "high": make_proposal(world.store_a, content="high", risk="high"),
        "update": make_proposal(world.store_a, operation="update", targets=["k"], content="new text"),
        "pref": make_proposal(world.store_a, content="pref", kind="preference"),
        "scoped": make_proposal(world.store_a, content="scoped", scope_agent="bot-1"),
    }
    html = login(client, world.alice).get(reverse("reviews:queue"), params).content.decode()
    assert sorted(card_ids(html)) == sorted(named[n].pk for n in expected)


def test_queue_store_filter_and_sorting(client, world):
    other_store = world.store_a.__class__.objects.create(team=world.team_a, slug="other")
    a = make_proposal(world.store_a, content="a", prevalence=(2, 10), confidence=0.9)
    b = make_proposal(world.store_a, content="b", prevalence=(7, 10), confidence=0.5)
    c = make_proposal(other_store, content="c", prevalence=(5, 10), confidence=0.7)
    client = login(client, world.alice)
    url = reverse("reviews:queue")
    assert card_ids(client.get(url).content.decode()) == [b.pk, c.pk, a.pk]
    assert card_ids(client.get(url, {"sort": "confidence"}).content.decode()) == [a.pk, c.pk, b.pk]
    assert card_ids(client.get(url, {"sort": "oldest"}).content.decode()) == [a.pk, b.pk, c.pk]
    assert card_ids(client.get(url, {"store": other_store.pk}).content.decode()) == [c.pk]
    # A store of another team is not a valid choice: the filter is dropped, not obeyed.
    assert sorted(card_ids(client.get(url, {"store": world.store_b.pk}).content.decode())) == sorted([a.pk, b.pk, c.pk])


def test_queue_paging_keeps_real_links_and_htmx_gets_the_list_partial(client, world):
    for i in range(25):
        make_proposal(world.store_a, content=f"fact {i}", evidence_count=0, prevalence=(30 - i, 40))
    client = login(client, world.alice)
    page1 = client.get(reverse("reviews:queue"))
    assert len(card_ids(page1.content.decode())) == 20
    assert 'href="?page=2"' in page1.content.decode()
    assert page1["Vary"] and "HX-Request" in page1["Vary"]

    partial = client.get(reverse("reviews:queue"), {"page": 2}, **HTMX)
    body = partial.content.decode()
    assert len(card_ids(body)) == 5
    assert "<html" not in body and 'id="queue-list"' in body
    assert 'id="counters"' in body and 'hx-swap-oob="true"' in body
    assert "HX-Request" in partial["Vary"]


def test_counters_count_pending_by_risk_and_decided_by_status(client, world):
    make_proposal(world.store_a, content="1", risk="low")
    make_proposal(world.store_a, content="2", risk="high")
    p = make_proposal(world.store_a, content="3", risk="high")
    p.status, p.decided_at = ProposalStatus.APPLIED, timezone.now()
    p.save()
    old = make_proposal(world.store_a, content="4", risk="low")
    old.status, old.decided_at = ProposalStatus.REJECTED, timezone.now() - timedelta(days=8)
    old.save()
    make_proposal(world.store_b, content="other team", risk="high")
    html = login(client, world.alice).get(reverse("reviews:queue")).content.decode()
    assert '<strong data-count="pending">2</strong>' in html
    assert '<strong data-count="high">1</strong>' in html
    assert '<strong data-count="applied">1</strong>' in html
    assert '<strong data-count="rejected">0</strong>' in html  # decided more than 7 days ago


def test_viewer_sees_the_queue_without_decision_buttons(client, world):
    make_proposal(world.store_a)
    html = login(client, world.victor).get(reverse("reviews:queue")).content.decode()
    assert "read only" in html
    assert 'data-action="approve"' not in html and 'id="bulk"' not in html


# --- decisions ---------------------------------------------------------------------------------------------------


def test_approve_with_htmx_removes_the_card_and_updates_counters(client, world):
    proposal = make_proposal(world.store_a)
    make_proposal(world.store_a, content="another")
    client = login(client, world.alice)

    response = client.post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, **HTMX)

    assert response.status_code == 200
    body = response.content.decode()
    assert f'id="card-{proposal.pk}"' not in body
    assert 'id="counters" class="counters" hx-swap-oob="true"' in body
    assert '<strong data-count="pending">1</strong>' in body
    assert '<strong data-count="applied">1</strong>' in body
    assert "Approved and applied: release-command v1." in body
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.APPLIED and proposal.decided_by == world.alice


def test_approve_without_js_redirects_back_with_a_message(client, world):
    proposal = make_proposal(world.store_a)
    client = login(client, world.alice)
    response = client.post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/?risk=low"})
    assert response.status_code == 302 and response.url == "/reviews/?risk=low"
    page = client.get(response.url).content.decode()
    assert "Approved and applied" in page
    assert MemoryEntry.objects.filter(store=world.store_a, key="release-command").exists()


def test_approve_refuses_an_external_next_url(client, world):
    proposal = make_proposal(world.store_a)
    response = login(client, world.alice).post(
        reverse("reviews:approve", args=[proposal.pk]), {"next": "https://evil.example/"}
    )
    assert response.url == reverse("reviews:queue")


def test_approve_of_a_stale_card_keeps_it_as_a_conflict_with_the_current_text(client, world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="Deploy by hand, carefully.")
    client = login(client, world.alice)

    body = client.post(reverse("reviews:approve", args=[proposal.pk]), **HTMX).content.decode()

    assert f'id="card-{proposal.pk}"' in body
    assert "Conflict" in body and "Deploy by hand, carefully." in body
    assert 'data-action="approve"' not in body
    entry.refresh_from_db()
    assert entry.content == "Deploy by hand, carefully."
    # Without JavaScript the conflict lands on the proposal's page, which shows the same.
    other = make_proposal(
        world.store_a, operation="update", targets=["deploy"], content="x", target_hashes={"deploy": "0"}
    )
    response = client.post(reverse("reviews:approve", args=[other.pk]))
    assert response.url == reverse("reviews:proposal", args=[other.pk])
    assert "Deploy by hand, carefully." in client.get(response.url).content.decode()


def test_second_approval_of_the_same_card_applies_once_and_says_so(client, world, django_user_model):
    proposal = make_proposal(world.store_a)
    first, second = Client(), Client()
    first.force_login(world.alice)
    second.force_login(world.adam)
    assert first.post(reverse("reviews:approve", args=[proposal.pk]), **HTMX).status_code == 200

    body = second.post(reverse("reviews:approve", args=[proposal.pk]), **HTMX).content.decode()

    assert "alice already approved it" in body
    assert MemoryVersion.objects.filter(proposal_id=proposal.pk).count() == 1


def test_reject_with_reason(client, world):
    proposal = make_proposal(world.store_a)
    body = (
        login(client, world.alice)
        .post(reverse("reviews:reject", args=[proposal.pk]), {"reason": "one-off"}, **HTMX)
        .content.decode()
    )
    assert f'id="card-{proposal.pk}"' not in body and "Rejected: " in body
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decision_reason) == ("rejected", "one-off")
    assert not MemoryEntry.objects.exists()


def test_edit_then_approve(client, world):
    proposal = make_proposal(world.store_a, content="Use make release.")
    client = login(client, world.alice)
    form = client.get(reverse("reviews:edit", args=[proposal.pk]), **HTMX).content.decode()
    assert "<textarea" in form and "Use make release.</textarea>" in form
    page = client.get(reverse("reviews:edit", args=[proposal.pk])).content.decode()
    assert "<html" in page and "<textarea" in page

    client.post(reverse("reviews:approve", args=[proposal.pk]), {"content": "Use `make release`.", "reason": "clearer"})

    proposal.refresh_from_db()
    assert proposal.status == "applied" and proposal.original_content == "Use make release."
    version = MemoryVersion.objects.get(pk=proposal.applied_versions[0])
    assert version.content == "Use `make release`." and version.reason == "clearer"


def test_edit_to_empty_keeps_the_card_with_an_error(client, world):
    proposal = make_proposal(world.store_a)
    body = (
        login(client, world.alice)
        .post(reverse("reviews:approve", args=[proposal.pk]), {"content": "  "}, **HTMX)
        .content.decode()
    )
    assert "The edited text is empty." in body and f'id="card-{proposal.pk}"' in body
    proposal.refresh_from_db()
    assert proposal.status == "pending"


@pytest.mark.parametrize(
    "bad, error",
    [
        ({"key": ""}, "The key is refused"),
        ({"key": "   "}, "The key is refused"),
        ({"key": "k" * 201}, "at most 200 characters"),
        ({"content": "   "}, "The edited text is empty."),
        ({"reason": "r" * 2001}, "The reason is too long"),
    ],
    ids=["empty-key", "blank-key", "long-key", "blank-text", "long-reason"],
)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_a_refused_edited_approval_shows_the_edit_card_again_as_typed(client, world, bad, error, htmx):
    """Whatever the edit form sent is shown again with the reason it was refused (htmx: the edit card in place of
    the card; without JavaScript: the proposal's page in edit mode), and nothing is decided or saved."""
    proposal = make_proposal(world.store_a, content="The dream's text.")
    typed = {"content": "The reviewer's text.", "key": "reviewers-key", "scope_agent": "deploy-bot"}
    typed.update(scope_task="release", reason="the reviewer's note")
    typed.update(bad)
    response = login(client, world.alice).post(
        reverse("reviews:approve", args=[proposal.pk]),
        {"edited": "1", "next": "/reviews/", **typed},
        **(HTMX if htmx else {}),
    )
    assert response.status_code == (200 if htmx else 400)
    html = response.content.decode()
    assert 'class="form-error" role="alert"' in html and error in html
    assert 'name="edited" value="1"' in html and f'id="card-{proposal.pk}"' in html  # the edit card
    for name, value in typed.items():
        shown = re.search(rf'name="{name}"[^>]*value="([^"]*)"', html) or re.search(
            rf'name="{name}"[^>]*>([^<]*)</textarea>', html
        )
        assert shown and html_module.unescape(shown.group(1)) == value, name
    if not htmx:
        assert "<html" in html and "Proposal #" in html
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING and proposal.content == "The dream's text."
    assert proposal.key_hint != "reviewers-key" and not MemoryEntry.objects.filter(key="reviewers-key").exists()


def test_bulk_approve_and_reject(client, world):
    a, b, c = (make_proposal(world.store_a, content=t) for t in ("A.", "B.", "C."))
    theirs = make_proposal(world.store_b, content="B team.")
    client = login(client, world.alice)

    # First the counts and a question; nothing is decided yet.
    asked = client.post(reverse("reviews:bulk"), {"ids": [a.pk, b.pk, theirs.pk], "action": "approve"})
    html = asked.content.decode()
    assert asked.status_code == 200 and "Approve 2 cards?" in html and "2 low risk" in html
    assert "1 not yours to decide" in html and 'name="confirmed" value="1"' in html
    assert set(Proposal.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {"pending"}

    response = client.post(
        reverse("reviews:bulk"), {"ids": [a.pk, b.pk, theirs.pk], "action": "approve", "confirmed": "1"}
    )
    assert response.status_code == 302
    assert set(Proposal.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {"applied"}
    theirs.refresh_from_db()
    assert theirs.status == "pending"  # another team's card is skipped, never decided
    assert "not yours to decide" in client.get(response.url).content.decode()

    # With htmx the redirect is followed with the htmx headers: the list partial comes back.
    body = client.post(
        reverse("reviews:bulk"),
        {"ids": [c.pk], "action": "reject", "reason": "noise", "confirmed": "1"},
        follow=True,
        **HTMX,
    )
    html = body.content.decode()
    assert 'id="queue-list"' in html and "<html" not in html and "Bulk rejection: 1 rejected." in html
    c.refresh_from_db()
    assert (c.status, c.decision_reason) == ("rejected", "noise")


def test_bulk_without_selection_says_so(client, world):
    response = login(client, world.alice).post(reverse("reviews:bulk"), {"action": "approve"}, follow=True)
    assert "Select at least one card first." in response.content.decode()


def test_proposal_page_shows_the_written_version(client, world):
    proposal = make_proposal(world.store_a)
    client = login(client, world.alice)
    client.post(reverse("reviews:approve", args=[proposal.pk]))
    html = client.get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    entry = MemoryEntry.objects.get(key="release-command")
    assert reverse("memory:entry", args=[entry.pk]) + "#version-1" in html
    assert "Applied" in html and "alice" in html


# --- policy ------------------------------------------------------------------------------------------------------


def test_policy_page_admin_saves_and_history_shows_old_and_new(client, world):
    client = login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    data = {
        "mode": "auto_low_risk",
        "min_sessions": 4,
        "min_share": 0.1,
        "min_confidence_auto": 0.7,
        "max_sessions": 500,
        "token_budget": 100000,
        "agents": "deploy-bot, triage-bot",
        "schedule_enabled": "on",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    response = client.post(url, data)
    assert response.status_code == 302
    change = PolicyChange.objects.get()
    assert change.changes["mode"] == ["manual", "auto_low_risk"]
    assert change.changes["agents"] == [[], ["deploy-bot", "triage-bot"]]
    html = client.get(url).content.decode()
    # People read the history: labels and descriptions, not field names and stored values.
    assert "<del>Everything waits for a reviewer</del>" in html and "<ins>Apply low-risk changes at once</ins>" in html
    assert "auto_low_risk" not in html.split("<h2>History</h2>")[1] and "adam" in html
    assert "<del>every agent</del>" in html and "<ins>deploy-bot, triage-bot</ins>" in html


def test_policy_form_rejects_bad_values(client, world):
    client = login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    response = client.post(
        url,
        {
            "mode": "autonomous",
            "min_sessions": 1,
            "min_share": 3,
            "min_confidence_auto": 0.5,
            "max_sessions": 1,
            "token_budget": 1,
            "schedule_minutes": 1,
            "analyzer": "__import__",
        },
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "A share between 0 and 1." in html and "At least 5 minutes" in html and "One of: rules" in html
    assert not PolicyChange.objects.exists()


POLICY = {
    "mode": "manual",
    "min_sessions": 3,
    "min_share": 0,
    "min_confidence_auto": 0.6,
    "max_sessions": 500,
    "token_budget": 1000,
    "schedule_minutes": 60,
    "analyzer": "rules",
}


def test_a_policy_that_would_read_no_session_is_refused_on_the_page_and_in_the_admin(client, world):
    """max_sessions caps what a dream reads: 0 would make every dream of the store read nothing. The rule is the
    model field's, so the page and the admin refuse it alike; 1 is the smallest budget."""
    from reviews.admin import PolicyAdminForm

    client = login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    response = client.post(url, {**POLICY, "max_sessions": 0})
    assert response.status_code == 200 and "At least 1 session" in response.content.decode()
    assert not PolicyChange.objects.exists()
    admin_form = PolicyAdminForm({**POLICY, "store": world.store_a.pk, "max_sessions": 0, "min_sources": 2})
    assert not admin_form.is_valid() and "max_sessions" in admin_form.errors
    assert client.post(url, {**POLICY, "max_sessions": 1}).status_code == 302
    assert world.store_a.policy.max_sessions == 1


def test_policy_page_read_only_for_reviewers(client, world):
    html = login(client, world.alice).get(reverse("reviews:policy", args=[world.store_a.pk])).content.decode()
    assert "read only" in html and "Save policy" not in html and "disabled" in html


# --- dream runs --------------------------------------------------------------------------------------------------


def test_run_detail_polls_while_running_and_stops_when_finished(client, world):
    run = DreamRun.objects.create(
        team=world.team_a, store=world.store_a, status=RunStatus.RUNNING, sessions_selected=10, sessions_analysed=3
    )
    client = login(client, world.victor)
    url = reverse("reviews:run", args=[run.pk])
    html = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in html and "3 of 10" in html

    run.status, run.sessions_analysed, run.tokens_input, run.cost_usd = RunStatus.SUCCEEDED, 10, 1234, "0.0123"
    run.isolated = [{"kind": "preference", "summary": "Once: prefers tabs"}]
    run.save()
    partial = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=f"run-{run.pk}").content.decode()
    assert "<html" not in partial and 'id="run-' in partial
    assert "every 2s" not in partial
    assert "10 of 10" in partial and "1234 in" in partial and "$0.0123" in partial and "prefers tabs" in partial


def test_runs_list_shows_my_team_only(client, world):
    mine = DreamRun.objects.create(team=world.team_a, store=world.store_a)
    theirs = DreamRun.objects.create(team=world.team_b, store=world.store_b)
    html = login(client, world.victor).get(reverse("reviews:runs")).content.decode()
    assert reverse("reviews:run", args=[mine.pk]) in html
    assert reverse("reviews:run", args=[theirs.pk]) not in html
    assert "Dream now" in html and 'action="/reviews/stores/' not in html  # a viewer has no buttons


def test_dream_now_and_dry_run_start_a_run(client, world):
    client = login(client, world.alice)
    response = client.post(reverse("reviews:dream", args=[world.store_a.pk]))
    run = DreamRun.objects.get()
    assert response.url == reverse("reviews:run", args=[run.pk])
    assert (run.trigger, run.dry_run, run.created_by) == ("page", False, world.alice)

    response = client.post(reverse("reviews:dream", args=[world.store_a.pk]), {"dry_run": "on"})
    dry = DreamRun.objects.exclude(pk=run.pk).get()
    assert dry.dry_run and response.url == reverse("reviews:run", args=[dry.pk])
    assert "dry run" in client.get(response.url).content.decode()


def test_dream_now_while_a_run_is_going_says_so(client, world):
    DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.RUNNING)
    response = login(client, world.alice).post(reverse("reviews:dream", args=[world.store_a.pk]), follow=True)
    assert "Not started" in response.content.decode()
    assert DreamRun.objects.count() == 1
