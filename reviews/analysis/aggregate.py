"""Cross-session aggregation: group findings, count prevalence k of N, diff against memory, draft proposals.

Grouping is near-linear in the number of findings:
1. findings with the same (family, normalised key) fall into one hash bucket;
2. buckets are merged by a cheap similarity test, but only against the leaders of a few small candidate blocks
   (the same corrected command, a shared anchor such as a number or URL, a min-hash pick of the words); a block
   holds at most MAX_LEADERS leaders, so no finding is ever compared with all the others.
"""

from __future__ import annotations

import difflib
import gc
import re
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from . import normalize as nz
from .drift import contradicts, superseded
from .findings import (
    AggregateResult,
    ProposalDraft,
    SessionFindings,
    count_sources,
    lowest_trust,
    plural,
    recurs,
    signature,
    trim,
)
from .risk import assess, redact, redact_draft
from .skills import holds_step
from .tools import own_name

MAX_LEADERS = 24  # leaders kept per candidate block
MAX_MEMBERS = 4  # representatives of one cluster per candidate block
MAX_EVIDENCE_PER_SESSION = 3
MAX_ISOLATED = 500
# The reason a recurring lesson is on record, not proposed, when the step it corrects is a skill's (_draft).
IN_SKILL = "the step it corrects is written in a skill: proposed as that skill's update"

FAMILY = {
    "corrected_command": "fix",
    "repeated_mistake": "fix",
    "tool_failure": "fix",
    "correction": "pref",
    "preference": "pref",
    "user_correction": "pref",
    "note": "note",
    "inband_note": "note",
    "missing_procedure": "note",
    "rediscovered_knowledge": "where",
    "rediscovery": "where",
    "lookup": "lookup",
    "guessed_path": "guess",
    "request": "request",
    "secret": "secret",
    "injection": "injection",
}
NEVER_PROPOSED = {"failure", "secret", "injection"}
BASE_CONFIDENCE = {
    "request": 0.55,
    "guess": 0.5,
    "check": 0.65,
    "fix": 0.7,
    "pref": 0.75,
    "note": 0.6,
    "where": 0.6,
    "lookup": 0.45,
}


def family_of(f: dict) -> str:
    if f.get("check") and f.get("error_signature"):
        return "check"  # a check's diagnostic: grouped by what it reports, whatever the file
    fam = FAMILY.get(f.get("kind"), "")
    if fam == "fix" and not f.get("new"):
        return "failure"
    if not fam:
        # An unknown kind from another analyzer: a before/after pair is a fix, anything else is grouped as text.
        fam = "fix" if f.get("new") and f.get("old") else "note"
    return fam


def _words_re(phrase: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", re.I)


@dataclass
class Bucket:
    family: str
    key: str
    # (session index, finding): only the first while the findings are grouped, all of them while its cluster is
    # drafted (Findings.at reads them again), so the run's findings are never held at once.
    items: list[tuple[int, dict]] = field(default_factory=list)
    count: int = 0  # its findings
    sessions: array | None = None  # the indices of its sessions, ascending, until its cluster has them
    # features of the first finding, for the similarity test
    new: str = ""
    old: str = ""
    sig: str = ""
    said_new: tuple = ()
    said_old: frozenset = frozenset()
    delta: tuple = ()  # (words only in old, words only in new) of a correction's two commands
    anchors: frozenset = frozenset()
    salient: frozenset = frozenset()
    location: str = ""
    query: frozenset = frozenset()
    topic: frozenset = frozenset()
    negated: bool = False  # a note that denies what it names ("not allowed on Fridays")

    def features(self) -> None:
        # Only what this family's similarity test needs: most buckets are one-off noise.
        f = self.items[0][1]
        fam = self.family
        if fam in ("fix", "pref"):
            self.new = nz.normalize_command(f.get("new") or "")
            self.old = nz.normalize_command(f.get("old") or "")
            if self.new and self.new == self.old:
                # What changed is a value masking hides (port 5432 -> 5433): the values are the lesson.
                self.new, self.old = nz.collapse(f.get("new")).lower(), nz.collapse(f.get("old")).lower()
        if fam == "fix" and self.key.startswith(PREP_KEY) and nz.program(self.new) in WAITS:
            # Waiting is the step, however long (`sleep 3`, `sleep 10`): the duration is an operand.
            self.new = re.sub(r"\d+(?:\.\d+)?[a-z]*", "<n>", self.new)
        if fam in ("fix", "check"):
            self.sig = f.get("error_signature") or (nz.normalize_error(f["error"]) if f.get("error") else "")
        if fam == "fix" and f.get("kind") == "corrected_command":
            # What the correction changed, as words, with its program: the same change made to a command that
            # carries one more unrelated flag in one session (`-quiet`) is the same correction.
            wo, wn = nz.command_words(self.old), nz.command_words(self.new)
            if wn - wo and nz.program(self.old) == nz.program(self.new):
                self.delta = (nz.program(self.old), tuple(sorted(wo - wn)), tuple(sorted(wn - wo)))
        if fam == "pref":
            self.said_new = tuple(sorted(f.get("said_new") or nz.command_words(self.new) - nz.command_words(self.old)))
            self.said_old = frozenset(f.get("said_old") or nz.command_words(self.old) - nz.command_words(self.new))
            wo, wn = nz.command_words(self.old), nz.command_words(self.new)
            if wo != wn:
                self.delta = (tuple(sorted(wo - wn)), tuple(sorted(wn - wo)))
        if fam == "note":
            text = f.get("summary") or ""
            self.anchors = nz.anchors(text)
            self.salient = nz.salient(text)
            self.negated = nz.negated(text)
        if fam == "where":
            self.location = (f.get("location") or "").lower()
            self.query = _query_words(f.get("query") or "")
            self.topic = frozenset(f.get("topic") or ())

    def blocks(self) -> list[tuple]:
        fam = self.family
        if fam == "fix":
            return [("fix", self.new)] + ([("fix-d", self.delta)] if self.delta else [])
        if fam == "check":
            return [("check", self.sig)]
        if fam in ("guess", "request"):
            return [(fam, self.key)]
        if fam == "pref":
            # The user's words vary between sessions ("poetry" / "poetry add it" / none at all); the change the agent
            # made in response does not.
            return [("pref", self.said_new)] + ([("pref-d", self.delta)] if self.delta else [])
        if fam == "where":
            return [("where", self.location)] if self.location else []
        if fam == "note":
            keys = [("note-a", a) for a in sorted(self.anchors)[:4]]
            return keys + [("note-w", w) for w in nz.minhash_keys(self.salient, 3)]
        return []

    def similar(self, other: Bucket) -> bool:
        fam = self.family
        if fam != other.family:
            return False
        if fam == "check":
            return self.sig == other.sig
        if fam in ("guess", "request"):
            return self.key == other.key
        if fam == "fix":
            if self.delta and self.delta == other.delta:
                return True
            if self.new != other.new:
                return False
            if self.key.startswith(PREP_KEY) and other.key.startswith(PREP_KEY):
                # The same step run before a retry that then worked (`manage.py migrate` before the tests, the fixture
                # load, the seed script): one lesson, whichever command failed first and however its error read.
                return True
            return (bool(self.sig) and self.sig == other.sig) or nz.jaccard(
                nz.shingles(self.old), nz.shingles(other.old)
            ) >= 0.5
        if fam == "pref":
            if self.delta and self.delta == other.delta:
                return True
            return self.said_new == other.said_new and (
                nz.overlap(self.said_old, other.said_old) >= 0.5 or not (self.said_old or other.said_old)
            )
        if fam == "where":
            # The same thing sought, found in the same place. Different searches that end in one popular file are
            # the work going through it (code navigation), not one thing the agents keep having to look for.
            # Unless each session first looked for it in a wrong place named like it (`src/flags`,
            # `app/feature_flags.py` before `config/flags/registry.yaml`): then the place is what agents keep missing,
            # whatever each was after in it.
            return (
                bool(self.location)
                and self.location == other.location
                and (
                    self.query == other.query
                    or nz.jaccard(self.query, other.query) >= 0.5
                    or (bool(self.topic) and bool(other.topic))
                )
            )
        if fam == "note":
            if contradicts(self.negated, self.salient, other.negated, other.salient):
                return False
            return notes_alike(self.anchors, self.salient, other.anchors, other.salient)
        return False


# The key of rules._finding_retry: a failed call that worked once another step had run.
PREP_KEY = "fix:"
WAITS = frozenset({"sleep", "wait", "timeout"})


def _query_words(query: str) -> frozenset:
    """What a search looked for, as words: `func.*enable|enableCmd` ~ `enableCmd|func enable`."""
    return frozenset(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_]{2,}|\d+", query or ""))


def anchors_compatible(a: frozenset, b: frozenset) -> bool:
    if a == b:
        return True
    if not a or not b:
        return False
    return a <= b or b <= a


def notes_alike(a_anc, a_sal, b_anc, b_sal) -> bool:
    """Two texts state the same fact: the same concrete anchors and mostly the same words."""
    common = len(a_sal & b_sal)
    if not anchors_compatible(a_anc, b_anc):
        if a_anc and b_anc:
            return False
        # One wording adds a detail the others leave out ("Learned on LUM-2290: submit on Tuesday ..."): the same
        # fact when the words agree well.
        return common >= 3 and nz.overlap(a_sal, b_sal) >= 0.5
    if any("/" in x or "." in x for x in a_anc & b_anc):
        # A shared URL, host or path is a strong anchor: one shared word is enough ("send X to U" ~ "upload X to U").
        return common >= 1 and nz.overlap(a_sal, b_sal) >= 0.3
    if a_anc == b_anc and any(_CODE.fullmatch(x) for x in a_anc):
        # The same codes and nothing else (`GRCh38` and `hg19`, `ORA-01555`): as strong as a shared path, when no
        # other number or code tells the two apart; the rest of the words vary most in notes written in another
        # language, where fewer of them survive as content words.
        return common >= 1 and nz.overlap(a_sal, b_sal) >= 0.25
    if a_anc and b_anc:
        return common >= 2 and nz.overlap(a_sal, b_sal) >= 0.3
    # (two long wordings with the same facts, or none: a number one of them adds is another fact)
    return common >= 2 and nz.overlap(a_sal, b_sal) >= 0.5 or (a_anc == b_anc and _long_alike(common, a_sal, b_sal))


def _long_alike(common: int, a_sal, b_sal) -> bool:
    """Two long wordings of one fact (a war story, a warning, a reminder) share several content words, which are a
    smaller part of each than in a short note's paraphrase."""
    return common >= 4 and nz.overlap(a_sal, b_sal) >= 0.4


# An identifier that mixes letters and digits (an assembly, an error code, a model name), not a bare number.
_CODE = re.compile(r"(?=[^\d]*\d)(?=\d*[a-z])[a-z0-9_-]{4,}")


def bucket_key(f: Mapping) -> tuple[str, str]:
    """A finding's bucket: its family and normalised key (or, without a key, its wording's)."""
    key = nz.collapse(str(f.get("key") or "")).lower() or nz.content_key(f.get("summary") or "")
    return family_of(f), key


def _buckets(sessions: Iterable[SessionFindings]) -> tuple[dict[tuple[str, str], Bucket], int]:
    """The findings' buckets, read once in order, each with its count, its sessions and its first finding only;
    and how many sessions were read."""
    buckets: dict[tuple[str, str], Bucket] = {}
    read = 0
    for si, sf in enumerate(sessions):
        read = si + 1
        for f in sf.findings or ():
            if not isinstance(f, Mapping):
                continue
            at = bucket_key(f)
            b = buckets.get(at)
            if b is None:
                b = buckets[at] = Bucket(*at, [(si, f)], sessions=array("l"))
            b.count += 1
            if not b.sessions or b.sessions[-1] != si:
                b.sessions.append(si)
    return buckets, read


def group(buckets: dict[tuple[str, str], Bucket]) -> list[list[Bucket]]:
    """Clusters of buckets; each cluster is one pattern."""
    # How many note buckets use each word: the rarest words two wordings share are their topic ("Tuesday",
    # "Friday", "review"), a better candidate block for a paraphrase than a random pick of its words.
    note_df: Counter = Counter()
    for b in buckets.values():
        if b.family == "note":
            b.features()
            note_df.update(b.salient)
    # Most frequent first; among equals, the wordings with fewer concrete details first, so that a wording which adds
    # one ("Learned on LUM-2290: ...") joins the plain ones instead of leading a cluster they cannot join.
    ordered = sorted(buckets.values(), key=lambda b: (-b.count, b.family, len(b.anchors), b.key))
    # Per candidate block, up to MAX_LEADERS representatives (cluster index, bucket). A bucket that joins a cluster
    # also represents it in its own blocks, so paraphrases chain ("FY begins Feb 1" ~ "fiscal year begins February
    # 1st" ~ "fiscal year starts 1 February") while each bucket is still compared with a bounded number of others.
    leaders: dict[tuple, list[tuple[int, Bucket]]] = defaultdict(list)
    reps: Counter = Counter()  # (block, cluster) -> representatives of that cluster in that block
    clusters: list[list[Bucket]] = []
    for b in ordered:
        if b.family != "note":
            b.features()
        blocks = b.blocks()
        if b.family == "note":
            shared = sorted((w for w in b.salient if note_df[w] > 1), key=lambda w: (note_df[w], w))
            blocks += [("note-w", w) for w in shared[:3] if ("note-w", w) not in blocks]
        home = None
        compared: set[int] = set()
        for blk in blocks:
            for ci, rep in leaders.get(blk, ()):
                if id(rep) in compared:
                    continue
                compared.add(id(rep))
                if rep.similar(b):
                    home = ci
                    break
            if home is not None:
                break
        if home is None:
            clusters.append([b])
            home = len(clusters) - 1
        else:
            clusters[home].append(b)
        for blk in blocks:
            lst = leaders[blk]
            if len(lst) < MAX_LEADERS and reps[(blk, home)] < MAX_MEMBERS:
                lst.append((home, b))
                reps[(blk, home)] += 1
    return clusters


# --- memory ---------------------------------------------------------------------------------------------------------


@dataclass
class Entry:
    key: str
    content: str
    content_hash: str
    scope_agent: str | None
    scope_task: str | None
    origin: str
    lower: str
    anchors: frozenset
    salient: frozenset


class MemoryIndex:
    def __init__(self, memory, skills=()):
        self.entries: list[Entry] = []
        for m in memory or ():
            content = m.get("content") or ""
            scope = m.get("scope") or {}
            self.entries.append(
                Entry(
                    key=m.get("key") or "",
                    content=content,
                    content_hash=m.get("content_hash") or "",
                    scope_agent=m.get("scope_agent", scope.get("agent")),
                    scope_task=m.get("scope_task", scope.get("task")),
                    origin=m.get("origin") or "human",
                    lower=nz.collapse(content).lower(),
                    anchors=nz.anchors(content),
                    salient=nz.salient(content),
                )
            )
        self.skill_texts = [nz.collapse(f"{s.get('description') or ''} {s.get('body') or ''}").lower() for s in skills]
        self.skill_bodies = [s.get("body") or "" for s in skills]
        self.by_token: dict[str, list[int]] = defaultdict(list)
        for i, e in enumerate(self.entries):
            for t in e.salient | e.anchors:
                self.by_token[t].append(i)
        self.hosts = set()
        for e in self.entries:
            self.hosts |= nz.hosts(e.content)

    def candidates(self, tokens) -> list[Entry]:
        ids: set[int] = set()
        for t in tokens:
            ids.update(self.by_token.get(t, ()))
        return [self.entries[i] for i in sorted(ids)]

    def mentioning(self, phrase: str) -> list[Entry]:
        if not phrase:
            return []
        toks = nz.salient(phrase) | nz.anchors(phrase) | {w for w in nz.command_words(phrase)}
        pat = _words_re(nz.collapse(phrase))
        cands = self.candidates(toks) if toks else self.entries
        return [e for e in cands if pat.search(e.lower)]

    def skill_holds(self, old: str) -> bool:
        """Whether a skill's code runs this (failing) command: the lesson that corrects it is that skill's update."""
        return any(holds_step(body, old) for body in self.skill_bodies)

    def skill_mentions(self, phrase: str) -> bool:
        if not phrase:
            return False
        pat = _words_re(nz.collapse(phrase))
        return any(pat.search(t) for t in self.skill_texts)


def _scope_ok(entry: Entry, agent: str | None) -> bool:
    return entry.scope_agent in (None, "") or entry.scope_agent == agent


# --- aggregation ----------------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    family: str
    buckets: list[Bucket]
    sessions: Sequence[int]  # indices of its sessions among those with findings, ascending
    # Its findings in its buckets' order, each bucket's in the sessions' order: only while it is drafted.
    items: list[tuple[int, dict]] | None = None
    # Each of its sessions' source (the credential that pushed it), by session index: only while it is drafted.
    sources: dict[int, str] | None = None

    @property
    def leader(self) -> Bucket:
        return self.buckets[0]


class Findings(Protocol):
    """The sessions with findings, read again where the aggregation needs them: once in full, in order (their index
    is their place in that order), then only the sessions of the pattern being drafted. Finalize reads them from
    the database (reviews.dreams.finalizing), so a run's findings are never all in memory; a list is wrapped."""

    def __iter__(self) -> Iterator[SessionFindings]: ...

    def at(self, indices: Sequence[int]) -> Iterator[tuple[int, SessionFindings]]:
        """(index, session) of the sessions at these ascending indices, in that order."""

    def external_ids(self, indices: Sequence[int]) -> list[str]:
        """The external ids of the sessions at these indices."""


class _Listed:
    """A list of SessionFindings as Findings."""

    def __init__(self, sessions: Sequence[SessionFindings]) -> None:
        self.sessions = sessions

    def __iter__(self) -> Iterator[SessionFindings]:
        return iter(self.sessions)

    def at(self, indices: Sequence[int]) -> Iterator[tuple[int, SessionFindings]]:
        return ((i, self.sessions[i]) for i in indices)

    def external_ids(self, indices: Sequence[int]) -> list[str]:
        return [self.sessions[i].external_id for i in indices]


def _drafting(c: Cluster, findings: Findings) -> dict[int, SessionFindings]:
    """Read the cluster's findings (``c.items`` and each bucket's ``items``, in the order grouping met them) and
    return its sessions by index, without their findings. ``_drafted`` lets them go."""
    wanted: dict[tuple[str, str], list] = {(b.family, b.key): [] for b in c.buckets}
    sessions: dict[int, SessionFindings] = {}
    for si, sf in findings.at(c.sessions):
        sessions[si] = SessionFindings(
            sf.session_id, sf.external_id, sf.agent, sf.task, (), source=sf.source, started=sf.started
        )
        for f in sf.findings or ():
            if isinstance(f, Mapping):
                items = wanted.get(bucket_key(f))
                if items is not None:
                    items.append((si, f))
    for b in c.buckets:
        b.items = wanted[(b.family, b.key)]
    c.items = [it for b in c.buckets for it in b.items]
    c.sources = {si: s.source_key for si, s in sessions.items()}
    return sessions


def _drafted(c: Cluster) -> None:
    for b in c.buckets:
        b.items = b.items[:1]  # the first finding: the isolated row and the leader's features read it
    c.items = None
    c.sources = None


def _most_common(texts: list[str]) -> str:
    counts = Counter(t for t in texts if t)
    if not counts:
        return ""
    best = max(counts.values())
    return min(t for t, c in counts.items() if c == best)


_TOKEN = re.compile(r"[\w./:@=+-]+")
ELIDED = "…"


def _shared_wording(texts_by_session: dict[int, str]) -> str:
    """The most common of the sessions' texts with every word that not most sessions' texts have replaced by `…`:
    a lesson holds only what its evidence shares, never a detail of one session (a package name, a pid, a host)."""
    texts = [t for t in texts_by_session.values() if t]
    chosen = _most_common(texts)
    if len(set(texts)) <= 1:
        return chosen
    seen: Counter = Counter()
    for t in texts:
        seen.update({w.lower() for w in _TOKEN.findall(t)})
    need = len(texts) / 2

    def keep(m: re.Match) -> str:
        # A function word ("not", "instead", "of") is the lesson's structure, never a session's detail: elided,
        # "Use `x`, not `y`" would read "Use `x`, … `y`".
        word = m.group(0).lower()
        return m.group(0) if seen[word] > need or word in nz.STOPWORDS else ELIDED

    out = _TOKEN.sub(keep, chosen)
    out = re.sub(rf"{ELIDED}(?:[\s,;'\"`()\[\]]*{ELIDED})+", ELIDED, out)
    # A quotation of one session's words ("the user asked for this: ...") that the others worded differently says
    # nothing once elided: it goes (each session's words stay in the evidence).
    return re.sub(rf'\s*\([^()"]*"[^"]*{ELIDED}[^"]*"[^()]*\)', "", out)


# The error clause of a fix's wording ("… `old` fails with: <error>"), as rules._finding_fix writes it.
_FAILS_WITH = re.compile(r"(?P<head>: `[^`]*` fails with): (?P<error>.*)$", re.S)


def _without_scattered_error(content: str) -> str:
    """A fix whose sessions failed with different errors keeps, once elided, only scattered words of one ("fails
    with: … Some of the … do not … nor on …"): that reads as nothing. Then it says the errors differ instead (each
    session's error stays in the evidence)."""
    m = _FAILS_WITH.search(content)
    if m is None or ELIDED not in m.group("error"):
        return content
    error = m.group("error")
    kept = [w for w in _TOKEN.findall(error) if w.lower() not in nz.STOPWORDS and len(w) > 2]
    if len(kept) >= 3 and len(kept) >= 2 * error.count(ELIDED):
        return content
    return content[: m.start()] + m.group("head") + " errors that differ from session to session (see the evidence)."


_ASKED = re.compile(r'\(the user asked for this: "(.+)"\)\.?\s*$', re.S)


def _with_request(cluster: Cluster, content: str) -> str:
    """A correction the users worded differently each time loses their quotation in the shared wording (it names
    no session's words), and with it what they asked for ("open a PR instead"): the shortest of their requests is
    put back as an example, named as one."""
    if '"' in content:
        return content
    asked = sorted(
        {m.group(1) for t in _per_session(cluster, "summary").values() if (m := _ASKED.search(t))},
        key=lambda q: (len(q), q),
    )
    if not asked:
        return content
    k = len(cluster.sessions)
    said = f'users asked for this in {k} sessions, in their own words; one: "{asked[0]}"'
    return content.rstrip().rstrip(".") + f" ({said})."


SOUGHT_HEAD = "Where this lives: "


def _sought_text(cluster: Cluster) -> str:
    """One place the agents kept missing, each time looking for something else in it (a flag, a setting) after a
    wrong place named like it: the place is the lesson, the wrong places and the searches its examples. Empty unless
    the sessions searched for different things."""
    queries = _per_session(cluster, "query")
    words = list({_query_words(q) for q in queries.values()})
    if all(nz.jaccard(a, b) >= 0.5 for i, a in enumerate(words) for b in words[i + 1 :]):
        return ""  # one thing sought under near names: the searches' shared wording says it
    location = _most_common(list(_per_session(cluster, "location").values()))
    tried = sorted({t for _, f in cluster.items for t in f.get("tried") or ()})
    sought = sorted(set(queries.values()))
    text = f"{SOUGHT_HEAD}`{location}`. In {len(cluster.sessions)} sessions agents looked elsewhere first"
    if tried:
        text += " (" + ", ".join(f"`{t}`" for t in tried[:4]) + (", ..." if len(tried) > 4 else "") + ": not there)"
    text += ", then had to search for it (" + ", ".join(f"`{trim(q, 60)}`" for q in sought[:4])
    return text + (", ..." if len(sought) > 4 else "") + f"). Go straight to `{location}`."


def _prep_text(cluster: Cluster) -> str:
    """A step that made different failed commands work (`manage.py migrate` before the tests, before loading
    fixtures, before creating a user): the step is the lesson and the failures are its examples, each with its own
    error (an elided "When `…` fails with "…"" would say nothing). Empty unless the cluster is such a step behind more
    than one command."""
    if not all(b.key.startswith(PREP_KEY) for b in cluster.buckets):
        return ""
    olds = _per_session(cluster, "old")
    if len({nz.normalize_command(o) for o in olds.values()}) < 2:
        return ""
    step = _most_common(list(_per_session(cluster, "new").values()))
    errors = _per_session(cluster, "error")
    examples, seen = [], set()
    for si, old in olds.items():
        if nz.normalize_command(old) in seen:
            continue
        seen.add(nz.normalize_command(old))
        err = trim(nz.error_line(errors.get(si, "")), 100)
        examples.append(f"`{trim(old, 80)}`" + (f' ("{err}")' if err else ""))
    shown = "; ".join(examples[:3]) + ("; and others" if len(examples) > 3 else "")
    return f"Run `{step}` first: without it, different commands failed and worked once it had run: {shown}."


def _per_session(cluster: Cluster, field: str) -> dict[int, str]:
    """One value of a finding field per session (the session's first), so that one chatty session does not count
    as many; and, where several credentials pushed the cluster's sessions, one per credential and value, so that a
    wording is voted for by the sources that state it, not by how often one of them repeated it (one key's flood
    cannot choose, or add a clause to, the wording of a lesson other keys support)."""
    out: dict[int, str] = {}
    for si, f in cluster.items:
        if si not in out and f.get(field):
            out[si] = str(f.get(field))
    if not _several_sources(cluster):
        return out
    seen: set[tuple[str, str]] = set()
    kept: dict[int, str] = {}
    for si, value in out.items():
        said = (_source(cluster, si), value)
        if said not in seen:
            seen.add(said)
            kept[si] = value
    return kept


def _source(cluster: Cluster, si: int) -> str:
    return (cluster.sources or {}).get(si, f"session:{si}")


def _several_sources(cluster: Cluster) -> bool:
    return cluster.sources is not None and len({_source(cluster, si) for si, _ in cluster.items}) >= 2


GUESSED_PATHS = 3  # different wrong paths that make guessing a habit


def _per_session_set(cluster: Cluster, field: str) -> set[str]:
    return {str(f.get(field)).lower() for _, f in cluster.items if f.get(field)}


# An identifier that says where a note's knowledge came from, not what it is: an issue key (`LUM-2290`), a number
# after ticket / run / job / build / incident / case / issue / PR / `#`.
_PROVENANCE = re.compile(
    r"\b[A-Z][A-Z0-9]{1,9}-\d+\b|(?i:\b(?:tickets?|runs?|jobs?|builds?|incidents?|cases?|issues?|PRs?|"
    r"pull requests?|requests?)\s*#?|#)(?P<num>\d{2,})\b"
)


def _provenance_ids(text: str) -> set[str]:
    return {(m.group("num") or m.group(0)).lower() for m in _PROVENANCE.finditer(text or "")}


def _core_anchors(cluster: Cluster) -> frozenset:
    """The facts most of the cluster's sessions state: an anchor only one wording adds ("not 8000 anymore" next to
    "port 8080") is context, not the fact. However many sessions repeat a wording, what only that wording says is
    its own detail when three wordings or more say the rest; and where a ticket or a run a note was learned on is
    named by one wording only ("Learned on LUM-2290: ...", "(ablation run 7731 showed ...)"), that is provenance,
    never the fact. Sessions are counted by source as well: where several credentials pushed the cluster's sessions,
    a fact is what most of them state, so that one key repeating its own detail many times does not make it the
    fact (a flood cannot choose the wording of a lesson others support)."""
    per_anchor: Counter = Counter()
    by_source: dict[str, set] = {}
    for si, f in cluster.items:
        anchors = nz.anchors(f.get("summary") or "")
        per_anchor.update(anchors)
        if cluster.sources is not None:
            by_source.setdefault(cluster.sources.get(si, f"session:{si}"), set()).update(anchors)
    total = len(cluster.items)
    if len(by_source) >= 2:
        # Counted by source only: sessions would let the source that pushed most of them decide again.
        per_source: Counter = Counter(a for anchors in by_source.values() for a in anchors)
        per_anchor, total = per_source, len(by_source)
    wordings = {f.get("summary") or "" for _, f in cluster.items}
    per_wording: Counter = Counter(a for t in wordings for a in nz.anchors(t))
    provenance: Counter = Counter(i for t in wordings for i in _provenance_ids(t))
    return frozenset(
        a
        for a, c in per_anchor.items()
        if c * 2 > total
        and not (len(wordings) >= 3 and per_wording[a] < 2)
        and not (len(wordings) >= 2 and provenance[a] == 1 and per_wording[a] < 2)
    )


def _note_text(cluster: Cluster) -> str:
    """The wording that keeps the cluster's facts (and nothing only a few wordings add); ties: the most frequent,
    then the shortest."""
    if _several_sources(cluster):
        # Each source's wordings once: a word is core when most sources' wordings have it.
        texts = list(_per_session(cluster, "summary").values())
        counts = Counter(texts)
        word_counts = Counter(w for t in texts for w in nz.salient(t))
        core = {w for w, c in word_counts.items() if c * 2 > len(texts)}
    else:
        texts = [f.get("summary") or "" for _, f in cluster.items]
        counts = Counter(texts)
        word_counts = Counter(w for t in counts for w in nz.salient(t))
        core = {w for w, c in word_counts.items() if c >= max(1, len(counts) / 2)}
    facts = _core_anchors(cluster)

    def score(t: str):
        anc = nz.anchors(t)
        return (len(anc & facts), -len(anc - facts), len(nz.salient(t) & core), counts[t], -len(t), t)

    return max(counts, key=score) if counts else ""


def _core_key(cluster: Cluster) -> str:
    """A stable key for the pattern (signature input): for notes, the anchors and the words most wordings share."""
    if cluster.family != "note":
        return f"{cluster.family}:{cluster.leader.key}"
    texts = list({f.get("summary") or "" for _, f in cluster.items})
    wc = Counter(w for t in texts for w in nz.salient(t))
    core = sorted(w for w, c in wc.items() if c >= max(1, len(texts) / 2))
    anchors = sorted(frozenset.intersection(*(nz.anchors(t) for t in texts))) if texts else []
    return "note:" + " ".join(anchors) + "|" + " ".join(core)


def _page_trust(cluster: Cluster) -> str | None:
    """A note that repeats a fetched page in one of its sessions is that page's words in all of them: the trust of
    the page (``tool`` or ``web``), whether or not each session fetched it (or the same version of it) first."""
    if cluster.family != "note":
        return None
    found = {
        (f.get("evidence") or [{}])[0].get("trust")
        for _, f in cluster.items
        if f.get("source_url") and (f.get("evidence") or [{}])[0].get("trust") in ("tool", "web")
    }
    return ("web" if "web" in found else "tool") if found else None


def _evidence(cluster: Cluster, sessions: list[SessionFindings], *, release: bool = False) -> list[dict]:
    """The cluster's evidence rows, by session (external id). ``release``: the cluster's findings are let go as
    their rows are made (the last thing its draft reads of them), so that a large pattern's findings and its rows
    are not both held (at 100,000 sessions 5,500 findings and 16,500 rows)."""
    per: dict[int, list[dict]] = defaultdict(list)
    page = _page_trust(cluster)
    items = cluster.items
    if release:
        for b in cluster.buckets:
            b.items = b.items[:1]
    for at, (si, f) in enumerate(items):
        if release:
            items[at] = None
        for e in f.get("evidence") or ():
            if len(per[si]) >= MAX_EVIDENCE_PER_SESSION:
                break
            sf = sessions[si]
            row = {
                "session_id": sf.session_id,
                "external_id": sf.external_id,
                "event_index": int(e.get("event_index") or 0),
                "excerpt": trim(str(e.get("excerpt") or "")),
                "trust": e.get("trust") or "agent",
            }
            if page and row["trust"] == "agent":
                row["trust"] = page
            if row not in per[si]:
                per[si].append(row)
    out = []
    for si in sorted(per, key=lambda i: str(sessions[i].external_id)):
        out += per[si]
    return out


def _scope(cluster: Cluster, sessions: list[SessionFindings], agent_tasks: dict) -> tuple[str | None, str | None]:
    agents = {sessions[i].agent for i in cluster.sessions}
    if len(agents) != 1:
        return None, None
    agent = next(iter(agents))
    tasks = {sessions[i].task for i in cluster.sessions}
    if len(tasks) != 1 or None in tasks:
        return agent, None
    # Narrow to the task only when that is informative: the agent does other tasks too, and all k sessions being
    # this task would be unlikely by chance (p < 1%).
    task = next(iter(tasks))
    counts = agent_tasks.get(agent, Counter())
    total = sum(counts.values())
    share = counts.get(task, 0) / total if total else 1.0
    if share < 1.0 and share ** len(cluster.sessions) < 0.01:
        return agent, task
    return agent, None


def _scope_size(agent: str | None, task: str | None, agent_tasks: dict, n: int) -> int:
    """The sessions in a lesson's scope that the cycle read: an agent-scoped lesson is counted among that agent's
    sessions (of that task, for a task-scoped one), a lesson for every agent among all of them."""
    if agent is None:
        return n
    counts = agent_tasks.get(agent, Counter())
    return max(1, counts.get(task, 0) if task is not None else sum(counts.values()))


def _confidence(cluster: Cluster, min_sessions: int, n: int) -> float:
    base = BASE_CONFIDENCE.get(cluster.family, 0.5)
    k = len(cluster.sessions)
    c = base + 0.03 * max(0, k - min_sessions) + (0.1 * k / n if n else 0)
    trusts = {e.get("trust") for _, f in cluster.items for e in f.get("evidence") or ()}
    if (trusts and trusts <= {"tool", "web"}) or _page_trust(cluster):
        c *= 0.5
    return round(min(0.95, c), 2)


def _changed_value(old: str, new: str) -> tuple[str, str] | None:
    """The one value two commands differ in (`psql -p 5432 db` -> `psql -p 5433 db`: 5432 -> 5433; `--port=80` ->
    `--port=8080`: 80 -> 8080), when it is a value (it holds a digit, a dot, a slash or a colon) and the only change.
    A changed word (`make docs` -> `make html`) is not one: the entry's prose may use it for something else."""
    a, b = nz.collapse(old).split(), nz.collapse(new).split()
    diff = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
    if len(a) != len(b) or len(diff) != 1:
        return None
    x, y = diff[0]
    head_x, _, value_x = x.rpartition("=")
    head_y, _, value_y = y.rpartition("=")
    if head_x == head_y and value_x and value_y:
        x, y = value_x, value_y
    x, y = x.strip("'\"`"), y.strip("'\"`")
    if len(x) < 2 or not y or not VALUE_CHARS.search(x):
        return None
    return x, y


VALUE_CHARS = re.compile(r"[\d./:]")


def _rewrite(content: str, old: str, new: str, why: str) -> str:
    """The entry's text with the old command/choice replaced by the new one, and the reason appended. When the
    command changed in one value (a port, a host, a version), the entry's other mentions of that value change too:
    "listens on port 5432" must not stay beside the corrected command."""
    pat = _words_re(nz.collapse(old))
    if old and pat.search(content):
        value = _changed_value(old, new)
        pieces = pat.split(content)
        if value is not None:
            # Outside the command only (the new command already holds the new value).
            at = re.compile(rf"(?<![\w./:=-]){re.escape(value[0])}(?![\w/-]|[.:]\w)")
            pieces = [at.sub(lambda m: value[1], p) for p in pieces]
        text = new.join(pieces)
    else:
        text = content.rstrip() + f" Use `{new}` instead of `{old}`."
    return text.rstrip() + " " + why


def _agents_label(cluster: Cluster, sessions) -> str:
    agents = sorted({sessions[i].agent for i in cluster.sessions})
    return ", ".join(agents[:3]) + (f" and {len(agents) - 3} more" if len(agents) > 3 else "")


def _describe(cluster: Cluster, sessions, n: int) -> str:
    k = len(cluster.sessions)
    f = cluster.items[0][1]
    who = _agents_label(cluster, sessions)
    head = f"Seen in {k} of {n} sessions ({who})"
    fam = cluster.family
    old, new = _shared_wording(_per_session(cluster, "old")), _shared_wording(_per_session(cluster, "new"))
    if fam == "request":
        return f"{head}: the person asked to {f.get('verb')} {plural(f.get('noun') or '')} once the work was done."
    if fam == "guess":
        paths = len(_per_session_set(cluster, "location"))
        return f"{head}: `{f.get('tool')}` was pointed at {paths} different paths that do not exist."
    if fam == "check":
        said = _shared_wording(_per_session(cluster, "error"))
        return f"{head}: `{old}` reported `{trim(said, 160)}` and passed again once the code was changed."
    if fam == "fix":
        errors = {nz.error_line(x.get("error") or "") for _, x in cluster.items}
        varied = (
            f", with {len(errors)} different error texts that normalise to one signature" if len(errors) > 1 else ""
        )
        if f.get("kind") == "tool_failure":
            return f"{head}: `{old}` failed{varied} and succeeded after `{new}`."
        err = trim(_shared_wording({si: nz.error_line(e) for si, e in _per_session(cluster, "error").items()}), 120)
        return f"{head}: `{old}` failed ({err}){varied}; `{new}` then worked."
    if fam in ("pref", "note"):
        wordings = len({x.get("summary") for _, x in cluster.items})
        said = "in one wording" if wordings == 1 else f"in {wordings} different wordings"
        src = {x.get("source_url") for _, x in cluster.items if x.get("source_url")}
        tail = f" It repeats a fetched page ({', '.join(sorted(src)[:2])})." if src else ""
        who = _who_said(cluster)
        if fam == "pref":
            change = _change_words(old, new)
            verb = "corrected the agent" if who == "the person" else "said"
            return f"{head}: {who} {verb}{change}, {said}.{tail}"
        if all(x.get("kind") == "inband_note" for _, x in cluster.items):
            return f"{head}: agents saved this in-band, {said}.{tail}"
        return f"{head}: {who} said this, {said}.{tail}"
    if fam == "where":
        query = _shared_wording(_per_session(cluster, "query"))
        return f"{head}: agents had to look for `{query}` before opening `{f.get('location')}`."
    return head + "."


# Who a lesson's excerpts are, by the lowest trust among them (the card and the risk read the same levels): a
# rationale never credits a person with what a page, a tool or the agent said.
WHO = {"user": "the person", "agent": "the agent", "tool": "tool output", "web": "fetched pages"}


def _who_said(cluster: Cluster) -> str:
    """A finding was said by the person when a person's words are among its excerpts, else by the least trusted of
    its excerpts (a page the agent fetched, a tool's output); the lesson by the least trusted of its findings."""
    speakers = set()
    for _, x in cluster.items:
        trusts = {e.get("trust") for e in x.get("evidence") or () if isinstance(e, Mapping)}
        speakers.add("user" if "user" in trusts else lowest_trust(trusts - {"user"}))
    return WHO[lowest_trust(speakers)]


def _change_words(old: str, new: str) -> str:
    """`from a to b`, or only the side that has a text (no empty ``)."""
    if old and new:
        return f" from `{old}` to `{new}`"
    if old:
        return f" away from `{old}`"
    return f" to `{new}`" if new else ""


def _isolated_row(cluster: Cluster, findings: Findings, reason: str) -> dict:
    f = cluster.leader.items[0][1]
    return {
        "kind": f.get("kind"),
        "key": redact(cluster.leader.key),
        "summary": redact(f.get("summary") or ""),
        "sessions": len(cluster.sessions),
        "supporting_sessions": sorted({str(e) for e in findings.external_ids(cluster.sessions)})[:20],
        "reason": reason,
    }


def _merge_lookups(clusters: list[Cluster]) -> list[Cluster]:
    """Several lookups made in exactly the same sessions are one piece of knowledge: propose it once."""
    by_sessions: dict[tuple, Cluster] = {}
    out = []
    for c in clusters:
        if c.family not in ("lookup", "where"):
            out.append(c)
            continue
        sig = tuple(c.sessions)
        if sig in by_sessions:
            host = by_sessions[sig]
            if host.family == "lookup" and c.family == "where":
                host.family = "where"
                host.buckets = c.buckets + host.buckets
            else:
                host.buckets += c.buckets
            continue
        by_sessions[sig] = c
        out.append(c)
    return out


def entries_alike(e: Entry, o: Entry) -> bool:
    """Two memory entries state the same rule or fact, in whatever words."""
    common = len(e.salient & o.salient)
    # Options are facts: "Library components build with -Wall -Werror." and "Executables build with -Wall -threaded
    # -rtsopts." set different flags, whatever else they share; one's flags within the other's may be one rule.
    opt_e, opt_o = nz.options(e.content), nz.options(o.content)
    if opt_e and opt_o and not anchors_compatible(opt_e, opt_o):
        return False
    if e.anchors or o.anchors:
        if not (e.anchors and o.anchors and anchors_compatible(e.anchors, o.anchors)):
            return False
        if common >= 2 and nz.overlap(e.salient, o.salient) >= 0.5:
            return True
        # The same version and the same option of the same tool, in sentences built otherwise ("Use Verilator 5.020
        # or later; older releases lack --timing." ~ "The testbenches rely on --timing, so Verilator must be >=
        # 5.020."): two concrete facts and the words around them shared.
        if e.anchors == o.anchors and opt_e and opt_e == opt_o and common >= 2 and not parallel(e.content, o.content):
            return True
        # The same address, path, range or time, and nothing that tells them apart ("Router loopbacks are allocated
        # from 10.255.0.0/24." ~ "lo0 addresses come out of 10.255.0.0/24 - never hand one out twice."): a
        # concrete fact that specific is what both entries are about, however their words differ.
        # (one may add a detail, a number; not another address or path: that is a second fact beside the first)
        if (
            any(_strong_anchor(a) for a in e.anchors & o.anchors)
            and not any(_strong_anchor(a) for a in e.anchors ^ o.anchors)
            and not parallel(e.content, o.content)
        ):
            return True
        # The same number of the same thing, spelt differently ("supports iOS 16 and later" ~ "the minimum target
        # is iOS sixteen"): all their numbers agree and one is counted by the same word.
        return (
            e.anchors == o.anchors
            and bool(nz.qualified_numbers(e.content) & nz.qualified_numbers(o.content))
            and not parallel(e.content, o.content)
        )
    # Without anchors: mostly the same words, or one entry's words all in the other ("Never force-push to main." ~
    # "Force pushes to the main branch are forbidden."), or two short rules that share the words of their point
    # ("Erase the whole flash before loading a bootloader." ~ "A full chip erase is required prior to programming
    # the bootloader.").
    if common >= 3 and (nz.jaccard(e.salient, o.salient) >= 0.7 or nz.overlap(e.salient, o.salient) >= 0.9):
        return True
    return (
        common >= 2
        and max(len(e.salient), len(o.salient)) <= SHORT_RULE
        and nz.overlap(e.salient, o.salient) >= 0.4
        and not parallel(e.content, o.content)
    )


def _strong_anchor(anchor: str) -> bool:
    """A path, an address, a range, a clock time or a named host (`oob-con01`): specific enough that two entries
    naming it are about one thing. Bare numbers, versions (`1.78`: one version, many facts) and short codes (`dc2`,
    `v2`) are not."""
    if not anchor.strip("0123456789."):
        return False
    return any(c in anchor for c in "/.:") or (
        "-" in anchor and len(anchor) >= 6 and any(c.isdigit() for c in anchor) and any(c.isalpha() for c in anchor)
    )


def parallel(a: str, b: str) -> bool:
    """Two texts built on one template with a slot filled differently ("Run the backend tests with pytest." /
    "Run the frontend tests with jest.", "Staging deploys go through ArgoCD." / "Production deploys go through
    Spinnaker."): look-alikes that state different facts. Their content words line up, and what does not line up is
    one swap of as many words on each side; a paraphrase rebuilds the sentence instead."""
    wa, wb = _content_sequence(a), _content_sequence(b)
    sm = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    if not wa or not wb or sm.ratio() < 0.5:
        return False
    blocks = sm.get_matching_blocks()
    rest_a = {w for i, w in enumerate(wa) if not any(x.a <= i < x.a + x.size for x in blocks)}
    rest_b = {w for j, w in enumerate(wb) if not any(x.b <= j < x.b + x.size for x in blocks)}
    return bool(rest_a) and len(rest_a) == len(rest_b) and not rest_a & rest_b


def _content_sequence(text: str) -> list[str]:
    """The stemmed content words of a text in order, without its URLs, paths and numbers."""
    text = nz.PATH_RE.sub(" ", nz.URL_RE.sub(" ", text or ""))
    return [nz.stem(w) for w in nz.words(text) if w not in nz.STOPWORDS and not any(c.isdigit() for c in w)]


SHORT_RULE = 10  # salient words of a one-line rule


IN_BAND = "agent"  # an entry an agent wrote in-band (dreamweb.provenance.Origin.AGENT): one key's word, unreviewed


def _merge_duplicates(index: MemoryIndex, n: int) -> list[ProposalDraft]:
    """Existing entries that say the same thing (same scope, same anchors, mostly the same words)."""
    entries = index.entries
    parent = list(range(len(entries)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    blocks: dict[tuple, list[int]] = defaultdict(list)
    for i, e in enumerate(entries):
        keys = [("a", a) for a in sorted(e.anchors) if not a.isdigit()][:4]
        # Every word of a short rule (two shared words can be its whole point); min-hash picks of a longer text.
        words = sorted(e.salient) if len(e.salient) <= SHORT_RULE else nz.minhash_keys(e.salient, 3)
        keys += [("w", w) for w in words]
        keys += [("q", q) for q in sorted(nz.qualified_numbers(e.content))[:4]]
        for blk in keys:
            for j in blocks[blk][:MAX_LEADERS]:
                o = entries[j]
                if (o.scope_agent, o.scope_task) != (e.scope_agent, e.scope_task) or find(i) == find(j):
                    continue
                if entries_alike(e, o):
                    parent[find(i)] = find(j)
            blocks[blk].append(i)
    groups: dict[int, list[Entry]] = defaultdict(list)
    for i, e in enumerate(entries):
        groups[find(i)].append(e)
    drafts = []
    for members in groups.values():
        if len(members) < 2:
            continue
        # A reviewed or person-written entry is the base, and an agent's in-band copy adds nothing to it: a
        # look-alike written by one key ("`make test` is optional") must not ride a merge into it. Among equals, the
        # longest text is the base and the others add the facts it lacks.
        members.sort(key=lambda e: (e.origin == IN_BAND, -len(e.content), e.key))
        text = members[0].content.strip()
        for other in members[1:]:
            if other.origin == IN_BAND and members[0].origin != IN_BAND:
                continue
            for sentence in re.split(r"(?<=[.!?])\s+", other.content.strip()):
                have_anc, have_sal = nz.anchors(text), nz.salient(text)
                new_facts = nz.anchors(sentence) - have_anc
                if new_facts or nz.containment(nz.salient(sentence), have_sal) < 0.5:
                    text = text.rstrip() + " " + sentence
        keys = sorted(e.key for e in members)
        drafts.append(
            ProposalDraft(
                target_kind="memory",
                operation="merge",
                targets=keys,
                target_hashes={e.key: e.content_hash for e in members},
                content=text,
                scope_agent=members[0].scope_agent,
                scope_task=members[0].scope_task,
                kind="duplicate",
                rationale=f"Entries {', '.join(f'`{k}`' for k in keys)} say the same thing; one entry keeps the facts "
                "of "
                f"all ({len(members)} entries, same scope).",
                prevalence_sessions=0,
                prevalence_of=n,
                confidence=0.7,
                risk="low",
                risk_reasons=[],
                signature=signature("merge", "memory", keys, "merge:" + ",".join(keys)),
                evidence=[],
                key_hint=keys[0],
            )
        )
    return drafts


def aggregate(
    sessions: Sequence[SessionFindings] | Findings,
    *,
    sessions_analysed: int,
    memory: list[dict],
    skills=(),
    min_sessions: int = 3,
    min_share: float = 0.0,
    store_kind: str = "project",
    allowed_hosts=(),
    agent_tasks: dict | None = None,
    keep_evidence=None,
) -> AggregateResult:
    """Drafts from the analysed sessions' findings. ``sessions``: every analysed session, or, with ``agent_tasks``
    (agent → Counter(task → analysed sessions), counted over every analysed session), only those with findings: a
    session without findings is then no object at all, only its count (finalize of a 100,000-session cycle).
    ``sessions`` may be Findings (read again, a pattern at a time, instead of held: finalize's).
    ``keep_evidence``: called with each finished draft's evidence rows (assessed and redacted), returns what the
    draft holds instead (finalize writes them out: reviews.dreams.spill); by default the draft keeps its list."""
    # Grouping allocates many small objects and creates no reference cycles: the cyclic collector would only rescan
    # the growing heap again and again (about 40 % of the time at 100k findings), so it is paused meanwhile.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _aggregate(
            sessions,
            sessions_analysed=sessions_analysed,
            memory=memory,
            skills=skills,
            min_sessions=min_sessions,
            min_share=min_share,
            store_kind=store_kind,
            allowed_hosts=allowed_hosts,
            agent_tasks=agent_tasks,
            keep_evidence=keep_evidence,
        )
    finally:
        if paused:
            gc.enable()


def _aggregate(
    sessions,
    *,
    sessions_analysed,
    memory,
    skills,
    min_sessions,
    min_share,
    store_kind,
    allowed_hosts,
    agent_tasks,
    keep_evidence,
) -> AggregateResult:
    findings = sessions if hasattr(sessions, "at") else _Listed(sessions)
    result = AggregateResult()
    index = MemoryIndex(memory, skills)
    if agent_tasks is None:
        agent_tasks = defaultdict(Counter)
        for sf in findings:
            agent_tasks[sf.agent][sf.task] += 1

    buckets, read = _buckets(findings)
    n = max(int(sessions_analysed or 0), read, 1)
    clusters = []
    for members in group(buckets):
        # A cluster's sessions, one machine word each; its buckets' own lists go.
        ids = members[0].sessions if len(members) == 1 else sorted(set().union(*(b.sessions for b in members)))
        for b in members:
            b.sessions = None
        clusters.append(Cluster(members[0].family, members, array("l", ids)))
    del buckets

    proposable: list[Cluster] = []
    isolated: list[tuple[Cluster, str]] = []
    for c in clusters:
        k = len(c.sessions)
        if c.family == "secret" or c.family == "injection":
            row = _isolated_row(
                c,
                findings,
                "holds a secret: never proposed"
                if c.family == "secret"
                else "a fetched page gives agents instructions: never proposed",
            )
            result.withheld.append(row)
            continue
        if not recurs(k, n, min_sessions, min_share):
            isolated.append((c, f"seen in {k} of {n} sessions"))
            continue
        if c.family == "failure":
            isolated.append((c, "recurring failure, but no fix was seen"))
            continue
        if c.family == "guess" and len(_guessed_paths(c, findings)) < GUESSED_PATHS:
            # One wrong path again and again is a place to remember (a rediscovery says it, "not X"); guessing is a
            # habit only when the wrong paths differ.
            isolated.append((c, "the same wrong path: a rediscovery says where the file is"))
            continue
        if c.family == "lookup":
            # A read or search with nothing showing the agent was looking for it (no failed look first, no search
            # whose result it then opened) is the work itself, however often it recurs.
            isolated.append((c, "routine read or search: nothing shows the agent was looking for it"))
            continue
        proposable.append(c)
    proposable = _merge_lookups(proposable)
    overturned = superseded(proposable, lambda c: [(sf.agent, sf.started) for _, sf in findings.at(c.sessions)])
    if overturned:
        isolated += [(c, redact(overturned[id(c)])) for c in proposable if id(c) in overturned]
        proposable = [c for c in proposable if id(c) not in overturned]

    allowed = set(allowed_hosts or ()) | index.hosts
    for c in proposable:
        # One pattern's findings at a time, read again for its draft and let go once its evidence is kept.
        by_index = _drafting(c, findings)
        draft = _draft(c, by_index, n, index, min_sessions, agent_tasks, result)
        _drafted(c)
        del by_index
        if isinstance(draft, str):  # on record for that reason, not proposed
            isolated.append((c, draft))
            continue
        if draft is None:
            continue
        _finish(draft, index, store_kind, allowed)
        if keep_evidence is not None:
            draft.evidence = keep_evidence(draft.evidence)
        result.proposals.append(draft)
    for draft in _merge_duplicates(index, n):
        _finish(draft, index, store_kind, allowed)
        result.proposals.append(draft)

    # Only the most prevalent isolated patterns are written out (redacting each one costs a few regexes).
    isolated.sort(key=lambda ci: (-len(ci[0].sessions), ci[0].leader.key))
    result.isolated = [_isolated_row(c, findings, reason) for c, reason in isolated[:MAX_ISOLATED]]
    result.proposals.sort(key=lambda d: (-d.prevalence_sessions, d.operation, d.signature))
    return result


def _guessed_paths(c: Cluster, findings: Findings) -> set[str]:
    _drafting(c, findings)
    try:
        return _per_session_set(c, "location")
    finally:
        _drafted(c)


def _finish(draft: ProposalDraft, index: MemoryIndex, store_kind: str, allowed) -> None:
    origins = {e.key: e.origin for e in index.entries}
    draft.risk, draft.risk_reasons = assess(draft, store_kind=store_kind, allowed_hosts=allowed, target_origins=origins)
    redact_draft(draft)


_CHAIN_WORDS = {"&&", "||", ";", "|"}


def _delta_known(f: dict, index: MemoryIndex, agent: str | None) -> Entry | None:
    """An entry that already names what the fix adds (`--offline` for `./gradlew assembleDebug --offline`), in the
    fix's context: memory knows the lesson even if it never spells out this exact command."""
    new, old = f.get("new") or "", f.get("old") or ""
    added = [t for t in sorted(nz.command_words(new) - nz.command_words(old)) if t not in _CHAIN_WORDS]
    # Everything the fix adds must be there, and something distinctive (a flag, a word, not just a number).
    if not added or not any(re.search(r"[a-z]{3}", t) and t.strip("-") not in nz.STOPWORDS for t in added):
        return None
    context = nz.salient(f"{old} {new} {nz.error_line(f.get('error') or '')}") - {
        w for t in added for w in nz.salient(t)
    }
    # The tool itself, also when it is run by path (`./gradlew` ~ "Gradle builds ...").
    context |= {nz.stem(nz.program_stem(nz.program(c))) for c in (old, new) if len(nz.program_stem(nz.program(c))) > 2}
    for e in index.mentioning(added[0]):
        if _scope_ok(e, agent) and all(_words_re(t).search(e.lower) for t in added) and e.salient & context:
            return e
    return None


def _delta_stale(f: dict, index: MemoryIndex, agent: str | None) -> tuple[Entry, tuple | None] | None:
    """An entry that names what the fix took away (`format=pdf` of `dsar_export … format=pdf` that fails, where
    `format=jsonl-zip` works) beside the tool itself, in words of its own ("export with dsar_export using
    format=pdf"), and not what the fix put instead: memory still says the old way. With it, the swap of the one
    argument when one replaced one, so the entry is corrected in its own words."""
    new, old = f.get("new") or "", f.get("old") or ""
    program = nz.program(old)
    if not program or program != nz.program(new):
        return None
    removed = [t for t in sorted(nz.command_words(old) - nz.command_words(new)) if t not in _CHAIN_WORDS]
    added = [t for t in sorted(nz.command_words(new) - nz.command_words(old)) if t not in _CHAIN_WORDS]
    # Arguments, not the program; each distinctive (letters, not only a number or a stop word).
    if not removed or any(t == program or not re.search(r"[a-z]{2}", t) or t in nz.STOPWORDS for t in removed):
        return None
    tool = _words_re(own_name(program) or program)  # `mcp__tools__dsar_export` is written `dsar_export`
    for e in index.mentioning(removed[0]):
        if (
            _scope_ok(e, agent)
            and tool.search(e.lower)
            and all(_words_re(t).search(e.lower) for t in removed)
            and not any(_words_re(t).search(e.lower) for t in added)
        ):
            swap = (removed[0], added[0]) if len(removed) == 1 and len(added) == 1 else None
            return e, swap
    return None


# What an entry writes where a command takes a value: `START`, `<date>`, `{env}`, `$REGION`, `YYYY-MM-DD`, `...`.
_PLACEHOLDER = re.compile(
    r"[A-Z][A-Z0-9_]{1,30}|<[^<>\s]{1,30}>|\{[^{}\s]{1,30}\}|\$\{?[A-Za-z_]\w{0,30}\}?|[YMDHS]{2,4}(?:[-/:.][YMDHS]{2,4})+|\.{3}|…"
)


_QUOTES_AROUND = re.compile(r"^[`'\"(]+|[`'\",;.:)]+$")


def _template_stale(f: dict, index: MemoryIndex, agent: str | None) -> tuple[Entry, tuple] | None:
    """An entry that writes the failing command as a template (`airflow dags backfill -s START -e END eod_prices`
    for `airflow dags backfill -s 2026-09-01 -e 2026-09-30 eod_prices`): every word the same but where the entry
    holds a placeholder. The swap is the entry's phrase and the working command with the same placeholders put back
    where the failing one had the values."""
    new, old = f.get("new") or "", f.get("old") or ""
    toks = nz.command_tokens(old)
    if len(toks) < 3 or not new:
        return None
    head = _words_re(" ".join(toks[:2]))
    for e in index.mentioning(toks[0]):
        if not _scope_ok(e, agent):
            continue
        for m in head.finditer(e.content):
            written = e.content[m.start() :].split()[: len(toks)]
            written = [w if w.strip(".…") == "" else _QUOTES_AROUND.sub("", w) for w in written]
            if len(written) < len(toks):
                continue
            values = {}
            literal = 0
            for t, w in zip(toks, written, strict=True):
                if t.lower() == w.lower():
                    literal += 1
                elif _PLACEHOLDER.fullmatch(w) and not t.startswith("-"):
                    values[t] = w
                else:
                    break
            else:
                if values and literal >= 3:
                    templated = " ".join(values.get(t, t) for t in nz.command_tokens(new))
                    return e, (" ".join(written), templated)
    return None


def _version_sibling(new: str, index: MemoryIndex, agent: str | None) -> tuple[Entry, str, str] | None:
    """An entry that runs the same command with another version or number (`nvm use 16` where the sessions needed
    `nvm use 20`): (entry, its phrase, the phrase that works)."""
    for part in nz.command_parts(new):
        toks = nz.command_tokens(part)
        i = next((j for j, t in enumerate(toks) if j >= 1 and re.search(r"\d", t)), None)
        if i is None or i > 3:
            continue
        prefix = " ".join(toks[:i])
        pat = re.compile(rf"(?<![\w-]){re.escape(prefix)}\s+([^\s`'\"]*\d[^\s`'\"]*?)[.,;:)]?(?=[\s`'\"]|$)", re.I)
        for e in index.mentioning(prefix):
            m = pat.search(e.content)
            if m and _scope_ok(e, agent) and m.group(1).lower() != toks[i].lower():
                return e, f"{prefix} {m.group(1)}", f"{prefix} {toks[i]}"
    return None


def _known_or_stale(c: Cluster, index: MemoryIndex, agent: str | None) -> tuple[str, Entry | None, tuple | None]:
    """('known', entry, None) when memory (or a skill) already says it, ('stale', entry, swap) when an entry says the
    opposite (swap: the entry's phrase and its replacement, when it is not the failed command itself),
    ('new', None, None) otherwise."""
    state, entry = _known_or_stale_entry(c, index, agent)
    if state == "new" and c.family == "fix":
        f = c.items[0][1]
        hit = _delta_known(f, index, agent)
        if hit is not None:
            return "known", hit, None
        sib = _version_sibling(f.get("new") or "", index, agent)
        if sib is not None:
            return "stale", sib[0], (sib[1], sib[2])
        gone = _delta_stale(f, index, agent)
        if gone is not None:
            return "stale", gone[0], gone[1]
        template = _template_stale(f, index, agent)
        if template is not None:
            return "stale", template[0], template[1]
    return state, entry, None


def _known_or_stale_entry(c: Cluster, index: MemoryIndex, agent: str | None) -> tuple[str, Entry | None]:
    f = c.items[0][1]
    fam = c.family
    if fam == "check":
        # Memory that already names the rule (`nilerr`) or the check's message knows the lesson; nothing is stale.
        phrase = f.get("rule") or ""
        hits = [e for e in index.mentioning(phrase) if _scope_ok(e, agent)] if phrase else []
        return ("known", hits[0]) if hits else ("new", None)
    if fam in ("fix", "pref"):
        new, old = f.get("new") or "", f.get("old") or ""
        new_words = f.get("said_new") or []
        old_words = f.get("said_old") or []
        known = [e for e in index.mentioning(new) if _scope_ok(e, agent)]
        if not known and new_words:
            known = [
                e
                for e in index.mentioning(new_words[0])
                if _scope_ok(e, agent) and all(_words_re(w).search(e.lower) for w in new_words)
            ]
        if known:
            return "known", known[0]
        if index.skill_mentions(new):
            return "known", None
        stale = [e for e in index.mentioning(old) if _scope_ok(e, agent)] if fam == "fix" or old else []
        if not stale and old_words:
            stale = [
                e
                for e in index.mentioning(old_words[0])
                if _scope_ok(e, agent) and all(_words_re(w).search(e.lower) for w in old_words)
            ]
        if stale:
            return "stale", stale[0]
        return "new", None
    if fam == "guess":
        return "new", None  # a habit of this team's agents, not a fact memory could already hold
    if fam == "request":
        noun = f.get("noun") or ""
        hits = [e for e in index.mentioning(noun) + index.mentioning(plural(noun)) if _scope_ok(e, agent)]
        return ("known", hits[0]) if hits else ("new", None)
    if fam in ("where", "lookup"):
        loc = f.get("location") or f.get("query") or ""
        hits = [e for e in index.mentioning(loc) if _scope_ok(e, agent)]
        if hits:
            return "known", hits[0]
        if index.skill_mentions(loc):
            return "known", None
        return "new", None
    # Each of the most common wordings (a few): one may share the entry's words where the chosen one does not.
    if fam == "note":
        texts = [_note_text(c)] + [t for t, _ in Counter(x.get("summary") or "" for _, x in c.items).most_common(4)]
    else:
        texts = [f.get("summary") or ""]
    stale = None
    for text in dict.fromkeys(texts):
        anc, sal = nz.anchors(text), nz.salient(text)
        for e in index.candidates(anc | sal):
            if not _scope_ok(e, agent):
                continue
            common = len(sal & e.salient)
            if anc <= e.anchors and (not anc or common >= 2) and nz.containment(sal, e.salient) >= 0.6:
                if fam == "note" and contradicts(nz.negated(text), sal, nz.negated(e.content), e.salient):
                    # The same words, denied (or affirmed) now: the entry is contradicted, not reinforced.
                    stale = stale or e
                    continue
                return "known", e
            # Same topic, different concrete facts (a changed number, host or path): the entry is out of date.
            if (
                stale is None
                and common >= 3
                and nz.overlap(sal, e.salient) >= 0.6
                and anc
                and e.anchors
                and not anchors_compatible(anc, e.anchors)
            ):
                stale = e
    return ("stale", stale) if stale is not None else ("new", None)


def _draft(c, sessions, n, index: MemoryIndex, min_sessions, agent_tasks, result) -> ProposalDraft | str | None:
    k = len(c.sessions)
    scope_agent, scope_task = _scope(c, sessions, agent_tasks)
    state, entry, swap = _known_or_stale(c, index, scope_agent)
    first = c.items[0][1]
    if (
        state == "new"
        and first.get("kind") == "corrected_command"
        and c.leader.count >= min_sessions  # as the skill update counts it: by the finding's own key
        and index.skill_holds(first.get("old") or "")
    ):
        # The failing step is written in a skill: the skill's update fixes it there (reviews.analysis.skills), so
        # one lesson is one card, not a memory entry beside the skill that still says the wrong thing.
        return IN_SKILL
    if state == "known":
        result.reinforced.append(
            {
                "key": entry.key if entry else None,
                "content_hash": entry.content_hash if entry else None,
                "kind": first.get("kind"),
                "summary": redact(first.get("summary") or ""),
                "sessions": k,
                "supporting_sessions": sorted({str(sessions[i].external_id) for i in c.sessions}),
                "evidence": _evidence(c, sessions, release=True)[:10],
            }
        )
        return None
    f = c.items[0][1]
    fam = c.family
    of = _scope_size(scope_agent, scope_task, agent_tasks, n)
    rationale = _describe(c, sessions, of)
    if fam == "note":
        content = _note_text(c)
        kind = "note"
    elif fam == "request":
        what = f"{f.get('verb')} {plural(f.get('noun') or '')}"
        content = (
            f"In {k} sessions the person had to ask for it once the work was done: {what}. {what[0].upper()}"
            f"{what[1:]} as part of the work, without being asked."
        )
        kind = "preference"
    elif fam == "guess":
        tool = f.get("tool") or "the read"
        content = (
            f"Paths were guessed and not there: `{tool}` of a file that does not exist, in {k} sessions (a different "
            f"file each time). Look a file up first (a glob or a search for its name) and read it from the path found."
        )
        kind = "repeated_mistake"
    elif fam in ("fix", "pref", "where", "check"):
        content = _shared_wording(_per_session(c, "summary"))
        kind = {"fix": "repeated_mistake", "pref": "preference", "where": "rediscovered_knowledge"}.get(
            fam, "tool_failure"
        )
        if fam == "fix":
            errors = {nz.error_line(x.get("error") or "") for _, x in c.items}
            if f.get("kind") == "tool_failure" or len(errors) > 1:
                kind = "tool_failure"
            content = _prep_text(c) or _without_scattered_error(content)
        if fam == "pref":
            content = _with_request(c, content)
        if fam == "where":
            content = _sought_text(c) or content
        if fam == "where" and len(c.buckets) > 1 and not content.startswith(SOUGHT_HEAD):
            extra = sorted({x.get("query") or "" for b in c.buckets[1:] for _, x in b.items} - {f.get("query")})
            if extra:
                content += " Also looked up: " + ", ".join(f"`{q}`" for q in extra[:3]) + "."
    else:  # lookup
        queries = []
        for b in c.buckets:
            queries.append(_most_common([x.get("summary") or "" for _, x in b.items]))
        content = " ".join(queries)
        kind = "rediscovered_knowledge"
    if state == "stale" and entry is not None:
        old, new = f.get("old") or "", f.get("new") or ""
        said_old, said_new = f.get("said_old") or [], f.get("said_new") or []
        if fam == "fix":
            err = trim(nz.error_line(f.get("error") or ""), 120)
            why = f"(`{swap[0]}` no longer works: `{old}` then fails: {err})" if swap else f"(`{old}` now fails: {err})"
            content = _rewrite(entry.content, *(swap or (old, new)), why)
        elif fam == "pref" and old and new and _words_re(nz.collapse(old)).search(entry.content):
            # The entry holds the corrected command whole: the command the user asked for takes its place (swapping
            # one word inside it made `flutter build apk --release appbundle` of `… --split-per-abi`).
            content = _rewrite(entry.content, old, new, f"(Users corrected `{old}` to `{new}` in {k} sessions.)")
        elif (
            fam == "pref" and len(said_old) == 1 and len(said_new) == 1 and _words_re(said_old[0]).search(entry.content)
        ):
            # The user swapped one choice for another: swap it in the entry's own words.
            written = nz.as_written(said_new[0], new)
            content = _words_re(said_old[0]).sub(lambda m: written, entry.content).rstrip()
            content += f" (Not `{nz.as_written(said_old[0], old)}`: users corrected this in {k} sessions.)"
        elif fam == "pref":
            content = _rewrite(entry.content, old, new, f"(Users corrected `{old}` to `{new}` in {k} sessions.)")
        rationale = f'Memory entry `{entry.key}` is out of date: it says "{trim(entry.content, 160)}". ' + rationale
        operation, targets, hashes, kind = "update", [entry.key], {entry.key: entry.content_hash}, "stale"
        key_hint = entry.key
    else:
        operation, targets, hashes = "add", [], {}
        key_hint = _key_hint(c)
    sources, agents = count_sources(sessions[i] for i in c.sessions)
    confidence = _confidence(c, min_sessions, n)
    content_key = _core_key(c)
    evidence = _evidence(c, sessions, release=True)  # last: the findings go as their rows are made
    return ProposalDraft(
        target_kind="memory",
        operation=operation,
        targets=targets,
        target_hashes=hashes,
        content=content,
        scope_agent=scope_agent,
        scope_task=scope_task,
        kind=kind,
        rationale=rationale,
        prevalence_sessions=k,
        prevalence_of=of,
        prevalence_sources=sources,
        prevalence_agents=agents,
        confidence=confidence,
        risk="low",
        risk_reasons=[],
        signature=signature(operation, "memory", targets, content_key),
        evidence=evidence,
        key_hint=key_hint,
    )


def _key_hint(c: Cluster) -> str:
    f = c.items[0][1]
    if c.family == "fix":
        return "command-" + nz.slug(f.get("new") or "", 40)
    if c.family == "check":
        return "check-" + nz.slug(f.get("rule") or f.get("error_signature") or "", 40)
    if c.family == "request":
        return "ask-" + nz.slug(f"{f.get('verb')} {f.get('noun')}", 40)
    if c.family == "guess":
        return "look-up-paths-" + nz.slug(f.get("tool") or "", 30)
    if c.family == "pref":
        return "prefer-" + nz.slug(" ".join(f.get("said_new") or [f.get("new") or ""]), 40)
    if c.family in ("where", "lookup"):
        return "where-" + nz.slug(f.get("location") or f.get("query") or "", 40)
    words = [w for w in nz.words(_note_text(c)) if w not in nz.STOPWORDS][:5]
    return "note-" + nz.slug(" ".join(words), 40)


# --- effectiveness: one finding against the memory -------------------------------------------------------------------

# The families whose finding is a mistake made again (a wrong command, a correction, a hunt for something known, a
# failing check, a guessed path); notes are knowledge, not mistakes.
MISTAKE_FAMILIES = frozenset({"fix", "pref", "where", "check", "guess"})


def signal_key(f: dict) -> str:
    """A finding's grouping identity (family and normalised key), equal across sessions for one pattern: how a
    lesson born from a finding recognises the same mistake in a later session."""
    fam = family_of(f)
    key = nz.collapse(str(f.get("key") or "")).lower() or nz.content_key(f.get("summary") or "")
    return f"{fam}:{key}"


def lesson_match(f: dict, index: MemoryIndex, agent: str | None = None) -> tuple[str, Entry | None]:
    """What the memory says of one finding, with the same tests the aggregation uses: ('known', entry) when an
    entry already holds the lesson (the mistake recurred although memory has it), ('stale', entry) when an entry
    says what the finding corrects, ('new', None) otherwise or when the finding is no mistake."""
    fam = family_of(f)
    if fam not in MISTAKE_FAMILIES:
        return "new", None
    bucket = Bucket(fam, signal_key(f).split(":", 1)[1], [(0, f)])
    state, entry, _ = _known_or_stale(Cluster(fam, [bucket], [0], [(0, f)]), index, agent)
    return state, entry
