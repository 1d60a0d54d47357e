"""Blind probe of the dream's judgement (second round): families planted in 3+ sessions from 2+ sources, worded
differently, among noise and distractors. Written from the docs only (docs/dream-pipeline.md, DESIGN.md); a failing
test is a finding.

Written blind by a helper (a second round, against the code before stop 23's judgement fixes); of its 7 families 3
failed and were marked as known gaps until stop 24 fixed them as families (tests/test_judgement_operands.py): grouping
keys carried a session's operands or error text in prose corrections, in fixes behind different errors, and in a
changed operand of a remembered command."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from memory.models import ContextServe
from reviews import dreams
from reviews.models import Proposal, RunStatus

from .dream_sessions import ingest
from .factories import StoreFactory, TeamFactory, make_entry
from .scoping import no_scope

pytestmark = pytest.mark.all_teams

KEY_A, KEY_B, KEY_C = "key:alpha", "key:beta", "key:gamma"


def doc(external_id, events, *, agent, task, minute):
    return {
        "external_id": external_id,
        "agent": agent,
        "task": task,
        "started_at": f"2025-04-0{1 + minute // 60}T09:{minute % 60:02d}:00Z",
        "outcome": "success",
        "events": events,
    }


def call(cid, command, tool="bash"):
    return {"type": "tool_call", "id": cid, "name": tool, "arguments": {"command": command}}


def result(cid, content, code=0):
    r = {"type": "tool_result", "call_id": cid, "content": content, "exit_code": code}
    if code:
        r["is_error"] = True
    return r


def user(text):
    return {"type": "message", "role": "user", "content": text}


def assistant(text):
    return {"type": "message", "role": "assistant", "content": text}


# ---------------------------------------------------------------- family 1: a behaviour correction in prose
PR_WORDINGS = [
    "Don't commit directly to main, open a PR instead.",
    "Please always branch first and open a pull request, never push to main.",
    "Bitte nie direkt auf main pushen, immer einen Branch anlegen und einen PR aufmachen.",
    "No pushing straight to main please. Make a feature branch and a pull request.",
]


def pr_correction(i):
    branch = ["fix-readme-typo", "chore/bump-deps", "feat/export-csv", "fix/login-timeout"][i]
    return [
        user(f"Take care of {branch.split('/')[-1].replace('-', ' ')} and get it upstream."),
        call(f"c{i}", f'git commit -am "{branch}"'),
        result(f"c{i}", f"[main 1a2b3c{i}] {branch}\n 1 file changed, 2 insertions(+)"),
        call(f"p{i}", "git push origin main"),
        result(f"p{i}", "To github.com:acme/shop.git\n   9f8e7d6..1a2b3c4  main -> main"),
        user(PR_WORDINGS[i]),
        call(f"b{i}", f"git switch -c {branch}"),
        result(f"b{i}", f"Switched to a new branch '{branch}'"),
        call(f"q{i}", f"git push -u origin {branch}"),
        result(f"q{i}", f"branch '{branch}' set up to track 'origin/{branch}'."),
        call(f"r{i}", "gh pr create --fill"),
        result(f"r{i}", f"https://github.com/acme/shop/pull/{40 + i}"),
        assistant("Opened a pull request."),
    ]


# ---------------------------------------------------------------- family 2: one root cause, several symptoms
def unmigrated_db(i):
    cmd, err, ok = [
        (
            "pytest tests/test_orders.py -q",
            'django.db.utils.ProgrammingError: relation "orders_order" does not exist\nLINE 1: SELECT ...',
            "5 passed in 1.42s",
        ),
        (
            "python manage.py loaddata fixtures/demo.json",
            "django.db.utils.OperationalError: no such table: catalog_product",
            "Installed 48 object(s) from 1 fixture(s)",
        ),
        (
            "python manage.py createsuperuser --noinput --username admin --email a@example.com",
            'psycopg.errors.UndefinedTable: relation "auth_user" does not exist',
            "Superuser created successfully.",
        ),
        (
            "python scripts/seed_demo.py",
            "sqlite3.OperationalError: no such table: accounts_profile",
            "Seeded 12 profiles.",
        ),
    ][i]
    tool = "Bash" if i == 2 else "bash"
    return [
        user(["Run the order tests.", "Load the demo data.", "Create an admin user.", "Seed the demo profiles."][i]),
        call(f"f{i}", cmd, tool),
        result(f"f{i}", err, 1),
        call(f"m{i}", "python manage.py migrate", tool),
        result(
            f"m{i}",
            "Operations to perform:\n  Apply all migrations\nRunning migrations:\n  Applying x.0001_initial... OK",
        ),
        call(f"g{i}", cmd, tool),
        result(f"g{i}", ok),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- family 3: memory now wrong (port)
STALE_KEY = "local-postgres"
STALE_TEXT = "The local Postgres listens on port 5432: connect with `psql -h localhost -p 5432 app_dev`."


def stale_port(i):
    err = [
        'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused\n'
        "\tIs the server running on that host and accepting TCP/IP connections?",
        "psql: error: could not connect to server: Connection refused\n\tIs the server running on host "
        '"localhost" (127.0.0.1) and accepting TCP/IP connections on port 5432?',
        'psql: error: connection to server at "localhost" (::1), port 5432 failed: Connection refused',
        'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused',
    ][i]
    return [
        user(
            [
                "How many orders are in the local db?",
                "Check the local users table.",
                "Is the dev db up?",
                "Count the local invoices.",
            ][i]
        ),
        call(f"s{i}", "psql -h localhost -p 5432 app_dev"),
        result(f"s{i}", err, 2),
        call(f"t{i}", "psql -h localhost -p 5433 app_dev"),
        result(f"t{i}", 'psql (16.2)\nType "help" for help.\n\napp_dev=#'),
        assistant("Connected on 5433."),
    ]


SERVED_STALE_KEY, SERVED_STALE_TEXT = "docs-build", "Build the documentation with `make docs`."


def served_stale(i):
    return [
        user(["Rebuild the docs.", "Regenerate the HTML documentation.", "Docs build please, then check links."][i]),
        call(f"h{i}", "make docs"),
        result(f"h{i}", "make: *** No rule to make target 'docs'.  Stop.", 2),
        call(f"j{i}", "make html"),
        result(f"j{i}", f"Build finished. The HTML pages are in _build/html ({120 + i} pages)."),
        assistant("Docs built."),
    ]


# ---------------------------------------------------------------- family 4: two entries, one lesson
DUP_A = ("lint-before-commit", "Run `ruff check .` before every commit; CI rejects lint errors.")
DUP_B = ("ruff-precommit", "Before committing, always run `ruff check .` because lint errors fail CI.")


# ---------------------------------------------------------------- family 5: one agent, one task
def changelog_cmd(i):
    return [
        user(
            ["Write the changelog for 2.4.", "Update CHANGELOG for the patch release.", "Changelog for 2.5 please."][i]
        ),
        call(f"n{i}", "npm run changelog"),
        result(
            f"n{i}",
            'npm ERR! Missing script: "changelog"\n\nnpm ERR! To see a list of scripts, run:\nnpm ERR!   npm run',
            1,
        ),
        call(f"o{i}", "npm run release-notes"),
        result(f"o{i}", "Wrote CHANGELOG.md (14 entries)"),
        assistant("Changelog updated."),
    ]


# ---------------------------------------------------------------- distractors
def corrected_once(i):
    return [
        user("Format the code."),
        call("d1", "make fmt"),
        result("d1", "make: *** No rule to make target 'fmt'.  Stop.", 2),
        call("d2", "make format"),
        result("d2", "All done! 14 files left unchanged."),
    ]


def flaky_network(i):
    cmd, err, ok = [
        (
            "pip install -r requirements.txt",
            "ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host='pypi.org', port=443): "
            "Read timed out.",
            "Successfully installed requests-2.31.0",
        ),
        ("npm ci", "npm ERR! code ECONNRESET\nnpm ERR! network aborted", "added 812 packages in 14s"),
        (
            "git fetch origin",
            "fatal: unable to access 'https://github.com/acme/shop.git/': Could not resolve host: github.com",
            "From github.com:acme/shop\n * [new branch] main -> origin/main",
        ),
    ][i]
    return [
        user("Get the dependencies / sources up to date."),
        call(f"k{i}", cmd),
        result(f"k{i}", err, 1),
        call(f"l{i}", cmd),
        result(f"l{i}", ok),
        assistant("Up to date."),
    ]


def preference_once(i):
    return [
        user("Add a helper that slugifies titles."),
        {
            "type": "tool_call",
            "id": "e1",
            "name": "write_file",
            "arguments": {"path": "app/text.py", "content": 'def slug(t):\n    return t.lower().replace(" ", "-")\n'},
        },
        result("e1", "wrote app/text.py"),
        user("Fine. For the record, I prefer early returns and type hints on every function I read."),
        assistant("Noted."),
    ]


ECHO_KEY, ECHO_TEXT = "deploy-window", "Deploys happen only on Tuesday and Thursday after 14:00 UTC."


def served_echo(i):
    return [
        user(["Can we deploy now?", "When is the next deploy slot?", "Ship the hotfix today?"][i]),
        assistant("Per memory: deploys happen only on Tuesday and Thursday after 14:00 UTC."),
        {"type": "memory_write", "content": "Deploys happen only on Tuesday and Thursday after 14:00 UTC."},
    ]


def noise(i):
    rnd = random.Random(1000 + i)
    word = rnd.choice(["lint", "format", "docs", "typo", "bump", "rename", "comment"])
    return [
        user(f"Fix the {word} issue number {rnd.randint(1, 9999)}."),
        call(f"x{i}", f"echo {word}-{i}"),
        result(f"x{i}", f"{word}-{i}"),
        {"type": "tool_call", "id": f"y{i}", "name": "read_file", "arguments": {"path": f"src/mod_{i}.py"}},
        result(f"y{i}", f"def f_{i}():\n    return {i}\n"),
        assistant("Fixed."),
    ]


# ---------------------------------------------------------------- the world and one cycle
def build_world():
    team = TeamFactory(slug="probe2")
    store = StoreFactory(team=team, slug="eng")
    make_entry(store, key=STALE_KEY, content=STALE_TEXT)
    make_entry(store, key=DUP_A[0], content=DUP_A[1])
    make_entry(store, key=DUP_B[0], content=DUP_B[1])
    echo = make_entry(store, key=ECHO_KEY, content=ECHO_TEXT)
    stale_served = make_entry(store, key=SERVED_STALE_KEY, content=SERVED_STALE_TEXT)

    by_source = {KEY_A: [], KEY_B: [], KEY_C: []}
    minute = 0

    def add(source, ext, events, agent, task):
        nonlocal minute
        minute += 1
        by_source[source].append(doc(ext, events, agent=agent, task=task, minute=minute))

    agents = ["coder-a", "coder-b", "ops-bot"]
    for i in range(4):
        add(
            [KEY_A, KEY_B][i % 2],
            f"pr-{i}",
            pr_correction(i),
            ["coder-a", "coder-b"][i % 2],
            ["bugfix", "feature"][i % 2],
        )
        add([KEY_B, KEY_A][i % 2], f"mig-{i}", unmigrated_db(i), agents[i % 3], ["tests", "data"][i % 2])
        add([KEY_A, KEY_C][i % 2], f"port-{i}", stale_port(i), ["coder-b", "ops-bot"][i % 2], "db")
    for i in range(3):
        add([KEY_A, KEY_B, KEY_A][i], f"chlog-{i}", changelog_cmd(i), "docs-bot", "changelog")
        add([KEY_C, KEY_A, KEY_B][i], f"flaky-{i}", flaky_network(i), agents[i], "setup")
        add([KEY_B, KEY_C, KEY_A][i], f"echo-{i}", served_echo(i), agents[i], "deploy")
        add([KEY_C, KEY_B, KEY_B][i], f"sstale-{i}", served_stale(i), agents[i], "docs")
    add(KEY_B, "once-cmd-0", corrected_once(0), "coder-a", "format")
    add(KEY_C, "once-pref-0", preference_once(0), "coder-b", "feature")
    for i in range(2):  # the docs agent does other tasks too
        add([KEY_A, KEY_B][i], f"docs-noise-{i}", noise(100 + i), "docs-bot", "docs")
    for i in range(15):
        add([KEY_A, KEY_B, KEY_C][i % 3], f"noise-{i}", noise(i), agents[i % 3], ["bugfix", "feature", "chore"][i % 3])

    for source, docs in by_source.items():
        ingest(team, docs, source=source)
    for i in range(3):
        ContextServe.objects.create(
            team=team,
            store=store,
            session_external_id=f"echo-{i}",
            entries=[{"entry_id": echo.pk, "key": ECHO_KEY, "version": 1, "content_hash": echo.content_hash}],
        )
    for i in range(3):  # the wrong entry was served, followed, and failed
        ContextServe.objects.create(
            team=team,
            store=store,
            session_external_id=f"sstale-{i}",
            entries=[
                {
                    "entry_id": stale_served.pk,
                    "key": SERVED_STALE_KEY,
                    "version": 1,
                    "content_hash": stale_served.content_hash,
                }
            ],
        )
    n = sum(len(d) for d in by_source.values())
    return SimpleNamespace(team=team, store=store, n=n)


@pytest.fixture
def dreamt(db, django_capture_on_commit_callbacks):
    world = build_world()
    with no_scope(), django_capture_on_commit_callbacks(execute=True):
        run = dreams.start_run(world.store)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.sessions_analysed == world.n == 43
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
            supporting(world, p),
        )
        for p in world.proposals
    ]


def about(world, prefix):
    """Proposals supported by any session of a family (external ids start with prefix)."""
    return [p for p in world.proposals if any(s.startswith(prefix) for s in supporting(world, p))]


# ---------------------------------------------------------------- tests, one per family
def test_prose_behaviour_correction_in_several_wordings_and_languages_is_one_lesson(dreamt):
    found = about(dreamt, "pr-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and not p.targets
    text = p.content.lower()
    assert "main" in text and ("pr" in text.split() or "pull request" in text or "branch" in text), p.content
    assert supporting(dreamt, p) == [f"pr-{i}" for i in range(4)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (4, 2, dreamt.n)
    assert p.scope_agent in (None, "") and p.scope_task in (None, "")  # two agents, two tasks


def test_one_root_cause_behind_different_errors_and_tools_is_one_fix(dreamt):
    found = about(dreamt, "mig-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "migrate" in p.content, p.content
    assert supporting(dreamt, p) == [f"mig-{i}" for i in range(4)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (4, 2, dreamt.n)
    assert p.scope_agent in (None, "") and p.scope_task in (None, "")  # three agents


def test_memory_that_is_now_wrong_is_updated_not_added_beside(dreamt):
    found = about(dreamt, "port-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "update" and p.targets == [STALE_KEY], describe(dreamt)
    assert "5433" in p.content, p.content
    assert supporting(dreamt, p) == [f"port-{i}" for i in range(4)]
    assert (p.prevalence_sessions, p.prevalence_sources) == (4, 2)
    assert p.prevalence_of == dreamt.n  # two agents: a lesson for every agent


def test_a_served_entry_that_is_now_wrong_is_updated(dreamt):
    """The agents followed the served entry and it failed: that is evidence against the entry, not an echo of it."""
    found = about(dreamt, "sstale-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "update" and p.targets == [SERVED_STALE_KEY], describe(dreamt)
    assert "make html" in p.content, p.content
    assert supporting(dreamt, p) == [f"sstale-{i}" for i in range(3)]
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (3, 2, dreamt.n)


def test_two_entries_saying_the_same_thing_are_proposed_for_a_merge(dreamt):
    merges = [p for p in dreamt.proposals if p.operation == "merge"]
    assert len(merges) == 1, describe(dreamt)
    m = merges[0]
    assert sorted(m.targets) == sorted([DUP_A[0], DUP_B[0]])
    assert "ruff check ." in m.content and m.content in (DUP_A[1], DUP_B[1])  # one entry's text word for word


def test_a_lesson_from_one_agent_and_task_is_scoped_to_them(dreamt):
    found = about(dreamt, "chlog-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "release-notes" in p.content, p.content
    assert supporting(dreamt, p) == [f"chlog-{i}" for i in range(3)]
    assert (p.prevalence_sessions, p.prevalence_sources) == (3, 2)
    assert p.scope_agent == "docs-bot", describe(dreamt)
    # k of N is counted in the lesson's scope: the agent's 5 sessions, or its 3 changelog sessions.
    # k of N is counted in the lesson's scope: the agent's 5 sessions, or its 3 changelog sessions (the docs name
    # task-scoped lessons but give no rule for when a lesson is narrowed to a task, so either is accepted).
    assert p.prevalence_of == (3 if p.scope_task == "changelog" else 5), (p.scope_task, p.prevalence_of)


def test_distractors_stay_quiet(dreamt):
    loud = {}
    for prefix in ("once-cmd-", "flaky-", "once-pref-", "echo-", "noise-", "docs-noise-"):
        if about(dreamt, prefix):
            loud[prefix] = [d for d in describe(dreamt) if any(s.startswith(prefix) for s in d[-1])]
    for p in dreamt.proposals:
        text = p.content.lower()
        for word in ("make format", "pip install", "npm ci", "git fetch", "early return", "type hint", "tuesday"):
            if word in text:
                loud.setdefault(word, []).append(p.content)
        if ECHO_KEY in p.targets:
            loud.setdefault(ECHO_KEY, []).append((p.operation, p.kind, p.content))
    assert not loud, loud
