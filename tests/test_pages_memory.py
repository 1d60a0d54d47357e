# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""The memory browser and the session viewer: stores, entries (search, scope), history with provenance, diffs
between versions, revert naming the version it was prepared against, and transcripts that are always text."""

from __future__ import annotations

import html as html_module
import re
from datetime import UTC

import pytest
from django.urls import reverse

from dreamweb.provenance import Author
from memory.models import ContextServe, MemoryEntry
from memory.services import archive_entry, update_entry
from reviews import services
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def login(client, user):
    client.force_login(user)
    return client


def entry_links(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'href="/memory/entries/(\d+)/"', html)]


def test_store_list_shows_my_team_stores_with_counts(client, world):
    make_entry(world.store_a, key="one")
    archived = make_entry(world.store_a, key="two")
    archive_entry(archived, base_hash=archived.content_hash, author=Author.system())
    html = login(client, world.victor).get(reverse("memory:stores")).content.decode()
    assert reverse("memory:entries", args=[world.store_a.pk]) in html
    assert reverse("memory:entries", args=[world.store_b.pk]) not in html
    assert "<dt>Active entries</dt><dd>1</dd>" in html and "<dt>Archived</dt><dd>1</dd>" in html


def test_entries_search_scope_and_status(client, world):
    deploy = make_entry(world.store_a, key="deploy", content="Use make release.")
    tabs = make_entry(world.store_a, key="style", content="Tabs, not spaces.", scope_agent="fmt-bot")
    old = make_entry(world.store_a, key="old", content="Obsolete release note.")
    archive_entry(old, base_hash=old.content_hash, author=Author.system())
    client = login(client, world.victor)
    url = reverse("memory:entries", args=[world.store_a.pk])
    assert sorted(entry_links(client.get(url).content.decode())) == sorted([deploy.pk, tabs.pk])
    assert entry_links(client.get(url, {"q": "release"}).content.decode()) == [deploy.pk]
    assert entry_links(client.get(url, {"scope": "fmt-bot"}).content.decode()) == [tabs.pk]
    assert entry_links(client.get(url, {"scope": "_none"}).content.decode()) == [deploy.pk]
    assert entry_links(client.get(url, {"status": "archived"}).content.decode()) == [old.pk]
    for i in range(60):
        make_entry(world.store_a, key=f"bulk-{i:02d}", content="a&b release")
    paged = client.get(url, {"q": "a&b"}).content.decode()
    assert "?q=a%26b&amp;page=2" in paged
    partial = client.get(url, {"q": "tabs"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and entry_links(partial) == [tabs.pk]


def test_entry_history_shows_who_what_when_why_sessions_and_proposal(client, world):
    session = SessionFactory(team=world.team_a, external_id="sess-prov")
    proposal = make_proposal(world.store_a, sessions=[session], content="Use make release.")
    services.approve(proposal, user=world.alice, reason="we all saw it")
    entry = MemoryEntry.objects.get(store=world.store_a)
    update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="Use `make release`.")

    html = login(client, world.victor).get(reverse("memory:entry", args=[entry.pk])).content.decode()

    assert 'id="version-1"' in html and 'id="version-2"' in html
    assert "alice" in html and "adam" in html
    assert reverse("reviews:proposal", args=[proposal.pk]) in html
    assert "we all saw it" in html
    assert reverse("memory:session", args=[session.pk]) in html and "sess-prov" in html
    # The default comparison is the previous version against the latest.
    assert "<span>Use </span><ins>`</ins><span>make release</span><ins>`</ins><span>.</span>" in html


def test_diff_between_any_two_versions(client, world):
    entry = make_entry(world.store_a, key="k", content="alpha beta")
    entry = update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="alpha gamma")
    update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="delta gamma")
    client = login(client, world.victor)
    url = reverse("memory:entry", args=[entry.pk])
    body = client.get(url, {"a": 1, "b": 3}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="version-diff").content.decode()
    assert "<html" not in body
    assert "<del>alpha</del><ins>delta</ins><span> </span><del>beta</del><ins>gamma</ins>" in body
    body = client.get(url, {"a": 2, "b": 3}).content.decode()
    assert "<del>alpha</del><ins>delta</ins><span> gamma</span>" in body


def test_revert_is_a_new_version_and_needs_the_current_version(client, world):
    entry = make_entry(world.store_a, key="k", content="first")
    entry = update_entry(entry, base_version=1, author=Author.system(), content="second")
    client = login(client, world.alice)
    url = reverse("memory:revert", args=[entry.pk])
    assert f'name="base_version" value="{entry.version}"' in client.get(reverse("memory:entry", args=[entry.pk])).text

    stale = client.post(url, {"number": 1, "base_version": 1}, follow=True)
    assert "Not reverted" in stale.content.decode()
    entry.refresh_from_db()
    assert (entry.content, entry.version) == ("second", 2)

    ok = client.post(url, {"number": 1, "base_version": 2, "reason": "bad edit"}, follow=True)
    assert "saved as version 3" in ok.content.decode()
    entry.refresh_from_db()
    assert (entry.content, entry.version) == ("first", 3)
    v3 = entry.versions.get(number=3)
    assert (v3.operation, v3.author_user, v3.reason) == ("revert", world.alice, "bad edit")

    missing = client.post(url, {"number": 42, "base_version": 3}, follow=True)
    assert "There is no version 42." in missing.content.decode()


def test_revert_refuses_a_page_opened_before_a_change_of_tags_or_scope(client, world):
    """The content is the same as when the page was opened, but the tags changed meanwhile: nothing is reverted."""
    entry = make_entry(world.store_a, key="k", content="first")
    entry = update_entry(entry, base_version=1, author=Author.system(), content="second")
    seen = entry.version
    update_entry(entry, base_version=seen, author=Author.system(), tags=["kept"])
    client = login(client, world.alice)
    stale = client.post(reverse("memory:revert", args=[entry.pk]), {"number": 1, "base_version": seen}, follow=True)
    assert "Not reverted" in stale.text
    entry.refresh_from_db()
    assert (entry.content, entry.tags, entry.version) == ("second", ["kept"], 3)


def test_revert_of_an_archived_entry_to_an_archived_state_is_refused_with_a_message(client, world):
    entry = make_entry(world.store_a, key="k", content="first")
    archive_entry(entry, base_version=1, author=Author.system())
    client = login(client, world.alice)
    url = reverse("memory:revert", args=[entry.pk])
    refused = client.post(url, {"number": 2, "base_version": 2}, follow=True)
    assert refused.status_code == 200 and "is archived too" in refused.text
    restored = client.post(url, {"number": 1, "base_version": 2}, follow=True)
    assert "saved as version 3" in restored.text
    entry.refresh_from_db()
    assert (entry.status, entry.version) == ("active", 3)


HOSTILE = [
    {"type": "message", "role": "user", "content": "<script>window.pwned=1</script> please deploy"},
    {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "<img src=x onerror=alert(1)>"}},
    {
        "type": "tool_result",
        "call_id": "c1",
        "content": "<div hx-get='/marker' hx-trigger='load'>x</div>",
        "is_error": True,
        "exit_code": 2,
    },
    {"type": "memory_write", "content": "Remember: {{ secret }} and {% now 'Y' %}"},
    {"type": "message", "role": "assistant", "content": "Fixed it with make release after the failure."},
]


def test_session_viewer_escapes_everything_and_marks_events(client, world):
    session = SessionFactory(team=world.team_a, external_id="hostile", events=HOSTILE, event_count=len(HOSTILE))
    client = login(client, world.victor)
    html = client.get(
        reverse("memory:session", args=[session.pk]), {"event": 4, "mark": "make release"}
    ).content.decode()

    assert "<script>window.pwned" not in html and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    assert "<img src=x" not in html and "<div hx-get" not in html
    assert "&lt;div hx-get=&#x27;/marker&#x27;" in html
    assert "{{ secret }}" in html and "{% now &#x27;Y&#x27; %}" in html  # template syntax is text, not evaluated
    assert re.search(r'<ol class="events" hx-disable>', html)
    for index in range(5):
        assert f'id="event-{index}"' in html
    assert "failed result" in html and "exit 2" in html and 'class="event event-tool_result failed' in html
    assert "in-band note" in html
    assert 'Fixed it with <mark class="evidence-mark">make release</mark> after the failure.' in html


def test_session_viewer_lists_the_memory_served_to_it(client, world):
    entry = make_entry(world.store_a, key="served-key")
    session = SessionFactory(team=world.team_a, external_id="served-session")
    ContextServe.objects.create(
        team=world.team_a,
        store=world.store_a,
        agent="deploy-bot",
        session_external_id="served-session",
        entries=[{"entry_id": entry.pk, "key": "served-key", "version": 1, "content_hash": entry.content_hash}],
        tokens=12,
    )
    html = login(client, world.victor).get(reverse("memory:session", args=[session.pk])).content.decode()
    assert "Memory served to this session" in html
    assert reverse("memory:entry", args=[entry.pk]) + "#version-1" in html


def test_session_list_is_my_team_only(client, world):
    mine = SessionFactory(team=world.team_a, external_id="mine-1")
    theirs = SessionFactory(team=world.team_b, external_id="theirs-1")
    html = login(client, world.victor).get(reverse("memory:sessions")).content.decode()
    assert reverse("memory:session", args=[mine.pk]) in html
    assert reverse("memory:session", args=[theirs.pk]) not in html


def test_a_session_without_a_start_time_is_listed_among_the_newest_by_its_arrival(client, world):
    """Sessions sort by their start, else their arrival: one that says no start time is on the first page when it
    arrived last, not after every other session."""
    from datetime import timedelta

    from django.utils import timezone

    from memory.views.sessions import PER_PAGE

    now = timezone.now()
    for i in range(PER_PAGE + 5):
        SessionFactory(team=world.team_a, external_id=f"dated-{i:03d}", started_at=now - timedelta(hours=1, minutes=i))
    undated = SessionFactory(team=world.team_a, external_id="undated-1", started_at=None)
    old = SessionFactory(team=world.team_a, external_id="undated-old", started_at=None)
    old.ingested_at = now - timedelta(days=30)
    old.save(update_fields=["ingested_at"])

    html = login(client, world.victor).get(reverse("memory:sessions")).content.decode()
    assert reverse("memory:session", args=[undated.pk]) in html
    assert html.index("undated-1") < html.index("dated-000")  # it arrived after every dated session started
    assert reverse("memory:session", args=[old.pk]) not in html  # an old arrival stays on a later page


def test_revert_to_a_text_past_todays_size_limit_is_refused_with_a_message(client, world, settings):
    entry = make_entry(world.store_a, key="k", content="x" * 200)
    entry = update_entry(entry, base_version=1, author=Author.system(), content="short")
    settings.DREAMWEB_MAX_ENTRY_BYTES = 100
    client = login(client, world.alice)
    r = client.post(reverse("memory:revert", args=[entry.pk]), {"number": 1, "base_version": 2}, follow=True)
    # said for a person: the version's size, the limit and what to do instead, not the setting's name
    assert r.status_code == 200 and "Not reverted: version 1 is 200 bytes, over the 100-byte limit" in r.text
    assert "Edit the entry to a shorter text" in r.text and "DREAMWEB_" not in r.text
    entry.refresh_from_db()
    assert (entry.content, entry.version) == ("short", 2)


def _edit_form(client, entry) -> dict:
    """What a browser sends back from the entry's edit form untouched (a textarea's line ends as CRLF)."""
    html = client.get(reverse("memory:entry-edit", args=[entry.pk])).content.decode()
    data = {}
    for tag in re.findall(r"<input\b[^>]*>", html):
        name, value = re.search(r'name="([^"]+)"', tag), re.search(r'value="([^"]*)"', tag)
        if name and name.group(1) != "csrfmiddlewaretoken":
            data[name.group(1)] = html_module.unescape(value.group(1)) if value else ""
    content = re.search(r'<textarea[^>]*name="content"[^>]*>(.*?)</textarea>', html, re.S).group(1)
    data["content"] = html_module.unescape(content).lstrip("\r\n").replace("\n", "\r\n")
    return data


def test_an_edit_saved_unchanged_writes_no_version_and_says_so(client, world):
    """Multi-line text (sent back with CRLF), a validity end with seconds (the form shows minutes), tags and scope:
    saved untouched, nothing is written; the person is told and lands on the entry's page."""
    from datetime import datetime

    entry = make_entry(world.store_a, key="deploy", content="Deploy with:\n\n  make release\n")
    entry = update_entry(
        entry,
        base_version=1,
        author=Author.system(),
        tags=["ops", "release"],
        scope_agent="deploy-bot",
        valid_until=datetime(2031, 5, 4, 3, 2, 1, 123, tzinfo=UTC),
    )
    login(client, world.alice)
    data = {**_edit_form(client, entry), "reason": "looked at it"}
    response = client.post(reverse("memory:entry-edit", args=[entry.pk]), data, follow=True)
    assert response.redirect_chain[-1][0] == reverse("memory:entry", args=[entry.pk])
    assert "Nothing changed: deploy stays at version 2." in response.content.decode()
    entry.refresh_from_db()
    assert entry.version == entry.versions.count() == 2 and entry.valid_until.second == 1
    # One real change is one version, and only that field changes.
    data["tags"] = "ops"
    client.post(reverse("memory:entry-edit", args=[entry.pk]), data)
    entry.refresh_from_db()
    assert (entry.version, entry.tags, entry.content) == (3, ["ops"], "Deploy with:\n\n  make release\n")
    assert entry.valid_until.second == 1
