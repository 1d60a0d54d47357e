"""The findings of a run's analysed sessions as finalize's aggregation reads them (reviews.analysis.aggregate's
Findings): once in full, in the analyses' order, then again only the sessions of the pattern being drafted.

Finalize once held every session with findings through the aggregation and the skill proposals: at 100,000
sessions of the dev corpus 34,000 findings (21 MiB as records), ten times what it held at 10,000. Read this way,
what it holds follows its patterns (a bucket's counts and first finding, a word per session of a pattern) and the
pattern it drafts, not the run. A session without findings (about two thirds) is never read: it is counted by
agent and task in SQL.
"""

from __future__ import annotations

from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence

from django.db.models import Count
from django.db.models.functions import Coalesce

from memory.models import AgentSession

from ..analysis.findings import SessionFindings, evidence_findings
from ..models import AnalysisStatus, DreamRun, SessionAnalysis
from .records import Shapes

# Rows fetched at a time, and the span of rows whose texts are shared (names below): one chunk's findings are what is
# held while they are read; the aggregation keeps few of them.
CHUNK = 2000

# Strings up to this length are shared between findings (names, kinds, trust levels, tools, short commands).
SHARED_STRING_CHARS = 40
# A pattern's key, wording, commands, error and its signature are the same text in each of its sessions (the
# aggregation groups them by it): shared whatever their length. An excerpt is shared only with a text already kept (a
# note's excerpt is its summary, a command's is the command), never added for its own sake: most quote one session.
SHARED_FIELDS = frozenset({"key", "summary", "old", "new", "error", "error_signature"})


class RunFindings:
    """The run's sessions with findings (SessionFindings), each read as the aggregation and the skill proposals
    take them. ``analysed``: every analysed session of the run; ``agent_tasks``: agent → Counter(task → analysed
    sessions), the baseline of the aggregation's scoping. ``tap``: called with each session of the first full read
    (the skill proposals' groups are made in the aggregation's read); ``tapped`` says that read went to its end."""

    def __init__(self, run: DreamRun, tap: Callable[[SessionFindings], None] | None = None) -> None:
        self._done = SessionAnalysis.objects.filter(run=run, status=AnalysisStatus.DONE)
        self._team_id = run.team_id
        self._tap = tap
        self.tapped = False
        self._ids = array("q")  # the session id at each index of the full read
        self.analysed = 0
        self.agent_tasks: dict[str, Counter] = defaultdict(Counter)
        counts = self._done.order_by().values_list("session__agent", "session__task").annotate(n=Count("id"))
        for agent, task, n in counts:
            self.analysed += n
            self.agent_tasks[agent][task] += n

    def _rows(self, analyses):
        fields = ("session_id", "session__external_id", "session__agent", "session__task", "findings")
        started = Coalesce("session__started_at", "session__ingested_at")
        return analyses.exclude(findings=[]).order_by("id").values_list(*fields, "session__source", started)

    def __iter__(self) -> Iterator[SessionFindings]:
        tap, self._tap = self._tap, None
        self._ids = ids = array("q")
        names: dict = {}
        shapes = Shapes()
        for n, row in enumerate(self._rows(self._done).iterator(chunk_size=CHUNK)):
            if n % CHUNK == 0:  # texts shared within a chunk: the dictionary does not grow with the run
                names, shapes = {}, Shapes()
            session = _session(row, names, shapes)
            if session is None:
                continue
            ids.append(session.session_id)
            if tap is not None:
                tap(session)
            yield session
        self.tapped = tap is not None

    def at(self, indices: Sequence[int]) -> Iterator[tuple[int, SessionFindings]]:
        """(index, session) of the full read's sessions at these ascending indices, in that order, read again."""
        names: dict = {}  # one pattern's texts shared between its sessions
        shapes = Shapes()
        for start in range(0, len(indices), CHUNK):
            index_of = {self._ids[i]: i for i in indices[start : start + CHUNK]}
            rows = self._rows(self._done.filter(session_id__in=list(index_of)))
            for row in rows.iterator(chunk_size=CHUNK):
                session = _session(row, names, shapes)
                if session is not None:
                    yield index_of[session.session_id], session

    def external_ids(self, indices: Sequence[int]) -> list[str]:
        out: list[str] = []
        for start in range(0, len(indices), CHUNK):
            ids = [self._ids[i] for i in indices[start : start + CHUNK]]
            out += AgentSession.objects.filter(team_id=self._team_id, pk__in=ids).values_list("external_id", flat=True)
        return out


def _session(row, names: dict, shapes: Shapes) -> SessionFindings | None:
    """One analysis row as a session with findings, its texts shared through ``names``; None without findings."""
    sid, eid, agent, task, findings, source, started = row
    found = _exact(_shared_keys(f, names, shapes) for f in evidence_findings(findings)) if findings else ()
    if not found:
        return None
    agent = names.setdefault(agent, agent)
    task = task if task is None else names.setdefault(task, task)
    source = names.setdefault(source or "", source or "")
    return SessionFindings(sid, eid, agent, task, found, source=source, started=started.timestamp() if started else 0.0)


def _exact(items) -> list:
    """A list of exactly its length: a comprehension's list keeps room to grow (88 bytes for one item, not 64)."""
    return list(tuple(items))


def _shared_field(key: str, value, names: dict, shapes: Shapes):
    if isinstance(value, str):
        if key in SHARED_FIELDS:
            return names.setdefault(value, value)
        if key == "excerpt":
            return names.get(value, value)
    return _shared_keys(value, names, shapes)


def _shared_keys(value, names: dict, shapes: Shapes):
    """The value with every short string replaced by one shared string per text, and every JSON object by a Record
    (reviews.dreams.records) whose key names are one tuple per shape. Each row's JSON is decoded on its own, so
    without this every finding carries its own dictionary tables, its own copies of the same dozen key names and of
    its kind, trust levels and tool, and its own float for the same confidence."""
    if isinstance(value, dict):
        keys = tuple(names.setdefault(k, k) for k in value)
        return shapes.record(keys, tuple(_shared_field(k, v, names, shapes) for k, v in value.items()))
    if isinstance(value, list):
        # Most findings have no tags: one empty list for all of them (nothing in finalize writes to a finding).
        return _exact(_shared_keys(v, names, shapes) for v in value) if value else shapes.empty
    if isinstance(value, str) and len(value) <= SHARED_STRING_CHARS:
        return names.setdefault(value, value)
    if type(value) is float and value:  # not 0.0: -0.0 equals it and would come back as 0.0
        return names.setdefault(value, value)  # a float never equals a string key
    return value
