"""Who made a change and why, shared by every app that keeps versions (memory entries, skills).

A versioned service (``memory.services``, ``skills_registry.services``) takes an ``Author`` and a ``Provenance``
with every write and records them on the version it writes. Its refusals share two bases, so that a caller applying
a change to either app (``reviews.services.apply_proposal``) catches one type per outcome: ``WriteConflict`` (the
target changed since the caller read it: HTTP 412, a proposal becomes a conflict) and ``InvalidChange`` (the change
itself is refused).

These live in ``dreamweb`` because every app depends on it and none of them may depend on another one upwards.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from django.db import models


def content_hash(text: str) -> str:
    """sha256 of a text: what a proposal names as the state of its targets (an entry's ETag names its version)."""
    return hashlib.sha256(text.encode()).hexdigest()


class AuthorKind(models.TextChoices):
    USER = "user", "Person"
    AGENT = "agent", "Agent key"
    DREAM = "dream", "Dream run"
    SYSTEM = "system", "System"


class Origin(models.TextChoices):
    """Where a text came from, as its readers (and the dream's risk rules) weigh it."""

    HUMAN = "human", "Written by a person"
    AGENT = "agent", "Written by an agent in-band"
    DREAM = "dream", "Proposed by a dream"
    IMPORT = "import", "Imported"


@dataclass(frozen=True)
class Author:
    """Who makes a change: a person, an agent key, a dream run, or the system (imports)."""

    kind: str
    user: object = None
    key: object = None
    run_id: int | None = None

    @classmethod
    def person(cls, user) -> Author:
        return cls(AuthorKind.USER, user=user)

    @classmethod
    def agent(cls, key) -> Author:
        return cls(AuthorKind.AGENT, key=key)

    @classmethod
    def dream(cls, run_id: int | None) -> Author:
        return cls(AuthorKind.DREAM, run_id=run_id)

    @classmethod
    def system(cls) -> Author:
        return cls(AuthorKind.SYSTEM)

    @property
    def origin(self) -> str:
        """The origin of a text this author writes outside any proposal (see ``origin_of``)."""
        return origin_of(self.kind, None)

    def version_fields(self) -> dict:
        return {
            "author_kind": self.kind,
            "author_user": self.user,
            "author_key": self.key,
            "author_run_id": self.run_id,
        }


def origin_of(author_kind: str, proposal_id: int | None) -> str:
    """Where the text of a version came from: the one rule, applied to the latest version of an entry.

    A text that a proposal carried came from a dream, whoever approved it (a reviewer approves a dream's text, he does
    not write it); otherwise the author's kind says it. Anything without a named author (imports, the demo) is
    ``import``."""
    if proposal_id is not None:
        return Origin.DREAM
    return {
        AuthorKind.USER: Origin.HUMAN,
        AuthorKind.AGENT: Origin.AGENT,
        AuthorKind.DREAM: Origin.DREAM,
    }.get(author_kind, Origin.IMPORT)


def provenance_label(
    author_kind: str,
    *,
    proposal_id: int | None = None,
    run_id: int | None = None,
    user_name: str | None = None,
    key_name: str | None = None,
) -> str:
    """What a page says about who made a version: the same words on every page (entries, skills, history).

    A dream change approved by a reviewer is "Dream change approved by <reviewer>", one a policy applied "Dream change
    applied by the store's policy"; a person's own edit "Written by <person>", an agent's in-band write "Written
    in-band by agent key <name>", an import "Imported"."""
    person = user_name or "a deleted user"
    if proposal_id is not None:
        if author_kind == AuthorKind.USER:
            return f"Dream change approved by {person}"
        if author_kind == AuthorKind.DREAM:
            return "Dream change applied by the store's policy"
        return "Dream change"
    if author_kind == AuthorKind.USER:
        return f"Written by {person}"
    if author_kind == AuthorKind.AGENT:
        return f"Written in-band by agent key {key_name or '(deleted)'}"
    if author_kind == AuthorKind.DREAM:
        return f"Written by dream run #{run_id}" if run_id else "Written by a dream run"
    return "Imported"


class VersionProvenance:
    """Mixed into a version model with ``author_kind``, ``author_user``, ``author_key``, ``author_run_id`` and
    ``proposal_id`` (memory and skill versions): its origin and its label, by the rules above."""

    @property
    def origin(self) -> str:
        return origin_of(self.author_kind, self.proposal_id)

    def get_origin_display(self) -> str:
        return Origin(self.origin).label

    @property
    def provenance_label(self) -> str:
        return provenance_label(
            self.author_kind,
            proposal_id=self.proposal_id,
            run_id=self.author_run_id,
            user_name=self.author_user.get_username() if self.author_user_id else None,
            key_name=self.author_key.name if self.author_key_id else None,
        )


@dataclass
class Provenance:
    """Why a change was made: the session it came from, the proposal that carried it, the evidence."""

    session: object = None
    proposal_id: int | None = None
    reason: str = ""
    evidence: list = field(default_factory=list)


class ChangeRefused(Exception):
    """Base class of every refusal of a versioned service: nothing was written."""


class InvalidChange(ChangeRefused):
    """The change itself is refused (a bad key or name, an empty text, an unknown target or operation)."""


class WriteConflict(ChangeRefused):
    """The target changed since the caller read it: the write named a version or content hash no longer current.

    ``expected`` is what the caller named, ``actual`` the current one. A subclass says what its targets are
    (``target``) and which of their fields names them (``name_field``)."""

    target = "target"
    name_field = "pk"

    def __init__(self, obj, expected: str | None, actual: str):
        self.obj, self.expected, self.actual = obj, expected, actual
        name = getattr(obj, self.name_field)
        super().__init__(f"{self.target} {name!r} changed: prepared against {expected or 'nothing'}, now {actual}")

    @classmethod
    def check(cls, obj, expected: str | None) -> None:
        """Optimistic concurrency: every write names the content hash it was prepared against, and is refused when
        ``obj`` (read under a row lock) no longer has it."""
        if expected != obj.content_hash:
            raise cls(obj, expected, obj.content_hash)
