"""The memory write service: every write is a version, stale writes are refused and change nothing."""

import threading

import pytest
from django.db import connection, connections

from dreamweb import rls
from dreamweb.provenance import content_hash
from memory.models import MemoryEntry, MemoryVersion, Operation
from memory.services import (
    Author,
    EntryExists,
    InvalidChange,
    Provenance,
    StaleWrite,
    apply_change,
    create_entry,
    revert_entry,
    update_entry,
)
from tests.conftest import is_postgres
from tests.factories import SessionFactory, StoreFactory, TeamFactory, make_entry

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@pytest.fixture
def store():
    return StoreFactory(slug="eng")


def versions(entry) -> list[tuple]:
    return list(
        MemoryVersion.objects.filter(entry=entry)
        .order_by("number")
        .values_list("number", "operation", "content", "previous_hash")
    )


def test_create_records_version_one_with_provenance(store, world):
    session = SessionFactory(team=store.team)
    entry = create_entry(
        store,
        key="deploy",
        content="Deploy with make release.",
        author=Author.person(world.alice),
        scope_agent="deploy-bot",
        tags=["deploy"],
        provenance=Provenance(session=session, reason="seen twice", evidence=[{"event_index": 3}]),
    )
    assert entry.version == 1 and entry.content_hash == content_hash("Deploy with make release.")
    assert entry.team_id == store.team_id and entry.origin == "human"
    (v,) = MemoryVersion.objects.filter(entry=entry)
    assert (v.number, v.operation, v.previous_hash) == (1, Operation.CREATE, "")
    assert (v.author_kind, v.author_user, v.session, v.reason) == ("user", world.alice, session, "seen twice")
    assert v.evidence == [{"event_index": 3}] and v.scope_agent == "deploy-bot" and v.tags == ["deploy"]


def test_create_refuses_a_taken_key_and_bad_input(store):
    make_entry(store, key="k")
    with pytest.raises(EntryExists):
        make_entry(store, key="k", content="other")
    with pytest.raises(InvalidChange):
        make_entry(store, key="   ")
    with pytest.raises(InvalidChange):
        make_entry(store, key="empty", content="  ")
    assert MemoryEntry.objects.filter(store=store).count() == 1


def test_update_with_current_hash_writes_a_new_version(store):
    entry = make_entry(store, content="old")
    updated = update_entry(entry, base_hash=content_hash("old"), author=Author.system(), content="new")
    assert updated.version == 2 and updated.content == "new"
    assert versions(entry) == [(1, "create", "old", ""), (2, "update", "new", content_hash("old"))]


def test_stale_hash_raises_and_overwrites_nothing(store):
    entry = make_entry(store, content="v1")
    update_entry(entry, base_hash=content_hash("v1"), author=Author.system(), content="v2")
    with pytest.raises(StaleWrite) as info:
        # ``entry`` is the caller's old copy, prepared against v1.
        update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="v3 from a stale read")
    assert info.value.expected == content_hash("v1") and info.value.actual == content_hash("v2")
    fresh = MemoryEntry.objects.get(pk=entry.pk)
    assert (fresh.content, fresh.version) == ("v2", 2)
    assert [v[0] for v in versions(entry)] == [1, 2]


def test_revert_is_a_new_version_not_a_rewrite(store):
    entry = make_entry(store, content="first", tags=["a"])
    entry = update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="second", tags=["b"])
    entry = revert_entry(entry, to_number=1, base_hash=entry.content_hash, author=Author.system())
    assert (entry.version, entry.content, entry.tags) == (3, "first", ["a"])
    assert [(n, op, c) for n, op, c, _ in versions(entry)] == [
        (1, "create", "first"),
        (2, "update", "second"),
        (3, "revert", "first"),
    ]
    with pytest.raises(StaleWrite):
        revert_entry(entry, to_number=2, base_hash=content_hash("second"), author=Author.system())


def test_apply_change_add_update_remove_merge(store):
    a = make_entry(store, key="a", content="A")
    b = make_entry(store, key="b", content="B")
    c = make_entry(store, key="c", content="C")
    dream = Author.dream(41)

    (added,) = apply_change(
        store,
        operation="add",
        targets=[],
        target_hashes={},
        content="Use pnpm.",
        author=dream,
        scope_agent="web",
        key="pnpm-install",
    )
    assert (added.key, added.operation, added.author_run_id, added.scope_agent) == ("pnpm-install", "create", 41, "web")

    (upd,) = apply_change(
        store, operation="update", targets=["a"], target_hashes={"a": a.content_hash}, content="A2", author=dream
    )
    assert (upd.key, upd.number, upd.content) == ("a", 2, "A2")

    (rem,) = apply_change(
        store, operation="remove", targets=["c"], target_hashes={"c": c.content_hash}, content=None, author=dream
    )
    assert (rem.operation, rem.status) == ("archive", "archived")

    merged = apply_change(
        store,
        operation="merge",
        targets=["a", "b"],
        target_hashes={"a": content_hash("A2"), "b": b.content_hash},
        content="A and B",
        author=dream,
    )
    assert [(v.key, v.operation, v.status) for v in merged] == [("a", "merge", "active"), ("b", "merge", "archived")]
    assert MemoryEntry.objects.get(store=store, key="a").content == "A and B"


def test_merge_with_one_stale_target_changes_nothing(store):
    a = make_entry(store, key="a", content="A")
    b = make_entry(store, key="b", content="B")
    update_entry(b, base_hash=b.content_hash, author=Author.system(), content="B changed meanwhile")
    with pytest.raises(StaleWrite):
        apply_change(
            store,
            operation="merge",
            targets=["a", "b"],
            target_hashes={"a": a.content_hash, "b": content_hash("B")},
            content="merged",
            author=Author.dream(1),
        )
    assert MemoryEntry.objects.get(pk=a.pk).content == "A" and MemoryEntry.objects.get(pk=a.pk).version == 1
    assert MemoryEntry.objects.get(pk=b.pk).status == "active"
    assert MemoryVersion.objects.filter(entry__store=store).count() == 3  # a v1, b v1, b v2


def test_apply_change_on_missing_target_or_unknown_operation(store):
    a = make_entry(store, key="a", content="A")
    with pytest.raises(InvalidChange):
        apply_change(store, operation="update", targets=["gone"], target_hashes={}, content="x", author=Author.system())
    with pytest.raises(InvalidChange):
        apply_change(
            store,
            operation="rename",
            targets=["a"],
            target_hashes={"a": a.content_hash},
            content="x",
            author=Author.system(),
        )
    assert MemoryEntry.objects.get(pk=a.pk).version == 1


@pytest.mark.skipif(not is_postgres(), reason="row locks and real concurrency need PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_two_writers_racing_on_one_hash_exactly_one_wins():
    team = TeamFactory(slug="race")
    store = StoreFactory(team=team, slug="eng")
    entry = make_entry(store, key="deploy", content="base")
    base = entry.content_hash
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def writer(name: str) -> None:
        try:
            # Each thread has its own connection and must set its own team scope (the test's all-teams scope is
            # a session setting of the main connection only).
            with rls.team_scope(team.pk):
                mine = MemoryEntry.objects.get(pk=entry.pk)
                barrier.wait(timeout=10)
                update_entry(mine, base_hash=base, author=Author.system(), content=f"written by {name}")
            outcomes[name] = "won"
        except StaleWrite:
            outcomes[name] = "stale"
        except Exception as exc:  # surfaced by the assertion below
            outcomes[name] = repr(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes.values()) == ["stale", "won"], outcomes
    (winner,) = [n for n, o in outcomes.items() if o == "won"]
    fresh = MemoryEntry.objects.get(pk=entry.pk)
    assert (fresh.content, fresh.version) == (f"written by {winner}", 2)
    assert [(n, c) for n, _, c, _ in versions(entry)] == [(1, "base"), (2, f"written by {winner}")]
    assert connection.vendor == "postgresql"
