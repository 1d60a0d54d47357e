"""Policy and selection: the store's autonomy policy, the sessions a cycle reads, and the texts Dreamweb itself
served into them (which the analyzers do not count as new evidence)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import Exists, OuterRef, Q, QuerySet

from memory.models import NEWEST, AgentSession, ContextServe, MemoryEntry, MemoryStore, MemoryVersion
from skills_registry.models import Skill

from ..models import AnalysisStatus, AutonomyPolicy, RunStatus, SessionAnalysis


def get_policy(store: MemoryStore) -> AutonomyPolicy:
    """The store's autonomy policy; a default (manual) one is created on first use."""
    policy, _ = AutonomyPolicy.objects.get_or_create(store=store, defaults={"team_id": store.team_id})
    return policy


def select_sessions(
    store: MemoryStore,
    *,
    limit: int,
    all_sessions: bool = False,
    agents: Sequence[str] = (),
    exclude_run_id: int | None = None,
) -> list[int]:
    """Ids of the sessions a cycle over this store reads: only the store's team's sessions (optionally only these
    agents) whose events retention has not dropped, not consumed by an earlier non-dry-run cycle of this store
    unless ``all_sessions``, newest first, at most ``limit``. A session is consumed when a cycle that did not fail
    analysed it (or is analysing it now); a session whose analysis failed is read again next time."""
    return list(
        selected_sessions(store, limit=limit, all_sessions=all_sessions, agents=agents, exclude_run_id=exclude_run_id)
    )


def selected_sessions(
    store: MemoryStore,
    *,
    limit: int,
    all_sessions: bool = False,
    agents: Sequence[str] = (),
    exclude_run_id: int | None = None,
) -> QuerySet:
    """select_sessions as a query not yet run (the ids, flat, in their order): dispatch writes the run's analyses
    from it in one statement, so the selected ids never come to Python."""
    sessions = AgentSession.objects.filter(team_id=store.team_id, events_pruned_at__isnull=True)
    if agents:
        sessions = sessions.filter(agent__in=list(agents))
    if not all_sessions:
        not_failed = [*RunStatus.completed(), RunStatus.RUNNING, RunStatus.AGGREGATING]
        consumed = SessionAnalysis.objects.filter(
            team_id=store.team_id, session_id=OuterRef("pk"), run__store=store, run__dry_run=False
        ).filter(
            Q(status=AnalysisStatus.DONE, run__status__in=not_failed)
            | Q(status=AnalysisStatus.PENDING, run__status=RunStatus.RUNNING)
        )
        if exclude_run_id is not None:
            consumed = consumed.exclude(run_id=exclude_run_id)
        # NOT EXISTS, probed per candidate (SessionAnalysis's session index) while the team's newest sessions are
        # read in index order (AgentSession's agentsession_team_newest) until ``limit`` are found: the cost follows
        # the limit, not the number of sessions stored or consumed (NOT IN would hash every consumed id first).
        sessions = sessions.filter(~Exists(consumed))
    # A copy of a transcript stored earlier (AgentSession.fingerprint) is not read: the earlier one stands for it.
    # (No OR with the empty fingerprint: the subquery's own condition is the partial index's, and an empty one finds
    # nothing, so the planner probes the index per candidate as it reads the newest first.)
    earlier = AgentSession.objects.filter(
        team_id=store.team_id, fingerprint=OuterRef("fingerprint"), id__lt=OuterRef("pk")
    ).exclude(fingerprint="")
    sessions = sessions.filter(~Exists(earlier))
    ordered = sessions.order_by(*NEWEST)
    return ordered.values_list("pk", flat=True)[: max(0, int(limit))]


def served_texts(team_id: int, external_ids: Iterable[str]) -> dict[str, list[str]]:
    """The texts Dreamweb itself served into each session (memory entry versions and skills), by external id:
    the analyzers do not count them as new evidence (dreams do not eat dreams)."""
    serves = list(
        ContextServe.objects.filter(team_id=team_id, session_external_id__in=list(external_ids)).values_list(
            "session_external_id", "entries", "skills"
        )
    )
    if not serves:
        return {}
    entry_ids = {int(e["entry_id"]) for _, entries, _ in serves for e in entries or [] if e.get("entry_id")}
    versions = {
        (entry_id, number): content
        for entry_id, number, content in MemoryVersion.objects.filter(
            team_id=team_id, entry_id__in=entry_ids
        ).values_list("entry_id", "number", "content")
    }
    current = dict(MemoryEntry.objects.filter(team_id=team_id, pk__in=entry_ids).values_list("pk", "content"))
    skill_names = {s["name"] for _, _, skills in serves for s in skills or [] if s.get("name")}
    skill_texts: dict[str, str] = {}
    if skill_names:
        for name, description, body in Skill.objects.filter(team_id=team_id, name__in=skill_names).values_list(
            "name", "description", "body"
        ):
            skill_texts[name] = f"{description}\n{body}"
    out: dict[str, list[str]] = {}
    for external_id, entries, skills in serves:
        texts = out.setdefault(external_id, [])
        for e in entries or []:
            entry_id = int(e.get("entry_id") or 0)
            text = versions.get((entry_id, e.get("version"))) or current.get(entry_id)
            if text:
                texts.append(text)
        texts += [skill_texts[s["name"]] for s in skills or [] if s.get("name") in skill_texts]
    return out


def delivered_notes(team_id: int, sessions: Iterable[AgentSession]) -> dict[str, list[str]]:
    """The notes an agent delivered live for each of these sessions (dreamweb-mcp's ``remember``), by the session's
    external id. Each such note is stored at once as a small session of its own (``metadata.note_of`` names the
    agent's session), which is its evidence; the session's transcript, pushed later, holds the same note again (the
    ``mcp__dreamweb__remember`` call, imported as an in-band note). For that transcript the delivered notes are
    already known, like served memory, so one note is one piece of evidence. A subagent's transcript (its
    ``metadata.parent_session`` names the session) counts as its session's: its tool calls reach the same server."""
    family: dict[str, set[str]] = {}
    for session in sessions:
        parent = (session.metadata or {}).get("parent_session")
        for owner in {session.external_id, parent if isinstance(parent, str) else ""} - {""}:
            family.setdefault(owner, set()).add(session.external_id)
    if not family:
        return {}
    # has_key: the condition of the partial index agentsession_note_of, so the lookup reads the notes only, not every
    # session of the team (a scan per batch of a dream over a million sessions).
    rows = AgentSession.objects.filter(
        team_id=team_id, metadata__has_key="note_of", metadata__note_of__in=list(family)
    ).values_list("metadata__note_of", "events")
    out: dict[str, list[str]] = {}
    for note_of, events in rows:
        notes = [
            e["content"]
            for e in events or []
            if isinstance(e, dict) and e.get("type") == "memory_write" and isinstance(e.get("content"), str)
        ]
        for external_id in family.get(str(note_of), ()):
            out.setdefault(external_id, []).extend(notes)
    return out
