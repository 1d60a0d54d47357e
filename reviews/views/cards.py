"""What a proposal card shows, computed for a whole page of proposals in a fixed number of queries.

Evidence comes in one prefetch (with only the session columns a card shows: a transcript can be megabytes), and
the current text of every target of every card in one query per target kind, so a page of 100 cards costs what a
page of 10 does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Prefetch
from django.urls import reverse

from memory.models import MemoryEntry
from skills_registry.models import Skill

from .. import diffs
from ..models import Proposal, ProposalEvidence, ProposalOperation, TargetKind

EVIDENCE_FIELDS = (
    "id",
    "team",
    "proposal",
    "session",
    "event_index",
    "excerpt",
    "trust",
    "session__id",
    "session__external_id",
    "session__agent",
    "session__task",
    "session__outcome",
    "session__started_at",
)


@dataclass
class TargetView:
    key: str
    role: str
    exists: bool = False
    current: str | None = None
    current_hash: str = ""
    expected_hash: str = ""
    object_id: int | None = None
    archived: bool = False
    segments: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """The target is not what the dream read: approving would conflict, so the card says so up front."""
        return not self.exists or self.current_hash != self.expected_hash

    @property
    def stats(self) -> dict:
        return diffs.stats(self.segments)


def with_card_data(queryset):
    """The queryset with what a card needs joined or prefetched."""
    evidence = ProposalEvidence.objects.select_related("session").only(*EVIDENCE_FIELDS).order_by("id")
    return queryset.select_related("team", "store", "decided_by").prefetch_related(
        Prefetch("evidence", queryset=evidence)
    )


def _current_memory(proposals) -> dict:
    wanted = {(p.store_id, key) for p in proposals if p.target_kind == TargetKind.MEMORY for key in p.targets or []}
    if not wanted:
        return {}
    rows = MemoryEntry.objects.filter(store_id__in={s for s, _ in wanted}, key__in={k for _, k in wanted}).only(
        "id", "store_id", "key", "content", "content_hash", "status"
    )
    return {(e.store_id, e.key): e for e in rows}


def _current_skills(proposals) -> dict:
    wanted = {(p.team_id, name) for p in proposals if p.target_kind == TargetKind.SKILL for name in p.targets or []}
    if not wanted:
        return {}
    rows = Skill.objects.filter(team_id__in={t for t, _ in wanted}, name__in={n for _, n in wanted}).only(
        "id", "team_id", "name", "body", "content_hash", "status"
    )
    return {(s.team_id, s.name): s for s in rows}


def _role(proposal: Proposal, position: int) -> str:
    if proposal.operation == ProposalOperation.MERGE:
        return "kept, rewritten with the merged text" if position == 0 else f"archived into {proposal.targets[0]}"
    if proposal.operation == ProposalOperation.REMOVE:
        return "archived"
    return "rewritten"


def _target_view(proposal: Proposal, position: int, key: str, memory: dict, skills: dict) -> TargetView:
    view = TargetView(key=key, role=_role(proposal, position), expected_hash=(proposal.target_hashes or {}).get(key))
    if proposal.target_kind == TargetKind.SKILL:
        obj = skills.get((proposal.team_id, key))
        text = obj.body if obj else None
    else:
        obj = memory.get((proposal.store_id, key))
        text = obj.content if obj else None
    if obj is not None:
        view.exists, view.current, view.current_hash, view.object_id = True, text, obj.content_hash, obj.pk
        view.archived = obj.status == "archived"
    if proposal.operation == ProposalOperation.REMOVE:
        view.segments = diffs.only_removed(text)
    else:
        view.segments = diffs.word_diff(text, proposal.content)
    return view


def _viewer_url(base: str, ev: ProposalEvidence) -> str:
    """The session viewer at the evidence's event, with its excerpt to highlight (see memory.views.sessions)."""
    query = urlencode({"event": ev.event_index, "mark": ev.excerpt[:300]})
    return f"{base.replace('/0/', f'/{ev.session_id}/')}?{query}#event-{ev.event_index}"


def decorate(proposals: list[Proposal]) -> list[Proposal]:
    """Attach ``card_targets`` (each target's current text and the diff against it) and ``card_segments``."""
    memory, skills = _current_memory(proposals), _current_skills(proposals)
    # One reverse() for every evidence link of the page (a page has up to a few hundred).
    session_base = reverse("memory:session", args=[0])
    for p in proposals:
        for ev in p.evidence.all():
            ev.viewer_url = _viewer_url(session_base, ev)
        p.card_targets = [_target_view(p, i, key, memory, skills) for i, key in enumerate(p.targets or [])]
        p.card_segments = diffs.only_added(p.content) if p.operation == ProposalOperation.ADD else []
        p.card_kind = (p.kind or "").replace("_", " ")
        p.card_conflict = any(t.changed for t in p.card_targets)
        p.card_edited = p.original_content is not None and p.original_content != p.content
        if p.card_edited:
            p.card_edit_segments = diffs.word_diff(p.original_content, p.content)
    return proposals
