"""The plain shapes that travel between the analyzers, the aggregation and the orchestration.

Findings themselves stay plain dicts (they are stored as JSON in SessionAnalysis.findings); `make_finding` fills
the defaults and trims excerpts so that both analyzers (rules and openai) emit the same shape.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

# Highest trust first: the trust of a finding is the lowest among its evidence.
TRUST_ORDER = ("user", "agent", "tool", "web")
EXCERPT_CHARS = 300


# The flag of a stored finding that repeats served memory (AnalysisResult.served_findings).
SERVED = "served"


def stored_findings(result: AnalysisResult) -> list[dict]:
    """What a session analysis stores: its findings, then the recurrences of served lessons flagged SERVED."""
    return list(result.findings) + [{**f, SERVED: True} for f in getattr(result, "served_findings", None) or ()]


def evidence_findings(findings) -> list[dict]:
    """The stored findings that are evidence for proposals: those that do not repeat served memory."""
    return [f for f in findings or () if isinstance(f, dict) and not f.get(SERVED)]


def lowest_trust(trusts) -> str:
    ranks = [TRUST_ORDER.index(t) for t in trusts if t in TRUST_ORDER]
    return TRUST_ORDER[max(ranks)] if ranks else "agent"


def recurs(k: int, n: int, min_sessions: int, min_share: float) -> bool:
    """A pattern seen in ``k`` of ``n`` analysed sessions is recurrent: in at least ``min_sessions`` of them and at
    least ``min_share`` of all (n = 0: the share is not checked)."""
    return k >= min_sessions and (not n or k / n >= min_share)


def trim(text: str, limit: int = EXCERPT_CHARS) -> str:
    """An exact prefix of the text (so a page can still find it in the event), cut at a word if possible."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.6 else cut).rstrip() + " …"


def plural(noun: str) -> str:
    """An English noun's plural, for the nouns a lesson names (`test` → `tests`, `entry` → `entries`)."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")


def evidence(event_index: int, excerpt: str, trust: str) -> dict:
    return {"event_index": int(event_index), "excerpt": trim(excerpt), "trust": trust}


def make_finding(kind: str, key: str, summary: str, *, evidence: list[dict], confidence: float = 0.5, **extra) -> dict:
    """A finding dict as docs/dream-pipeline.md describes it; `extra` holds old/new/tags/kind-specific fields."""
    finding = {
        "kind": kind,
        "key": key,
        "summary": summary,
        "trust": lowest_trust(e.get("trust") for e in evidence),
        "confidence": round(float(confidence), 3),
        "evidence": evidence,
        "tags": list(extra.pop("tags", []) or []),
    }
    finding.update({k: v for k, v in extra.items() if v is not None})
    return finding


@dataclass
class AnalysisResult:
    findings: list[dict] = field(default_factory=list)
    tokens_input: int = 0
    tokens_output: int = 0
    # Mistakes made again although the memory served into the session says the fix: never evidence for a proposal
    # (dreams do not eat dreams), but what memory effectiveness counts. Stored among the findings with SERVED set.
    served_findings: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(slots=True)
class SessionFindings:
    """One analysed session as the aggregation sees it. Pass every analysed session, also those without findings:
    the aggregation uses them as the baseline for agent/task scoping. Slots: a run holds one per session it read
    (100,000 in a big cycle), most of them without findings, so the per-object dictionary was most of its size."""

    session_id: int | str
    external_id: str
    agent: str
    task: str | None
    findings: list[dict] = field(default_factory=list)
    # The credential that delivered the session (AgentSession.source: "key:12", "user:3", "import:…"); empty when
    # unknown (pure tests, benchmarks): the session then counts as a source of its own.
    source: str = ""
    # When the session started (epoch seconds; its ingest time when it names no start; 0 when unknown): a lesson
    # later sessions overturn gives way to theirs (reviews.analysis.drift).
    started: float = 0.0

    @property
    def source_key(self) -> str:
        return self.source or f"session:{self.session_id}"


@dataclass
class ProposalDraft:
    # Exactly the fields of reviews.models.Proposal that a dream fills in ...
    target_kind: str
    operation: str
    targets: list[str]
    target_hashes: dict
    content: str | None
    scope_agent: str | None
    scope_task: str | None
    kind: str
    rationale: str
    prevalence_sessions: int
    prevalence_of: int
    confidence: float
    risk: str
    risk_reasons: list[str]
    signature: str
    # Distinct credentials that delivered the supporting sessions, and distinct agent names among them
    # (count_sources); 0 when the draft has no supporting session (a merge of existing entries).
    prevalence_sources: int = 0
    prevalence_agents: int = 0
    # ... plus the evidence rows ({session_id, external_id, event_index, excerpt, trust}) and a key for an `add`.
    evidence: list[dict] = field(default_factory=list)
    key_hint: str = ""

    @property
    def supporting_sessions(self) -> list[str]:
        """external_id of every session in the evidence, sorted."""
        return sorted({str(e.get("external_id") or e.get("session_id")) for e in self.evidence})

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class AggregateResult:
    proposals: list[ProposalDraft] = field(default_factory=list)
    # Patterns seen in too few sessions (or never proposable, with a `reason`): kept for the record.
    isolated: list[dict] = field(default_factory=list)
    # Patterns the memory already holds: {key, content_hash, sessions, ...}; the caller may record the evidence.
    reinforced: list[dict] = field(default_factory=list)
    # Findings held back because their point is a secret (already redacted): never proposed.
    withheld: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def count_sources(supporting) -> tuple[int, int]:
    """(distinct sources, distinct agents) among the supporting sessions (SessionFindings). A source is the
    credential that pushed a session, never the agent name the session claims: one key that pushes sessions under
    many agent names is one source."""
    found = list(supporting)
    return len({s.source_key for s in found}), len({s.agent for s in found})


def signature(operation: str, target_kind: str, targets, content_key: str) -> str:
    """sha256(operation | target_kind | sorted targets | normalised content key): one pending proposal per store."""
    raw = "|".join([operation, target_kind, ",".join(sorted(targets)), content_key])
    return hashlib.sha256(raw.encode()).hexdigest()
