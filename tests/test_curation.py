# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""People curate memory directly: create, edit, archive, restore, pin and unpin on the memory pages, each a new
version with its author and reason, each refused when the entry changed since the page was loaded. Reviewers and
admins act; a viewer sees no action and is refused (403); another team's store or entry is a 404."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dreamweb.provenance import Author
from memory import services
from memory.models import EntryStatus, MemoryEntry, Operation
from tests.factories import make_entry
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> {{ secret }}'


def login(client, user):
    client.force_login(user)
    return client


def ops(entry) -> list[tuple]:
    return [
        (v.number, v.operation, v.author_user.username if v.author_user else None, v.reason)
        for v in entry.versions.select_related("author_user").order_by("number")
    ]


# ---- the service ------------------------------------------------------------------------------------------------


def test_pin_unpin_and_validity_are_versions_and_revert_brings_them_back(world):
    entry = make_entry(world.store_a, key="k", content="one")
    until = timezone.now() + timedelta(days=3)
    entry = services.update_entry(entry, base_version=1, author=Author.person(world.alice), valid_until=until)
    entry = services.set_pinned(entry, pinned=True, base_version=2, author=Author.person(world.alice))
    assert (entry.version, entry.pinned, entry.valid_until) == (3, True, until)
    v3 = entry.versions.get(number=3)
    assert (v3.operation, v3.pinned, v3.valid_until) == (Operation.PIN, True, until)
    entry = services.set_pinned(entry, pinned=False, base_version=3, author=Author.person(world.adam))
    assert entry.versions.get(number=4).operation == Operation.UNPIN
    with pytest.raises(services.StaleWrite):
        services.set_pinned(entry, pinned=True, base_version=3, author=Author.person(world.alice))

    entry = services.revert_entry(entry, to_number=1, base_version=4, author=Author.person(world.alice))
    assert (entry.pinned, entry.valid_until, entry.version) == (False, None, 5)
    entry = services.revert_entry(entry, to_number=3, base_version=5, author=Author.person(world.alice))
    assert (entry.pinned, entry.valid_until) == (True, until)


def test_a_validity_window_that_ends_before_it_starts_is_refused(world):
    now = timezone.now()
    with pytest.raises(services.InvalidChange):
        services.create_entry(
            world.store_a, key="k", content="x", author=Author.system(), valid_from=now, valid_until=now
        )
    entry = make_entry(world.store_a, key="k2", valid_from=now)
    with pytest.raises(services.InvalidChange):
        services.update_entry(entry, base_version=1, author=Author.system(), valid_until=now - timedelta(hours=1))
    entry.refresh_from_db()
    assert entry.version == 1


def test_an_archived_entry_cannot_be_pinned_or_edited_until_restored(world):
    entry = make_entry(world.store_a, key="k")
    entry = services.archive_entry(entry, base_version=1, author=Author.system())
    with pytest.raises(services.ArchivedEntry):
        services.set_pinned(entry, pinned=True, base_version=2, author=Author.system())
    entry = services.restore_entry(entry, base_version=2, author=Author.system())
    assert services.set_pinned(entry, pinned=True, base_version=3, author=Author.system()).pinned


# ---- the pages --------------------------------------------------------------------------------------------------


def test_create_edit_archive_restore_pin_unpin_each_a_version_with_author_and_reason(client, world):
    client = login(client, world.alice)
    created = client.post(
        reverse("memory:entry-create", args=[world.store_a.pk]),
        {
            "key": "deploy",
            "content": "Deploy with make ship.",
            "scope_agent": "bot",
            "tags": "ops, deploy",
            "reason": "from the retro",
        },
    )
    entry = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    assert created.status_code == 302 and created["Location"] == reverse("memory:entry", args=[entry.pk])
    assert (entry.scope_agent, entry.tags, entry.origin) == ("bot", ["ops", "deploy"], "human")

    until = (timezone.now() + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M")
    edit_url = reverse("memory:entry-edit", args=[entry.pk])
    assert 'name="base_version" value="1"' in client.get(edit_url).text
    client.post(
        edit_url,
        {
            "content": "Deploy with make release.",
            "scope_agent": "bot",
            "tags": "ops",
            "valid_until": until,
            "reason": "renamed target",
            "base_version": 1,
        },
    )
    for name, reason in (("pin", "keep"), ("unpin", ""), ("archive", "obsolete"), ("restore", "still used")):
        entry.refresh_from_db()
        response = client.post(
            reverse(f"memory:{name}", args=[entry.pk]), {"base_version": entry.version, "reason": reason}
        )
        assert response.status_code == 302
    entry.refresh_from_db()
    assert (entry.content, entry.tags, entry.status, entry.pinned, entry.version) == (
        "Deploy with make release.",
        ["ops"],
        EntryStatus.ACTIVE,
        False,
        6,
    )
    assert entry.valid_until is not None
    assert ops(entry) == [
        (1, "create", "alice", "from the retro"),
        (2, "update", "alice", "renamed target"),
        (3, "pin", "alice", "keep"),
        (4, "unpin", "alice", ""),
        (5, "archive", "alice", "obsolete"),
        (6, "restore", "alice", "still used"),
    ]
    page = client.get(reverse("memory:entry", args=[entry.pk])).text
    assert "renamed target" in page and "obsolete" in page


def test_an_edit_against_an_older_version_writes_nothing_and_keeps_the_persons_text(client, world):
    entry = make_entry(world.store_a, key="k", content="first")
    services.update_entry(entry, base_version=1, author=Author.person(world.adam), content="adam's text")
    response = login(client, world.alice).post(
        reverse("memory:entry-edit", args=[entry.pk]),
        {"content": "alice's text", "base_version": 1, "reason": "mine"},
    )
    assert response.status_code == 412
    assert "alice&#x27;s text" in response.text and "adam&#x27;s text" in response.text
    assert 'name="base_version" value="2"' in response.text  # a second save is prepared against what she saw
    entry.refresh_from_db()
    assert (entry.content, entry.version) == ("adam's text", 2)


def test_an_action_against_an_older_version_writes_nothing(client, world):
    entry = make_entry(world.store_a, key="k")
    services.update_entry(entry, base_version=1, author=Author.system(), tags=["changed"])
    for name in ("archive", "pin"):
        response = login(client, world.alice).post(
            reverse(f"memory:{name}", args=[entry.pk]), {"base_version": 1}, follow=True
        )
        assert "changed since you opened it" in response.text
    entry.refresh_from_db()
    assert (entry.version, entry.status, entry.pinned) == (2, "active", False)


def test_create_refuses_a_duplicate_key_with_the_form_again(client, world):
    make_entry(world.store_a, key="taken")
    response = login(client, world.adam).post(
        reverse("memory:entry-create", args=[world.store_a.pk]), {"key": "taken", "content": "x"}
    )
    assert response.status_code == 400 and "exists in this store already" in response.text
    assert MemoryEntry.objects.filter(store=world.store_a).count() == 1


def test_viewers_see_no_action_and_are_refused(client, world):
    entry = make_entry(world.store_a, key="k")
    client = login(client, world.victor)
    page = client.get(reverse("memory:entry", args=[entry.pk])).text
    listing = client.get(reverse("memory:entries", args=[world.store_a.pk])).text
    for url_name in ("entry-edit", "archive", "restore", "pin", "unpin", "revert"):
        assert reverse(f"memory:{url_name}", args=[entry.pk]) not in page
    assert reverse("memory:entry-create", args=[world.store_a.pk]) not in listing
    assert client.get(reverse("memory:entry-create", args=[world.store_a.pk])).status_code == 403
    assert client.get(reverse("memory:entry-edit", args=[entry.pk])).status_code == 403
    for url_name in ("archive", "restore", "pin", "unpin"):
        assert client.post(reverse(f"memory:{url_name}", args=[entry.pk]), {"base_version": 1}).status_code == 403
    entry.refresh_from_db()
    assert entry.version == 1


def test_reviewers_and_admins_see_the_actions(client, world):
    entry = make_entry(world.store_a, key="k")
    for user in (world.alice, world.adam):
        page = login(client, user).get(reverse("memory:entry", args=[entry.pk])).text
        assert reverse("memory:archive", args=[entry.pk]) in page and reverse("memory:pin", args=[entry.pk]) in page
        listing = client.get(reverse("memory:entries", args=[world.store_a.pk])).text
        assert reverse("memory:entry-create", args=[world.store_a.pk]) in listing


def test_another_teams_store_and_entry_are_not_found(client, world):
    entry = make_entry(world.store_a, key="k")
    client = login(client, world.bob)
    assert client.get(reverse("memory:entry-create", args=[world.store_a.pk])).status_code == 404
    assert (
        client.post(reverse("memory:entry-create", args=[world.store_a.pk]), {"key": "x", "content": "y"}).status_code
        == 404
    )
    assert client.get(reverse("memory:entry-edit", args=[entry.pk])).status_code == 404
    for url_name in ("entry-edit", "archive", "restore", "pin", "unpin"):
        assert client.post(reverse(f"memory:{url_name}", args=[entry.pk]), {"base_version": 1}).status_code == 404
    assert MemoryEntry.objects.filter(store=world.store_a).count() == 1 and entry.versions.count() == 1


def test_actions_need_post(client, world):
    entry = make_entry(world.store_a, key="k")
    client = login(client, world.alice)
    for url_name in ("archive", "restore", "pin", "unpin"):
        assert client.get(reverse(f"memory:{url_name}", args=[entry.pk])).status_code == 405


def test_untrusted_text_is_escaped_on_the_pages_and_in_the_form(client, world):
    entry = make_entry(world.store_a, key="k", content=HOSTILE, tags=["<b>t</b>"])
    services.archive_entry(
        entry, base_version=1, author=Author.system(), provenance=services.Provenance(reason=HOSTILE)
    )
    services.restore_entry(entry, base_version=2, author=Author.system())
    client = login(client, world.alice)
    for url in (
        reverse("memory:entry", args=[entry.pk]),
        reverse("memory:entry-edit", args=[entry.pk]),
        reverse("memory:entries", args=[world.store_a.pk]),
    ):
        html = client.get(url).text
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>t</b>" not in html


def test_expired_pinned_and_superseded_show_as_such_and_filter(client, world):
    past = timezone.now() - timedelta(days=1)
    old = make_entry(world.store_a, key="old", valid_from=past - timedelta(days=2), valid_until=past)
    pinned = make_entry(world.store_a, key="kept", pinned=True)
    make_entry(world.store_a, key="plain")
    client = login(client, world.victor)
    url = reverse("memory:entries", args=[world.store_a.pk])
    html = client.get(url).text
    assert "state-expired" in html and "badge-pinned" in html
    assert f"/memory/entries/{old.pk}/" in client.get(url, {"status": "expired"}).text
    assert f"/memory/entries/{pinned.pk}/" not in client.get(url, {"status": "expired"}).text
    assert f"/memory/entries/{old.pk}/" not in client.get(url, {"status": "pinned"}).text
    assert "expired: no longer served" in client.get(reverse("memory:entry", args=[old.pk])).text
