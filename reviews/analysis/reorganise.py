"""Reorganise what is hard to retrieve: the seed's fifth operation, as reviewed proposals.

A retrieval miss is a session, run after an entry went live, that pulled context from the store but was not served
the entry, and in which the entry's mistake recurred (``memory.effectiveness.Effect.misses``, kept when the session
asked for context: one that never asked is no retrieval problem). From ``MIN_MISSES`` of them:

* **re-scope** (kind ``rescope``) when the misses ran outside the entry's scope (another agent or task): the ranking
  never serves an entry to another agent's or task's context, so the lesson is widened to what the misses need
  (store-wide when other agents made the mistake; the agent's every task when only other tasks did);
* **reword** (kind ``reword``) when the misses were inside its scope yet it did not reach them (it lost on relevance
  to what they asked): the lesson keeps its text and gains the words those sessions used (their context queries
  and the words of their findings) that it lacks, which is what the ranking's relevance reads.

And **split** (kind ``split``) an entry holding several unrelated lessons: separate lines that share no salient word
become one ``update`` (the entry keeps the first) and one ``add`` per other line, in the entry's scope.

Each proposal carries its misses as evidence. Pure functions over the effectiveness figures;
``reviews.dreams.upkeep`` feeds them. Whether a reworded or re-scoped entry then reaches those contexts is the
context ranking's rule (memory/ranking.py), unchanged.
"""

from __future__ import annotations

import re
from collections import Counter

from . import normalize as nz
from .findings import ProposalDraft, signature, trim
from .risk import REDACTED, redact

MIN_MISSES = 2
MAX_WORDS = 8
MAX_EVIDENCE = 10
REWORD_PREFIX = "Applies when:"


def _evidence(misses, entry_id: int) -> list[dict]:
    rows = []
    for sig in misses[:MAX_EVIDENCE]:
        if sig.session_id is None:
            continue
        index, excerpt = sig.evidence.get(entry_id, (0, ""))
        rows.append(
            {
                "session_id": sig.session_id,
                "external_id": sig.external_id,
                "event_index": int(index),
                "excerpt": trim(excerpt or f"the mistake recurred in {sig.external_id}"),
                "trust": "agent",
            }
        )
    return rows


def _in_scope(e, sig) -> bool:
    return (not e.scope_agent or sig.agent == e.scope_agent) and (not e.scope_task or sig.task == e.scope_task)


def _draft(e, *, content_hash: str, content: str, kind: str, rationale: str, misses, scope, n: int) -> ProposalDraft:
    evidence = _evidence(misses, e.entry_id)
    return ProposalDraft(
        target_kind="memory",
        operation="update",
        targets=[e.key],
        target_hashes={e.key: content_hash},
        content=content,
        scope_agent=scope[0],
        scope_task=scope[1],
        kind=kind,
        rationale=rationale,
        prevalence_sessions=len({r["session_id"] for r in evidence}) or len(misses),
        prevalence_of=max(n, len(misses)),
        confidence=round(min(0.9, 0.5 + 0.1 * len(misses)), 2),
        risk="medium",
        risk_reasons=[f"{kind.replace('rescope', 're-scope')}: changes which contexts receive the entry"],
        signature=signature("update", "memory", [e.key], f"{kind}:{content_hash}:{scope[0]}:{scope[1]}"),
        evidence=evidence,
        key_hint=e.key,
    )


def _misses_label(misses) -> str:
    by_agent = Counter(f"{s.agent}" + (f" ({s.task})" if s.task else "") for s in misses)
    return ", ".join(f"{k} ×{v}" for k, v in by_agent.most_common(5))


def retrieval_misses(e, queries: dict) -> list:
    """The entry's misses whose session asked this store for context (``queries``: external id -> its queries)."""
    return [s for s in e.misses if s.external_id in queries]


def rescope_draft(e, *, content: str, content_hash: str, queries: dict, n: int) -> ProposalDraft | None:
    outside = [s for s in retrieval_misses(e, queries) if not _in_scope(e, s)]
    if len(outside) < MIN_MISSES:
        return None
    other_agents = bool(e.scope_agent) and any(s.agent != e.scope_agent for s in outside)
    agent = None if other_agents else e.scope_agent
    task = None if e.scope_task and any(s.task != e.scope_task for s in outside) else e.scope_task
    if (agent, task) == (e.scope_agent, e.scope_task):
        return None
    was = f"agent {e.scope_agent or 'any'}, task {e.scope_task or 'any'}"
    now = f"agent {agent or 'any'}, task {task or 'any'}"
    rationale = (
        f"Retrieval miss: the mistake `{e.key}` addresses recurred in {len(outside)} sessions outside its scope "
        f"({was}) since it went live, never served it: {_misses_label(outside)}. Widen the scope to {now} so those "
        f"contexts can receive it. Its record: served {e.served.k} of {e.served.n} sessions with the mistake again, "
        f"not served {e.not_served.k} of {e.not_served.n}."
    )
    return _draft(
        e,
        content_hash=content_hash,
        content=content,
        kind="rescope",
        rationale=rationale,
        misses=outside,
        scope=(agent, task),
        n=n,
    )


def missing_words(content: str, texts: list[str]) -> list[str]:
    """The words those sessions used most (at least twice, or the only session's) that the entry does not hold."""
    have = {nz.stem(w) for w in nz.words(content)}
    counts: Counter = Counter()
    for text in texts:
        counts.update({w for w in nz.words(text) if w not in nz.STOPWORDS and len(w) > 2 and not w.isdigit()})
    floor = 2 if len(texts) > 1 else 1
    return [w for w, c in counts.most_common() if c >= floor and nz.stem(w) not in have][:MAX_WORDS]


def reword_draft(e, *, content: str, content_hash: str, queries: dict, n: int) -> ProposalDraft | None:
    inside = [s for s in retrieval_misses(e, queries) if _in_scope(e, s)]
    if len(inside) < MIN_MISSES:
        return None
    texts = [" ".join(queries.get(s.external_id, ())) + " " + " ".join(s.words.get(e.entry_id, ())) for s in inside]
    # Redacted before the words are read: they are read lower-cased, and a secret's shape is in its case (AKIA...).
    words = [w for w in missing_words(content, [redact(t) for t in texts]) if w != REDACTED.strip("[]").lower()]
    if not words:
        return None
    base = re.sub(rf"\s*{re.escape(REWORD_PREFIX)}[^\n]*$", "", content.rstrip())
    new = f"{base}\n{REWORD_PREFIX} {', '.join(words)}."
    asked = sorted({q for s in inside for q in queries.get(s.external_id, ())})[:3]
    rationale = (
        f"Retrieval miss: the mistake `{e.key}` addresses recurred in {len(inside)} sessions in its scope that were "
        f"not served it ({_misses_label(inside)})"
        + (f"; they asked for context with: {'; '.join(f'“{trim(q, 80)}”' for q in asked)}" if asked else "")
        + f". The entry gains the words they used that it lacks ({', '.join(words)}), which the context ranking's "
        f"relevance reads."
    )
    return _draft(
        e,
        content_hash=content_hash,
        content=new,
        kind="reword",
        rationale=rationale,
        misses=inside,
        scope=(e.scope_agent, e.scope_task),
        n=n,
    )


_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*(.+?)\s*$")


def lessons_in(content: str) -> list[str]:
    """The separate lessons of an entry: its non-empty lines (bullets stripped), when no two share a salient word
    and each says something (three salient words or more). One lesson: a list of one."""
    lines = [m.group(1) for ln in content.splitlines() if (m := _LINE.match(ln)) and m.group(1)]
    lines = [ln for ln in lines if not ln.startswith(REWORD_PREFIX)]
    if len(lines) < 2:
        return [content]
    words = [nz.salient(ln) for ln in lines]
    if any(len(w) < 3 for w in words):
        return [content]
    for i in range(len(words)):
        for j in range(i + 1, len(words)):
            if words[i] & words[j]:
                return [content]
    return lines


def split_drafts(e, *, content: str, content_hash: str, n: int) -> list[ProposalDraft]:
    parts = lessons_in(content)
    if len(parts) < 2 or e.pinned or e.status != "active":
        return []
    rationale = (
        f"`{e.key}` holds {len(parts)} unrelated lessons (its lines share no word): one entry each is ranked and "
        f"measured on its own. The entry keeps the first; each other becomes an entry in the same scope."
    )
    scope = (e.scope_agent, e.scope_task)
    keep = _draft(
        e, content_hash=content_hash, content=parts[0], kind="split", rationale=rationale, misses=[], scope=scope, n=n
    )
    keep.prevalence_sessions, keep.confidence = 0, 0.6
    drafts = [keep]
    for i, part in enumerate(parts[1:], start=2):
        drafts.append(
            ProposalDraft(
                target_kind="memory",
                operation="add",
                targets=[],
                target_hashes={},
                content=part,
                scope_agent=scope[0],
                scope_task=scope[1],
                kind="split",
                rationale=f"Part {i} of {len(parts)} of `{e.key}`. " + rationale,
                prevalence_sessions=0,
                prevalence_of=n,
                confidence=0.6,
                risk="medium",
                risk_reasons=["split: a new entry from part of another"],
                signature=signature("add", "memory", [], f"split:{e.key}:{content_hash}:{i}"),
                key_hint=f"{e.key}-{i}",
            )
        )
    return drafts


def reorganise_drafts(effects, *, entries: dict, queries: dict, sessions_analysed: int) -> list[ProposalDraft]:
    """Re-scope, reword and split drafts for the store's active entries. ``entries``: key -> (content, content
    hash) of the active entries; ``queries``: external id -> the context queries of each session that pulled
    context from the store."""
    drafts = []
    for e in effects:
        if e.key not in entries or e.status != "active":
            continue
        content, chash = entries[e.key]
        rescope = rescope_draft(e, content=content, content_hash=chash, queries=queries, n=sessions_analysed)
        if rescope is not None:
            drafts.append(rescope)
            continue
        reword = reword_draft(e, content=content, content_hash=chash, queries=queries, n=sessions_analysed)
        if reword is not None:
            drafts.append(reword)
            continue
        drafts += split_drafts(e, content=content, content_hash=chash, n=sessions_analysed)
    return drafts
