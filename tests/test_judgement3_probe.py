"""Blind probe of the dream's judgement (third round): new families of signal planted in 3-5 sessions from 2+ sources,
worded differently each time (other phrasings, another language, other shell tools and operands), among noise and
distractors that must stay quiet. Written from the docs only (docs/dream-pipeline.md, docs/design.md,
../shared/DESIGN.md, contracts/); a failing test is a finding about the dream's judgement.

Families:
  env-   an environment variable needed before the test runner (DJANGO_SETTINGS_MODULE), four shell tools
  wd-    a working directory: npm commands only work inside web/ (cd web && / --prefix web)
  chg-   the person asking at the end for the step the agent forgot (a changelog entry)
  utc-   a project convention stated in prose (timestamps in UTC), in English and French
  fmt-   an entry contradicted by the person's corrections now (black -> ruff format): update it, no add beside
  one-   one credential pushing the same lesson five times as three agents: one source, never applied by a policy
  ios-   a lesson only one agent meets, over two tasks: scoped to that agent, k of that agent's sessions
distractors (must stay quiet): "just this once" make test-unit, a person's question (uv), the agent's own detour
(npm cache clean) that fixed nothing, a token in the commands (never in any proposal), plain noise.

Written blind by a helper (stop 24); 8 of its 15 tests failed on the code it probed. Fixed as families
(tests/test_judgement_exceptions.py, tests/test_normalize_families.py): a token in a command made the lesson low
risk once redacted (and the redaction ate the variable's name); a one-off ("just this once") between a failure and its
replacement was a lesson; a step after which the same call still failed was "the fix"; `export A=1 && cmd` was
another command than `A=1 cmd`. Then (stop 24 too): an extra flag split a corrected command; a request after other
words, or for a piece of something ("a line to the CHANGELOG"), was not read. Left, marked as known gaps: `npm
--prefix`, a convention in prose.
"""

from __future__ import annotations

import random
import re
from types import SimpleNamespace

import pytest

from reviews import dreams
from reviews.models import AutonomyPolicy, PolicyMode, Proposal, ProposalEvidence, ProposalStatus, RunStatus

from .dream_sessions import ingest
from .factories import StoreFactory, TeamFactory, make_entry
from .scoping import no_scope

pytestmark = pytest.mark.all_teams

KEY_A, KEY_B, KEY_C, KEY_ONE = "key:anna", "key:bruno", "key:chidi", "key:lonely"
TOKEN = "ghp_Q8vX2mK9pW4xLz7RtY3nB6cD1fG5hJ0sA2eU"


def doc(external_id, events, *, agent, task, minute, home="/home/ana/shop"):
    return {
        "external_id": external_id,
        "agent": agent,
        "task": task,
        "started_at": f"2025-06-{1 + minute // 60:02d}T10:{minute % 60:02d}:00Z",
        "outcome": "success",
        "metadata": {"cwd": home},
        "events": events,
    }


def call(cid, command, tool="bash"):
    key = "cmd" if tool == "exec_command" else "command"
    return {"type": "tool_call", "id": cid, "name": tool, "arguments": {key: command}}


def result(cid, content, code=0):
    r = {"type": "tool_result", "call_id": cid, "content": content, "exit_code": code}
    if code:
        r["is_error"] = True
    return r


def edit(cid, path, old, new, tool="Edit"):
    return {
        "type": "tool_call",
        "id": cid,
        "name": tool,
        "arguments": {"file_path": path, "old_string": old, "new_string": new},
    }


def user(text):
    return {"type": "message", "role": "user", "content": text}


def assistant(text):
    return {"type": "message", "role": "assistant", "content": text}


SHELLS = ["Bash", "bash", "shell", "exec_command"]


# ---------------------------------------------------------------- family env-: a needed environment variable
DJANGO_ERR = (
    "django.core.exceptions.ImproperlyConfigured: Requested setting {setting}, but settings are not configured. "
    "You must either define the environment variable DJANGO_SETTINGS_MODULE or call settings.configure() before "
    "accessing settings."
)


def env_export(i):
    """env-4: the same lesson, spelt with export (a Codex session)."""
    return [
        user("Run the view tests."),
        call("e4", "pytest tests/test_views.py", "exec_command"),
        result("e4", f"ImportError while loading conftest.\n{DJANGO_ERR.format(setting='ROOT_URLCONF')}", 4),
        call("f4", "export DJANGO_SETTINGS_MODULE=shop.settings.test && pytest tests/test_views.py", "exec_command"),
        result("f4", "9 passed in 0.9s"),
        assistant("Views pass."),
    ]


def env_var(i):
    tool = SHELLS[i]
    target, setting = [
        ("tests/test_api.py -q", "DATABASES"),
        ("tests/orders/test_refunds.py -x", "INSTALLED_APPS"),
        ("-k checkout", "DEBUG"),
        ("tests/test_models.py", "USE_TZ"),
    ][i]
    ask = [
        "Run the API tests.",
        "Check the refund tests still pass.",
        "Can you run the checkout tests?",
        "Lance les tests des modèles s'il te plaît.",
    ][i]
    fixed = [
        f"DJANGO_SETTINGS_MODULE=shop.settings.test pytest {target}",
        f"DJANGO_SETTINGS_MODULE=shop.settings.test pytest {target}",
        f"DJANGO_SETTINGS_MODULE=shop.settings.test pytest {target}",
        f"DJANGO_SETTINGS_MODULE=shop.settings.test pytest {target}",
    ][i]
    passed = f"{[12, 7, 3, 21][i]} passed in {[1.2, 0.8, 0.4, 2.6][i]}s"
    return [
        user(ask),
        call(f"e{i}", f"pytest {target}", tool),
        result(f"e{i}", f"ImportError while loading conftest.\n{DJANGO_ERR.format(setting=setting)}", 4),
        assistant("The settings module is not set; setting it for the run."),
        call(f"f{i}", fixed, tool),
        result(f"f{i}", passed),
        assistant("All green."),
    ]


# ---------------------------------------------------------------- family wd-: a working directory
def npm_enoent(home):
    return (
        "npm ERR! code ENOENT\nnpm ERR! syscall open\n"
        f"npm ERR! path {home}/package.json\nnpm ERR! errno -2\n"
        f"npm ERR! enoent Could not read package.json: Error: ENOENT: no such file or directory, open "
        f"'{home}/package.json'"
    )


WD_HOMES = ["/home/ana/shop", "/home/bo/src/shop", "/Users/chidi/work/shop", "/home/dev/shop"]


def workdir(i):
    home = WD_HOMES[i]
    tool = ["bash", "Bash", "exec_command", "shell"][i]
    script = ["test", "test", "test -- --watch=false", "test"][i]
    out = ["Tests: 42 passed, 42 total", "Tests: 42 passed, 42 total", "Tests: 40 passed, 40 total", "PASS 44"][i]
    return [
        user(["Run the frontend tests.", "Are the web tests green?", "Frontend tests please.", "Test the UI code."][i]),
        call(f"w{i}", f"npm {script}", tool),
        result(f"w{i}", npm_enoent(home), 254),
        call(f"v{i}", f"cd web && npm {script}", tool),
        result(f"v{i}", out),
        assistant("Frontend tests pass."),
    ]


def workdir_prefix(i):
    """wd-4: the same lesson, spelt with npm --prefix web."""
    home = "/home/eve/shop"
    return [
        user("Run the web unit tests."),
        call("w4", "npm test", "exec_command"),
        result("w4", npm_enoent(home), 254),
        call("v4", "npm --prefix web test", "exec_command"),
        result("v4", "Tests: 42 passed, 42 total"),
        assistant("Web tests pass."),
    ]


# ---------------------------------------------------------------- family chg-: the step the person asks for at the end
CHG_WORDINGS = [
    "Looks good. You forgot the changelog though: please add a changelog entry for this.",
    "Nice. Now add an entry to the changelog too, we always do that.",
    "One more thing before we wrap up: add a line to the CHANGELOG for this fix.",
    "Bitte noch einen Eintrag im Changelog hinzufügen, das vergisst du jedes Mal.",
]


def changelog_request(i):
    path = ["src/cart.py", "src/payments/stripe.py", "src/search/index.py", "src/auth/session.py"][i]
    what = ["a rounding bug in the cart", "the retry on payment timeouts", "search ranking ties", "session expiry"][i]
    return [
        user(f"Fix {what}."),
        {"type": "tool_call", "id": f"r{i}", "name": "Read", "arguments": {"file_path": path}},
        result(f"r{i}", f"def handler_{i}():\n    return {i}\n"),
        edit(f"s{i}", path, f"return {i}", f"return {i} + 1"),
        result(f"s{i}", f"The file {path} has been updated."),
        call(f"t{i}", f"pytest -q tests/test_{i}.py", ["Bash", "bash", "Bash", "bash"][i]),
        result(f"t{i}", f"{5 + i} passed in 0.{i + 1}s"),
        assistant(f"Fixed {what}; tests pass."),
        user(CHG_WORDINGS[i]),
        edit(f"u{i}", "CHANGELOG.md", "## Unreleased\n", f"## Unreleased\n\n- Fixed {what}.\n"),
        result(f"u{i}", "The file CHANGELOG.md has been updated."),
        assistant("Added the changelog entry."),
    ]


# ---------------------------------------------------------------- family utc-: a convention in prose
UTC_WORDINGS = [
    "No local times please: in this project every timestamp is stored in UTC.",
    "Remember our convention, all datetimes are UTC, never the server's local time.",
    "Chez nous tous les horodatages sont en UTC, jamais en heure locale. Corrige ça.",
    "Please use UTC for timestamps; local time is never stored here, that's the project rule.",
]


def utc_convention(i):
    path = ["app/orders/models.py", "app/billing/invoice.py", "app/audit/log.py", "app/jobs/scheduler.py"][i]
    return [
        user(
            [
                "Record when an order ships.",
                "Stamp invoices with their issue time.",
                "Log audit times.",
                "Schedule the nightly job.",
            ][i]
        ),
        edit(f"a{i}", path, "pass", "created = datetime.now()", ["Edit", "Edit", "edit_file", "Edit"][i]),
        result(f"a{i}", f"The file {path} has been updated."),
        user(UTC_WORDINGS[i]),
        edit(
            f"b{i}",
            path,
            "created = datetime.now()",
            "created = datetime.now(timezone.utc)",
            ["Edit", "Edit", "edit_file", "Edit"][i],
        ),
        result(f"b{i}", f"The file {path} has been updated."),
        assistant("Switched to timezone-aware UTC."),
    ]


# ---------------------------------------------------------------- family fmt-: memory contradicted by corrections now
FMT_KEY = "python-formatter"
FMT_TEXT = "Format Python code with `black .` before committing."
FMT_WORDINGS = [
    "We dropped black last month, format with `ruff format .` now.",
    "Not black anymore please, the repo uses ruff format.",
    "Ya no usamos black; usa ruff format en su lugar.",
    "Stop running black; ruff format is our formatter now.",
]


def formatter(i):
    tool = ["bash", "Bash", "shell", "bash"][i]
    return [
        user(
            [
                "Tidy up the formatting.",
                "Format the code before the PR.",
                "Reformat the new module.",
                "Clean up formatting please.",
            ][i]
        ),
        call(f"k{i}", "black .", tool),
        result(f"k{i}", f"reformatted src/mod_{i}.py\nAll done! {i + 2} files reformatted."),
        user(FMT_WORDINGS[i]),
        call(f"l{i}", "ruff format .", tool),
        result(f"l{i}", f"{i + 2} files reformatted, {30 + i} files left unchanged"),
        assistant("Formatted with ruff."),
    ]


# ---------------------------------------------------------------- family one-: one credential, many sessions
def one_key(i):
    return [
        user(
            [
                "Start the dev server.",
                "Serve the app locally.",
                "Bring the app up.",
                "Run it locally.",
                "Start the server so I can click around.",
            ][i]
        ),
        call(f"o{i}", "make serve", ["bash", "Bash", "bash", "shell", "bash"][i]),
        result(f"o{i}", "make: *** No rule to make target 'serve'.  Stop.", 2),
        call(f"p{i}", "make run", ["bash", "Bash", "bash", "shell", "bash"][i]),
        result(f"p{i}", f"Watching for file changes with StatReloader\nStarting development server (pid {400 + i})"),
        assistant("Server is up."),
    ]


# ---------------------------------------------------------------- family ios-: one agent's lesson over two tasks
def ios_destination(i):
    """ios-0, ios-2, ios-3 run the same command; ios-1 adds an unrelated flag (-quiet) and meets the same lesson."""
    cmd = "xcodebuild test -scheme Shop -quiet" if i == 1 else "xcodebuild test -scheme Shop"
    tool = ["bash", "Bash", "bash", "shell"][i]
    return [
        user(["Run the UI tests.", "Check the snapshot tests.", "UI tests again please.", "Snapshot tests?"][i]),
        call(f"x{i}", cmd, tool),
        result(
            f"x{i}",
            "xcodebuild: error: Failed to build workspace Shop with scheme Shop.: Cannot test target "
            "\u201cShopUITests\u201d on \u201cAny iOS Device\u201d: Tests must be run on a concrete device",
            70,
        ),
        call(f"y{i}", f"{cmd} -destination 'platform=iOS Simulator,name=iPhone 15'", tool),
        result(f"y{i}", f"** TEST SUCCEEDED ** ({18 + i} tests)"),
        assistant("UI tests pass on the simulator."),
    ]


# ---------------------------------------------------------------- distractors
ONCE_WORDINGS = [
    "Just this once, run only the unit tests with `make test-unit`; the e2e box is down today. Not a habit!",
    "Only for today: `make test-unit` is enough, the browser farm is broken. Normally the full suite, always.",
    "Exceptionally, just run make test-unit this time. Tomorrow it's the full make test again.",
    "Skip the end-to-end part just for now, make test-unit will do. Don't make it a rule.",
]


def just_this_once(i):
    e2e = [
        "e2e: error: could not connect to the browser farm (selenium grid unreachable)",
        "e2e: Timed out waiting for the browser farm after 120s",
        "e2e: error: browser farm returned 503 Service Unavailable",
        "e2e: error: no browser session available",
    ][i]
    tool = ["bash", "Bash", "shell", "bash"][i]
    return [
        user(["Run the tests before we merge.", "Test it all.", "Full test run please.", "Run the test suite."][i]),
        call(f"g{i}", "make test", tool),
        result(f"g{i}", f"unit: {40 + i} passed\n{e2e}\nmake: *** [Makefile:12: test] Error 1", 2),
        user(ONCE_WORDINGS[i]),
        call(f"h{i}", "make test-unit", tool),
        result(f"h{i}", f"unit: {40 + i} passed"),
        assistant("Unit tests pass; e2e skipped for today as agreed."),
    ]


def question(i):
    return [
        user("Install the dependencies."),
        call(f"q{i}", "pip install -r requirements.txt", ["bash", "Bash", "shell"][i]),
        result(f"q{i}", f"Successfully installed {i + 20} packages"),
        user(
            [
                "Out of curiosity, wouldn't `uv pip install` be faster here?",
                "Why didn't you use uv instead of pip? Just asking.",
                "Is uv something we could use for this, or is pip fine?",
            ][i]
        ),
        assistant("uv would be faster, but the lockfile is pip-tools; pip is fine here."),
        user("OK, thanks."),
    ]


def own_detour(i):
    test = ["npm test -- cart", "npm test -- search", "npm test -- auth"][i]
    return [
        user("The unit tests fail, fix them."),
        call(f"m{i}", test, ["bash", "Bash", "bash"][i]),
        result(f"m{i}", f"FAIL src/{['cart', 'search', 'auth'][i]}.test.ts\n  expected {i + 1} received {i}", 1),
        assistant("Maybe a stale cache; clearing it might help."),
        call(f"n{i}", "npm cache clean --force", ["bash", "Bash", "bash"][i]),
        result(f"n{i}", "npm WARN using --force Recommended protections disabled."),
        call(f"c{i}", test, ["bash", "Bash", "bash"][i]),
        result(f"c{i}", f"FAIL src/{['cart', 'search', 'auth'][i]}.test.ts\n  expected {i + 1} received {i}", 1),
        edit(f"d{i}", f"src/{['cart', 'search', 'auth'][i]}.ts", f"return {i}", f"return {i + 1}"),
        result(f"d{i}", "The file has been updated."),
        call(f"z{i}", test, ["bash", "Bash", "bash"][i]),
        result(f"z{i}", "Tests: 9 passed, 9 total"),
        assistant("Fixed the off-by-one."),
    ]


def token_release(i):
    tag = ["v1.4.0", "v1.4.1", "v1.5.0"][i]
    return [
        user(f"Publish the {tag} release on GitHub."),
        call(f"i{i}", f"gh release create {tag} --generate-notes", ["bash", "Bash", "shell"][i]),
        result(
            f"i{i}",
            "gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable.",
            4,
        ),
        call(f"j{i}", f"GH_TOKEN={TOKEN} gh release create {tag} --generate-notes", ["bash", "Bash", "shell"][i]),
        result(f"j{i}", f"https://github.com/acme/shop/releases/tag/{tag}"),
        assistant("Released."),
    ]


def noise(i):
    rnd = random.Random(3000 + i)
    word = rnd.choice(["lint", "docs", "typo", "bump", "rename", "comment", "logging"])
    return [
        user(f"Fix the {word} issue number {rnd.randint(1, 9999)}."),
        call(f"x{i}", f"grep -rn {word}_{i} src", rnd.choice(SHELLS[:3])),
        result(f"x{i}", f"src/mod_{i}.py:{i + 3}: {word}_{i} = {i}"),
        {"type": "tool_call", "id": f"y{i}", "name": "Read", "arguments": {"file_path": f"src/mod_{i}.py"}},
        result(f"y{i}", f"{word}_{i} = {i}\n"),
        assistant("Fixed."),
    ]


# ---------------------------------------------------------------- the world and one cycle
GENERAL_AGENTS = ["coder-a", "coder-b", "ops-bot"]


def build_world():
    team = TeamFactory(slug="probe3")
    store = StoreFactory(team=team, slug="eng")
    make_entry(store, key=FMT_KEY, content=FMT_TEXT)
    make_entry(store, key="review-etiquette", content="Keep pull requests under 400 changed lines.")
    # Everything but high risk applies by itself, whatever the confidence: only the sources rule can hold a proposal.
    AutonomyPolicy.objects.create(team=team, store=store, mode=PolicyMode.AUTONOMOUS, min_confidence_auto=0)

    by_source = {KEY_A: [], KEY_B: [], KEY_C: [], KEY_ONE: []}
    minute = 0

    def add(source, ext, events, agent, task, **kw):
        nonlocal minute
        minute += 1
        by_source[source].append(doc(ext, events, agent=agent, task=task, minute=minute, **kw))

    for i in range(4):
        add([KEY_A, KEY_B, KEY_C, KEY_A][i], f"env-{i}", env_var(i), GENERAL_AGENTS[i % 3], ["tests", "orders"][i % 2])
        add(
            [KEY_B, KEY_C, KEY_A, KEY_B][i],
            f"wd-{i}",
            workdir(i),
            GENERAL_AGENTS[(i + 1) % 3],
            "frontend",
            home=WD_HOMES[i],
        )
        add([KEY_C, KEY_A, KEY_B, KEY_C][i], f"chg-{i}", changelog_request(i), GENERAL_AGENTS[(i + 2) % 3], "bugfix")
        add([KEY_A, KEY_B, KEY_A, KEY_C][i], f"utc-{i}", utc_convention(i), GENERAL_AGENTS[i % 3], "feature")
        add([KEY_B, KEY_A, KEY_C, KEY_A][i], f"fmt-{i}", formatter(i), GENERAL_AGENTS[(i + 1) % 3], "chore")
    add(KEY_B, "env-4", env_export(4), "ops-bot", "tests")
    add(KEY_A, "wd-4", workdir_prefix(4), "coder-b", "frontend", home="/home/eve/shop")
    for i in range(5):
        add(KEY_ONE, f"one-{i}", one_key(i), GENERAL_AGENTS[i % 3], ["dev", "demo"][i % 2])
    for i in range(4):
        ios_task = ["ui-tests", "snapshot", "ui-tests", "snapshot"][i]
        add([KEY_A, KEY_B, KEY_A, KEY_B][i], f"ios-{i}", ios_destination(i), "ios-bot", ios_task)
        add([KEY_C, KEY_A, KEY_B, KEY_A][i], f"once-{i}", just_this_once(i), GENERAL_AGENTS[i % 3], "bugfix")
    for i in range(3):
        add([KEY_B, KEY_C, KEY_A][i], f"ask-{i}", question(i), GENERAL_AGENTS[(i + 1) % 3], "setup")
        add([KEY_A, KEY_C, KEY_B][i], f"detour-{i}", own_detour(i), GENERAL_AGENTS[(i + 2) % 3], "bugfix")
        add([KEY_B, KEY_A, KEY_C][i], f"tok-{i}", token_release(i), GENERAL_AGENTS[i], "release")
    for i in range(2):  # the iOS agent does other work too
        add([KEY_B, KEY_C][i], f"ios-noise-{i}", noise(200 + i), "ios-bot", ["ui-tests", "snapshot"][i])
    for i in range(15):
        add(
            [KEY_A, KEY_B, KEY_C][i % 3],
            f"noise-{i}",
            noise(i),
            GENERAL_AGENTS[i % 3],
            ["bugfix", "feature", "chore"][i % 3],
        )

    for source, docs in by_source.items():
        ingest(team, docs, source=source)
    n = sum(len(d) for d in by_source.values())
    return SimpleNamespace(team=team, store=store, n=n)


@pytest.fixture
def dreamt(db, django_capture_on_commit_callbacks):
    world = build_world()
    with no_scope(), django_capture_on_commit_callbacks(execute=True):
        run = dreams.start_run(world.store)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.sessions_analysed == world.n == 61
    world.run = run
    world.proposals = list(Proposal.objects.filter(run=run))
    world.report = {p["id"]: p for p in dreams.report(run)["proposals"]}
    return world


def supporting(world, p):
    return sorted(world.report[p.pk]["supporting_sessions"])


def describe(world):
    return [
        (
            p.operation,
            p.kind,
            p.content,
            p.targets,
            p.scope_agent,
            p.scope_task,
            p.prevalence_sessions,
            p.prevalence_of,
            p.prevalence_sources,
            p.risk,
            p.status,
            supporting(world, p),
        )
        for p in world.proposals
    ]


def about(world, prefix):
    """Proposals supported by any session of a family (external ids are prefix + a number)."""
    return [p for p in world.proposals if any(re.fullmatch(rf"{prefix}\d+", s) for s in supporting(world, p))]


def unscoped(p):
    return p.scope_agent in (None, "") and p.scope_task in (None, "")


# ---------------------------------------------------------------- tests, one per family
def test_a_needed_environment_variable_found_through_four_shells_is_one_lesson(dreamt):
    found = about(dreamt, "env-")
    assert found, describe(dreamt)
    p = max(found, key=lambda p: p.prevalence_sessions)
    assert p.operation == "add" and not p.targets, describe(dreamt)
    assert "DJANGO_SETTINGS_MODULE" in p.content and "shop.settings.test" in p.content, p.content
    assert {f"env-{i}" for i in range(4)} <= set(supporting(dreamt, p)), describe(dreamt)
    assert p.prevalence_sources == 3 and p.prevalence_of == dreamt.n
    assert unscoped(p)  # three agents, two tasks


def test_the_environment_variable_spelt_with_export_is_the_same_lesson(dreamt):
    found = about(dreamt, "env-")
    assert len(found) == 1, describe(dreamt)
    assert supporting(dreamt, found[0]) == [f"env-{i}" for i in range(5)], describe(dreamt)
    assert (found[0].prevalence_sessions, found[0].prevalence_sources) == (5, 3)


def test_a_working_directory_learnt_by_different_people_is_one_lesson(dreamt):
    found = about(dreamt, "wd-")
    assert found, describe(dreamt)
    p = max(found, key=lambda p: p.prevalence_sessions)
    assert p.operation == "add", describe(dreamt)
    assert "cd web" in p.content or "prefix web" in p.content, p.content
    for home in ("ana/", "/bo/", "chidi", "eve", "/Users", "/home"):
        assert home not in p.content and home not in p.rationale, (p.content, p.rationale)
    assert {f"wd-{i}" for i in range(4)} <= set(supporting(dreamt, p)), describe(dreamt)
    assert p.prevalence_sources == 3 and p.prevalence_of == dreamt.n
    assert unscoped(p)


def test_the_working_directory_given_with_npm_prefix_is_the_same_lesson(dreamt):
    found = about(dreamt, "wd-")
    assert len(found) == 1, describe(dreamt)
    assert supporting(dreamt, found[0]) == [f"wd-{i}" for i in range(5)], describe(dreamt)


def test_the_step_the_person_keeps_asking_for_at_the_end_is_proposed(dreamt):
    found = about(dreamt, "chg-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add", describe(dreamt)
    assert "changelog" in p.content.lower(), p.content
    sessions = supporting(dreamt, p)
    assert len(sessions) >= 3 and set(sessions) <= {f"chg-{i}" for i in range(4)}, describe(dreamt)
    assert p.prevalence_sessions == len(sessions) and p.prevalence_sources >= 2
    assert unscoped(p) and p.prevalence_of == dreamt.n


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known gap: a convention stated in prose with no command before and after it gives no finding (an "
        "LLM analyzer's work)"
    ),
)
def test_a_convention_stated_in_prose_in_two_languages_is_one_lesson(dreamt):
    found = about(dreamt, "utc-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add", describe(dreamt)
    assert "utc" in p.content.lower(), p.content
    sessions = supporting(dreamt, p)
    assert len(sessions) >= 3 and set(sessions) <= {f"utc-{i}" for i in range(4)}, describe(dreamt)
    assert p.prevalence_sources >= 2 and unscoped(p) and p.prevalence_of == dreamt.n


def test_an_entry_the_people_now_contradict_is_updated_not_added_beside(dreamt):
    found = about(dreamt, "fmt-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "update" and p.targets == [FMT_KEY], describe(dreamt)
    assert "ruff format" in p.content, p.content
    sessions = supporting(dreamt, p)
    assert len(sessions) >= 3 and set(sessions) <= {f"fmt-{i}" for i in range(4)}, describe(dreamt)
    assert p.prevalence_sources >= 2 and p.prevalence_of == dreamt.n


def test_one_credential_repeating_a_lesson_as_many_agents_is_one_source_and_waits(dreamt):
    found = about(dreamt, "one-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "make run" in p.content, describe(dreamt)
    assert supporting(dreamt, p) == [f"one-{i}" for i in range(5)]
    assert p.prevalence_sessions == 5 and p.prevalence_sources == 1, describe(dreamt)
    assert p.risk != "low", (p.risk, p.risk_reasons)
    assert p.status == ProposalStatus.PENDING, p.status  # autonomous policy, min_sources 2: a person decides


def test_a_lesson_only_one_agent_meets_over_two_tasks_is_scoped_to_that_agent(dreamt):
    found = about(dreamt, "ios-")
    assert found, describe(dreamt)
    p = max(found, key=lambda p: p.prevalence_sessions)
    assert p.operation == "add" and "destination" in p.content, describe(dreamt)
    assert {"ios-0", "ios-2", "ios-3"} <= set(supporting(dreamt, p)), describe(dreamt)
    assert p.prevalence_sources == 2
    assert p.scope_agent == "ios-bot" and p.scope_task in (None, ""), describe(dreamt)  # two tasks
    assert p.prevalence_of == 6, p.prevalence_of  # the agent's 6 sessions, not all 61


def test_an_unrelated_extra_flag_does_not_split_the_lesson(dreamt):
    """ios-1 ran `xcodebuild test -scheme Shop -quiet` and needed the same -destination: the same lesson."""
    found = about(dreamt, "ios-")
    assert len(found) == 1, describe(dreamt)
    assert supporting(dreamt, found[0]) == [f"ios-{i}" for i in range(4)], describe(dreamt)
    assert found[0].prevalence_sessions == 4


def test_a_token_in_the_commands_never_reaches_a_proposal(dreamt):
    leaks = []
    for p in Proposal.objects.filter(store=dreamt.store):
        for field in ("content", "rationale", "key_hint", "write_key", "signature"):
            if TOKEN[4:20].lower() in (getattr(p, field) or "").lower():
                leaks.append((p.pk, field))
        if ("gh release" in p.content or "GH_TOKEN" in p.content) and p.risk != "high":
            leaks.append((p.pk, "risk", p.risk, p.content))
    for ev in ProposalEvidence.objects.filter(proposal__store=dreamt.store):
        if TOKEN[4:20] in ev.excerpt or TOKEN[4:20] in repr(ev.context):
            leaks.append(("evidence", ev.pk))
    if TOKEN[4:20] in repr(dreams.report(dreamt.run)):
        leaks.append("report")
    assert not leaks, leaks


def loud(world, prefix, words):
    hits = [d for d in describe(world) if any(re.fullmatch(rf"{prefix}\d+", s) for s in d[-1])]
    hits += [d for d in describe(world) if any(w in f" {d[2].lower()} " for w in words)]
    return hits


def test_a_one_time_exception_worded_as_permission_is_not_a_rule(dreamt):
    assert not loud(dreamt, "once-", ("test-unit",)), describe(dreamt)


def test_a_persons_question_is_not_an_instruction(dreamt):
    assert not loud(dreamt, "ask-", (" uv ", "uv pip")), describe(dreamt)


def test_the_agents_own_detour_that_fixed_nothing_is_not_a_lesson(dreamt):
    """`npm cache clean` was followed by the same failure; a code edit made the tests pass."""
    assert not loud(dreamt, "detour-", ("cache clean",)), describe(dreamt)


def test_noise_stays_quiet(dreamt):
    assert not loud(dreamt, "noise-", ("pip install",)), describe(dreamt)
    assert not loud(dreamt, "ios-noise-", ()), describe(dreamt)
