"""A lesson is what sessions share, not the operands one session named (reviews.analysis.rules and aggregate):
- a command corrected in one value (a port, a size) is a corrected command, not "a retry with another command", and
  the entry that states the old value is updated in its prose too;
- one step behind different failures (a migration before tests, fixtures and a seed script) is one lesson;
- a correction in the user's prose is one lesson whatever branch or file each session's commands named;
- a place the agents keep missing is one lesson whatever each session searched for in it, when each first looked in
  a wrong place named like it.
Each family with several members, and what must stay apart."""

from __future__ import annotations

import pytest

from reviews.analysis import normalize as nz
from reviews.analysis.rules import analyze
from tests.test_analysis_aggregate import filler, mem, run
from tests.test_analysis_rules import S

# ---------------------------------------------------------------- a changed value in a command

VALUE_CASES = [
    # (wrong, right, error, the entry that states the wrong value, the value as the entry's prose gives it)
    (
        "psql -h localhost -p 5432 app_dev",
        "psql -h localhost -p 5433 app_dev",
        'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused',
        "The dev database listens on 5432; open it with `psql -h localhost -p 5432 app_dev`.",
        ("5432", "5433"),
    ),
    (
        "redis-cli -p 6379 ping",
        "redis-cli -p 6380 ping",
        "Could not connect to Redis at 127.0.0.1:6379: Connection refused",
        "Redis for tests runs on port 6379: check it with `redis-cli -p 6379 ping`.",
        ("6379", "6380"),
    ),
    (
        "curl -fsS http://localhost:8000/healthz",
        "curl -fsS http://localhost:8080/healthz",
        "curl: (7) Failed to connect to localhost port 8000 after 0 ms: Connection refused",
        "The API answers on localhost:8000 (health: `curl -fsS http://localhost:8000/healthz`).",
        None,  # the value is inside a URL token: the command is replaced, nothing else is promised
    ),
    (
        "NODE_OPTIONS=--max-old-space-size=2048 npm run build",
        "NODE_OPTIONS=--max-old-space-size=8192 npm run build",
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
        "Build the bundle with `NODE_OPTIONS=--max-old-space-size=2048 npm run build` (2048 MB is enough).",
        None,
    ),
]


def value_session(i, wrong, right, error, agent):
    s = S(f"v-{i}", agent, "dev").say("user", ["Check the service.", "Is it up?", "Try it again.", "Go."][i % 4])
    s.call("bash", wrong, error, error=True, exit_code=2)
    s.call("bash", right, "ok")
    return s.doc


@pytest.mark.parametrize("wrong,right,error,entry,value", VALUE_CASES, ids=lambda v: str(v)[:20])
def test_a_command_corrected_in_one_value_is_a_corrected_command(wrong, right, error, entry, value):
    res = run(
        [value_session(i, wrong, right, error, ["a", "b"][i % 2]) for i in range(3)] + [filler(i) for i in range(4)]
    )
    assert len(res.proposals) == 1, [p.content for p in res.proposals]
    p = res.proposals[0]
    assert p.operation == "add" and p.prevalence_sessions == 3
    assert f"`{right}`" in p.content and "retry the same call" not in p.content, p.content


@pytest.mark.parametrize("wrong,right,error,entry,value", VALUE_CASES, ids=lambda v: str(v)[:20])
def test_an_entry_with_the_old_value_is_updated_everywhere_it_says_it(wrong, right, error, entry, value):
    docs = [value_session(i, wrong, right, error, ["a", "b"][i % 2]) for i in range(3)] + [filler(i) for i in range(4)]
    res = run(docs, memory=[mem("the-entry", entry)])
    assert len(res.proposals) == 1, [p.content for p in res.proposals]
    p = res.proposals[0]
    assert (p.operation, p.targets) == ("update", ["the-entry"]), (p.operation, p.content)
    head = p.content.split(" (`")[0]  # the entry's own text, before the reason appended
    assert right in head and wrong not in head, p.content
    if value is not None:
        assert value[0] not in head and value[1] in head, p.content


def test_the_same_command_retried_word_for_word_is_still_a_retry():
    """Masked ids must not turn a real retry into a correction, nor a real correction into a retry."""
    s = S("r-1", "a").say("user", "Fetch it.")
    s.call("bash", "curl -fsS https://example.com/job/12345", "curl: (28) timed out", error=True)
    s.call("bash", "curl -fsS https://example.com/job/12345", "{}")
    kinds = {f["kind"] for f in analyze(s.doc).findings}
    assert "corrected_command" not in kinds, kinds


def test_different_values_are_different_lessons():
    docs = []
    for i, (old, new) in enumerate([("5432", "5433"), ("6000", "6001"), ("7000", "7001")]):
        s = S(f"d-{i}", "a").say("user", "Connect.")
        s.call("bash", f"psql -p {old} db", "Connection refused", error=True, exit_code=2)
        s.call("bash", f"psql -p {new} db", "ok")
        docs.append(s.doc)
    assert run(docs + [filler(i) for i in range(3)]).proposals == []


@pytest.mark.parametrize(
    "old,new,edit",
    [
        ("psql -p 5432 db", "psql -p 5433 db", ("psql -p 5432", "psql -p 5433")),
        ("redis-cli -p 6379 ping", "redis-cli -p 6380 ping", ("redis-cli -p 6379", "redis-cli -p 6380")),
    ],
)
def test_the_key_of_a_value_correction_keeps_the_values(old, new, edit):
    assert nz.command_edit(old, new) == edit


# ---------------------------------------------------------------- one step behind different failures

PREP_FAMILIES = [
    (
        "python manage.py migrate",
        [
            (
                "pytest tests/test_orders.py -q",
                'django.db.utils.ProgrammingError: relation "orders_order" does not exist',
            ),
            ("python manage.py loaddata demo.json", "django.db.utils.OperationalError: no such table: catalog_product"),
            ("python scripts/seed.py", "sqlite3.OperationalError: no such table: accounts_profile"),
            ("python manage.py createsuperuser --noinput", 'psycopg.errors.UndefinedTable: relation "auth_user"'),
        ],
    ),
    (
        "npm install",
        [
            ("npm run build", "sh: 1: vite: not found"),
            ("npm test", "Error: Cannot find module 'jest'"),
            ("npm run lint", "sh: 1: eslint: not found"),
        ],
    ),
    (
        "docker compose up -d db",
        [
            ("pytest -q", "psycopg.OperationalError: connection failed: Connection refused"),
            ("python manage.py migrate", "django.db.utils.OperationalError: could not connect to server"),
            ("make seed", "ERROR: could not connect to database: Connection refused"),
        ],
    ),
]


def prep_session(i, step, failing, error):
    s = S(f"p-{i}", ["a", "b", "c"][i % 3], ["tests", "data"][i % 2]).say("user", f"Task number {i}.")
    s.call("bash", failing, error, error=True)
    s.call("bash", step, "done")
    s.call("bash", failing, "ok")
    return s.doc


@pytest.mark.parametrize("step,failures", PREP_FAMILIES, ids=lambda v: v if isinstance(v, str) else "")
def test_one_step_behind_different_failures_is_one_lesson(step, failures):
    docs = [prep_session(i, step, *f) for i, f in enumerate(failures)] + [filler(i) for i in range(4)]
    res = run(docs)
    assert len(res.proposals) == 1, [p.content for p in res.proposals]
    p = res.proposals[0]
    assert p.prevalence_sessions == len(failures)
    assert p.content.startswith(f"Run `{step}` first"), p.content
    assert "…" not in p.content.split(":")[0], p.content
    # Its examples say which commands failed and how.
    assert sum(f"`{cmd}`" in p.content for cmd, _ in failures[:3]) >= 2, p.content


def test_different_steps_stay_apart():
    docs = []
    for i, step in enumerate(["python manage.py migrate", "npm install", "docker compose up -d db"]):
        docs.append(prep_session(i, step, "pytest -q", "some failure"))
    assert run(docs + [filler(i) for i in range(3)]).proposals == []


def test_the_same_failing_command_behind_one_step_keeps_its_own_wording():
    docs = [prep_session(i, "npm install", "npm run build", "sh: 1: vite: not found") for i in range(3)]
    (p,) = run(docs + [filler(i) for i in range(3)]).proposals
    assert "`npm run build`" in p.content and "npm install" in p.content, p.content


# ---------------------------------------------------------------- a prose correction, operands aside

PROSE_FAMILIES = [
    (
        # (the agent's step, the user's words, the agent's replacement with this session's operand)
        "git push origin main",
        [
            "Don't commit directly to main, open a PR instead.",
            "Please always branch first and open a pull request, never push to main.",
            "Bitte nie direkt auf main pushen, immer einen Branch anlegen.",
            "No pushing straight to main please. Make a feature branch.",
        ],
        ["git switch -c fix-typo", "git switch -c chore/bump", "git switch -c feat/csv", "git switch -c fix/login"],
        "main",
    ),
    (
        "rm -rf {}",
        [
            "Never delete things outright here, move them to the trash.",
            "Don't rm anything, trash it so we can restore it.",
            "We do not remove files, use the trash instead.",
        ],
        ["trash-put build/cache", "trash-put tmp/old-report.csv", "trash-put dist/app-1.2.tar.gz"],
        "trash",
    ),
]


@pytest.mark.parametrize(
    "step,words,replacements,needle", PROSE_FAMILIES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_prose_correction_with_other_operands_is_one_lesson(step, words, replacements, needle):
    docs = []
    for i, (said, repl) in enumerate(zip(words, replacements, strict=True)):
        s = S(f"w-{i}", ["a", "b"][i % 2], ["bugfix", "feature"][i % 2]).say("user", "Take care of it.")
        s.call("bash", step.format(repl.split()[-1]), "done")  # the same operand as the replacement
        s.say("user", said)
        s.call("bash", repl, "done")
        docs.append(s.doc)
    res = run(docs + [filler(i) for i in range(4)])
    assert len(res.proposals) == 1, [p.content for p in res.proposals]
    p = res.proposals[0]
    assert p.prevalence_sessions == len(words) and p.operation == "add"
    assert needle in p.content.lower(), p.content
    assert '"' in p.content, p.content  # the users' request is quoted as an example


def test_prose_corrections_to_different_commands_stay_apart():
    pairs = [("git push origin main", "git switch -c a"), ("npm install x", "yarn add x"), ("make", "ninja")]
    docs = []
    for i, (old, new) in enumerate(pairs):
        s = S(f"x-{i}", "a").say("user", "Do it.").call("bash", old, "done")
        s.say("user", "Not like that, please.").call("bash", new, "done")
        docs.append(s.doc)
    assert run(docs + [filler(i) for i in range(3)]).proposals == []


@pytest.mark.parametrize(
    "cmd,shape",
    [
        ("git switch -c feat/export-csv", {"git", "switch", "-c"}),
        ("git checkout -b fix-1", {"git", "checkout", "-b"}),
        ("trash-put dist/app.tar.gz", {"trash-put", "dist/app.tar.gz"}),
        ("PYTHONPATH=src pytest -x tests/unit tests/api", {"pytest", "-x", "tests/unit"}),
        ("git add -A && git commit -m 'x'", {"git", "add", "-a", "commit", "-m"}),
    ],
)
def test_a_commands_shape_drops_the_operands_after_its_subcommand(cmd, shape):
    assert nz.shape_words(cmd) == shape


# ---------------------------------------------------------------- a place sought under different names

SOUGHT = [
    (
        "config/flags/registry.yaml",
        [("backend/flags.py", "enable_checkout"), ("app/feature_flags.py", "dark_mode"), ("src/flags/x.py", "old_ui")],
    ),
    (
        "deploy/helm/values-prod.yaml",
        [("helm/prod.yaml", "replicaCount"), ("charts/values.yaml", "memoryLimit"), ("k8s/helm.yaml", "ingressHost")],
    ),
    (
        "docs/runbooks/oncall.md",
        [("ONCALL.md", "pager rotation"), ("docs/oncall.md", "escalation"), ("wiki/runbooks.md", "sev1 bridge")],
    ),
]


def sought_session(i, wrong, name, place):
    s = S(f"s-{i}", ["a", "b", "c"][i % 3], "dev").say("user", f"Look into {name}.")
    s.call("read_file", wrong, f"cat: {wrong}: No such file or directory", error=True, exit_code=1)
    s.call("bash", f"grep -rn '{name}' .", f"./{place}:12:  {name}: x")
    s.call("read_file", place, f"{name}: x\n")
    return s.doc


@pytest.mark.parametrize("place,looks", SOUGHT, ids=lambda v: v if isinstance(v, str) else "")
def test_a_place_sought_under_different_names_after_a_wrong_place_is_one_lesson(place, looks):
    docs = [sought_session(i, wrong, name, place) for i, (wrong, name) in enumerate(looks)]
    res = run(docs + [filler(i) for i in range(4)])
    where = [p for p in res.proposals if place in p.content]
    assert len(where) == 1, [p.content for p in res.proposals]
    p = where[0]
    assert p.prevalence_sessions == 3 and p.operation == "add"
    assert "…" not in p.content, p.content
    assert sum(f"`{wrong}`" in p.content for wrong, _ in looks) >= 2, p.content  # the wrong places, as examples


def test_different_searches_ending_in_one_file_without_a_wrong_place_stay_apart():
    """Code navigation: several searches that end in one busy file are the work going through it."""
    docs = []
    for i, name in enumerate(["enable_checkout", "dark_mode", "old_ui"]):
        s = S(f"n-{i}", "a").say("user", f"Look into {name}.")
        s.call("bash", f"grep -rn '{name}' .", f"./config/flags/registry.yaml:12:  {name}: x")
        s.call("read_file", "config/flags/registry.yaml", f"{name}: x\n")
        docs.append(s.doc)
    res = run(docs + [filler(i) for i in range(3)])
    assert not [p for p in res.proposals if "registry.yaml" in p.content], [p.content for p in res.proposals]


def test_wrong_places_that_name_something_else_do_not_make_one_place():
    docs = [
        sought_session(i, wrong, name, "config/flags/registry.yaml")
        for i, (wrong, name) in enumerate([("README.md", "a_flag"), ("docs/index.md", "b_flag"), ("Makefile", "c_x")])
    ]
    res = run(docs + [filler(i) for i in range(3)])
    assert not [p for p in res.proposals if "registry.yaml" in p.content], [p.content for p in res.proposals]


# ---------------------------------------------------------------- the same correction on a command with one more flag

FLAG_FAMILIES = [
    (
        "xcodebuild test -scheme Shop",
        " -destination 'platform=iOS Simulator,name=iPhone 15'",
        "xcodebuild test -quiet -scheme Shop",
    ),
    ("npm test", " -- --watchAll=false", "npm test --silent"),
    ("cargo build", " --locked", "cargo build -q"),
]


@pytest.mark.parametrize("base,added,variant", FLAG_FAMILIES)
def test_the_same_correction_on_a_command_with_an_extra_flag_is_one_lesson(base, added, variant):
    docs = []
    for i, cmd in enumerate([base, variant, base]):
        s = S(f"f-{i}", ["a", "b"][i % 2], "ci").say("user", "Build it.")
        s.call("bash", cmd, "error: needs a concrete setting", error=True)
        s.call("bash", cmd + added, "ok")
        docs.append(s.doc)
    res = run(docs + [filler(i) for i in range(3)])
    assert len(res.proposals) == 1, [p.content for p in res.proposals]
    assert res.proposals[0].prevalence_sessions == 3


def test_different_changes_to_one_program_stay_apart():
    docs = []
    for i, (cmd, added) in enumerate([("npm test", " --ci"), ("npm test", " --runInBand"), ("npm test", " --silent")]):
        s = S(f"g-{i}", "a").say("user", "Test it.")
        s.call("bash", cmd, "error", error=True)
        s.call("bash", cmd + added, "ok")
        docs.append(s.doc)
    assert run(docs + [filler(i) for i in range(3)]).proposals == []


def test_the_same_change_to_different_programs_stays_apart():
    docs = []
    for i, cmd in enumerate(["pytest", "tox", "nox"]):
        s = S(f"h-{i}", "a").say("user", "Test it.")
        s.call("bash", cmd, "error", error=True)
        s.call("bash", cmd + " --verbose", "ok")
        docs.append(s.doc)
    assert run(docs + [filler(i) for i in range(3)]).proposals == []
