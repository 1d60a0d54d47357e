"""Feedback on memory entries (from agents through the API, or from people): normalised to [-1, 1] and folded
into the entry's mean rating in one UPDATE, so concurrent ratings never lose each other."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from .models import Feedback, MemoryEntry


def normalise(*, helpful: bool | None = None, score: int | None = None) -> float:
    """helpful -> +1 / -1; a 1..5 score -> (score - 3) / 2, so 1 is -1, 3 is 0 and 5 is +1."""
    if (helpful is None) == (score is None):
        raise ValueError("give exactly one of helpful or score")
    if helpful is not None:
        return 1.0 if helpful else -1.0
    if not 1 <= int(score) <= 5:
        raise ValueError("score must be 1 to 5")
    return (int(score) - 3) / 2


def record_feedback(
    entry: MemoryEntry,
    *,
    helpful: bool | None = None,
    score: int | None = None,
    source: str = "",
    comment: str = "",
    session_external_id: str = "",
    agent_key=None,
    user=None,
) -> tuple[Feedback, MemoryEntry]:
    value = normalise(helpful=helpful, score=score)
    with transaction.atomic():
        feedback = Feedback.objects.create(
            team_id=entry.team_id,
            entry=entry,
            score=value,
            source=source[:100],
            comment=comment,
            session_external_id=(session_external_id or "")[:200],
            agent_key=agent_key,
            user=user,
        )
        # Both right-hand sides read the row's old values (one SQL UPDATE): the running mean stays exact.
        MemoryEntry.objects.filter(pk=entry.pk).update(
            rating=(F("rating") * F("rating_count") + value) / (F("rating_count") + 1),
            rating_count=F("rating_count") + 1,
        )
        entry.refresh_from_db(fields=["rating", "rating_count"])
    return feedback, entry
