"""Probe: memory "that proves it helps and can be undone" (docs/api.md § Effectiveness, docs/design.md § Undo,
§ People curate, § Validity and supersession). Written against the docs, blind to the implementation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from dreamweb.provenance import Author
from memory import services
from memory.models import ContextServe, MemoryEntry, MemoryVersion
from reviews.models import AnalysisStatus, DreamRun, Proposal, RunStatus, SessionAnalysis
from reviews.services import apply_proposal, approve

from .api_support import Api, make_key
from .effectiveness_history import LESSON, mistake, other_finding
from .factories import make_entry, make_proposal
from .page_support import PageClient
from .scoping import all_teams

pytestmark = pytest.mark.django_db


def fresh(entry):
    with all_teams():
        return MemoryEntry.objects.get(pk=entry.pk)


def versions(entry):
    with all_teams():
        return list(MemoryVersion.objects.filter(entry_id=entry.pk).order_by("number"))


def msgs(resp):
    return [str(m) for m in get_messages(resp.wsgi_request)]


def page(user):
    c = PageClient()
    c.force_login(user)
    return c


# ---------------------------------------------------------------------------------------------------------------
# (2) undo of an approval


def _approved_update(world, *, scope_agent="deploy-bot", content="Deploy with `make release`."):
    with all_teams():
        e = make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.", tags=["ops"])
        p = make_proposal(
            world.store_a,
            operation="update",
            targets=["deploy"],
            content=content,
            scope_agent=scope_agent,
            scope_task="release",
        )
        p = approve(p, user=world.alice, reason="looks right")
        assert p.status == "applied", p.decision_reason
    return e, p


def test_undo_approval_restores_text_and_scope_and_is_versioned(world):
    e, p = _approved_update(world)
    after = fresh(e)
    assert after.content == "Deploy with `make release`."
    assert (after.scope_agent, after.scope_task) == ("deploy-bot", "release")
    before_versions = versions(e)
    r = page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert r.status_code in (302, 303)
    now = fresh(e)
    assert now.content == "Deploy with `make deploy`."
    assert (now.scope_agent, now.scope_task) == (None, None)
    assert now.tags == ["ops"]
    assert now.status == "active"
    vs = versions(e)
    assert len(vs) == len(before_versions) + 1, "undo must be a new version, history only grows"
    last = vs[-1]
    assert last.content == "Deploy with `make deploy`."
    assert last.author_user_id == world.alice.pk
    assert last.previous_hash == after.content_hash
    assert "undo" in last.reason.lower()
    # history not rewritten
    assert [v.content for v in vs[: len(before_versions)]] == [v.content for v in before_versions]
    with all_teams():
        p.refresh_from_db()
    assert p.status == "pending"
    assert p.decided_by_id is None


def test_undo_refused_when_entry_changed_since(world):
    e, p = _approved_update(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=e.pk)
        services.update_entry(
            cur, base_version=cur.version, author=Author.person(world.adam), content="Deploy with `make ship`."
        )
    n = len(versions(e))
    r = page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert r.status_code in (302, 303)
    text = " ".join(msgs(r))
    assert "deploy" in text and ("changed" in text.lower()), text
    assert fresh(e).content == "Deploy with `make ship`."
    assert len(versions(e)) == n
    with all_teams():
        p.refresh_from_db()
    assert p.status == "applied"


def test_undo_of_add_archives_created_entry(world):
    with all_teams():
        p = make_proposal(world.store_a)
        p = approve(p, user=world.alice)
        assert p.status == "applied"
        e = MemoryEntry.objects.get(store=world.store_a, key=p.write_key)
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert fresh(e).status == "archived"
    # and it is no longer served
    with all_teams():
        raw = make_key(world.team_a, "ctx")
    ctx = Api(raw).get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release"}).json()
    assert p.write_key not in {i["key"] for i in ctx["items"]}


def test_undo_of_edited_approval_drops_edit(world):
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Use `make release`.")
        p = approve(p, user=world.alice, content="Use `make release --prod`.")
        assert p.status == "applied"
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
        e = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    assert p.status == "pending"
    assert p.content == "Use `make release`."
    assert e.content == "Deploy with `make deploy`."


def test_undo_twice_second_changes_nothing(world):
    e, p = _approved_update(world)
    c = page(world.alice)
    c.post(reverse("reviews:undo", args=[p.pk]))
    n = len(versions(e))
    r = c.post(reverse("reviews:undo", args=[p.pk]))
    assert len(versions(e)) == n
    assert any("nothing to undo" in m.lower() or "pending" in m.lower() for m in msgs(r)), msgs(r)


def test_undo_other_team_is_404_and_viewer_cannot(world):
    e, p = _approved_update(world)
    r = page(world.bob).post(reverse("reviews:undo", args=[p.pk]))
    assert r.status_code == 404
    r = page(world.victor).post(reverse("reviews:undo", args=[p.pk]))
    assert r.status_code == 403
    assert fresh(e).content == "Deploy with `make release`."


# ---------------------------------------------------------------------------------------------------------------
# (3) revert to a version


def _three_versions(world):
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="A", tags=["x"])
        e = services.update_entry(e, base_version=1, author=Author.system(), content="B", scope_agent="deploy-bot")
        e = services.update_entry(e, base_version=2, author=Author.system(), content="C", tags=["y"])
    return e


def test_revert_twice(world):
    e = _three_versions(world)
    c = page(world.alice)
    r = c.post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 3, "reason": "back"})
    assert r.status_code in (302, 303)
    e1 = fresh(e)
    assert (e1.content, e1.scope_agent, e1.tags, e1.version) == ("A", None, ["x"], 4)
    last = versions(e)[-1]
    assert last.author_user_id == world.alice.pk
    r = c.post(reverse("memory:revert", args=[e.pk]), {"number": 2, "base_version": 4})
    e2 = fresh(e)
    assert (e2.content, e2.scope_agent, e2.tags, e2.version) == ("B", "deploy-bot", ["x"], 5)
    assert [v.content for v in versions(e)] == ["A", "B", "C", "A", "B"]


def test_revert_stale_base_version_writes_nothing(world):
    e = _three_versions(world)
    r = page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2})
    assert fresh(e).version == 3 and fresh(e).content == "C"
    assert any("changed" in m for m in msgs(r)), msgs(r)


def test_revert_after_archive_brings_back_whole_state(world):
    """design.md: a version records the whole state (status too): revert brings all of it back."""
    e = _three_versions(world)
    with all_teams():
        services.archive_entry(fresh(e), base_version=3, author=Author.system())
    assert fresh(e).status == "archived"
    page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 4})
    now = fresh(e)
    assert now.content == "A"
    assert now.status == "active"
    assert now.version == 5


def test_revert_other_team_404(world):
    e = _three_versions(world)
    r = page(world.bob).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 3})
    assert r.status_code == 404
    assert fresh(e).version == 3


# ---------------------------------------------------------------------------------------------------------------
# (5) restore of archived / superseded


def test_restore_archived_entry_from_page(world):
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Keep me.", scope_agent="deploy-bot")
        services.archive_entry(e, base_version=1, author=Author.system())
    r = page(world.alice).post(reverse("memory:restore", args=[e.pk]), {"base_version": 2, "reason": "still true"})
    assert r.status_code in (302, 303)
    now = fresh(e)
    assert (now.status, now.content, now.scope_agent, now.version) == ("active", "Keep me.", "deploy-bot", 3)
    v = versions(e)[-1]
    assert v.operation == "restore" and v.author_user_id == world.alice.pk and "still true" in v.reason


def test_restore_stale_and_other_team(world):
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Keep me.")
        services.archive_entry(e, base_version=1, author=Author.system())
    assert page(world.bob).post(reverse("memory:restore", args=[e.pk]), {"base_version": 2}).status_code == 404
    assert page(world.victor).post(reverse("memory:restore", args=[e.pk]), {"base_version": 2}).status_code == 403
    page(world.alice).post(reverse("memory:restore", args=[e.pk]), {"base_version": 1})
    assert fresh(e).status == "archived"


def test_undo_of_supersession_brings_old_back_and_archives_replacement(world):
    with all_teams():
        old = make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(
            world.store_a, operation="update", targets=["deploy"], content="Deploy with `make ship`.", kind="stale"
        )
        assert p.supersedes
        p = approve(p, user=world.alice)
        assert p.status == "applied", p.decision_reason
        o = MemoryEntry.objects.get(pk=old.pk)
        assert o.superseded_by_id is not None
        repl = MemoryEntry.objects.get(pk=o.superseded_by_id)
        assert repl.key == "deploy-v2"
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    o, rp = fresh(old), fresh(repl)
    assert o.status == "active" and o.superseded_by_id is None and o.content == "Deploy with `make deploy`."
    assert rp.status == "archived"


# ---------------------------------------------------------------------------------------------------------------
# (4) + (6) rollback of a run, changes applied by the policy


def _run_with_changes(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        a = make_entry(world.store_a, key="a", content="A1")
        b = make_entry(world.store_a, key="b", content="B1")
        pa = make_proposal(world.store_a, operation="update", targets=["a"], content="A2", run=run)
        pb = make_proposal(world.store_a, operation="update", targets=["b"], content="B2", run=run)
        pn = make_proposal(world.store_a, run=run)  # add release-command
        for p in (pa, pb, pn):
            apply_proposal(p, author=Author.dream(run.pk), policy="auto_low_risk")
        for p in (pa, pb, pn):
            p.refresh_from_db()
            assert p.status == "applied", p.decision_reason
        n = MemoryEntry.objects.get(store=world.store_a, key=pn.write_key)
    return run, (a, b, n), (pa, pb, pn)


def test_policy_applied_change_visible_in_history_with_who(world):
    run, (a, b, n), (pa, pb, pn) = _run_with_changes(world)
    v = versions(a)[-1]
    assert v.content == "A2"
    assert v.author_kind == "dream" or v.author_run_id == run.pk
    assert v.author_run_id == run.pk
    assert v.proposal_id == pa.pk
    assert pa.decided_by_policy == "auto_low_risk"
    r = page(world.alice).get(reverse("memory:entry", args=[a.pk]))
    assert r.status_code == 200
    assert "policy" in r.content.decode().lower()


def test_policy_applied_change_undoable(world):
    run, (a, b, n), (pa, pb, pn) = _run_with_changes(world)
    page(world.alice).post(reverse("reviews:undo", args=[pa.pk]))
    assert fresh(a).content == "A1"
    assert versions(a)[-1].author_user_id == world.alice.pk
    with all_teams():
        pa.refresh_from_db()
    assert pa.status == "pending"


def test_rollback_run_restores_skips_changed_and_second_changes_nothing(world):
    run, (a, b, n), (pa, pb, pn) = _run_with_changes(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=b.pk)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content="B3")
    c = page(world.alice)
    g = c.get(reverse("reviews:run-rollback", args=[run.pk]))
    assert g.status_code == 200
    body = g.content.decode()
    assert "b" in body and "a" in body
    r = c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "bad dream"})
    assert r.status_code in (302, 303)
    assert fresh(a).content == "A1"
    assert fresh(b).content == "B3"
    assert fresh(n).status == "archived"
    with all_teams():
        for p in (pa, pb, pn):
            p.refresh_from_db()
        run.refresh_from_db()
    assert (pa.status, pb.status, pn.status) == ("rolled_back", "applied", "rolled_back")
    assert run.rolled_back_at is not None
    assert [s["key"] if isinstance(s, dict) and "key" in s else s for s in run.rollback["conflicts"]], run.rollback
    assert len(run.rollback["conflicts"]) == 1 and len(run.rollback["restored"]) == 2
    last_a = versions(a)[-1]
    assert last_a.author_user_id == world.alice.pk and "bad dream" in last_a.reason
    counts = [len(versions(x)) for x in (a, b, n)]
    c.post(reverse("reviews:run-rollback", args=[run.pk]), {"reason": "again"})
    assert [len(versions(x)) for x in (a, b, n)] == counts
    assert fresh(b).content == "B3"
    run_page = c.get(reverse("reviews:run", args=[run.pk])).content.decode()
    assert "B3" in run_page or "changed since" in run_page.lower()


def test_rollback_run_other_team_404_viewer_403(world):
    run, (a, b, n), _ = _run_with_changes(world)
    assert page(world.bob).post(reverse("reviews:run-rollback", args=[run.pk])).status_code == 404
    assert page(world.victor).post(reverse("reviews:run-rollback", args=[run.pk])).status_code == 403
    assert fresh(a).content == "A2"


def test_rollback_after_undo_of_one_proposal(world):
    """A proposal of the run undone already: rolling back the run must not re-touch it nor report it wrongly."""
    run, (a, b, n), (pa, pb, pn) = _run_with_changes(world)
    c = page(world.alice)
    c.post(reverse("reviews:undo", args=[pa.pk]))
    na = len(versions(a))
    c.post(reverse("reviews:run-rollback", args=[run.pk]))
    assert fresh(a).content == "A1"
    assert len(versions(a)) == na
    assert fresh(b).content == "B1"


# ---------------------------------------------------------------------------------------------------------------
# (1) (7) (8) effectiveness on a known world, via /context/ and pushed sessions


def _doc(ext, agent, started):
    return {
        "external_id": ext,
        "agent": agent,
        "task": "release",
        "outcome": "success",
        "started_at": started.isoformat().replace("+00:00", "Z"),
        "events": [
            {"type": "message", "role": "user", "content": "Ship it."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c1", "content": "ok", "is_error": False, "exit_code": 0},
        ],
    }


def build_world(
    world,
    *,
    served_hits=(False, False, False, True),
    ns_asked_hits=(True, True),
    ns_silent_hits=(True, False),
    before_hits=(True, True, True, False),
    header=False,
):
    """The lesson is scoped to deploy-bot (ops-bot is never served it). Returns (api, entry, ids)."""
    now = timezone.now()
    with all_teams():
        raw = make_key(world.team_a, "k1")
        raw2 = make_key(world.team_a, "k2")
        entry = make_entry(world.store_a, key="release-command", content=LESSON, scope_agent="deploy-bot")
        MemoryVersion.objects.filter(entry=entry).update(created_at=now - timedelta(days=10))
    api = Api(raw)
    ids = {"served": [], "ns_asked": [], "ns_silent": [], "before": []}
    docs = []
    for i, _ in enumerate(before_hits):
        ids["before"].append(f"before-{i}")
        docs.append(_doc(f"before-{i}", "deploy-bot", now - timedelta(days=20, minutes=i)))
    for i, _ in enumerate(served_hits):
        sid = f"served-{i}"
        ids["served"].append(sid)
        q = {"store": "eng", "agent": "deploy-bot", "task": "release"}
        if header:
            r = api.get("/api/v1/context/", q, headers={"X-Session-Id": sid})
        else:
            r = api.get("/api/v1/context/", {**q, "session": sid})
        assert r.status_code == 200, r.content
        assert "release-command" in {it["key"] for it in r.json()["items"]}
        docs.append(_doc(sid, "deploy-bot", now - timedelta(minutes=30 - i)))
    for i, _ in enumerate(ns_asked_hits):
        sid = f"ns-asked-{i}"
        ids["ns_asked"].append(sid)
        r = api.get("/api/v1/context/", {"store": "eng", "agent": "ops-bot", "task": "release", "session": sid})
        assert r.status_code == 200
        assert "release-command" not in {it["key"] for it in r.json()["items"]}
        docs.append(_doc(sid, "ops-bot", now - timedelta(minutes=20 - i)))
    for i, _ in enumerate(ns_silent_hits):
        sid = f"ns-silent-{i}"
        ids["ns_silent"].append(sid)
        docs.append(_doc(sid, "ops-bot", now - timedelta(minutes=10 - i)))
    r = api.post("/api/v1/sessions/", docs)
    assert r.status_code == 201, r.content
    hits = {}
    for group, flags in (
        ("before", before_hits),
        ("served", served_hits),
        ("ns_asked", ns_asked_hits),
        ("ns_silent", ns_silent_hits),
    ):
        for sid, hit in zip(ids[group], flags, strict=True):
            hits[sid] = hit
    with all_teams():
        from memory.models import AgentSession

        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        for s in AgentSession.objects.filter(team=world.team_a, external_id__in=list(hits)):
            served = s.external_id.startswith("served")
            SessionAnalysis.objects.create(
                team_id=world.team_a.pk,
                run=run,
                session=s,
                status=AnalysisStatus.DONE,
                findings=[mistake(served=served)] if hits[s.external_id] else [other_finding()],
            )
    return api, raw2, entry, ids


def eff(api, key="release-command"):
    r = api.get(f"/api/v1/stores/eng/entries/{key}/effectiveness/")
    assert r.status_code == 200, r.content
    return r.json()


def test_effectiveness_figures_on_known_world(world):
    api, raw2, entry, ids = build_world(world)
    # an extra serve of a served session (same session, twice) and one serve without a session
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": "served-0"})
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release"})
    api.post("/api/v1/stores/eng/entries/release-command/feedback/", {"helpful": True, "source": "a"})
    Api(raw2).post("/api/v1/stores/eng/entries/release-command/feedback/", {"helpful": True, "source": "b"})
    row = eff(api)
    assert row["key"] == "release-command"
    assert row["times_served"] == 6
    assert row["sessions_served"] == 4
    assert row["last_served_at"]
    assert row["ratings"]["count"] == 2 and row["ratings"]["up"] == 2 and row["ratings"]["down"] == 0
    assert row["ratings"]["mean"] == 1.0 and row["ratings"]["raters"] == 2
    rec = row["recurrence"]
    assert rec["before_live"] == {"sessions": 4, "recurred": 3, "rate": 0.75}
    assert rec["served"] == {"sessions": 4, "recurred": 1, "rate": 0.25}
    assert rec["not_served"] == {"sessions": 4, "recurred": 3, "rate": 0.75}
    assert rec["after_live"] == {"sessions": 8, "recurred": 4, "rate": 0.5}
    assert row["retrieval_misses"] == 2, "only the not-served sessions that asked and recurred"
    assert row["verdict"] == "helpful"
    assert row["scope"] == {"agent": "deploy-bot", "task": None}
    # the store list has the same row
    r = api.get("/api/v1/stores/eng/effectiveness/")
    assert r.status_code == 200
    body = r.json()
    rows = body["results"] if isinstance(body, dict) and "results" in body else body
    same = [x for x in rows if x["key"] == "release-command"]
    assert same and same[0]["recurrence"] == rec and same[0]["verdict"] == "helpful"


def test_effectiveness_no_effect_verdict(world):
    api, _, entry, ids = build_world(
        world, served_hits=(True, True, False), ns_asked_hits=(True, False), ns_silent_hits=(True,)
    )
    row = eff(api)
    assert row["recurrence"]["served"]["rate"] == round(2 / 3, 4)
    assert row["recurrence"]["not_served"]["rate"] == round(2 / 3, 4)
    assert row["verdict"] == "no_effect", row


def test_effectiveness_helpful_against_before_when_few_not_served(world):
    """Fewer than 3 not served: compare with before-live (3+ each side)."""
    api, _, entry, ids = build_world(
        world,
        served_hits=(False, False, False, True),
        ns_asked_hits=(True,),
        ns_silent_hits=(),
        before_hits=(True, True, True),
    )
    row = eff(api)
    assert row["recurrence"]["not_served"]["sessions"] == 1
    assert row["verdict"] == "helpful", row


def test_effectiveness_session_via_x_session_id_header(world):
    """The python client sends session_id as X-Session-Id; the serve must name the session."""
    api, _, entry, ids = build_world(world, header=True)
    row = eff(api)
    assert row["sessions_served"] == 4
    assert row["recurrence"]["served"]["sessions"] == 4


def test_served_audit_records_version_and_survives_update_and_undo(world):
    api, _, entry, ids = build_world(world)
    with all_teams():
        serves = list(ContextServe.objects.filter(store=world.store_a, session_external_id="served-0"))
        assert serves and serves[0].entries[0]["version"] == 1
        e = MemoryEntry.objects.get(pk=entry.pk)
        live_before = e.versions.order_by("number").first().created_at
        p = make_proposal(
            world.store_a,
            operation="update",
            targets=["release-command"],
            content=LESSON + " Always.",
            scope_agent="deploy-bot",
        )
        p = approve(p, user=world.alice)
        assert p.status == "applied"
    row1 = eff(api)
    assert row1["sessions_served"] == 4
    assert row1["recurrence"]["served"] == {"sessions": 4, "recurred": 1, "rate": 0.25}
    assert row1["recurrence"]["before_live"]["sessions"] == 4, "live_from is the first version"
    # serve again: the new serve names version 2
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": "later"})
    with all_teams():
        later = ContextServe.objects.get(store=world.store_a, session_external_id="later")
        assert later.entries[0]["version"] == 2
        # the old serve is untouched
        assert ContextServe.objects.filter(session_external_id="served-0").first().entries[0]["version"] == 1
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert fresh(entry).content == LESSON
    row2 = eff(api)
    assert row2["sessions_served"] == 5
    assert row2["recurrence"]["served"]["recurred"] == 1
    assert row2["recurrence"]["before_live"]["sessions"] == 4
    with all_teams():
        assert live_before == MemoryEntry.objects.get(pk=entry.pk).versions.order_by("number").first().created_at


def test_effectiveness_isolated_per_team(world):
    api, _, entry, ids = build_world(world)
    with all_teams():
        other = make_key(world.team_b, "b")
    b = Api(other)
    assert b.get("/api/v1/stores/eng/entries/release-command/effectiveness/").status_code == 404
    assert b.get("/api/v1/stores/eng/effectiveness/").status_code == 404
    assert page(world.bob).get(reverse("reviews:entry-effectiveness", args=[entry.pk])).status_code == 404
    assert page(world.bob).get(reverse("reviews:effectiveness", args=[world.store_a.pk])).status_code == 404
    r = page(world.victor).get(reverse("reviews:entry-effectiveness", args=[entry.pk]))
    assert r.status_code == 200


def test_effectiveness_page_shows_same_figures(world):
    api, _, entry, ids = build_world(world)
    row = eff(api)
    html = page(world.alice).get(reverse("reviews:entry-effectiveness", args=[entry.pk])).content.decode()
    assert row["reason"] in html or ("1 of 4" in html), row["reason"]
    html2 = page(world.alice).get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert reverse("reviews:entry-effectiveness", args=[entry.pk]) in html2  # loaded in place (htmx) or linked
    html3 = page(world.alice).get(reverse("reviews:effectiveness", args=[world.store_a.pk])).content.decode()
    assert "release-command" in html3 and ("1 of 4" in html3 or "25%" in html3 or "0.25" in html3)


def test_never_served_verdict(world):
    with all_teams():
        make_entry(world.store_a, key="lonely", content="The plants are watered on Fridays.")
        raw = make_key(world.team_a, "k")
    row = eff(Api(raw), "lonely")
    assert row["times_served"] == 0 and row["sessions_served"] == 0
    assert row["verdict"] == "never_served"


def test_contradicted_by_ratings(world):
    with all_teams():
        make_entry(world.store_a, key="bad", content="Use `make deploy`.")
        k1, k2 = make_key(world.team_a, "r1"), make_key(world.team_a, "r2")
    Api(k1).get("/api/v1/context/", {"store": "eng", "session": "x"})
    Api(k1).post("/api/v1/stores/eng/entries/bad/feedback/", {"helpful": False})
    Api(k2).post("/api/v1/stores/eng/entries/bad/feedback/", {"helpful": False})
    row = eff(Api(k1), "bad")
    assert row["ratings"]["down"] == 2 and row["ratings"]["mean"] < 0
    assert row["verdict"] == "contradicted"


# ---------------------------------------------------------------------------------------------------------------
# more edges


def test_undo_refusal_names_who_changed(world):
    e, p = _approved_update(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=e.pk)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content="X")
    r = page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert any("adam" in m for m in msgs(r)), msgs(r)


def test_undo_refused_when_changed_back_to_same_text(world):
    """'changed since' is about versions, not text: X -> Y(approved) -> Z -> Y again is a change since."""
    e, p = _approved_update(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=e.pk)
        cur = services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content="Z")
        services.revert_entry(cur, to_number=2, base_version=cur.version, author=Author.person(world.adam))
    n = len(versions(e))
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert len(versions(e)) == n
    assert fresh(e).content == "Deploy with `make release`."


def test_undo_refused_after_pin_only(world):
    e, p = _approved_update(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=e.pk)
        services.set_pinned(cur, pinned=True, base_version=cur.version, author=Author.person(world.adam))
    n = len(versions(e))
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert len(versions(e)) == n
    assert fresh(e).pinned is True


def test_undo_not_refused_by_serving_or_rating(world):
    """The rating and last_served_at are not writes."""
    e, p = _approved_update(world, scope_agent=None)
    with all_teams():
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    api.get("/api/v1/context/", {"store": "eng", "task": "release", "session": "s"})
    api.post("/api/v1/stores/eng/entries/deploy/feedback/", {"helpful": True})
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert fresh(e).content == "Deploy with `make deploy`."


def test_undo_rejection_goes_back_to_pending(world):
    from reviews.services import reject

    with all_teams():
        p = make_proposal(world.store_a)
        reject(p, user=world.alice, reason="no")
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
        assert not MemoryEntry.objects.filter(store=world.store_a, key=p.write_key).exists()
    assert p.status == "pending"


def test_rollback_run_with_two_changes_to_one_entry(world):
    """A run that changed one entry twice: rollback brings back the state before the run, with no conflict."""
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        a = make_entry(world.store_a, key="a", content="A1")
        p1 = make_proposal(world.store_a, operation="update", targets=["a"], content="A2", run=run)
        apply_proposal(p1, author=Author.dream(run.pk), policy="autonomous")
        p2 = make_proposal(world.store_a, operation="update", targets=["a"], content="A3", run=run)
        apply_proposal(p2, author=Author.dream(run.pk), policy="autonomous")
        p1.refresh_from_db()
        p2.refresh_from_db()
        assert (p1.status, p2.status) == ("applied", "applied")
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    assert fresh(a).content == "A1"
    with all_teams():
        run.refresh_from_db()
        p1.refresh_from_db()
        p2.refresh_from_db()
    assert run.rollback["conflicts"] == []
    assert (p1.status, p2.status) == ("rolled_back", "rolled_back")


def test_rollback_run_of_remove_and_merge(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        a = make_entry(world.store_a, key="a", content="Alpha text.")
        b = make_entry(world.store_a, key="b", content="Beta text.")
        c = make_entry(world.store_a, key="c", content="Gamma text.")
        pr = make_proposal(world.store_a, operation="remove", targets=["a"], content="", run=run, kind="unused")
        pm = make_proposal(
            world.store_a, operation="merge", targets=["b", "c"], content="Beta and gamma.", run=run, kind="duplicate"
        )
        for p in (pr, pm):
            apply_proposal(p, author=Author.dream(run.pk), policy="autonomous")
            p.refresh_from_db()
            assert p.status == "applied", p.decision_reason
        assert MemoryEntry.objects.get(pk=a.pk).status == "archived"
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    for x, text in ((a, "Alpha text."), (b, "Beta text."), (c, "Gamma text.")):
        now = fresh(x)
        assert (now.status, now.content) == ("active", text), (x.key, now.status, now.content)


def test_rollback_run_of_supersession(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        old = make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(
            world.store_a,
            operation="update",
            targets=["deploy"],
            content="Deploy with `make ship`.",
            kind="stale",
            run=run,
        )
        apply_proposal(p, author=Author.dream(run.pk), policy="autonomous")
        p.refresh_from_db()
        assert p.status == "applied", p.decision_reason
        repl = MemoryEntry.objects.get(pk=MemoryEntry.objects.get(pk=old.pk).superseded_by_id)
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    o, rp = fresh(old), fresh(repl)
    assert (o.status, o.superseded_by_id) == ("active", None)
    assert rp.status == "archived"


def test_rollback_confirmation_lists_changed_since(world):
    run, (a, b, n), _ = _run_with_changes(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=b.pk)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content="B3")
    html = page(world.alice).get(reverse("reviews:run-rollback", args=[run.pk])).content.decode()
    assert "adam" in html
    assert fresh(a).content == "A2", "GET must not change anything"


def test_restore_superseded_entry_unlinks(world):
    with all_teams():
        old = make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(
            world.store_a, operation="update", targets=["deploy"], content="Deploy with `make ship`.", kind="stale"
        )
        approve(p, user=world.alice)
        o = MemoryEntry.objects.get(pk=old.pk)
        assert o.superseded_by_id
    page(world.alice).post(reverse("memory:restore", args=[old.pk]), {"base_version": o.version})
    now = fresh(old)
    assert now.status == "active" and now.superseded_by_id is None
    assert now.content == "Deploy with `make deploy`."


def test_effectiveness_excludes_agents_not_at_risk(world):
    api, _, entry, ids = build_world(world)
    base = eff(api)["recurrence"]
    with all_teams():
        from memory.models import AgentSession

    r = api.get("/api/v1/context/", {"store": "eng", "agent": "support-bot", "session": "sup-1"})
    assert r.status_code == 200
    api.post("/api/v1/sessions/", [_doc("sup-1", "support-bot", timezone.now() - timedelta(minutes=5))])
    with all_teams():
        run = DreamRun.objects.filter(store=world.store_a).first()
        s = AgentSession.objects.get(team=world.team_a, external_id="sup-1")
        SessionAnalysis.objects.create(
            team_id=world.team_a.pk, run=run, session=s, status=AnalysisStatus.DONE, findings=[other_finding()]
        )
    assert eff(api)["recurrence"] == base


def test_effectiveness_unanalysed_sessions_not_counted(world):
    api, _, entry, ids = build_world(world)
    base = eff(api)
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": "fresh-1"})
    api.post("/api/v1/sessions/", [_doc("fresh-1", "deploy-bot", timezone.now())])
    row = eff(api)
    assert row["sessions_served"] == 5 and row["times_served"] == base["times_served"] + 1
    assert row["recurrence"] == base["recurrence"], "a session no dream analysed is in no recurrence group"


def test_effectiveness_of_archived_entry_after_undo_of_add(world):
    with all_teams():
        p = make_proposal(world.store_a)
        approve(p, user=world.alice)
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": "z"})
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    row = eff(api, p.write_key)
    assert row["status"] == "archived"
    assert row["times_served"] == 1 and row["sessions_served"] == 1


# ---------------------------------------------------------------------------------------------------------------
# round 3


def test_apply_pending_by_policy_recorded_and_undoable(world):
    from reviews.models import AutonomyPolicy

    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        e = make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(
            world.store_a, operation="update", targets=["deploy"], content="Deploy with `make release`.", run=run
        )
        AutonomyPolicy.objects.update_or_create(
            store=world.store_a, defaults={"team_id": world.team_a.pk, "mode": "auto_low_risk", "min_sessions": 1}
        )
    r = page(world.adam).post(reverse("reviews:policy-apply-pending", args=[world.store_a.pk]))
    assert r.status_code in (302, 303)
    with all_teams():
        p.refresh_from_db()
    assert p.status == "applied", (p.status, msgs(r))
    assert "adam" in p.decision_reason
    v = versions(e)[-1]
    assert v.author_run_id == run.pk and v.proposal_id == p.pk
    html = page(world.alice).get(reverse("memory:entry", args=[e.pk])).content.decode()
    assert (
        "Dream change applied by the store&#x27;s policy" in html
        or "Dream change applied by the store's policy" in html
    )
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert fresh(e).content == "Deploy with `make deploy`."


def test_reapprove_after_undo(world):
    e, p = _approved_update(world)
    c = page(world.alice)
    c.post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
        p = approve(p, user=world.alice)
    assert p.status == "applied", p.decision_reason
    assert fresh(e).content == "Deploy with `make release`."


def test_undo_next_is_not_an_open_redirect(world):
    e, p = _approved_update(world)
    r = page(world.alice).post(reverse("reviews:undo", args=[p.pk]) + "?next=https://evil.example/x")
    assert "evil.example" not in r.get("Location", "")


def test_revert_restores_pin_and_validity(world):
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="A")
        e = services.set_pinned(e, pinned=True, base_version=1, author=Author.system())
        e = services.update_entry(
            e, base_version=2, author=Author.system(), valid_until=timezone.now() + timedelta(days=3), content="B"
        )
    page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 3})
    now = fresh(e)
    assert (now.content, now.pinned, now.valid_until) == ("A", False, None)


def test_rollback_dry_run_refused(world):
    with all_teams():
        run = DreamRun.objects.create(
            team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED, dry_run=True
        )
    r = page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    with all_teams():
        run.refresh_from_db()
    assert run.rolled_back_at is None
    assert any("cannot be rolled back" in m for m in msgs(r))


def test_effectiveness_verdict_filter_and_statuses(world):
    api, raw2, entry, ids = build_world(world)
    with all_teams():
        make_entry(world.store_a, key="lonely", content="The plants are watered on Fridays.")
    body = api.get("/api/v1/stores/eng/effectiveness/", {"verdict": "never_served"}).json()
    rows = body["results"] if isinstance(body, dict) and "results" in body else body
    assert {r["key"] for r in rows} == {"lonely"}
    body = api.get("/api/v1/stores/eng/effectiveness/", {"verdict": "helpful"}).json()
    rows = body["results"] if isinstance(body, dict) and "results" in body else body
    assert {r["key"] for r in rows} == {"release-command"}


def test_effectiveness_rated_down_overrides_helpful_recurrence(world):
    api, raw2, entry, ids = build_world(world)
    api.post("/api/v1/stores/eng/entries/release-command/feedback/", {"helpful": False})
    Api(raw2).post("/api/v1/stores/eng/entries/release-command/feedback/", {"helpful": False})
    row = eff(api)
    assert row["ratings"]["mean"] < 0
    assert row["verdict"] == "contradicted"


def test_effectiveness_rated_up_unmeasured_is_helpful(world):
    with all_teams():
        make_entry(world.store_a, key="tip", content="Tabs not spaces.")
        k1, k2 = make_key(world.team_a, "r1"), make_key(world.team_a, "r2")
    Api(k1).get("/api/v1/context/", {"store": "eng", "session": "x"})
    assert eff(Api(k1), "tip")["verdict"] == "unmeasured"
    Api(k1).post("/api/v1/stores/eng/entries/tip/feedback/", {"helpful": True})
    assert eff(Api(k1), "tip")["verdict"] == "unmeasured", "one rating is not enough"
    Api(k2).post("/api/v1/stores/eng/entries/tip/feedback/", {"helpful": True})
    assert eff(Api(k1), "tip")["verdict"] == "helpful"


def test_effectiveness_score_ratings(world):
    with all_teams():
        make_entry(world.store_a, key="tip", content="Tabs not spaces.")
        k1, k2 = make_key(world.team_a, "r1"), make_key(world.team_a, "r2")
    Api(k1).post("/api/v1/stores/eng/entries/tip/feedback/", {"score": 5})
    Api(k2).post("/api/v1/stores/eng/entries/tip/feedback/", {"score": 1})
    rt = eff(Api(k1), "tip")["ratings"]
    assert (rt["count"], rt["up"], rt["down"], rt["mean"], rt["raters"]) == (2, 1, 1, 0.0, 2)


def test_effectiveness_same_rater_counts_once(world):
    with all_teams():
        make_entry(world.store_a, key="tip", content="Tabs not spaces.")
        k1 = make_key(world.team_a, "r1")
    for src in ("a", "b", "c"):
        Api(k1).post("/api/v1/stores/eng/entries/tip/feedback/", {"helpful": True, "source": src})
    rt = eff(Api(k1), "tip")["ratings"]
    assert rt["count"] == 3 and rt["raters"] == 1


def test_apply_pending_records_policy_mode(world):
    """design.md: 'Proposal.decided_by_policy records the mode that applied it' (the decided view shows it)."""
    from reviews.models import AutonomyPolicy

    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(
            world.store_a, operation="update", targets=["deploy"], content="Deploy with `make release`.", run=run
        )
        AutonomyPolicy.objects.update_or_create(
            store=world.store_a, defaults={"team_id": world.team_a.pk, "mode": "auto_low_risk", "min_sessions": 1}
        )
    page(world.adam).post(reverse("reviews:policy-apply-pending", args=[world.store_a.pk]))
    with all_teams():
        p.refresh_from_db()
    assert p.status == "applied"
    assert p.decided_by_policy == "auto_low_risk"


def test_real_dream_autonomous_then_rollback(world, django_capture_on_commit_callbacks):
    from reviews.dreams import start_run
    from reviews.models import AutonomyPolicy

    from .dream_sessions import ingest, mixed_corpus

    with all_teams():
        AutonomyPolicy.objects.update_or_create(
            store=world.store_a, defaults={"team_id": world.team_a.pk, "mode": "autonomous", "min_sessions": 2}
        )
        ingest(world.team_a, mixed_corpus("s", n_each=4))
    with all_teams(), django_capture_on_commit_callbacks(execute=True):
        run = start_run(world.store_a)
    with all_teams():
        run.refresh_from_db()
        applied = list(Proposal.objects.filter(run=run, status="applied"))
        assert applied, list(Proposal.objects.filter(run=run).values_list("status", "risk", "kind"))
        for p in applied:
            assert p.decided_by_policy == "autonomous"
            for vid in p.applied_versions:
                v = MemoryVersion.objects.get(pk=vid)
                assert v.author_run_id == run.pk and v.proposal_id == p.pk
        entries = {MemoryVersion.objects.get(pk=vid).entry_id for p in applied for vid in p.applied_versions}
    c = page(world.alice)
    c.post(reverse("reviews:run-rollback", args=[run.pk]))
    with all_teams():
        for eid in entries:
            assert MemoryEntry.objects.get(pk=eid).status == "archived"
        statuses = set(Proposal.objects.filter(pk__in=[p.pk for p in applied]).values_list("status", flat=True))
        assert statuses == {"rolled_back"}
        counts = {eid: MemoryVersion.objects.filter(entry_id=eid).count() for eid in entries}
    c.post(reverse("reviews:run-rollback", args=[run.pk]))
    with all_teams():
        assert counts == {eid: MemoryVersion.objects.filter(entry_id=eid).count() for eid in entries}


# ---------------------------------------------------------------------------------------------------------------
# round 4


def test_undo_drops_reviewers_scope_edit(world):
    """design.md: undo of an approval -> 'the proposal is pending again, its reviewer's edit dropped'."""
    with all_teams():
        make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        p = make_proposal(
            world.store_a,
            operation="update",
            targets=["deploy"],
            content="Use `make release`.",
            scope_agent="deploy-bot",
            scope_task=None,
        )
        p = approve(p, user=world.alice, scope=("ops-bot", "hotfix"))
        assert p.status == "applied"
        assert MemoryEntry.objects.get(store=world.store_a, key="deploy").scope_agent == "ops-bot"
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
        e = MemoryEntry.objects.get(store=world.store_a, key="deploy")
    assert p.status == "pending"
    assert (e.scope_agent, e.scope_task) == (None, None)
    assert (p.scope_agent, p.scope_task) == ("deploy-bot", None), "the reviewer's scope edit should be dropped"


def test_undo_drops_reviewers_key_edit(world):
    with all_teams():
        p = make_proposal(world.store_a)
        original_key = p.write_key
        p = approve(p, user=world.alice, key="my-own-key")
        assert p.status == "applied"
        assert MemoryEntry.objects.filter(store=world.store_a, key="my-own-key").exists()
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
        assert MemoryEntry.objects.get(store=world.store_a, key="my-own-key").status == "archived"
    assert p.status == "pending"
    assert p.write_key == original_key, "the reviewer's key edit should be dropped"


def test_revert_to_current_version_still_writes_version(world):
    """design.md: 'reviewed changes, reverts and rollbacks always write their version'."""
    e = _three_versions(world)
    page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 3, "base_version": 3})
    assert fresh(e).version == 4 and fresh(e).content == "C"


def test_revert_viewer_403(world):
    e = _three_versions(world)
    assert (
        page(world.victor).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 3}).status_code
        == 403
    )
    assert fresh(e).version == 3


def test_rollback_page_viewer_403(world):
    run, (a, b, n), _ = _run_with_changes(world)
    assert page(world.victor).get(reverse("reviews:run-rollback", args=[run.pk])).status_code == 403
    assert page(world.bob).get(reverse("reviews:run-rollback", args=[run.pk])).status_code == 404


def test_undo_merge_restores_both(world):
    with all_teams():
        b = make_entry(world.store_a, key="b", content="Beta text.")
        c = make_entry(world.store_a, key="c", content="Gamma text.")
        p = make_proposal(
            world.store_a, operation="merge", targets=["b", "c"], content="Beta and gamma.", kind="duplicate"
        )
        p = approve(p, user=world.alice)
        assert p.status == "applied", p.decision_reason
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert (fresh(b).status, fresh(b).content) == ("active", "Beta text.")
    assert (fresh(c).status, fresh(c).content) == ("active", "Gamma text.")


def test_rollback_not_blocked_by_serving_and_rating(world):
    run, (a, b, n), (pa, pb, pn) = _run_with_changes(world)
    with all_teams():
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    api.get("/api/v1/context/", {"store": "eng", "session": "s1"})
    api.post(f"/api/v1/stores/eng/entries/{n.key}/feedback/", {"helpful": True})
    api.post("/api/v1/stores/eng/entries/a/feedback/", {"helpful": False})
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    assert fresh(a).content == "A1" and fresh(b).content == "B1" and fresh(n).status == "archived"


def test_etag_after_page_restore(world):
    with all_teams():
        make_entry(world.store_a, key="tip", content="Keep me.")
        world.store_a.agents_may_write = True
        world.store_a.save(update_fields=["agents_may_write"])
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    et = api.get("/api/v1/stores/eng/entries/tip/")["ETag"]
    assert api.delete("/api/v1/stores/eng/entries/tip/", headers={"If-Match": et}).status_code in (200, 204)
    et2 = api.get("/api/v1/stores/eng/entries/tip/")["ETag"]
    r = api.patch("/api/v1/stores/eng/entries/tip/", {"content": "x"}, headers={"If-Match": et2})
    assert r.status_code == 409 and r.json().get("code") == "archived"
    with all_teams():
        e = MemoryEntry.objects.get(store=world.store_a, key="tip")
    page(world.alice).post(reverse("memory:restore", args=[e.pk]), {"base_version": e.version})
    et3 = api.get("/api/v1/stores/eng/entries/tip/")["ETag"]
    assert et3 not in (et, et2)
    assert (
        api.patch(
            "/api/v1/stores/eng/entries/tip/", {"content": "Keep me, restored."}, headers={"If-Match": et3}
        ).status_code
        == 200
    )


# ---------------------------------------------------------------------------------------------------------------
# round 5


def _merged(world, run=None):
    with all_teams():
        b = make_entry(world.store_a, key="b", content="Beta text.")
        c = make_entry(world.store_a, key="c", content="Gamma text.")
        p = make_proposal(
            world.store_a, operation="merge", targets=["b", "c"], content="Beta and gamma.", kind="duplicate", run=run
        )
        p = approve(p, user=world.alice)
        assert p.status == "applied", p.decision_reason
    return b, c, p


def test_undo_merge_all_or_nothing(world):
    b, c, p = _merged(world)
    with all_teams():
        kept = b if fresh(b).status == "active" else c
        other = c if kept is b else b
        cur = MemoryEntry.objects.get(pk=kept.pk)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content="Edited.")
    n_other = len(versions(other))
    r = page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert len(versions(other)) == n_other, "nothing undone when any entry changed since"
    assert fresh(kept).content == "Edited."
    assert any("changed" in m for m in msgs(r))


def test_run_rollback_partial_merge(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
    b, c, p = _merged(world, run=run)
    with all_teams():
        kept = b if fresh(b).status == "active" else c
        other = c if kept is b else b
        cur = MemoryEntry.objects.get(pk=kept.pk)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content="Edited.")
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    assert fresh(kept).content == "Edited."
    o = fresh(other)
    assert o.status == "active" and o.content in ("Beta text.", "Gamma text.")
    with all_teams():
        p.refresh_from_db()
        run.refresh_from_db()
    assert p.status == "applied"
    assert len(run.rollback["conflicts"]) == 1


def test_run_rollback_includes_reviewer_approved(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        a = make_entry(world.store_a, key="a", content="A1")
        p = make_proposal(world.store_a, operation="update", targets=["a"], content="A2", run=run)
        approve(p, user=world.alice)
    page(world.adam).post(reverse("reviews:run-rollback", args=[run.pk]))
    assert fresh(a).content == "A1"
    assert versions(a)[-1].author_user_id == world.adam.pk


def test_effectiveness_live_from_and_fields(world):
    api, _, entry, ids = build_world(world)
    row = eff(api)
    from django.utils.dateparse import parse_datetime

    live = parse_datetime(row["live_from"])
    assert abs((timezone.now() - timedelta(days=10) - live).total_seconds()) < 120
    assert row["status"] == "active" and row["pinned"] is False
    assert row["contradicted_sessions"] == 0
    assert "1 of 4" in row["reason"] and "of 4 not served" in row["reason"]


def test_effectiveness_contradicted_by_served_corrections(world):
    """An entry saying the wrong command, served to sessions that corrected exactly it (2+) -> contradicted."""
    with all_teams():
        raw = make_key(world.team_a, "k1")
        entry = make_entry(
            world.store_a, key="deploy-cmd", content="Deploy with `make deploy`.", scope_agent="deploy-bot"
        )
        MemoryVersion.objects.filter(entry=entry).update(created_at=timezone.now() - timedelta(days=2))
    api = Api(raw)
    docs = []
    for i in range(3):
        api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": f"c-{i}"})
        docs.append(_doc(f"c-{i}", "deploy-bot", timezone.now() - timedelta(minutes=10 - i)))
    api.post("/api/v1/sessions/", docs)
    with all_teams():
        from memory.models import AgentSession

        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        for s in AgentSession.objects.filter(team=world.team_a, external_id__startswith="c-"):
            SessionAnalysis.objects.create(
                team_id=world.team_a.pk, run=run, session=s, status=AnalysisStatus.DONE, findings=[mistake(served=True)]
            )
    row = eff(api, "deploy-cmd")
    assert row["contradicted_sessions"] >= 2, row
    assert row["verdict"] == "contradicted"


def test_proposal_api_other_team_404(world):
    e, p = _approved_update(world)
    with all_teams():
        other = make_key(world.team_b, "b")
    assert Api(other).get(f"/api/v1/proposals/{p.pk}/").status_code == 404


# ---------------------------------------------------------------------------------------------------------------
# round 6


def test_retrieval_miss_needs_asking_this_store(world):
    """api.md: retrieval_misses are sessions that 'asked the store for context' and were not served it; a session
    that asked another store of the team never asked this one."""
    from .factories import StoreFactory

    with all_teams():
        StoreFactory(team=world.team_a, slug="other")
    api, _, entry, ids = build_world(world, ns_asked_hits=(True, True), ns_silent_hits=())
    base = eff(api)
    assert base["retrieval_misses"] == 2
    api.get("/api/v1/context/", {"store": "other", "agent": "ops-bot", "task": "release", "session": "elsewhere"})
    api.post("/api/v1/sessions/", [_doc("elsewhere", "ops-bot", timezone.now() - timedelta(minutes=1))])
    with all_teams():
        from memory.models import AgentSession

        run = DreamRun.objects.filter(store=world.store_a).first()
        s = AgentSession.objects.get(team=world.team_a, external_id="elsewhere")
        SessionAnalysis.objects.create(
            team_id=world.team_a.pk, run=run, session=s, status=AnalysisStatus.DONE, findings=[mistake()]
        )
    row = eff(api)
    assert row["recurrence"]["not_served"]["sessions"] == base["recurrence"]["not_served"]["sessions"] + 1
    assert row["retrieval_misses"] == 2, row


def test_effectiveness_not_polluted_by_other_team(world):
    api, _, entry, ids = build_world(world)
    base = eff(api)
    from .factories import StoreFactory

    with all_teams():
        sb = StoreFactory(team=world.team_b, slug="eng")
        make_entry(sb, key="release-command", content=LESSON, scope_agent="deploy-bot")
        kb = make_key(world.team_b, "b")
    b = Api(kb)
    for sid in ("served-0", "served-1", "zz"):
        b.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": sid})
    b.post("/api/v1/stores/eng/entries/release-command/feedback/", {"helpful": False})
    row = eff(api)
    assert row["times_served"] == base["times_served"]
    assert row["sessions_served"] == base["sessions_served"]
    assert row["ratings"] == base["ratings"]
    rb = eff(b)
    assert rb["times_served"] == 3 and rb["sessions_served"] == 3


def test_decided_view_names_policy_mode_of_apply_pending(world):
    from reviews.models import AutonomyPolicy, PolicyMode

    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.SUCCEEDED)
        make_entry(world.store_a, key="deploy", content="Deploy with `make deploy`.")
        make_proposal(
            world.store_a, operation="update", targets=["deploy"], content="Deploy with `make release`.", run=run
        )
        AutonomyPolicy.objects.update_or_create(
            store=world.store_a, defaults={"team_id": world.team_a.pk, "mode": "auto_low_risk", "min_sessions": 1}
        )
    page(world.adam).post(reverse("reviews:policy-apply-pending", args=[world.store_a.pk]))
    html = page(world.alice).get(reverse("reviews:decided")).content.decode()
    assert f"policy: {PolicyMode.AUTO_LOW_RISK.label.lower()}" in html


def test_sessions_served_counts_named_sessions_not_yet_pushed(world):
    with all_teams():
        make_entry(world.store_a, key="tip", content="Tabs not spaces.")
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    for sid in ("ghost-1", "ghost-2", "ghost-1"):
        api.get("/api/v1/context/", {"store": "eng", "session": sid})
    row = eff(api, "tip")
    assert (row["times_served"], row["sessions_served"]) == (3, 2)


def test_entry_history_names_who_undid(world):
    e, p = _approved_update(world)
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    html = page(world.victor).get(reverse("memory:entry", args=[e.pk])).content.decode()
    assert "alice" in html
    assert f"#{p.pk}" in html and "undo" in html.lower()


def test_decided_view_names_policy_mode_of_dream_apply(world):
    """Control for the apply_pending case: a change the dream's own policy step applied shows its mode."""
    from reviews.models import PolicyMode

    run, _, _ = _run_with_changes(world)
    html = page(world.alice).get(reverse("reviews:decided")).content.decode()
    assert f"policy: {PolicyMode.AUTO_LOW_RISK.label.lower()}" in html


def test_reapprove_add_after_undo(world):
    """Undo makes the approval 'pending again': approving it again must be possible (its key is held only by the
    entry the undone approval created and archived)."""
    with all_teams():
        p = make_proposal(world.store_a)
        p = approve(p, user=world.alice)
        assert p.status == "applied"
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    with all_teams():
        p.refresh_from_db()
        assert p.status == "pending"
        p = approve(p, user=world.alice)
        assert p.status == "applied", p.decision_reason
        live = MemoryEntry.objects.filter(store=world.store_a, status="active", content=p.content)
        assert live.count() == 1


def test_api_write_is_versioned_with_session_and_revertable(world):
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Old tip.")
        world.store_a.agents_may_write = True
        world.store_a.save(update_fields=["agents_may_write"])
        raw = make_key(world.team_a, "writer")
    api = Api(raw)
    api.post("/api/v1/sessions/", [_doc("w-1", "deploy-bot", timezone.now())])
    et = api.get("/api/v1/stores/eng/entries/tip/")["ETag"]
    r = api.patch(
        "/api/v1/stores/eng/entries/tip/", {"content": "New tip."}, headers={"If-Match": et, "X-Session-Id": "w-1"}
    )
    assert r.status_code == 200, r.content
    with all_teams():
        v = MemoryVersion.objects.select_related("author_key", "session").filter(entry_id=e.pk).latest("number")
        assert v.author_key is not None and v.author_key.name == "writer"
        assert v.session is not None and v.session.external_id == "w-1"
    page(world.alice).post(reverse("memory:revert", args=[e.pk]), {"number": 1, "base_version": 2})
    assert fresh(e).content == "Old tip."
    assert api.patch("/api/v1/stores/eng/entries/tip/", {"content": "x"}, headers={"If-Match": et}).status_code == 412


def test_effectiveness_limit_bounds(world):
    with all_teams():
        make_entry(world.store_a, key="tip", content="Tabs not spaces.")
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    assert api.get("/api/v1/stores/eng/effectiveness/", {"limit": 0}).status_code == 400
    assert api.get("/api/v1/stores/eng/effectiveness/", {"limit": 501}).status_code == 400
    assert api.get("/api/v1/stores/eng/effectiveness/", {"offset": -1}).status_code == 400
    assert api.get("/api/v1/stores/eng/effectiveness/", {"limit": 1}).status_code == 200


def test_session_viewer_shows_version_served(world):
    """(8) the served-context audit: the session page says which entry version it was served, after updates too."""
    import re

    api, _, entry, ids = build_world(world)
    with all_teams():
        cur = MemoryEntry.objects.get(pk=entry.pk)
        services.update_entry(cur, base_version=cur.version, author=Author.person(world.adam), content=LESSON + " Now.")
        from memory.models import AgentSession

        s = AgentSession.objects.get(team=world.team_a, external_id="served-0")
    html = page(world.victor).get(reverse("memory:session", args=[s.pk])).content.decode()
    assert "release-command" in html
    text = re.sub(r"<[^>]+>", " ", html)
    i = text.find("release-command")
    window = text[max(0, i - 300) : i + 300]
    print(window)
    assert re.search(r"\bv(ersion)?\s*1\b", window), window


def test_undo_renewal_of_expired_brings_end_date_back(world):
    until = timezone.now() - timedelta(days=1)
    with all_teams():
        e = make_entry(world.store_a, key="tip", content="Freeze deploys on Fridays.", valid_until=until)
        p = make_proposal(world.store_a, operation="update", targets=["tip"], content=e.content, kind="expired")
        p = approve(p, user=world.alice)
        assert p.status == "applied", p.decision_reason
    assert fresh(e).valid_until is None
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    assert fresh(e).valid_until == until


def test_undo_of_rolled_back_proposal_refused(world):
    run, (a, b, n), (pa, pb, pn) = _run_with_changes(world)
    c = page(world.alice)
    c.post(reverse("reviews:run-rollback", args=[run.pk]))
    k = len(versions(a))
    r = c.post(reverse("reviews:undo", args=[pa.pk]))
    assert len(versions(a)) == k and fresh(a).content == "A1"
    assert any("nothing to undo" in m.lower() for m in msgs(r)), msgs(r)


def _analyse_again(world, store, sids, findings, status=AnalysisStatus.DONE):
    from memory.models import AgentSession

    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=store, status=RunStatus.SUCCEEDED)
        for s in AgentSession.objects.filter(team=world.team_a, external_id__in=sids):
            SessionAnalysis.objects.create(
                team_id=world.team_a.pk, run=run, session=s, status=status, findings=findings
            )


def test_effectiveness_session_analysed_twice_counts_once(world):
    api, _, entry, ids = build_world(world)
    base = eff(api)
    _analyse_again(world, world.store_a, ids["served"] + ids["before"] + ids["ns_asked"], [mistake(), mistake()])
    rec = eff(api)["recurrence"]
    assert rec["served"]["sessions"] == base["recurrence"]["served"]["sessions"] == 4
    assert rec["before_live"]["sessions"] == 4
    assert rec["not_served"]["sessions"] == 4


def test_effectiveness_ignores_other_stores_dreams_and_failed_analyses(world):
    from .factories import StoreFactory

    api, _, entry, ids = build_world(world)
    base = eff(api)
    with all_teams():
        other = StoreFactory(team=world.team_a, slug="other")
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": "x-1"})
    api.get("/api/v1/context/", {"store": "eng", "agent": "deploy-bot", "task": "release", "session": "x-2"})
    api.post(
        "/api/v1/sessions/",
        [_doc("x-1", "deploy-bot", timezone.now()), _doc("x-2", "deploy-bot", timezone.now())],
    )
    _analyse_again(world, other, ["x-1"], [mistake(served=True)])
    _analyse_again(world, world.store_a, ["x-2"], [mistake(served=True)], status=AnalysisStatus.FAILED)
    assert eff(api)["recurrence"] == base["recurrence"]


def test_verdict_unmeasured_when_too_few_each_side(world):
    api, _, entry, ids = build_world(
        world, served_hits=(False, False, False), ns_asked_hits=(True,), ns_silent_hits=(), before_hits=(True, True)
    )
    row = eff(api)
    assert row["verdict"] == "unmeasured", row


def test_verdict_unmeasured_when_few_served(world):
    api, _, entry, ids = build_world(
        world, served_hits=(False, False), ns_asked_hits=(True, True, True), ns_silent_hits=(True, True)
    )
    row = eff(api)
    assert row["verdict"] == "unmeasured", row


def test_verdict_no_effect_against_before_live(world):
    api, _, entry, ids = build_world(
        world,
        served_hits=(True, True, False),
        ns_asked_hits=(),
        ns_silent_hits=(),
        before_hits=(True, False, False),
    )
    row = eff(api)
    assert row["recurrence"]["not_served"]["sessions"] == 0
    assert row["verdict"] == "no_effect", row


def test_running_run_cannot_be_rolled_back(world):
    with all_teams():
        run = DreamRun.objects.create(team_id=world.team_a.pk, store=world.store_a, status=RunStatus.RUNNING)
    page(world.alice).post(reverse("reviews:run-rollback", args=[run.pk]))
    with all_teams():
        run.refresh_from_db()
    assert run.rolled_back_at is None


def test_undo_changes_etag_and_serving_does_not(world):
    e, p = _approved_update(world, scope_agent=None)
    with all_teams():
        raw = make_key(world.team_a, "k")
    api = Api(raw)
    et = api.get("/api/v1/stores/eng/entries/deploy/")["ETag"]
    api.get("/api/v1/context/", {"store": "eng", "task": "release", "session": "q"})
    api.post("/api/v1/stores/eng/entries/deploy/feedback/", {"helpful": True})
    assert api.get("/api/v1/stores/eng/entries/deploy/")["ETag"] == et
    page(world.alice).post(reverse("reviews:undo", args=[p.pk]))
    et2 = api.get("/api/v1/stores/eng/entries/deploy/")["ETag"]
    assert et2 != et
    assert api.get("/api/v1/stores/eng/entries/deploy/").json()["content"] == "Deploy with `make deploy`."


def test_dream_run_api_other_team_404(world):
    run, _, _ = _run_with_changes(world)
    with all_teams():
        other = make_key(world.team_b, "b")
    assert Api(other).get(f"/api/v1/dream-runs/{run.pk}/").status_code == 404


def test_card_after_undo_of_add_offers_approve(world):
    """After an undone add the card is pending again; it should not be blocked by its own archived entry."""
    with all_teams():
        p = make_proposal(world.store_a)
        p = approve(p, user=world.alice)
    c = page(world.alice)
    c.post(reverse("reviews:undo", args=[p.pk]))
    html = c.get(reverse("reviews:queue")).content.decode()
    assert f"#{p.pk}" in html or p.write_key in html
    assert "Choose another key" not in html
