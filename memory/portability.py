"""Export and import of one memory store (contracts/memory.schema.json), and a readable MEMORY.md export.

Import is a merge keyed on the entry key: a new key creates an entry, a key whose content, scope or tags differ
gets a new version (operation ``import``, author: the system), an identical entry is left alone and gets no
version. Entries of the store that the document does not mention are kept. The whole import is one transaction:
a document with any invalid entry changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from dreamweb.provenance import InvalidChange

from .models import EntryStatus, MemoryEntry, MemoryStore, Operation, StoreKind
from .services import (
    Author,
    Provenance,
    clean_agents,
    content_size_problem,
    create_entry,
    set_store_agents,
    update_entry,
)

MAX_KEY = 200
MAX_SCOPE = 100
_ABSENT = object()


class DocumentInvalid(ValueError):
    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


@dataclass
class CleanEntry:
    key: str
    content: str
    # _ABSENT when the document does not say: an import into an existing entry then keeps what it has.
    scope_agent: object = _ABSENT
    scope_task: object = _ABSENT
    tags: object = _ABSENT


@dataclass
class CleanDocument:
    store: str | None
    entries: list[CleanEntry]
    name: str = ""
    kind: str = ""
    description: str = ""
    agents: list[str] | None = None  # None: the document does not say (the store's list stays)


@dataclass
class ImportReport:
    store: MemoryStore
    store_created: bool = False
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def summary(self) -> str:
        made = " (new store)" if self.store_created else ""
        return (
            f"store {self.store.slug}{made}: created {len(self.created)}, updated {len(self.updated)}, "
            f"unchanged {len(self.unchanged)}"
        )


def _optional_str(value, at: str, errors: list[str], max_length: int | None = None):
    if value is None:
        return None
    if not isinstance(value, str):
        errors.append(f"{at}: must be a string or null")
        return None
    if max_length is not None and len(value) > max_length:
        errors.append(f"{at}: at most {max_length} characters (got {len(value)})")
    return value or None


def _clean_entry(i: int, raw, errors: list[str]) -> CleanEntry | None:
    at = f"entries[{i}]"
    if not isinstance(raw, dict):
        errors.append(f"{at}: must be an object")
        return None
    before = len(errors)
    key = raw.get("key")
    if not isinstance(key, str) or not key.strip():
        errors.append(f"{at}.key: is required (a non-empty string)")
    elif len(key.strip()) > MAX_KEY:
        errors.append(f"{at}.key: at most {MAX_KEY} characters (got {len(key.strip())})")
    content = raw.get("content")
    if not isinstance(content, str) or not content.strip():
        errors.append(f"{at}.content: is required (a non-empty string)")
    elif problem := content_size_problem(content):
        errors.append(f"{at}.content: {problem}")
    entry = CleanEntry(key=key.strip() if isinstance(key, str) else "", content=content or "")
    if "scope" in raw and raw["scope"] is not None:
        scope = raw["scope"]
        if not isinstance(scope, dict):
            errors.append(f"{at}.scope: must be an object with agent and task")
        else:
            entry.scope_agent = _optional_str(scope.get("agent"), f"{at}.scope.agent", errors, MAX_SCOPE)
            entry.scope_task = _optional_str(scope.get("task"), f"{at}.scope.task", errors, MAX_SCOPE)
    elif "scope" in raw:
        entry.scope_agent = entry.scope_task = None
    if "tags" in raw and raw["tags"] is not None:
        tags = raw["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            errors.append(f"{at}.tags: must be an array of strings")
        else:
            entry.tags = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
    elif "tags" in raw:
        entry.tags = []
    return entry if len(errors) == before else None


def validate_document(doc, *, store_slug: str | None = None) -> CleanDocument:
    """Check an export document; raise DocumentInvalid listing every problem with the entry index at fault."""
    if not isinstance(doc, dict):
        raise DocumentInvalid([f"document: must be a JSON object, not {type(doc).__name__}"])
    errors: list[str] = []
    slug = store_slug or doc.get("store")
    if not store_slug and "store" not in doc:
        errors.append("store: is required (or name the store with --store)")
    elif not isinstance(slug, str) or not slug:
        errors.append("store: must be a non-empty string")
    else:
        try:
            validate_slug(slug)
            if len(slug) > MemoryStore._meta.get_field("slug").max_length:
                raise ValidationError("too long")
        except ValidationError:
            errors.append(f"store: {slug!r} is not a valid store slug (letters, digits, '-' and '_', at most 100)")
    entries = doc.get("entries")
    clean: list[CleanEntry] = []
    if "entries" not in doc:
        errors.append("entries: is required")
    elif not isinstance(entries, list):
        errors.append("entries: must be an array")
    else:
        first_at: dict[str, int] = {}
        for i, raw in enumerate(entries):
            entry = _clean_entry(i, raw, errors)
            if entry is None:
                continue
            if entry.key in first_at:
                errors.append(f"entries[{i}].key: {entry.key!r} repeats entries[{first_at[entry.key]}]")
                continue
            first_at[entry.key] = i
            clean.append(entry)
    kind = doc.get("kind") or ""
    if kind and kind not in StoreKind.values:
        errors.append(f"kind: must be one of {', '.join(StoreKind.values)} (got {kind!r})")
    agents = None
    if "agents" in doc:
        try:
            agents = clean_agents(doc["agents"] if isinstance(doc["agents"], list) else [None])
        except InvalidChange as exc:
            errors.append(f"agents: {exc}")
    if errors:
        raise DocumentInvalid(errors)
    return CleanDocument(
        store=slug,
        entries=clean,
        name=doc.get("name") if isinstance(doc.get("name"), str) else "",
        kind=kind,
        description=doc.get("description") if isinstance(doc.get("description"), str) else "",
        agents=agents,
    )


def import_document(team, doc, *, store_slug: str | None = None, author: Author | None = None) -> ImportReport:
    """Import an export document into the team's store (created when missing). Call inside the team's scope."""
    clean = validate_document(doc, store_slug=store_slug)
    author = author or Author.system()
    prov = Provenance(reason="imported")
    with transaction.atomic():
        store = MemoryStore.objects.for_team(team).filter(slug=clean.store).first()
        report = ImportReport(store=store)
        if store is None:
            store = MemoryStore.objects.create(
                team=team,
                slug=clean.store,
                name=clean.name,
                kind=clean.kind or StoreKind.PROJECT,
                description=clean.description,
            )
            report.store, report.store_created = store, True
        if clean.agents is not None:
            set_store_agents(store, clean.agents)
        existing = {e.key: e for e in MemoryEntry.objects.for_store(store)}
        for item in clean.entries:
            entry = existing.get(item.key)
            if entry is None:
                create_entry(
                    store,
                    key=item.key,
                    content=item.content,
                    author=author,
                    scope_agent=None if item.scope_agent is _ABSENT else item.scope_agent,
                    scope_task=None if item.scope_task is _ABSENT else item.scope_task,
                    tags=[] if item.tags is _ABSENT else item.tags,
                    provenance=prov,
                    operation=Operation.IMPORT,
                )
                report.created.append(item.key)
                continue
            changes: dict = {}
            if item.content != entry.content:
                changes["content"] = item.content
            for name in ("scope_agent", "scope_task", "tags"):
                value = getattr(item, name)
                if value is not _ABSENT and value != getattr(entry, name):
                    changes[name] = value
            if entry.status != EntryStatus.ACTIVE:
                changes["status"] = EntryStatus.ACTIVE  # the document says the entry exists
            if not changes:
                report.unchanged.append(item.key)
                continue
            update_entry(
                entry,
                base_version=entry.version,
                author=author,
                provenance=prov,
                operation=Operation.IMPORT,
                **changes,
            )
            report.updated.append(item.key)
    return report


def _active(store: MemoryStore):
    return MemoryEntry.objects.for_store(store).active().order_by("key")


def export_document(store: MemoryStore) -> dict:
    """The store's current state (active entries) as a contracts/memory.schema.json document."""
    return {
        "store": store.slug,
        "team": store.team.slug,
        "name": store.name,
        "kind": store.kind,
        "description": store.description,
        "agents": list(store.agents or []),
        "exported_at": timezone.now().isoformat().replace("+00:00", "Z"),
        "entries": [
            {
                "key": e.key,
                "content": e.content,
                "scope": {"agent": e.scope_agent, "task": e.scope_task},
                "tags": list(e.tags or []),
                "version": e.version,
                "content_hash": e.content_hash,
            }
            for e in _active(store)
        ],
    }


def _scope_heading(agent: str | None, task: str | None) -> str:
    if agent and task:
        return f"Agent `{agent}`, task `{task}`"
    if agent:
        return f"Agent `{agent}`"
    if task:
        return f"Task `{task}` (any agent)"
    return "Store-wide"


def export_markdown(store: MemoryStore) -> str:
    """A MEMORY.md-style file: store-wide entries first, then per agent, then per agent and task."""
    groups: dict[tuple, list[MemoryEntry]] = defaultdict(list)
    for entry in _active(store):
        groups[(entry.scope_agent, entry.scope_task)].append(entry)

    def order(scope: tuple) -> tuple:
        agent, task = scope
        # Store-wide, then each agent's own entries followed by its task-specific ones, then task-only scopes.
        return (agent is None and task is not None, agent is not None, agent or "", task is not None, task or "")

    count = sum(len(v) for v in groups.values())
    lines = [
        f"# Memory: {store.display_name}",
        "",
        f"Team `{store.team.slug}`, store `{store.slug}`; {count} active "
        f"{'entry' if count == 1 else 'entries'}, exported {timezone.now():%Y-%m-%d %H:%M} UTC.",
    ]
    if store.description:
        lines += ["", store.description.strip()]
    for scope in sorted(groups, key=order):
        lines += ["", f"## {_scope_heading(*scope)}"]
        for entry in groups[scope]:
            meta = [f"v{entry.version}", f"sha256 {entry.content_hash[:12]}"]
            if entry.tags:
                meta.insert(0, "tags: " + ", ".join(entry.tags))
            lines += ["", f"### {entry.key}", "", entry.content.strip(), "", f"_{' · '.join(meta)}_"]
    return "\n".join(lines) + "\n"
