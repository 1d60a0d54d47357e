"""The one place that writes memory entries. Every write is a new MemoryVersion with full provenance, and every
change of an existing entry names the version it was prepared against (optimistic concurrency): a stale version
raises StaleWrite and nothing is overwritten. Versions only grow, so a version once superseded never matches again,
whichever fields changed and even when the content comes back to an earlier text. Reviewed proposals, which are
prepared against content, name the content hash instead."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.text import slugify

from dreamweb import screening, secret_scan
from dreamweb.models import Team
from dreamweb.provenance import (
    Author,
    AuthorKind,
    ChangeRefused,
    InvalidChange,
    Provenance,
    WriteConflict,
    content_hash,
    origin_of,
)

from .models import EntryStatus, MemoryEntry, MemoryStore, MemoryVersion, Operation


class MemoryWriteError(ChangeRefused):
    """Base class for refusals of the memory service."""


class StaleWrite(WriteConflict, MemoryWriteError):
    """The entry changed since the caller read it (HTTP 412). ``entry`` is its current state; ``expected`` and
    ``actual`` name versions (or content hashes, for proposals)."""

    target, name_field = "entry", "key"

    @property
    def entry(self) -> MemoryEntry:
        return self.obj


class EntryExists(MemoryWriteError):
    """An entry with that key exists in the store already (HTTP 409)."""


REASON_SECRET = "Holds something that looks like a secret (a key, token or password): secrets never go into memory."


class ScreenedWrite(MemoryWriteError):
    """An agent's in-band write whose text the screen refuses (dreamweb.screening: markup, remote code, credential
    reads, data sent away, text addressing agents, hosts the team has not allowed). Nothing is written (HTTP 409,
    code ``screened``); ``reasons`` names what was found."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("refused by screening: " + " ".join(self.reasons))


def screen_agent_write(
    team_id: int, author: Author, content: str | None, *, key: str | None = None, tags: Iterable[str] = ()
) -> None:
    """Raise ScreenedWrite when an agent (an API key) writes text the screen refuses. People and reviewed dreams are
    not screened here: a dream's proposals are screened by its risk rules, and poisoned ones never apply.

    Every text of the write is screened, not only its content: the key is the `## key` heading of the context an
    agent is served, and tags are listed beside the entry (`ignore-all-previous-instructions` is text addressing
    agents whatever field carries it; `token=ghp_...` is a secret in a tag as in the content)."""
    texts = [t for t in (content, _as_words(key), *(_as_words(t) for t in tags or ())) if t]
    if author.kind != AuthorKind.AGENT or not texts:
        return
    allowed = Team.objects.filter(pk=team_id).values_list("allowed_hosts", flat=True).first() or []
    reasons: list[str] = []
    for text in texts:
        reasons += [r for r in screening.screen(text, allowed_hosts=allowed) if r not in reasons]
    # A secret is refused, not redacted: the agent learns that its text was not stored, and nothing half-written
    # stands in memory (guardrail: secrets never reach memory; a dream's proposals are redacted instead).
    if any(secret_scan.has_secret(t) for t in (content, key, *(tags or ())) if t):
        reasons.append(REASON_SECRET)
    if reasons:
        raise ScreenedWrite(reasons)


def _as_words(name: str | None) -> str:
    """A key or tag read as the words it spells (`ignore-all-previous-instructions` -> `ignore all previous
    instructions`), so the screen reads what an agent will read in it."""
    return re.sub(r"[-_./:]+", " ", name).strip() if isinstance(name, str) else ""


class ArchivedEntry(InvalidChange, MemoryWriteError):
    """A write to an archived (or superseded) entry that does not bring it back (HTTP 409): restore it first."""

    def __init__(self, entry: MemoryEntry):
        self.entry = entry
        super().__init__(f"entry {entry.key!r} is {entry.status}: restore it before changing it")


def _record(entry: MemoryEntry, operation: str, previous_hash: str, author: Author, prov: Provenance) -> MemoryVersion:
    return MemoryVersion.objects.create(
        team_id=entry.team_id,
        entry=entry,
        number=entry.version,
        operation=operation,
        key=entry.key,
        content=entry.content,
        content_hash=entry.content_hash,
        previous_hash=previous_hash,
        status=entry.status,
        scope_agent=entry.scope_agent,
        scope_task=entry.scope_task,
        tags=list(entry.tags or []),
        pinned=entry.pinned,
        valid_from=entry.valid_from,
        valid_until=entry.valid_until,
        superseded_by_id=entry.superseded_by_id,
        session=prov.session,
        proposal_id=prov.proposal_id,
        reason=prov.reason,
        evidence=list(prov.evidence or []),
        **author.version_fields(),
    )


def validate_key(key: str) -> str:
    key = (key or "").strip()
    if not key or len(key) > 200:
        raise InvalidChange("key must be 1 to 200 characters")
    return key


def content_oversize(content: str) -> tuple[int, int] | None:
    """(size, limit) in UTF-8 bytes when a text is past the documented size of an entry (DREAMWEB_MAX_ENTRY_BYTES),
    else None: an entry is served inside a prompt's budget and shown on a page, so one of megabytes helps nobody.
    The one rule; the API and imports word it with the setting's name (content_size_problem), the pages for people."""
    limit = settings.DREAMWEB_MAX_ENTRY_BYTES
    if len(content) <= limit // 4:  # at most four bytes a character: no need to encode it
        return None
    size = len(content.encode("utf-8", "surrogatepass"))
    return (size, limit) if size > limit else None


def content_size_problem(content: str) -> str | None:
    if over := content_oversize(content):
        return f"at most {over[1]} bytes (got {over[0]}; DREAMWEB_MAX_ENTRY_BYTES)"
    return None


def validate_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidChange("content must be a non-empty string")
    if problem := content_size_problem(content):
        raise InvalidChange(f"content must be {problem}")
    return content


def validate_validity(valid_from, valid_until) -> None:
    if valid_from is not None and valid_until is not None and valid_until <= valid_from:
        raise InvalidChange("valid_until must be later than valid_from")


AGENT_NAME_CHARS = 100  # as AgentSession.agent


def clean_agents(agents: Iterable[str]) -> list[str]:
    """A store's agent list as stored: names stripped, empty ones dropped, each once, sorted. Refuses a name that
    is not a string or longer than an agent name can be."""
    out = set()
    for name in agents or ():
        if not isinstance(name, str):
            raise InvalidChange("agents must be a list of agent names (strings)")
        name = name.strip()
        if len(name) > AGENT_NAME_CHARS:
            raise InvalidChange(f"an agent name is at most {AGENT_NAME_CHARS} characters")
        if name:
            out.add(name)
    return sorted(out)


def set_store_agents(store: MemoryStore, agents: Iterable[str]) -> tuple[list[str], list[str]]:
    """Set the agents the store serves (empty: every agent of the team); returns (old, new)."""
    new = clean_agents(agents)
    old = list(store.agents or [])
    if new != old:
        store.agents = new
        store.save(update_fields=["agents"])
    return old, new


def create_entry(
    store: MemoryStore,
    *,
    key: str,
    content: str,
    author: Author,
    scope_agent: str | None = None,
    scope_task: str | None = None,
    tags: Sequence[str] = (),
    pinned: bool = False,
    valid_from=None,
    valid_until=None,
    provenance: Provenance | None = None,
    operation: str = Operation.CREATE,
) -> MemoryEntry:
    key, content = validate_key(key), validate_content(content)
    validate_validity(valid_from, valid_until)
    screen_agent_write(store.team_id, author, content, key=key, tags=tags)
    prov = provenance or Provenance()
    now = timezone.now()
    try:
        with transaction.atomic():
            entry = MemoryEntry.objects.create(
                team_id=store.team_id,
                store=store,
                key=key,
                content=content,
                content_hash=content_hash(content),
                scope_agent=scope_agent or None,
                scope_task=scope_task or None,
                tags=list(tags),
                pinned=bool(pinned),
                valid_from=valid_from,
                valid_until=valid_until,
                origin=origin_of(author.kind, prov.proposal_id),
                version=1,
                created_at=now,
                updated_at=now,
            )
            _record(entry, operation, "", author, prov)
    except IntegrityError as exc:
        raise EntryExists(f"an entry with key {key!r} already exists in {store.slug}") from exc
    return entry


_UNSET = object()


def _locked(entry: MemoryEntry) -> MemoryEntry:
    return MemoryEntry.objects.select_for_update().get(pk=entry.pk)


def _check_base(current: MemoryEntry, base_version, base_hash: str | None) -> None:
    """Raise StaleWrite unless ``current`` is still what the caller prepared its change against: one of the versions
    it names (an If-Match list may name several), or, for proposals, its content hash."""
    if base_version is not None:
        versions = {base_version} if isinstance(base_version, int) else set(base_version)
        if current.version not in versions:
            expected = ", ".join(f"version {v}" for v in sorted(versions))
            raise StaleWrite(current, expected, f"version {current.version}")
    else:
        StaleWrite.check(current, base_hash)


def update_entry(
    entry: MemoryEntry,
    *,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    author: Author,
    content: str | None = None,
    scope_agent=_UNSET,
    scope_task=_UNSET,
    tags=_UNSET,
    pinned=_UNSET,
    valid_from=_UNSET,
    valid_until=_UNSET,
    superseded_by=_UNSET,
    status: str | None = None,
    provenance: Provenance | None = None,
    operation: str = Operation.UPDATE,
    skip_unchanged: bool = False,
) -> MemoryEntry:
    """Change an entry if it is still at ``base_version`` (or has ``base_hash``, for proposals); returns the fresh
    entry. Raises StaleWrite when it changed meanwhile, ArchivedEntry when it is archived or superseded and stays so
    (a superseded entry comes back only by a restore, which unlinks its replacement).

    ``skip_unchanged``: an edit (the entry page's form, the API's PUT and PATCH, the admin) that would leave the
    entry exactly as it is writes no version and returns the entry as it is, its version unchanged (checked after
    the stale check: a stale edit is refused even when it changes nothing). Reviewed changes, reverts, rollbacks
    and imports always write or decide for themselves: their version records a decision (a proposal's applied
    versions must be versions it wrote)."""
    prov = provenance or Provenance()
    with transaction.atomic():
        current = _locked(entry)
        _check_base(current, base_version, base_hash)
        if current.status != EntryStatus.ACTIVE and (status or current.status) != EntryStatus.ACTIVE:
            raise ArchivedEntry(current)
        previous_hash = current.content_hash
        before = _state(current)
        if content is not None:
            current.content = validate_content(content)
            screen_agent_write(current.team_id, author, current.content)
            current.content_hash = content_hash(current.content)
        if scope_agent is not _UNSET:
            current.scope_agent = scope_agent or None
        if scope_task is not _UNSET:
            current.scope_task = scope_task or None
        if tags is not _UNSET:
            screen_agent_write(current.team_id, author, None, tags=tags or ())
            current.tags = list(tags or [])
        if pinned is not _UNSET:
            current.pinned = bool(pinned)
        if valid_from is not _UNSET:
            current.valid_from = valid_from
        if valid_until is not _UNSET:
            current.valid_until = valid_until
        validate_validity(current.valid_from, current.valid_until)
        if superseded_by is not _UNSET:
            current.superseded_by_id = getattr(superseded_by, "pk", superseded_by)
        if status is not None:
            current.status = status
            if status == EntryStatus.ACTIVE:
                current.superseded_by_id = None
        if skip_unchanged and _state(current) == before:
            return current
        current.origin = origin_of(author.kind, prov.proposal_id)  # the latest version's, as every page shows it
        current.version += 1
        current.updated_at = timezone.now()
        current.save()
        _record(current, operation, previous_hash, author, prov)
    return current


def _state(entry: MemoryEntry) -> tuple:
    """What a version records of an entry (MemoryVersion's fields): two equal states are the same version."""
    return (
        entry.content_hash,
        entry.scope_agent,
        entry.scope_task,
        list(entry.tags or []),
        entry.pinned,
        entry.valid_from,
        entry.valid_until,
        entry.superseded_by_id,
        entry.status,
    )


def archive_entry(
    entry: MemoryEntry,
    *,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    author: Author,
    provenance=None,
    operation: str = Operation.ARCHIVE,
) -> MemoryEntry:
    return update_entry(
        entry,
        base_version=base_version,
        base_hash=base_hash,
        author=author,
        status=EntryStatus.ARCHIVED,
        provenance=provenance,
        operation=operation,
    )


def restore_entry(
    entry: MemoryEntry,
    *,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    author: Author,
    provenance=None,
) -> MemoryEntry:
    return update_entry(
        entry,
        base_version=base_version,
        base_hash=base_hash,
        author=author,
        status=EntryStatus.ACTIVE,
        provenance=provenance,
        operation=Operation.RESTORE,
    )


def revert_entry(
    entry: MemoryEntry,
    *,
    to_number: int,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    author: Author,
    reason: str = "",
) -> MemoryEntry:
    """Bring back the state of an earlier version, as a new version (history is never rewritten)."""
    target = MemoryVersion.objects.get(entry=entry, number=to_number)
    return restore_version(
        entry,
        target=target,
        base_version=base_version,
        base_hash=base_hash,
        author=author,
        provenance=Provenance(reason=reason or f"revert to version {to_number}"),
    )


def restore_version(
    entry: MemoryEntry,
    *,
    target: MemoryVersion,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    author: Author,
    provenance: Provenance | None = None,
    operation: str = Operation.REVERT,
) -> MemoryEntry:
    """Bring back the whole state of an earlier version (text, scope, tags, status, pin, validity, replacement) as a
    new version: revert, rollback and undo all write through here."""
    return update_entry(
        entry,
        base_version=base_version,
        base_hash=base_hash,
        author=author,
        content=target.content,
        scope_agent=target.scope_agent,
        scope_task=target.scope_task,
        tags=target.tags,
        pinned=target.pinned,
        valid_from=target.valid_from,
        valid_until=target.valid_until,
        superseded_by=target.superseded_by_id,
        status=target.status,
        provenance=provenance,
        operation=operation,
    )


@dataclass
class RollbackStep:
    """One entry a set of changes touched: the versions they wrote (``first``..``last``), what it is now, and what
    rolling back does: bring back version ``first - 1``, or archive an entry they created (``restore_to`` 0)."""

    entry_id: int
    key: str
    first: int
    last: int
    current: int
    changed_by: str = ""  # who wrote the current version of a conflicting entry (its provenance label)
    written: int | None = None  # the version the rollback wrote

    @property
    def conflict(self) -> bool:
        return self.current != self.last

    @property
    def restore_to(self) -> int:
        return self.first - 1

    def as_dict(self) -> dict:
        return {
            "entry_id": self.entry_id,
            "key": self.key,
            "first": self.first,
            "last": self.last,
            "current": self.current,
            "changed_by": self.changed_by,
            "written": self.written,
        }


@dataclass
class Rollback:
    steps: list[RollbackStep] = field(default_factory=list)

    @property
    def restored(self) -> list[RollbackStep]:
        return [s for s in self.steps if not s.conflict]

    @property
    def conflicts(self) -> list[RollbackStep]:
        return [s for s in self.steps if s.conflict]


def plan_rollback(version_ids: Iterable[int]) -> Rollback:
    """What rolling back these versions would do, entry by entry (nothing is written): an entry whose current version
    is still the last one of them is restored; one changed since is a conflict, named with who changed it."""
    ids = [int(i) for i in version_ids]
    spans: dict[int, list[int]] = {}
    for entry_id, number in MemoryVersion.objects.filter(pk__in=ids).values_list("entry_id", "number"):
        spans.setdefault(entry_id, []).append(number)
    entries = MemoryEntry.objects.filter(pk__in=spans).only("id", "key", "version", "team")
    steps = [RollbackStep(e.pk, e.key, min(spans[e.pk]), max(spans[e.pk]), e.version) for e in entries.order_by("key")]
    conflicting = {(s.entry_id, s.current) for s in steps if s.conflict}
    if conflicting:
        latest = MemoryVersion.objects.filter(
            entry_id__in={e for e, _ in conflicting}, number__in={n for _, n in conflicting}
        ).select_related("author_user", "author_key")
        labels = {(v.entry_id, v.number): v.provenance_label for v in latest}
        for s in steps:
            s.changed_by = labels.get((s.entry_id, s.current), "")
    return Rollback(steps)


def rollback(version_ids: Iterable[int], *, author: Author, reason: str) -> Rollback:
    """Undo the changes these versions made, each entry on its own: a new version bringing back the state before the
    first of them (an entry they created is archived). An entry changed since their last version is a conflict: it
    is listed, never overwritten. Returns the plan as carried out (``written`` on each restored step)."""
    ids = list(version_ids)
    with transaction.atomic():
        entry_ids = set(MemoryVersion.objects.filter(pk__in=ids).values_list("entry_id", flat=True))
        locked = MemoryEntry.objects.select_for_update().filter(pk__in=entry_ids).order_by("pk")
        entries = {e.pk: e for e in locked}
        plan = plan_rollback(ids)
        prov = Provenance(reason=reason)
        for step in plan.restored:
            entry = entries[step.entry_id]
            if step.restore_to == 0:
                if entry.status == EntryStatus.ARCHIVED:
                    continue
                written = update_entry(
                    entry,
                    base_version=step.last,
                    author=author,
                    status=EntryStatus.ARCHIVED,
                    provenance=prov,
                    operation=Operation.ROLLBACK,
                )
            else:
                target = MemoryVersion.objects.get(entry=entry, number=step.restore_to)
                written = restore_version(
                    entry,
                    target=target,
                    base_version=step.last,
                    author=author,
                    provenance=prov,
                    operation=Operation.ROLLBACK,
                )
            step.written = written.version
    return plan


def set_pinned(
    entry: MemoryEntry,
    *,
    pinned: bool,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    author: Author,
    provenance: Provenance | None = None,
) -> MemoryEntry:
    """Pin (never proposed for removal) or unpin an entry, as a new version."""
    return update_entry(
        entry,
        base_version=base_version,
        base_hash=base_hash,
        author=author,
        pinned=pinned,
        provenance=provenance,
        operation=Operation.PIN if pinned else Operation.UNPIN,
    )


def new_entry_key(hint: str, content: str | None = "") -> str:
    """The key a new entry proposed with this hint gets: the whole hint as a slug (up to 200 characters), else the
    first words of the content, else "note". Pure: a review card shows it and approval writes exactly it."""
    if hint and (key := slugify(hint)[:200].strip("-")):
        return key
    words = re.findall(r"[A-Za-z0-9]+", content or "")[:6]
    return slugify("-".join(words))[:60].strip("-") or "note"


_VERSIONED_KEY = re.compile(r"^(.*)-v(\d+)$")
KEY_CHARS = 200  # as MemoryEntry.key


def replacement_key(key: str) -> str:
    """The key of the entry that supersedes ``key``: ``deploy`` -> ``deploy-v2`` -> ``deploy-v3``. Pure, so that a
    review card shows exactly what approval writes."""
    base, number = (m.group(1), int(m.group(2)) + 1) if (m := _VERSIONED_KEY.match(key)) else (key, 2)
    suffix = f"-v{number}"
    # The base is cut, never the suffix: cutting "...-v10" to 200 characters would give "...-v1".
    return base[: KEY_CHARS - len(suffix)] + suffix


def supersede_entry(
    entry: MemoryEntry,
    *,
    content: str,
    author: Author,
    base_version: int | Collection[int] | None = None,
    base_hash: str | None = None,
    key: str | None = None,
    scope_agent=_UNSET,
    scope_task=_UNSET,
    provenance: Provenance | None = None,
) -> tuple[MemoryEntry, MemoryEntry]:
    """Replace an entry that no longer holds (a newer lesson contradicts it) by a new entry, and mark the old one
    superseded with a link to its replacement: both are new versions, the old entry's history stays whole and it is
    never served again. The replacement keeps the old scope (unless given), tags and pin; its key is
    ``replacement_key`` of the old one unless given (a key taken already raises EntryExists: a visible conflict, never
    a silent other key). Returns (replacement, superseded)."""
    prov = provenance or Provenance()
    with transaction.atomic():
        current = _locked(entry)
        _check_base(current, base_version, base_hash)
        if current.status != EntryStatus.ACTIVE:
            raise ArchivedEntry(current)
        store = MemoryStore.objects.get(pk=current.store_id)
        replacement = create_entry(
            store,
            key=key or replacement_key(current.key),
            content=content,
            author=author,
            scope_agent=current.scope_agent if scope_agent is _UNSET else scope_agent,
            scope_task=current.scope_task if scope_task is _UNSET else scope_task,
            tags=list(current.tags or []),
            pinned=current.pinned,
            provenance=prov,
        )
        old = update_entry(
            current,
            base_version=current.version,
            author=author,
            status=EntryStatus.SUPERSEDED,
            superseded_by=replacement,
            provenance=prov,
            operation=Operation.SUPERSEDE,
        )
    return replacement, old


def revivable_by(entry: MemoryEntry, proposal_id: int | None, created_by: int | None) -> bool:
    """Whether an add (proposal ``proposal_id``) may take back the entry holding its key: only when that entry is the
    proposal's own, created by its earlier approval (``created_by``: the proposal of the entry's first version) and
    archived by the undo of it. Any other holder of the key, archived or not, stays a conflict: reviving someone
    else's entry would be a change nobody reviewed."""
    return proposal_id is not None and created_by == proposal_id and entry.status == EntryStatus.ARCHIVED


def first_proposal_id(entry_ref):
    """The proposal that created an entry (its first version's), as a subquery (``entry_ref``: OuterRef("pk"))."""
    return models.Subquery(MemoryVersion.objects.filter(entry=entry_ref, number=1).values("proposal_id")[:1])


def _revive_own_entry(store, key, content, author, scope_agent, scope_task, prov) -> MemoryEntry:
    """An add approved again after its approval was undone: the undo archived the entry that approval created, and
    that entry still holds the key. It comes back active with the proposal's text, as a new version (its history
    keeps the first approval and the undo)."""
    entry = (
        MemoryEntry.objects.filter(store=store, key=key)
        .annotate(created_by=first_proposal_id(models.OuterRef("pk")))
        .first()
    )
    if entry is None or not revivable_by(entry, prov.proposal_id, entry.created_by):
        raise EntryExists(f"an entry with key {key!r} already exists in {store.slug}")
    return update_entry(
        entry,
        base_hash=entry.content_hash,
        author=author,
        content=content or "",
        scope_agent=scope_agent,
        scope_task=scope_task,
        status=EntryStatus.ACTIVE,
        provenance=prov,
        operation=Operation.RESTORE,
    )


def apply_change(
    store: MemoryStore,
    *,
    operation: str,
    targets: Sequence[str],
    target_hashes: dict,
    content: str | None,
    author: Author,
    scope_agent: str | None = None,
    scope_task: str | None = None,
    key: str = "",
    provenance: Provenance | None = None,
    supersede: bool = False,
    valid_until=_UNSET,
) -> list[MemoryVersion]:
    """Apply a reviewed change (add / update / remove / merge) to a store, all or nothing.

    An ``add`` creates exactly ``key`` (new_entry_key of the content when empty): a key already taken raises
    EntryExists, never a silent "-2". Each target must still have the hash the change was prepared against, else
    StaleWrite and nothing changes. ``supersede`` (a change whose text contradicts its targets): an update writes a
    replacement entry (``replacement_key``) and marks the target superseded by it; a merge marks the folded entries
    superseded by the kept one instead of archiving them. ``valid_until`` sets the end of an updated entry's
    validity (None renews an expired entry). Returns the versions written.
    """
    prov = provenance or Provenance()
    with transaction.atomic():
        if operation == "add":
            key = key or new_entry_key("", content)
            try:
                entry = create_entry(
                    store,
                    key=key,
                    content=content or "",
                    author=author,
                    scope_agent=scope_agent,
                    scope_task=scope_task,
                    provenance=prov,
                )
            except EntryExists:
                entry = _revive_own_entry(store, key, content, author, scope_agent, scope_task, prov)
            return [entry.versions.get(number=entry.version)]
        entries = {e.key: e for e in MemoryEntry.objects.select_for_update().filter(store=store, key__in=targets)}
        missing = [k for k in targets if k not in entries]
        if missing:
            raise InvalidChange(f"no entry {', '.join(missing)} in {store.slug}")
        for key in targets:
            StaleWrite.check(entries[key], target_hashes.get(key))
        written: list[MemoryEntry] = []
        if operation == "update" and supersede:
            (key,) = targets[:1]
            written.extend(
                supersede_entry(
                    entries[key],
                    base_hash=target_hashes[key],
                    author=author,
                    content=content or "",
                    scope_agent=scope_agent,
                    scope_task=scope_task,
                    provenance=prov,
                )
            )
        elif operation == "update":
            (key,) = targets[:1]
            written.append(
                update_entry(
                    entries[key],
                    base_hash=target_hashes[key],
                    author=author,
                    content=content,
                    scope_agent=scope_agent,
                    scope_task=scope_task,
                    valid_until=valid_until,
                    provenance=prov,
                )
            )
        elif operation == "remove":
            for key in targets:
                written.append(
                    archive_entry(entries[key], base_hash=target_hashes[key], author=author, provenance=prov)
                )
        elif operation == "merge":
            keep, *rest = targets
            written.append(
                update_entry(
                    entries[keep],
                    base_hash=target_hashes[keep],
                    author=author,
                    content=content,
                    provenance=prov,
                    operation=Operation.MERGE,
                )
            )
            for key in rest:
                if supersede:
                    written.append(
                        update_entry(
                            entries[key],
                            base_hash=target_hashes[key],
                            author=author,
                            status=EntryStatus.SUPERSEDED,
                            superseded_by=written[0],
                            provenance=prov,
                            operation=Operation.SUPERSEDE,
                        )
                    )
                    continue
                written.append(
                    archive_entry(
                        entries[key],
                        base_hash=target_hashes[key],
                        author=author,
                        provenance=prov,
                        operation=Operation.MERGE,
                    )
                )
        else:
            raise InvalidChange(f"unknown operation {operation!r}")
        return [e.versions.get(number=e.version) for e in written]


# What a dream reads of a store: its active entries in key order (the snapshot M_t).
SNAPSHOT_FIELDS = ("key", "content", "content_hash", "scope_agent", "scope_task", "origin")


def snapshot(store: MemoryStore) -> list[dict]:
    """The store's active entries as plain dicts (SNAPSHOT_FIELDS), in key order."""
    return list(
        MemoryEntry.objects.filter(store=store, status=EntryStatus.ACTIVE).order_by("key").values(*SNAPSHOT_FIELDS)
    )


def snapshot_hash(rows: Iterable[tuple]) -> str:
    """Hash of a snapshot: (key, scope_agent, scope_task, content_hash) of each active entry, in key order."""
    digest = hashlib.sha256()
    for key, agent, task, chash in rows:
        digest.update(f"{key}\x00{agent or ''}\x00{task or ''}\x00{chash}\n".encode())
    return digest.hexdigest()


def memory_hash(store: MemoryStore) -> str:
    """Hash of the store's active entries: identifies the snapshot M_t (reads only the four columns it hashes)."""
    rows = MemoryEntry.objects.filter(store=store, status=EntryStatus.ACTIVE).order_by("key")
    return snapshot_hash(rows.values_list("key", "scope_agent", "scope_task", "content_hash"))


def tokens_estimate(text: str) -> int:
    """A cheap token count (about four characters a token), good enough for budgets."""
    return max(1, (len(text) + 3) // 4)
