"""Probe: does memory prove it helps, and can every change be undone? Written blind against docs/api.md
(§ Context, § Effectiveness, § In-band writes) and docs/design.md (§ Undo: a decision, or a whole dream run; § People
curate, with versions; § Decisions). Agents are driven through /api/v1 with their own keys, dreams through the
`dream` command, reviewers through the pages."""

from __future__ import annotations

import io
import itertools
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.urls import reverse

from dreamweb.provenance import Author
from memory import services
from memory.models import MemoryEntry, MemoryStore
from reviews.models import DreamRun, RunStatus

from .api_support import Api, make_key
from .factories import StoreFactory, make_entry, make_proposal
from .page_support import PageClient
from .scoping import all_teams, no_scope

AGENT_SCOPES = ["memory:read", "sessions:write", "skills:read"]
DREAM_SCOPES = ["memory:read", "dreams"]
QUERY = "ship the services/api change to production"

loop = pytest.mark.django_db(transaction=True)


# ---------------------------------------------------------------------------------------------------------------
# sessions as agents write them


def mistake_events(i: int, *, where: str = "services/api") -> list[dict]:
    return [
        {"type": "message", "role": "user", "content": f"Please ship the {where} change to production."},
        {"type": "tool_call", "id": f"a{i}", "name": "bash", "arguments": {"command": "make deploy"}},
        {
            "type": "tool_result",
            "call_id": f"a{i}",
            "content": f"make: *** No rule to make target 'deploy'.  Stop. (in /home/ci/{where})",
            "is_error": True,
            "exit_code": 2,
        },
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "arguments": {"command": "make release"}},
        {"type": "tool_result", "call_id": f"b{i}", "content": f"Released build {1000 + i}.", "exit_code": 0},
        {"type": "message", "role": "assistant", "content": "Shipped."},
    ]


def reworded_mistake_events(i: int) -> list[dict]:
    """The same mistake, the error in another make's words (GNU make in a sub-make, backquote style)."""
    return [
        {"type": "message", "role": "user", "content": "Release the web change please."},
        {"type": "tool_call", "id": f"a{i}", "name": "bash", "arguments": {"command": "make deploy"}},
        {
            "type": "tool_result",
            "call_id": f"a{i}",
            "content": "make[1]: *** No rule to make target `deploy'.  Stop.",
            "is_error": True,
            "exit_code": 2,
        },
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "arguments": {"command": "make release"}},
        {"type": "tool_result", "call_id": f"b{i}", "content": "Release done.", "exit_code": 0},
    ]


def clean_events(i: int, *, where: str = "services/api") -> list[dict]:
    return [
        {"type": "message", "role": "user", "content": f"Please ship the {where} change to production."},
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "arguments": {"command": "make release"}},
        {"type": "tool_result", "call_id": f"b{i}", "content": f"Released build {2000 + i}.", "exit_code": 0},
        {"type": "message", "role": "assistant", "content": "Shipped."},
    ]


def failing_other_events(i: int) -> list[dict]:
    """Released right, then the smoke tests failed for a reason that has nothing to do with the lesson."""
    return [
        {"type": "message", "role": "user", "content": "Please ship the services/api change to production."},
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "arguments": {"command": "make release"}},
        {"type": "tool_result", "call_id": f"b{i}", "content": f"Released build {3000 + i}.", "exit_code": 0},
        {"type": "tool_call", "id": f"t{i}", "name": "bash", "arguments": {"command": "pytest tests/smoke"}},
        {
            "type": "tool_result",
            "call_id": f"t{i}",
            "content": "FAILED tests/smoke/test_login.py::test_login - AssertionError: 502 from upstream",
            "is_error": True,
            "exit_code": 1,
        },
        {"type": "message", "role": "assistant", "content": "Smoke tests failed; the upstream is down."},
    ]


def iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def doc(ext, agent, events, started, task="release", outcome="success") -> dict:
    return {
        "external_id": ext,
        "agent": agent,
        "task": task,
        "outcome": outcome,
        "started_at": iso(started),
        "events": events,
    }


def now() -> datetime:
    return datetime.now(UTC)


def push(api: Api, docs: list[dict]) -> None:
    r = api.post("/api/v1/sessions/", docs)
    assert r.status_code in (200, 201), r.content
    assert all(x["status"] in ("created", "unchanged") for x in r.json()["results"]), r.json()


def keys_of(ctx: dict) -> list[str]:
    return [it["key"] for it in ctx["items"]]


def page(user) -> PageClient:
    c = PageClient()
    c.force_login(user)
    return c


def msgs(resp) -> str:
    return " ".join(str(m) for m in get_messages(resp.wsgi_request))


def rec(sessions, recurred):
    return {"sessions": sessions, "recurred": recurred, "rate": round(recurred / sessions, 4) if sessions else None}


class Fleet:
    """Agents of one team with their own keys, a dreamer key, a reviewer."""

    def __init__(self, world, *, team=None, team_slug="team-a", reviewer=None, admin=None):
        self.world = world
        self.team = team or world.team_a
        self.team_slug = team_slug
        self.reviewer = reviewer or world.alice
        self.admin = admin or world.adam
        with all_teams():
            self.deploy = Api(make_key(self.team, f"{team_slug}-deploy-laptop", scopes=AGENT_SCOPES))
            self.deploy_ci = Api(make_key(self.team, f"{team_slug}-deploy-ci", scopes=AGENT_SCOPES))
            self.ops = Api(make_key(self.team, f"{team_slug}-ops", scopes=AGENT_SCOPES))
            self.dreamer = Api(make_key(self.team, f"{team_slug}-dreamer", scopes=DREAM_SCOPES))
        self.key = None
        self.add_id = None

    def dream(self, *extra) -> dict:
        out, err = io.StringIO(), io.StringIO()
        with no_scope():
            call_command(
                "dream", "--team", self.team_slug, "--store", "eng", "--format", "json", *extra, stdout=out, stderr=err
            )
        return json.loads(out.getvalue())

    def ctx(self, api, agent="deploy-bot", session=None, **q) -> dict:
        params = {"store": "eng", "agent": agent, "task": "release", "query": QUERY, **q}
        if session is not None:
            params["session"] = session
        r = api.get("/api/v1/context/", params)
        assert r.status_code == 200, r.content
        return r.json()

    def week1(self, *, approve=True) -> dict:
        """deploy-bot makes the mistake in 4 sessions (two keys) 8 days ago; ops-bot works cleanly; a dream proposes
        the lesson; the reviewer approves it on the page."""
        t0 = now() - timedelta(days=8)
        self.t0 = t0
        push(
            self.deploy, [doc(f"w1-d-{i}", "deploy-bot", mistake_events(i), t0 + timedelta(minutes=i)) for i in (0, 1)]
        )
        push(
            self.deploy_ci,
            [doc(f"w1-d-{i}", "deploy-bot", mistake_events(i), t0 + timedelta(minutes=i)) for i in (2, 3)],
        )
        push(self.ops, [doc(f"w1-o-{i}", "ops-bot", clean_events(i), t0 + timedelta(minutes=10 + i)) for i in range(3)])
        out = self.dream()
        adds = [p for p in out["proposals"] if p["operation"] == "add"]
        assert len(adds) == 1, out["proposals"]
        add = adds[0]
        self.add_id = add["id"]
        self.lesson = add["content"]
        self.run_id = out["run"]["id"]
        if approve and add["status"] == "pending":
            r = page(self.reviewer).post(reverse("reviews:approve", args=[add["id"]]), {"reason": "right"})
            assert r.status_code in (200, 302), r.status_code
        if approve:
            assert self.proposal(add["id"])["status"] == "applied"
            self.key = self.entry_key()
        return add

    def entry_key(self) -> str:
        with all_teams():
            return MemoryEntry.objects.get(store__team=self.team, store__slug="eng", content=self.lesson).key

    def entry_pk(self) -> int:
        with all_teams():
            return MemoryEntry.objects.get(store__team=self.team, store__slug="eng", key=self.key).pk

    def proposal(self, pk) -> dict:
        r = self.dreamer.get(f"/api/v1/proposals/{pk}/")
        assert r.status_code == 200, r.content
        return r.json()

    def served(self, ext, *, api=None, agent="deploy-bot") -> bool:
        return self.key in keys_of(self.ctx(api or self.deploy, agent=agent, session=ext))

    def eff(self) -> dict:
        r = self.dreamer.get(f"/api/v1/stores/eng/entries/{self.key}/effectiveness/")
        assert r.status_code == 200, r.content
        return r.json()


def deploy_store(world):
    with all_teams():
        return MemoryStore.objects.get(team=world.team_a, slug="eng")


def served_week(f: Fleet, outcomes, *, prefix="w2-d", start=None) -> None:
    """deploy-bot sessions that each ask for context under their session id (and get the lesson), then do as
    ``outcomes`` says: 'hit' (the mistake), 'clean', 'reworded', 'fail_other'."""
    make = {
        "hit": mistake_events,
        "clean": clean_events,
        "reworded": reworded_mistake_events,
        "fail_other": failing_other_events,
    }
    docs = []
    for i, kind in enumerate(outcomes):
        ext = f"{prefix}-{i}"
        assert f.served(ext)
        outcome = "failure" if kind == "fail_other" else "success"
        docs.append(doc(ext, "deploy-bot", make[kind](10 + i), start or now(), outcome=outcome))
    push(f.deploy, docs)


def control_week(f: Fleet, hits, *, asks=None, prefix="w2-o") -> None:
    """ops-bot sessions (outside the lesson's scope): asking for context does not serve it."""
    docs = []
    for i, hit in enumerate(hits):
        ext = f"{prefix}-{i}"
        if asks is None or asks[i]:
            assert not f.served(ext, api=f.ops, agent="ops-bot")
        docs.append(doc(ext, "ops-bot", mistake_events(20 + i) if hit else clean_events(20 + i), now()))
    push(f.ops, docs)


# ---------------------------------------------------------------------------------------------------------------
# (1) effectiveness: figures against a planted history


@loop
def test_entry_never_served_is_never_served(world):
    """docs/api.md § Effectiveness: `times_served` counts context responses holding the entry; verdict
    `never_served` for an entry no context response held."""
    f = Fleet(world)
    f.week1()
    t = now()
    push(f.deploy, [doc(f"w2-d-{i}", "deploy-bot", mistake_events(30 + i), t) for i in range(2)])
    push(f.deploy, [doc("w2-d-2", "deploy-bot", clean_events(32), t)])
    f.dream()
    row = f.eff()
    assert (row["times_served"], row["sessions_served"], row["verdict"]) == (0, 0, "never_served"), row


@loop
def test_session_served_twice_is_one_served_session(world):
    """docs/api.md § Effectiveness: `sessions_served` counts the distinct sessions the serves named; two context
    calls of one session are two serves but one session."""
    f = Fleet(world)
    f.week1()
    assert f.served("w2-d-0")  # asked twice in the same session (served_week asks again)
    served_week(f, ["clean", "clean", "clean"])
    f.dream()
    row = f.eff()
    assert (row["times_served"], row["sessions_served"], row["recurrence"]["served"]["sessions"]) == (4, 3, 3), row


@loop
def test_serve_without_session_counts_only_in_times_served(world):
    """docs/api.md § Effectiveness: a serve without a session counts only in `times_served`."""
    f = Fleet(world)
    f.week1()
    assert f.key in keys_of(f.ctx(f.deploy))
    served_week(f, ["clean", "clean"])
    row = f.eff()
    assert (row["times_served"], row["sessions_served"]) == (3, 2), row


@loop
def test_served_session_failing_for_another_reason_is_no_recurrence(world):
    """docs/api.md § Effectiveness: recurrence counts sessions that showed the mistake the lesson addresses; a
    served session that failed for an unrelated reason did not make that mistake."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["fail_other", "fail_other", "clean"])
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(3, 0)


@loop
def test_mistake_in_other_words_recurs_when_served(world):
    """docs/api.md § Effectiveness: a session's mistake is the entry's when the aggregation would say the memory
    already holds that lesson; a mistake made again although served counts too. The same failed `make deploy`,
    its error worded by a sub-make, is the same mistake."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["reworded", "reworded", "clean"])
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(3, 2)


@loop
def test_session_started_before_live_but_pushed_late_counts_before_live(world):
    """docs/api.md § Effectiveness: `before_live` holds the sessions that ran before the entry went live; a session
    that started before (pushed only after the approval) is one of them, not an after-live session."""
    f = Fleet(world)
    f.week1()
    push(f.deploy_ci, [doc("late-d-0", "deploy-bot", mistake_events(40), f.t0 + timedelta(minutes=30))])
    served_week(f, ["clean", "clean", "clean"])
    f.dream()
    r = f.eff()["recurrence"]
    assert (r["before_live"], r["served"]) == (rec(5, 5), rec(3, 0)), r


@loop
def test_helpful_verdict_and_reason_k_of_n(world):
    """docs/api.md § Effectiveness: `helpful` when served sessions recurred at a lower rate than those not served
    (3+ each side); the reason reads "1 of 4 served sessions vs 3 of 3 not served"."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean", "clean", "hit"])
    control_week(f, [True, True, True])
    f.dream()
    row = f.eff()
    assert row["verdict"] == "helpful" and "1 of 4 served sessions vs 3 of 3 not served" in row["reason"], row


@loop
def test_no_effect_when_served_recur_as_often(world):
    """docs/api.md § Effectiveness: `no_effect` when the served sessions recurred as often or more than those not
    served (3+ sessions each side)."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["hit", "hit", "hit"])
    control_week(f, [True, True, True])
    f.dream()
    row = f.eff()
    assert (row["verdict"], row["recurrence"]["served"]) == ("no_effect", rec(3, 3)), row


@loop
def test_retrieval_misses_only_sessions_that_asked(world):
    """docs/api.md § Effectiveness: `retrieval_misses` are sessions that asked for context, were not served the
    entry and made its mistake; a session that never asked is in `not_served` but no retrieval miss."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean", "clean"])
    control_week(f, [True, True, True], asks=[True, True, False])
    f.dream()
    row = f.eff()
    assert (row["retrieval_misses"], row["recurrence"]["not_served"]) == (2, rec(3, 3)), row


@loop
def test_after_live_is_served_plus_not_served(world):
    """docs/api.md § Effectiveness: `after_live` is the served and the not-served groups together."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "hit", "clean"])
    control_week(f, [True, False, True])
    f.dream()
    assert f.eff()["recurrence"]["after_live"] == rec(6, 3)


@loop
def test_team_b_same_loop_never_counts_for_team_a(world):
    """docs/api.md § Effectiveness / README (isolation per team): team B's sessions, serves and lesson, under the
    same session ids and agent names, never count in team A's figures."""
    with all_teams():
        StoreFactory(team=world.team_b, slug="eng")
    a = Fleet(world)
    b = Fleet(world, team=world.team_b, team_slug="team-b", reviewer=world.bob)
    a.week1()
    b.week1()
    served_week(a, ["clean", "clean", "clean"])
    served_week(b, ["hit", "hit", "hit", "hit"])
    control_week(b, [True, True, True])
    a.dream()
    b.dream()
    row = a.eff()
    got = (row["times_served"], row["sessions_served"], row["recurrence"]["before_live"], row["recurrence"]["served"])
    assert got == (3, 3, rec(4, 4), rec(3, 0)), row


@loop
def test_copy_of_served_session_under_another_id_adds_no_session(world):
    """docs/dream-pipeline.md (One run, one session): a transcript delivered again under another external id is kept
    but a dream reads only the first stored; docs/api.md § Effectiveness counts the sessions the dreams analysed. A
    copy of a served session (same agent, start and events, pushed by another key) adds no not-served session."""
    f = Fleet(world)
    f.week1()
    t = now() + timedelta(seconds=1)
    served_week(f, ["hit", "clean", "clean"], start=t)
    copy = doc("copy-of-w2-d-0", "deploy-bot", mistake_events(10), t)
    push(f.deploy_ci, [copy])
    f.dream()
    assert f.eff()["recurrence"]["after_live"] == rec(3, 1)


@loop
def test_copy_of_before_live_session_pushed_later_adds_nothing(world):
    """docs/dream-pipeline.md (One run, one session): a copy adds no session in the run that reads the original or
    in any later one; `before_live` stays the 4 original sessions."""
    f = Fleet(world)
    f.week1()
    push(f.ops, [doc("copy-of-w1-d-0", "deploy-bot", mistake_events(0), f.t0)])
    served_week(f, ["clean", "clean", "clean"])
    f.dream()
    assert f.eff()["recurrence"]["before_live"] == rec(4, 4)


@loop
def test_served_sessions_not_yet_dreamed_are_not_in_recurrence(world):
    """docs/api.md § Effectiveness: recurrence counts among the sessions the store's dreams analysed; pushed but not
    yet dreamed sessions are served (sessions_served) but in no recurrence group yet."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["hit", "hit", "clean"])
    row = f.eff()
    assert (row["sessions_served"], row["recurrence"]["served"]["sessions"]) == (3, 0), row


# ---------------------------------------------------------------------------------------------------------------
# (2) undo in the loop: serving stops, figures do not credit the undone entry


@loop
def test_serves_after_undo_are_not_credited_to_the_undone_entry(world):
    """docs/design.md § Undo: the undone add is archived; docs/api.md § Context: only active entries are served, so
    context calls after the undo are no serves of it (`times_served` stays)."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean"])
    page(f.reviewer).post(reverse("reviews:undo", args=[f.add_id]), {"reason": "wrong lesson"})
    for i in range(3):
        f.ctx(f.deploy, session=f"w3-d-{i}")
    row = f.eff()
    assert (row["times_served"], row["sessions_served"], row["status"]) == (2, 2, "archived"), row


@loop
def test_undo_history_names_who_and_why(world):
    """docs/design.md § Undo: the rollback is a new version and the history names who rolled back and why."""
    f = Fleet(world)
    f.week1()
    pk = f.entry_pk()
    page(f.reviewer).post(reverse("reviews:undo", args=[f.add_id]), {"reason": "wrong"})
    html = page(world.adam).get(reverse("memory:entry", args=[pk])).content.decode()
    history = html[html.find("History") :]
    newest = history[: history.find("v1")]
    assert "alice" in newest and "undo" in newest.lower(), newest


@loop
def test_undo_twice_writes_no_second_version(world):
    """docs/design.md § Undo: the proposal is pending again after an undo; a second undo has nothing to take back
    (the entry's ETag, its version, stays)."""
    f = Fleet(world)
    f.week1()
    c = page(f.reviewer)
    c.post(reverse("reviews:undo", args=[f.add_id]))
    etag1 = f.dreamer.get(f"/api/v1/stores/eng/entries/{f.key}/")["ETag"]
    c.post(reverse("reviews:undo", args=[f.add_id]))
    etag2 = f.dreamer.get(f"/api/v1/stores/eng/entries/{f.key}/")["ETag"]
    assert (etag2, f.proposal(f.add_id)["status"]) == (etag1, "pending")


@loop
def test_reapprove_after_undo_serves_same_key_again(world):
    """docs/design.md § Undo: approving an undone add again brings back the entry its first approval created (same
    key) as a new version; it is served again."""
    f = Fleet(world)
    f.week1()
    c = page(f.reviewer)
    c.post(reverse("reviews:undo", args=[f.add_id]))
    assert not f.served("w3-d-0")
    c.post(reverse("reviews:approve", args=[f.add_id]), {"reason": "after all"})
    assert f.served("w3-d-1")


@loop
def test_rollback_of_run_then_serves_are_not_credited(world):
    """docs/design.md § Undo (roll back a run): every entry the run's applied proposals wrote is restored (an
    entry the change created is archived); context calls afterwards do not serve it, so `times_served` stays."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean"])
    r = page(f.reviewer).post(reverse("reviews:run-rollback", args=[f.run_id]), {"reason": "bad dream"})
    assert r.status_code in (200, 302)
    for i in range(2):
        f.ctx(f.deploy, session=f"w3-d-{i}")
    assert (f.eff()["times_served"], f.proposal(f.add_id)["status"]) == (1, "rolled_back")


def set_policy(world, mode: str) -> None:
    data = {
        "mode": mode,
        "min_sessions": 3,
        "min_share": 0.0,
        "min_confidence_auto": 0.0,
        "max_sessions": 500,
        "token_budget": 100000,
        "agents": "",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    r = page(world.adam).post(reverse("reviews:policy", args=[deploy_store(world).pk]), data)
    assert r.status_code == 302, r.content.decode()[:2000]


@loop
def test_policy_applied_lesson_undo_stops_serving(world):
    """docs/design.md § Decisions / § Undo: a change the store's policy applied (autonomous: all but high risk) is
    undone like a reviewer's: afterwards its text is not served."""
    set_policy(world, "autonomous")
    f = Fleet(world)
    add = f.week1(approve=False)
    assert f.proposal(add["id"])["status"] == "applied", add
    f.key = f.entry_key()
    assert f.served("p-0")
    page(world.alice).post(reverse("reviews:undo", args=[f.add_id]), {"reason": "policy was wrong"})
    ctx = f.ctx(f.deploy, session="p-1")
    assert f.lesson not in ctx["text"], ctx["text"]


# ---------------------------------------------------------------------------------------------------------------
# (3) undo of update / merge / remove, conflicts, run rollback, revert (reviewed proposals built with the factory,
# decided and undone on the pages, checked through the agents' API)

plain = pytest.mark.django_db


_READERS = itertools.count()


def reader(world) -> Api:
    with all_teams():
        name = f"reader-{next(_READERS)}"
        return Api(make_key(world.team_a, name, scopes=["memory:read"], writable_stores=()))


def store_text(api: Api) -> str:
    r = api.get("/api/v1/context/", {"store": "eng", "max_items": 50, "max_tokens": 8000})
    assert r.status_code == 200, r.content
    return r.json()["text"]


def approve_page(world, p) -> None:
    r = page(world.alice).post(reverse("reviews:approve", args=[p.pk]), {"reason": "ok"})
    assert r.status_code in (200, 302)
    with all_teams():
        p.refresh_from_db()
    assert p.status == "applied", p.decision_reason


def entry(world, key):
    with all_teams():
        return MemoryEntry.objects.get(store=world.store_a, key=key)


def person_edit(world, key, content):
    with all_teams():
        cur = entry(world, key)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content=content)


@plain
def test_undo_update_serves_previous_text(world):
    """docs/design.md § Undo: an approval is rolled back: a new version brings back the entry's whole state
    before; /context/ serves the old text again, not the approved one."""
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy-old-text with make ship.")
        p = make_proposal(
            world.store_a, operation="update", targets=["deploy"], content="Deploy-new-text with release."
        )
    approve_page(world, p)
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    text = store_text(reader(world))
    assert "Deploy-old-text" in text and "Deploy-new-text" not in text, text


@plain
def test_undo_merge_serves_both_originals(world):
    """docs/design.md § Undo: every entry the change wrote is restored (a merge's absorbed entry comes back
    active); /context/ serves both original texts and not the merged one."""
    with all_teams():
        make_entry(world.store_a, key="alpha", content="Alpha-original rule one.")
        make_entry(world.store_a, key="beta", content="Beta-original rule two.")
        p = make_proposal(world.store_a, operation="merge", targets=["alpha", "beta"], content="Merged-text rules.")
    approve_page(world, p)
    assert "Merged-text" in store_text(reader(world))
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    text = store_text(reader(world))
    assert ("Alpha-original" in text, "Beta-original" in text, "Merged-text" in text) == (True, True, False), text


@plain
def test_undo_merge_refused_when_merged_entry_changed_nothing_half_undone(world):
    """docs/design.md § Undo: an approval is rolled back all or nothing, refused when any entry changed since;
    the absorbed entry must stay absorbed (not served) and the changed text stays."""
    with all_teams():
        make_entry(world.store_a, key="alpha", content="Alpha-original rule one.")
        make_entry(world.store_a, key="beta", content="Beta-original rule two.")
        p = make_proposal(world.store_a, operation="merge", targets=["alpha", "beta"], content="Merged-text rules.")
    approve_page(world, p)
    with all_teams():
        kept = MemoryEntry.objects.get(store=world.store_a, content="Merged-text rules.").key
    person_edit(world, kept, "Merged-then-edited rules.")
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    text = store_text(reader(world))
    got = ("Merged-then-edited" in text, "Alpha-original" in text, "Beta-original" in text)
    assert got == (True, False, False), text


@plain
def test_undo_remove_serves_entry_again(world):
    """docs/design.md § Undo: undoing an approved removal brings the entry's state before back (active): served."""
    with all_teams():
        make_entry(world.store_a, key="keepme", content="Keepme-text: use the staging VPN.")
        p = make_proposal(world.store_a, operation="remove", targets=["keepme"], content="", kind="unused")
    approve_page(world, p)
    assert "Keepme-text" not in store_text(reader(world))
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert "Keepme-text" in store_text(reader(world))


@plain
def test_undo_refused_names_who_changed(world):
    """docs/design.md § Undo: an undo when the entry changed since is refused "with who changed what"."""
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy-old-text.")
        p = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy-new-text.")
    approve_page(world, p)
    person_edit(world, "deploy", "Deploy-adam-text.")
    r = page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    text = msgs(r)
    assert "adam" in text, text


@plain
def test_undo_refused_keeps_changed_text_and_proposal_applied(world):
    """docs/design.md § Undo: an entry changed since is never overwritten; the refused undo leaves the proposal
    applied and the changed text served."""
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy-old-text.")
        p = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy-new-text.")
    approve_page(world, p)
    person_edit(world, "deploy", "Deploy-adam-text.")
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
    assert (p.status, "Deploy-adam-text" in store_text(reader(world))) == ("applied", True)


@plain
def test_undo_of_rejection_goes_back_to_pending(world):
    """docs/design.md § Undo: a rejection goes back to pending."""
    with all_teams():
        p = make_proposal(world.store_a)
    page(world.alice).post(reverse("reviews:reject", args=[p.pk]), {"reason": "no"})
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
    assert p.status == "pending"


def _run_with_two_updates(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        make_entry(world.store_a, key="a", content="A-one text.")
        make_entry(world.store_a, key="b", content="B-one text.")
        pa = make_proposal(world.store_a, operation="update", targets=["a"], content="A-two text.", run=run)
        pb = make_proposal(world.store_a, operation="update", targets=["b"], content="B-two text.", run=run)
    approve_page(world, pa)
    approve_page(world, pb)
    person_edit(world, "b", "B-three text.")
    return run, pa, pb


@plain
def test_run_rollback_restores_unchanged_and_keeps_changed(world):
    """docs/design.md § Undo (roll back a run): restores every entry its applied proposals wrote, lists the others
    (changed since) as conflicts; the changed entry keeps its text."""
    run, pa, pb = _run_with_two_updates(world)
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad dream"})
    text = store_text(reader(world))
    got = ("A-one" in text, "A-two" in text, "B-three" in text)
    assert got == (True, False, True), text


@plain
def test_run_rollback_marks_only_restored_proposals_rolled_back(world):
    """docs/design.md § Undo (roll back a run): marks the proposals whose entries were all restored `rolled_back`
    (the conflicting one is not)."""
    run, pa, pb = _run_with_two_updates(world)
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad dream"})
    with all_teams():
        pa.refresh_from_db()
        pb.refresh_from_db()
    assert (pa.status, pb.status) == ("rolled_back", "applied")


@plain
def test_run_rollback_page_lists_conflict(world):
    """docs/design.md § Undo (roll back a run): the others are listed as conflicts on the run page."""
    run, pa, pb = _run_with_two_updates(world)
    c = page(world.alice)
    before = c.get(reverse("reviews:run", args=[run.pk])).content.decode().lower().count("conflict")
    c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad dream"})
    after = c.get(reverse("reviews:run", args=[run.pk])).content.decode().lower().count("conflict")
    assert after > before, (before, after)


@plain
def test_run_rollback_twice_writes_nothing_more(world):
    """docs/design.md § Undo (roll back a run): the POST claims the run (compare-and-set): a second rollback changes
    nothing (the restored entry's ETag stays)."""
    run, pa, pb = _run_with_two_updates(world)
    c = page(world.alice)
    api = reader(world)
    c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad dream"})
    e1 = api.get("/api/v1/stores/eng/entries/a/")["ETag"]
    c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "again"})
    assert api.get("/api/v1/stores/eng/entries/a/")["ETag"] == e1


@plain
def test_revert_on_page_serves_earlier_version(world):
    """docs/design.md § Memory: revert is a new version restoring an earlier state; /context/ serves it."""
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Tip-version-one.")
    person_edit(world, "tip", "Tip-version-two.")
    r = page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2, "reason": "r"})
    assert r.status_code in (200, 302)
    api = reader(world)
    text = store_text(api)
    etag = api.get("/api/v1/stores/eng/entries/tip/")["ETag"]
    assert ("Tip-version-one" in text, "Tip-version-two" in text, etag.endswith('.3"')) == (True, False, True), etag


@plain
def test_revert_with_stale_base_version_writes_nothing(world):
    """docs/api.md (pages use the same rule: the revert button names the version the page showed): a revert
    against a version that is no longer current writes nothing."""
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Tip-version-one.")
    person_edit(world, "tip", "Tip-version-two.")
    person_edit(world, "tip", "Tip-version-three.")
    page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2})
    api = reader(world)
    assert api.get("/api/v1/stores/eng/entries/tip/")["ETag"].endswith('.3"')


@plain
def test_revert_history_names_reverter_and_reason(world):
    """docs/design.md § People curate: each action is one new version with its author and the reason typed."""
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Tip-version-one.")
    person_edit(world, "tip", "Tip-version-two.")
    page(world.alice).post(
        reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2, "reason": "revert-reason-qq"}
    )
    html = page(world.adam).get(reverse("memory:entry", args=[e.pk])).content.decode()
    assert "revert-reason-qq" in html and "alice" in html


@plain
def test_run_rollback_reason_kept_with_each_version(world):
    """Run rollback page (templates: "Why (kept with each version)"), docs/design.md § Undo: the history names who
    rolled back and why."""
    run, pa, pb = _run_with_two_updates(world)
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad-dream-qq"})
    html = page(world.adam).get(reverse("memory:entry", args=[entry(world, "a").pk])).content.decode()
    assert "bad-dream-qq" in html


@plain
def test_revert_after_undone_add_brings_entry_back_active(world):
    """docs/design.md § People curate: a version records the whole state (status included), so revert brings all
    of it back: reverting an add undone (archived) to its first version serves it again."""
    with all_teams():
        p = make_proposal(world.store_a, content="Revive-me: run `make release`, not `make deploy`.")
    approve_page(world, p)
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        e = MemoryEntry.objects.get(store=world.store_a, key=p.write_key)
    assert "Revive-me" not in store_text(reader(world))
    page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2, "reason": "back"})
    assert "Revive-me" in store_text(reader(world))


@loop
def test_policy_applied_version_reads_applied_by_policy(world):
    """docs/design.md § Decisions: versions a policy applied read "Dream change applied by the store's policy"."""
    set_policy(world, "autonomous")
    f = Fleet(world)
    f.week1(approve=False)
    f.key = f.entry_key()
    html = page(world.alice).get(reverse("memory:entry", args=[f.entry_pk()])).content.decode()
    assert "applied by the store" in html.replace("&#x27;", "'").replace("’", "'"), html[-4000:]


@loop
def test_policy_applied_run_rollback_stops_serving(world):
    """docs/design.md § Undo (roll back a run): restores every entry its applied memory proposals wrote, by the
    policy or by a reviewer."""
    set_policy(world, "autonomous")
    f = Fleet(world)
    f.week1(approve=False)
    f.key = f.entry_key()
    page(world.alice).post(reverse("reviews:run-rollback", args=[f.run_id]), {"reason": "policy run was bad"})
    assert (f.served("pr-0"), f.proposal(f.add_id)["status"]) == (False, "rolled_back")


@loop
def test_verdict_filter_lists_never_served_entry(world):
    """docs/api.md: `GET /stores/{slug}/effectiveness/?verdict=` filters the rows by verdict."""
    f = Fleet(world)
    f.week1()
    r = f.dreamer.get("/api/v1/stores/eng/effectiveness/", {"verdict": "never_served"})
    assert r.status_code == 200, r.content
    body = r.json()
    rows = body["results"] if isinstance(body, dict) else body
    assert [x["key"] for x in rows] == [f.key]


@loop
def test_rated_up_by_two_agents_unmeasured_is_helpful(world):
    """docs/api.md § Effectiveness: with too few sessions to compare, `helpful` when rated up (mean above 0 from 2+
    ratings); `ratings.raters` counts the distinct raters."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean"])
    for api in (f.deploy, f.deploy_ci):
        r = api.post(f"/api/v1/stores/eng/entries/{f.key}/feedback/", {"helpful": True})
        assert r.status_code in (200, 201), r.content
    f.dream()
    row = f.eff()
    assert (row["verdict"], row["ratings"]["up"], row["ratings"]["raters"]) == ("helpful", 2, 2), row


def compound_mistake_events(i: int) -> list[dict]:
    """The same failed `make deploy`, run from a subdirectory in one shell line."""
    return [
        {"type": "message", "role": "user", "content": "Ship the web service."},
        {
            "type": "tool_call",
            "id": f"a{i}",
            "name": "bash",
            "arguments": {"command": "cd services/web && make deploy"},
        },
        {
            "type": "tool_result",
            "call_id": f"a{i}",
            "content": "make: *** No rule to make target 'deploy'.  Stop.",
            "is_error": True,
            "exit_code": 2,
        },
        {
            "type": "tool_call",
            "id": f"b{i}",
            "name": "bash",
            "arguments": {"command": "cd services/web && make release"},
        },
        {"type": "tool_result", "call_id": f"b{i}", "content": "Released.", "exit_code": 0},
    ]


@loop
def test_mistake_in_compound_command_recurs_when_served(world):
    """docs/api.md § Effectiveness: the mistake counts when the dream's aggregation would say the memory already
    holds that lesson: `cd services/web && make deploy` failing the same way is the lesson's mistake."""
    f = Fleet(world)
    f.week1()
    docs = []
    for i in range(3):
        assert f.served(f"cm-{i}")
        docs.append(doc(f"cm-{i}", "deploy-bot", compound_mistake_events(50 + i) if i < 2 else clean_events(50), now()))
    push(f.deploy, docs)
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(3, 2)


@plain
def test_undo_merge_refused_when_absorbed_entry_restored_since(world):
    """docs/design.md § Undo: all or nothing, refused when any entry changed since. A person restoring an absorbed
    entry is a change: the undo writes nothing, so the merged text is still served."""
    with all_teams():
        make_entry(world.store_a, key="alpha", content="Alpha-original rule one.")
        make_entry(world.store_a, key="beta", content="Beta-original rule two.")
        p = make_proposal(world.store_a, operation="merge", targets=["alpha", "beta"], content="Merged-text rules.")
    approve_page(world, p)
    with all_teams():
        gone = MemoryEntry.objects.filter(store=world.store_a, key__in=["alpha", "beta"]).exclude(
            content="Merged-text rules."
        )
        absorbed = gone.get()
    r = page(world.adam).post(
        reverse("memory:restore", args=[absorbed.pk]), {"base_version": absorbed.version, "reason": "keep"}
    )
    assert r.status_code in (200, 302)
    assert "original rule" in store_text(reader(world)), "the absorbed entry is restored and served"
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert "Merged-text" in store_text(reader(world))


@plain
def test_undo_update_after_serves_and_ratings_is_not_refused(world):
    """docs/api.md § In-band writes: the rating and `last_served_at` are not writes; so serving and rating the
    approved text does not make it "changed since": the undo goes through and the old text is served."""
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy-old-text with make ship.")
        p = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy-new-text release.")
    approve_page(world, p)
    with all_teams():
        agent = Api(make_key(world.team_a, "rater", scopes=["memory:read"], writable_stores=()))
    for i in range(2):
        assert "Deploy-new-text" in agent.get("/api/v1/context/", {"store": "eng", "session": f"r-{i}"}).json()["text"]
    r = agent.post("/api/v1/stores/eng/entries/deploy/feedback/", {"helpful": False})
    assert r.status_code in (200, 201), r.content
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert "Deploy-old-text" in store_text(reader(world))


@plain
def test_reapprove_undone_update_serves_new_text_again(world):
    """docs/design.md § Undo: after an undo the proposal is pending again; approving it again applies it (the entry
    is back at the text the dream read)."""
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy-old-text with make ship.")
        p = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy-new-text release.")
    approve_page(world, p)
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    page(world.alice).post(reverse("reviews:approve", args=[p.pk]), {"reason": "yes after all"})
    assert "Deploy-new-text" in store_text(reader(world))


@loop
def test_undo_of_served_and_rated_lesson_goes_through(world):
    """docs/api.md § In-band writes (rating and last_served_at are not writes) and docs/design.md § Undo: a lesson
    served to sessions and rated by agents is undone; its text is served no more."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean"])
    r = f.deploy.post(f"/api/v1/stores/eng/entries/{f.key}/feedback/", {"helpful": True})
    assert r.status_code in (200, 201), r.content
    page(f.reviewer).post(reverse("reviews:undo", args=[f.add_id]))
    assert f.lesson not in f.ctx(f.deploy, session="after-undo")["text"]


@loop
def test_too_few_served_sessions_is_unmeasured(world):
    """docs/api.md § Effectiveness: `helpful`/`no_effect` need 3+ sessions each side; 2 served sessions, no ratings:
    `unmeasured`."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean"])
    control_week(f, [True, True, True])
    f.dream()
    assert f.eff()["verdict"] == "unmeasured"


@loop
def test_equal_rates_are_no_effect(world):
    """docs/api.md § Effectiveness: `no_effect` when served sessions recurred as often as those not served
    (1 of 3 vs 1 of 3)."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["hit", "clean", "clean"])
    control_week(f, [True, False, False])
    f.dream()
    assert f.eff()["verdict"] == "no_effect"


@loop
def test_neutral_scores_leave_an_unmeasured_lesson_unmeasured(world):
    """docs/api.md § Effectiveness and § Endpoints: scores 1..5 are normalised to [-1, 1] (3 is neutral); mean 0
    from 2 ratings is neither rated up nor down: `unmeasured`, mean 0."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean"])
    for api in (f.deploy, f.deploy_ci):
        r = api.post(f"/api/v1/stores/eng/entries/{f.key}/feedback/", {"score": 3})
        assert r.status_code in (200, 201), r.content
    row = f.eff()
    assert (row["verdict"], row["ratings"]["mean"]) == ("unmeasured", 0.0), row


def second_store(world):
    with all_teams():
        return StoreFactory(team=world.team_a, slug="eng2")


@loop
def test_same_key_and_text_served_from_another_store_is_not_a_serve(world):
    """docs/api.md § Effectiveness: `times_served` counts context responses that held *the entry*; the same key and
    text in another store of the team, served to the same agent's sessions, is another entry."""
    f = Fleet(world)
    f.week1()
    other = second_store(world)
    with all_teams():
        make_entry(other, key=f.key, content=f.lesson)
    docs = []
    for i in range(3):
        r = f.deploy.get(
            "/api/v1/context/", {"store": "eng2", "agent": "deploy-bot", "task": "release", "session": f"o2-{i}"}
        )
        assert f.key in keys_of(r.json()), r.content
        docs.append(doc(f"o2-{i}", "deploy-bot", clean_events(60 + i), now()))
    push(f.deploy, docs)
    f.dream()
    row = f.eff()
    assert (row["times_served"], row["sessions_served"]) == (0, 0), row


@loop
def test_sessions_only_another_stores_dream_analysed_are_not_counted(world):
    """docs/api.md § Effectiveness: recurrence counts "among the sessions the store's dreams analysed"; sessions
    analysed only by another store's dream are not in this store's entry's figures."""
    f = Fleet(world)
    f.week1()
    second_store(world)
    push(f.deploy, [doc(f"x-{i}", "deploy-bot", mistake_events(70 + i), now()) for i in range(3)])
    out, err = io.StringIO(), io.StringIO()
    with no_scope():
        call_command("dream", "--team", "team-a", "--store", "eng2", "--format", "json", stdout=out, stderr=err)
    assert f.eff()["recurrence"]["after_live"]["sessions"] == 0


@loop
def test_serves_of_each_version_count_for_the_entry(world):
    """docs/api.md § Effectiveness: `times_served` / `sessions_served` count the entry's serves; the serve audit
    records the version, and an approved update between serves does not split the count (1 before, 2 after)."""
    f = Fleet(world)
    f.week1()
    assert f.served("v-0")
    with all_teams():
        p = make_proposal(deploy_store(world), operation="update", targets=[f.key], content=f.lesson + " Always.")
    r = page(f.reviewer).post(reverse("reviews:approve", args=[p.pk]), {"reason": "ok"})
    assert r.status_code in (200, 302)
    assert "Always." in f.ctx(f.deploy, session="v-1")["text"]
    assert f.served("v-2")
    row = f.eff()
    assert (row["times_served"], row["sessions_served"]) == (3, 3), row


@plain
def test_undo_refused_after_revert_to_the_old_text(world):
    """docs/design.md § Undo: an entry changed since (its current version is no longer the last one the change
    wrote) is never overwritten, even when a revert brought back the old text: the undo writes no version."""
    with all_teams():
        e = make_entry(world.store_a, key="deploy", content="Deploy-old-text with make ship.")
        p = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy-new-text release.")
    approve_page(world, p)
    page(world.adam).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2, "reason": "no"})
    api = reader(world)
    before = api.get("/api/v1/stores/eng/entries/deploy/")["ETag"]
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert api.get("/api/v1/stores/eng/entries/deploy/")["ETag"] == before


@plain
def test_run_rollback_confirmation_lists_what_changed_since(world):
    """docs/design.md § Undo (roll back a run): a confirmation page lists what will be restored and what changed
    since (the entry `b` a person changed: its current text)."""
    run, pa, pb = _run_with_two_updates(world)
    html = page(world.alice).get(reverse("reviews:run-rollback", args=[run.pk])).content.decode()
    assert "adam" in html or "B-three" in html, html[-3000:]


@plain
def test_run_page_names_who_rolled_back(world):
    """docs/design.md § Undo (roll back a run): the history names who rolled back and why; the run page records the
    rollback (`DreamRun.rollback`)."""
    run, pa, pb = _run_with_two_updates(world)
    c = page(world.alice)
    c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad-run-zz"})
    html = page(world.adam).get(reverse("reviews:run", args=[run.pk])).content.decode()
    assert "alice" in html and "bad-run-zz" in html, html[-3000:]


@loop
def test_served_sessions_without_a_start_count_as_served(world):
    """docs/api.md § Effectiveness: the served group is the sessions since the entry went live that were served it;
    sessions pushed after the approval without `started_at` (optional in contracts/session.schema.json) and served
    under their ids are served sessions."""
    f = Fleet(world)
    f.week1()
    docs = []
    for i in range(3):
        assert f.served(f"ns-{i}")
        d = doc(f"ns-{i}", "deploy-bot", mistake_events(80 + i) if i == 0 else clean_events(80 + i), now())
        del d["started_at"]
        docs.append(d)
    push(f.deploy, docs)
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(3, 1)


def user_correction_events(i: int) -> list[dict]:
    """The same mistake corrected by the user instead of by make: the agent runs `make deploy`, the user says to use
    `make release`."""
    return [
        {"type": "message", "role": "user", "content": "Please ship the services/api change to production."},
        {"type": "tool_call", "id": f"a{i}", "name": "bash", "arguments": {"command": "make deploy"}},
        {"type": "tool_result", "call_id": f"a{i}", "content": "starting legacy deploy...", "exit_code": 0},
        {
            "type": "message",
            "role": "user",
            "content": "No, don't use make deploy here, we use make release for this repo.",
        },
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "arguments": {"command": "make release"}},
        {"type": "tool_result", "call_id": f"b{i}", "content": "Released.", "exit_code": 0},
    ]


@loop
def test_same_mistake_caught_by_user_recurs_when_served(world):
    """docs/api.md § Effectiveness: a session's mistake is the entry's when the dream's aggregation would say the
    memory already holds that lesson (use `make release`, not `make deploy`), however it was caught."""
    f = Fleet(world)
    f.week1()
    docs = []
    for i in range(3):
        assert f.served(f"uc-{i}")
        docs.append(doc(f"uc-{i}", "deploy-bot", user_correction_events(90 + i) if i < 2 else clean_events(90), now()))
    push(f.deploy, docs)
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(3, 2)


@loop
def test_session_served_on_second_ask_is_served_not_a_miss(world):
    """docs/api.md § Effectiveness: a session counts as served when a context response it named held the entry; a
    first ask under a tiny budget that held nothing does not make it a retrieval miss."""
    f = Fleet(world)
    f.week1()
    docs = []
    for i in range(3):
        tiny = f.ctx(f.deploy, session=f"sa-{i}", max_tokens=1)
        assert f.key not in keys_of(tiny)
        assert f.served(f"sa-{i}")
        docs.append(doc(f"sa-{i}", "deploy-bot", mistake_events(95 + i), now()))
    push(f.deploy, docs)
    f.dream()
    row = f.eff()
    assert (row["recurrence"]["served"], row["retrieval_misses"]) == (rec(3, 3), 0), row


@loop
def test_sessions_served_counts_named_sessions_even_if_never_pushed(world):
    """docs/api.md § Effectiveness: `sessions_served` is "the distinct sessions they named" (session= of
    /context/), not only the pushed ones; recurrence counts only analysed sessions."""
    f = Fleet(world)
    f.week1()
    assert f.served("never-pushed-0")
    served_week(f, ["clean", "clean"])
    f.dream()
    row = f.eff()
    assert (row["sessions_served"], row["recurrence"]["served"]["sessions"]) == (3, 2), row


@plain
def test_undo_of_a_rolled_back_proposal_writes_nothing(world):
    """docs/design.md § Undo: the run's restored proposals are `rolled_back`; an undo of one of them afterwards has
    nothing to take back (no new version, status stays)."""
    run, pa, pb = _run_with_two_updates(world)
    c = page(world.alice)
    c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad dream"})
    api = reader(world)
    before = api.get("/api/v1/stores/eng/entries/a/")["ETag"]
    c.post(reverse("reviews:undo", args=[pa.pk]))
    with all_teams():
        pa.refresh_from_db()
    assert (api.get("/api/v1/stores/eng/entries/a/")["ETag"], pa.status) == (before, "rolled_back")


@plain
def test_reapproved_add_is_a_third_version(world):
    """docs/design.md § Undo: approving an undone add again brings back the entry its first approval created as a
    new `restore` version: v1 created, v2 the undo, v3 the restore (ETag "id.3")."""
    with all_teams():
        p = make_proposal(world.store_a, content="Third-version: run `make release`, not `make deploy`.")
    approve_page(world, p)
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    page(world.alice).post(reverse("reviews:approve", args=[p.pk]), {"reason": "again"})
    r = reader(world).get(f"/api/v1/stores/eng/entries/{p.write_key}/")
    assert r.status_code == 200 and r["ETag"].endswith('.3"'), (r.status_code, r.get("ETag"))


@loop
def test_team_a_serves_ids_only_team_b_pushed_count_no_recurrence(world):
    """docs/api.md § Effectiveness (sessions the store's dreams analysed) and team isolation: team A's context calls
    name session ids that only team B pushes (with the mistake) and team B's dream analyses; team A's served group
    holds no session."""
    with all_teams():
        StoreFactory(team=world.team_b, slug="eng")
    a = Fleet(world)
    b = Fleet(world, team=world.team_b, team_slug="team-b", reviewer=world.bob)
    a.week1()
    for i in range(3):
        assert a.served(f"shared-{i}")
    push(b.deploy, [doc(f"shared-{i}", "deploy-bot", mistake_events(100 + i), now()) for i in range(3)])
    b.dream()
    a.dream()
    assert a.eff()["recurrence"]["served"]["sessions"] == 0


@loop
def test_mistakes_after_undo_do_not_change_the_served_group(world):
    """docs/design.md § Undo and docs/api.md § Effectiveness: after the undo the entry is archived and served to
    nobody; sessions that then make the mistake are no served sessions of it (served stays 2 of 0)."""
    f = Fleet(world)
    f.week1()
    served_week(f, ["clean", "clean"])
    f.dream()
    page(f.reviewer).post(reverse("reviews:undo", args=[f.add_id]))
    docs = []
    for i in range(3):
        assert not f.served(f"pu-{i}")
        docs.append(doc(f"pu-{i}", "deploy-bot", mistake_events(110 + i), now()))
    push(f.deploy, docs)
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(2, 0)


@loop
def test_no_reorganising_proposal_for_an_undone_entry(world):
    """docs/dream-pipeline.md § Reorganising / docs/design.md § Undo: an undone add is archived (served to nobody,
    writes refused); sessions that ask after the undo and make the mistake must not produce a re-scope or reword
    `update` of the archived entry (it could only end in a conflict)."""
    f = Fleet(world)
    f.week1()
    page(f.reviewer).post(reverse("reviews:undo", args=[f.add_id]))
    docs = []
    for i in range(3):
        f.ctx(f.deploy, session=f"pm-{i}")
        f.ctx(f.ops, agent="ops-bot", session=f"pmo-{i}")
        docs.append(doc(f"pm-{i}", "deploy-bot", mistake_events(120 + i), now()))
        docs.append(doc(f"pmo-{i}", "ops-bot", mistake_events(130 + i), now()))
    push(f.deploy, docs)
    out = f.dream()
    bad = [p for p in out["proposals"] if f.key in (p.get("targets") or []) and p["operation"] == "update"]
    assert bad == [], bad


@loop
def test_entry_effectiveness_page_shows_serves_and_sessions_apart(world):
    """docs/api.md § Effectiveness: "The same figures are on the entry page": a session served twice makes 4 serves
    of 3 sessions."""
    f = Fleet(world)
    f.week1()
    assert f.served("w2-d-0")
    served_week(f, ["clean", "clean", "clean"])
    f.dream()
    html = page(world.alice).get(reverse("reviews:entry-effectiveness", args=[f.entry_pk()])).content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "Served 4 times" in text and "Sessions served 3" in text, text[:3000]


@loop
def test_grown_session_counts_with_its_full_transcript(world):
    """docs/api.md § Sessions (?grow=true: the longer one replaces it) and § Effectiveness: served sessions pushed
    after each turn, grown to the failed `make deploy` before any dream read them, recur."""
    f = Fleet(world)
    f.week1()
    t = now()
    for i in range(3):
        assert f.served(f"gr-{i}")
        full = doc(f"gr-{i}", "deploy-bot", mistake_events(140 + i), t)
        first = {**full, "events": full["events"][:1]}
        for body in (first, full):
            r = f.deploy.request("POST", "/api/v1/sessions/?grow=true", body)
            assert r.status_code in (200, 201), r.content
    f.dream()
    assert f.eff()["recurrence"]["served"] == rec(3, 3)


@plain
def test_run_rollback_brings_back_a_removed_entry(world):
    """docs/design.md § Undo (roll back a run): every change its applied memory proposals wrote is restored: an
    entry the run removed (archived) is served again."""
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        make_entry(world.store_a, key="vpn", content="Vpn-text: staging needs the VPN.")
        p = make_proposal(world.store_a, operation="remove", targets=["vpn"], content="", kind="unused", run=run)
    approve_page(world, p)
    assert "Vpn-text" not in store_text(reader(world))
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "keep vpn"})
    assert "Vpn-text" in store_text(reader(world))


@loop
def test_one_key_rating_under_two_source_names_is_one_rater(world):
    """docs/dream-pipeline.md § Forgetting / docs/api.md § Effectiveness: `ratings.raters` counts distinct raters
    (agent keys and people): one key rating twice under two claimed `source` names is one rater of two ratings."""
    f = Fleet(world)
    f.week1()
    for source in ("bot-a", "bot-b"):
        r = f.deploy.post(f"/api/v1/stores/eng/entries/{f.key}/feedback/", {"helpful": False, "source": source})
        assert r.status_code in (200, 201), r.content
    ratings = f.eff()["ratings"]
    assert (ratings["count"], ratings["down"], ratings["raters"]) == (2, 2, 1), ratings


@loop
def test_asking_another_store_is_no_retrieval_miss(world):
    """docs/api.md § Effectiveness: a retrieval miss asked *the store* for context; ops-bot sessions that asked only
    another store of the team (eng2) and made the mistake are not served, but no retrieval miss of eng's entry."""
    f = Fleet(world)
    f.week1()
    second_store(world)
    served_week(f, ["clean", "clean", "clean"])
    docs = []
    for i in range(3):
        r = f.ops.get(
            "/api/v1/context/", {"store": "eng2", "agent": "ops-bot", "task": "release", "session": f"o2-{i}"}
        )
        assert r.status_code == 200, r.content
        docs.append(doc(f"o2-{i}", "ops-bot", mistake_events(150 + i), now()))
    push(f.ops, docs)
    f.dream()
    row = f.eff()
    assert (row["retrieval_misses"], row["recurrence"]["not_served"]) == (0, rec(3, 3)), row


@loop
def test_never_served_but_rated_down_twice_is_contradicted(world):
    """docs/api.md § Effectiveness: the verdict rule checks `contradicted` (mean below 0 from 2+ ratings) before
    `never_served`."""
    f = Fleet(world)
    f.week1()
    for api in (f.deploy, f.deploy_ci):
        r = api.post(f"/api/v1/stores/eng/entries/{f.key}/feedback/", {"helpful": False})
        assert r.status_code in (200, 201), r.content
    row = f.eff()
    assert (row["times_served"], row["verdict"]) == (0, "contradicted"), row


def with_offset(t: datetime, hours: int) -> str:
    from datetime import timezone as tz

    return t.astimezone(tz(timedelta(hours=hours))).isoformat()


@loop
def test_start_times_with_offsets_place_sessions_by_the_instant(world):
    """docs/session-formats.md (Timestamps: RFC 3339 with offsets) and docs/api.md § Effectiveness: a session
    belongs before or after the entry went live by the instant it started, whatever offset it is written in."""
    f = Fleet(world)
    f.week1()
    late = doc("off-before", "deploy-bot", mistake_events(160), f.t0)
    late["started_at"] = with_offset(f.t0 + timedelta(minutes=40), 9)  # before live, written in UTC+09:00
    push(f.deploy, [late])
    docs = []
    for i in range(3):
        assert f.served(f"off-{i}")
        d = doc(f"off-{i}", "deploy-bot", mistake_events(170 + i) if i == 0 else clean_events(170 + i), now())
        d["started_at"] = with_offset(now() + timedelta(seconds=5), -10)  # after live, written in UTC-10:00
        docs.append(d)
    push(f.deploy, docs)
    f.dream()
    r = f.eff()["recurrence"]
    assert (r["before_live"], r["served"]) == (rec(5, 5), rec(3, 1)), r
