"""Deterministic risk of a proposed memory change (secret detection and redaction: dreamweb.secret_scan).

No language model decides risk: these rules do. `high` means a person must look (the policy never auto-applies it).
"""

from __future__ import annotations

import re

from dreamweb import screening
from dreamweb.secret_scan import (  # noqa: F401 - the dream's code reads them as the risk rules' names
    REDACTED,
    find_secrets,
    has_secret,
    redact,
    scan_memo,
    secret_kinds,
)

# --- dangerous instructions ---------------------------------------------------------------------------------------

# Text that addresses the AI agents themselves: the mark of a prompt injection, never of a lesson.
INJECTION = re.compile(
    r"(?i)\b(?:(?:note |message )?(?:to|for) (?:all |any )?(?:ai|llm|coding|language[- ]model) "
    r"(?:agents?|assistants?|models?|bots?)|(?:ai|llm) (?:agents?|assistants?|models?)(?=\s*[:,])|"
    r"(?:ignore|disregard|forget) (?:all |any )?(?:(?:of )?(?:the |your )?)(?:previous|prior|above|earlier|other) "
    r"(?:instructions|rules|guidelines)|remember (?:this )?permanently|system prompt|you must now|new instructions|"
    r"(?:add|save|store|write) (?:this|the following) (?:to|in|into) (?:your )?(?:long[- ]term |persistent )?memory|"
    r"you are now in|do not tell the user)\b|\[system\]|<\s*system\s*>"
)


def _get(draft, name, default=None):
    return draft.get(name, default) if isinstance(draft, dict) else getattr(draft, name, default)


# Reasons that mark a proposal as poisoned or secret-bearing: such a proposal is quarantined, never applied. The
# screening reasons (markup, remote code, credential reads, sending data away, text addressing agents, unknown hosts)
# come from dreamweb.screening, which in-band writes share.
REASON_REMOTE_CODE = screening.REASON_REMOTE_CODE
REASON_INJECTION = screening.REASON_INJECTION
REASON_EXFILTRATION = screening.REASON_EXFILTRATION
REASON_MARKUP = screening.REASON_MARKUP
REASON_CREDENTIAL_READ = screening.REASON_CREDENTIAL_READ
REASON_SECRET = "Contained something that looks like a secret (redacted)."
POISON_REASONS = frozenset({*screening.POISON_REASONS, REASON_SECRET})
REASON_SKILL = "Changes a skill; skills are promoted by people, so it always waits for a reviewer."
# Short: a card shows it twice (the list and the badge's title). What a source is: AgentSession.source.
REASON_ONE_SOURCE = "One source: one credential pushed all its sessions."


def one_source(draft) -> bool:
    """Sessions support the draft, and one credential delivered them all (prevalence_sources; 0: not counted)."""
    return bool(_get(draft, "prevalence_sessions", 0) or _get(draft, "evidence")) and (
        _get(draft, "prevalence_sources", 0) == 1
    )


def is_poisoned(risk: str, reasons) -> bool:
    """High risk because of poisoning, an unknown host or a secret (not merely because of where it applies)."""
    return risk == "high" and any(r == REASON_SECRET or screening.is_screening_reason(r) for r in reasons or ())


def assess(
    draft,
    *,
    store_kind: str = "project",
    allowed_hosts=(),
    target_origins: dict | None = None,
) -> tuple[str, list[str]]:
    """(risk, reasons) for a ProposalDraft (or a dict with the same fields). Call it BEFORE redaction so that a
    secret is seen; `target_origins` maps target keys to the entries' origin (human/agent/dream/import)."""
    operation = _get(draft, "operation", "add")
    content = _get(draft, "content") or ""
    texts = [content, _get(draft, "rationale") or ""] + [e.get("excerpt") or "" for e in _get(draft, "evidence") or []]
    high: list[str] = []
    medium: list[str] = []

    if operation == "remove":
        high.append("Removes an entry from memory.")
    if store_kind == "shared":
        high.append("Changes a shared store that every agent of the team reads.")
    # Whatever its wording: markup, remote code, credential reads, data sent away, text addressing agents, hosts the
    # team has not allowed (dreamweb.screening; in-band writes get the same screen).
    high += screening.screen(content, allowed_hosts=allowed_hosts)
    trusts = {e.get("trust") for e in _get(draft, "evidence") or []}
    if trusts and trusts <= {"tool", "web"}:
        source = "web pages" if "web" in trusts else "tool output"
        high.append(f"All its evidence comes from {source}, not from a user or an agent.")
    # A secret the analyzer already redacted is still a secret the lesson rode on (`GH_TOKEN=[REDACTED] gh ...`):
    # a person decides whether what is left is a lesson.
    if any(has_secret(t) or REDACTED in t for t in texts):
        high.append(REASON_SECRET)

    origins = target_origins or {}
    human = [k for k in _get(draft, "targets") or [] if origins.get(k) in ("human", "import")]
    if operation in ("update", "remove", "merge") and human:
        medium.append(f"Rewrites a human-written entry ({', '.join(human[:3])}).")
    if operation == "merge":
        medium.append("Merges several entries into one.")
    if _get(draft, "target_kind", "memory") == "skill":
        medium.append(REASON_SKILL)
    if one_source(draft):
        medium.append(REASON_ONE_SOURCE)
    if high:
        return "high", high + medium
    if medium:
        return "medium", medium
    return "low", []


def redact_draft(draft) -> None:
    """Redact content, rationale and every evidence excerpt of a ProposalDraft in place."""
    draft.content = redact(draft.content)
    draft.rationale = redact(draft.rationale)
    for e in draft.evidence:
        e["excerpt"] = redact(e.get("excerpt") or "")
