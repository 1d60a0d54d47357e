"""Agent Skills folders in and out: a folder per skill holding ``SKILL.md`` (YAML front matter with ``name`` and
``description``, then the markdown body) and any other files as references.

Pure file and text handling; the database side is in skills_registry.services. A round trip is lossless:

* SKILL.md is read as bytes and decoded as UTF-8 without newline translation; the front matter block is kept
  verbatim and written back verbatim as long as it still says the same as the skill's fields (an edited skill
  gets a freshly dumped front matter instead).
* every other file is a reference, stored as text when it is UTF-8 (CRLF and all), else as base64 under an
  explicit marker (``{"encoding": "base64", "data": ...}``), so that images or PDFs come back byte for byte.
* an executable file keeps its executable bit, as git does (mode 755 or 644, nothing finer): its value is the
  marker form with ``"mode": "755"`` (``{"encoding": "utf-8" | "base64", "data": ..., "mode": "755"}``), and it is
  written back with that mode.

A description longer than the specification's 1,024 characters is accepted with a warning (the agents that load
skills do so; Anthropic's own ``claude-api`` skill has 1,068); past ``DESCRIPTION_HARD_MAX`` it is refused.

Not kept: other mode bits, empty directories, symlinks (refused).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SKILL_FILE = "SKILL.md"
# Agent Skills specification: lowercase letters, digits and hyphens, no leading/trailing/double hyphen, 1-64.
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
NAME_MAX = 64
DESCRIPTION_MAX = 1024  # the Agent Skills specification's limit: longer is accepted with a warning
DESCRIPTION_HARD_MAX = 8192  # past this a description is refused: it is shown in every agent's skill index
# Front matter: a first line of exactly ``---``, YAML, then a line of exactly ``---`` (``...`` also closes YAML).
FRONT_MATTER_RE = re.compile(r"\A(---[ \t]*\r?\n)(.*?)(^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z))", re.DOTALL | re.MULTILINE)
MAX_REFERENCE_BYTES = 2 * 1024 * 1024
BASE64 = "base64"
UTF8 = "utf-8"
EXECUTABLE = "755"
# Folders never searched for skills: version control and dependency trees.
SKIPPED_DIRS = {"node_modules", "__pycache__", "site-packages"}


class _FrontMatterLoader(yaml.SafeLoader):
    """SafeLoader that keeps dates and times as the strings they were written as (JSON has no date type)."""


_FrontMatterLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class SkillFolderError(ValueError):
    """A skill folder or SKILL.md that cannot be imported; ``path`` names the offending file."""

    def __init__(self, path, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")


@dataclass
class SkillDocument:
    """A skill as files say it: SKILL.md's parts plus the reference files."""

    name: str
    description: str
    body: str
    tags: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    front_matter: str = ""
    references: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


def validate_name(name, where="name") -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: a non-empty string is required")
    if len(name) > NAME_MAX or not NAME_RE.match(name):
        raise ValueError(
            f"{where}: {name!r} is not a valid skill name (lowercase letters, digits and single hyphens, "
            f"at most {NAME_MAX} characters)"
        )
    return name


def validate_description(description, where="description") -> str:
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"{where}: a non-empty string is required")
    if len(description) > DESCRIPTION_HARD_MAX:
        raise ValueError(f"{where}: at most {DESCRIPTION_HARD_MAX} characters (got {len(description)})")
    return description


def description_warnings(description: str, where="description") -> list[str]:
    """What is accepted but outside the specification (the warning an import prints)."""
    if len(description) > DESCRIPTION_MAX:
        return [
            f"{where} is {len(description)} characters, over the Agent Skills limit of {DESCRIPTION_MAX}; "
            "imported as it is (agents may cut it short)"
        ]
    return []


def _tags(value, path) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list) and all(isinstance(t, str | int | float) for t in value):
        return [str(t) for t in value]
    raise SkillFolderError(path, "front matter: tags must be a list of strings")


def parse_skill_md(text: str, path="SKILL.md") -> SkillDocument:
    """Split SKILL.md text into front matter fields and body. Raises SkillFolderError naming ``path``."""
    if text.startswith("\ufeff"):
        raise SkillFolderError(path, "starts with a byte order mark; save it as UTF-8 without BOM")
    match = FRONT_MATTER_RE.match(text)
    if not match:
        raise SkillFolderError(path, "no YAML front matter: the file must start with a '---' line, YAML, then '---'")
    try:
        meta = yaml.load(match.group(2), Loader=_FrontMatterLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SkillFolderError(path, f"front matter is not valid YAML{where}: {problem}") from exc
    if not isinstance(meta, dict):
        raise SkillFolderError(path, "front matter must be a YAML mapping with name and description")
    try:
        name = validate_name(meta.get("name"), "front matter: name")
        description = validate_description(meta.get("description"), "front matter: description")
    except ValueError as exc:
        raise SkillFolderError(path, str(exc)) from exc
    tags = _tags(meta.get("tags"), path)
    extra = {str(k): v for k, v in meta.items() if k not in ("name", "description", "tags")}
    try:
        # The extra keys are stored as JSON: refuse what JSON cannot hold instead of losing it.
        json.dumps(extra)
    except (TypeError, ValueError) as exc:
        message = f"front matter: values must be plain strings, numbers, lists or maps ({exc})"
        raise SkillFolderError(path, message) from exc
    return SkillDocument(
        name=name,
        description=description,
        body=text[match.end() :],
        tags=tags,
        extra=extra,
        front_matter=match.group(0),
        warnings=description_warnings(description, "front matter: description"),
    )


def _front_matter_says(doc: SkillDocument) -> bool:
    """Whether the kept verbatim front matter still carries exactly the document's fields."""
    if not doc.front_matter:
        return False
    try:
        kept = parse_skill_md(doc.front_matter)
    except SkillFolderError:
        return False
    return (kept.name, kept.description, kept.tags, kept.extra) == (doc.name, doc.description, doc.tags, doc.extra)


def dump_front_matter(doc: SkillDocument) -> str:
    meta: dict = {"name": doc.name, "description": doc.description}
    if doc.tags:
        meta["tags"] = list(doc.tags)
    meta.update(doc.extra or {})
    dumped = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    return f"---\n{dumped}---\n"


def render_skill_md(doc: SkillDocument) -> str:
    """SKILL.md text: the verbatim front matter when it is still true, else a fresh one, then the body."""
    header = doc.front_matter if _front_matter_says(doc) else dump_front_matter(doc)
    body = doc.body
    if body and not header.endswith("\n"):
        header += "\n"
    return header + body


# --- references ---------------------------------------------------------------------------------------------


def encode_reference(data: bytes, *, executable: bool = False):
    """Text when the bytes are UTF-8 without NUL (PostgreSQL JSON cannot hold NUL), else the base64 marker; an
    executable file always takes the marker form, with ``"mode": "755"``."""
    text = None
    if b"\x00" not in data:
        with contextlib.suppress(UnicodeDecodeError):
            text = data.decode("utf-8")
    if text is not None and not executable:
        return text
    value = {"encoding": UTF8, "data": text} if text is not None else {"encoding": BASE64, "data": _b64(data)}
    if executable:
        value["mode"] = EXECUTABLE
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_reference(value) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and value.get("encoding") == BASE64:
        return base64.b64decode(value["data"])
    if isinstance(value, dict) and value.get("encoding") == UTF8 and isinstance(value.get("data"), str):
        return value["data"].encode("utf-8")
    raise ValueError(f"unknown reference value {type(value).__name__}")


def is_binary(value) -> bool:
    return isinstance(value, dict) and value.get("encoding") == BASE64


def is_executable(value) -> bool:
    return isinstance(value, dict) and value.get("mode") == EXECUTABLE


def reference_text(value) -> str:
    """The text of a text reference (plain or executable)."""
    return value if isinstance(value, str) else decode_reference(value).decode("utf-8")


def reference_size(value) -> int:
    return len(decode_reference(value))


def _safe_relative(rel: str) -> str:
    """A reference path as stored: POSIX, relative, no '..' (it is joined to an export directory later)."""
    parts = rel.replace("\\", "/").split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"unsafe reference path {rel!r}")
    return "/".join(parts)


# --- folders ------------------------------------------------------------------------------------------------


def read_skill_folder(folder: Path) -> SkillDocument:
    """Read one skill folder. Raises SkillFolderError naming the file at fault."""
    folder = Path(folder)
    skill_md = folder / SKILL_FILE
    if not skill_md.is_file():
        raise SkillFolderError(skill_md, "missing: every skill folder needs a SKILL.md")
    try:
        text = skill_md.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFolderError(skill_md, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    doc = parse_skill_md(text, skill_md)
    if doc.name != folder.name:
        raise SkillFolderError(skill_md, f"front matter name {doc.name!r} does not match its folder {folder.name!r}")
    references = {}
    for path in _skill_files(folder):
        if path == skill_md:
            continue
        if path.is_symlink():
            raise SkillFolderError(path, "is a symbolic link; copy the file into the skill folder instead")
        if path.is_dir():
            continue
        size = path.stat().st_size
        if size > MAX_REFERENCE_BYTES:
            raise SkillFolderError(path, f"is {size} bytes; references may be at most {MAX_REFERENCE_BYTES} bytes")
        executable = bool(path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
        references[path.relative_to(folder).as_posix()] = encode_reference(path.read_bytes(), executable=executable)
    doc.references = references
    return doc


def _skill_files(folder: Path) -> list[Path]:
    """Every file (and symbolic link) of a skill folder, in path order, but what a clone or an install leaves beside
    the skill: hidden folders (.git, with its config and its remote's token; .venv) and dependency trees
    (SKIPPED_DIRS) are not part of the skill and are never served to agents, as they are not searched for skills."""
    found: list[Path] = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        here = Path(current)
        found += [here / name for name in files if name != ".DS_Store"]
        # A symbolic link to a folder is listed with the folders: it is refused below like a linked file.
        found += [here / d for d in dirs if (here / d).is_symlink()]
    return sorted(found)


def skill_folders(root: Path) -> list[Path]:
    """Every skill folder (a folder holding SKILL.md) at or below ``root``, in path order: a directory of skills,
    one skill folder, or a repository whose skills sit deeper (``skills/<name>/``). A skill folder's own
    subfolders are its files, not more skills; hidden folders (.git) and dependency trees are not searched."""
    root = Path(root)
    found: list[Path] = []
    for current, dirs, files in os.walk(root):
        if SKILL_FILE in files:
            found.append(Path(current))
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
    return sorted(found)


def write_skill_folder(doc: SkillDocument, root: Path) -> Path:
    """Write ``root/<name>/SKILL.md`` and the references, byte for byte. Returns the skill folder."""
    validate_name(doc.name)
    folder = Path(root) / doc.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SKILL_FILE).write_bytes(render_skill_md(doc).encode("utf-8"))
    for rel, value in sorted((doc.references or {}).items()):
        target = folder / _safe_relative(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(decode_reference(value))
        if is_executable(value):
            target.chmod(0o755)
    return folder
