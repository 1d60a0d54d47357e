"""Blind probe of the dream's judgement (fifth round): new families planted in 3+ sessions from 2+ sources, worded
differently, among noise and distractors. Written from the docs only (docs/dream-pipeline.md, docs/design.md,
DESIGN.md, the session schema); a failing test is a finding.

Families: a lesson of one task met by several agents (task scope); two groups of agents learning opposite lessons
(agent scope each); a lesson the agents later apply unprompted (the later sessions are no evidence); an entry served
and followed successfully (no evidence against it); one note with its number written three ways (1,000 / 1000 / one
thousand); one note with a duration written three ways (30s / 30 seconds / 30 s); one note in three languages; a
lesson buried after 200 noise events; and, in a second world, the policy's min_share on a big store (a lesson above
min_sessions but below min_share is not proposed, one above both is).

Written blind by a helper (stop 24): 7 of its 23 tests failed on the code it probed. Fixed as families
(tests/test_judgement_polarity.py): contradicting notes were one lesson and a denial reinforced the entry it denies
(a note's polarity is part of what it says now); "10k" was not 10000; `-timeout=30m` was not `-timeout 30m`; a wait
before a retry split by its duration. Marked as known gaps: narrowing a lesson to a task, and a drifted lesson."""

from __future__ import annotations

import datetime
import random
from types import SimpleNamespace

import pytest
from django.utils import timezone

from memory.models import ContextServe
from reviews import dreams
from reviews.dreams.selection import get_policy
from reviews.models import Proposal, ProposalEvidence, RunStatus

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
        "started_at": f"2025-05-{1 + minute // 600:02d}T{8 + (minute % 600) // 60:02d}:{minute % 60:02d}:00Z",
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


def note(text):
    return {"type": "memory_write", "content": text}


# ---------------------------------------------------------------- F1: one task, several agents
def task_migrate(i):
    return [
        user(["Add the invoices.due_at column.", "Apply the new schema.", "Rename users.nick.", "Add an index."][i]),
        call(f"m{i}", "make migrate"),
        result(f"m{i}", "make: *** No rule to make target 'migrate'.  Stop.", 2),
        call(f"n{i}", "make db-migrate"),
        result(f"n{i}", f"Applied migration 00{40 + i}_schema.sql"),
        assistant("Schema updated."),
    ]


# ---------------------------------------------------------------- F2: two groups, opposite lessons
def web_wants_pnpm(i):
    return [
        user(["Install the web deps.", "Fresh install for the web app.", "Reinstall node modules."][i]),
        call(f"w{i}", "npm ci"),
        result(
            f"w{i}",
            'npm ERR! This project is configured to use pnpm ("packageManager": "pnpm@8.15.0"). Use pnpm instead.',
            1,
        ),
        call(f"v{i}", "pnpm install --frozen-lockfile"),
        result(f"v{i}", f"Packages: +{800 + i}\nDone in 9.{i}s"),
        assistant("Installed."),
    ]


def api_wants_npm(i):
    return [
        user(["Install the api deps.", "Fresh install for the API service.", "Set up node modules for the api."][i]),
        call(f"a{i}", "pnpm install --frozen-lockfile"),
        result(
            f"a{i}",
            'ERR_PNPM_NO_LOCKFILE  Cannot install with "frozen-lockfile" because pnpm-lock.yaml is absent; '
            "this project uses package-lock.json",
            1,
        ),
        call(f"b{i}", "npm ci"),
        result(f"b{i}", f"added {500 + i} packages in 7s"),
        assistant("Installed."),
    ]


# ---------------------------------------------------------------- F3: learned, then applied unprompted
def docs_mistake(i):
    return [
        user(["Rebuild the docs.", "Regenerate the HTML documentation.", "Docs build please."][i]),
        call(f"h{i}", "make docs"),
        result(f"h{i}", "make: *** No rule to make target 'docs'.  Stop.", 2),
        call(f"j{i}", "make html"),
        result(f"j{i}", f"Build finished. The HTML pages are in _build/html ({120 + i} pages)."),
        assistant("Docs built."),
    ]


def docs_learned(i):
    return [
        user(["Rebuild the docs again.", "Docs once more please.", "HTML docs, fresh build."][i]),
        call(f"k{i}", "make html"),
        result(f"k{i}", f"Build finished. The HTML pages are in _build/html ({130 + i} pages)."),
        assistant("Docs built."),
    ]


# ---------------------------------------------------------------- F4: served, followed, worked
FOLLOWED_KEY, FOLLOWED_TEXT = "api-tests", "Run the API tests with `make test-api`."


def followed(i):
    return [
        user(["Run the API tests.", "Check the api suite still passes.", "API tests please.", "Test the API."][i]),
        assistant("Memory says to run the API tests with `make test-api`."),
        call(f"t{i}", "make test-api"),
        result(f"t{i}", f"{210 + i} passed in 12.{i}s"),
        assistant("All API tests pass."),
    ]


# ---------------------------------------------------------------- F5: one number, three spellings
RATE_NOTES = [
    "The payments API allows 1,000 requests per minute per key; above that it answers 429.",
    "Payments API rate limit: 1000 requests per minute per key, then 429.",
    "payments API: at most 1000 requests a minute for each key (429 beyond).",
    "The payments API rate limit is one thousand requests per minute per key; more gives 429.",
]


def rate_note(i):
    return [
        user(["Bulk-refund the batch.", "Why did the export fail halfway?", "Sync the payouts.", "Retry refunds."][i]),
        call(f"r{i}", "python scripts/payments_sync.py"),
        result(f"r{i}", f"synced {i + 3} batches"),
        note(RATE_NOTES[i]),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- F6: one duration, three spellings
TIMEOUT_NOTES = [
    "The e2e suite needs a per-test timeout of 30s; the default 5s is too short.",
    "e2e tests: set the per-test timeout to 30 seconds, the default of 5 seconds is too short.",
    "Per-test timeout for the e2e suite must be 30 s, not the default 5 s.",
]


def timeout_note(i):
    return [
        user(["Run the e2e suite.", "Why are the e2e tests flaky?", "e2e please."][i]),
        call(f"e{i}", "npx playwright test"),
        result(f"e{i}", f"{40 + i} passed (2.{i}m)"),
        note(TIMEOUT_NOTES[i]),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- F7: one note, three languages
REDIS_NOTES = [
    "The test Redis runs on port 6380 (set REDIS_TEST_URL), not on 6379.",
    "Der Test-Redis läuft auf Port 6380 (REDIS_TEST_URL setzen), nicht auf 6379.",
    "Le Redis de test écoute sur le port 6380 (définir REDIS_TEST_URL), pas sur 6379.",
    "Test Redis: port 6380, via REDIS_TEST_URL; 6379 is the dev one.",
]


def redis_note(i):
    return [
        user(["Run the cache tests.", "Die Cache-Tests bitte.", "Lance les tests du cache.", "Cache tests."][i]),
        call(f"c{i}", "pytest tests/cache -q"),
        result(f"c{i}", f"{17 + i} passed in 0.9s"),
        note(REDIS_NOTES[i]),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- F8: a lesson buried after 200 noise events
BURIED_AT = 200


def buried(i):
    events = [user("Tidy up the repo, then run the linters.")]
    for j in range((BURIED_AT - 1) // 2):
        events.append(call(f"z{i}-{j}", f"echo step-{i}-{j}"))
        events.append(result(f"z{i}-{j}", f"step-{i}-{j}"))
    events.append(assistant("Now the linters."))
    assert len(events) == BURIED_AT
    events += [
        call(f"l{i}", "make lint"),
        result(f"l{i}", "make: *** No rule to make target 'lint'.  Stop.", 2),
        call(f"q{i}", "make check"),
        result(f"q{i}", f"ruff: all checks passed ({60 + i} files)"),
        assistant("Linted."),
    ]
    return events


# ---------------------------------------------------------------- F10: a lesson that drifted (old sessions A, recent B)
def drift_old(i):
    return [
        user(["Ship the release.", "Deploy 3.1.", "Push the build live."][i]),
        call(f"o{i}", "make deploy"),
        result(f"o{i}", "make: *** No rule to make target 'deploy'.  Stop.", 2),
        call(f"p{i}", "make ship"),
        result(f"p{i}", f"Shipped build {300 + i}."),
        assistant("Shipped."),
    ]


def drift_new(i):
    return [
        user(["Ship the release.", "Deploy 4.0.", "Push the build live.", "Release it."][i]),
        call(f"s{i}", "make ship"),
        result(f"s{i}", "make: *** No rule to make target 'ship'.  Stop.", 2),
        call(f"u{i}", "make release"),
        result(f"u{i}", f"Released build {400 + i}."),
        assistant("Released."),
    ]


# ---------------------------------------------------------------- F11: fixed by waiting, whatever the wait
WAITS = ["sleep 5", "sleep 10", "sleep 3"]


def wait_fix(i):
    return [
        user(["Start the stack and run the integration tests.", "Integration tests please.", "Run it against db."][i]),
        call(f"d{i}", "docker compose up -d"),
        result(f"d{i}", "Container app-db-1  Started"),
        call(f"i{i}", "pytest tests/integration -q"),
        result(
            f"i{i}",
            'psycopg.OperationalError: connection failed: connection to server at "127.0.0.1", port 5432 failed: '
            "the database system is starting up",
            1,
        ),
        call(f"w{i}", WAITS[i]),
        result(f"w{i}", ""),
        call(f"j{i}", "pytest tests/integration -q"),
        result(f"j{i}", f"{25 + i} passed in 4.{i}s"),
        assistant("Integration tests pass."),
    ]


# ---------------------------------------------------------------- F12: an entry scoped to one agent, missed by others
SCOPED_KEY, SCOPED_TEXT = "seed-cmd", "Seed the dev data with `make seed-dev`, not `make seed`."


def scoped_miss(i):
    return [
        user(["Seed the dev database.", "Fill the dev db with demo data.", "Dev seed please."][i]),
        call(f"e{i}", "make seed"),
        result(f"e{i}", "make: *** No rule to make target 'seed'.  Stop.", 2),
        call(f"f{i}", "make seed-dev"),
        result(f"f{i}", f"Seeded {50 + i} rows."),
        assistant("Seeded."),
    ]


# ---------------------------------------------------------------- F13: 10k / 10,000 / 10000
SHARD_NOTES = [
    "The search index holds at most 10k documents per shard; reindex into a new shard beyond that.",
    "Search index: a shard holds at most 10,000 documents, reindex into a new shard beyond that.",
    "At most 10000 documents per search index shard; beyond that reindex into a new shard.",
]


def shard_note(i):
    return [
        user(["Why is search slow?", "Reindex the catalog.", "Search returns stale items."][i]),
        call(f"q{i}", "python manage.py search_stats"),
        result(f"q{i}", f"shards: {3 + i}"),
        note(SHARD_NOTES[i]),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- F14: two groups, contradicting notes
FRIDAY_YES = [
    "Staging deploys are allowed on Fridays.",
    "Deploying to staging on Fridays is allowed.",
    "On Fridays staging deploys are allowed.",
]
FRIDAY_NO = [
    "Staging deploys are not allowed on Fridays.",
    "Deploying to staging on Fridays is not allowed.",
    "On Fridays staging deploys are not allowed.",
]


def friday_note(i, yes):
    return [
        user(["Push this to staging.", "Staging deploy please.", "Can you put it on staging?"][i]),
        call(f"y{i}", "date +%A"),
        result(f"y{i}", "Friday"),
        note((FRIDAY_YES if yes else FRIDAY_NO)[i]),
        assistant("Noted."),
    ]


# ---------------------------------------------------------------- F15: notes now deny what an entry says
BACKUP_KEY, BACKUP_TEXT = "nightly-backup", "The nightly backup job runs on weekends too."
BACKUP_NOTES = [
    "The nightly backup job does not run on weekends anymore.",
    "Nightly backup job: it no longer runs on weekends.",
    "The nightly backup job does not run on weekends.",
]


def backup_note(i):
    return [
        user(["Restore Sunday's backup.", "Where is Saturday's dump?", "Check the weekend backups."][i]),
        call(f"k{i}", "ls /var/backups/nightly"),
        result(f"k{i}", "mon.sql.gz tue.sql.gz wed.sql.gz thu.sql.gz fri.sql.gz"),
        note(BACKUP_NOTES[i]),
        assistant("No weekend backups exist."),
    ]


# ------------------------------------ F16: a note the memory already says, number spelt otherwise
WEBHOOK_KEY, WEBHOOK_TEXT = "webhook-cap", "Webhook payloads are capped at 1,000 items; split bigger batches."
WEBHOOK_NOTES = [
    "Webhook payloads are capped at 1000 items, so split bigger batches.",
    "webhook payloads: capped at 1000 items; split bigger batches",
    "Split bigger batches: webhook payloads are capped at 1000 items.",
]


def webhook_note(i):
    return [
        user(["Send the order events.", "Replay the webhooks.", "Push the batch to the partner."][i]),
        call(f"h{i}", "python scripts/send_webhooks.py"),
        result(f"h{i}", f"sent {3 + i} payloads"),
        note(WEBHOOK_NOTES[i]),
        assistant("Sent."),
    ]


# ---------------------------------------------------------------- F17: one flag, spelt `-f v`, `-f=v`, after the args
GO_FIXES = ["go test -timeout 30m ./...", "go test -timeout=30m ./...", "go test ./... -timeout 30m"]


def go_timeout(i):
    return [
        user(["Run the Go tests.", "Full go test run please.", "Check the Go suite."][i]),
        call(f"g{i}", "go test ./..."),
        result(f"g{i}", f"panic: test timed out after 10m0s\nrunning tests:\n\tTestReplay{i} (10m0s)", 1),
        call(f"h{i}", GO_FIXES[i]),
        result(f"h{i}", f"ok  \tgithub.com/acme/replay\t{700 + i}.1s"),
        assistant("Tests pass."),
    ]


# ---------------------------------------------------------------- F18: repeats inside one session are one session
def repeated(i, times):
    events = [user(["Run the whole suite.", "All tests please.", "Full test run."][i % 3])]
    for j in range(times):
        events += [
            call(f"r{i}-{j}", "make test-all"),
            result(f"r{i}-{j}", "make: *** No rule to make target 'test-all'.  Stop.", 2),
            call(f"s{i}-{j}", "make test"),
            result(f"s{i}-{j}", f"{90 + j} passed"),
        ]
    return events + [assistant("Done.")]


def repeated_solo(i, times):
    events = [user(["Regenerate the icons.", "Icons please."][i % 2])]
    for j in range(times):
        events += [
            call(f"o{i}-{j}", "make icons"),
            result(f"o{i}-{j}", "make: *** No rule to make target 'icons'.  Stop.", 2),
            call(f"p{i}-{j}", "make sprites"),
            result(f"p{i}-{j}", f"wrote {12 + j} sprites"),
        ]
    return events + [assistant("Done.")]


# ---------------------------------------------------------------- F19: a note naming a path in each one's checkout
CHECKOUTS = ["/home/ana/work/shop", "/Users/bo/code/shop", "/home/chen/src/shop"]


def path_note(i):
    root = CHECKOUTS[i]
    return [
        user(["Load the golden fixtures.", "Where are the golden files?", "Update the golden fixtures."][i]),
        call(f"f{i}", f"ls {root}/tests/golden"),
        result(f"f{i}", "orders.json users.json"),
        note(f"The golden fixtures live in {root}/tests/golden; regenerate them with `make golden`."),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- noise
def noise(i):
    rnd = random.Random(5000 + i)
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
AGENTS = ["coder-a", "coder-b", "ops-bot"]


def build_world():
    team = TeamFactory(slug="probe5")
    store = StoreFactory(team=team, slug="eng")
    followed_entry = make_entry(store, key=FOLLOWED_KEY, content=FOLLOWED_TEXT)
    make_entry(store, key=BACKUP_KEY, content=BACKUP_TEXT)
    make_entry(store, key=WEBHOOK_KEY, content=WEBHOOK_TEXT)
    scoped_entry = make_entry(store, key=SCOPED_KEY, content=SCOPED_TEXT, scope_agent="coder-a")

    by_source = {KEY_A: [], KEY_B: [], KEY_C: []}
    tasks = {}
    minute = 0

    def add(source, ext, events, agent, task, started=None):
        nonlocal minute
        minute += 1
        d = doc(ext, events, agent=agent, task=task, minute=minute)
        if started:
            d["started_at"] = started
        by_source[source].append(d)
        tasks[ext] = (agent, task)

    for i in range(3):  # January: `make ship` is the way
        add(
            [KEY_A, KEY_B, KEY_C][i],
            f"drift-old-{i}",
            drift_old(i),
            AGENTS[i],
            "release",
            f"2025-01-0{i + 2}T10:00:00Z",
        )
    for i in range(4):  # June: `make ship` is gone, `make release` replaced it
        add([KEY_B, KEY_C][i % 2], f"drift-new-{i}", drift_new(i), AGENTS[i % 3], "release", f"2025-06-1{i}T10:00:00Z")
    for i in range(3):
        add([KEY_C, KEY_A, KEY_B][i], f"wait-{i}", wait_fix(i), AGENTS[i], "integration")
        add([KEY_A, KEY_C, KEY_B][i], f"shard-{i}", shard_note(i), AGENTS[i], "search")
        add([KEY_A, KEY_B, KEY_C][i], f"fri-yes-{i}", friday_note(i, True), AGENTS[i], "staging")
        add([KEY_B, KEY_C, KEY_A][i], f"fri-no-{i}", friday_note(i, False), AGENTS[i], "staging")
        add([KEY_C, KEY_B, KEY_A][i], f"backup-{i}", backup_note(i), AGENTS[i], "ops")
        add([KEY_B, KEY_A, KEY_C][i], f"hook-{i}", webhook_note(i), AGENTS[i], "webhooks")
        add([KEY_C, KEY_A, KEY_B][i], f"go-{i}", go_timeout(i), AGENTS[i], "gotest")
        add([KEY_A, KEY_B, KEY_C][i], f"rep-{i}", repeated(i, 6 if i == 0 else 1), AGENTS[i], "suite")
    for i in range(3):
        add([KEY_B, KEY_C, KEY_A][i], f"golden-{i}", path_note(i), AGENTS[i], "fixtures")
        by_source[[KEY_B, KEY_C, KEY_A][i]][-1]["metadata"] = {"cwd": CHECKOUTS[i]}
    for i in range(2):
        add([KEY_A, KEY_B][i], f"solo-{i}", repeated_solo(i, 6 if i == 0 else 1), AGENTS[i], "icons")
    soon = timezone.now() + datetime.timedelta(hours=1)
    for i in range(3):  # coder-b and ops-bot asked for context after the entry went live; it is coder-a's only
        add(
            [KEY_A, KEY_B, KEY_C][i],
            f"miss-{i}",
            scoped_miss(i),
            ["coder-b", "ops-bot"][i % 2],
            "seed",
            (soon + datetime.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

    for i in range(4):
        add([KEY_A, KEY_B][i % 2], f"task-{i}", task_migrate(i), AGENTS[i % 3], "schema")
    for i in range(3):
        add([KEY_A, KEY_B, KEY_C][i], f"web-{i}", web_wants_pnpm(i), "web-bot", "deps")
        add([KEY_C, KEY_A, KEY_B][i], f"api-{i}", api_wants_npm(i), "api-bot", "deps")
        add([KEY_B, KEY_C, KEY_A][i], f"learn-{i}", docs_mistake(i), AGENTS[i], "docs")
    for i in range(3):  # later: the same agents run the right target straight away
        add([KEY_A, KEY_B, KEY_C][i], f"learned-{i}", docs_learned(i), AGENTS[i], "docs")
    for i in range(4):
        add([KEY_A, KEY_C][i % 2], f"follow-{i}", followed(i), AGENTS[i % 3], "tests")
        add([KEY_B, KEY_C][i % 2], f"rate-{i}", rate_note(i), AGENTS[(i + 1) % 3], "payments")
        add([KEY_C, KEY_A][i % 2], f"redis-{i}", redis_note(i), AGENTS[(i + 2) % 3], "cache")
    for i in range(3):
        add([KEY_A, KEY_B, KEY_C][i], f"timeout-{i}", timeout_note(i), AGENTS[i], "e2e")
        add([KEY_C, KEY_B, KEY_A][i], f"buried-{i}", buried(i), AGENTS[i], "lint")
    for i in range(2):  # the web and api bots do other things too
        add([KEY_A, KEY_B][i], f"web-noise-{i}", noise(100 + i), "web-bot", "chore")
        add([KEY_B, KEY_C][i], f"api-noise-{i}", noise(200 + i), "api-bot", "chore")
    for i in range(12):  # the three coders do other things, one of them in the schema task
        add([KEY_A, KEY_B, KEY_C][i % 3], f"noise-{i}", noise(i), AGENTS[i % 3], ["bugfix", "feature", "schema"][i % 3])

    for source, docs in by_source.items():
        ingest(team, docs, source=source)
    for i in range(4):
        ContextServe.objects.create(
            team=team,
            store=store,
            session_external_id=f"follow-{i}",
            entries=[
                {
                    "entry_id": followed_entry.pk,
                    "key": FOLLOWED_KEY,
                    "version": 1,
                    "content_hash": followed_entry.content_hash,
                }
            ],
        )
    for i in range(3):
        ContextServe.objects.create(
            team=team,
            store=store,
            agent=["coder-b", "ops-bot"][i % 2],
            task="seed",
            query="seed the dev database",
            session_external_id=f"miss-{i}",
            entries=[
                {
                    "entry_id": followed_entry.pk,
                    "key": FOLLOWED_KEY,
                    "version": 1,
                    "content_hash": followed_entry.content_hash,
                }
            ],
        )
    n = sum(len(d) for d in by_source.values())
    return SimpleNamespace(team=team, store=store, n=n, tasks=tasks, scoped=scoped_entry)


@pytest.fixture
def dreamt(db, django_capture_on_commit_callbacks):
    world = build_world()
    with no_scope(), django_capture_on_commit_callbacks(execute=True):
        run = dreams.start_run(world.store)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.sessions_analysed == world.n
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
    return [p for p in world.proposals if any(s.startswith(prefix) for s in supporting(world, p))]


def in_scope(world, agent, task):
    return sum(1 for a, t in world.tasks.values() if (not agent or a == agent) and (not task or t == task))


# ---------------------------------------------------------------- tests, one per family
def test_f1_a_lesson_of_one_task_met_by_three_agents_is_not_scoped_to_one_agent(dreamt):
    found = about(dreamt, "task-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and not p.targets and "make db-migrate" in p.content, p.content
    assert supporting(dreamt, p) == [f"task-{i}" for i in range(4)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources) == (4, 2)
    assert p.scope_agent in (None, ""), describe(dreamt)  # three agents
    # k of N is counted in the lesson's scope: the schema task's 8 sessions when it is task-scoped, else all.
    assert p.prevalence_of == in_scope(dreamt, None, p.scope_task or None), (p.scope_task, p.prevalence_of)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "by decision (stop 26): a lesson several agents meet is for every task, counted among all sessions "
        "(seven tests of three other probes expect that); only one agent's lesson is narrowed to a task"
    ),
)
def test_f1b_a_lesson_only_one_task_ever_meets_is_scoped_to_that_task(dreamt):
    """DESIGN: memory can be scoped to a task; a lesson all of whose sessions are one task's (4 of that task's 8,
    none of the other 40) is the task's lesson, as one agent's lesson is the agent's."""
    (p,) = about(dreamt, "task-")
    assert p.scope_task == "schema", describe(dreamt)
    assert p.prevalence_of == in_scope(dreamt, None, "schema") == 8


def test_f2_opposite_lessons_of_two_agents_are_each_scoped_to_their_agent(dreamt):
    web, api = about(dreamt, "web-"), about(dreamt, "api-")
    assert len(web) == 1 and len(api) == 1, describe(dreamt)
    (w,), (a,) = web, api
    assert w.pk != a.pk, describe(dreamt)
    assert "pnpm install" in w.content and supporting(dreamt, w) == [f"web-{i}" for i in range(3)], describe(dreamt)
    assert "npm ci" in a.content and supporting(dreamt, a) == [f"api-{i}" for i in range(3)], describe(dreamt)
    assert w.scope_agent == "web-bot" and a.scope_agent == "api-bot", describe(dreamt)
    assert w.prevalence_of == in_scope(dreamt, "web-bot", w.scope_task or None)
    assert a.prevalence_of == in_scope(dreamt, "api-bot", a.scope_task or None)
    assert (w.prevalence_sessions, w.prevalence_sources, a.prevalence_sessions, a.prevalence_sources) == (3, 3, 3, 3)


def test_f3_sessions_that_already_apply_the_lesson_are_not_its_evidence(dreamt):
    found = about(dreamt, "learn")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "make html" in p.content, p.content
    assert supporting(dreamt, p) == [f"learn-{i}" for i in range(3)], describe(dreamt)
    assert p.prevalence_sessions == 3 and p.prevalence_sources == 3


def test_f4_an_entry_served_and_followed_with_success_is_left_alone(dreamt):
    touching = [d for p, d in zip(dreamt.proposals, describe(dreamt)) if FOLLOWED_KEY in (p.targets or [])]
    assert not touching, touching
    assert not about(dreamt, "follow-"), describe(dreamt)


def test_f5_one_number_written_three_ways_is_one_note(dreamt):
    found = about(dreamt, "rate-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "429" in p.content and "payments" in p.content.lower(), p.content
    assert "1000" in p.content.replace(",", "") or "thousand" in p.content, p.content
    assert supporting(dreamt, p) == [f"rate-{i}" for i in range(4)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (4, 2, dreamt.n)


def test_f6_one_duration_written_three_ways_is_one_note(dreamt):
    found = about(dreamt, "timeout-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "30" in p.content and "e2e" in p.content.lower(), p.content
    assert supporting(dreamt, p) == [f"timeout-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (3, 3, dreamt.n)


def test_f7_one_note_in_three_languages_is_one_lesson(dreamt):
    found = about(dreamt, "redis-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "6380" in p.content and "REDIS_TEST_URL" in p.content, p.content
    assert supporting(dreamt, p) == [f"redis-{i}" for i in range(4)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (4, 2, dreamt.n)


def test_f8_a_lesson_buried_after_200_noise_events_is_found_with_its_event(dreamt):
    found = about(dreamt, "buried-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "make check" in p.content, p.content
    assert supporting(dreamt, p) == [f"buried-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources) == (3, 3)
    indexes = list(ProposalEvidence.objects.filter(proposal=p).values_list("event_index", "excerpt"))
    assert indexes and all(i >= BURIED_AT for i, _ in indexes), indexes
    assert not any("step-" in e for _, e in indexes), indexes


def test_f10_a_drifted_lesson_does_not_end_in_two_contradicting_adds(dreamt):
    """January's sessions say `make ship` is the fix; June's say `make ship` no longer exists and `make release` is.
    The dream must not propose, side by side, "use `make ship`" and "`make ship` fails, use `make release`": the
    recent lesson is proposed (4 sessions), and no proposal tells the agents to run `make ship`."""
    new = about(dreamt, "drift-new-")
    assert len(new) == 1 and "make release" in new[0].content, describe(dreamt)
    assert supporting(dreamt, new[0]) == [f"drift-new-{i}" for i in range(4)], describe(dreamt)
    recommends_ship = [
        d
        for p, d in zip(dreamt.proposals, describe(dreamt))
        if "make ship" in p.content and "make release" not in p.content
    ]
    assert not recommends_ship, describe(dreamt)


def test_f11_a_failure_fixed_by_waiting_is_one_lesson_whatever_the_wait(dreamt):
    """The same step (a wait) before an unchanged retry that then worked, in 3 sessions whose waits differ only in
    an operand (5, 10, 3 seconds): one lesson, not three isolated ones."""
    found = about(dreamt, "wait-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "sleep" in p.content, p.content
    assert supporting(dreamt, p) == [f"wait-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources) == (3, 3)


def test_f12_an_agent_scoped_entry_other_agents_keep_needing_is_widened_not_just_reinforced(dreamt):
    """coder-a's entry says the fix; coder-b and ops-bot (who are never served it: DESIGN guardrail 5, the ranking
    never serves another agent's entry) make the mistake in 3 sessions after it went live, having asked for context.
    docs/dream-pipeline.md: another agent's misses widen it to every agent. Either a re-scope of the entry or an add
    for every agent is acceptable; silence (the lesson counted as already known) is not."""
    found = about(dreamt, "miss-")
    assert found, (describe(dreamt), dreamt.run.outcome)
    assert all(p.scope_agent in (None, "") for p in found), describe(dreamt)
    assert any(
        (p.operation == "update" and p.targets == [SCOPED_KEY]) or (p.operation == "add" and "seed-dev" in p.content)
        for p in found
    ), describe(dreamt)


def test_f13_ten_thousand_written_10k_10000_and_10_000_is_one_note(dreamt):
    found = about(dreamt, "shard-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "shard" in p.content.lower(), p.content
    assert supporting(dreamt, p) == [f"shard-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources) == (3, 3)


def test_f14_contradicting_notes_are_never_one_lesson_supported_by_both_sides(dreamt):
    """Three sessions note that staging deploys are allowed on Fridays, three that they are not. Whatever the dream
    does with the contradiction (the docs leave it to review or to the consolidation step), no single proposal may
    cite both sides as its support, and a proposal citing one side must say that side ("not" kept: function words
    are the lesson's structure and never elided)."""
    for p in dreamt.proposals:
        sup = supporting(dreamt, p)
        yes = [s for s in sup if s.startswith("fri-yes-")]
        no = [s for s in sup if s.startswith("fri-no-")]
        assert not (yes and no), describe(dreamt)
        if no:
            assert "not" in p.content.lower().split(), (p.content, sup)
        if yes:
            assert "not" not in p.content.lower().split(), (p.content, sup)


def test_f15_notes_that_deny_an_entry_update_it_not_reinforce_it(dreamt):
    """The entry says the backup runs on weekends; three sessions note it does not (any more). That is evidence
    against the entry: an update (or a supersession) of it that says "not", never silence as if it were known."""
    found = about(dreamt, "backup-")
    assert len(found) == 1, (describe(dreamt), dreamt.run.outcome)
    p = found[0]
    assert p.operation in ("update", "merge") and BACKUP_KEY in p.targets, describe(dreamt)
    assert "not" in p.content.lower().split() or "no longer" in p.content.lower(), p.content
    assert supporting(dreamt, p) == [f"backup-{i}" for i in range(3)]


def test_f16_a_note_the_memory_already_says_with_the_number_spelt_otherwise_is_reinforcement(dreamt):
    """1,000 in the entry, 1000 in the notes: the same fact, already known. No add beside it, no rewrite of it."""
    touching = [d for p, d in zip(dreamt.proposals, describe(dreamt)) if WEBHOOK_KEY in (p.targets or [])]
    assert not touching, touching
    assert not about(dreamt, "hook-"), describe(dreamt)


def test_f17_one_flag_spelt_three_ways_is_one_fix(dreamt):
    found = about(dreamt, "go-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "30m" in p.content and "timeout" in p.content, p.content
    assert supporting(dreamt, p) == [f"go-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources) == (3, 3)


def test_f18_a_mistake_repeated_in_one_session_counts_once(dreamt):
    found = about(dreamt, "rep-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "make test" in p.content, p.content
    assert supporting(dreamt, p) == [f"rep-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources, p.prevalence_of) == (3, 3, dreamt.n)


def test_f18b_six_repeats_in_one_session_and_one_in_another_are_two_sessions_not_a_pattern(dreamt):
    assert not about(dreamt, "solo-"), describe(dreamt)
    assert not [p for p in dreamt.proposals if "make sprites" in p.content], describe(dreamt)


def test_f19_a_note_naming_a_path_in_each_ones_checkout_is_one_note_without_homes(dreamt):
    found = about(dreamt, "golden-")
    assert len(found) == 1, describe(dreamt)
    p = found[0]
    assert p.operation == "add" and "tests/golden" in p.content and "make golden" in p.content, p.content
    for junk in ("/home/", "/Users/", "ana", "bo/", "chen"):
        assert junk not in p.content and junk not in p.rationale, (junk, p.content, p.rationale)
    assert supporting(dreamt, p) == [f"golden-{i}" for i in range(3)], describe(dreamt)
    assert (p.prevalence_sessions, p.prevalence_sources) == (3, 3)


def test_noise_gives_nothing(dreamt):
    loud = {}
    for prefix in ("noise-", "web-noise-", "api-noise-", "learned-", "follow-"):
        hits = [d for d in describe(dreamt) if any(s.startswith(prefix) for s in d[-1])]
        if hits:
            loud[prefix] = hits
    for p in dreamt.proposals:
        if "step-" in p.content or "echo" in p.content:
            loud.setdefault("echo", []).append(p.content)
    assert not loud, loud


# ---------------------------------------------------------------- second world: min_share on a big store
def rare_fix(i):
    return [
        user(["Regenerate the API client.", "Update the generated client.", "Client codegen please."][i]),
        call(f"g{i}", "make client"),
        result(f"g{i}", "make: *** No rule to make target 'client'.  Stop.", 2),
        call(f"h{i}", "make codegen"),
        result(f"h{i}", f"generated {30 + i} files"),
        assistant("Regenerated."),
    ]


def common_fix(i):
    return [
        user(["Bundle the frontend.", "Build the UI.", "Frontend build.", "Bundle please.", "UI bundle."][i]),
        call(f"u{i}", "make bundle"),
        result(f"u{i}", "make: *** No rule to make target 'bundle'.  Stop.", 2),
        call(f"v{i}", "make assets"),
        result(f"v{i}", f"built {70 + i} assets"),
        assistant("Bundled."),
    ]


@pytest.fixture
def share_dreamt(db, django_capture_on_commit_callbacks):
    team = TeamFactory(slug="probe5-share")
    store = StoreFactory(team=team, slug="big")
    policy = get_policy(store)
    policy.min_sessions = 3
    policy.min_share = 0.1
    policy.save()
    docs = {KEY_A: [], KEY_B: []}
    minute = 0
    for i in range(3):
        minute += 1
        docs[[KEY_A, KEY_B][i % 2]].append(doc(f"rare-{i}", rare_fix(i), agent=AGENTS[i], task="client", minute=minute))
    for i in range(5):
        minute += 1
        docs[[KEY_B, KEY_A][i % 2]].append(
            doc(f"common-{i}", common_fix(i), agent=AGENTS[i % 3], task="ui", minute=minute)
        )
    for i in range(32):
        minute += 1
        docs[[KEY_A, KEY_B][i % 2]].append(
            doc(f"bg-{i}", noise(300 + i), agent=AGENTS[i % 3], task=["bugfix", "feature"][i % 2], minute=minute)
        )
    for source, d in docs.items():
        ingest(team, d, source=source)
    with no_scope(), django_capture_on_commit_callbacks(execute=True):
        run = dreams.start_run(store)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.sessions_analysed == 40
    world = SimpleNamespace(team=team, store=store, n=40, run=run)
    world.proposals = list(Proposal.objects.filter(run=run))
    world.report = {p["id"]: p for p in dreams.report(run)["proposals"]}
    return world


def test_f9_a_lesson_below_min_share_is_not_proposed_on_a_big_store(share_dreamt):
    """3 of 40 sessions (7.5%) passes min_sessions 3 but not min_share 0.1: not recurrent, not proposed."""
    assert not about(share_dreamt, "rare-"), describe(share_dreamt)
    assert not [p for p in share_dreamt.proposals if "codegen" in p.content], describe(share_dreamt)


def test_f9b_a_lesson_above_min_share_is_proposed_with_k_of_n(share_dreamt):
    """5 of 40 sessions (12.5%) passes both."""
    found = about(share_dreamt, "common-")
    assert len(found) == 1, describe(share_dreamt)
    p = found[0]
    assert p.operation == "add" and "make assets" in p.content, p.content
    assert supporting(share_dreamt, p) == [f"common-{i}" for i in range(5)]
    assert (p.prevalence_sessions, p.prevalence_sources) == (5, 2)
    assert p.prevalence_of == (40 if not p.scope_task else 5), (p.scope_task, p.prevalence_of)
