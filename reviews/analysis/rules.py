"""The deterministic analyzer: findings from a session's structure, no network, no model.

Signals (one finding per occurrence; aggregation decides what recurs):
* corrected_command: a failed tool call, then a similar call that succeeded (old vs new, the error as evidence);
* tool_failure: a failure retried unchanged after an intermediate step (the fix), or never fixed (kept for the
  record; never proposed on its own);
* correction: a user message between an agent action and a changed action that names what changed and carries a
  negation or preference cue ("use X, not Y", "we use X", "no Y please");
* note: an in-band `memory_write` (its provenance is `web` when it repeats what a fetched page said);
* rediscovered_knowledge: a search whose result (a path or URL) the agent then opened: "X is at Y";
* lookup: any other read/search of a concrete target (aggregation proposes it only when it is distinctive);
* secret / injection: a note holding a credential, a fetched page addressing the agents: never proposed.

Transcript text is untrusted data: it is only matched, never executed or followed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from . import normalize as nz
from .findings import AnalysisResult, evidence, make_finding, trim
from .risk import INJECTION, REDACTED, has_secret, redact, secret_kinds
from .tools import SHELL_TOOLS, main_argument

WEB_TOOLS = re.compile(r"web|browse|browser|fetch|http|url|crawl|scrape|internet|download", re.I)
# Names that say the result is internet content, whatever else the tool does (web_search, browser_open, http_get).
WEB_NAMES = re.compile(r"web|browse|browser|internet|http|url|crawl|scrape", re.I)
SEARCH_TOOLS = re.compile(r"search|grep|find|glob|locate|lookup|ripgrep|^rg$|query", re.I)
READ_TOOLS = re.compile(r"read|open|view|cat|get_file|show|fetch|browse", re.I)
SEARCH_PROGRAMS = {"grep", "egrep", "rg", "ag", "ack", "find", "fd", "locate", "ls", "tree", "which", "whereis"}
READ_PROGRAMS = {"cat", "less", "more", "head", "tail", "bat"}
WEB_PROGRAMS = {"curl", "wget", "http", "https", "httpie", "lynx", "w3m"}

NEGATION = re.compile(
    r"(?i)\b(?:not|no|never|don'?t|do not|doesn'?t|does not|shouldn'?t|should not|stop|avoid|instead|rather|wrong|"
    r"nope|quit|without)\b|n't\b"
)
PREFERENCE = re.compile(r"(?i)\b(?:use|using|prefer|preferred|switch|should|always|only|stick|go with|standard)\b")
# A statement of how things are done here ("Everything goes through the chart now.", "The cleaned table is the source
# of truth."): a correction even when it names neither command.
CONVENTION = re.compile(
    r"(?i)\b(?:we|our|here|now|anymore|these days|in this (?:repo|project|team|codebase)|everything|every|all|"
    r"go(?:es)? through|source of truth|is the (?:one|way|standard)|from now on|moved|migrated|switched|deprecated|"
    r"legacy|obsolete|outdated|retired|replaced)\b"
)
ONE_OFF = re.compile(r"(?i)\b(?:for this one only|just this (?:once|time)|only (?:for )?this time|this time only)\b")
LOCATION_TRIM = re.compile(r"[:#]\d+(?::\d+)?$")

MAX_ARG = 400
LOOKAHEAD = 4


@dataclass
class Action:
    pos: int
    call_index: int
    name: str
    arg: str
    result_index: int | None = None
    output: str = ""
    failed: bool = False

    @property
    def shell(self) -> bool:
        return bool(SHELL_TOOLS.match(self.name))

    @property
    def program(self) -> str:
        return nz.program(self.arg) if self.shell else ""

    @property
    def text(self) -> str:
        """How the action reads in a lesson: the command itself for a shell, `tool argument` otherwise."""
        return self.arg if self.shell else f"{self.name} {self.arg}".strip()

    @property
    def web(self) -> bool:
        if WEB_NAMES.search(self.name):
            return True
        if WEB_TOOLS.search(self.name) and not SEARCH_TOOLS.search(self.name):
            return True
        if WEB_TOOLS.search(self.name) and nz.urls(self.arg):
            return True
        return self.program in WEB_PROGRAMS and bool(nz.urls(self.arg))

    @property
    def result_trust(self) -> str:
        return "web" if self.web else "tool"

    @property
    def is_search(self) -> bool:
        if self.shell:
            p = self.program
            toks = nz.command_tokens(self.arg)
            if p == "git" and len(toks) > 1 and toks[1] == "grep":
                return True
            if p in ("ls", "tree"):
                return len([t for t in toks[1:] if not t.startswith("-")]) > 0
            return p in SEARCH_PROGRAMS
        return bool(SEARCH_TOOLS.search(self.name)) and bool(self.arg.strip())

    @property
    def is_read(self) -> bool:
        if self.shell:
            return self.program in READ_PROGRAMS
        return bool(READ_TOOLS.search(self.name)) and bool(self.arg.strip())


def _arg_text(arguments) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):  # arguments are an agent's text: not always JSON, maybe nested absurdly
            return arguments[:MAX_ARG]
        arguments = parsed
    if isinstance(arguments, dict):
        main = main_argument(arguments)
        if main is not None:
            return main[:MAX_ARG]
        parts = [v for v in arguments.values() if isinstance(v, str | int | float) and not isinstance(v, bool)]
        return " ".join(str(p) for p in parts)[:MAX_ARG]
    return str(arguments)[:MAX_ARG]


def _parse(events: list) -> tuple[list[Action], list[tuple[int, str, str, int]], list[tuple[int, str, int]]]:
    """Actions in call order; messages and notes as (event_index, ..., number of actions before them)."""
    actions: list[Action] = []
    by_id: dict[str, Action] = {}
    messages: list[tuple[int, str, str, int]] = []
    notes: list[tuple[int, str, int]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        t = ev.get("type")
        if t == "tool_call":
            a = Action(
                pos=len(actions), call_index=i, name=str(ev.get("name") or ""), arg=_arg_text(ev.get("arguments"))
            )
            actions.append(a)
            by_id[str(ev.get("id"))] = a
        elif t == "tool_result":
            a = by_id.get(str(ev.get("call_id")))
            if a is None or a.result_index is not None:
                continue
            a.result_index = i
            a.output = str(ev.get("content") or "")
            code = ev.get("exit_code")
            a.failed = bool(ev.get("is_error")) or (isinstance(code, int) and code != 0)
        elif t == "message" and isinstance(ev.get("content"), str):
            messages.append((i, str(ev.get("role")), ev["content"], len(actions)))
        elif t == "memory_write" and isinstance(ev.get("content"), str):
            notes.append((i, ev["content"], len(actions)))
    return actions, messages, notes


class _Served:
    """What Dreamweb served into the session: findings that only repeat it are not new evidence."""

    def __init__(self, served):
        self.texts = [nz.collapse(s).lower() for s in served or () if s]
        self.sets = [(nz.salient(s), nz.anchors(s)) for s in self.texts]

    def has_command(self, cmd: str) -> bool:
        c = nz.collapse(cmd).lower()
        return bool(c) and any(c in t for t in self.texts)

    def has_words(self, tokens) -> bool:
        return bool(tokens) and any(
            all(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", t) for w in tokens) for t in self.texts
        )

    def covers(self, text: str) -> bool:
        sal, anc = nz.salient(text), nz.anchors(text)
        return any(anc <= s_anc and nz.containment(sal, s_sal) >= 0.7 for s_sal, s_anc in self.sets)


def _err_evidence(a: Action) -> dict:
    return evidence(
        a.result_index if a.result_index is not None else a.call_index,
        nz.error_line(a.output) or a.output,
        a.result_trust,
    )


def _fixes(actions: list[Action], served: _Served, used: set[tuple[int, int]]) -> list[dict]:
    out = []
    for a in actions:
        if not a.failed or not a.arg.strip():
            continue
        if _missed(a):
            continue  # a wrong path or an empty search: where things are (_lookups), not a command to correct
        err = nz.error_line(a.output)
        sig = nz.normalize_error(err)
        fixed = False
        window = actions[a.pos + 1 : a.pos + 1 + LOOKAHEAD]
        norm = nz.normalize_command(a.arg)
        retry = next(
            (
                j
                for j, b in enumerate(window)
                if b.name == a.name and not b.failed and nz.normalize_command(b.arg) == norm
            ),
            None,
        )
        if retry is not None:
            # Retried unchanged and it worked: the successful step in between (if any) was the fix.
            between = [x for x in window[:retry] if not x.failed and x.arg.strip()]
            if between and (a.pos, between[0].pos) not in used:
                fix = between[0]
                used.add((a.pos, fix.pos))
                if not served.has_command(fix.arg):
                    out.append(_finding_retry(a, fix, err, sig))
            continue
        for b in window:
            if b.name != a.name:
                continue
            same = nz.normalize_command(b.arg) == norm
            if same or b.failed:
                continue
            if (a.shell and nz.similar_commands(a.arg, b.arg)) or (
                not a.shell and nz.jaccard(nz.shingles(a.arg), nz.shingles(b.arg)) >= 0.4
            ):
                fixed = True
                if (a.pos, b.pos) in used:
                    break
                used.add((a.pos, b.pos))
                if not served.has_command(b.arg):
                    out.append(_finding_corrected(a, b, err, sig))
                break
        if not fixed and window:
            # The very next action, of the same tool, is something else that worked (`yarn build` fails, then
            # `npm run build`; `python setup.py test` fails, then `tox -e py311`): the agent replaced the failed step.
            # Looking around (status, listings, reads, searches) is not a replacement. A weak signal on its own: only
            # its recurrence across sessions makes it a lesson.
            b = window[0]
            if (
                b.name == a.name
                and not b.failed
                and b.arg.strip()
                and nz.normalize_command(b.arg) != norm
                and (not _inspection(b) or _same_lookup(a, b))
                and (a.pos, b.pos) not in used
            ):
                fixed = True
                used.add((a.pos, b.pos))
                if not served.has_command(b.arg):
                    f = _finding_corrected(a, b, err, sig)
                    f["confidence"] = 0.5
                    f["loose"] = True
                    out.append(f)
        if not fixed:
            out.append(
                make_finding(
                    "tool_failure",
                    f"err:{a.name}:{sig}",
                    f"`{trim(a.text, 120)}` failed: {trim(err, 160)}",
                    evidence=[evidence(a.call_index, a.text, "agent"), _err_evidence(a)],
                    confidence=0.3,
                    old=a.text,
                    error=err,
                    error_signature=sig,
                    resolved=False,
                    tool=a.name,
                )
            )
    return out


INSPECT_PROGRAMS = {"pwd", "echo", "whoami", "env", "printenv", "date", "true", "clear", "history", "id", "hostname"}
INSPECT_PROGRAMS |= {"uname", "which", "type", "man", "help", "df", "du", "ps", "top", "free", "stat", "file", "wc"}
GIT_INSPECT = {"status", "log", "diff", "show", "branch", "remote", "rev-parse", "describe", "blame", "reflog"}


def _inspection(a: Action) -> bool:
    """An action that only looks around (and so cannot be what replaced a failed step)."""
    if a.is_search or a.is_read or a.web:
        return True
    if not a.shell:
        return False
    toks = nz.command_tokens(a.arg)
    rest = toks[1:]
    p = a.program
    if p in INSPECT_PROGRAMS or p in ("ls", "tree"):
        return True
    if p == "git" and rest and rest[0] in GIT_INSPECT:
        return True
    return bool(rest) and rest[0] in ("--version", "-v", "-V", "--help", "-h", "version", "help")


def _same_lookup(a: Action, b: Action) -> bool:
    """Two looks for the same thing with different tools (`grep -rn TODO src` fails, `rg TODO` works): both searches
    or both reads, sharing an argument."""
    if not ((a.is_search and b.is_search) or (a.is_read and b.is_read)):
        return False
    args = [
        {t.strip("'\"") for t in nz.command_tokens(x.arg)[1 if x.shell else 0 :] if not t.startswith("-")}
        for x in (a, b)
    ]
    return bool(args[0] & args[1])


def _finding_corrected(a: Action, b: Action, err: str, sig: str) -> dict:
    old, new = a.text, b.text
    return make_finding(
        "corrected_command",
        f"cmd:{nz.normalize_command(old)}=>{nz.normalize_command(new)}",
        f"Use `{new}` instead of `{old}`: `{old}` fails with: {trim(err, 160)}",
        evidence=[evidence(a.call_index, old, "agent"), _err_evidence(a), evidence(b.call_index, new, "agent")],
        confidence=0.7,
        old=old,
        new=new,
        error=err,
        error_signature=sig,
        tool=a.name,
        tags=[t for t in (a.program,) if t],
    )


def _finding_retry(a: Action, fix: Action, err: str, sig: str) -> dict:
    return make_finding(
        "tool_failure",
        f"fix:{sig}=>{nz.normalize_command(fix.text)}",
        f'When `{a.text}` fails with "{trim(err, 140)}", run `{fix.text}` first, then retry.',
        evidence=[_err_evidence(a), evidence(fix.call_index, fix.text, "agent")],
        confidence=0.6,
        old=a.text,
        new=fix.text,
        error=err,
        error_signature=sig,
        resolved=True,
        tool=a.name,
    )


def _mentions(token: str, text_lower: str) -> bool:
    """Does the message name this command word? `--squash` is named by "Squash, please."; a stop word ("not" in
    `-m 'not network'`) names nothing."""
    core = token.strip("-'\"`").lower()
    if not core or core in nz.STOPWORDS or core.isdigit():
        return False
    return any(
        re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", text_lower) for t in {token.lower(), core} if len(t) >= 2
    )


# A message that approves, or only asks, is not a correction unless it says what to do instead.
# A message that moves on to the next step ("Now deploy it.", "Also run the linter.") is not a correction either.
FOLLOW_UP = re.compile(r"(?i)^\W*(?:now|next|then|also|and|after that|afterwards|finally|once|when)\b")
APPROVAL = re.compile(
    r"(?i)^\W*(?:looks good|lgtm|great|thanks|thank you|perfect|nice|cool|good|fine|ok|okay|sounds good|carry on|"
    r"go ahead|continue|proceed)\b"
)


def _modified(a: Action, b: Action) -> bool:
    """b is a changed version of a (same tool, mostly the same command or call)."""
    if a.name != b.name:
        return False
    if a.shell:
        return nz.similar_commands(a.arg, b.arg)
    return nz.jaccard(nz.shingles(a.arg), nz.shingles(b.arg)) >= 0.4


def _corrections(actions, messages, served: _Served, used: set[tuple[int, int]]) -> list[dict]:
    out = []
    for idx, role, content, before in messages:
        if role != "user" or before == 0 or before >= len(actions) or len(content) > 600:
            continue
        if ONE_OFF.search(content):
            continue
        a, b = actions[before - 1], actions[before]
        if nz.normalize_command(a.text) == nz.normalize_command(b.text):
            continue
        wa, wb = nz.command_words(a.text), nz.command_words(b.text)
        old_only, new_only = wa - wb, wb - wa
        low = content.lower()
        said_old = sorted(t for t in old_only if _mentions(t, low))
        said_new = sorted(t for t in new_only if _mentions(t, low))
        negation, preference = bool(NEGATION.search(content)), bool(PREFERENCE.search(content))
        # A message that names what changed needs a cue ("not", "don't", "use", "prefer", ...), except a short one
        # that names the new choice ("Yarn, please."): right before the agent changes to exactly that.
        named = bool(said_old or said_new) and (
            negation
            or (preference and bool(said_new))
            or (bool(said_new) and len(content) <= 80 and not FOLLOW_UP.search(content))
        )
        # A message that names nothing the agent then changed ("Keep it offline.", "Rotate through the script.",
        # "The cleaned table is the source of truth.") is still the correction when the agent's very next step
        # replaces its last one with another of the same tool, unless the message only approves, asks or moves on.
        # (One such session proves nothing; the same replacement after a user's word in several sessions does.)
        unnamed = (
            not named
            and a.name == b.name
            and not APPROVAL.search(content)
            and not FOLLOW_UP.search(content)
            and not (content.rstrip().endswith("?") and not negation)
            and not _inspection(a)
            and not _inspection(b)
        )
        cued = negation or preference or bool(CONVENTION.search(content)) or _modified(a, b)
        if not (named or unnamed):
            continue
        old_key, new_key = said_old or sorted(old_only), said_new or sorted(new_only)
        if served.has_words(new_key) and served.has_words(old_key):
            continue
        if served.has_command(b.text):
            continue
        used.add((a.pos, b.pos))
        # Name the choices in the user's words when they used any; else the commands say it.
        if said_new:
            fmt_new = ", ".join(f"`{t}`" for t in said_new)
            lesson = f"Use {fmt_new}, not {', '.join(f'`{t}`' for t in said_old)}" if said_old else f"Use {fmt_new}"
            lesson += f": run `{b.text}` instead of `{a.text}`"
        elif said_old:
            lesson = f"Do not use {', '.join(f'`{t}`' for t in said_old)}: run `{b.text}` instead of `{a.text}`"
        else:
            lesson = f"Run `{b.text}` instead of `{a.text}`"
        out.append(
            make_finding(
                "correction",
                f"pref:{','.join(old_key)}=>{','.join(new_key)}",
                f'{lesson} (the user asked for this: "{trim(content, 140)}").',
                evidence=[
                    evidence(a.call_index, a.text, "agent"),
                    evidence(idx, content, "user"),
                    evidence(b.call_index, b.text, "agent"),
                ],
                confidence=0.75 if named else (0.6 if cued else 0.5),
                old=a.text,
                new=b.text,
                said_old=old_key,
                said_new=new_key,
                tool=b.name,
            )
        )
    return out


def _locations(output: str) -> list[str]:
    found = []
    for u in nz.urls(output):
        found.append(u)
    rest = nz.URL_RE.sub(" ", output)
    for m in nz.PATH_RE.finditer(rest):
        p = LOCATION_TRIM.sub("", m.group(0).rstrip(".,;:"))
        if ("/" in p.strip("/") or "." in p) and len(p) > 3:
            found.append(p)
    seen, out = set(), []
    for p in found:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out[:8]


# Flags whose value is the thing searched for (find -name X, grep -e X).
TERM_FLAGS = {"-name", "-iname", "-path", "-regex", "-e", "--regexp", "-g", "--glob"}
VALUE_FLAGS = {"-type", "-maxdepth", "-mindepth", "-A", "-B", "-C", "-m", "--max-count", "-t", "--type"}


def _search_term(a: Action) -> str:
    """What a search looked for: the pattern of a grep/find, the query of a search tool."""
    if not a.shell:
        return a.arg.strip()
    toks = nz.command_tokens(a.arg)
    rest = toks[2:] if nz.program(a.arg) == "git" else toks[1:]
    for i, t in enumerate(rest):
        if t in TERM_FLAGS and i + 1 < len(rest):
            return rest[i + 1].strip("'\"")
    skip = False
    for t in rest:
        if skip:
            skip = False
            continue
        if t in VALUE_FLAGS:
            skip = True
            continue
        if not t.startswith("-"):
            return t.strip("'\"")
    return a.arg.strip()


def _line_with(text: str, needle: str) -> str:
    for line in text.splitlines():
        if needle in line:
            return line
    return text


# What a look that found nothing says: a wrong path, an empty search ("No files found", "0 articles found").
NOT_FOUND = re.compile(
    r"(?i)\b(?:no such file|(?:file|path|directory) does not exist|does not exist|doesn'?t exist|not found|"
    r"no (?:files?|matches|match|results?|hits|articles?|entries|documents?)(?: (?:were )?found)?|"
    r"0 (?:files?|matches|results?|hits|articles?|entries|documents?)|nothing (?:found|matched)|"
    r"(?:could|can) ?not find|can'?t find|unable to find|did you mean)\b"
)
HUNT = 4  # actions between a look that found nothing and the look that found it


def _missed(a: Action) -> bool:
    """A read or search that found nothing: it failed, or its short output says so (tools that report a wrong path
    or an empty search as a normal result), or a search printed nothing at all."""
    if not (a.is_search or a.is_read) or a.web:
        return False
    out = a.output.strip()
    if a.shell and (MISSING_PROGRAM.search(out) or _names_program(a, out)):
        return False  # the tool itself is missing: a command to correct, not a place to find
    if a.failed:
        return True
    if not out:
        return a.is_search
    lines = out.splitlines()
    return len(lines) <= 3 and bool(NOT_FOUND.search(lines[0])) and not SEARCH_HIT.match(lines[0])


MISSING_PROGRAM = re.compile(r"(?i)command not found|not recognized as an internal|executable file not found")
SEARCH_HIT = re.compile(r"^\S+:\d+[:-]")


def _names_program(a: Action, out: str) -> bool:
    """`bash: ./run-lab.sh: No such file or directory`: the program, not what it looked at, is missing."""
    first = nz.command_tokens(a.arg)[:1]
    return bool(first) and bool(
        re.search(re.escape(first[0]) + r":\s*(?:no such file|not found|permission denied)", out[:300], re.I)
    )


def _target(a: Action) -> str:
    """What a look was after: a search's term, a read's path (`cat -n x.yaml` -> `x.yaml`)."""
    if a.is_search:
        return _search_term(a)
    if a.shell:
        return next((t.strip("'\"") for t in nz.command_tokens(a.arg)[1:] if not t.startswith("-")), a.arg.strip())
    return a.arg.strip()


def _opened(a: Action, b: Action, locs: list[str]) -> str | None:
    """The location of a's output that b then opened (read, searched in, ran), if any."""
    if b.failed or _missed(b):
        return None
    hit = next((loc for loc in locs if loc in b.arg or b.arg.strip().lstrip("./") == loc.lstrip("./")), None)
    if hit is None and not b.shell:
        # A tool that opens things by id (`kb_get_article KB-0192`, `get_ticket 4821`): the id the search printed.
        arg = b.arg.strip()
        if ID_LIKE.fullmatch(arg) and re.search(rf"(?<![\w-]){re.escape(arg)}(?![\w-])", a.output):
            hit = arg
    return hit


ID_LIKE = re.compile(r"(?=[^\s]*\d)[\w][\w.:/#-]{2,80}")


def _lookups(actions: list[Action], served: _Served, consumed: set[int]) -> list[dict]:
    """Where things are, learnt the hard way. A read or a search is knowledge worth keeping only when something shows
    the agent did not know where to look: it searched and then opened what the search found, or it first looked in
    the wrong place (a path that does not exist, a search that found nothing). A file read directly, or a search
    whose answer is simply taken, is the work itself however often it recurs (a routine read is not a lesson)."""
    out = []
    for a in actions:
        if a.pos in consumed or a.failed or not a.is_search or _missed(a):
            continue
        locs = _locations(a.output)
        for b in actions[a.pos + 1 : a.pos + 1 + 3]:
            hit = _opened(a, b, locs)
            if not hit:
                continue
            consumed.update({a.pos, b.pos})
            # A listing names entries relative to the listed directory (`ls support/` -> `escalation.md`); the
            # agent's next step says where it really is (`cat support/escalation.md`).
            full = next((t.strip("'\"") for t in nz.command_tokens(b.arg) if hit in t), hit)
            hit = full if len(full) > len(hit) else hit
            if served.has_command(hit):
                break
            missed = [m for m in actions[max(0, a.pos - HUNT) : a.pos] if _missed(m)]
            out.append(_where(a, b, hit, _search_term(a), _line_with(a.output, hit), missed))
            break
    for b in actions:
        # Straight to the right place after a wrong one: `read pinmux.h` (no such file) ... `read board.dts`.
        if b.pos in consumed or b.failed or _missed(b) or not b.is_read or b.web or not b.arg.strip():
            continue
        missed = [m for m in actions[max(0, b.pos - HUNT) : b.pos] if _missed(m) and m.pos not in consumed]
        if not missed or any(_target(m) == b.arg.strip() for m in missed):
            continue
        consumed.update({b.pos} | {m.pos for m in missed})
        hit = b.arg.strip()
        if served.has_command(hit):
            continue
        first = next((ln.strip() for ln in b.output.splitlines() if len(nz.words(ln)) >= 2), "")
        out.append(_where(missed[0], b, hit, _target(missed[0]), first, missed))
    return out


def _where(a: Action, b: Action, hit: str, query: str, line: str, missed: list[Action]) -> dict:
    """A finding that `query` (what the agent looked for) is at `hit`, shown by look `a` and opening `b`."""
    tried = [m for m in missed if _target(m) and _target(m) != hit]
    wrong = trim(_target(tried[0]), 80) if tried else ""
    if a in missed and a.is_read:
        # Straight from a wrong path to the right one: the path is the lesson.
        summary = (
            f"`{hit}` is the place, not `{wrong or query}`: agents first tried `{trim(a.text, 100)}`, which does not "
            f"exist, before opening `{hit}`. Go straight there."
        )
    else:
        how = f"`{trim(a.text, 100)}`" + (" found nothing first" if a in missed else "")
        summary = (
            f"`{trim(query, 100)}` is in `{hit}`" + (f" (not `{wrong}`)" if wrong else "") + f": agents had to look "
            f"for it ({how}) before opening `{hit}`"
            + (f" (found: {trim(line.strip(), 140)})" if line.strip() else "")
            + ". Go straight there."
        )
    evidence_rows = [evidence(m.call_index, f"{m.text} -> {trim(m.output, 80)}", "agent") for m in tried[:1]]
    evidence_rows += [evidence(a.call_index, a.text, "agent")] if a not in tried else []
    if line and a.result_index is not None and a not in missed:
        evidence_rows.append(evidence(a.result_index, line, a.result_trust))
    evidence_rows.append(evidence(b.call_index, b.text, "agent"))
    return make_finding(
        "rediscovered_knowledge",
        f"where:{nz.normalize_command(query)}@{hit.lower()}",
        summary,
        evidence=evidence_rows,
        confidence=0.7 if missed else 0.6,
        query=query,
        location=hit,
        sought=bool(missed),
        tool=a.name,
    )


CODE_TOKEN = re.compile(r"`([^`\n]{3,120})`|(?<![\w-])(--?[a-z][\w-]{2,}|[A-Za-z_][A-Za-z0-9_]*=[^\s`'\"]+)", re.I)


def _code_tokens(text: str) -> set[str]:
    """Commands, flags and assignments quoted in a text: repeated verbatim they betray where the text came from."""
    return {(m.group(1) or m.group(2)).strip() for m in CODE_TOKEN.finditer(text) if (m.group(1) or m.group(2)).strip()}


def _source_output(note: str, actions: list[Action], before: int) -> Action | None:
    """The tool output (a fetched page above all) that the note repeats, if any: the same URL or host, the same
    quoted command or flag, or most of its words. A note that repeats tool output is no more trusted than it."""
    strong = {x for x in nz.anchors(note) if not x.isdigit() and nz.is_web_anchor(x)}
    other = {x for x in nz.anchors(note) if not x.isdigit()} - strong
    code = _code_tokens(note)
    sal = nz.salient(note)
    for a in reversed(actions[:before]):
        if not a.output:
            continue
        if _cites(note, a):
            return a
        out_anchors = nz.anchors(a.output)
        if strong and strong & out_anchors:
            return a
        if a.web and other & out_anchors:
            return a
        if code and any(c in a.output for c in code):
            return a
        common = len(sal & nz.salient(a.output))
        if len(sal) >= 3 and common >= 3 and common / len(sal) >= (0.5 if a.web else 0.7):
            return a
    return None


def _cites(note: str, a: Action) -> bool:
    """The note names what the call opened (`ticket 48213`, `KB-0192`, `vendor/sdk/README.txt`): it says where it
    comes from, so it is no more trusted than that output."""
    if a.shell or a.failed:
        return False
    arg = a.arg.strip()
    return bool(ID_LIKE.fullmatch(arg)) and bool(re.search(rf"(?<![\w-]){re.escape(arg)}(?![\w-])", note))


def _notes(notes, actions, served: _Served) -> list[dict]:
    out = []
    for idx, content, before in notes:
        text = content.strip()
        if not text:
            continue
        if has_secret(text):
            clean = redact(text)
            out.append(
                make_finding(
                    "secret",
                    "secret:"
                    + ",".join(secret_kinds(text))
                    + "|"
                    + " ".join(sorted(nz.salient(clean.replace(REDACTED, " ")))),
                    f"An agent saved a credential in-band ({', '.join(secret_kinds(text))}): {trim(clean, 160)}",
                    evidence=[evidence(idx, clean, "agent")],
                    confidence=0.9,
                )
            )
            continue
        if served.covers(text):
            continue
        src = _source_output(text, actions, before)
        if src is None:
            # Saved after a tool output addressed the agents: however it is worded, the note is no more trusted than
            # that output (a paraphrased injection keeps no words of the page).
            src = next((x for x in reversed(actions[:before]) if x.output and INJECTION.search(x.output)), None)
        ev = [evidence(idx, text, src.result_trust if src else "agent")]
        if src is not None:
            hit = next(iter(sorted(nz.anchors(text) & nz.anchors(src.output))), "") or next(
                (c for c in sorted(_code_tokens(text)) if c in src.output), ""
            )
            ev.append(
                evidence(
                    src.result_index or src.call_index,
                    _line_with(src.output, hit) if hit else src.output,
                    src.result_trust,
                )
            )
        anc, sal = nz.anchors(text), nz.salient(text)
        out.append(
            make_finding(
                "note",
                "note:" + " ".join(sorted(anc)) + "|" + " ".join(sorted(sal)),
                trim(text, 500),
                evidence=ev,
                confidence=0.6,
                source_url=(nz.urls(src.arg) or [src.text])[0] if src is not None else None,
            )
        )
    return out


def _injections(actions: list[Action]) -> list[dict]:
    out = []
    for a in actions:
        m = INJECTION.search(a.output) if a.output else None
        if m:
            line = _line_with(a.output, m.group(0))
            what = "A fetched page" if a.web else f"The output of `{trim(a.text, 80)}`"
            out.append(
                make_finding(
                    "injection",
                    f"inject:{nz.normalize_command(a.arg)}",
                    f"{what} addresses the agents with instructions: {trim(redact(line), 200)}",
                    evidence=[evidence(a.result_index or a.call_index, redact(line), a.result_trust)],
                    confidence=0.8,
                    source_url=a.arg,
                )
            )
    return out


def analyze(doc: dict, served=()) -> AnalysisResult:
    """Findings of one canonical session document (contracts/session.schema.json)."""
    events = doc.get("events") or []
    actions, messages, notes = _parse(events)
    srv = _Served(served)
    used: set[tuple[int, int]] = set()
    findings = _corrections(actions, messages, srv, used)
    findings += [f for f in _fixes(actions, srv, used)]
    consumed = {p for pair in used for p in pair}
    findings += _lookups(actions, srv, consumed)
    findings += _notes(notes, actions, srv)
    findings += _injections(actions)
    # Nothing that looks like a secret leaves the analyzer, whatever signal it rode in on.
    for f in findings:
        if f["kind"] == "secret":
            continue
        f["summary"] = redact(f["summary"])
        for k in ("old", "new", "error", "query", "location"):
            if isinstance(f.get(k), str):
                f[k] = redact(f[k])
        for e in f["evidence"]:
            e["excerpt"] = redact(e["excerpt"])
    return AnalysisResult(findings=findings)
