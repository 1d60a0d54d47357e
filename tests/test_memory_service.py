"""The memory write service: every write is a version, stale writes are refused and change nothing."""

import threading

import pytest
from django.db import connection, connections

from dreamweb import rls
from dreamweb.provenance import content_hash
from memory import services
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


# ---- replacement keys, supersession, pins, restores and reverts: the base check and what each keeps -------------


@pytest.mark.parametrize(
    ("key", "replacement"),
    [
        ("deploy", "deploy-v2"),
        ("deploy-v2", "deploy-v3"),
        ("deploy-v9", "deploy-v10"),
        ("a-v1-v3", "a-v1-v4"),
        ("deploy-vx", "deploy-vx-v2"),
        ("k" * 200, "k" * 197 + "-v2"),
        ("k" * 197 + "-v9", "k" * 196 + "-v10"),  # the base is cut, never the number
        ("k" * 196 + "-v99", "k" * 195 + "-v100"),
    ],
)
def test_replacement_key_counts_up_and_fits_the_key_column(key, replacement):
    assert services.replacement_key(key) == replacement
    assert len(replacement) <= services.KEY_CHARS


def test_supersede_keeps_scope_tags_pin_and_reason_unless_told(store):
    entry = create_entry(
        store,
        key="deploy",
        content="Deploy with make deploy.",
        author=Author.system(),
        scope_agent="ci-bot",
        scope_task="release",
        tags=["ops"],
        pinned=True,
    )
    why = Provenance(reason="make deploy was removed")
    new, old = services.supersede_entry(
        entry, base_version=1, content="Deploy with make release.", author=Author.system(), provenance=why
    )
    assert (new.key, new.scope_agent, new.scope_task, new.tags, new.pinned) == (
        "deploy-v2",
        "ci-bot",
        "release",
        ["ops"],
        True,
    )
    assert (old.status, old.superseded_by_id) == ("superseded", new.pk)
    assert [v.reason for v in (new.versions.get(), old.versions.order_by("-number").first())] == [why.reason] * 2
    other = create_entry(
        store, key="lint", content="Run ruff.", author=Author.system(), scope_agent="ci-bot", scope_task="x"
    )
    moved, _ = services.supersede_entry(
        other,
        base_version=1,
        content="Run make lint.",
        author=Author.system(),
        key="lint-command",
        scope_agent=None,
        scope_task="lint",
    )
    assert (moved.key, moved.scope_agent, moved.scope_task) == ("lint-command", None, "lint")


def test_supersede_refuses_an_archived_entry_and_a_stale_base(store):
    entry = make_entry(store, key="deploy", content="Deploy with make deploy.")
    with pytest.raises(StaleWrite):
        services.supersede_entry(entry, content="new", author=Author.system(), base_version=5)
    with pytest.raises(StaleWrite):
        services.supersede_entry(entry, content="new", author=Author.system(), base_hash=content_hash("other"))
    MemoryEntry.objects.filter(pk=entry.pk).update(status="archived")
    with pytest.raises(services.ArchivedEntry, match="entry 'deploy' is archived: restore it before changing it"):
        services.supersede_entry(entry, base_version=1, content="new", author=Author.system())
    assert list(MemoryEntry.objects.filter(store=store).values_list("key", flat=True)) == ["deploy"]


@pytest.mark.parametrize("write", ["pin", "restore"])
def test_pin_and_restore_refuse_a_stale_hash(store, write):
    entry = make_entry(store, key="deploy", content="Deploy with make release.")
    if write == "restore":
        MemoryEntry.objects.filter(pk=entry.pk).update(status="archived")

    def do(base_hash):
        if write == "pin":
            return services.set_pinned(entry, pinned=True, base_hash=base_hash, author=Author.system())
        return services.restore_entry(entry, base_hash=base_hash, author=Author.system())

    with pytest.raises(StaleWrite):
        do(content_hash("what someone else wrote"))
    assert MemoryEntry.objects.get(pk=entry.pk).version == 1
    done = do(entry.content_hash)
    assert done.version == 2 and (done.pinned if write == "pin" else done.status == "active")


def test_revert_says_why_by_default_or_in_the_callers_words(store):
    entry = make_entry(store, key="deploy", content="one")
    entry = update_entry(entry, base_version=1, content="two", author=Author.system())
    entry = revert_entry(entry, to_number=1, base_version=2, author=Author.system())
    assert (entry.content, entry.versions.order_by("-number").first().reason) == ("one", "revert to version 1")
    entry = revert_entry(entry, to_number=2, base_version=3, author=Author.system(), reason="two was right")
    assert (entry.content, entry.versions.order_by("-number").first().reason) == ("two", "two was right")


def test_agent_names_at_the_limit_and_over(store):
    at_limit = "a" * services.AGENT_NAME_CHARS
    assert services.clean_agents([f" {at_limit} ", "b", "b", ""]) == [at_limit, "b"]
    with pytest.raises(InvalidChange, match=f"an agent name is at most {services.AGENT_NAME_CHARS} characters"):
        services.clean_agents([at_limit + "a"])


def test_a_rollback_step_is_stored_with_every_field():
    step = services.RollbackStep(entry_id=3, key="deploy", first=2, last=4, current=5, changed_by="alice", written=6)
    assert step.as_dict() == {
        "entry_id": 3,
        "key": "deploy",
        "first": 2,
        "last": 4,
        "current": 5,
        "changed_by": "alice",
        "written": 6,
    }
    assert (step.conflict, step.restore_to) == (True, 1)


def test_an_edit_that_changes_nothing_writes_no_version_but_is_still_checked_for_staleness(store):
    """skip_unchanged (the page's form, the API's PUT and PATCH, the admin): the same state is no new version."""
    entry = create_entry(
        store, key="deploy", content="Deploy with `make deploy`.", author=Author.system(), tags=["ops"]
    )
    same = {"content": entry.content, "scope_agent": None, "scope_task": None, "tags": ["ops"]}
    kept = update_entry(entry, base_version=1, author=Author.system(), skip_unchanged=True, **same)
    assert kept.version == 1 and MemoryVersion.objects.filter(entry=entry).count() == 1
    assert update_entry(entry, base_version=1, author=Author.system(), skip_unchanged=True).version == 1
    # One field that differs is a change.
    changed = update_entry(entry, base_version=1, author=Author.system(), skip_unchanged=True, tags=["ops", "x"])
    assert changed.version == 2
    # A stale edit is refused even when it would change nothing.
    with pytest.raises(StaleWrite):
        update_entry(entry, base_version=1, author=Author.system(), skip_unchanged=True, **same)
    # Without skip_unchanged (reviewed changes, reverts, rollbacks) a write is a version: it records a decision.
    assert update_entry(entry, base_version=2, author=Author.system(), content=changed.content).version == 3
