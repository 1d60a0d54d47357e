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
import shlex
from dataclasses import dataclass

from dreamweb import screening

from . import normalize as nz
from .findings import AnalysisResult, evidence, make_finding, plural, trim
from .risk import INJECTION, REDACTED, has_secret, redact, scan_memo, secret_kinds
from .tools import SHELL_TOOLS, call_text, main_argument

WEB_TOOLS = re.compile(r"web|browse|browser|fetch|http|url|crawl|scrape|internet|download", re.I)
# Names that say the result is internet content, whatever else the tool does (web_search, browser_open, http_get).
WEB_NAMES = re.compile(r"web|browse|browser|internet|http|url|crawl|scrape", re.I)
SEARCH_TOOLS = re.compile(r"search|grep|find|glob|locate|lookup|ripgrep|^rg$|query", re.I)
READ_TOOLS = re.compile(r"read|open|view|cat|get_file|show|fetch|browse", re.I)
SEARCH_PROGRAMS = {"grep", "egrep", "rg", "ag", "ack", "find", "fd", "locate", "ls", "tree", "which", "whereis"}
READ_PROGRAMS = {"cat", "less", "more", "head", "tail", "bat", "nl"}
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
# One occasion named: "this change", "tonight's rerun", "today's build", and "the …" only with an occasion that
# happens once (an event, a hotfix, a memo) or a name with a number ("the 1.8.2 hotfix", "the Q3 memo"): "only for
# the release branch" is a standing rule.
_ONCE_NOUNS = r"(?:event|memo|paper|hotfix|demo|launch|incident|cutover|sprint|rerun|experiment|outage|freeze)"
_THIS_OCCASION = (
    r"(?:(?:this|that|tonight'?s?|today'?s?) (?:[\w.\-]+ )?(?:change|pr|pull request|mr|backtest|run|rerun|build|"
    r"deploy(?:ment)?|branch|release|migration|event|memo|paper|report|job|batch|hotfix|sprint|demo|ticket|incident|"
    r"customer|case|window|test|experiment|launch|patch|upgrade|submit|session|task|cutover|rollout|restart|rebuild|"
    r"refresh|import|export|load|sync|backfill|retry|attempt|request|query|file|call)|"
    rf"the (?:[\w.\-]+ ){{0,2}}{_ONCE_NOUNS}|the (?:[\w\-]+ )?\w*\d[\w.\-]* \w+)"
)
# What "this …" names when it is a standing scope, not one occasion: a rule "for this repo only" holds there always.
_STANDING_SCOPES = (
    r"(?:repo|repository|project|codebase|service|team|app|application|package|module|directory|folder|workspace|org|"
    r"organi[sz]ation|company|store|cluster|environment|env|machine|server|host|tool|language|stack|product|site|"
    r"agent|account|customer|client|platform|region)"
)
# Words that make an instruction a one-off: never a standing preference, however it is worded.
ONE_OFF = re.compile(
    r"(?i)\b(?:for this one only|just this (?:once|time)|only (?:for )?this time|this time only|this once|"
    r"one[- ]time(?: only| exception)?|as a one[- ]off|(?:just|only) for (?:today|now|this (?:one|ticket|run|"
    r"release|case|customer|incident))|as an exception|make an exception|for the moment only|exceptionally|"
    r"(?:not|never) (?:a|the) (?:habit|rule|new normal)|(?:don'?t|do not) make (?:it|this|that) (?:a|the) "
    r"(?:habit|rule|default)|(?:today|this time),? (?:only|just)|"
    # German, French, Spanish, Italian, Portuguese, Dutch
    r"nur (?:dieses (?:eine )?mal|heute|ausnahmsweise)|ausnahmsweise|juste (?:cette fois|pour (?:aujourd'hui|"
    r"cette fois|l'instant))|exceptionnellement|solo (?:por )?esta vez|(?:solo|sólo) por hoy|excepcionalmente|"
    r"solo per (?:oggi|questa volta)|eccezionalmente|só (?:desta vez|por hoje)|alleen (?:deze keer|vandaag)|"
    # scoped to one occasion: "for this change only", "This PR only", "Just this build", "Only for tonight's rerun",
    # "For the Halloween event only", "Only for the 1.8.2 hotfix", "Only for CHG tonight"
    rf"(?:just|only) (?:for |in )?{_THIS_OCCASION}|for {_THIS_OCCASION} only|{_THIS_OCCASION} only|"
    # any one thing named "this …" with "only" ("For this invoice only"), unless it names a standing scope ("for this
    # repo only" is a rule of the repo); "Just this one"; "Never as a default"
    rf"for (?:this|that) (?:one )?(?!{_STANDING_SCOPES}\b)[\w-]+ only|(?:just|only) this one\b|"
    r"never as (?:a|the) default|(?:solo|sólo|solamente) (?:esta|este) \w+|"
    r"(?:just|only) for [\w.\- ]{1,30}? (?:tonight|today)|"
    # the default said to stay: "Normal runs keep the verify step", "Do NOT keep that", "russell3000 stays the default"
    r"(?:normal|regular|usual|other|future|later|standard) (?:runs?|builds?|submits?|deploys?|releases?|backtests?|"
    r"jobs?|executions?|pipelines?) (?:\w+ )?(?:keep|stay|remain)s?|stays? the default|"
    r"(?:don'?t|do not) (?:keep|persist|save|remember) (?:that|this|it)|"
    r"(?:don'?t|do not) change the (?:standard|default|normal|usual)|"
    r"(?:para|por) (?:este|esta) \w+ (?:solamente|sólo|solo|únicamente)|(?:solamente|únicamente) (?:para|por) "
    r"(?:este|esta|hoy)|nur für (?:diesen|diese|dieses|heute)|"
    r"(?:seulement|uniquement) pour (?:ce|cet|cette|aujourd'hui))"
    r"(?!\w)"
)
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
    args: dict | None = None  # the call's arguments as given (localised strings), when they were an object
    keyed: bool = True  # `arg` is one named argument (a command, a path, a query), not all of a prompt's fields

    @property
    def shell(self) -> bool:
        return bool(SHELL_TOOLS.match(self.name))

    @property
    def program(self) -> str:
        return nz.program(self.arg) if self.shell else ""

    @property
    def text(self) -> str:
        """How the action reads in a lesson: the command itself for a shell, `tool argument` otherwise."""
        return self.arg if self.shell else call_text(self.name, self.arg)

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
            toks = nz.command_tokens(self.arg)
            # `sed -n '1,80p' file` prints part of a file: a read.
            return self.program in READ_PROGRAMS or (self.program == "sed" and "-n" in toks[1:3])
        return bool(READ_TOOLS.search(self.name)) and bool(self.arg.strip())


def _arguments(arguments):
    """A call's arguments: an object when they are one (also as JSON text), else the text itself."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):  # arguments are an agent's text: not always JSON, maybe nested absurdly
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return arguments


def _arg_text(arguments, name: str = "") -> str:
    arguments = _arguments(arguments)
    if arguments is None:
        return ""
    if isinstance(arguments, dict):
        # A search is what it looks for (Grep's `pattern`), wherever it looks.
        term = next((arguments[k] for k in SEARCH_KEYS if isinstance(arguments.get(k), str)), None)
        main = term if term is not None and SEARCH_TOOLS.search(name) else main_argument(arguments)
        if main is not None:
            return main[:MAX_ARG]
        parts = [v for v in arguments.values() if isinstance(v, str | int | float) and not isinstance(v, bool)]
        return " ".join(str(p) for p in parts)[:MAX_ARG]
    return str(arguments)[:MAX_ARG]


SEARCH_KEYS = ("pattern", "query", "q", "regex")


def _parse(
    events: list, local=lambda t: t
) -> tuple[list[Action], list[tuple[int, str, str, int]], list[tuple[int, str, int]]]:
    """Actions in call order; messages and notes as (event_index, ..., number of actions before them). `local`
    rewrites every text as the project sees it (nz.localizer: paths relative to the session's directory)."""
    actions: list[Action] = []
    by_id: dict[str, Action] = {}
    messages: list[tuple[int, str, str, int]] = []
    notes: list[tuple[int, str, int]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        t = ev.get("type")
        if t == "tool_call":
            name = str(ev.get("name") or "")
            raw = _arguments(ev.get("arguments"))
            args = {k: local(v) if isinstance(v, str) else v for k, v in raw.items()} if isinstance(raw, dict) else None
            keyed = not isinstance(raw, dict) or main_argument(raw) is not None or any(k in raw for k in SEARCH_KEYS)
            a = Action(
                pos=len(actions), call_index=i, name=name, arg=local(_arg_text(raw, name)), args=args, keyed=keyed
            )
            actions.append(a)
            by_id[str(ev.get("id"))] = a
        elif t == "tool_result":
            a = by_id.get(str(ev.get("call_id")))
            if a is None or a.result_index is not None:
                continue
            a.result_index = i
            a.output = local(str(ev.get("content") or ""))
            code = ev.get("exit_code")
            a.failed = bool(ev.get("is_error")) or (isinstance(code, int) and code != 0)
            if not a.failed and a.shell and FILTERED.search(a.arg) and REPORTED_FAILURE.search(a.output):
                # `make lint 2>&1 | tail -5`: the pipe's status is the filter's; the report says the check failed.
                a.failed = True
        elif t == "message" and isinstance(ev.get("content"), str):
            # A "user" turn that an agent wrote (a subagent's task prompt) is not a person's: never a correction.
            role = str(ev.get("role"))
            if role == "user" and ev.get("author") not in (None, "", "user", "human", "person"):
                role = "agent-prompt"
            messages.append((i, role, local(ev["content"]), len(actions)))
        elif t == "memory_write" and isinstance(ev.get("content"), str):
            notes.append((i, local(ev["content"]), len(actions)))
    return actions, messages, notes


# Dreamweb's own rendering of served context (memory.context): a block's header, and a `## key` heading per entry.
_BLOCK_HEADER = re.compile(r"^\s*#\s+(?:memory|skills\b.*)\s*$", re.I)
_ENTRY_HEADING = re.compile(r"^\s*##\s+\S")


class _Served:
    """What Dreamweb served into the session: findings that only repeat it are not new evidence. Compared as read
    (screening.as_read): a copy with zero-width or look-alike characters is still a copy."""

    def __init__(self, served):
        self.texts = [nz.collapse(screening.as_read(s)).lower() for s in served or () if s]
        self.sets = [(nz.salient(s), nz.anchors(s)) for s in self.texts]
        # Mistakes made again although the served memory says the fix: no new evidence for that memory, but what
        # effectiveness counts (AnalysisResult.served_findings).
        self.recurred: list[dict] = []

    def has_command(self, cmd: str) -> bool:
        c = nz.collapse(cmd).lower()
        return bool(c) and any(c in t for t in self.texts)

    def has_words(self, tokens) -> bool:
        return bool(tokens) and any(
            all(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", t) for w in tokens) for t in self.texts
        )

    def covers(self, text: str) -> bool:
        if not self.sets:
            return False
        text = nz.collapse(screening.as_read(text)).lower()
        sal, anc = nz.salient(text), nz.anchors(text)
        return any(anc <= s_anc and nz.containment(sal, s_sal) >= 0.7 for s_sal, s_anc in self.sets)

    def unserved(self, text: str) -> list[str]:
        """The note without what was served into the session: a copy of the served block, whole or in part (its
        headers, each ``## key`` section whose text was served, the skills list) is no new evidence; each section
        left (one added to a forged copy) is read as a note of its own, without the block's markup. Empty when
        nothing is left; the text alone when it holds no copy."""
        if self.covers(text):
            return []
        lines = text.splitlines()
        if not self.sets and not (
            ("#" in text or "\uff03" in text)  # no header without one (\uff03: a full-width #)
            and any(_BLOCK_HEADER.match(screening.as_read(line)) for line in lines)
        ):
            return [text]
        sections: list[list[str]] = [[]]
        in_skills = False
        for line in lines:
            read = screening.as_read(line)
            if _BLOCK_HEADER.match(read):
                in_skills = "skills" in read.lower()
                sections.append([])
            elif _ENTRY_HEADING.match(read):
                in_skills = False
                sections.append([])
            elif not in_skills:
                sections[-1].append(line)
        left = ["\n".join(s).strip() for s in sections]
        left = [s for s in left if s and not self.covers(s)]
        return [text] if len(left) == 1 and left[0] == text.strip() else left


def _err_evidence(a: Action) -> dict:
    return evidence(
        a.result_index if a.result_index is not None else a.call_index,
        nz.error_line(a.output) or a.output,
        a.result_trust,
    )


# A pipe into a text filter: the command's own exit status is lost.
FILTERED = re.compile(r"\|\s*(?:head|tail|grep|egrep|less|more|cat|sed|awk|cut|sort|uniq|tee|wc)\b")
# A check's report that something failed: a non-zero count of issues, a FAIL line.
REPORTED_FAILURE = re.compile(
    r"(?m)^\s*[1-9]\d* (?:issues?|errors?|failures?|failed|problems?|warnings? treated as errors)\b"
    r"|^(?:FAIL|--- FAIL|FAILED|ERROR)\b|\b[1-9]\d* (?:failed|errors?)(?:,| in )"
)
# One diagnostic of a compiler, linter or type checker: `path:line[:col]: message`.
DIAGNOSTIC = re.compile(
    r"^(?P<where>[\w./@+-]+\.[\w]+)(?::\d+(?::\d+)?:|\(\d+,\d+\):)\s*(?P<message>\S.*)$"  # x.go:12:3: / x.ts(12,3):
)
# eslint's default report: the file on a line of its own, then `  12:5  error  message  rule-name`.
STYLISH = re.compile(r"^\s+\d+:\d+\s+(?:error|warning)\s+(?P<message>.+?)\s{2,}(?P<rule>[@\w/-]+)\s*$")
# A rule code before the message (`E501 Line too long`, `error TS2322: ...`, `SC2086: ...`).
LEADING_RULE = re.compile(r"^(?:error\s+|warning\s+)?(?P<rule>[A-Z]{1,4}\d{2,5})\b:?\s*(?:\[\*\]\s*)?")
# The rule a diagnostic names: `... (nilerr)`, `... [attr-defined]`.
RULE = re.compile(r"[(\[](?P<rule>[a-z][\w-]{1,40})[)\]]\s*$")
# Distinct rules taken from one report: a linter that lists a dozen rules at once still names each (the ninth is as
# much a rule of the team's as the first); the bound only keeps a runaway report from flooding the findings.
MAX_DIAGNOSTICS = 20
# What a compiler says of code that does not build yet: the work in progress, one-off by nature, not a rule.
COMPILE_ERROR = re.compile(
    r"(?i)\b(?:undefined|undeclared|not declared|not defined|cannot use|cannot find (?:symbol|name|module)|"
    r"assignment mismatch|syntax error|unexpected (?:token|end|eof|indent|character|identifier)|"
    r"has no (?:field|method|attribute|member|property)|missing return|"
    r"too (?:many|few) (?:arguments|return values)|mismatched types|incompatible types?|is not assignable|"
    r"declared and not used|imported and not used|no new variables|typecheck)\b"
)
_CODE = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\([^()]*\)(?!\s*$)|\b\w+[A-Z_.*/][\w.*/]*")


def _shape(message: str) -> str:
    """A diagnostic's kind: its message with the code it quotes (names, types, literals, numbers) taken out, so
    `NewClient returns interface (telemetry.Client) (ireturn)` and `GetAgent returns interface (agent.Agent)
    (ireturn)` are one kind."""
    rule = RULE.search(message)
    body = message[: rule.start()] if rule else message
    body = _CODE.sub("<x>", body)
    return nz.normalize_error(body + (f"({rule.group('rule')})" if rule else "")).replace("<x>", "…")


def _check(cmd: str) -> str:
    """A check command as it is run every time: without redirections and the text filters piped after it."""
    core = re.split(r"\s*\|\s*(?:head|tail|grep|egrep|less|more|cat|sed|awk|cut|sort|uniq|tee|wc)\b", cmd)[0]
    return nz.collapse(re.sub(r"\s*\d?>&\d|\s*2>\s*/dev/null", "", core))


def _passes(b: Action, check: str) -> bool:
    """The shell step ran ``check`` and it passed: the same check alone, or first in an ``&&`` chain that succeeded
    (`make lint && make test`, `cd src && make lint`: the chain only goes on, and succeeds, when the check passed).
    A chain that does something else first (`go mod tidy && go test`) is another procedure, not the check again."""
    if not b.shell or b.failed:
        return False
    parts = [p for p in re.split(r"\s*&&\s*", b.arg) if not re.match(r"(?:cd|pushd)\s", p.strip())]
    return _check(b.arg) == check or bool(parts) and _check(parts[0]) == check


def _diagnostics(actions: list[Action], used: set[tuple[int, int]]) -> tuple[list[dict], set[int]]:
    """A check (lint, type check, build) that reports diagnostics, and passes again later in the session once the code
    was changed: one finding per diagnostic kind (its message with the place and numbers taken out). The same
    rule failing in many sessions is a lesson about the code this team writes (`nilerr`, `errcheck`), where a
    diagnostic of the code being written (`undefined: runCleanWithBranches`) does not recur."""
    out, handled = [], set()
    for a in actions:
        if not (a.failed and a.shell):
            continue
        diags = _parse_diagnostics(a.output)
        if not diags:
            continue
        check = _check(a.arg)
        later = next((b for b in actions[a.pos + 1 :] if _passes(b, check)), None)
        if later is None:
            continue  # never passed again in the session: the ordinary fix analysis may still find what replaced it
        handled.add(a.pos)
        used.add((a.pos, later.pos))
        edits = [x for x in actions[a.pos + 1 : later.pos] if not x.shell and x.args and not x.failed]
        seen: set[str] = set()
        for line, message, rule in diags:
            # A linter's rule is the lesson's unit (`ireturn` fails again and again, whatever function it names).
            sig = f"rule {rule}" if rule else _shape(message)
            if sig in seen or len(seen) >= MAX_DIAGNOSTICS:
                continue
            seen.add(sig)
            fix = _fix_line(edits, rule) if rule else ""
            how = f" (the fix: `{trim(fix, 120)}`)" if fix else ""
            said = _gist(message, rule)
            out.append(
                make_finding(
                    "tool_failure",
                    f"check:{nz.normalize_command(check)}:{sig}",
                    f"`{check}` reports `{trim(said, 160)}`{how}: it passed again once the code was fixed. "
                    f"Write code that passes it, and run `{check}` before calling the work done.",
                    evidence=[
                        evidence(a.call_index, a.text, "agent"),
                        evidence(a.result_index or a.call_index, line, a.result_trust),
                        evidence(later.call_index, later.text, "agent"),
                    ],
                    confidence=0.6,
                    old=check,
                    new=f"{check} (after fixing the code)",
                    error=said,
                    error_signature=sig,
                    resolved=True,
                    tool=a.name,
                    check=True,
                    rule=rule,
                )
            )
    return out, handled


def _gist(message: str, rule: str | None) -> str:
    """What a diagnostic says, without the code it quotes after its sentence: `error returned from external package
    is unwrapped: sig: func (*x.Repository).Head() (...) (wrapcheck)` says `error returned from external package is
    unwrapped (wrapcheck)`; that signature is one place's, not the rule's. A message that opens with a check's name
    (`ifElseChain: rewrite if-else ...`) keeps what follows."""
    if not rule:
        return message
    body = RULE.sub("", message).rstrip()
    head, sep, rest = body.partition(": ")
    if sep and len(head.split()) >= 3 and re.search(r"[(*{\[]|\w[./]\w", rest):
        return f"{head} ({rule})"
    return message


def _parse_diagnostics(output: str) -> list[tuple[str, str, str | None]]:
    """(line, message, rule) of each diagnostic a check printed, the line as printed (the evidence quotes it
    verbatim: a reviewer finds it in the transcript). A diagnostic names a rule or says what is wrong
    (a test's log line at a file and line, `x_test.go:12: hook output: ...`, does neither); one of code that does
    not build yet (undefined names, type mismatches) is the work in progress, not a rule of the team's."""
    out = []
    for raw in output.splitlines():
        line = raw.strip()
        m = DIAGNOSTIC.match(line)
        if m:
            said = m.group("message").strip()
            tail, lead = RULE.search(said), LEADING_RULE.match(said)
            rule = tail.group("rule") if tail else (lead.group("rule") if lead else None)
        else:
            s = STYLISH.match(raw)
            if s is None:
                continue
            said, rule = s.group("message").strip(), s.group("rule")
        if (rule or nz.ERROR_WORDS.search(said)) and not COMPILE_ERROR.search(said):
            out.append((line, said, rule))
    return out


def _fix_line(edits: list[Action], rule: str) -> str:
    """The line an edit added that names the rule (`return nil //nolint:nilerr // expected`), if any."""
    pat = re.compile(rf"(?<![\w-]){re.escape(rule)}(?![\w-])")
    for e in edits:
        for value in e.args.values():
            if isinstance(value, str) and pat.search(value):
                line = next((ln.strip() for ln in value.splitlines() if pat.search(ln)), "")
                if line:
                    return line
    return ""


def _fixes(
    actions: list[Action], served: _Served, used: set[tuple[int, int]], skip=frozenset(), exceptions=frozenset()
) -> list[dict]:
    """Failed calls and what made them work. ``exceptions``: positions of actions that follow a person's one-off
    word ("just this once", "only for today"): what the agent did after it is that decision, never a lesson."""

    def excepted(a: Action, b: Action) -> bool:
        return any(a.pos < p <= b.pos for p in exceptions)

    out = []
    for a in actions:
        if not a.failed or not a.arg.strip() or a.pos in skip:
            continue
        if _missed(a) and not _searched_wrong_place(a):
            continue  # a wrong path or an empty search: where things are (_lookups), not a call to correct
        if REJECTED.search(a.output[:300]):
            continue  # the person declined the call: a decision (their words, if any, are a message), not a failure
        err = _error_text(a)
        sig = nz.normalize_error(err)
        fixed = False
        window = actions[a.pos + 1 : a.pos + 1 + LOOKAHEAD]
        retry = next((j for j, b in enumerate(window) if b.name == a.name and not b.failed and _same_call(a, b)), None)
        if retry is not None:
            changed = _changed_args(a, window[retry])
            if changed:
                # The same call on the same target with other content (Edit's `old_string`): what changed is the fix.
                b = window[retry]
                if (a.pos, b.pos) not in used:
                    used.add((a.pos, b.pos))
                    out.append(_finding_changed(a, b, changed, err, sig))
                continue
            # Retried unchanged and it worked: the successful step in between (if any) was the fix. Looking around is
            # not a fix, and a change of the code (an edit, a patch) is the work itself, not a step to remember. A
            # step the same call still failed after (`npm cache clean`, then the same failure) fixed nothing: only
            # what ran after the last failed attempt counts.
            last_failed = max(
                (j for j, x in enumerate(window[:retry]) if x.name == a.name and x.failed and _same_call(a, x)),
                default=-1,
            )
            if excepted(a, window[retry]):
                continue
            steps = [x for x in window[last_failed + 1 : retry] if not x.failed and x.arg.strip()]
            between = [x for x in steps if _same_target(a, x)] or [x for x in steps if not _inspection(x)]
            if between and _edits_code(between[0]) and not _same_target(a, between[0]):
                continue
            if between and (a.pos, between[0].pos) not in used:
                fix = between[0]
                used.add((a.pos, fix.pos))
                (served.recurred if served.has_command(fix.arg) else out).append(_finding_retry(a, fix, err, sig))
            continue
        for b in window:
            if b.name != a.name or _other_file(a, b) or (a.is_search and _search_term(b) != _search_term(a)):
                continue
            if _same_call(a, b) or b.failed:
                continue
            if (a.shell and nz.similar_commands(a.arg, b.arg)) or (
                not a.shell and a.keyed and b.keyed and nz.jaccard(nz.shingles(a.arg), nz.shingles(b.arg)) >= 0.4
            ):
                fixed = True
                if (a.pos, b.pos) in used or excepted(a, b):
                    break
                used.add((a.pos, b.pos))
                (served.recurred if served.has_command(b.arg) else out).append(_finding_corrected(a, b, err, sig))
                break
        if not fixed and window:
            # The very next action, of the same tool, is something else that worked (`yarn build` fails, then
            # `npm run build`; `python setup.py test` fails, then `tox -e py311`): the agent replaced the failed step.
            # Looking around (status, listings, reads, searches) is not a replacement. A weak signal on its own: only
            # its recurrence across sessions makes it a lesson.
            b = window[0]
            # A tool's search that failed with an error (not an empty answer: that was _lookups') and is asked again
            # at once in another form (`email=…` refused by policy, then `subject_hash=…`) was corrected, not looked
            # around. A shell search's next term is another look (its errors are its options: the same term again).
            requery = a.is_search and not a.shell
            if (
                b.name == a.name
                and (not a.is_search or _search_term(b) == _search_term(a) or requery)
                and a.keyed
                and b.keyed
                and not _edits_code(a)
                and not _other_file(a, b)
                and not b.failed
                and b.arg.strip()
                and not _same_call(a, b)
                and (not _inspection(b) or _same_lookup(a, b) or requery)
                and (a.pos, b.pos) not in used
            ):
                fixed = True
                if excepted(a, b):
                    continue
                used.add((a.pos, b.pos))
                f = _finding_corrected(a, b, err, sig)
                f["confidence"] = 0.5
                f["loose"] = True
                (served.recurred if served.has_command(b.arg) else out).append(f)
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


# A call the person declined (Claude Code's permission prompt, an approval refused): not a failure of the call.
REJECTED = re.compile(
    r"(?i)\b(?:doesn'?t want to proceed with this tool use|tool use was rejected|(?:rejected|declined|denied) by the "
    r"user|user (?:rejected|declined|denied) (?:this|the) (?:tool|call|command|request))"
)
FILE_KEYS = ("file_path", "path", "file", "filename", "notebook_path", "target_file")
# Arguments that describe a call rather than make it (a shell's `description`, a timeout).
INCIDENTAL_KEYS = {"description", "timeout", "run_in_background", "explanation", "justification"}


PATH_ERROR = re.compile(r"(?i)no such file or directory|not a directory|does not exist")


def _same_call(a: Action, b: Action) -> bool:
    """b repeats a. A command is the same only word for word: `psql -p 5432` then `psql -p 5433` is a corrected
    command (the port was wrong), though the two read alike once volatile numbers are masked for grouping. Another
    tool's call is the same when its argument reads the same (ids and timestamps aside)."""
    if a.shell:
        return nz.collapse(a.arg) == nz.collapse(b.arg)
    return nz.normalize_command(a.arg) == nz.normalize_command(b.arg)


def _searched_wrong_place(a: Action) -> bool:
    """`grep -rn TODO src/` -> `grep: src/: No such file or directory`: the same search elsewhere corrects it (an
    empty result or a listing of a missing folder is a look that found nothing, not a command to correct)."""
    return a.shell and a.failed and a.program in GREP_PROGRAMS and bool(PATH_ERROR.search(a.output[:300]))


def _error_text(a: Action) -> str:
    """The headline of a failure: a tool's own error is its first line (an edit tool's message may quote code
    that holds error words further down); a program's output is searched for its most telling line."""
    if not a.shell:
        first = next((ln.strip() for ln in a.output.splitlines() if ln.strip()), "")
        if first:
            return first[:300]
    return nz.error_line(a.output)


EDIT_TOOLS = re.compile(r"edit|write|patch|replace|insert|create_file|str_replace|notebook", re.I)


def _edits_code(a: Action) -> bool:
    """A call that changes files (Edit, Write, apply_patch, str_replace ...), as opposed to a command to run."""
    return not a.shell and bool(EDIT_TOOLS.search(a.name))


def _same_target(a: Action, b: Action) -> bool:
    return not a.shell and not b.shell and a.arg.strip() == b.arg.strip()


def _other_file(a: Action, b: Action) -> bool:
    """Two calls of a file tool on different files (Edit of one file, then of another) are two pieces of work,
    never a call and its correction."""
    if a.shell or not a.args or not b.args:
        return False
    files = [next((x.args.get(k) for k in FILE_KEYS if isinstance(x.args.get(k), str)), None) for x in (a, b)]
    return files[0] is not None and files[1] is not None and files[0] != files[1]


def _changed_args(a: Action, b: Action) -> list[str]:
    """The arguments a retry of the same call on the same target changed (`old_string` of an Edit)."""
    if not a.args or not b.args:
        return []
    keys = sorted(set(a.args) | set(b.args))
    return [
        k
        for k in keys
        if k not in INCIDENTAL_KEYS
        and k not in FILE_KEYS
        and a.args.get(k) != b.args.get(k)
        and isinstance(a.args.get(k, b.args.get(k)), str | bool | int)
    ]


def _finding_changed(a: Action, b: Action, changed: list[str], err: str, sig: str) -> dict:
    """The same call retried with other content worked: the lesson is the tool's, not this file's."""

    def grew(k: str) -> bool:
        old_v, new_v = str(a.args.get(k) or ""), str(b.args.get(k) or "")
        return bool(old_v.strip()) and old_v.strip() in new_v and len(new_v) > len(old_v)

    changed = sorted(changed, key=lambda k: (not grew(k), k))
    longer = grew(changed[0])
    how = " (a longer one that contains the first: more context)" if longer else ""
    keys = ", ".join(f"`{k}`" for k in changed[:3])
    return make_finding(
        "tool_failure",
        f"retry:{a.name.lower()}:{sig}=>{','.join(changed[:3])}{':longer' if longer else ''}",
        f'When `{a.name}` fails with "{trim(err, 200)}", retry the same call with another {keys}{how}.',
        evidence=[evidence(a.call_index, a.text, "agent"), _err_evidence(a), evidence(b.call_index, b.text, "agent")],
        confidence=0.6,
        old=f"{a.name}: {trim(err, 100)}",
        new=f"{a.name} with another {keys}{how}",
        error=err,
        error_signature=sig,
        resolved=True,
        tool=a.name,
    )


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
    changed_from, changed_to = nz.command_edit(old, new)
    return make_finding(
        "corrected_command",
        f"cmd:{changed_from}=>{changed_to}",
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
    if not a.shell and not fix.shell and fix.arg.strip() == a.arg.strip():
        # The step that made the retry work was another tool on the same target (Read the file an Edit refused):
        # the lesson is the tools', whatever the file.
        return make_finding(
            "tool_failure",
            f"fix:{sig}=>{fix.name.lower()} <same target>",
            f'When `{a.name}` fails with "{trim(err, 140)}", run `{fix.name}` on the same target first, then retry.',
            evidence=[_err_evidence(a), evidence(fix.call_index, fix.text, "agent")],
            confidence=0.6,
            old=f"{a.name} <target>",
            new=f"{fix.name} <the same target>, then {a.name}",
            error=err,
            error_signature=sig,
            resolved=True,
            tool=a.name,
        )
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
    return any(_stands_alone(t, text_lower) for t in {token.lower(), core} if len(t) >= 2)


def _word_edge(ch: str) -> bool:
    return not (ch.isalnum() or ch in "_-")  # what `(?<![\w-])` and `(?![\w-])` read


def _stands_alone(word: str, text: str) -> bool:
    """``word`` occurs in ``text`` with no word character or hyphen on either side. Found by str.find, not by a
    pattern per word: a session's thousands of distinct command words overflowed re's cache and compiled each one
    again (a third of the analysis of a session with 5,000 corrections)."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or _word_edge(text[at - 1])) and (end == len(text) or _word_edge(text[end])):
            return True
        at = text.find(word, at + 1)
    return False


# A message that approves, or only asks, is not a correction unless it says what to do instead.
# A message that moves on to the next step ("Now deploy it.", "Also run the linter.") is not a correction either.
FOLLOW_UP = re.compile(r"(?i)^\W*(?:now|next|then|also|and|after that|afterwards|finally|once|when)\b")
# A remark beside the work ("btw the cluster is orca-7, fyi"): information, not a word about the agent's last step.
ASIDE = re.compile(
    r"(?i)^\W*(?:btw|by the way|fyi|f\.y\.i\.|side ?note|unrelated|off[- ]topic|just so you know|for the record|"
    r"for (?:your |the )?info(?:rmation)?|heads[- ]up|p\.s\.|ps(?=:)|übrigens|nebenbei|au fait|d'ailleurs|por cierto|"
    r"a prop[oó]sito|en passant)(?!\w)|\b(?:just )?fyi\W*$"
)
# Asking for more on top of what was done ("please also add ...", "... as well", "one more thing"): the next step is
# that addition, not a replacement of the last one.
MORE = re.compile(
    r"(?i)^\W*(?:also|and also|one more thing|additionally|in addition|while you'?re at it|don'?t forget)\b|"
    r"\b(?:please|pls|can you|could you|would you|and|then)\s+also\b|"
    r"\balso\s+(?:add|write|create|include|document|cover|update|bump|mention)\b|\b(?:as well|too)\W*$"
)
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
        # A correction replaces what the agent did with another way of doing it: the same tool, the same file for a
        # file tool, and not two looks at different things (`TodoWrite` then `Write CLAUDE.md` is the next step).
        if a.name != b.name or _other_file(a, b):
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
            or (bool(said_new) and len(content) <= 80 and not FOLLOW_UP.search(content) and not MORE.search(content))
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
            and not ASIDE.search(content)
            and not MORE.search(content)
            and _asked_for(content) is None
            and not (content.rstrip().endswith("?") and not negation)
            and not _inspection(a)
            and not _inspection(b)
        )
        cued = negation or preference or bool(CONVENTION.search(content)) or _modified(a, b)
        if not (named or unnamed):
            continue
        # Unnamed, a side is keyed by what its command does, not by the operands this session gave it (the branch it
        # made, the file it touched), so that the same correction in other sessions is the same lesson.
        old_key = said_old or sorted(old_only & nz.shape_words(a.text) or old_only)
        new_key = said_new or sorted(new_only & nz.shape_words(b.text) or new_only)
        repeats_served = (served.has_words(new_key) and served.has_words(old_key)) or served.has_command(b.text)
        if not repeats_served:
            used.add((a.pos, b.pos))
        # Name the choices in the user's words when they used any; else the commands say it.
        # (the words as the commands write them: a flag's or a task's case is part of it)
        fmt_old = ", ".join(f"`{nz.as_written(t, a.text)}`" for t in said_old)
        if said_new:
            fmt_new = ", ".join(f"`{nz.as_written(t, b.text)}`" for t in said_new)
            lesson = f"Use {fmt_new}, not {fmt_old}" if said_old else f"Use {fmt_new}"
            lesson += f": run `{b.text}` instead of `{a.text}`"
        elif said_old:
            lesson = f"Do not use {fmt_old}: run `{b.text}` instead of `{a.text}`"
        else:
            lesson = f"Run `{b.text}` instead of `{a.text}`"
        (served.recurred if repeats_served else out).append(
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
# For grep and its kin a glob only filters the files searched; the pattern is the term.
GREP_PROGRAMS = {"grep", "egrep", "fgrep", "rg", "ag", "ack", "git"}
GREP_TERM_FLAGS = {"-e", "--regexp"}
GREP_VALUE_FLAGS = VALUE_FLAGS | {"-g", "--glob", "--include", "--exclude", "--type-add", "-f"}


def _search_term(a: Action) -> str:
    """What a search looked for: the pattern of a grep/find, the query of a search tool."""
    if not a.shell:
        return a.arg.strip()
    try:
        toks = shlex.split(a.arg)  # `rg -n "func enable|enableCmd" src` keeps its pattern whole
        toks = toks[: toks.index("|")] if "|" in toks else toks
    except ValueError:
        toks = nz.command_tokens(a.arg)
    prog = nz.program(a.arg)
    rest = toks[2:] if prog == "git" else toks[1:]
    if prog in ("find", "tree") and not any(t in TERM_FLAGS for t in rest):
        return ""  # `find src -type f`, `tree .`: everything under a folder, not one thing
    terms, values = (GREP_TERM_FLAGS, GREP_VALUE_FLAGS) if prog in GREP_PROGRAMS else (TERM_FLAGS, VALUE_FLAGS)
    for i, t in enumerate(rest):
        if t in terms and i + 1 < len(rest):
            return rest[i + 1].strip("'\"")
    skip = False
    for t in rest:
        if skip:
            skip = False
            continue
        if t in values:
            skip = True
            continue
        if not t.startswith("-"):
            return t.strip("'\"")
    return a.arg.strip()


LISTING_LINE = re.compile(r"^[-dlcbps][rwxsStT-]{9}[@+.]?\s+\d+\s+\S+\s+\S+\s+.*?(\S+)\s*$")


def _line_with(text: str, needle: str) -> str:
    for line in text.splitlines():
        if needle in line:
            # An `ls -l` line says who owns the file (a person's account): only its name is the finding's business.
            m = LISTING_LINE.match(line.strip())
            return m.group(1) if m else line
    return text


# What a look that found nothing says: a wrong path, an empty search ("No files found", "0 articles found").
NOT_FOUND = re.compile(
    r"(?i)\b(?:no such file|(?:file|path|directory) does not exist|does not exist|doesn'?t exist|not found|"
    r"no (?:files?|matches|match|results?|hits|articles?|entries|documents?)(?: (?:were )?found)?|"
    # what a store or a catalogue says of a name it does not hold: "No members found matching CUST*"
    r"no (?:[\w-]+ ){1,2}(?:found|matched|matching)|"
    r"0 (?:files?|matches|results?|hits|articles?|entries|documents?)|nothing (?:found|matched)|"
    r"(?:could|can) ?not find|can'?t find|unable to find|did you mean)\b"
)
HUNT = 4  # actions between a look that found nothing and the look that found it


def _missed(a: Action) -> bool:
    """A read or search that found nothing: it failed, or its short output says so (tools that report a wrong path
    or an empty search as a normal result), or a search printed nothing at all."""
    if not (a.is_search or a.is_read or _reads_store(a)) or a.web:
        return False
    if a.failed and not (a.is_search or a.is_read):
        # a store's command that failed (`kubectl get pods -n legacy`: namespace not found) is a command to correct,
        # not a place that was empty
        return False
    out = a.output.strip()
    if a.shell and (MISSING_PROGRAM.search(out) or _names_program(a, out)):
        return False  # the tool itself is missing: a command to correct, not a place to find
    if a.failed:
        # Found nothing (grep's exit 1 with no output, "File does not exist"), not a command that went wrong
        # (`grep: invalid option -- 'P'`).
        return not out or bool(NOT_FOUND.search(out[:300]))
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
    if a.shell and not a.is_read and _reads_store(a):
        # `airflow connections get refinitiv_sftp`: the name asked of the store, not the store's sub-command
        return a.arg.strip()
    if a.shell:
        return next((t.strip("'\"") for t in nz.command_tokens(a.arg)[1:] if not t.startswith("-")), a.arg.strip())
    return a.arg.strip()


def _bare(path: str) -> str:
    return path[2:] if path.startswith("./") and len(path) > 2 else path


def _opened(a: Action, b: Action, locs: list[str]) -> str | None:
    """The location of a's output that b then opened (read, searched in, ran), if any."""
    if b.failed or _missed(b):
        return None
    # `grep -rn X .` prints `./backend/x.py`; the agent opens `backend/x.py` (or the other way round): one place.
    hit = next(
        (_bare(loc) for loc in locs if _bare(loc) in b.arg or b.arg.strip().lstrip("./") == loc.lstrip("./")),
        None,
    )
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
            if not _distinctive(_search_term(a), hit):
                break  # listing everything under a folder or of a file type is not looking for one thing
            if _named_by(a, hit):
                break  # a search inside the very file it then opens: the agent knew where to look
            sought = f"{hit} {_search_term(a)}"
            missed = [m for m in actions[max(0, a.pos - HUNT) : a.pos] if _missed(m) and _related(_target(m), sought)]
            found = _where(a, b, hit, _search_term(a), _line_with(a.output, hit), missed)
            (served.recurred if served.has_command(hit) else out).append(found)
            break
    for b in actions:
        # Straight to the right place after a wrong one: `read pinmux.h` (no such file) ... `read board.dts`; or to
        # the store that holds it (`consul kv get -recurse arena/matchmaker/` after `config/matchmaker.toml`).
        if b.pos in consumed or b.failed or _missed(b) or b.web or not b.arg.strip():
            continue
        store = not b.is_read and _reads_store(b)
        if not (b.is_read or store):
            continue
        hit = b.arg.strip()
        where = hit if store else _target(b)
        missed = [
            m
            for m in actions[max(0, b.pos - HUNT) : b.pos]
            if _missed(m) and m.pos not in consumed and (_related(_target(m), where) or _answers(b, m))
        ]
        if not missed or any(_target(m) == _target(b) for m in missed):
            continue
        consumed.update({b.pos} | {m.pos for m in missed})
        hit = b.arg.strip()
        first = _answer_line(b.output, [_target(m) for m in missed])
        found = _where(missed[0], b, hit, _target(missed[0]), first, missed)
        (served.recurred if served.has_command(hit) else out).append(found)
    return out


_GLOB = re.compile(r"[*?\[\]{}!^$()|\\]+")


def _named_by(search: Action, hit: str) -> bool:
    """Whether the search was already pointed at the file it found (`grep -n 'round(' billing/invoice.py`, a Grep
    call whose path is that file): its answer is a line in a known file, not where something is."""

    def bare(path: str) -> str:
        return path.strip("'\"").removeprefix("./").rstrip("/")

    named = {bare(t) for t in nz.command_tokens(search.arg)}
    named |= {bare(v) for v in (search.args or {}).values() if isinstance(v, str)}
    return bare(hit) in named


def _answer_line(output: str, sought: list[str]) -> str:
    """What of a look's output answers what the agent was after: a short listing whole (the name of the setting among
    an app's six, the suspense account among a class's three); else the line that shares most of the words it
    sought; else the first line that says something."""
    lines = [ln.strip() for ln in output.splitlines()[:200] if ln.strip()]
    if 1 < len(lines) <= 8 and sum(map(len, lines)) <= 300:
        return "; ".join(lines)
    words = {nz.stem(w) for t in sought for w in _term_words(t)}
    if words:
        scored = [(len(words & {nz.stem(w) for w in _term_words(ln)}), -i, ln) for i, ln in enumerate(lines)]
        best = max(scored, default=(0, 0, ""))
        if best[0]:
            return best[2]
    return next((ln for ln in lines if len(nz.words(ln)) >= 2), "")


def _term_words(term: str) -> set[str]:
    """The words of a search term or a path, without wildcards and file extensions: `**/ingest_orders*.py` ->
    {ingest, orders}; `*.ts` -> nothing."""
    text = _GLOB.sub(" ", term or "")
    text = re.sub(r"\.[A-Za-z0-9]{1,5}\b", " ", text)
    return {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)} - nz.STOPWORDS


def _distinctive(term: str, hit: str) -> bool:
    """A search for one thing (a name, a symbol, words), not an enumeration: `find src -type f`, `*.tsx`, `tree .`."""
    if not _term_words(term):
        return False
    # `src/cli/commands/*.ts`: every file of a folder, not one thing looked for in it
    wild = re.search(r"[*?\[{]", term)
    if wild is None:
        return True
    root = term[: wild.start()].strip("'\" ").rstrip("/")
    return not (root and hit.startswith(root + "/") and not _term_words(term[wild.start() :]))


# A shell command that reads a value from where it is kept, by its verb: `consul kv get`, `vault kv get`, `etcdctl
# get`, `kubectl describe configmap`, `aws ssm get-parameter`, `git show main:path`, `helm get values`.
STORE_VERBS = frozenset(
    {"get", "read", "show", "describe", "cat", "get-parameter", "get-parameters", "get-object", "list", "view"}
)


def _reads_store(a: Action) -> bool:
    """A value or a listing asked of a store, a CLI or a system by its verb (`consul kv get`, `firebase apps:list`,
    `az functionapp config appsettings list`, a tool's `accounts class=19 list`)."""
    if a.shell:
        words = nz.command_tokens(a.arg)[1:6]
    elif a.web or a.is_read:
        return False
    else:
        words = a.arg.split()[:6]
    return any(part in STORE_VERBS for w in words for part in w.lower().split(":"))


def _answers(found: Action, missed: Action) -> bool:
    """A search that found nothing, answered by what the agent read next: most of its words, two at least, are in
    that text ("erlang node name distribution" ~ a file setting `RELEASE_NODE` "node name for the release",
    `RELEASE_DISTRIBUTION`), though the file's name shares none of them."""
    if not missed.is_search:
        return False
    sought = _term_words(_search_term(missed))
    if len(sought) < 2:
        return False
    have = _term_words(found.output[:4000])
    stems = {nz.stem(w) for w in have}
    hits = {w for w in sought if w in have or nz.stem(w) in stems}
    return len(hits) >= 2 and 2 * len(hits) >= len(sought)


def _related(missed: str, found: str) -> bool:
    """A wrong place and the right one name the same thing (`logging/logging.go` ~ `logging/logger.go`, `refund
    policy` ~ `docs/billing/refund-policy.md`): a look that found nothing and an unrelated file read next are not
    one search."""
    a, b = _term_words(missed), _term_words(found)
    if a & b:
        return True
    stems = {nz.stem(w) for w in a}
    return bool(stems & {nz.stem(w) for w in b})


def _guesses(actions: list[Action]) -> list[dict]:
    """Reads of paths that do not exist: each path is a one-off, the habit of guessing paths is what may recur."""
    out = []
    for a in actions:
        if not (a.is_read and _missed(a)) or a.web:
            continue
        target = _target(a)
        out.append(
            make_finding(
                "guessed_path",
                f"guess:{a.name.lower()}",
                f"`{a.name}` of a path that does not exist (`{trim(target, 100)}`): the path was guessed.",
                evidence=[evidence(a.call_index, a.text, "agent"), _err_evidence(a)],
                confidence=0.4,
                tool=a.name,
                location=target,
            )
        )
    return out


def _where(a: Action, b: Action, hit: str, query: str, line: str, missed: list[Action]) -> dict:
    """A finding that `query` (what the agent looked for) is at `hit`, shown by look `a` and opening `b`."""
    tried = [m for m in missed if _target(m) and _target(m) != hit]
    wrong = trim(_target(tried[0]), 80) if tried else ""
    if a in missed and a.is_read:
        # Straight from a wrong path to the right one: the path is the lesson.
        summary = (
            f"`{hit}` is the place, not `{wrong or query}`: agents first tried `{trim(a.text, 100)}`, which does not "
            f"exist, before opening `{hit}`"
            # a listing or a store's answer says what was there; a file read is the place itself
            + (f" (found: {trim(line.strip(), 240)})" if line.strip() and not b.is_read else "")
            + ". Go straight there."
        )
    else:
        how = f"`{trim(a.text, 100)}`" + (" found nothing first" if a in missed else "")
        summary = (
            f"`{trim(query, 100)}` is in `{hit}`" + (f" (not `{wrong}`)" if wrong else "") + f": agents had to look "
            f"for it ({how}) before opening `{hit}`"
            + (f" (found: {trim(line.strip(), 240)})" if line.strip() else "")
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
        # What the wrong places and the right one both name (`src/flags` and `config/flags/registry.yaml`: flags):
        # the thing the agents kept looking for, whatever name each search used.
        topic=sorted(_shared_words([_target(m) for m in tried], hit)),
        tried=[trim(_target(m), 120) for m in tried[:3]],
        tool=a.name,
    )


def _shared_words(tried: list[str], hit: str) -> set[str]:
    found = {nz.stem(w) for w in _term_words(hit) if w not in LAYOUT_WORDS}
    return {nz.stem(w) for t in tried for w in _term_words(t) if w not in LAYOUT_WORDS} & found


# Folders every project has: sharing one says nothing about what was sought.
LAYOUT_WORDS = frozenset(
    {
        "src",
        "lib",
        "app",
        "apps",
        "pkg",
        "internal",
        "cmd",
        "docs",
        "doc",
        "test",
        "tests",
        "spec",
        "specs",
        "main",
        "index",
        "utils",
        "util",
        "common",
        "core",
    }
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
        whole = content.strip()
        if not whole:
            continue
        if has_secret(whole):
            clean = redact(whole)
            out.append(
                make_finding(
                    "secret",
                    "secret:"
                    + ",".join(secret_kinds(whole))
                    + "|"
                    + " ".join(sorted(nz.salient(clean.replace(REDACTED, " ")))),
                    f"An agent saved a credential in-band ({', '.join(secret_kinds(whole))}): {trim(clean, 160)}",
                    evidence=[evidence(idx, clean, "agent")],
                    confidence=0.9,
                )
            )
            continue
        for text in served.unserved(whole):
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
                    # A denial is another fact than the statement of the same words (aggregate.contradicts).
                    ("note:!" if nz.negated(text) else "note:") + " ".join(sorted(anc)) + "|" + " ".join(sorted(sal)),
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


# A person asking, once the agent has worked, for something more to be added (`can you add some tests for this?`,
# `please also write a changelog entry`, `let's document the flag`): when the same addition is asked for in session
# after session, the agents should make it part of the work. Only additions: a request to use or do something else
# instead is a correction (_corrections), and a negation marks one.
_REQUEST_LEAD = re.compile(
    r"(?i)^(?:(?:ok|okay|great|thanks|cool|nice|perfect|good|yes|now|also|and|then|so)[,.!]?\s+)*"
    r"(?:(?:can|could|would|will)\s+(?:you|we)\s+(?:please\s+)?(?:also\s+)?|please\s+(?:also\s+)?|"
    r"let'?s\s+(?:also\s+)?)?(?P<verb>add|write|create|include|document|cover)\s+(?P<rest>.+)$",
    re.S,
)
_REQUEST_NOT = re.compile(r"(?i)\b(?:not|no|never|instead|stop|don'?t|doesn'?t|didn'?t|rather|wrong)\b|n't\b")


def _wordset(text: str) -> frozenset:
    return frozenset(text.split())


_NP_DETERMINERS = _wordset("a an the some any more another each every new extra additional one two")
_NP_STOP = _wordset(
    "here there too also again now please first later then around under over through across inside "
    "within without per via between behind near up out for that which who to so in on with from into "
    "when where if because and or but as like than while about after before by at of"
)
_NP_PRONOUNS = _wordset(
    "it this that them these those me us you something anything everything all there here again too now "
    "sure so one ones"
)
# Where the request itself ends: a negation after it ("so we don't break it again") says why, not what instead.
_CLAUSE_END = re.compile(r"[,;:?!]|\.(?:\s|$)|\s(?:so|because|since|as)\s")
_QUANTIFIER = re.compile(r"(?i)^(?:at least|at most|a couple of|a few|one or two)\s+")


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


# Heads that name a piece of something else ("a changelog entry", "a line in the README"): what is asked for is that
# something, named by the word before the head or by where the piece goes.
_PIECE_HEADS = _wordset("entry line note item section paragraph row record mention bullet bit sentence word")
_DESTINATION = re.compile(r"(?i)^\s*(?:to|in|into|on)\s+(?:the|our|your|this|that)?\s*([A-Za-z][\w-]*)")


def _requested(text: str, before: str = "") -> tuple[str, str] | None:
    """(verb, the noun of what is asked for, singular) of a request for an addition, else None: the phrase's head
    noun, or, when the head is a piece of something ("a changelog entry", "a line to the CHANGELOG"), that
    something, named in the request or in what the person said before it ("You forgot the changelog: please add
    an entry.")."""
    if len(text) > 300 or _REQUEST_NOT.search(_CLAUSE_END.split(text, maxsplit=1)[0]):
        return None
    m = _REQUEST_LEAD.match(text.strip())
    if m is None:
        return None
    phrase: list[str] = []
    rest = _QUANTIFIER.sub("", m.group("rest"))
    after = ""
    for tok in re.finditer(r"[A-Za-z][\w'-]*|[^\w\s]", rest):
        low = tok.group(0).lower()
        # `a safety check looking at ...`: a participle after the noun ends the phrase (not `some logging`)
        if not low[0].isalpha() or low in _NP_STOP or (low.endswith("ing") and set(phrase) - _NP_DETERMINERS):
            after = rest[tok.start() :]
            break
        phrase.append(low)
        if len(phrase) > 5:
            return None
    if not phrase or (len(phrase) == 1 and phrase[0] in _NP_PRONOUNS):
        return None
    head = _singular(phrase[-1])
    if head in _PIECE_HEADS:
        where = _DESTINATION.match(after)
        words = [w for w in phrase[:-1] if w not in _NP_DETERMINERS]
        missing = [a or b for a, b in _MISSING.findall(before)]
        if where:
            head = _singular(where.group(1).lower())
        elif words:
            head = _singular(words[-1])
        elif missing:
            head = _singular(missing[-1].lower())
    if head in _NP_PRONOUNS or len(head) < 3:
        return None
    return m.group("verb").lower(), head


# Sentences, and clauses set apart by a dash ("you forgot the changelog - please add an entry").
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\s+[-–—]+\s+")
# What the person says is missing, before asking for a piece of it: "you forgot the changelog", "the README is
# missing", "no changelog".
_MISSING = re.compile(
    r"(?i)\b(?:forgot(?:ten)?|missed|left out|skipped|omitted|without|no)\s+(?:the|a|an|our|your|any)?\s*"
    r"([A-Za-z][\w-]{2,})|\b(?:the|a|an|our|your)\s+([A-Za-z][\w-]{2,})\s+(?:is|was)\s+missing"
)


def _asked_for(text: str) -> tuple[str, str] | None:
    """The first request for an addition among the message's clauses, each read with what came before it."""
    clauses = [c for c in _SENTENCE.split(text.strip()) if c] if len(text) <= 600 else []
    return next((a for i, c in enumerate(clauses) if (a := _requested(c, " ".join(clauses[:i])))), None)


def _requests(messages, findings: list[dict]) -> list[dict]:
    """A person's request for an addition after the agent has worked (not the session's opening task), in a message
    no other finding stands on: one finding per thing asked for in the session."""
    used = {e.get("event_index") for f in findings for e in f.get("evidence") or ()}
    out, seen = [], set()
    for idx, role, text, before in messages:
        if role != "user" or before == 0 or idx in used:
            continue
        # A request naming a secret is no lesson (its noun would be read lower-cased, past the secret's shape). The
        # request may come after other words ("Looks good. You forgot the changelog: please add an entry."): each
        # sentence is read, the first request counts.
        asked = None if has_secret(text) else _asked_for(text)
        if asked is None or asked in seen:
            continue
        seen.add(asked)
        verb, noun = asked
        out.append(
            make_finding(
                "request",
                f"request:{verb} {noun}",
                f"The person had to ask for it once the work was done: {verb} {plural(noun)}.",
                evidence=[evidence(idx, trim(text, 200), "user")],
                confidence=0.55,
                verb=verb,
                noun=noun,
            )
        )
    return out


# At most this many findings of one kind from one session, the first ones in the session. The real transcripts give
# at most 18 (615 events); a session a pattern counts once, so the rest add nothing to any prevalence, and a pushed
# session of 5,000 corrections made 15,000 texts to scan for secrets and as many evidence rows. Injections and secrets
# are kept whole: each marks what must never become evidence.
MAX_FINDINGS_PER_KIND = 200
_UNCAPPED = frozenset({"injection", "secret"})


def _capped(findings: list[dict]) -> list[dict]:
    seen: dict[str, int] = {}
    out = []
    for f in findings:
        n = seen[f["kind"]] = seen.get(f["kind"], 0) + 1
        if n <= MAX_FINDINGS_PER_KIND or f["kind"] in _UNCAPPED:
            out.append(f)
    return out


def analyze(doc: dict, served=()) -> AnalysisResult:
    """Findings of one canonical session document (contracts/session.schema.json)."""
    events = doc.get("events") or []
    actions, messages, notes = _parse(events, nz.localizer(doc.get("metadata")))
    srv = _Served(served)
    used: set[tuple[int, int]] = set()
    findings = _corrections(actions, messages, srv, used)
    checks, handled = _diagnostics(actions, used)
    findings += checks
    exceptions = {before for _, role, content, before in messages if role == "user" and ONE_OFF.search(content)}
    findings += _fixes(actions, srv, used, skip=handled, exceptions=exceptions)
    consumed = {p for pair in used for p in pair}
    findings += _lookups(actions, srv, consumed)
    findings += _guesses(actions)
    findings += _notes(notes, actions, srv)
    findings += _injections(actions)
    findings += _requests(messages, findings)
    findings, recurred = _capped(findings), _capped(srv.recurred)
    # Nothing that looks like a secret leaves the analyzer, whatever signal it rode in on. A finding's old and new
    # texts and its excerpts are mostly the same texts again (half of the scans): each is scanned once.
    with scan_memo():
        for f in [*findings, *recurred]:
            if f["kind"] == "secret":
                continue
            f["summary"] = redact(f["summary"])
            for k in ("old", "new", "error", "query", "location"):
                if isinstance(f.get(k), str):
                    f[k] = redact(f[k])
            for e in f["evidence"]:
                e["excerpt"] = redact(e["excerpt"])
    return AnalysisResult(findings=findings, served_findings=recurred)
