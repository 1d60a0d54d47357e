"""Replay benchmark: does the loop work? Scripted agents (no model) make a planted mistake unless the context they
are served holds its lesson.

    python bench/replay.py [--sessions N] [--seed S] [--offline SHARE] [--slip P] [--keep FILE]

On a scratch SQLite database with tasks in-process (the embedded default configuration; nothing else is needed):

1. A team, a store and an agent key. The store starts with one planted useless entry (store-wide, so every agent gets
   it; agents that get it find it useless and say so through the feedback endpoint).
2. Round 1: N sessions. Each scripted agent pulls its context from the real API (``GET /api/v1/context/`` with its
   agent, task and session id, through Django's test client and the full API stack), then works: it makes its
   planted mistake (with probability ``1 - slip``... see below) unless the context text holds the lesson's fix, and
   pushes the transcript (``POST /api/v1/sessions/``). A share ``--offline`` of the sessions pull no context at all
   (agents that run without Dreamweb): the comparison group effectiveness needs.
3. A dream over the store (rules analyzer); a scripted reviewer approves every memory proposal (add, update,
   remove) that is pending; the policy stays manual.
4. Round 2: N sessions, as round 1. Then a second dream, which analyses round 2 (its proposals are reported, not
   decided).
5. Report: per planted mistake, the repeat rate in round 1 and in round 2 (the truth of the simulation); the
   effectiveness figures the project computed for the lesson that the dream wrote (``reviews.effectiveness``)
   next to the simulation's own counts; whether the useless entry was proposed for removal.

The last line, for scripts: ``repeat_before=R1 repeat_after=R2 useless_removed=yes|no`` (rates 0-1 over every
planted mistake's sessions).

A scripted agent that is not given the lesson makes its mistake with probability ``--mistake`` (default 0.9): real
agents do not fail every time. With the lesson in its context it never does (the simulation's truth: the lesson
works when served).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mistake:
    """A planted mistake: the agent and task that make it, the words that show its lesson is in the context, and
    the events of a session with the mistake and of one without."""

    name: str
    agent: str
    task: str
    query: str
    lesson_words: tuple[str, ...]

    def events(self, i: int, *, mistaken: bool) -> list[dict]:
        return MAKERS[self.name](i, mistaken)


def _deploy(i: int, mistaken: bool) -> list[dict]:
    where = ["services/api", "services/web", "tools/cli", "infra"][i % 4]
    out = [{"type": "message", "role": "user", "content": f"Please ship the {where} change to production."}]
    if mistaken:
        out += [
            {"type": "tool_call", "id": f"a{i}", "name": "bash", "arguments": {"command": "make deploy"}},
            {
                "type": "tool_result",
                "call_id": f"a{i}",
                "content": f"make: *** No rule to make target 'deploy'.  Stop. (in /srv/{where})",
                "is_error": True,
                "exit_code": 2,
            },
        ]
    out += [
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "arguments": {"command": "make release"}},
        {"type": "tool_result", "call_id": f"b{i}", "content": f"Released build {1000 + i}.", "exit_code": 0},
        {"type": "message", "role": "assistant", "content": "Shipped."},
    ]
    return out


def _pnpm(i: int, mistaken: bool) -> list[dict]:
    package = ["date-fns", "zod", "clsx", "dayjs"][i % 4]
    wording = [
        "No, don't use npm here, we use pnpm for this repo.",
        "Stop using npm please; this project is on pnpm.",
        "We always install with pnpm, not npm.",
        "Use pnpm instead of npm for installs.",
    ][i % 4]
    out = [{"type": "message", "role": "user", "content": f"Add the {package} dependency."}]
    if mistaken:
        out += [
            {"type": "tool_call", "id": f"n{i}", "name": "bash", "arguments": {"command": f"npm install {package}"}},
            {"type": "tool_result", "call_id": f"n{i}", "content": "added 1 package", "exit_code": 0},
            {"type": "message", "role": "user", "content": wording},
        ]
    out += [
        {"type": "tool_call", "id": f"p{i}", "name": "bash", "arguments": {"command": f"pnpm add {package}"}},
        {"type": "tool_result", "call_id": f"p{i}", "content": "Done in 1.2s", "exit_code": 0},
    ]
    return out


def _tests(i: int, mistaken: bool) -> list[dict]:
    target = ["tests/test_api.py", "tests/test_models.py", "tests/test_views.py"][i % 3]
    out = [{"type": "message", "role": "user", "content": f"Run the tests in {target} and fix what fails."}]
    if mistaken:
        out += [
            {"type": "tool_call", "id": f"t{i}", "name": "bash", "arguments": {"command": f"pytest {target}"}},
            {
                "type": "tool_result",
                "call_id": f"t{i}",
                "content": "ImportError while loading conftest: ModuleNotFoundError: No module named 'shop'",
                "is_error": True,
                "exit_code": 4,
            },
        ]
    out += [
        {"type": "tool_call", "id": f"u{i}", "name": "bash", "arguments": {"command": f"python -m pytest {target}"}},
        {"type": "tool_result", "call_id": f"u{i}", "content": f"{10 + i % 5} passed in 0.8s", "exit_code": 0},
    ]
    return out


MAKERS = {"deploy": _deploy, "pnpm": _pnpm, "tests": _tests}
MISTAKES = [
    Mistake("deploy", "deploy-bot", "release", "ship the change to production", ("make release",)),
    Mistake("pnpm", "web-bot", "dependencies", "add a dependency", ("pnpm",)),
    Mistake("tests", "qa-bot", "tests", "run the tests", ("python -m pytest",)),
]
USELESS_KEY = "office-coffee"
USELESS = "The office coffee machine is descaled on Monday mornings."


@dataclass
class Tally:
    """The simulation's truth for one planted mistake in one round."""

    sessions: int = 0
    mistakes: int = 0
    served: int = 0  # sessions whose context held the lesson
    served_mistakes: int = 0
    unserved: int = 0
    unserved_mistakes: int = 0

    @property
    def rate(self) -> float:
        return self.mistakes / self.sessions if self.sessions else 0.0


@dataclass
class Sim:
    api: object
    rng: random.Random
    offline: float
    mistake_p: float
    tallies: dict = field(default_factory=dict)  # (round, mistake name) -> Tally
    useless_rated: int = 0
    n: int = 0

    def session(self, rnd: int, m: Mistake) -> None:
        self.n += 1
        external_id = f"r{rnd}-{m.name}-{self.n:04d}"
        text = ""
        if self.rng.random() >= self.offline:
            r = self.api.get(
                "/api/v1/context/",
                {"store": "eng", "agent": m.agent, "task": m.task, "query": m.query, "session": external_id},
            )
            assert r.status_code == 200, r.content
            body = r.json()
            text = body["text"]
            if any(item["key"] == USELESS_KEY for item in body["items"]):
                # The agent used nothing of it: it says so (what an MCP agent's `feedback` tool sends).
                fb = self.api.post(
                    f"/api/v1/stores/eng/entries/{USELESS_KEY}/feedback/",
                    {"helpful": False, "source": "replay", "session": external_id},
                )
                assert fb.status_code == 201, fb.content
                self.useless_rated += 1
        knows = all(w in text for w in m.lesson_words)
        mistaken = not knows and self.rng.random() < self.mistake_p
        t = self.tallies.setdefault((rnd, m.name), Tally())
        t.sessions += 1
        t.mistakes += int(mistaken)
        if knows:
            t.served += 1
            t.served_mistakes += int(mistaken)
        else:
            t.unserved += 1
            t.unserved_mistakes += int(mistaken)
        doc = {
            "external_id": external_id,
            "agent": m.agent,
            "task": m.task,
            "started_at": _now_iso(),
            "outcome": "success",
            "events": m.events(self.n, mistaken=mistaken),
        }
        r = self.api.post("/api/v1/sessions/", doc)
        assert r.status_code in (200, 201), r.content

    def round(self, rnd: int, n: int) -> None:
        for i in range(n):
            self.session(rnd, MISTAKES[i % len(MISTAKES)])


def _now_iso() -> str:
    from django.utils import timezone

    return timezone.now().isoformat()


class Api:
    """The real API in-process: Django's test client with the key header and JSON bodies."""

    def __init__(self, raw_key: str):
        from django.test import Client

        self.client = Client()
        self.headers = {"Authorization": f"Api-Key {raw_key}"}

    def get(self, path, query):
        return self.client.get(path, query, headers=self.headers)

    def post(self, path, body):
        import json

        return self.client.post(path, json.dumps(body), content_type="application/json", headers=self.headers)


def setup_django(db_path: str) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.pop("REDIS_URL", None)  # tasks in-process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    os.environ.setdefault("DREAMWEB_SECRET_KEY", "replay-bench")
    sys.path.insert(0, str(ROOT))
    import django
    from django.db.backends.signals import connection_created

    def scratch_pragmas(sender, connection, **kwargs):
        # A scratch database: no fsync per commit (a loaded machine's disk made the bench wait, not work).
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=OFF")

    connection_created.connect(scratch_pragmas)
    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def dream(store, reviewer, *, approve: bool) -> dict:
    """One dream over the store; with ``approve``, the scripted reviewer approves every pending memory proposal.
    Returns what happened to the proposals."""
    from reviews import dreams, services
    from reviews.models import Proposal, ProposalStatus

    run = dreams.start_run(store, trigger="command")
    run.refresh_from_db()
    proposals = list(Proposal.objects.filter(run=run).order_by("id"))
    decided = {"applied": 0, "conflict": 0}
    if approve:
        for p in proposals:
            if p.status == ProposalStatus.PENDING and p.target_kind == "memory":
                done = services.approve(p, user=reviewer, reason="scripted reviewer")
                decided["applied" if done.status == ProposalStatus.APPLIED else "conflict"] += 1
    return {"run": run, "proposals": proposals, "decided": decided}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=60, help="sessions per round (default 60)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--offline", type=float, default=0.1, help="share of sessions that pull no context (0.1)")
    ap.add_argument("--mistake", type=float, default=0.9, help="chance of the mistake without the lesson (0.9)")
    ap.add_argument("--keep", help="keep the scratch database at this path")
    args = ap.parse_args(argv)

    started = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="dreamweb-replay-")
    setup_django(args.keep or os.path.join(tmp.name, "replay.sqlite3"))

    from django.contrib.auth import get_user_model

    from dreamweb.models import AgentKey, Membership, Role, Team
    from dreamweb.provenance import Author
    from memory.models import EntryStatus, MemoryEntry, MemoryStore
    from memory.services import create_entry
    from reviews import effectiveness

    team = Team.objects.create(slug="replay", name="Replay")
    store = MemoryStore.objects.create(team=team, slug="eng", name="Engineering")
    create_entry(store, key=USELESS_KEY, content=USELESS, author=Author.system())
    reviewer = get_user_model().objects.create(username="scripted-reviewer")
    Membership.objects.create(team=team, user=reviewer, role=Role.REVIEWER)
    _, raw = AgentKey.generate(
        team=team, name="replay", scopes=["sessions:write", "memory:read", "dreams"], writable_stores=[]
    )
    sim = Sim(Api(raw), random.Random(args.seed), args.offline, args.mistake)

    sim.round(1, args.sessions)
    first = dream(store, reviewer, approve=True)
    lessons = {
        e.key: e.content
        for e in MemoryEntry.objects.filter(store=store, status=EntryStatus.ACTIVE).exclude(key=USELESS_KEY)
    }
    sim.round(2, args.sessions)
    second = dream(store, reviewer, approve=False)

    print(
        f"Replay: {args.sessions} sessions a round, seed {args.seed}, {args.offline:.0%} offline, mistake chance "
        f"{args.mistake:.0%} without the lesson; {time.perf_counter() - started:.1f} s"
    )
    print(
        f"Dream 1: {len(first['proposals'])} proposals, {first['decided']['applied']} approved by the scripted "
        f"reviewer; dream 2: {len(second['proposals'])} proposals"
    )
    print()
    print(f"{'mistake':<8} {'round 1':>14} {'round 2':>14} {'change':>8}")
    total = {1: [0, 0], 2: [0, 0]}
    for m in MISTAKES:
        t1, t2 = sim.tallies.get((1, m.name), Tally()), sim.tallies.get((2, m.name), Tally())
        for rnd, t in ((1, t1), (2, t2)):
            total[rnd][0] += t.mistakes
            total[rnd][1] += t.sessions
        change = f"{(t2.rate - t1.rate) / t1.rate:+.0%}" if t1.rate else "n/a"
        print(
            f"{m.name:<8} {t1.mistakes:>3}/{t1.sessions:<3} {t1.rate:>5.2f} {t2.mistakes:>3}/{t2.sessions:<3} "
            f"{t2.rate:>5.2f} {change:>8}"
        )
    before = total[1][0] / total[1][1] if total[1][1] else 0.0
    after = total[2][0] / total[2][1] if total[2][1] else 0.0

    print()
    print("Effectiveness the project computed for each lesson, against the simulation's truth (round 2):")
    effects = {e.key: e for e in effectiveness.store_effects(store)}
    for m in MISTAKES:
        key = next((k for k, text in lessons.items() if all(w in text for w in m.lesson_words)), None)
        t = sim.tallies.get((2, m.name), Tally())
        truth = f"truth: served {t.served_mistakes}/{t.served}, not served {t.unserved_mistakes}/{t.unserved}"
        if key is None:
            print(f"  {m.name}: no lesson was written ({truth})")
            continue
        e = effects[key]
        print(
            f"  {m.name} -> `{key}` [{e.verdict}] computed: served {e.served.k}/{e.served.n}, "
            f"not served {e.not_served.k}/{e.not_served.n}, before live {e.before.k}/{e.before.n}; {truth}"
        )
    useless = effects.get(USELESS_KEY)
    removal = [
        p for run in (first, second) for p in run["proposals"] if p.operation == "remove" and p.targets == [USELESS_KEY]
    ]
    print()
    if useless is not None:
        print(
            f"Useless entry `{USELESS_KEY}`: served {useless.times_served} times, rated {useless.ratings.count} "
            f"times (mean {useless.ratings.mean:+.2f}), verdict {useless.verdict}; "
            + (
                f"proposed for removal by dream #{removal[0].run_id} ({removal[0].kind}, risk {removal[0].risk}, "
                f"now {MemoryEntry.objects.get(store=store, key=USELESS_KEY).status})"
                if removal
                else "NOT proposed for removal"
            )
        )
    print(f"repeat_before={before:.3f} repeat_after={after:.3f} useless_removed={'yes' if removal else 'no'}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
