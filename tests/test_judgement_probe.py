"""Blind probe of the default (rules) dream's judgement.

A small fictional team ("Larkspur", a Django+React shop) pushes sessions from three credentials. Four families of
recurring lessons are planted, each worded differently per session, among noise: one-off errors, chatter, a lesson
seen once, a lesson from one key only, flaky failures that pass on an unchanged retry, and a lesson memory already
holds. One test per family (and per noise item), each at 1x and 2x noise.

Written blind by a helper; of its 20 cases 8 failed on the code it probed. Fixed as families: a corrected command is
keyed by what changed, not by the operands each session names (`docker-compose up -d <any service>`); other agents'
names for the shell tool (`run_terminal_cmd`, `execute_command`, `run_in_terminal`...); a path printed `./x` and opened
as `x`; times of day written `15:00`, `3pm`, `3 p.m.`, `15h00` are one fact. Then (stop 24): a place found by
searching for a different name in each session, after a wrong place named like it (tests/test_judgement_operands.py).
"""

from __future__ import annotations

import itertools

import pytest

from reviews import dreams
from reviews.models import DreamRun, Proposal, ProposalEvidence, RunStatus

from .dream_sessions import ingest
from .factories import StoreFactory, TeamFactory, make_entry
from .scoping import no_scope

pytestmark = pytest.mark.all_teams

KEYS = ("key:larkspur-ci", "key:larkspur-laptop-mira", "key:larkspur-laptop-oskar")
AGENTS = ("builder", "reviewer-bot", "ops-helper")

_counter = itertools.count()


def _id(prefix):
    return f"{prefix}{next(_counter)}"


def call(name, args, result, *, exit_code=0, is_error=None):
    cid = _id("c")
    return [
        {"type": "tool_call", "id": cid, "name": name, "arguments": args},
        {
            "type": "tool_result",
            "call_id": cid,
            "content": result,
            "exit_code": exit_code,
            "is_error": bool(exit_code) if is_error is None else is_error,
        },
    ]


def user(text):
    return {"type": "message", "role": "user", "content": text}


def assistant(text):
    return {"type": "message", "role": "assistant", "content": text}


def note(text):
    return {"type": "memory_write", "content": text}


def doc(ext, events, *, agent, task, day, user_name="mira"):
    return {
        "external_id": ext,
        "agent": agent,
        "task": task,
        "user": user_name,
        "model": "some-model-1",
        "started_at": f"2026-03-{day:02d}T09:{(day * 7) % 60:02d}:00Z",
        "ended_at": f"2026-03-{day:02d}T10:{(day * 7) % 60:02d}:00Z",
        "outcome": "success",
        "metadata": {"repo": "larkspur/app", "branch": f"feat/{task}-{day}"},
        "events": events,
    }


# ---------------------------------------------------------------------------------------------------------------
# Family A: `docker-compose` (v1) is not installed; `docker compose` (plugin) works. Different shells, error texts,
# tool names and argument keys. 4 sessions, keys 0 and 1.
# ---------------------------------------------------------------------------------------------------------------
COMPOSE = [
    ("bash", "command", "bash: docker-compose: command not found", 127),
    ("shell", "cmd", "/bin/sh: 1: docker-compose: not found", 127),
    ("run_terminal_cmd", "command", "zsh: command not found: docker-compose", 127),
    ("Bash", "command", "docker-compose: No such file or directory (os error 2)", 1),
]


def family_compose(i):
    tool, key, err, code = COMPOSE[i]
    service = ["postgres", "redis", "postgres", "minio"][i]
    return [
        user(
            [
                "Bring up the local db so I can run the migrations.",
                "Start the backing services please.",
                "I need redis running locally for the queue tests.",
                "Spin up the object store for the upload work.",
            ][i]
        ),
        *call(tool, {key: f"docker-compose up -d {service}"}, err, exit_code=code),
        assistant(
            [
                "The v1 binary isn't there; trying the compose plugin.",
                "Hmm, let me use the plugin syntax.",
                "Retrying with the docker CLI plugin.",
                "Not installed. Switching.",
            ][i]
        ),
        *call(
            tool,
            {key: f"docker compose up -d {service}"},
            f"[+] Running 1/1\n ✔ Container larkspur-{service}-1  Started",
            exit_code=0,
        ),
        assistant("Service is up."),
    ]


# Family A2: one fixed command, same arguments each time; only the shell tool's name, its argument key and the error
# text vary: `terraform plan` at the root fails, `terraform -chdir=infra plan` works. 3 sessions, keys 1, 2.
def family_dcsame(i):
    tool, key = [("bash", "command"), ("shell", "cmd"), ("Bash", "command")][i]
    err = [
        "Error: No configuration files",
        "╷\n│ Error: No configuration files\n│\n│ Plan requires configuration to be present.\n╵",
        "Error: No configuration files found in /srv/checkout; run from the module directory",
    ][i]
    return [
        user(["What would the infra change do?", "plan the bucket change pls", "Dry-run the DNS update."][i]),
        *call(tool, {key: "terraform plan"}, err, exit_code=1),
        *call(
            tool, {key: "terraform -chdir=infra plan"}, f"Plan: {i + 1} to add, 0 to change, 0 to destroy.", exit_code=0
        ),
        assistant("Plan looks fine."),
    ]


# Family C2: the same symbol sought in each session (Grep tool, rg, grep -rn), after a wrong look, then opened with
# Read / cat / sed. 3 sessions, keys 0 and 2.
def family_flagsym(i):
    wrong = [
        call("Read", {"file_path": "backend/flags.py"}, "File does not exist: backend/flags.py", exit_code=1),
        call(
            "bash",
            {"command": "cat app/flags/__init__.py"},
            "cat: app/flags/__init__.py: No such file or directory",
            exit_code=1,
        ),
        call("bash", {"command": "cat lib/flags.py"}, "cat: lib/flags.py: No such file or directory", exit_code=1),
    ][i]
    search = [
        call("Grep", {"pattern": "load_flag_registry"}, "backend/core/flag_loader.py:12:def load_flag_registry(path):"),
        call(
            "bash",
            {"command": "rg -n load_flag_registry"},
            "backend/core/flag_loader.py:12:def load_flag_registry(path):",
        ),
        call(
            "bash",
            {"command": "grep -rn 'load_flag_registry' ."},
            "./backend/core/flag_loader.py:12:def load_flag_registry(path):",
        ),
    ][i]
    opened = [
        call("Read", {"file_path": "backend/core/flag_loader.py"}, "def load_flag_registry(path):\n    ..."),
        call("bash", {"command": "cat backend/core/flag_loader.py"}, "def load_flag_registry(path):\n    ..."),
        call("bash", {"command": "sed -n 1,80p backend/core/flag_loader.py"}, "def load_flag_registry(path):\n    ..."),
    ][i]
    return [
        user(
            [
                "How are flags loaded at startup?",
                "Make the flag loader log unknown flags.",
                "Flags aren't reloading on SIGHUP, look into it.",
            ][i]
        ),
        *wrong,
        *search,
        *opened,
        assistant("Found the loader."),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Family B: the user corrects pip → poetry, in different words, different packages. 4 sessions, keys 0, 1, 2.
# ---------------------------------------------------------------------------------------------------------------
POETRY_WORDS = [
    "Don't pip install things in this repo, poetry manages our deps.",
    "Please use poetry add rather than pip.",
    "Nope. Dependencies go through poetry here; pip breaks the lockfile.",
    "We're a poetry shop, stop reaching for pip.",
]


def family_poetry(i):
    pkg = ["httpx", "rich", "pydantic-settings", "structlog"][i]
    return [
        user(f"Add {pkg} to the backend, we need it for the new client."),
        *call("bash", {"command": f"pip install {pkg}"}, f"Successfully installed {pkg}-1.{i}.0", exit_code=0),
        user(POETRY_WORDS[i]),
        *call(
            "bash",
            {"command": f"poetry add {pkg}"},
            f"Using version ^1.{i}.0 for {pkg}\nWriting lock file",
            exit_code=0,
        ),
        assistant(f"Added {pkg} with poetry; lockfile updated."),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Family C: where the feature flags live (config/flags/registry.yaml), rediscovered by a wrong look then a search,
# with different tools. 3 sessions, keys 1 and 2.
# ---------------------------------------------------------------------------------------------------------------
def family_flags(i):
    if i == 0:
        look = [
            *call(
                "Read",
                {"file_path": "backend/settings/flags.py"},
                "File does not exist: backend/settings/flags.py",
                exit_code=1,
            ),
            *call(
                "Grep",
                {"pattern": "enable_new_checkout", "path": "."},
                "config/flags/registry.yaml:41:  enable_new_checkout:",
                exit_code=0,
            ),
        ]
    elif i == 1:
        look = [
            *call(
                "bash",
                {"command": "cat app/feature_flags.py"},
                "cat: app/feature_flags.py: No such file or directory",
                exit_code=1,
            ),
            *call(
                "bash",
                {"command": "rg -n 'dark_mode_beta' --glob '*.yaml'"},
                "config/flags/registry.yaml:77:  dark_mode_beta:",
                exit_code=0,
            ),
        ]
    else:
        look = [
            *call(
                "bash",
                {"command": "ls src/flags"},
                "ls: cannot access 'src/flags': No such file or directory",
                exit_code=2,
            ),
            *call(
                "bash",
                {"command": "grep -rn 'legacy_export_off' --include=*.yaml ."},
                "./config/flags/registry.yaml:103:  legacy_export_off:",
                exit_code=0,
            ),
        ]
    flag = ["enable_new_checkout", "dark_mode_beta", "legacy_export_off"][i]
    return [
        user(
            [
                f"Turn on {flag} for the staging env.",
                f"Where is {flag} defined? Flip its default to true.",
                f"Kill the {flag} flag, it's shipped.",
            ][i]
        ),
        *look,
        *call(
            "Read" if i == 0 else "bash",
            {"file_path": "config/flags/registry.yaml"}
            if i == 0
            else {"command": "sed -n 1,140p config/flags/registry.yaml"},
            f"flags:\n  {flag}:\n    default: false\n    owner: web\n",
            exit_code=0,
        ),
        *call(
            "Edit" if i == 0 else "bash",
            {"file_path": "config/flags/registry.yaml", "old_string": "default: false", "new_string": "default: true"}
            if i == 0
            else {"command": "sed -i 's/default: false/default: true/' config/flags/registry.yaml"},
            "ok",
            exit_code=0,
        ),
        assistant(f"Done, {flag} is updated in config/flags/registry.yaml."),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Family D: the same fact noted in-band by different agents in different words: staging DB reset at 02:00 UTC.
# 3 sessions, keys 0 and 2, agents differ.
# ---------------------------------------------------------------------------------------------------------------
STAGING_NOTES = [
    "Heads up: the staging Postgres database is wiped and reseeded every night at 02:00 UTC, "
    "so don't leave test data there.",
    "Staging DB gets reset nightly (02:00 UTC) from the seed snapshot; "
    "anything created on staging disappears overnight.",
    "Remember that the staging database is restored from seed each night at 02:00 UTC; "
    "data you add there won't survive.",
]


def family_staging(i):
    return [
        user(
            [
                "Why did my staging orders vanish?",
                "Create a demo account on staging for the sales call.",
                "The QA data on staging is gone again, what happened?",
            ][i]
        ),
        *call(
            "bash",
            {"command": "psql $STAGING_URL -c 'select count(*) from orders'"},
            " count \n-------\n    12",
            exit_code=0,
        ),
        assistant("Staging is reseeded nightly; that explains it."),
        note(STAGING_NOTES[i]),
    ]


# Family D2: a fact noted in-band in freer wording (time written differently, no shared phrasing): the weekly release
# branch is cut on Tuesdays at 15:00 CET. 3 sessions, keys 0 and 1, three agents.
RELEASE_NOTES = [
    "Release branches get cut on Tuesdays, 3pm CET. Merge before then or wait a week.",
    "Reminder for next time: the weekly release cut happens Tuesday 15:00 CET, so land PRs before that.",
    "Cut-off for the weekly release is Tuesday afternoon at 15:00 Central European Time.",
]


def family_release(i):
    return [
        user(
            [
                "Will my PR make this week's release?",
                "When is the next release cut?",
                "Can we still get the hotfix into the release?",
            ][i]
        ),
        *call(
            "bash", {"command": "git log --oneline -3 origin/release"}, "a1b2c3d release: cut 2026.03.1", exit_code=0
        ),
        assistant("It depends on the weekly cut."),
        note(RELEASE_NOTES[i]),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Noise
# ---------------------------------------------------------------------------------------------------------------
def noise_typo(i):
    """A one-off typo, fixed once (a different one each time)."""
    bad, good = [
        ("npm run biuld", "npm run build"),
        ("git stauts", "git status"),
        ("pyhton manage.py check", "python manage.py check"),
        ("mkae fmt", "make fmt"),
    ][i % 4]
    return [
        user("Quick check before I push."),
        *call("bash", {"command": bad}, f"bash: {bad.split()[0]}: command not found", exit_code=127),
        *call("bash", {"command": good}, "ok", exit_code=0),
    ]


def noise_chatter(i):
    return [
        user(
            [
                "Summarise yesterday's standup notes.",
                "What's a good name for the invoices module?",
                "Explain the difference between select_related and prefetch_related.",
                "Thanks, that's all for today.",
                "Draft a friendly reply to the design team about the icon set.",
            ][i % 5]
        ),
        assistant("Here you go: a short answer with a couple of options."),
        *call("Read", {"file_path": f"docs/notes/{i}.md"}, f"# notes {i}\n- item", exit_code=0),
    ]


def noise_once_tabs(i):
    """A preference seen in one session only."""
    return [
        user("Reformat the Makefile."),
        *call("Edit", {"file_path": "Makefile", "old_string": "\tpytest", "new_string": "    pytest"}, "ok"),
        user("No, Makefiles need tabs, not spaces."),
        *call("Edit", {"file_path": "Makefile", "old_string": "    pytest", "new_string": "\tpytest"}, "ok"),
    ]


def noise_one_key(i):
    """A corrected command in 4 sessions, all pushed by one key: `make lint` → `make check`."""
    err = [
        "make: *** No rule to make target 'lint'.  Stop.",
        "make: *** No rule to make target `lint'.  Stop.",
        "make[1]: *** No rule to make target 'lint'.",
        "make: *** No rule to make target 'lint'.  Stop.",
    ][i]
    return [
        user("Lint the frontend before the PR."),
        *call("bash", {"command": "make lint"}, err, exit_code=2),
        *call("bash", {"command": "make check"}, "eslint: 0 problems\nruff: All checks passed!", exit_code=0),
    ]


def noise_flaky(i):
    """A failure that passes on the unchanged retry: nothing to learn. Recurs in 3 sessions from 2 keys."""
    test = ["tests/test_api.py", "tests/test_webhooks.py", "tests/test_sync.py"][i]
    err = [
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        "E   TimeoutError: timed out after 5.0s",
        "E   requests.exceptions.ConnectionError: Max retries exceeded",
    ][i]
    return [
        user("Run the tests for the endpoint I touched."),
        *call("bash", {"command": f"pytest {test} -q"}, f"F.\n{err}\n1 failed, 1 passed", exit_code=1),
        assistant("Looks flaky, re-running."),
        *call("bash", {"command": f"pytest {test} -q"}, "..\n2 passed", exit_code=0),
    ]


EXISTING = "Run the frontend unit tests with `yarn test:unit`; there is no plain `yarn test` script."


def noise_known(i):
    """A lesson memory already holds: `yarn test` → `yarn test:unit`. 3 sessions, 2 keys."""
    err = [
        'error Command "test" not found.',
        'error Command "test" not found. Did you mean "test:unit"?',
        'Usage Error: Couldn\'t find a script named "test".',
    ][i]
    return [
        user("Run the frontend tests."),
        *call("bash", {"command": "yarn test"}, err, exit_code=1),
        *call("bash", {"command": "yarn test:unit"}, "Tests: 48 passed, 48 total", exit_code=0),
    ]


# (family, maker, count, key indices per session, agents per session)
PLAN = {
    "compose": (family_compose, 4, [0, 1, 0, 1], [0, 2, 0, 2]),
    "poetry": (family_poetry, 4, [0, 1, 2, 2], [0, 0, 1, 0]),
    "flags": (family_flags, 3, [1, 2, 1], [0, 1, 0]),
    "staging": (family_staging, 3, [0, 2, 2], [2, 0, 1]),
    "one_key": (noise_one_key, 4, [2, 2, 2, 2], [0, 0, 0, 0]),
    "flaky": (noise_flaky, 3, [0, 1, 0], [0, 1, 0]),
    "known": (noise_known, 3, [0, 1, 1], [0, 1, 0]),
    "tabs": (noise_once_tabs, 1, [1], [0]),
    "dcsame": (family_dcsame, 3, [1, 2, 1], [1, 1, 0]),
    "flagsym": (family_flagsym, 3, [0, 2, 0], [0, 1, 2]),
    "release": (family_release, 3, [0, 1, 1], [0, 1, 2]),
}


def build(team, noise: int):
    """Ingest the corpus by source; ``noise`` multiplies the pure-noise sessions (typos and chatter)."""
    by_key = {k: [] for k in KEYS}
    day = 0
    for fam, (maker, n, keys, agents) in PLAN.items():
        for i in range(n):
            day = day % 28 + 1
            ext = f"lk-{fam}-{i}"
            by_key[KEYS[keys[i]]].append(doc(ext, maker(i), agent=AGENTS[agents[i]], task=fam, day=day))
    for j in range(8 * noise):
        day = day % 28 + 1
        maker = noise_typo if j % 2 else noise_chatter
        by_key[KEYS[j % 3]].append(doc(f"lk-noise-{j}", maker(j // 2), agent=AGENTS[j % 3], task="misc", day=day))
    total = 0
    for key, docs in by_key.items():
        total += len(ingest(team, docs, source=key))
    return total


@pytest.fixture
def dreamt(db, django_capture_on_commit_callbacks):
    def run(noise):
        team = TeamFactory(slug=f"larkspur-{noise}")
        store = StoreFactory(team=team, slug="eng")
        make_entry(store, key="frontend-tests", content=EXISTING)
        total = build(team, noise)
        with no_scope(), django_capture_on_commit_callbacks(execute=True):
            started = dreams.start_run(store)
        run = DreamRun.objects.get(pk=started.pk)
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert run.sessions_analysed == total
        proposals = list(Proposal.objects.filter(run=run))
        return run, proposals

    return run


def supporting(p):
    ids = ProposalEvidence.objects.filter(proposal=p).values_list("session__external_id", flat=True)
    return sorted(set(ids))


def describe(proposals):
    return "\n".join(
        f"- [{p.operation}/{p.kind}/{p.risk}] {p.content!r} k={p.prevalence_sessions}/{p.prevalence_of} "
        f"sources={p.prevalence_sources} targets={p.targets} sessions={supporting(p)}"
        for p in proposals
    )


def family_proposals(proposals, fam):
    return [p for p in proposals if any(s.startswith(f"lk-{fam}-") for s in supporting(p))]


def check_family(proposals, fam, must_contain, n_sources):
    # The lesson "look a file up before reading it" draws on every session that guessed a path, whatever its family:
    # another lesson from the same sessions, not a split of this one.
    mine = [p for p in family_proposals(proposals, fam) if not p.content.startswith("Paths were guessed")]
    _, n, keys, _ = PLAN[fam]
    good = [p for p in mine if all(w.lower() in p.content.lower() for w in must_contain)]
    assert good, f"no proposal for {fam} naming {must_contain}; all proposals:\n{describe(proposals)}"
    p = good[0]
    assert p.prevalence_sessions == n, describe([p])
    assert supporting(p) == [f"lk-{fam}-{i}" for i in range(n)], describe([p])
    assert p.prevalence_sources == n_sources, describe([p])
    # Nothing from the noise rides along in its evidence.
    assert all(s.startswith(f"lk-{fam}-") for s in supporting(p)), describe([p])
    # One proposal per lesson, not one per wording.
    assert len(mine) == 1, f"{fam} split or duplicated:\n{describe(mine)}"


NOISE = pytest.mark.parametrize("noise", [1, 2], ids=["noise1x", "noise2x"])


@NOISE
def test_corrected_command_docker_compose(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "compose", ["docker compose"], 2)


@NOISE
def test_corrected_command_same_arguments_other_shells_and_errors(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "dcsame", ["terraform -chdir=infra plan"], 2)


@NOISE
def test_rediscovered_same_symbol_other_tools(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "flagsym", ["backend/core/flag_loader.py"], 2)


@NOISE
def test_user_preference_poetry_over_pip(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "poetry", ["poetry"], 3)


@NOISE
def test_rediscovered_flags_location(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "flags", ["config/flags/registry.yaml"], 2)


@NOISE
def test_in_band_note_staging_reset(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "staging", ["staging", "02:00"], 2)


@NOISE
def test_in_band_note_release_cut_freer_wording(dreamt, noise):
    _, proposals = dreamt(noise)
    check_family(proposals, "release", ["tuesday"], 2)


@NOISE
def test_noise_stays_quiet(dreamt, noise):
    _, proposals = dreamt(noise)
    loud = [p for p in proposals if any(s.startswith(("lk-noise-", "lk-tabs-", "lk-flaky-")) for s in supporting(p))]
    assert not loud, f"proposals from noise:\n{describe(loud)}"
    worded = [
        p
        for p in proposals
        if any(
            w in p.content.lower() for w in ("biuld", "stauts", "pyhton", "mkae", "tabs", "flaky", "re-run", "rerun")
        )
    ]
    assert not worded, describe(worded)


@NOISE
def test_one_key_lesson_is_never_low_risk(dreamt, noise):
    _, proposals = dreamt(noise)
    mine = family_proposals(proposals, "one_key")
    for p in mine:
        assert p.prevalence_sources == 1, describe([p])
        assert p.risk != "low", describe([p])
        assert p.status in ("pending", "quarantined"), describe([p])


@NOISE
def test_known_lesson_not_proposed_again(dreamt, noise):
    _, proposals = dreamt(noise)
    dup = [p for p in proposals if "test:unit" in p.content and p.operation == "add"]
    assert not dup, f"duplicate of the existing entry:\n{describe(dup)}"
    mine = family_proposals(proposals, "known")
    assert all(p.operation != "add" for p in mine), describe(mine)
