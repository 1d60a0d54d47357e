"""The one place that writes skills. Every change is a new SkillVersion with provenance (who: a person, an agent
key, a dream run or the system; why: proposal, reason, evidence), and every change of an existing skill names the
content hash it was prepared against: a stale hash raises StaleSkillWrite and nothing is overwritten.

The content hash is sha256 over name, description, body and references (see ``skill_content_hash``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from dreamweb.provenance import Author, InvalidChange, Provenance, WriteConflict

from . import folders
from .models import Skill, SkillStatus, SkillVersion


class SkillOperation:
    CREATE = "create"
    UPDATE = "update"
    PUBLISH = "publish"
    UNPUBLISH = "unpublish"
    REVERT = "revert"
    IMPORT = "import"


class StaleSkillWrite(WriteConflict):
    """The skill changed since the caller read it (HTTP 412; a proposal becomes a conflict)."""

    target, name_field = "skill", "name"

    @property
    def skill(self) -> Skill:
        return self.obj


class InvalidSkill(InvalidChange):
    """A change the skills service refuses (bad name, empty description, unknown skill...)."""


class SkillExists(InvalidSkill):
    pass


def skill_content_hash(name: str, description: str, body: str, references: dict | None) -> str:
    """sha256 over name, description, body and references, in one canonical JSON text (keys sorted)."""
    canonical = json.dumps(
        [name, description, body, references or {}], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _validated(name: str, description: str) -> tuple[str, str]:
    try:
        return folders.validate_name(name), folders.validate_description(description)
    except ValueError as exc:
        raise InvalidSkill(str(exc)) from exc


def _evidence(prov: Provenance) -> list:
    evidence = list(prov.evidence or [])
    session = prov.session
    # SkillVersion has no session column: a session named by the provenance travels with the evidence.
    if session is not None and not any(e.get("session_id") == session.pk for e in evidence if isinstance(e, dict)):
        evidence.insert(0, {"session_id": session.pk, "session": session.external_id})
    return evidence


def _record(skill: Skill, operation: str, previous_hash: str, author: Author, prov: Provenance) -> SkillVersion:
    return SkillVersion.objects.create(
        team_id=skill.team_id,
        skill=skill,
        number=skill.version,
        operation=operation,
        name=skill.name,
        description=skill.description,
        body=skill.body,
        references=dict(skill.references or {}),
        tags=list(skill.tags or []),
        extra=dict(skill.extra or {}),
        front_matter=skill.front_matter,
        status=skill.status,
        content_hash=skill.content_hash,
        previous_hash=previous_hash,
        proposal_id=prov.proposal_id,
        reason=prov.reason,
        evidence=_evidence(prov),
        **author.version_fields(),
    )


def create_skill(
    team,
    *,
    name: str,
    description: str,
    body: str = "",
    author: Author,
    references: dict | None = None,
    tags: Sequence[str] = (),
    extra: dict | None = None,
    front_matter: str = "",
    status: str = SkillStatus.PUBLISHED,
    provenance: Provenance | None = None,
    operation: str = SkillOperation.CREATE,
) -> Skill:
    name, description = _validated(name, description)
    prov = provenance or Provenance()
    now = timezone.now()
    references = dict(references or {})
    try:
        with transaction.atomic():
            skill = Skill.objects.create(
                team_id=getattr(team, "pk", team),
                name=name,
                description=description,
                body=body or "",
                references=references,
                tags=list(tags),
                extra=dict(extra or {}),
                front_matter=front_matter or "",
                status=status,
                version=1,
                content_hash=skill_content_hash(name, description, body or "", references),
                created_at=now,
                updated_at=now,
            )
            _record(skill, operation, "", author, prov)
    except IntegrityError as exc:
        raise SkillExists(f"a skill named {name!r} already exists in this team") from exc
    return skill


_UNSET = object()


def update_skill(
    skill: Skill,
    *,
    base_hash: str | None,
    author: Author,
    name=_UNSET,
    description=_UNSET,
    body=_UNSET,
    references=_UNSET,
    tags=_UNSET,
    extra=_UNSET,
    front_matter=_UNSET,
    status=_UNSET,
    provenance: Provenance | None = None,
    operation: str = SkillOperation.UPDATE,
    skip_unchanged: bool = False,
) -> Skill:
    """Change a skill if it still has ``base_hash``; returns the fresh skill. Raises StaleSkillWrite otherwise.

    ``skip_unchanged``: an edit (the admin's form) that would leave the skill exactly as it is writes no version and
    returns the skill as it is (as memory.services.update_entry does for entries); publishing, reverts, imports and
    reviewed changes always write or decide for themselves."""
    prov = provenance or Provenance()
    with transaction.atomic():
        current = Skill.objects.select_for_update().get(pk=skill.pk)
        StaleSkillWrite.check(current, base_hash)
        previous_hash = current.content_hash
        before = _state(current)
        for attr, value in (
            ("name", name),
            ("description", description),
            ("body", body),
            ("references", references),
            ("tags", tags),
            ("extra", extra),
            ("front_matter", front_matter),
            ("status", status),
        ):
            if value is not _UNSET:
                setattr(current, attr, value)
        current.name, current.description = _validated(current.name, current.description)
        current.body = current.body or ""
        current.references = dict(current.references or {})
        current.tags = list(current.tags or [])
        current.content_hash = skill_content_hash(current.name, current.description, current.body, current.references)
        if skip_unchanged and _state(current) == before:
            return current
        current.version += 1
        current.updated_at = timezone.now()
        try:
            with transaction.atomic():
                current.save()
        except IntegrityError as exc:
            raise SkillExists(f"a skill named {current.name!r} already exists in this team") from exc
        _record(current, operation, previous_hash, author, prov)
    return current


def _state(skill: Skill) -> tuple:
    """What a version records of a skill (SkillVersion's fields): two equal states are the same version."""
    return (
        skill.content_hash,
        skill.name,
        skill.description,
        skill.body or "",
        dict(skill.references or {}),
        list(skill.tags or []),
        skill.extra,
        skill.front_matter,
        skill.status,
    )


def publish_skill(skill: Skill, *, base_hash: str | None, author: Author, provenance=None) -> Skill:
    return update_skill(
        skill,
        base_hash=base_hash,
        author=author,
        status=SkillStatus.PUBLISHED,
        provenance=provenance,
        operation=SkillOperation.PUBLISH,
    )


def unpublish_skill(skill: Skill, *, base_hash: str | None, author: Author, provenance=None) -> Skill:
    return update_skill(
        skill,
        base_hash=base_hash,
        author=author,
        status=SkillStatus.DRAFT,
        provenance=provenance,
        operation=SkillOperation.UNPUBLISH,
    )


def revert_skill(skill: Skill, *, to_number: int, base_hash: str | None, author: Author, reason: str = "") -> Skill:
    """Bring back the state of an earlier version, as a new version (history is never rewritten)."""
    try:
        target = SkillVersion.objects.get(skill=skill, number=to_number)
    except SkillVersion.DoesNotExist as exc:
        raise InvalidSkill(f"skill {skill.name!r} has no version {to_number}") from exc
    return update_skill(
        skill,
        base_hash=base_hash,
        author=author,
        name=target.name,
        description=target.description,
        body=target.body,
        references=target.references,
        tags=target.tags,
        extra=target.extra,
        front_matter=target.front_matter,
        status=target.status,
        provenance=Provenance(reason=reason or f"revert to version {to_number}"),
        operation=SkillOperation.REVERT,
    )


# --- documents (SKILL.md folders and texts) -----------------------------------------------------------------


def to_document(skill: Skill | SkillVersion) -> folders.SkillDocument:
    return folders.SkillDocument(
        name=skill.name,
        description=skill.description,
        body=skill.body,
        tags=list(skill.tags or []),
        extra=dict(skill.extra or {}),
        front_matter=skill.front_matter,
        references=dict(skill.references or {}),
    )


def skill_md(skill: Skill | SkillVersion) -> str:
    """The SKILL.md text of a skill (or of one of its versions)."""
    return folders.render_skill_md(to_document(skill))


def _document_fields(doc: folders.SkillDocument) -> dict:
    return {
        "name": doc.name,
        "description": doc.description,
        "body": doc.body,
        "references": doc.references,
        "tags": doc.tags,
        "extra": doc.extra,
        "front_matter": doc.front_matter,
    }


def _same(skill: Skill, doc: folders.SkillDocument) -> bool:
    return all(getattr(skill, attr) == value for attr, value in _document_fields(doc).items())


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: list[folders.SkillFolderError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def import_document(team, doc: folders.SkillDocument, *, author: Author, reason: str = "") -> tuple[str, Skill]:
    """Create the skill, or make the existing one of that name say exactly what the document says.

    Returns ("created" | "updated" | "unchanged", skill). An import is authoritative for the skill it names, so it
    updates against the hash it reads (under a row lock), not against one the caller brought.
    """
    prov = Provenance(reason=reason)
    team_id = getattr(team, "pk", team)
    with transaction.atomic():
        existing = Skill.objects.select_for_update().filter(team_id=team_id, name=doc.name).first()
        if existing is None:
            fields = _document_fields(doc)
            skill = create_skill(team, author=author, provenance=prov, operation=SkillOperation.IMPORT, **fields)
            return "created", skill
        if _same(existing, doc):
            return "unchanged", existing
        skill = update_skill(
            existing,
            base_hash=existing.content_hash,
            author=author,
            provenance=prov,
            operation=SkillOperation.IMPORT,
            **_document_fields(doc),
        )
        return "updated", skill


def import_folder(team, root: Path, *, author: Author | None = None) -> ImportResult:
    """Import every skill folder under ``root``. A bad folder is reported and skipped; the others still import."""
    author = author or Author.system()
    result = ImportResult()
    seen: dict[str, Path] = {}
    for folder in folders.skill_folders(Path(root)):
        try:
            doc = folders.read_skill_folder(folder)
        except folders.SkillFolderError as exc:
            result.errors.append(exc)
            continue
        if doc.name in seen:
            message = f"a skill named {doc.name!r} was already imported from {seen[doc.name]}; skipped"
            result.errors.append(folders.SkillFolderError(folder / folders.SKILL_FILE, message))
            continue
        seen[doc.name] = folder
        result.warnings += [f"{folder / folders.SKILL_FILE}: {w}" for w in doc.warnings]
        try:
            outcome, _ = import_document(team, doc, author=author, reason=f"imported from {folder.name}/")
        except InvalidSkill as exc:
            result.errors.append(folders.SkillFolderError(folder / folders.SKILL_FILE, str(exc)))
            continue
        getattr(result, outcome).append(doc.name)
    return result


def export_folder(team, root: Path, *, names: Sequence[str] = ()) -> list[Path]:
    """Write one folder per skill of the team (drafts included) under ``root``. Returns the folders written."""
    qs = Skill.objects.for_team(team).order_by("name")
    if names:
        qs = qs.filter(name__in=list(names))
    return [folders.write_skill_folder(to_document(skill), Path(root)) for skill in qs]


# --- reviewed changes from dream proposals -----------------------------------------------------------------


def _parse_proposed(content: str | None, where: str) -> folders.SkillDocument:
    try:
        return folders.parse_skill_md(content or "", where)
    except folders.SkillFolderError as exc:
        raise InvalidSkill(str(exc)) from exc


def apply_skill_change(
    team,
    *,
    operation: str,
    targets: Sequence[str],
    target_hashes: dict,
    content: str | None,
    author: Author,
    provenance: Provenance | None = None,
) -> list[SkillVersion]:
    """Apply a reviewed skill proposal, all or nothing; returns the versions written.

    * ``add``: ``content`` is a whole SKILL.md text; a new published skill.
    * ``update``: ``targets`` is ``[name]``; ``content`` is either a whole SKILL.md text (may change the
      description) or just the new markdown body. The skill must still have ``target_hashes[name]``.
    * ``remove``: unpublishes each target (back to draft; history and the text stay).
    A target changed since the proposal was made raises StaleSkillWrite and nothing changes.
    """
    prov = provenance or Provenance()
    team_id = getattr(team, "pk", team)
    with transaction.atomic():
        if operation == "add":
            doc = _parse_proposed(content, "proposed SKILL.md")
            skill = create_skill(team, author=author, provenance=prov, **_document_fields(doc))
            return [skill.versions.get(number=skill.version)]
        skills = {s.name: s for s in Skill.objects.select_for_update().filter(team_id=team_id, name__in=list(targets))}
        missing = [name for name in targets if name not in skills]
        if missing or not targets:
            raise InvalidSkill(f"no skill {', '.join(missing) or '(none named)'} in this team")
        for name in targets:
            StaleSkillWrite.check(skills[name], target_hashes.get(name))
        written: list[Skill] = []
        if operation == "update":
            if len(targets) != 1:
                raise InvalidSkill("an update changes exactly one skill")
            skill = skills[targets[0]]
            if content is None or not content.strip():
                raise InvalidSkill("an update needs the new text of the skill")
            if folders.FRONT_MATTER_RE.match(content):
                doc = _parse_proposed(content, f"proposed SKILL.md of {skill.name}")
                changes = {k: v for k, v in _document_fields(doc).items() if k != "references"}
            else:
                changes = {"body": content}
            written.append(
                update_skill(
                    skill,
                    base_hash=target_hashes[skill.name],
                    author=author,
                    status=SkillStatus.PUBLISHED,
                    provenance=prov,
                    **changes,
                )
            )
        elif operation == "remove":
            for name in targets:
                written.append(
                    unpublish_skill(skills[name], base_hash=target_hashes[name], author=author, provenance=prov)
                )
        else:
            raise InvalidSkill(f"operation {operation!r} is not supported for skills")
        return [s.versions.get(number=s.version) for s in written]


def published_index(team) -> list[dict]:
    """The index an agent's context lists: the team's published skills by name, {name, description, version}.

    Plain SQL: every context request runs it, and building the ORM query costs several times what running it does
    (docs/benchmarks.md, agents' API); row-level security applies as to any query."""
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT "name", "description", "version" FROM "skills_registry_skill"'
            ' WHERE "team_id" = %s AND "status" = %s ORDER BY "name"',
            [getattr(team, "pk", team), SkillStatus.PUBLISHED.value],
        )
        return [{"name": n, "description": d, "version": v} for n, d, v in cursor.fetchall()]


def skill_snapshots(team) -> list[dict]:
    """The team's published skills as the dream's pure functions take them (name, description, body, hash, tags)."""
    rows = Skill.objects.for_team(team).published().order_by("name")
    return [
        {"name": s.name, "description": s.description, "body": s.body, "content_hash": s.content_hash, "tags": s.tags}
        for s in rows
    ]
