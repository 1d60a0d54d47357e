"""Blind probe: does a `rules` dream over the real entire-cli sessions propose the lessons that really recur there,
with honest prevalence and verbatim evidence, and nothing else?

The expectations come from reading the transcripts (../shared/real/transcripts/entire-cli), not from the product's
code. The ground truth of each lesson is computed here, independently, from the raw Claude Code files:

* `mise run lint` (golangci-lint) failing on the same rule in several sessions, then passing again:
  nilerr (0bb9a2d9, 21a2e002, b00b80af, e7eb742c, efea9d52), errcheck (21a2e002, 44df7d08, dc577197, e7eb742c),
  gocritic (21a2e002, 44df7d08, b9bdbf44, e7eb742c), revive (21a2e002, 44df7d08, b9bdbf44, efea9d52),
  ireturn (21a2e002, b2273d7d, b9bdbf44), wrapcheck (21a2e002, 569aed7b, e7eb742c);
* `Edit` refused with "Found 2 matches of the string to replace" and retried with a longer `old_string`
  (0442a060, 0822e04b, 3a782158, 569aed7b, b9bdbf44);
* `Edit` refused with "File has not been read yet", fixed by a `Read` first (19abe528, 21a2e002, 880d23f9);
* `Read` of guessed paths that do not exist (0822e04b, 21a2e002, 847ff7d2, 97007e37, b50aaf5c, deeac353, e7eb742c);
* the person asking for tests once the work was done (19abe528, 4e836284, 569aed7b, cacf6cfb, d1423492, dc577197);
* two-session patterns, below the dream's 3-session bar but to be kept on record as one pattern: a `Task`
  subagent type that must be the plugin-qualified name (559081d6: code-simplifier -> code-simplifier:code-simplifier;
  9ff9c26d: repo-research-analyst & co -> entire-engineering:research:...).

One-offs that must not become memory: the MIT licence holder "Entire Inc." (cf564e14), the goreleaser notarize retry
(488c5296, c93f3533), "no, I did not say commit anything" (0442a060), telemetry on by default (0822e04b, 9ff9c26d),
true/false instead of on/off (cab865ac), the Entire-Checkpoint trailer (3a782158), a rebase with conflicts
(44df7d08), the test-harness/.entire gitignore detour (f6833005), the steps_count rename (21a2e002), a pasted API
key (4e836284), denied Bash permissions (b50aaf5c), failing integration tests of work in progress, code that does
not compile yet (typecheck / undefined), and the gemini-cli smoke tests.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from .scoping import all_teams, no_scope

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "real" / "transcripts"
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts")
ENTIRE = REAL / "entire-cli"

# django_db: so that pytest-django sets up the test database that the module's fixture fills (each test itself only
# reads what the fixture collected).
pytestmark = [
    pytest.mark.skipif(not ENTIRE.exists(), reason="shared real transcripts not available"),
    pytest.mark.django_db,
]

MIN_SESSIONS = 3  # the dream's documented bar for "recurring" (docs/dream-pipeline.md: min_sessions=3)


# ---------------------------------------------------------------------------------------------------------------
# Ground truth from the raw files (independent of the product)


def _objects(path: Path):
    """Every JSON object of a Claude Code file, tolerating two objects on one line (FORMATS.md caveat)."""
    dec = json.JSONDecoder()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        i = 0
        while i < len(line):
            try:
                obj, j = dec.raw_decode(line, i)
            except ValueError:
                break
            yield obj
            i = j
            while i < len(line) and line[i].isspace():
                i += 1


def _text(content) -> str:
    if isinstance(content, list):
        return "\n".join(x.get("text", "") for x in content if isinstance(x, dict))
    return str(content or "")


def _strings(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


LINT_DIAG = re.compile(r"^\S+\.go:\d+:\d+: .*\((\w+)\)$", re.M)
ADD_TESTS = re.compile(r"\badd\b[^.?!\n]{0,30}\btests?\b", re.I)


def _truth(files: list[Path]) -> dict[str, set[str]]:
    """lesson -> session ids, from what the transcripts show."""
    truth: dict[str, set[str]] = defaultdict(set)
    for path in files:
        if path.parent.name != "claude-code":
            continue
        sid = path.stem
        tools: dict[str, tuple[str, dict]] = {}
        for obj in _objects(path):
            msg = obj.get("message") or {}
            content = msg.get("content")
            if obj.get("type") == "assistant":
                for b in content or []:
                    if isinstance(b, dict) and b.get("type") == "tool_use":
                        tools[b["id"]] = (b["name"], b.get("input") or {})
            if obj.get("type") != "user":
                continue
            if isinstance(content, str):
                if not obj.get("isCompactSummary") and not obj.get("isSidechain") and ADD_TESTS.search(content):
                    truth["tests"].add(sid)
                continue
            for b in content or []:
                if not isinstance(b, dict) or b.get("type") != "tool_result":
                    continue
                name, inp = tools.get(b.get("tool_use_id"), ("?", {}))
                t = _text(b.get("content"))
                if name == "Bash" and "lint" in str(inp.get("command", "")):
                    for rule in set(LINT_DIAG.findall(t)):
                        truth["lint:" + rule].add(sid)
                if b.get("is_error"):
                    if re.search(r"Found \d+ matches of the string to replace", t):
                        truth["edit-multi"].add(sid)
                    if "File has not been read yet" in t:
                        truth["edit-notread"].add(sid)
                    if name == "Read" and "File does not exist" in t:
                        truth["read-missing"].add(sid)
                    if name == "Task" and re.search(r"Agent type '[^']+' not found", t):
                        truth["agent-type"].add(sid)
    return truth


def _corpus(path: Path) -> tuple[str, str]:
    """(all strings of the file joined, as the project would show them with paths localised), the session's cwd."""
    strings: list[str] = []
    cwd = ""
    if path.parent.name == "gemini-cli":
        _strings(json.loads(path.read_text(encoding="utf-8")), strings)
    else:
        for obj in _objects(path):
            cwd = cwd or obj.get("cwd") or ""
            _strings(obj, strings)
            msg = obj.get("message") or {}
            for b in msg.get("content") or [] if isinstance(msg.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    strings.append(json.dumps(b.get("input"), ensure_ascii=False))
    raw = "\n".join(strings)
    local = raw.replace(cwd + "/", "") if cwd else raw
    local = re.sub(r"/(?:Users|home)/[^/\s'\"`]+", "~", local)
    return raw + "\n" + local, cwd


# ---------------------------------------------------------------------------------------------------------------
# Running the product through its contract (contracts/README.md)


def _cmd(*args) -> str:
    out, err = io.StringIO(), io.StringIO()
    with no_scope():
        try:
            call_command(*args, stdout=out, stderr=err)
        except SystemExit as exc:  # import_sessions exits 1 when a line is rejected
            assert not exc.code, err.getvalue()
    return out.getvalue()


def _team(slug: str, tmp: Path, *dirs: Path) -> None:
    _cmd("create_team", slug)
    mem = tmp / f"{slug}-memory.json"
    mem.write_text(json.dumps({"store": "mem", "entries": []}))
    _cmd("import_memory", str(mem), "--team", slug, "--store", "mem")
    for d in dirs:
        _cmd("import_sessions", str(d), "--team", slug, "--format", "auto")


def _dream(slug: str, *extra: str) -> dict:
    return json.loads(_cmd("dream", "--team", slug, "--store", "mem", "--format", "json", *extra))


def _evidence(doc: dict) -> dict:
    from reviews.models import ProposalEvidence

    ids = [p["id"] for p in doc["proposals"] if p.get("id") is not None]
    ev: dict = defaultdict(list)
    with all_teams():
        for e in ProposalEvidence.objects.filter(proposal_id__in=ids).select_related("session"):
            ev[e.proposal_id].append((e.session.external_id, e.event_index, e.excerpt))
    return dict(ev)


def _copy_under_new_ids(src: Path, dst: Path) -> dict[str, str]:
    """The same transcripts under other session ids (only the id changes). Returns new id -> original id."""
    back = {}
    for path in sorted(src.rglob("*.jsonl")):
        sid = path.stem
        new = str(uuid.uuid5(uuid.NAMESPACE_URL, "probe6-copy:" + sid))
        target = dst / path.parent.name / f"{new}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8").replace(sid, new), encoding="utf-8")
        back[new] = sid
    return back


ALL_FILES = sorted(ENTIRE.rglob("*.jsonl")) if ENTIRE.exists() else []
HALF_FILES = ALL_FILES[::2]


@pytest.fixture(scope="module")
def real(django_db_setup, django_db_blocker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-lessons")
    res: dict = {}
    with django_db_blocker.unblock():
        assert connection.settings_dict["NAME"].startswith("test"), "refusing to write outside the test database"
        # the whole folder: a stored run (its evidence is read back), then the cycle again
        _team("rl-full", tmp, ENTIRE)
        res["full"] = _dream("rl-full")
        res["evidence"] = _evidence(res["full"])
        from reviews.models import Proposal

        with all_teams():
            res["count_before"] = Proposal.objects.filter(store__team__slug="rl-full").count()
        res["rerun"] = _dream("rl-full")
        res["rerun_all"] = _dream("rl-full", "--all-sessions")
        with all_teams():
            res["count_after"] = Proposal.objects.filter(store__team__slug="rl-full").count()

        # the same sessions imported a second time under other ids
        dup = tmp / "dup"
        res["dup_back"] = _copy_under_new_ids(ENTIRE, dup)
        _team("rl-dup", tmp, ENTIRE, dup)
        res["dup"] = _dream("rl-dup", "--dry-run")

        # half of the sessions
        half = tmp / "half"
        for path in HALF_FILES:
            (half / path.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, half / path.parent.name / path.name)
        _team("rl-half", tmp, half)
        res["half"] = _dream("rl-half", "--dry-run")

        # the single real files of other projects: each folder alone and both together
        _team("rl-cc", tmp, REAL / "claude-code")
        res["cc"] = _dream("rl-cc", "--dry-run")
        _team("rl-cx", tmp, REAL / "codex")
        res["cx"] = _dream("rl-cx", "--dry-run")
        _team("rl-both", tmp, REAL / "claude-code", REAL / "codex")
        res["both"] = _dream("rl-both", "--dry-run")
    res["truth"] = _truth(ALL_FILES)
    res["half_truth"] = _truth(HALF_FILES)
    yield res
    # Written outside any test's transaction: emptied as a transactional test's tables are, so that no later test
    # of the run finds these teams' rows.
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False)


# ---------------------------------------------------------------------------------------------------------------
# Lessons: how a proposal is recognised (key terms of the lesson, not the product's wording)


def _lint(rule):
    return lambda t: f"({rule})" in t and "lint" in t


LESSONS = {
    "lint:nilerr": _lint("nilerr"),
    "lint:errcheck": _lint("errcheck"),
    "lint:gocritic": _lint("gocritic"),
    "lint:revive": _lint("revive"),
    "lint:ireturn": _lint("ireturn"),
    "lint:wrapcheck": _lint("wrapcheck"),
    "edit-multi": lambda t: "Edit" in t and re.search(r"\d+ matches", t) and re.search(r"context|longer|unique", t),
    "edit-notread": lambda t: "Edit" in t and "not been read" in t and "Read" in t,
    "read-missing": lambda t: (
        "Read" in t and re.search(r"does not exist|not there|missing", t) and re.search(r"glob|search|look", t, re.I)
    ),
    "tests": lambda t: re.search(r"\badd(ing)? tests?\b|\btests?\b.{0,40}without being asked", t, re.I),
}


def _matching(doc: dict, lesson: str) -> list[dict]:
    match = LESSONS[lesson]
    return [p for p in doc["proposals"] if p.get("content") and match(p["content"])]


def _one(doc: dict, lesson: str) -> dict:
    found = _matching(doc, lesson)
    offered = [p.get("content", "")[:90] for p in doc["proposals"]]
    assert found, f"no proposal for the recurring lesson {lesson}: {offered}"
    assert len(found) == 1, f"{lesson} proposed {len(found)} times: {[p['content'][:90] for p in found]}"
    return found[0]


RECURRING = [k for k in LESSONS]


@pytest.mark.parametrize("lesson", RECURRING)
def test_full_folder_proposes_each_recurring_lesson_with_the_right_sessions(real, lesson):
    truth = real["truth"][lesson]
    assert len(truth) >= MIN_SESSIONS  # the premise: it recurs in the data
    p = _one(real["full"], lesson)
    got = set(p["supporting_sessions"])
    assert got <= truth, f"{lesson}: sessions that do not show it: {sorted(got - truth)}"
    assert len(got) >= len(truth) - 1, f"{lesson}: found {sorted(got)} of {sorted(truth)}"
    assert p["prevalence"]["sessions"] == len(got)
    assert f"{len(got)} of {p['prevalence']['of']}" in p["rationale"]
    # 43 Claude Code sessions (+2 Gemini CLI): an agent-scoped lesson counts among that agent's sessions
    assert p["prevalence"]["of"] == (43 if (p.get("scope") or {}).get("agent") == "claude-code" else 45)
    assert p["prevalence"]["sources"] == 1  # one import run delivered them all
    ev = real["evidence"][p["id"]]
    assert {s for s, _, _ in ev} == got, "every supporting session shows an excerpt, and only those"


@pytest.mark.parametrize("lesson", ["lint:nilerr", "lint:errcheck", "lint:ireturn"])
def test_recurring_lint_lessons_reach_the_reviewers(real, lesson):
    """A `//nolint:rule` comment in the fix is Go syntax, not a host: the lesson must not be quarantined."""
    p = _one(real["full"], lesson)
    assert p["status"] != "quarantined", (p["status"], p["risk_reasons"])
    assert not any("host" in r.lower() for r in p["risk_reasons"]), p["risk_reasons"]


def _pieces(excerpt: str) -> list[str]:
    tools = r"(?:Read|Edit|MultiEdit|Write|Bash|Grep|Glob|Task|Skill|WebFetch|WebSearch|NotebookEdit)"
    text = re.sub(rf"^{tools} ", "", excerpt.strip())
    parts = re.split(r"…|\.\.\.|\[REDACTED[^\]]*\]|<redacted[^>]*>", text)
    return [x.strip() for x in parts if len(x.strip()) >= 6]


@pytest.mark.parametrize("lesson", RECURRING)
def test_excerpts_are_verbatim_text_of_their_sessions(real, lesson):
    """Allowed: paths localised as documented (cwd-relative, other homes as ~), trimming with an ellipsis, a tool
    call shown as its tool's name and argument. Not allowed: a line the transcript never printed."""
    files = {p.stem: p for p in ALL_FILES}
    p = _one(real["full"], lesson)
    evidence = real["evidence"][p["id"]]
    assert evidence
    corpora, bad = {}, []
    for sid, idx, excerpt in evidence:
        assert sid in p["supporting_sessions"]
        if sid not in corpora:
            corpora[sid] = _corpus(files[sid])[0]
        if any(piece not in corpora[sid] for piece in _pieces(excerpt)):
            bad.append((sid[:8], idx, excerpt[:110]))
    assert not bad, f"{len(bad)} excerpts are not text of their session: " + "\n".join(map(str, bad))


SECRET = [
    re.compile(r"sk-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\bphc_[A-Za-z0-9]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY"),
    re.compile(r"(?i)(api[_-]?key|token|password)\s*[:=]\s*['\"]?[A-Za-z0-9_\-]{12,}"),
]
HOME = re.compile(r"(?:/Users/|/home/|C:\\\\Users\\\\)[A-Za-z0-9_.-]+|\bsoph\b|gtrrz-victor")
NOISE = re.compile(
    r"Exit code \d|<tool_use_error>|\[lint\] ERROR|\[lint\] \$|hooks\.go:\d+|INFO user-prompt-submit|\x1b\[|Chunk ID:|"
    r"Wall time:|Process exited with code|\bdrwx|\btoolu_[A-Za-z0-9]|\bmsg_0[A-Za-z0-9]|<command-name>|"
    r"<local-command-stdout>|\bREDACTED\b|\b[0-9a-f]{40}\b"
)
ONE_OFFS = re.compile(
    r"MIT Licen|Entire Inc|notari[sz]|goreleaser|did not say commit|\bon/off\b|steps_count|test-harness|"
    r"telemetry|posthog|\brebase\b|Entire-Checkpoint|test-gemini|code-simplifier|Permission to use|"
    r"TestConcurrentSession|TestResume|runCleanWithBranches|\(typecheck\)|undefined: |not enough arguments",
    re.I,
)


def _texts(doc: dict) -> list[tuple[str, str]]:
    out = []
    for p in doc["proposals"]:
        out.append((p.get("content") or "", "content"))
        out.append((p.get("rationale") or "", "rationale"))
    return out


@pytest.mark.parametrize("run", ["full", "half", "dup", "cc", "cx", "both"])
def test_no_proposal_carries_a_secret_a_home_path_or_tool_noise(real, run):
    bad = []
    for text, where in _texts(real[run]):
        for rx in [*SECRET, HOME, NOISE]:
            m = rx.search(text)
            if m:
                bad.append((where, m.group(0), text[:120]))
    assert not bad, bad


@pytest.mark.parametrize("run", ["cc", "cx", "both"])
def test_single_files_records_hold_no_secret_or_home_path(real, run):
    """The isolated findings are printed too: the codex rollout's placeholder keys and home paths stay out."""
    blob = json.dumps(real[run].get("isolated", []), ensure_ascii=False)
    for rx in [*SECRET, HOME]:
        assert not rx.search(blob), rx.search(blob).group(0)


def test_one_offs_are_not_proposed(real):
    bad = [(m.group(0), t[:120]) for t, _ in _texts(real["full"]) if (m := ONE_OFFS.search(t))]
    assert not bad, bad
    # nothing beyond the recurring lessons found by reading the sessions
    known = [p for p in real["full"]["proposals"] if any(m(p.get("content") or "") for m in LESSONS.values())]
    assert len(known) == len(real["full"]["proposals"]), [
        p["content"][:100] for p in real["full"]["proposals"] if p not in known
    ]
    for p in real["full"]["proposals"]:
        assert p["prevalence"]["sessions"] >= MIN_SESSIONS
        assert len(set(p["supporting_sessions"])) == p["prevalence"]["sessions"]


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known gap: a failed Task call is keyed by the subagent name it asked for, so two sessions asking for two "
        "different unknown names (and one retry interrupted by the person) stay four isolated rows"
    ),
)
def test_two_session_subagent_type_lesson_is_kept_on_record_as_one_pattern(real):
    """Below the bar, so not proposed; but the two sessions' 'Agent type ... not found' (a plugin-qualified name
    was needed) are one pattern, so that it can count as recurring when it comes back."""
    truth = real["truth"]["agent-type"]
    assert len(truth) == 2
    rows = [r for r in real["full"].get("isolated", []) if re.search(r"Agent type .* not found", json.dumps(r))]
    assert rows, "the subagent-type failures are not even on record"
    assert any(set(r.get("supporting_sessions", [])) >= truth for r in rows), [
        (r.get("key", "")[:60], r.get("supporting_sessions")) for r in rows
    ]
    assert not any("Agent type" in t for t, _ in _texts(real["full"]))


def test_two_session_cwd_lint_rule_is_on_record_not_proposed(real):
    """forbidigo (`os.Getwd` breaks in subdirectories: use paths.RepoRoot()) failed the lint in 21a2e002 and
    deeac353: two sessions, so on record among the isolated findings, not proposed."""
    truth = real["truth"]["lint:forbidigo"]
    assert len(truth) == 2
    rows = [r for r in real["full"].get("isolated", []) if "forbidigo" in json.dumps(r)]
    assert any(set(r.get("supporting_sessions", [])) == truth for r in rows), rows
    assert not any("forbidigo" in t for t, _ in _texts(real["full"]))


def test_rerunning_the_cycle_proposes_nothing_new(real):
    rerun = real["rerun"]
    assert rerun["run"]["sessions_selected"] == 0 and rerun["proposals"] == []
    first = {p["id"] for p in real["full"]["proposals"]}
    again = real["rerun_all"]
    assert again["run"]["sessions_analysed"] == 45
    assert {p["id"] for p in again["proposals"]} <= first
    assert real["count_after"] == real["count_before"]


def _dup_original(real, sid: str) -> str:
    return real["dup_back"].get(sid, sid)


@pytest.mark.parametrize("lesson", ["lint:nilerr", "edit-multi", "read-missing", "tests"])
def test_same_sessions_imported_again_under_other_ids_do_not_double_prevalence(real, lesson):
    p = _one(real["dup"], lesson)
    truth = real["truth"][lesson]
    originals = {_dup_original(real, s) for s in p["supporting_sessions"]}
    assert originals <= truth
    assert p["prevalence"]["sessions"] <= len(truth), (
        f"{lesson}: {p['prevalence']} although only {len(truth)} distinct transcripts show it"
    )


def test_same_sessions_imported_again_add_no_lesson_of_fewer_than_three_transcripts(real):
    thin = []
    for p in real["dup"]["proposals"]:
        originals = {_dup_original(real, s) for s in p["supporting_sessions"]}
        if len(originals) < MIN_SESSIONS:
            thin.append((len(originals), p["prevalence"]["sessions"], (p.get("content") or "")[:90]))
    assert not thin, f"{len(thin)} proposals rest on fewer than {MIN_SESSIONS} distinct transcripts: {thin[:6]}"


def test_same_sessions_imported_again_are_not_made_low_risk(real):
    """A second import of the same transcripts is no independent confirmation: nothing may become auto-applicable."""
    before = {p["content"]: p["risk"] for p in real["full"]["proposals"]}
    lowered = [
        (p["risk"], p["prevalence"].get("sources"), p["content"][:80])
        for p in real["dup"]["proposals"]
        if p["risk"] == "low" and before.get(p["content"], "medium") != "low"
    ]
    assert not lowered, lowered[:5]


@pytest.mark.parametrize("lesson", RECURRING)
def test_half_of_the_sessions_still_yields_the_lessons_recurring_within_it(real, lesson):
    half_ids = {p.stem for p in HALF_FILES}
    truth = real["half_truth"].get(lesson, set())
    found = _matching(real["half"], lesson)
    for p in found:
        assert set(p["supporting_sessions"]) <= half_ids
        assert set(p["supporting_sessions"]) <= truth
    if len(truth) >= MIN_SESSIONS:
        assert len(found) == 1, f"{lesson} recurs in {sorted(truth)} of the half but is proposed {len(found)} times"
        got = set(found[0]["supporting_sessions"])
        assert len(got) >= len(truth) - 1 and found[0]["prevalence"]["sessions"] == len(got)
        assert found[0]["prevalence"]["of"] in (len(half_ids), len(half_ids) - 1, len(half_ids) - 2)
    else:
        assert not found, f"{lesson} is in only {sorted(truth)} of the half, yet proposed"


def test_half_yields_enough_lessons(real):
    recurring = [k for k in LESSONS if len(real["half_truth"].get(k, ())) >= MIN_SESSIONS]
    assert len(recurring) >= 3  # the premise of the subset round
    assert real["half"]["run"]["sessions_analysed"] == len(HALF_FILES)


@pytest.mark.parametrize("run", ["cc", "cx", "both"])
def test_single_real_files_propose_no_lesson_without_three_independent_sessions(real, run):
    """Six Claude Code files (13 sessions with their subagents) and two Codex rollouts of unrelated projects:
    a parent and its own subagents are not independent confirmations of anything."""
    doc = real[run]
    assert doc["run"]["sessions_failed"] == 0
    n = {"cc": None, "cx": 2, "both": None}[run]
    if n is not None:
        assert doc["run"]["sessions_analysed"] == n
    assert doc["run"]["sessions_analysed"] >= {"cc": 6, "cx": 2, "both": 8}[run]
    for p in doc["proposals"]:
        roots = {s.split("-agent-")[0][:8] for s in p["supporting_sessions"]}
        assert len(roots) >= MIN_SESSIONS, (p["supporting_sessions"], p.get("content", "")[:100])


def test_both_single_folders_together_analyse_the_sum(real):
    assert real["both"]["run"]["sessions_analysed"] == (
        real["cc"]["run"]["sessions_analysed"] + real["cx"]["run"]["sessions_analysed"]
    )
