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

import hashlib
import json
from collections import defaultdict
from types import MappingProxyType

from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import Coalesce

from memory import effectiveness as eff
from memory.effectiveness import Effect, SessionSignal
from memory.models import ContextServe, MemoryEntry, MemoryStore

from .analysis import normalize as nz
from .analysis.aggregate import MemoryIndex, lesson_match, signal_key
from .models import AnalysisStatus, SessionAnalysis

# Most analysed sessions read for one store's figures (newest first).
MAX_SESSIONS = 20_000
# Rows fetched at a time from the stream of analyses (their raw findings are held until the chunk is read).
ROWS_PER_FETCH = 1000


def _latest_analyses(store: MemoryStore):
    """The store's completed analyses by recorded (not dry) runs (a session analysed twice is read from the
    latest: the highest id)."""
    return SessionAnalysis.objects.filter(
        team_id=store.team_id, run__store=store, run__dry_run=False, status=AnalysisStatus.DONE
    )


def _analyses(store: MemoryStore):
    """(session id, external id, agent, task, time, findings) of the store's analysed sessions, the latest completed
    analysis of each, newest first, at most MAX_SESSIONS; streamed (a generator): the caller keeps what it needs of
    each session, not every session's findings."""
    rows = (
        _latest_analyses(store)
        .order_by("-session__started_at", "-session_id", "-id")
        .values_list(
            "session_id",
            "session__external_id",
            "session__agent",
            "session__task",
            # One timestamp decoded a row, not two: a session that has no start is placed by its ingestion.
            Coalesce("session__started_at", "session__ingested_at"),
            "findings",
            ExpressionWrapper(Q(session__metadata__has_key="note_of"), output_field=BooleanField()),
        )
    )
    seen: set[int] = set()
    names: dict[str, str] = {}
    for sid, eid, agent, task, at, findings, note in rows.iterator(chunk_size=ROWS_PER_FETCH):
        if sid in seen:
            continue
        seen.add(sid)
        # One string per agent and task name (a signal is held for every session read).
        agent = agent if agent is None else names.setdefault(agent, agent)
        task = task if task is None else names.setdefault(task, task)
        yield sid, eid, agent, task, at, [f for f in findings or () if isinstance(f, dict)], bool(note)
        if len(seen) >= MAX_SESSIONS:
            return


def _words_of(f: dict) -> list[str]:
    """The words a finding says its session used about the mistake (for a rewording of a missed lesson)."""
    parts = [*(f.get("said_new") or ()), *(f.get("said_old") or ()), f.get("query") or "", f.get("old") or ""]
    return [w for p in parts if isinstance(p, str) for w in nz.words(p) if w not in nz.STOPWORDS and len(w) > 2]


def _born_from(f: dict, sid: int, born_of: dict) -> list[tuple[str, int]]:
    """(identity of the finding, entry id) for each entry born from this finding of session ``sid``."""
    return [
        (signal_key(f), entry_id)
        for ev in f.get("evidence") or ()
        for entry_id in born_of.get((sid, int(ev.get("event_index") or 0)), ())
    ]


def _lessons_of_born_sessions(store: MemoryStore, born_of: dict) -> dict[int, list[tuple[str, int]]]:
    """What the sessions the entries were born from contribute to each entry's identities, read from the same
    analysis the stream reads for them (the latest), by session id, before the stream: a few sessions (the evidence
    of the store's applied proposals), so the stream then knows which findings can be an entry's mistake and keeps
    only those."""
    sids = sorted({sid for sid, _ in born_of})
    # Every born session has its entry, even one not analysed yet: the stream recomputes any it reads.
    out: dict[int, list[tuple[str, int]]] = {sid: [] for sid in sids}
    read: set[int] = set()
    for start in range(0, len(sids), 2000):
        rows = (
            _latest_analyses(store)
            .filter(session_id__in=sids[start : start + 2000])
            .order_by("session_id", "-id")
            .values_list("session_id", "findings")
        )
        for sid, findings in rows:
            if sid not in read:
                read.add(sid)
                out[sid] = [pair for f in findings or () if isinstance(f, dict) for pair in _born_from(f, sid, born_of)]
    return out


class _Matches:
    """lesson_match of each finding, once per distinct finding: a pattern's findings repeat the same fields in each
    of its sessions (only their evidence, which the match does not read, differs). Kept by a digest of the fields
    (a few dozen bytes, not the finding) and at most MATCHES_KEPT of them: most findings of a store can be distinct."""

    def __init__(self, index: MemoryIndex):
        self.index = index
        self.seen: dict[bytes, tuple] = {}

    def __call__(self, f: dict) -> tuple:
        fields = json.dumps({k: v for k, v in f.items() if k != "evidence"}, sort_keys=True, default=str)
        key = hashlib.blake2b(fields.encode(), digest_size=16).digest()
        found = self.seen.get(key)
        if found is None:
            if len(self.seen) >= MATCHES_KEPT:
                self.seen.clear()
            found = self.seen[key] = lesson_match(f, self.index)
        return found


MATCHES_KEPT = 4096


def session_signals(store: MemoryStore, entries: list[MemoryEntry] | None = None) -> list[SessionSignal]:
    """One SessionSignal per analysed session of the store.

    The analyses are streamed once: a session's findings are read as it goes by and not held (at the cap, 20,000
    sessions' decoded findings were upkeep's peak). What a finding can still need once every session is read (it is
    an entry's mistake when its identity is one an entry was born from, known only at the end) is kept for the few
    findings that can be: those with an identity of the born sessions' findings (read first) or that memory already
    holds."""
    if entries is None:
        entries = list(MemoryEntry.objects.filter(team_id=store.team_id, store=store))
    origin = eff.origin_evidence(store, [e.pk for e in entries])
    born_of: dict[tuple[int, int], set[int]] = defaultdict(set)
    for entry_id, pairs in origin.items():
        for pair in pairs:
            born_of[pair].add(entry_id)
    born = _lessons_of_born_sessions(store, born_of) if born_of else {}
    # Scope left out of the index: a lesson scoped to one agent still recognises its mistake in another agent's
    # session (a retrieval miss the scope caused).
    index = MemoryIndex(
        [{"key": str(e.pk), "content": e.content, "content_hash": e.content_hash, "origin": e.origin} for e in entries]
    )
    match = _Matches(index)
    candidates = {key for pairs in born.values() for key, _ in pairs}
    while True:
        sessions, lesson_keys = _read_sessions(store, born, born_of, match, candidates)
        if set(lesson_keys) <= candidates:
            for i, session in enumerate(sessions):  # in place: each session's tuple goes as its signal comes
                sessions[i] = _signal(session, lesson_keys)
            return sessions
        # A born session's latest analysis changed between the two reads: read again, keeping those findings too.
        candidates |= set(lesson_keys)


def _read_sessions(store: MemoryStore, born: dict, born_of: dict, match, candidates: set) -> tuple[list, dict]:
    """Every session the stream reads, with what its findings can still need (``candidates``: the identities that
    can be an entry's), and the identities of the findings each entry was born from."""
    sessions = []
    born_read: list[int] = []  # the born sessions the stream read, in its order
    for sid, external_id, agent, task, at, findings, note in _analyses(store):
        if sid in born:
            born_read.append(sid)
            # The stream's own row decides (the same analysis unless one was stored in between).
            born[sid] = [pair for f in findings for pair in _born_from(f, sid, born_of)]
        if note:
            # A note an agent delivered live (dreamweb-mcp's remember: a small session whose metadata.note_of names
            # the agent's session) is part of that session, not a session run with or without a lesson: counted
            # as one, writing down the lesson it was served would make the lesson look useless.
            continue
        kept: list = []
        contradicted: set[int] = set()
        for f in findings:
            key = signal_key(f)
            state, entry = match(f)
            known = int(entry.key) if entry is not None and state == "known" else None
            if entry is not None and state == "stale":
                contradicted.add(int(entry.key))
            if known is not None or key in candidates:
                first = next(iter(f.get("evidence") or ()), {})
                where = (int(first.get("event_index") or 0), str(first.get("excerpt") or ""))
                kept.append((key, known, _words_of(f), where))
        # Most sessions keep nothing: one shared empty tuple, not a list and a set each.
        sessions.append((sid, external_id, agent, task, at, tuple(kept), frozenset(contradicted) or NOTHING))
    lesson_keys: dict[str, set[int]] = defaultdict(set)
    for sid in born_read:  # in the order the stream read them, as the findings were met
        for key, entry_id in born[sid]:
            lesson_keys[key].add(entry_id)
    return sessions, lesson_keys


def _signal(session: tuple, lesson_keys: dict[str, set[int]]) -> SessionSignal:
    sid, external_id, agent, task, at, kept, contradicted = session
    recurred: set[int] = set()
    words: dict[int, list[str]] = defaultdict(list)
    where: dict[int, tuple[int, str]] = {}
    for key, known, said, first in kept:
        hit = set(lesson_keys.get(key, ()))
        if known is not None:
            hit.add(known)
        recurred |= hit
        for entry_id in hit:
            words[entry_id] += said
            where.setdefault(entry_id, first)
    contradicted = contradicted - recurred
    return SessionSignal(
        external_id=external_id,
        at=at,
        agent=agent or "",
        task=task,
        recurred=frozenset(recurred) if recurred else NOTHING,
        contradicted=frozenset(contradicted) if contradicted else NOTHING,
        words=dict(words) if words else NO_ENTRIES,
        evidence=where or NO_ENTRIES,
        session_id=sid,
    )


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
