# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The ETag names the entry's version, not its content: a stale write of any field is refused (412), an old ETag
never becomes valid again (ABA), archived entries refuse writes, and every tag of an If-Match list counts."""

from __future__ import annotations

import pytest

from memory.models import EntryStatus, MemoryEntry, MemoryVersion
from memory.services import Author, archive_entry, update_entry
from tests.api_support import Api, fast_passwords, keys  # noqa: F401 - fixtures
from tests.factories import make_entry

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

URL = "/api/v1/stores/eng/entries/deploy-command/"

# One write of each field kind a client can change, as (method, body).
WRITES = {
    "content (PUT)": ("PUT", {"content": "Deploy with `make ship`."}),
    "content (PATCH)": ("PATCH", {"content": "Deploy with `make ship`."}),
    "tags": ("PATCH", {"tags": ["deploy", "stale"]}),
    "scope agent": ("PATCH", {"scope": {"agent": "other-bot"}}),
    "scope task": ("PATCH", {"scope": {"task": "hotfix"}}),
    "archive": ("DELETE", None),
}


@pytest.fixture
def entry(world):
    world.store_a.agents_may_write = True
    world.store_a.save()
    return make_entry(world.store_a)


def _send(api: Api, method: str, body, etag: str | None):
    headers = {"If-Match": etag} if etag is not None else {}
    if method == "DELETE":
        return api.delete(URL, headers=headers)
    return api.request(method, URL, body, headers=headers)


def test_etag_names_the_version_and_changes_with_every_write(entry, keys):
    api = Api(keys.full)
    first = api.get(URL)
    assert first.status_code == 200 and first["ETag"] == first.json()["etag"]
    # A tags-only write leaves the content (and its hash) as it was, yet the ETag moves on.
    r = api.patch(URL, {"tags": ["deploy"]}, headers={"If-Match": first["ETag"]})
    assert r.status_code == 200, r.json()
    assert r.json()["content_hash"] == first.json()["content_hash"]
    assert r["ETag"] != first["ETag"] and r["ETag"] == r.json()["etag"] == api.get(URL)["ETag"]


def test_a_put_or_patch_that_changes_nothing_is_200_with_no_new_version_and_the_same_etag(entry, keys):
    """Like a DELETE of an archived entry: nothing to do is no write. A stale ETag is refused all the same."""
    api = Api(keys.full)
    first = api.get(URL)
    body = first.json()
    for method, data in [
        ("PUT", {"content": body["content"]}),
        ("PATCH", {"content": body["content"]}),
        ("PATCH", {"tags": body["tags"], "scope": body["scope"]}),
        ("PATCH", {}),
    ]:
        r = api.request(method, URL, data, headers={"If-Match": first["ETag"]})
        assert r.status_code == 200 and r["ETag"] == first["ETag"] and r.json() == body, (method, data)
    assert MemoryVersion.objects.filter(entry=entry).count() == 1
    moved = api.patch(URL, {"tags": ["deploy"]}, headers={"If-Match": first["ETag"]})
    stale = api.put(URL, {"content": body["content"]}, headers={"If-Match": first["ETag"]})
    assert stale.status_code == 412 and stale.json()["current_etag"] == moved["ETag"]


@pytest.mark.parametrize("kind", list(WRITES))
@pytest.mark.parametrize("winner", ["tags", "scope agent", "content (PATCH)"])
def test_a_stale_write_of_any_field_is_refused(entry, keys, kind, winner):
    """Two writers read the same ETag; the first writes one field, the second (any field) gets 412."""
    api = Api(keys.full)
    etag = api.get(URL)["ETag"]
    method, body = WRITES[winner]
    won = _send(api, method, body, etag)
    assert won.status_code == 200, won.json()
    method, body = WRITES[kind]
    r = _send(api, method, body, etag)
    assert r.status_code == 412, r.json()
    assert r.json()["code"] == "stale" and r.json()["current_etag"] == won["ETag"] == r["ETag"]
    entry.refresh_from_db()
    assert entry.version == 2 and MemoryVersion.objects.filter(entry=entry).count() == 2


def test_an_old_etag_never_becomes_valid_again(entry, keys):
    """X -> Y -> X: the content (and its hash) is X again, but the ETag read at the first X is still stale."""
    api = Api(keys.full)
    x = api.get(URL)
    y = api.put(URL, {"content": "Deploy with `make ship`."}, headers={"If-Match": x["ETag"]})
    assert y.status_code == 200
    back = api.put(URL, {"content": x.json()["content"]}, headers={"If-Match": y["ETag"]})
    assert back.status_code == 200 and back.json()["content_hash"] == x.json()["content_hash"]
    for etag in (x["ETag"], y["ETag"]):
        r = api.patch(URL, {"tags": ["aba"]}, headers={"If-Match": etag})
        assert r.status_code == 412 and r.json()["current_etag"] == back["ETag"]
    entry.refresh_from_db()
    assert entry.version == 3 and entry.tags == []


def test_an_etag_of_another_entry_does_not_match(entry, keys, world):
    other = make_entry(world.store_a, key="other")
    api = Api(keys.full)
    foreign = api.get(f"/api/v1/stores/eng/entries/{other.key}/")["ETag"]
    assert api.patch(URL, {"tags": ["x"]}, headers={"If-Match": foreign}).status_code == 412


def test_an_entry_recreated_under_the_same_key_does_not_take_the_old_etag(entry, keys, world):
    api = Api(keys.full)
    old = api.get(URL)["ETag"]
    MemoryEntry.objects.filter(pk=entry.pk).delete()
    make_entry(world.store_a)  # same store, same key, version 1 again
    assert api.patch(URL, {"tags": ["x"]}, headers={"If-Match": old}).status_code == 412


@pytest.mark.parametrize("kind", [k for k in WRITES if k != "archive"])
def test_archived_entries_refuse_writes_with_the_pre_archive_etag(entry, keys, kind):
    api = Api(keys.full)
    before = api.get(URL)["ETag"]
    archived = api.delete(URL, headers={"If-Match": before})
    assert archived.status_code == 200 and archived.json()["status"] == "archived"
    method, body = WRITES[kind]
    r = _send(api, method, body, before)
    assert r.status_code == 412 and r.json()["current_etag"] == archived["ETag"]
    entry.refresh_from_db()
    assert entry.status == EntryStatus.ARCHIVED and entry.version == 2


@pytest.mark.parametrize("kind", [k for k in WRITES if k != "archive"])
def test_archived_entries_refuse_writes_with_their_current_etag(entry, keys, kind):
    api = Api(keys.full)
    archived = api.delete(URL, headers={"If-Match": api.get(URL)["ETag"]})
    method, body = WRITES[kind]
    r = _send(api, method, body, archived["ETag"])
    assert r.status_code == 409, r.json()
    assert r.json()["code"] == "archived" and "archived" in r.json()["detail"]
    entry.refresh_from_db()
    assert entry.status == EntryStatus.ARCHIVED and entry.version == 2 and entry.tags == []


def test_delete_of_an_archived_entry_checks_the_etag_too(entry, keys):
    api = Api(keys.full)
    before = api.get(URL)["ETag"]
    archived = api.delete(URL, headers={"If-Match": before})
    # Current ETag: nothing to do, the entry stays as it is (no new version).
    again = api.delete(URL, headers={"If-Match": archived["ETag"]})
    assert again.status_code == 200 and again["ETag"] == archived["ETag"] and again.json()["status"] == "archived"
    # A stale ETag: 412 like any other write, even though the entry is already archived.
    stale = api.delete(URL, headers={"If-Match": before})
    assert stale.status_code == 412 and stale.json()["current_etag"] == archived["ETag"]
    assert api.delete(URL).status_code == 428
    entry.refresh_from_db()
    assert entry.version == 2


@pytest.mark.parametrize(
    "order",
    [("stale", "current"), ("current", "stale"), ("stale", "current", "stale"), ("current",)],
)
def test_every_etag_of_an_if_match_list_counts(entry, keys, order):
    api = Api(keys.full)
    stale = api.get(URL)["ETag"]
    current = api.patch(URL, {"tags": ["a"]}, headers={"If-Match": stale})["ETag"]
    header = ", ".join(current if name == "current" else stale for name in order)
    r = api.patch(URL, {"tags": ["b"]}, headers={"If-Match": header})
    assert r.status_code == 200, r.json()
    assert r.json()["tags"] == ["b"]


@pytest.mark.parametrize("header", ["{stale}, {stale}", '"garbage", {stale}', 'W/"x"', '"", {stale}'])
def test_an_if_match_list_without_the_current_etag_is_stale(entry, keys, header):
    api = Api(keys.full)
    stale = api.get(URL)["ETag"]
    api.patch(URL, {"tags": ["a"]}, headers={"If-Match": stale})
    r = api.patch(URL, {"tags": ["b"]}, headers={"If-Match": header.format(stale=stale)})
    assert r.status_code == 412, r.json()


def test_a_weak_etag_never_satisfies_if_match(entry, keys):
    """If-Match compares strongly (RFC 9110 13.1.1): W/"<current>" is not a match."""
    api = Api(keys.full)
    current = api.get(URL)["ETag"]
    assert api.patch(URL, {"tags": ["x"]}, headers={"If-Match": f"W/{current}"}).status_code == 412
    assert api.patch(URL, {"tags": ["x"]}, headers={"If-Match": current}).status_code == 200


def test_if_none_match_list(entry, keys):
    api = Api(keys.reader)
    current = api.get(URL)["ETag"]
    assert api.get(URL, headers={"If-None-Match": f'"x", {current}'}).status_code == 304
    assert api.get(URL, headers={"If-None-Match": f"W/{current}"}).status_code == 304  # weak comparison here
    assert api.get(URL, headers={"If-None-Match": "*"}).status_code == 304
    assert api.get(URL, headers={"If-None-Match": '"x"'}).status_code == 200


# --- the service underneath: the same rule for every caller (pages, API, proposals) --------------------------------


def test_service_refuses_a_stale_version(entry):
    update_entry(entry, base_version=1, author=Author.system(), tags=["a"])
    with pytest.raises(Exception) as caught:
        update_entry(entry, base_version=1, author=Author.system(), scope_agent="x")
    assert type(caught.value).__name__ == "StaleWrite"
    entry.refresh_from_db()
    assert entry.version == 2 and entry.scope_agent is None


def test_service_refuses_writes_to_an_archived_entry_but_restores_it(entry):
    from memory.services import ArchivedEntry, restore_entry, revert_entry

    archived = archive_entry(entry, base_version=1, author=Author.system())
    for change in ({"content": "x"}, {"tags": ["x"]}, {"scope_agent": "x"}, {"scope_task": "x"}):
        with pytest.raises(ArchivedEntry):
            update_entry(entry, base_version=archived.version, author=Author.system(), **change)
    with pytest.raises(ArchivedEntry):
        archive_entry(entry, base_version=archived.version, author=Author.system())
    # Reverting to an archived state is a write to an archived entry too.
    with pytest.raises(ArchivedEntry):
        revert_entry(entry, to_number=2, base_version=archived.version, author=Author.system())
    restored = restore_entry(entry, base_version=archived.version, author=Author.system())
    assert restored.status == EntryStatus.ACTIVE and restored.version == 3
    # Reverting an archived entry to an active version brings it back, as a new version.
    archive_entry(entry, base_version=3, author=Author.system())
    reverted = revert_entry(entry, to_number=1, base_version=4, author=Author.system())
    assert reverted.status == EntryStatus.ACTIVE and reverted.version == 5


@pytest.mark.parametrize("spell", ['"{pk}.0{v}"', '"0{pk}.{v}"', '"00{pk}.{v}"', '"{pk}.00{v}"', '"{pk}.{v}0"'])
def test_only_the_etag_as_written_matches_not_another_spelling_of_its_numbers(entry, keys, spell):
    """Strong comparison is of the characters: `"12.01"` names no version, though 01 is 1 as a number."""
    api = Api(keys.full)
    current = api.get(URL)["ETag"]
    pk, v = current.strip('"').split(".")
    r = api.patch(URL, {"tags": ["x"]}, headers={"If-Match": spell.format(pk=pk, v=v)})
    assert r.status_code == 412, r.json()
    assert api.patch(URL, {"tags": ["x"]}, headers={"If-Match": current}).status_code == 200
