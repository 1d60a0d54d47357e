"""Recurring procedures: the same sequence of successful tool calls in several sessions (pure functions, no
database). A dream proposes a new skill for a recurring procedure that no skill covers (reviews.analysis.skills).

A step is a successful, non-trivial tool call in its grouping form (quoted strings, hashes and numbers abstracted);
a procedure is a sequence of MIN_STEPS..MAX_STEPS steps that recurs in at least ``min_sessions`` sessions and within
the work it belongs to (its most common agent and task).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from .findings import recurs
from .normalize import localizer
from .tools import SHELL_TOOLS, call_text, main_argument

MIN_STEPS = 3
MAX_STEPS = 8
MAX_PROCEDURES = 5
MAX_SESSION_STEPS = 300

# Looking around is not a procedure: reads, searches and status commands are left out of the step sequences.
_TRIVIAL = (
    "ls pwd cd cat echo clear whoami head tail less more which true date env history tree wc sleep grep egrep rg "
    "ag ack find fd locate file stat du df ps top"
)
TRIVIAL_PROGRAMS = frozenset(_TRIVIAL.split())
READ_ONLY_GIT = frozenset({"status", "log", "diff", "show", "branch", "remote", "blame", "shortlog", "describe"})
READ_ONLY_TOOLS = re.compile(r"read|view|open|search|grep|find|glob|list|get_file|show|fetch|browse|lookup|ls$", re.I)
# A procedure must recur within the work it belongs to: in at least this share of the sessions of its most common
# agent and task (so that look-around steps shared by every agent do not make a "procedure").
PROCEDURE_MIN_TASK_SHARE = 0.3
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
_NUM = re.compile(r"\d+")


def _argument(arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        return main_argument(arguments) or ""
    return ""


def normalize_step(text: str) -> str:
    """A step's grouping form: quoted strings, hashes and numbers abstracted, whitespace collapsed."""
    text = _QUOTED.sub('"…"', text.strip())
    text = _HEX.sub("<hash>", text)
    text = _NUM.sub("<n>", text)
    return " ".join(text.split())


def _looks_around(command: str) -> bool:
    words = command.split()
    program = words[0].rsplit("/", 1)[-1]
    if program in TRIVIAL_PROGRAMS:
        return True
    return program == "git" and len(words) > 1 and words[1] in READ_ONLY_GIT


def procedure_steps(events: Sequence[dict], metadata: dict | None = None) -> list[dict]:
    """The successful tool calls of a session in order: {index, step (normalised), text (as run, written as the
    project sees it: normalize.localizer of the session's metadata, so no home directory or account name reaches a
    skill)}.

    A call succeeded when its result is not an error and its exit code is 0 or absent; calls without a result
    do not count. Trivial look-around commands (ls, cd, cat...) and immediate repetitions are left out.
    """
    local = localizer(metadata)
    results: dict[str, dict] = {}
    for ev in events:
        if isinstance(ev, dict) and ev.get("type") == "tool_result" and ev.get("call_id") is not None:
            results[str(ev["call_id"])] = ev
    steps: list[dict] = []
    for index, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("type") != "tool_call":
            continue
        result = results.get(str(ev.get("id")))
        if result is None or result.get("is_error") or result.get("exit_code") not in (None, 0):
            continue
        name = str(ev.get("name") or "")
        arg = " ".join(_argument(ev.get("arguments")).split())
        if SHELL_TOOLS.match(name):
            if not arg or _looks_around(arg):
                continue
            text = arg
        else:
            if READ_ONLY_TOOLS.search(name):
                continue
            text = call_text(name, arg)
        text = local(text)
        step = normalize_step(text)
        if steps and steps[-1]["step"] == step:
            continue
        steps.append({"index": index, "step": step, "text": text})
    return steps


def _contains(longer: tuple, shorter: tuple) -> bool:
    n = len(shorter)
    return any(longer[i : i + n] == shorter for i in range(len(longer) - n + 1))


def _overlaps(a: tuple, b: tuple) -> bool:
    """Whether one sequence runs on into the other: a suffix of one is a prefix of the other (a window of the same
    run, shifted; the rest of the run, past the longest window, is a procedure of its own only where it no longer
    repeats a step of the first)."""
    for x, y in ((a, b), (b, a)):
        for k in range(1, min(len(x), len(y)) + 1):
            if x[len(x) - k :] == y[:k]:
                return True
    return False


def _within_work(hits: list[dict], per_work: Counter) -> bool:
    work = Counter((h["session"].get("agent"), h["session"].get("task")) for h in hits)
    (pair, count), *_ = work.most_common(1)
    return count >= PROCEDURE_MIN_TASK_SHARE * per_work[pair]


def recurring_procedures(
    sessions: Iterable[dict], *, min_sessions: int = 3, min_share: float = 0.0, sessions_analysed: int | None = None
) -> list[dict]:
    """Sequences of MIN_STEPS..MAX_STEPS successful steps that recur in at least ``min_sessions`` sessions.

    ``sessions``: dicts {session_id, external_id, agent, task, outcome, events} (or ``steps``, the session's
    procedure_steps, instead of its events); failed or abandoned sessions do not count. A sequence must also recur
    within its work: in PROCEDURE_MIN_TASK_SHARE of the sessions of its most common agent and task. Returns
    maximal sequences (one nested in a longer accepted one is dropped), most common first: {steps, texts, sessions,
    external_ids, agents, tasks, evidence}.
    """
    # Pass 1: each session's steps (small: the events are not kept) and the sessions supporting each 3-step window.
    per_work: Counter = Counter()
    kept: list[tuple[dict, list[dict]]] = []
    window_support: Counter = Counter()
    total = 0
    for s in sessions:
        total += 1
        meta = {k: s.get(k) for k in ("session_id", "external_id", "agent", "task")}
        per_work[(meta["agent"], meta["task"])] += 1
        if s.get("outcome") in ("failure", "abandoned"):
            continue
        steps = s.get("steps")  # found beforehand (with the session's analysis), else from its events
        if steps is None:
            steps = procedure_steps(s.get("events") or [], s.get("metadata"))
        steps = steps[:MAX_SESSION_STEPS]
        keys = [st["step"] for st in steps]
        windows = {tuple(keys[i : i + MIN_STEPS]) for i in range(len(keys) - MIN_STEPS + 1)}
        if windows:
            window_support.update(windows)
            kept.append((meta, steps))
    # Pass 2 (a priori): a longer sequence can only recur if each of its 3-step windows does, so only those grow.
    support: dict[tuple, list[dict]] = defaultdict(list)
    for meta, steps in kept:
        keys = [st["step"] for st in steps]
        frequent = [window_support[tuple(keys[i : i + MIN_STEPS])] >= min_sessions for i in range(len(keys))]
        seen: set[tuple] = set()
        for i in range(len(keys) - MIN_STEPS + 1):
            for n in range(MIN_STEPS, min(MAX_STEPS, len(keys) - i) + 1):
                if not frequent[i + n - MIN_STEPS]:
                    break
                gram = tuple(keys[i : i + n])
                if gram in seen or len(set(gram)) < MIN_STEPS:
                    continue
                seen.add(gram)
                support[gram].append({"session": meta, "steps": steps[i : i + n]})
    analysed = sessions_analysed if sessions_analysed is not None else total
    candidates = [
        g
        for g, hits in support.items()
        if recurs(len(hits), analysed, min_sessions, min_share) and _within_work(hits, per_work)
    ]
    candidates.sort(key=lambda g: (-len(g), -len(support[g]), g))
    accepted: list[tuple] = []
    for gram in candidates:
        if any(_contains(a, gram) for a in accepted):
            continue
        # A run longer than MAX_STEPS recurs as several windows, each shifted by a step or two: one procedure (the
        # first, longest, best supported window), not one skill per window.
        mine = {id(h["session"]) for h in support[gram]}
        if any(_overlaps(a, gram) and mine <= {id(h["session"]) for h in support[a]} for a in accepted):
            continue
        accepted.append(gram)
    accepted.sort(key=lambda g: (-len(support[g]), -len(g), g))
    out = []
    for gram in accepted[:MAX_PROCEDURES]:
        hits = support[gram]
        texts = []
        for pos in range(len(gram)):
            raw = Counter(h["steps"][pos]["text"] for h in hits)
            text, count = raw.most_common(1)[0]
            # Show the command as run when the sessions agree on it, else its normalised form.
            texts.append(text if count == len(hits) else gram[pos])
        out.append(
            {
                "steps": list(gram),
                "texts": texts,
                "sessions": [h["session"].get("session_id") for h in hits],
                "external_ids": [h["session"].get("external_id") for h in hits],
                "agents": sorted({h["session"].get("agent") for h in hits if h["session"].get("agent")}),
                "tasks": Counter(h["session"].get("task") for h in hits if h["session"].get("task")),
                "evidence": [
                    {
                        "session_id": h["session"].get("session_id"),
                        "external_id": h["session"].get("external_id"),
                        "event_index": h["steps"][0]["index"],
                        "excerpt": " → ".join(st["text"] for st in h["steps"])[:300],
                        "trust": "agent",
                    }
                    for h in hits
                ],
            }
        )
    return out


def step_head(step: str) -> str:
    """The recognisable part of a step: program and first sub-command word (e.g. ``make release``, ``git tag``)."""
    words = [w for w in step.split() if not w.startswith(("-", "<", '"'))]
    return " ".join(words[:2]).lower()
