"""Memory effectiveness from what the dreams found in each session.

``memory.effectiveness`` knows what was served, rated and when each entry went live; this module tells it what
happened in each analysed session: which entries' mistakes recurred there and which entries the session showed
wrong. A session's mistake is an entry's when

* the finding has the grouping identity (``aggregate.signal_key``) of a finding the entry was born from (the
  evidence its versions name: the session and event a dream's proposal quoted), or
* the aggregation's own test says the memory already holds the lesson (``aggregate.lesson_match`` 'known'); 'stale'
  (an entry says what the session corrected) is a contradiction.

Each session is read once, from its latest completed analysis by a recorded (not dry) run of this store. Findings
that repeat served memory (flagged ``served``: never evidence for a proposal) count here: they are the mistake made
again although the lesson was in the context.
"""

from __future__ import annotations

from collections import defaultdict
from types import MappingProxyType

from memory import effectiveness as eff
from memory.effectiveness import Effect, SessionSignal
from memory.models import ContextServe, MemoryEntry, MemoryStore

from .analysis import normalize as nz
from .analysis.aggregate import MemoryIndex, lesson_match, signal_key
from .models import AnalysisStatus, SessionAnalysis

# Most analysed sessions read for one store's figures (newest first).
MAX_SESSIONS = 20_000


def _analyses(store: MemoryStore) -> list[tuple]:
    """(session id, external id, agent, task, time, findings) of the store's analysed sessions, the latest completed
    analysis of each, newest first."""
    rows = (
        SessionAnalysis.objects.filter(
            team_id=store.team_id, run__store=store, run__dry_run=False, status=AnalysisStatus.DONE
        )
        .order_by("-session__started_at", "-session_id", "-id")
        .values_list(
            "session_id",
            "session__external_id",
            "session__agent",
            "session__task",
            "session__started_at",
            "session__ingested_at",
            "findings",
        )
    )
    seen: set[int] = set()
    names: dict[str, str] = {}
    out = []
    for sid, eid, agent, task, started, ingested, findings in rows.iterator(chunk_size=1000):
        if sid in seen:
            continue
        seen.add(sid)
        # Held for every session read (up to MAX_SESSIONS): one string per agent and task name, no list for a
        # session without findings.
        found = [f for f in findings or () if isinstance(f, dict)] or ()
        agent = agent if agent is None else names.setdefault(agent, agent)
        task = task if task is None else names.setdefault(task, task)
        out.append((sid, eid, agent, task, started or ingested, found))
        if len(out) >= MAX_SESSIONS:
            break
    return out


def _words_of(f: dict) -> list[str]:
    """The words a finding says its session used about the mistake (for a rewording of a missed lesson)."""
    parts = [*(f.get("said_new") or ()), *(f.get("said_old") or ()), f.get("query") or "", f.get("old") or ""]
    return [w for p in parts if isinstance(p, str) for w in nz.words(p) if w not in nz.STOPWORDS and len(w) > 2]


def session_signals(store: MemoryStore, entries: list[MemoryEntry] | None = None) -> list[SessionSignal]:
    """One SessionSignal per analysed session of the store."""
    if entries is None:
        entries = list(MemoryEntry.objects.filter(team_id=store.team_id, store=store))
    analyses = _analyses(store)
    origin = eff.origin_evidence(store, [e.pk for e in entries])
    born_of: dict[tuple[int, int], set[int]] = defaultdict(set)
    for entry_id, pairs in origin.items():
        for pair in pairs:
            born_of[pair].add(entry_id)
    # The identities of the findings each entry was born from.
    lesson_keys: dict[str, set[int]] = defaultdict(set)
    for sid, _, _, _, _, findings in analyses:
        for f in findings:
            for ev in f.get("evidence") or ():
                for entry_id in born_of.get((sid, int(ev.get("event_index") or 0)), ()):
                    lesson_keys[signal_key(f)].add(entry_id)
    # Scope left out of the index: a lesson scoped to one agent still recognises its mistake in another agent's
    # session (a retrieval miss the scope caused).
    index = MemoryIndex(
        [{"key": str(e.pk), "content": e.content, "content_hash": e.content_hash, "origin": e.origin} for e in entries]
    )
    signals = []
    for sid, external_id, agent, task, at, findings in analyses:
        recurred: set[int] = set()
        contradicted: set[int] = set()
        words: dict[int, list[str]] = defaultdict(list)
        where: dict[int, tuple[int, str]] = {}
        for f in findings:
            hit = set(lesson_keys.get(signal_key(f), ()))
            state, entry = lesson_match(f, index)
            if entry is not None and state == "known":
                hit.add(int(entry.key))
            elif entry is not None and state == "stale":
                contradicted.add(int(entry.key))
            recurred |= hit
            first = next(iter(f.get("evidence") or ()), {})
            for entry_id in hit:
                words[entry_id] += _words_of(f)
                where.setdefault(entry_id, (int(first.get("event_index") or 0), str(first.get("excerpt") or "")))
        signals.append(
            SessionSignal(
                external_id=external_id,
                at=at,
                agent=agent or "",
                task=task,
                recurred=frozenset(recurred) if recurred else NOTHING,
                contradicted=frozenset(contradicted - recurred) if contradicted - recurred else NOTHING,
                words=dict(words) if words else NO_ENTRIES,
                evidence=where or NO_ENTRIES,
                session_id=sid,
            )
        )
    return signals


# Shared by the signals of the sessions in which nothing recurred (most of them); read-only.
NOTHING: frozenset = frozenset()
NO_ENTRIES = MappingProxyType({})


def store_effects(store: MemoryStore, entries=None) -> list[Effect]:
    """The effectiveness of the store's entries (or of ``entries``, a queryset of them), in key order."""
    rows = list(entries if entries is not None else MemoryEntry.objects.filter(team_id=store.team_id, store=store))
    return eff.measure(store, session_signals(store, rows), entries=rows)


def entry_effect(entry: MemoryEntry) -> Effect:
    """One entry's figures (its lesson is matched against every entry of the store, as a dream would)."""
    store = entry.store
    entries = list(MemoryEntry.objects.filter(team_id=store.team_id, store=store))
    return eff.measure(store, session_signals(store, entries), entries=[e for e in entries if e.pk == entry.pk])[0]


def context_queries(store: MemoryStore, sessions: list[str]) -> dict[str, list[str]]:
    """The sessions among these that pulled context from this store, with what they asked for (ContextServe.query;
    an empty list when they gave no query), by external id. A session that never asked cannot have missed."""
    out: dict[str, list[str]] = {}
    rows = ContextServe.objects.filter(
        team_id=store.team_id, store=store, session_external_id__in=list(sessions)
    ).values_list("session_external_id", "query")
    for external_id, query in rows:
        out.setdefault(external_id, [])
        if query:
            out[external_id].append(query)
    return out
