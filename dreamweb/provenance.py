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
        return {
            AuthorKind.USER: Origin.HUMAN,
            AuthorKind.AGENT: Origin.AGENT,
            AuthorKind.DREAM: Origin.DREAM,
        }.get(self.kind, Origin.IMPORT)

    def version_fields(self) -> dict:
        return {
            "author_kind": self.kind,
            "author_user": self.user,
            "author_key": self.key,
            "author_run_id": self.run_id,
        }


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
