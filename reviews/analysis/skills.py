"""Skill proposals from a dream: pure functions over plain dicts, no database (tested and benchmarked alone).

Two signals (docs/dream-pipeline.md):

* A recurring finding group that belongs to an existing skill's *domain* → an ``update`` of that skill: its body
  with a ``## Lessons from dreams`` section holding the lesson (and, for a corrected command, the old command
  replaced in the skill's code spans). The domain match is deterministic: the finding's salient terms must be
  mostly found in the skill's vocabulary, and at least one of them in its name or description (that is where a
  skill declares what it is about).
* A multi-step procedure that recurs (reviews.analysis.procedures) that no skill covers → an ``add`` of a new skill
  whose content is a SKILL.md text.

Drafts are ProposalDraft dicts (target_kind "skill"); the dream (reviews.dreams.skills) assesses their risk, redacts
them and stores them. A skill proposal always waits for a reviewer.

The vocabulary of a domain match (``terms``) is not the paraphrase matching of reviews.analysis.normalize on
purpose: program names such as ``make`` are words of a skill's domain, while words every skill uses (skill, step,
agent, run) say nothing about which one; and its light stemmer keeps words whole (release ~ releasing, tag ~
tagging) where normalize.stem cuts them to six letters to equate paraphrases.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .findings import ProposalDraft, lowest_trust, recurs, signature
from .procedures import step_head

LESSONS_HEADING = "## Lessons from dreams"
# Finding kinds that carry a lesson worth writing into a skill. Excluded: lookups (too weak alone), secrets and
# injections (never proposed), unfixed tool failures (no lesson yet).
LESSON_KINDS = {"corrected_command", "tool_failure", "correction", "preference", "note", "rediscovered_knowledge"}
MIN_SCORE = 0.5  # share of the finding's terms found in the skill's vocabulary
MIN_SHARED = 1.5  # weighted count of shared terms (name/description terms weigh 1, body-only terms 0.5)
EVIDENCE_PER_GROUP = 5

DOMAIN_STOPWORDS = frozenset(
    """a about above after again against all also always an and any are as at be because been before being below
    between both but by can could did do does doing done don down during each either else ever every few for from
    further get gets got had has have having here how if in into is it its itself just keep last like may might more
    most much must need needs never new no nor not now of off on once one only or other our out over own please per
    rather really run same see should so some still such than that the their them then there these they this those
    through to too try under until up us use used uses using very via was we were what when where which while who
    why will with within without would yes yet you your instead first next ask asked want wants agent agents time
    step steps thing things way work works sure skill skills""".split()  # noqa: SIM905
)

_WORD = re.compile(r"[a-z][a-z0-9_.+-]*[a-z0-9+]|[a-z]")


def _light_stem(word: str) -> str:
    """A light stemmer, enough to equate release/releases/releasing and tag/tagging (not linguistics)."""
    stripped = False
    if not word.endswith("ss"):
        for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word, stripped = word[: -len(suffix)] + keep, True
                break
    if stripped and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # tagging → tagg → tag
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # release / releas(ing) → releas
    return word


def terms(text: str) -> set[str]:
    """Salient, stemmed, lower-case terms of a text (stop words and one- or two-letter words dropped)."""
    found = set()
    for raw in _WORD.findall((text or "").lower()):
        for word in re.split(r"[-_./]", raw) if not raw.startswith(".") else [raw]:
            if len(word) >= 3 and word not in DOMAIN_STOPWORDS and not word.isdigit():
                found.add(_light_stem(word))
    return found


def _draft(operation: str, content_key: str, *, targets: Sequence[str] = (), target_hashes=None, **fields) -> dict:
    """A skill ProposalDraft, as the plain dict the drafts travel as (like findings): exactly its fields."""
    return ProposalDraft(
        target_kind="skill",
        operation=operation,
        targets=list(targets),
        target_hashes=dict(target_hashes or {}),
        scope_agent=None,
        scope_task=None,
        # Skills are promoted by people: the dream's risk assessment may raise this, never lower it.
        risk="medium",
        risk_reasons=["Changes a skill; skills are promoted by people."],
        signature=signature(operation, "skill", targets, content_key),
        **fields,
    ).to_dict()


# --- finding groups ---------------------------------------------------------------------------------------------


def group_findings(sessions: Iterable) -> list[dict]:
    """Group the findings of analysed sessions by their key. ``sessions``: SessionFindings-like objects or dicts
    (session_id, external_id, agent, task, findings). Each group:
    {key, kind, summary, old, new, tags, sessions, agents, confidence, trust, evidence}; ``evidence``: the group's
    first EVIDENCE_PER_GROUP rows by session (external id) and event, all a proposal quotes (a pattern seen in
    most of 100,000 sessions has a row in each: held as dictionaries they were the skill proposals' peak)."""
    groups = FindingGroups()
    for s in sessions:
        groups.add(s)
    return groups.groups()


class FindingGroups:
    """group_findings one session at a time (``add``), then ``groups()`` once: finalize groups the findings as the
    aggregation reads them, instead of holding them for a read of their own. What a group keeps per finding is a
    word or two: its sessions' ids (an array of integers while they are integers) and the findings' confidences (an
    array of doubles, summed as the list was); its trust levels are a set. ``distinct``: each session is given once
    (a run's, read once), so no set of each group's sessions is needed to count one given again."""

    def __init__(self, *, distinct: bool = False) -> None:
        self._groups: dict[str, dict] = {}
        self._members: dict[str, set] | None = None if distinct else {}
        self._ranks: dict[str, list] = {}  # each group's first evidence rows, (external id, event, arrival, row)
        self._arrival = 0

    def add(self, s) -> None:
        groups, members, ranks = self._groups, self._members, self._ranks
        get = s.get if isinstance(s, dict) else lambda name, s=s: getattr(s, name, None)
        counted: set[str] = set()  # the groups this session is already counted in (given once)
        for f in get("findings") or []:
            key = f.get("key")
            if not key:
                continue
            g = groups.get(key)
            if g is None:
                g = groups[key] = {
                    "key": key,
                    "kind": f.get("kind", ""),
                    "summary": f.get("summary", ""),
                    "old": f.get("old"),
                    "new": f.get("new"),
                    "tags": [],
                    "sessions": array("q"),
                    "agents": [],
                    "confidences": array("d"),
                    "trusts": set(),
                    "evidence": [],
                }
                ranks[key] = []
                if members is not None:
                    members[key] = set()
            sid = get("session_id")
            if key not in counted and (members is None or sid not in members[key]):
                counted.add(key)
                if members is not None:
                    members[key].add(sid)
                try:
                    g["sessions"].append(sid)
                except TypeError:  # an id that is no integer (a test's, a dict's): a list from here on
                    g["sessions"] = [*g["sessions"], sid]
            if get("agent") and get("agent") not in g["agents"]:
                g["agents"].append(get("agent"))
            g["tags"] += [t for t in f.get("tags") or [] if t not in g["tags"]]
            g["confidences"].append(float(f.get("confidence") or 0.0))
            g["trusts"].add(f.get("trust") or "agent")
            for ev in f.get("evidence") or []:
                self._arrival += 1
                _keep_first(ranks[key], get("external_id"), sid, ev, self._arrival)

    def groups(self) -> list[dict]:
        out = []
        for key, g in self._groups.items():
            confidences = g.pop("confidences")
            g["confidence"] = round(sum(confidences) / len(confidences), 3) if confidences else 0.0
            g["trust"] = lowest_trust(g.pop("trusts"))
            g["evidence"] = [rank[-1] for rank in self._ranks[key]]
            out.append(g)
        return sorted(out, key=lambda g: (-len(g["sessions"]), g["key"]))


def _keep_first(kept: list, external_id, sid, ev: dict, arrival: int) -> None:
    """Keep an evidence row among a group's first EVIDENCE_PER_GROUP in the order _evidence reads them (external id,
    event; ties in the order they came, as a stable sort leaves them); the row is made only when it is kept."""
    rank = (str(external_id), ev.get("event_index", 0), arrival)
    if len(kept) >= EVIDENCE_PER_GROUP and rank >= kept[-1][:3]:
        return
    row = {
        "session_id": sid,
        "external_id": external_id,
        "event_index": ev.get("event_index", 0),
        "excerpt": ev.get("excerpt", ""),
        "trust": ev.get("trust", "agent"),
    }
    bisect.insort(kept, (*rank, row), key=lambda r: r[:3])
    del kept[EVIDENCE_PER_GROUP:]


# --- domain match and skill updates ----------------------------------------------------------------------------


def _vocabulary(skill: dict, cache: dict | None = None) -> tuple[set[str], set[str]]:
    """(head, body) terms of a skill; ``cache`` (keyed by name) saves recomputing them for every finding group."""
    name = skill.get("name", "")
    if cache is not None and name in cache:
        return cache[name]
    head = terms(name.replace("-", " ")) | terms(skill.get("description", ""))
    head |= {_light_stem(t.lower()) for t in skill.get("tags") or []}
    vocabulary = (head, terms(skill.get("body", "")))
    if cache is not None:
        cache[name] = vocabulary
    return vocabulary


def _finding_terms(group: dict) -> tuple[set[str], set[str]]:
    """(core, all): core is what the lesson is about (old, new, tags) when the finding names them; all adds the
    summary, whose error text and narration can drown the subject."""
    tags = {_light_stem(t.lower()) for t in group.get("tags") or []}
    core = terms(f"{group.get('old') or ''} {group.get('new') or ''}") | tags
    return core, core | terms(group.get("summary") or "")


def _score(found: set[str], head: set[str], body: set[str]) -> tuple[float, float, set[str], set[str]]:
    shared_head = found & head
    shared_body = (found & body) - shared_head
    weight = len(shared_head) + 0.5 * len(shared_body)
    return (weight / len(found) if found else 0.0), weight, shared_head, shared_body


def domain_match(
    group: dict, skills: Sequence[dict], cache: dict | None = None
) -> tuple[dict | None, float, list[str]]:
    """The skill whose domain the finding belongs to, its score and the shared terms (deterministic).

    score = weighted shared terms / the finding's terms; name/description/tag terms weigh 1, body-only terms 0.5;
    computed on the lesson's core terms (old/new/tags) and on all its terms, the better one counts. A match needs
    score >= MIN_SCORE, weighted shared >= MIN_SHARED and one shared name/description term (a skill declares its
    domain there). Ties go to the skill with more shared head terms, then by name.
    """
    core, everything = _finding_terms(group)
    if not everything:
        return None, 0.0, []
    best: tuple | None = None
    for skill in skills:
        head, body = _vocabulary(skill, cache)
        for found in (core, everything):
            score, weight, shared_head, shared_body = _score(found, head, body)
            if not shared_head or weight < MIN_SHARED or score < MIN_SCORE:
                continue
            rank = (score, len(shared_head), _neg(skill.get("name", "")))
            if best is None or rank > best[0]:
                best = (rank, skill, score, sorted(shared_head | shared_body))
    if best is None:
        return None, 0.0, []
    return best[1], round(best[2], 3), best[3]


def _neg(name: str) -> tuple:
    # Sorts names in reverse so that max() prefers the alphabetically first on a tie.
    return tuple(-ord(c) for c in name)


def _code_replace(body: str, old: str, new: str) -> str:
    """Replace ``old`` by ``new`` inside inline code spans and fenced code lines only (prose is left alone)."""
    if not old or not new or old == new:
        return body
    pattern = re.compile(r"(?<![\w-])" + re.escape(old) + r"(?![\w-])")
    out, in_fence = [], False
    for line in body.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            out.append(line)
            continue
        if in_fence:
            out.append(pattern.sub(new, line))
        else:
            out.append(re.sub(r"`[^`\n]+`", lambda m: pattern.sub(new, m.group(0)), line))
    return "".join(out)


def holds_step(body: str, old: str) -> bool:
    """Whether the skill's code (inline spans, fenced lines) runs ``old``: a corrected command's failing step."""
    return bool(old) and _code_replace(body or "", old, "\x00") != (body or "")


def _covered(body: str, group: dict) -> bool:
    """The skill already says this: it holds the new command (and no longer the old one) or the summary."""
    text = body.lower()
    new, old = (group.get("new") or "").lower(), (group.get("old") or "").lower()
    if new and new in text and not (old and old in text):
        return True
    summary = " ".join((group.get("summary") or "").lower().split())
    return bool(summary) and summary in " ".join(text.split())


def _lesson_line(group: dict, sessions_analysed: int) -> str:
    summary = " ".join((group.get("summary") or "").split()) or f"{group.get('old')} → {group.get('new')}"
    k = len(group["sessions"])
    return f"- {summary} _(seen in {k} of {sessions_analysed} sessions)_"


def amend_body(body: str, groups: Sequence[dict], sessions_analysed: int) -> str:
    """The body with the lessons added under LESSONS_HEADING (created at the end when missing)."""
    new_body = body or ""
    for g in groups:
        if g.get("kind") == "corrected_command":
            new_body = _code_replace(new_body, g.get("old") or "", g.get("new") or "")
    lines = [_lesson_line(g, sessions_analysed) for g in groups]
    if LESSONS_HEADING in new_body:
        head, _, tail = new_body.partition(LESSONS_HEADING)
        # Insert right after the section's existing items (before the next heading, if any).
        nxt = re.search(r"^#{1,2} ", tail, flags=re.MULTILINE)
        section, rest = (tail[: nxt.start()], tail[nxt.start() :]) if nxt else (tail, "")
        section = section.rstrip("\n") + "\n" + "\n".join(lines) + "\n"
        return head + LESSONS_HEADING + section + ("\n" + rest if rest else "")
    # One blank line between the body and the new section, whatever the body ends with.
    trailing = len(new_body) - len(new_body.rstrip("\n"))
    sep = "\n" * max(0, 2 - trailing) if new_body.strip() else ""
    return f"{new_body}{sep}{LESSONS_HEADING}\n\n" + "\n".join(lines) + "\n"


def _evidence(groups: Sequence[dict]) -> list[dict]:
    seen, out = set(), []
    for g in groups:
        for ev in sorted(g.get("evidence") or [], key=lambda e: (str(e.get("external_id")), e.get("event_index", 0)))[
            :EVIDENCE_PER_GROUP
        ]:
            mark = (ev.get("session_id"), ev.get("event_index"))
            if mark not in seen:
                seen.add(mark)
                out.append(dict(ev))
    return out


def _update_drafts(
    groups: Sequence[dict], skills: Sequence[dict], sessions_analysed: int, min_sessions: int, min_share: float
) -> list[dict]:
    by_skill: dict[str, list[tuple[dict, float, list[str]]]] = defaultdict(list)
    names = {s["name"]: s for s in skills}
    vocabularies: dict = {}
    head_index: dict[str, list[int]] = defaultdict(list)
    for i, skill in enumerate(skills):
        for term in _vocabulary(skill, vocabularies)[0]:
            head_index[term].append(i)
    for g in groups:
        if g.get("kind") not in LESSON_KINDS or not (g.get("summary") or g.get("new")):
            continue
        if g.get("kind") == "tool_failure" and not g.get("new"):
            continue
        if g.get("trust") == "web":  # a lesson only web pages taught is not promoted into a skill
            continue
        if not recurs(len(g.get("sessions") or []), sessions_analysed, min_sessions, min_share):
            continue
        # A skill whose code runs the very step the lesson corrects is the one to fix, whichever of two overlapping
        # skills shares more words with the lesson (the other one does not hold the wrong step).
        holders = (
            [sk for sk in skills if holds_step(sk.get("body", ""), g.get("old") or "")]
            if g.get("kind") == "corrected_command"
            else []
        )
        if holders:
            skill, score, shared = domain_match(g, holders, vocabularies)
            if skill is None:
                skill, score, shared = holders[0], 0.0, []
        else:
            # Only skills sharing a name/description term can match (domain_match requires one): look them up.
            _, everything = _finding_terms(g)
            candidates = sorted({i for t in everything for i in head_index.get(t, ())})
            skill, score, shared = domain_match(g, [skills[i] for i in candidates], vocabularies)
        if skill is None or _covered(skill.get("body", ""), g):
            continue
        by_skill[skill["name"]].append((g, score, shared))
    drafts = []
    for name in sorted(by_skill):
        skill, matches = names[name], sorted(by_skill[name], key=lambda m: (-len(m[0]["sessions"]), m[0]["key"]))
        lesson_groups = [m[0] for m in matches]
        k = max(len(g["sessions"]) for g in lesson_groups)
        reasons = "; ".join(
            f"“{' '.join((g.get('summary') or '').split())[:160]}” in {len(g['sessions'])} of {sessions_analysed} "
            f"sessions (shared terms: {', '.join(shared[:6])}; match {score:.2f})"
            for g, score, shared in matches
        )
        drafts.append(
            _draft(
                "update",
                "|".join(sorted(g["key"] for g in lesson_groups)),
                targets=[name],
                target_hashes={name: skill.get("content_hash", "")},
                content=amend_body(skill.get("body", ""), lesson_groups, sessions_analysed),
                kind="skill_update",
                rationale=f"Recurring lesson in the domain of skill {name}: {reasons}.",
                prevalence_sessions=k,
                prevalence_of=sessions_analysed,
                confidence=round(max(float(g.get("confidence") or 0.0) for g in lesson_groups), 3),
                evidence=_evidence(lesson_groups),
                key_hint=name,
            )
        )
    return drafts


def procedure_covered(procedure: dict, skills: Sequence[dict]) -> str | None:
    """Name of a skill that already describes at least two thirds of the procedure's steps, else None."""
    heads = [step_head(s) for s in procedure["steps"]]
    for skill in skills:
        text = " ".join(f"{skill.get('description', '')}\n{skill.get('body', '')}".lower().split())
        hits = sum(1 for h in heads if h and h in text)
        if hits * 3 >= len(heads) * 2:
            return skill.get("name")
    return None


def _skill_name(procedure: dict, taken: set[str]) -> str:
    task = procedure["tasks"].most_common(1)[0][0] if procedure["tasks"] else ""
    base_words = re.findall(r"[a-z0-9]+", (task or "").lower())
    if not base_words:
        for step in procedure["steps"]:
            base_words += [w for w in re.findall(r"[a-z0-9]+", step_head(step)) if w not in base_words]
        base_words = base_words[:4]
    base = "-".join(base_words + ["procedure"])[:55].strip("-") or "procedure"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def _yaml_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def procedure_skill_md(procedure: dict, name: str, sessions_analysed: int) -> str:
    k = len(procedure["sessions"])
    agents = ", ".join(procedure["agents"]) or "agents"
    tasks = ", ".join(t for t, _ in procedure["tasks"].most_common(3))
    first = " then ".join(f"`{t}`" for t in procedure["texts"][:3])
    description = f"Recurring procedure ({len(procedure['steps'])} steps) that {agents} ran successfully: {first}"
    description += f"{' …' if len(procedure['texts']) > 3 else ''}."
    if tasks:
        description += f" Use for the {tasks} task{'s' if len(procedure['tasks']) > 1 else ''}."
    title = name.replace("-", " ").capitalize()
    steps = "\n".join(f"{i}. `{t}`" for i, t in enumerate(procedure["texts"], 1))
    return (
        f"---\nname: {name}\ndescription: {_yaml_quote(description[:1000])}\n---\n"
        f"# {title}\n\n"
        f"Proposed by a dream: these steps ran in this order, each successfully, in {k} of {sessions_analysed} "
        f"sessions. Review the wording and add when to use it and what to check before promoting it.\n\n"
        f"## Steps\n\n{steps}\n"
    )


def _add_drafts(procedures: Sequence[dict], skills: Sequence[dict], sessions_analysed: int) -> list[dict]:
    taken = {s.get("name") for s in skills}
    drafts = []
    for proc in procedures:
        if procedure_covered(proc, skills):
            continue
        name = _skill_name(proc, taken)
        taken.add(name)
        k = len(proc["sessions"])
        drafts.append(
            _draft(
                "add",
                "proc:" + " > ".join(proc["steps"]),
                content=procedure_skill_md(proc, name, sessions_analysed),
                kind="skill_procedure",
                rationale=(
                    f"The same {len(proc['steps'])}-step procedure succeeded in {k} of {sessions_analysed} sessions "
                    f"({', '.join(proc['agents'])}) and no skill describes it: " + " → ".join(proc["texts"])
                ),
                prevalence_sessions=k,
                prevalence_of=sessions_analysed,
                confidence=round(min(0.9, 0.4 + 0.1 * k), 3),
                evidence=[dict(e) for e in proc["evidence"][:EVIDENCE_PER_GROUP]],
                key_hint=name,
            )
        )
    return drafts


def skill_drafts(
    groups: Sequence[dict],
    skills: Sequence[dict],
    *,
    sessions_analysed: int,
    procedures: Sequence[dict] = (),
    min_sessions: int = 3,
    min_share: float = 0.0,
) -> list[dict]:
    """Skill proposals (ProposalDraft-shaped dicts, target_kind "skill") from recurring patterns.

    ``groups``: finding groups (``group_findings``); ``skills``: the team's published skills as dicts (name,
    description, body, content_hash, tags); ``procedures``: ``recurring_procedures`` output. One ``update`` per
    skill (all its lessons together, so that approving one does not make the others stale), one ``add`` per
    uncovered procedure. Deterministic: same input, same drafts in the same order.
    """
    drafts = _update_drafts(groups, skills, sessions_analysed, min_sessions, min_share)
    drafts += _add_drafts(procedures, skills, sessions_analysed)
    return drafts
