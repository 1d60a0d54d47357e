"""What a proposal card shows, computed for a whole page of proposals in a fixed number of queries.

Evidence comes in three queries whatever the number of evidence rows (reviews.views.card_evidence), and the current
text of every target of every card in one query per target kind, so a page of 100 cards costs what a page of 10
does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import OuterRef, Q
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.timesince import timesince

from memory.models import MemoryEntry, MemoryVersion
from memory.services import first_proposal_id, replacement_key, revivable_by
from skills_registry.models import Skill

from .. import diffs
from ..models import Proposal, ProposalOperation, ProposalStatus, TargetKind
from . import card_evidence, card_html

DECIDED = (ProposalStatus.APPLIED, ProposalStatus.REJECTED, ProposalStatus.CONFLICT)
EARLIER_SHOWN = 3  # earlier decisions on the same change a card lists
RATIONALE_CHARS = 200  # a card shows the start of the rationale
CARD_URLS = ("proposal", "approve", "reject", "edit", "evidence", "budget")  # reversed once per page, not per card


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
    segments: Sequence = ()
    block: bool = False  # the diff is by lines (heavily changed text), not by words
    entry_url: str = ""  # the entry's page (memory targets that exist)
    version: int | None = None  # the target's version now
    seen_version: int | None = None  # the version the proposal was prepared against
    changed_by: str = ""  # who wrote the current version, when it is not the one the proposal saw
    changed_at: object = None

    @property
    def changed(self) -> bool:
        """The target is not what the dream read: approving would conflict, so the card says so up front."""
        return not self.exists or self.current_hash != self.expected_hash

    @property
    def diff_html(self):
        return card_html.diff(self.segments, self.block)

    @property
    def stats(self) -> dict:
        return diffs.stats(self.segments)

    @property
    def archiving(self) -> bool:
        """The change archives this target (a remove, or a merge's absorbed entry): drawn as archived, no diff."""
        return self.role.startswith("archived")

    @property
    def unchanged(self) -> bool:
        return not any(op != diffs.EQ for op, _ in self.segments)

    @property
    def explanation(self) -> str:
        """Why approving would fail, in words (no hashes)."""
        if not self.exists:
            return f"{self.key} no longer exists."
        if self.archived:
            return f"{self.key} has been archived since."
        seen = f"version {self.seen_version}" if self.seen_version else "an earlier text"
        now = f"version {self.version}" if self.version else "a newer text"
        who = f" by {self.changed_by}" if self.changed_by else ""
        return f"{self.key} changed{who} since the dream read it: the dream read {seen}, it is at {now}."


def with_card_data(queryset):
    """The queryset with what a card needs joined (its evidence comes in reviews.views.card_evidence)."""
    return queryset.select_related("team", "store", "decided_by")


def _current_memory(proposals) -> dict:
    """The current entries every card names: targets, and the key each add would write (to show it is taken)."""
    wanted = {(p.store_id, key) for p in proposals if p.target_kind == TargetKind.MEMORY for key in p.targets or []}
    wanted |= {
        (p.store_id, p.write_key)
        for p in proposals
        if p.target_kind == TargetKind.MEMORY and p.operation == ProposalOperation.ADD
    }
    if not wanted:
        return {}
    rows = (
        MemoryEntry.objects.filter(store_id__in={s for s, _ in wanted}, key__in={k for _, k in wanted})
        .only("id", "store_id", "key", "content", "content_hash", "status", "version")
        .annotate(created_by=first_proposal_id(OuterRef("pk")))
    )
    return {(e.store_id, e.key): e for e in rows}


def _current_skills(proposals) -> dict:
    wanted = {(p.team_id, name) for p in proposals if p.target_kind == TargetKind.SKILL for name in p.targets or []}
    if not wanted:
        return {}
    rows = Skill.objects.filter(team_id__in={t for t, _ in wanted}, name__in={n for _, n in wanted}).only(
        "id", "team_id", "name", "body", "content_hash", "status", "version"
    )
    return {(s.team_id, s.name): s for s in rows}


def _role(proposal: Proposal, position: int) -> str:
    if proposal.operation == ProposalOperation.MERGE:
        return "kept, holds the merged text" if position == 0 else f"archived into {proposal.targets[0]}"
    if proposal.operation == ProposalOperation.REMOVE:
        return "archived"
    return "rewritten"


def _target_view(
    proposal: Proposal, position: int, key: str, memory: dict, skills: dict, entry_base: str
) -> TargetView:
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
        view.version = obj.version
        view.entry_url = entry_base.replace("/0/", f"/{obj.pk}/")
    view.seen_version = (proposal.target_versions or {}).get(key)
    if view.archiving:
        view.segments = diffs.only_removed(text)
    else:
        view.segments, view.block = diffs.readable_diff_kept(text, proposal.content)
    return view


def _conflict_details(changed: list[TargetView]) -> None:
    """For each changed memory target: who wrote its current version, and which version the proposal saw (by its
    hash when the proposal predates target_versions). One query for the page."""
    changed = [t for t in changed if t.exists and t.object_id and t.version]
    if not changed:
        return
    wanted = Q()
    for t in changed:
        wanted |= Q(entry_id=t.object_id, number=t.version)
        if not t.seen_version and t.expected_hash:
            wanted |= Q(entry_id=t.object_id, content_hash=t.expected_hash)
    rows = MemoryVersion.objects.filter(wanted).select_related("author_user", "author_key")
    by_entry: dict[int, list] = {}
    for v in rows.only(
        "entry_id",
        "number",
        "content_hash",
        "author_kind",
        "author_run_id",
        "created_at",
        "author_user__username",
        "author_key__name",
    ):
        by_entry.setdefault(v.entry_id, []).append(v)
    for t in changed:
        for v in by_entry.get(t.object_id, []):
            if v.number == t.version:
                t.changed_by, t.changed_at = _who(v), v.created_at
            elif not t.seen_version and v.content_hash == t.expected_hash:
                t.seen_version = v.number


def _who(version) -> str:
    """Who wrote a version, in a word or two (for "changed by ... since the dream read it")."""
    if version.author_user_id:
        return version.author_user.get_username()
    if version.author_key_id:
        return f"agent key {version.author_key.name}"
    if version.author_run_id:
        return f"dream run #{version.author_run_id}"
    return version.get_author_kind_display()


def _writes(p: Proposal) -> list[dict]:
    """What approval writes, exactly: (verb, key) per entry, in the order apply_change writes them."""
    if p.operation == ProposalOperation.ADD:
        return [{"verb": "create", "key": p.write_key}]
    if p.operation == ProposalOperation.UPDATE and p.supersedes:  # a contradiction: a new entry, the old one kept
        return [
            w
            for k in p.targets[:1]
            for w in ({"verb": "create", "key": replacement_key(k)}, {"verb": "supersede", "key": k})
        ]
    if p.operation == ProposalOperation.UPDATE:
        return [{"verb": "rewrite", "key": k} for k in p.targets[:1]]
    if p.operation == ProposalOperation.REMOVE:
        return [{"verb": "archive", "key": k} for k in p.targets]
    keep, *rest = p.targets or [""]
    folded = "supersede" if p.supersedes else "archive"
    return [{"verb": "rewrite", "key": keep}, *({"verb": folded, "key": k} for k in rest)]


def _related(proposals) -> tuple[dict[str, list], dict[str, list]]:
    """Earlier decisions on the same change (same signature, any store of the team) or, for an add, on the same
    key, newest first; and the same change pending in other stores (one decision covers them). One query."""
    signatures = {p.signature for p in proposals}
    if not signatures:
        return {}, {}
    add_keys = {p.write_key for p in proposals if p.operation == ProposalOperation.ADD}
    rows = (
        Proposal.objects.filter(
            team_id__in={p.team_id for p in proposals}, status__in=(*DECIDED, ProposalStatus.PENDING)
        )
        .filter(Q(signature__in=signatures) | Q(operation=ProposalOperation.ADD, key_hint__in=add_keys))
        .select_related("decided_by", "store")
        .only(
            "id",
            "team_id",
            "store_id",
            "signature",
            "key_hint",
            "operation",
            "status",
            "decided_at",
            "decision_reason",
            "decided_by_policy",
            "decided_by__username",
            "store__name",
            "store__slug",
        )
        .order_by("-decided_at", "-id")[:1000]
    )
    earlier: dict[str, list] = {}
    pending: dict[str, list] = {}
    for row in rows:
        if row.status == ProposalStatus.PENDING:
            if row.signature in signatures:
                pending.setdefault(row.signature, []).append(row)
            continue
        for key in {row.signature, f"add:{row.key_hint}" if row.operation == ProposalOperation.ADD else ""} - {""}:
            earlier.setdefault(key, []).append(row)
    return earlier, pending


def decorate(proposals: list[Proposal], *, every_session: bool = False) -> list[Proposal]:
    """Attach what a card shows, for a whole page in a fixed number of queries: ``card_targets`` (each target's
    current text and the diff against it), evidence by session (reviews.views.card_evidence: the representative
    sessions, counts, and with ``every_session`` the sessions behind "n more"), ``card_writes``
    (exactly what approval writes), conflicts in words, earlier decisions and the same change in other stores."""
    memory, skills = _current_memory(proposals), _current_skills(proposals)
    earlier, elsewhere = _related(proposals)
    # One reverse() for every evidence link of the page (a page has up to a few hundred).
    session_base = reverse("memory:session", args=[0])
    urls = {name: reverse(f"reviews:{name}", args=[0]) for name in CARD_URLS}
    run_url = reverse("reviews:run", args=[0])
    entry_base = reverse("memory:entry", args=[0])
    card_evidence.attach(proposals, session_base, every=every_session)
    changed: list[TargetView] = []
    for p in proposals:
        p.card_targets = [_target_view(p, i, key, memory, skills, entry_base) for i, key in enumerate(p.targets or [])]
        p.card_add_diff = card_html.diff(diffs.only_added(p.content)) if p.operation == ProposalOperation.ADD else ""
        p.card_kind = (p.kind or "").replace("_", " ")
        p.card_urls = {name: url.replace("/0/", f"/{p.pk}/") for name, url in urls.items()}
        p.card_age = timesince(p.created_at) if p.created_at else ""
        p.card_title = p.title
        p.card_run_url = run_url.replace("/0/", f"/{p.run_id}/") if p.run_id else ""
        p.card_rationale = card_html.cut(p.rationale or "", RATIONALE_CHARS)
        p.card_percent = p.prevalence_percent
        p.card_confidence = floatformat(p.confidence, 2)
        p.card_span = p.card_facts.span
        p.card_writes = _writes(p)
        taken = None
        if p.operation == ProposalOperation.ADD and p.target_kind == TargetKind.MEMORY:
            taken = memory.get((p.store_id, p.write_key))
            if taken is not None and revivable_by(taken, p.pk, taken.created_by):
                taken = None  # its own entry, archived by the undo of its approval: approving brings it back
        p.card_key_taken = taken
        p.card_changed = [t for t in p.card_targets if t.changed]
        changed += [t for t in p.card_changed if p.target_kind == TargetKind.MEMORY]
        p.card_conflict = bool(p.card_changed) or taken is not None
        p.card_rebasable = (
            bool(p.card_changed)
            and p.operation != ProposalOperation.ADD
            and all(t.exists and not t.archived for t in p.card_targets)
        )
        p.card_dropped = []
        if p.operation == ProposalOperation.MERGE:
            p.card_dropped = diffs.dropped_clauses([t.current for t in p.card_targets], p.content)
        p.card_edited = p.original_content is not None and p.original_content != p.content
        if p.card_edited:
            p.card_edit_diff = card_html.diff(diffs.word_diff(p.original_content, p.content))
        similar = earlier.get(p.signature, [])
        if p.operation == ProposalOperation.ADD:
            by_pk = {r.pk: r for r in similar + earlier.get(f"add:{p.write_key}", [])}
            similar = sorted(
                by_pk.values(), key=lambda r: r.decided_at.timestamp() if r.decided_at else 0, reverse=True
            )
        p.card_earlier = similar[:EARLIER_SHOWN]
        p.card_elsewhere = sorted(
            (r for r in elsewhere.get(p.signature, []) if r.store_id != p.store_id), key=lambda r: r.store.slug
        )
        p.card_also = ",".join(str(r.pk) for r in p.card_elsewhere)
    _conflict_details(changed)
    return proposals
