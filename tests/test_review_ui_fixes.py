# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""The fixes for the review UI probe's findings that a plain Django client can check (the browser's side is in
tests/test_browser_ui_fixes.py):

* a conflict's reason is one sentence everywhere it is shown (toast, card, decided list, API), old rows rewritten;
* hidden and direction-control characters in the text approval writes are shown as markers (card, edit preview,
  entry page, the stale edit form), escaped, with a warning on the card;
* a URL that is a page and, for htmx, a fragment answers a history restore (Back) with the whole page and varies on
  both headers.
"""

from __future__ import annotations

import importlib
from html import escape
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.urls import reverse

from dreamweb.hidden_chars import hidden_chars, reveal
from dreamweb.provenance import Author
from memory.services import update_entry
from reviews import services
from reviews.models import DreamRun, Proposal, ProposalStatus
from tests.api_support import Api, make_key
from tests.factories import make_entry, make_proposal, make_skill
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HTMX = {"HTTP_HX_REQUEST": "true"}
RESTORE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_HISTORY_RESTORE_REQUEST": "true"}
WHY = "entry 'deploy' changed since the dream read it (it is at version 2 now)"


# --- 1. a conflict's reason, one sentence ---------------------------------------------------------------------------


@pytest.fixture
def late(world):
    """An update whose entry a person changed after the dream read it."""
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Deploy by hand.")
    return proposal


def test_the_stored_reason_is_the_why_then_the_reviewers_reason():
    assert services.conflict_reason("", WHY) == WHY
    assert services.conflict_reason("ship it", WHY) == f"{WHY}; the reviewer's reason: ship it"


def test_a_late_approve_reads_cleanly_in_the_toast_the_card_the_decided_list_and_the_api(client, world, late):
    client.force_login(world.alice)
    answer = client.post(reverse("reviews:approve", args=[late.pk]), {"reason": "ship it"}, **HTMX).content.decode()
    assert escape(f"Not applied: {WHY}; the reviewer's reason: ship it.") in answer
    late.refresh_from_db()
    assert late.status == ProposalStatus.CONFLICT
    assert late.decision_reason == f"{WHY}; the reviewer's reason: ship it"

    pages = [
        client.get(reverse("reviews:proposal", args=[late.pk])).content.decode(),
        client.get(reverse("reviews:decided") + "?status=conflict").content.decode(),
        answer,
    ]
    for html in pages:
        assert "entry &#x27;deploy&#x27; changed since the dream read it" in html
        assert "(not applied" not in html.lower() and "not applied: not applied" not in html.lower()

    api = Api(make_key(world.team_a)).get(f"/api/v1/proposals/{late.pk}/")
    assert api.status_code == 200, api.content[:300]
    assert api.json()["decision_reason"] == f"{WHY}; the reviewer's reason: ship it"


def test_a_reason_ending_in_a_full_stop_gives_one_full_stop_in_the_toast(client, world, late):
    client.force_login(world.alice)
    answer = client.post(reverse("reviews:approve", args=[late.pk]), {"reason": "ship it."}, **HTMX).content.decode()
    assert "ship it.." not in answer and "ship it." in answer


def test_conflicts_stored_before_are_rewritten_as_one_sentence(world, late):
    migration = importlib.import_module("reviews.migrations.0021_conflict_reason_without_prefix")
    old = make_proposal(world.store_a, content="Old one.")
    legacy = {
        late.pk: f"(not applied: {WHY})",
        old.pk: f"ship it (not applied: {WHY})",
    }
    for pk, text in legacy.items():
        Proposal.objects.filter(pk=pk).update(status=ProposalStatus.CONFLICT, decision_reason=text)
    rejected = make_proposal(world.store_a, content="Left alone.")
    Proposal.objects.filter(pk=rejected.pk).update(
        status=ProposalStatus.REJECTED, decision_reason="noise (not applied: x)"
    )

    # The test already runs in every team's scope (all_teams); the migration's own set_config is for the owner.
    migration.forward(django_apps, SimpleNamespace(connection=SimpleNamespace(vendor="test")))

    reasons = dict(Proposal.objects.filter(pk__in=[late.pk, old.pk, rejected.pk]).values_list("pk", "decision_reason"))
    assert reasons == {
        late.pk: WHY,
        old.pk: f"{WHY}; the reviewer's reason: ship it",
        rejected.pk: "noise (not applied: x)",
    }


# --- 3. hidden characters in the text approval writes -------------------------------------------------------------

TRICK = "Deploy to \u202eevil\u202c host with pass\u200bword."


@pytest.mark.parametrize(
    ("char", "code"),
    [
        ("\u202a", "U+202A"),
        ("\u202e", "U+202E"),
        ("\u2066", "U+2066"),
        ("\u2069", "U+2069"),
        ("\u200e", "U+200E"),
        ("\u200f", "U+200F"),
        ("\u200b", "U+200B"),
        ("\u200c", "U+200C"),
        ("\u2060", "U+2060"),
        ("\ufeff", "U+FEFF"),
        ("\u00ad", "U+00AD"),  # soft hyphen: another format character (Cf)
        ("\U000e0041", "U+E0041"),  # a tag character
    ],
)
def test_every_format_character_is_shown_as_its_marker(char, code):
    shown = str(reveal(f"a{char}b"))
    assert f"⟨{code}⟩" in shown and char not in shown
    assert hidden_chars(f"a{char}b") == [code]


def test_reveal_escapes_the_text_around_the_markers():
    shown = str(reveal("<img src=x onerror=alert(1)>\u202e<b>\"'&"))
    assert "<img" not in shown and "<b>" not in shown
    assert shown.startswith('&lt;img src=x onerror=alert(1)&gt;<span class="hidden-char"')
    assert shown.endswith("&lt;b&gt;&quot;&#x27;&amp;")
    assert str(reveal("plain & <simple>")) == "plain &amp; &lt;simple&gt;"


def test_an_emoji_joined_by_a_zero_width_joiner_is_left_whole():
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert str(reveal(family)) == family and hidden_chars(family) == []
    assert hidden_chars("a\u200db") == ["U+200D"]  # between letters it hides, and is shown


def test_the_card_marks_the_hidden_characters_and_warns(client, world):
    proposal = make_proposal(world.store_a, content=TRICK, key_hint="deploy-target")
    client.force_login(world.alice)
    for url in (reverse("reviews:queue"), reverse("reviews:proposal", args=[proposal.pk])):
        html = client.get(url).content.decode()
        assert "⟨U+202E⟩" in html and "⟨U+202C⟩" in html and "⟨U+200B⟩" in html, url
        assert "\u202e" not in html and "\u200b" not in html, url
        assert "data-hidden-chars" in html and "Hidden characters" in html, url


def test_a_plain_card_has_no_warning(client, world):
    make_proposal(world.store_a, content="Deploy with make release.", key_hint="deploy")
    client.force_login(world.alice)
    assert "data-hidden-chars" not in client.get(reverse("reviews:queue")).content.decode()


def test_the_update_diff_and_the_edit_preview_mark_them(client, world):
    make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    proposal = make_proposal(
        world.store_a, operation="update", targets=["deploy"], content="Deploy with make rel\u202eease."
    )
    client.force_login(world.alice)
    assert "⟨U+202E⟩" in client.get(reverse("reviews:queue")).content.decode()
    preview = client.post(
        reverse("reviews:preview", args=[proposal.pk]), {"content": "Deploy with\u2066 make\u2069 it."}, **HTMX
    ).content.decode()
    assert "⟨U+2066⟩" in preview and "⟨U+2069⟩" in preview and "data-hidden-chars" in preview


def test_the_entry_page_and_the_stale_edit_form_mark_them(client, world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content=TRICK)
    client.force_login(world.alice)
    html = client.get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert html.count("⟨U+202E⟩") >= 3  # the current text, the diff v1 → v2, v2's text
    assert "\u202e" not in html.split("<title>")[1].split("</head>")[1]  # the page's body (the title is plain text)

    stale = client.post(
        reverse("memory:entry-edit", args=[entry.pk]),
        {"content": "Mine.", "reason": "", "base_version": 1, "scope_agent": "", "scope_task": "", "tags": ""},
    ).content.decode()
    assert "⟨U+202E⟩" in stale.split('class="entry-text current-text"')[1].split("</pre>")[0]


# --- 4. history restore: the whole page, and Vary on both headers ---------------------------------------------------


def fragment_urls(world) -> list[str]:
    """Every URL that answers htmx with a fragment and is also a whole page."""
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Deploy by hand.")
    proposal = make_proposal(world.store_a, content="A fact.")
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a)
    make_skill(world.team_a)
    return [
        reverse("reviews:queue") + "?risk=high",
        reverse("reviews:proposal", args=[proposal.pk]),
        reverse("reviews:edit", args=[proposal.pk]),
        reverse("reviews:budget", args=[proposal.pk]),
        reverse("reviews:run", args=[run.pk]),
        reverse("reviews:policy", args=[world.store_a.pk]) + "?preview=1&mode=manual",
        reverse("reviews:entry-effectiveness", args=[entry.pk]),
        reverse("memory:entries", args=[world.store_a.pk]) + "?q=deploy",
        reverse("memory:entry", args=[entry.pk]) + "?a=1&b=2",
        reverse("skills_registry:list") + "?q=release",
    ]


def test_a_history_restore_gets_the_whole_page_where_htmx_gets_a_fragment(client, world):
    urls = fragment_urls(world)
    client.force_login(world.adam)
    for url in urls:
        page = client.get(url, **RESTORE)
        assert page.status_code == 200, url
        assert 'class="mainnav"' in page.content.decode(), url
        vary = {v.strip().lower() for v in page.get("Vary", "").split(",")}
        assert {"hx-request", "hx-history-restore-request"} <= vary, (url, page.get("Vary"))


def test_htmx_still_gets_its_fragment_and_the_same_vary(client, world):
    urls = fragment_urls(world)
    client.force_login(world.adam)
    fragments = 0
    for url in urls:
        headers = {**HTMX, "HTTP_HX_TARGET": "version-diff"} if "a=1" in url else HTMX
        answer = client.get(url, **headers)
        assert answer.status_code == 200, url
        vary = {v.strip().lower() for v in answer.get("Vary", "").split(",")}
        assert {"hx-request", "hx-history-restore-request"} <= vary, (url, answer.get("Vary"))
        fragments += 'class="mainnav"' not in answer.content.decode()
    assert fragments >= 8  # the queue, the lists, the diff, the previews... answer htmx with their part only
