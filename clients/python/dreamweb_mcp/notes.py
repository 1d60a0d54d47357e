"""What ``remember`` sends: a note, delivered at once as a small session of its own, linked to the agent's session.

One note is one piece of evidence. The note session is that evidence, and the next dream sees it whether or not the
agent's transcript is ever pushed. When the transcript of the same session is pushed later (a hook, an import), it
holds the same note again (the ``mcp__dreamweb__remember`` call, which the importers turn into an in-band note); the
dream then treats the notes delivered for that session like the memory it served into it: already known, not new
evidence (reviews.dreams.selection.delivered_notes). The link is ``metadata.note_of``, the session's id as its
transcript names it (Claude Code's ``sessionId``, Codex's thread id).

The note session's id is derived from the session and the text, so the same note remembered twice in one session is
stored once.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

NOTE_PREFIX = "dreamweb-note-"
SOURCE = "dreamweb-mcp"


def note_external_id(session: str, content: str) -> str:
    digest = hashlib.sha256(f"{session}\n{content}".encode()).hexdigest()[:32]
    return NOTE_PREFIX + digest


def note_session(
    content: str, *, session: str, agent: str, task: str | None, store: str | None, now: datetime | None = None
) -> dict:
    """The canonical session (contracts/session.schema.json) carrying one in-band note."""
    ts = (now or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    event: dict = {"type": "memory_write", "content": content, "ts": ts}
    if store:
        event["store"] = store
    return {
        "external_id": note_external_id(session, content),
        "agent": agent,
        "task": task,
        "started_at": ts,
        "ended_at": ts,
        "outcome": "unknown",
        "metadata": {"source": SOURCE, "note_of": session},
        "events": [event],
    }
