# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Probe of the pages as a demanding user sees them: isolation, escaping, a way back, bad input, stale writes,
CSRF, finished pages and odd query strings."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memory.models import MemoryEntry, MemoryVersion
from reviews.models import DreamRun, PolicyChange, Proposal, ProposalStatus, RunStatus
from tests.factories import SessionFactory, make_entry, make_proposal, make_skill
from tests.page_support import PageClient, _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HTMX = {"HTTP_HX_REQUEST": "true"}


def login(client, user):
    client.force_login(user)
    return client


def snapshot():
    """Everything a page action could change."""
    return (
        list(MemoryEntry.objects.order_by("pk").values_list("pk", "content_hash", "status", "pinned", "version")),
        MemoryVersion.objects.count(),
        list(Proposal.objects.order_by("pk").values_list("pk", "status", "content")),
        PolicyChange.objects.count(),
        DreamRun.objects.count(),
    )


# --- (1) isolation ------------------------------------------------------------------------------------------------


@pytest.fixture
def team_b_objects(world):
    entry = make_entry(world.store_b, key="b-secret", content="Team B secret text.")
    proposal = make_proposal(world.store_b, content="Team B proposal secret.")
    session = SessionFactory(team=world.team_b, agent="b-agent")
    run = DreamRun.objects.create(team=world.team_b, store=world.store_b, status=RunStatus.SUCCEEDED)
    skill = make_skill(world.team_b, name="b-skill")
    return {"entry": entry, "proposal": proposal, "session": session, "run": run, "skill": skill}


def _b_urls(w, o):
    e, p, s, r, st = o["entry"].pk, o["proposal"].pk, o["session"].pk, o["run"].pk, w.store_b.pk
    return [
        reverse("memory:entries", args=[st]),
        reverse("memory:entry", args=[e]),
        reverse("memory:entry-create", args=[st]),
        reverse("memory:entry-edit", args=[e]),
        reverse("memory:archive", args=[e]),
        reverse("memory:restore", args=[e]),
        reverse("memory:pin", args=[e]),
        reverse("memory:unpin", args=[e]),
        reverse("memory:revert", args=[e]),
        reverse("memory:session", args=[s]),
        reverse("reviews:proposal", args=[p]),
        reverse("reviews:edit", args=[p]),
        reverse("reviews:approve", args=[p]),
        reverse("reviews:reject", args=[p]),
        reverse("reviews:rebase", args=[p]),
        reverse("reviews:preview", args=[p]),
        reverse("reviews:evidence", args=[p]),
        reverse("reviews:undo", args=[p]),
        reverse("reviews:budget", args=[p]),
        reverse("reviews:run", args=[r]),
        reverse("reviews:run-rollback", args=[r]),
        reverse("reviews:dream", args=[st]),
        reverse("reviews:policy", args=[st]),
        reverse("reviews:policy-apply-pending", args=[st]),
        reverse("reviews:effectiveness", args=[st]),
        reverse("reviews:entry-effectiveness", args=[e]),
        reverse("agent-keys", args=["team-b"]),
        reverse("members", args=["team-b"]),
        reverse("member-add", args=["team-b"]),
        reverse("member-invite", args=["team-b"]),
        reverse("skills_registry:detail", args=["team-b", "b-skill"]),
        reverse("skills_registry:versions", args=["team-b", "b-skill"]),
        reverse("skills_registry:diff", args=["team-b", "b-skill"]),
        reverse("skills_registry:revert", args=["team-b", "b-skill", 1]),
    ]


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("htmx", [False, True])
def test_team_a_cannot_reach_team_b_objects(client, world, team_b_objects, method, htmx):
    urls = _b_urls(world, team_b_objects)
    before = snapshot()
    login(client, world.adam)  # admin of A: the most rights in A, none in B
    bad = []
    data = {
        "base_version": 1,
        "number": 1,
        "content": "pwned",
        "key": "pwned",
        "reason": "x",
        "mode": "autonomous",
        "username": "adam",
        "role": "admin",
        "email": "x@example.test",
        "next": "/reviews/",
    }
    for url in urls:
        kwargs = HTMX if htmx else {}
        response = getattr(client, method)(url, data, **kwargs) if method == "post" else client.get(url, **kwargs)
        body = response.content.decode(errors="replace")
        if response.status_code not in (403, 404, 405) or "secret" in body:
            bad.append((url, response.status_code))
    assert bad == [], bad
    assert snapshot() == before


def test_bulk_with_other_team_ids_changes_nothing(client, world, team_b_objects):
    before = snapshot()
    login(client, world.alice).post(
        reverse("reviews:bulk"), {"ids": [team_b_objects["proposal"].pk], "action": "approve", "confirmed": "1"}
    )
    assert snapshot() == before


def test_lists_do_not_show_team_b_objects(client, world, team_b_objects):
    login(client, world.alice)
    for url in [
        reverse("reviews:queue"),
        reverse("reviews:decided"),
        reverse("memory:stores"),
        reverse("memory:sessions"),
        reverse("reviews:runs"),
        reverse("skills_registry:list"),
        reverse("reviews:queue") + f"?store={world.store_b.pk}",
    ]:
        body = client.get(url).content.decode()
        assert "secret" not in body and "b-agent" not in body and "b-skill" not in body, url


# --- (2) escaping -------------------------------------------------------------------------------------------------

XSS = '<script>alert(1)</script>"><img src=x onerror=alert(2)>{{ 7|add:7 }}{% now "Y" %}'
RAW_MARKERS = ["<script>alert(1)", "<img src=x onerror", "onerror=alert(2)>"]


def assert_escaped(body: str, where: str):
    for marker in RAW_MARKERS:
        assert marker not in body, f"{where}: raw {marker!r}"
    # JSON embedded in a <script> must not close the script early
    for block in re.findall(r"<script[^>]*>(.*?)</script>", body, flags=re.S):
        assert "alert(1)" not in block or "\\u003C" in block or "\\u003c" in block, f"{where}: payload inside <script>"


@pytest.fixture
def hostile(world):
    store = world.store_a
    store.name = "Store " + XSS if hasattr(store, "name") else None
    if hasattr(store, "name"):
        store.save()
    entry = make_entry(store, key="xss-key", content="Entry " + XSS)
    session = SessionFactory(
        team=world.team_a,
        agent="agent<script>alert(1)</script>",
        task='task"><img src=x onerror=alert(2)>',
        events=[{"type": "message", "role": "user", "content": "Session " + XSS}],
        event_count=1,
    )
    proposal = make_proposal(
        store,
        operation="update",
        targets=["xss-key"],
        content="Proposal " + XSS,
        rationale="Rationale " + XSS,
        sessions=[session],
        scope_agent="agent<script>alert(1)</script>",
    )
    proposal.evidence.update(excerpt="Excerpt " + XSS)
    run = DreamRun.objects.create(
        team=world.team_a,
        store=store,
        status=RunStatus.SUCCEEDED,
        isolated=[{"kind": "preference", "summary": "Isolated " + XSS}],
    )
    return {"entry": entry, "session": session, "proposal": proposal, "run": run}


def test_hostile_text_is_escaped_on_every_page_and_partial(client, world, hostile):
    login(client, world.adam)
    e, p, s, r = hostile["entry"].pk, hostile["proposal"].pk, hostile["session"].pk, hostile["run"].pk
    urls = [
        reverse("reviews:queue"),
        reverse("reviews:proposal", args=[p]),
        reverse("reviews:evidence", args=[p]),
        reverse("reviews:budget", args=[p]),
        reverse("reviews:edit", args=[p]),
        reverse("memory:stores"),
        reverse("memory:entries", args=[world.store_a.pk]),
        reverse("memory:entry", args=[e]),
        reverse("memory:entry-edit", args=[e]),
        reverse("memory:sessions"),
        reverse("memory:session", args=[s]),
        reverse("reviews:run", args=[r]),
        reverse("reviews:runs"),
        reverse("reviews:policy", args=[world.store_a.pk]),
        reverse("reviews:effectiveness", args=[world.store_a.pk]),
        reverse("reviews:entry-effectiveness", args=[e]),
    ]
    for url in urls:
        for kwargs in ({}, HTMX):
            response = client.get(url, **kwargs)
            assert response.status_code == 200, (url, response.status_code)
            body = response.content.decode()
            assert_escaped(body, url)
            assert "alert(2)&gt;14" not in body and "alert(2)>14" not in body, f"{url}: template syntax evaluated"


def test_hostile_text_escaped_in_preview_and_decision_responses(client, world, hostile):
    login(client, world.alice)
    p = hostile["proposal"].pk
    body = client.post(
        reverse("reviews:preview", args=[p]), {"content": "Edited " + XSS, "key": "xss-key"}, **HTMX
    ).content.decode()
    assert_escaped(body, "preview")
    body = client.post(reverse("reviews:reject", args=[p]), {"reason": "Reason " + XSS}, **HTMX).content.decode()
    assert_escaped(body, "reject")
    body = client.get(reverse("reviews:decided")).content.decode()
    assert_escaped(body, "decided")
    assert "Reason" in body  # the reason typed is shown on the decided list


def test_javascript_url_in_entry_content_is_not_a_link(client, world):
    entry = make_entry(
        world.store_a, key="links", content='See [docs](javascript:alert(1)) and <a href="javascript:alert(2)">x</a>'
    )
    body = login(client, world.alice).get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert not re.search(r'href\s*=\s*["\']?\s*javascript:', body, flags=re.I)


def test_form_errors_echo_hostile_input_escaped(client, world):
    login(client, world.alice)
    response = client.post(reverse("memory:entry-create", args=[world.store_a.pk]), {"key": XSS, "content": XSS})
    assert response.status_code in (200, 302, 400)
    if response.status_code == 302:  # keys are free text: the entry page must show it as text
        response = client.get(response.url)
        assert "alert(1)" in response.content.decode()
    assert_escaped(response.content.decode(), "entry-create")


# --- (3) a way back -----------------------------------------------------------------------------------------------


def test_approve_offers_undo_and_undo_restores(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    response = client.post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, follow=True)
    body = response.content.decode()
    assert reverse("reviews:undo", args=[proposal.pk]) in body, "no Undo after approve"
    assert MemoryEntry.objects.filter(store=world.store_a, status="active").count() == 1
    client.post(reverse("reviews:undo", args=[proposal.pk]), {"next": "/reviews/"})
    assert MemoryEntry.objects.filter(store=world.store_a, status="active").count() == 0


def test_reject_offers_undo_or_decided_link(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    body = client.post(
        reverse("reviews:reject", args=[proposal.pk]), {"reason": "nah", "next": "/reviews/"}, follow=True
    ).content.decode()
    assert reverse("reviews:undo", args=[proposal.pk]) in body or reverse("reviews:decided") in body
    decided = client.get(reverse("reviews:decided")).content.decode()
    assert f"/reviews/proposals/{proposal.pk}/" in decided


def test_htmx_approve_response_has_undo(client, world):
    proposal = make_proposal(world.store_a)
    body = (
        login(client, world.alice)
        .post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, **HTMX)
        .content.decode()
    )
    assert reverse("reviews:undo", args=[proposal.pk]) in body


def test_archive_is_recorded_and_restorable(client, world):
    entry = make_entry(world.store_a, key="k1", content="Text one.")
    login(client, world.alice)
    body = client.post(
        reverse("memory:archive", args=[entry.pk]), {"base_version": 1, "reason": "old"}, follow=True
    ).content.decode()
    assert reverse("memory:restore", args=[entry.pk]) in body
    entry.refresh_from_db()
    assert entry.status == "archived" and MemoryVersion.objects.filter(entry=entry).count() == 2
    page = client.get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert "old" in page and "alice" in page


def test_edit_is_recorded_with_author_and_reason_in_history(client, world):
    entry = make_entry(world.store_a, key="k2", content="Text two.")
    login(client, world.alice)
    form = client.get(reverse("memory:entry-edit", args=[entry.pk])).content.decode()
    data = _form_data(form)
    data.update({"content": "Text two, edited.", "reason": "clarified-it"})
    r = client.post(reverse("memory:entry-edit", args=[entry.pk]), data)
    assert r.status_code == 302, r.content.decode()[:2000]
    page = client.get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert "clarified-it" in page and "alice" in page
    assert 'name="number"' in page  # a revert form to go back


def _form_data(html: str) -> dict:
    form = html.split('class="card form-card entry-form"', 1)[1].split("</form>", 1)[0]
    data = {}
    for m in re.finditer(r"<input([^>]*)>", form):
        attrs = m.group(1)
        name = re.search(r'name="([^"]+)"', attrs)
        if not name or name.group(1) == "csrfmiddlewaretoken":
            continue
        if 'type="checkbox"' in attrs:
            if "checked" in attrs:
                data[name.group(1)] = "on"
            continue
        value = re.search(r'value="([^"]*)"', attrs)
        data[name.group(1)] = value.group(1) if value else ""
    for m in re.finditer(r'<textarea[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', form, flags=re.S):
        data[m.group(1)] = m.group(2).strip()
    for m in re.finditer(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', form, flags=re.S):
        sel = re.search(r'<option value="([^"]*)"[^>]*selected', m.group(2))
        data[m.group(1)] = sel.group(1) if sel else ""
    import html as h

    return {k: h.unescape(v) for k, v in data.items()}


def test_policy_change_is_recorded_in_history(client, world):
    login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    data = {
        "mode": "auto_low_risk",
        "min_sessions": 4,
        "min_share": 0.1,
        "min_confidence_auto": 0.7,
        "max_sessions": 500,
        "token_budget": 100000,
        "agents": "",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    assert client.post(url, data).status_code == 302
    body = client.get(url).content.decode()
    assert "History" in body and "adam" in body


# --- (4) bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {"key": "", "content": ""},
        {"key": "k" * 5000, "content": "typed text kept"},
        {"key": "ok-key", "content": "x" * 2_000_000},
        {"key": "ok-key2", "content": "typed text kept", "valid_from": "not a date", "valid_until": "yesterday"},
        {"key": "ok-key3", "content": "typed text kept", "tags": "a" * 10000},
        {"key": "ok-key4", "content": "typed text kept\x00nul"},
    ],
)
def test_entry_create_bad_input_shows_errors_and_keeps_text(client, world, data):
    login(client, world.alice)
    response = client.post(reverse("memory:entry-create", args=[world.store_a.pk]), data)
    assert response.status_code in (200, 400, 413, 422), response.status_code
    body = response.content.decode()
    assert 'class="form-error"' in body or "error" in body.lower()
    if "typed text kept" in data["content"]:
        assert "typed text kept" in body
    assert not MemoryEntry.objects.filter(store=world.store_a).exists()


def test_entry_create_duplicate_key_is_a_form_error(client, world):
    make_entry(world.store_a, key="dup", content="first")
    login(client, world.alice)
    response = client.post(
        reverse("memory:entry-create", args=[world.store_a.pk]), {"key": "dup", "content": "second typed"}
    )
    assert response.status_code in (200, 400, 409)
    assert "second typed" in response.content.decode()
    assert MemoryEntry.objects.filter(store=world.store_a).count() == 1


@pytest.mark.parametrize("base_version", ["abc", "", "-1", "99999999999999999999", "1.5"])
@pytest.mark.parametrize("action", ["archive", "pin", "unpin", "restore", "revert", "entry-edit"])
def test_entry_actions_with_wrong_type_values_do_not_500(client, world, action, base_version):
    entry = make_entry(world.store_a, key="k", content="Text.")
    login(client, world.alice)
    before = snapshot()
    response = client.post(
        reverse(f"memory:{action}", args=[entry.pk]),
        {"base_version": base_version, "number": base_version, "content": "typed", "key": "k"},
    )
    assert response.status_code < 500
    if base_version != "":
        assert snapshot() == before


@pytest.mark.parametrize(
    "field,value",
    [
        ("min_sessions", "abc"),
        ("min_share", "NaN"),
        ("token_budget", "1e999"),
        ("max_sessions", "-5"),
        ("mode", "god"),
        ("schedule_minutes", "99999999999999999999"),
        ("min_confidence_auto", "1.5"),
        ("min_confidence_auto", "-0.1"),
        ("min_share", "-0.1"),
        ("max_sessions", "0"),
        ("token_budget", "-1"),
        ("min_sessions", "-3"),
    ],
)
def test_policy_bad_values_show_errors(client, world, field, value):
    login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    data = {
        "mode": "auto_low_risk",
        "min_sessions": 4,
        "min_share": 0.1,
        "min_confidence_auto": 0.7,
        "max_sessions": 500,
        "token_budget": 100000,
        "agents": "typed-agent",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    data[field] = value
    response = client.post(url, data)
    assert response.status_code == 200, response.status_code
    body = response.content.decode()
    assert "form-error" in body or "errorlist" in body
    assert "typed-agent" in body
    assert not PolicyChange.objects.exists()


def test_reject_with_overlong_reason_does_not_500(client, world):
    proposal = make_proposal(world.store_a)
    response = login(client, world.alice).post(
        reverse("reviews:reject", args=[proposal.pk]), {"reason": "r" * 100000}, **HTMX
    )
    assert response.status_code < 500


@pytest.mark.parametrize("ids", [["abc"], ["-1"], ["99999999999999999999"], [""]])
def test_bulk_with_garbage_ids_does_not_500(client, world, ids):
    make_proposal(world.store_a)
    response = login(client, world.alice).post(reverse("reviews:bulk"), {"ids": ids, "action": "approve"})
    assert response.status_code < 500


def test_bulk_unknown_action_does_not_500_or_apply(client, world):
    proposal = make_proposal(world.store_a)
    response = login(client, world.alice).post(reverse("reviews:bulk"), {"ids": [proposal.pk], "action": "delete"})
    assert response.status_code < 500
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING


@pytest.mark.parametrize("key", ["", "k" * 300, "   "])
@pytest.mark.parametrize("htmx", [True, False])
def test_approve_with_bad_key_in_edit_keeps_what_was_typed(client, world, key, htmx):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    client.raise_request_exception = False
    kwargs = HTMX if htmx else {}
    response = client.post(
        reverse("reviews:approve", args=[proposal.pk]),
        {"edited": "1", "key": key, "content": "typed content kept", "reason": "typed reason", "next": "/reviews/"},
        follow=not htmx,
        **kwargs,
    )
    assert response.status_code < 500
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    body = response.content.decode()
    assert "typed content kept" in body, "the edited text is lost after the key error"


# --- (5) stale writes ---------------------------------------------------------------------------------------------


def test_approve_when_target_changed_is_refused_with_message(client, world):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    update_entry(entry, content="Deploy with make ship.", author=Author.system(), base_hash=entry.content_hash)
    response = login(client, world.alice).post(
        reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, follow=True
    )
    entry.refresh_from_db()
    assert entry.content == "Deploy with make ship."
    body = response.content.decode().lower()
    assert "changed" in body or "conflict" in body


def test_double_reject_records_once(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    client.post(reverse("reviews:reject", args=[proposal.pk]), {"reason": "first"})
    r2 = client.post(reverse("reviews:reject", args=[proposal.pk]), {"reason": "second"}, follow=True)
    assert r2.status_code < 500
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.REJECTED
    assert "second" not in (getattr(proposal, "decision_reason", "") or getattr(proposal, "reason", "") or "")


def test_double_archive_same_post_does_not_write_twice(client, world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    login(client, world.alice)
    client.post(reverse("memory:archive", args=[entry.pk]), {"base_version": 1, "reason": "x"})
    r = client.post(reverse("memory:archive", args=[entry.pk]), {"base_version": 1, "reason": "x"}, follow=True)
    assert r.status_code < 500
    assert MemoryVersion.objects.filter(entry=entry).count() == 2


def test_double_revert_same_post_applies_once(client, world):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="k", content="v1")
    update_entry(entry, content="v2", author=Author.system(), base_hash=entry.content_hash)
    login(client, world.alice)
    url = reverse("memory:revert", args=[entry.pk])
    client.post(url, {"number": 1, "base_version": 2, "reason": "r"})
    r = client.post(url, {"number": 1, "base_version": 2, "reason": "r"}, follow=True)
    assert r.status_code < 500
    assert MemoryVersion.objects.filter(entry=entry).count() == 3


def test_double_undo_applies_once(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    client.post(reverse("reviews:approve", args=[proposal.pk]))
    n = MemoryVersion.objects.count()
    client.post(reverse("reviews:undo", args=[proposal.pk]))
    n2 = MemoryVersion.objects.count()
    r = client.post(reverse("reviews:undo", args=[proposal.pk]), follow=True)
    assert r.status_code < 500
    assert n2 == n + 1 and MemoryVersion.objects.count() == n2


def test_stale_entry_edit_keeps_typed_text_and_shows_current(client, world):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="k", content="original")
    login(client, world.alice)
    data = _form_data(client.get(reverse("memory:entry-edit", args=[entry.pk])).content.decode())
    update_entry(entry, content="someone else's", author=Author.system(), base_hash=entry.content_hash)
    data.update({"content": "my typed text", "reason": "mine"})
    r = client.post(reverse("memory:entry-edit", args=[entry.pk]), data)
    assert r.status_code == 412
    body = r.content.decode()
    assert "my typed text" in body and "someone else" in body
    entry.refresh_from_db()
    assert entry.content == "someone else's"


# --- (6) CSRF -----------------------------------------------------------------------------------------------------


def test_every_state_changing_post_requires_csrf(world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    proposal = make_proposal(world.store_a)
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    client = PageClient(enforce_csrf_checks=True)
    client.force_login(world.adam)
    urls = [
        reverse("memory:entry-create", args=[world.store_a.pk]),
        reverse("memory:entry-edit", args=[entry.pk]),
        reverse("memory:archive", args=[entry.pk]),
        reverse("memory:restore", args=[entry.pk]),
        reverse("memory:pin", args=[entry.pk]),
        reverse("memory:unpin", args=[entry.pk]),
        reverse("memory:revert", args=[entry.pk]),
        reverse("reviews:approve", args=[proposal.pk]),
        reverse("reviews:reject", args=[proposal.pk]),
        reverse("reviews:edit", args=[proposal.pk]),
        reverse("reviews:rebase", args=[proposal.pk]),
        reverse("reviews:undo", args=[proposal.pk]),
        reverse("reviews:bulk"),
        reverse("reviews:run-rollback", args=[run.pk]),
        reverse("reviews:dream", args=[world.store_a.pk]),
        reverse("reviews:policy", args=[world.store_a.pk]),
        reverse("reviews:policy-apply-pending", args=[world.store_a.pk]),
        reverse("switch-team"),
        reverse("agent-keys", args=["team-a"]),
        reverse("member-add", args=["team-a"]),
        reverse("member-invite", args=["team-a"]),
        reverse("logout"),
    ]
    before = snapshot()
    bad = []
    for url in urls:
        for kwargs in ({}, HTMX):
            r = client.post(
                url,
                {
                    "base_version": 1,
                    "content": "x",
                    "key": "x",
                    "ids": [proposal.pk],
                    "action": "approve",
                    "mode": "autonomous",
                    "username": "bob",
                    "role": "viewer",
                },
                **kwargs,
            )
            if r.status_code != 403:
                bad.append((url, bool(kwargs), r.status_code))
    assert bad == [], bad
    assert snapshot() == before


# --- (7) finished pages -------------------------------------------------------------------------------------------


def _all_pages(world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    proposal = make_proposal(world.store_a)
    session = SessionFactory(team=world.team_a)
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    make_skill(world.team_a, name="a-skill")
    return [
        reverse("reviews:queue"),
        reverse("reviews:decided"),
        reverse("reviews:proposal", args=[proposal.pk]),
        reverse("reviews:runs"),
        reverse("reviews:run", args=[run.pk]),
        reverse("reviews:policy", args=[world.store_a.pk]),
        reverse("reviews:effectiveness", args=[world.store_a.pk]),
        reverse("reviews:entry-effectiveness", args=[entry.pk]),
        reverse("memory:stores"),
        reverse("memory:entries", args=[world.store_a.pk]),
        reverse("memory:entry", args=[entry.pk]),
        reverse("memory:entry-create", args=[world.store_a.pk]),
        reverse("memory:entry-edit", args=[entry.pk]),
        reverse("memory:sessions"),
        reverse("memory:session", args=[session.pk]),
        reverse("agent-keys", args=["team-a"]),
        reverse("members", args=["team-a"]),
        reverse("skills_registry:list"),
        reverse("skills_registry:detail", args=["team-a", "a-skill"]),
        reverse("skills_registry:versions", args=["team-a", "a-skill"]),
    ]


FORBIDDEN = [
    r"\bTODO\b",
    r"\blorem\b",
    r"Traceback",
    r"FIXME",
    r">\s*None\s*<",
    r"\bNone\b(?![.<])",
    r"\bnan\b",
    r"\{\{",
    r"\{%",
    r"undefined",
]


def test_every_page_looks_finished(client, world):
    urls = _all_pages(world)
    login(client, world.adam)
    bad = []
    for url in urls:
        r = client.get(url)
        body = r.content.decode()
        title = re.search(r"<title>(.*?)</title>", body, flags=re.S)
        if r.status_code != 200 or not title or not title.group(1).strip():
            bad.append((url, r.status_code, "title"))
            continue
        text = re.sub(r"<script.*?</script>|<style.*?</style>", "", body, flags=re.S)
        text = re.sub(r"<[^>]+>", " ", text)
        for pat in FORBIDDEN:
            m = re.search(pat, text, flags=re.I if pat in (r"\blorem\b",) else 0)
            if m:
                bad.append((url, pat, text[max(0, m.start() - 60) : m.end() + 60]))
    assert bad == [], bad


def test_titles_differ_per_page(client, world):
    urls = _all_pages(world)
    login(client, world.adam)
    titles = {}
    for url in urls:
        body = client.get(url).content.decode()
        titles[url] = re.search(r"<title>(.*?)</title>", body, flags=re.S).group(1).strip()
    assert len(set(titles.values())) >= len(titles) - 2, titles


@pytest.mark.parametrize(
    "page",
    ["reviews:queue", "reviews:decided", "reviews:runs", "memory:sessions", "skills_registry:list"],
)
def test_empty_states_say_something(client, world, page):
    body = login(client, world.alice).get(reverse(page)).content.decode()
    main = body.split("<main", 1)[-1]
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", main, flags=re.S))
    assert re.search(r"\b(no|nothing|empty|none yet|yet)\b", text, flags=re.I), text[:800]


def test_empty_store_entries_page_says_something(client, world):
    body = login(client, world.alice).get(reverse("memory:entries", args=[world.store_a.pk])).content.decode()
    text = re.sub(r"<[^>]+>", " ", body.split("<main", 1)[-1])
    assert re.search(r"\b(no entries|nothing|empty|no memory|yet)\b", text, flags=re.I)


# --- (8) odd query strings ----------------------------------------------------------------------------------------

ODD = [
    "page=-1",
    "page=0",
    "page=999999999",
    "page=abc",
    "page=1e9",
    "page=%00",
    "risk=bogus",
    "status=zzz",
    "store=abc",
    "store=-1",
    "store=999999999999999999999",
    "sort=__class__",
    "order=-pk",
    "q=%27%22%3C",
    "q=" + "x" * 5000,
    "agent=%00",
    "kind=nope&risk=low&risk=high",
    "since=notadate",
    "outcome=%FF",
]


@pytest.mark.parametrize("qs", ODD)
def test_odd_query_strings_do_not_500(client, world, qs):
    make_proposal(world.store_a)
    make_entry(world.store_a, key="k", content="Text.")
    SessionFactory(team=world.team_a)
    login(client, world.alice)
    bad = []
    for name, args in [
        ("reviews:queue", []),
        ("reviews:decided", []),
        ("reviews:runs", []),
        ("memory:sessions", []),
        ("memory:stores", []),
        ("memory:entries", [world.store_a.pk]),
        ("skills_registry:list", []),
    ]:
        url = reverse(name, args=args) + "?" + qs
        for kwargs in ({}, HTMX):
            r = client.get(url, **kwargs)
            if r.status_code >= 500:
                bad.append((url, bool(kwargs), r.status_code))
    assert bad == [], bad


def test_entry_diff_with_odd_version_numbers_does_not_500(client, world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    login(client, world.alice)
    for qs in ["a=abc&b=1", "a=-1&b=99999999999999999999", "a=1&b=1", "from=x&to=y", "version=abc", "diff=%00"]:
        r = client.get(reverse("memory:entry", args=[entry.pk]) + "?" + qs)
        assert r.status_code < 500, qs


# --- more: roles, redirects, missing values -----------------------------------------------------------------------


def test_viewer_cannot_change_anything(client, world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    proposal = make_proposal(world.store_a)
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    login(client, world.victor)
    before = snapshot()
    bad = []
    urls = [
        reverse("memory:entry-create", args=[world.store_a.pk]),
        reverse("memory:entry-edit", args=[entry.pk]),
        reverse("memory:archive", args=[entry.pk]),
        reverse("memory:pin", args=[entry.pk]),
        reverse("memory:revert", args=[entry.pk]),
        reverse("reviews:approve", args=[proposal.pk]),
        reverse("reviews:reject", args=[proposal.pk]),
        reverse("reviews:edit", args=[proposal.pk]),
        reverse("reviews:rebase", args=[proposal.pk]),
        reverse("reviews:run-rollback", args=[run.pk]),
        reverse("reviews:dream", args=[world.store_a.pk]),
        reverse("reviews:policy", args=[world.store_a.pk]),
        reverse("reviews:policy-apply-pending", args=[world.store_a.pk]),
        reverse("member-add", args=["team-a"]),
        reverse("member-invite", args=["team-a"]),
    ]
    for url in urls:
        for kwargs in ({}, HTMX):
            r = client.post(
                url,
                {
                    "base_version": 1,
                    "number": 1,
                    "content": "x",
                    "key": "x",
                    "ids": [proposal.pk],
                    "action": "approve",
                    "mode": "autonomous",
                    "username": "bob",
                    "role": "admin",
                    "email": "z@example.test",
                },
                **kwargs,
            )
            if r.status_code not in (403, 404, 405):
                bad.append((url, bool(kwargs), r.status_code))
    assert snapshot() == before
    assert bad == [], bad


def test_viewer_bulk_is_refused_with_a_message(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.victor)
    r = client.post(reverse("reviews:bulk"), {"ids": [proposal.pk], "action": "approve", "confirmed": "1"}, follow=True)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    assert r.status_code == 403 or re.search(
        r"not allowed|permission|viewer|cannot|can't|read only", r.content.decode(), re.I
    )


@pytest.mark.parametrize("action", ["undo", "reject", "approve"])
def test_decision_next_refuses_external_urls(client, world, action):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    if action == "undo":
        client.post(reverse("reviews:approve", args=[proposal.pk]))
    r = client.post(reverse(f"reviews:{action}", args=[proposal.pk]), {"next": "https://evil.example/x", "reason": "r"})
    assert "evil.example" not in r.get("Location", "") and "evil.example" not in r.get("HX-Redirect", "")


def test_bulk_and_switch_team_refuse_external_next(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    for url, data in [
        (
            reverse("reviews:bulk"),
            {"ids": [proposal.pk], "action": "reject", "confirmed": "1", "next": "//evil.example/"},
        ),
        (reverse("switch-team"), {"team": "team-a", "slug": "team-a", "next": "https://evil.example/"}),
    ]:
        r = client.post(url, data)
        assert r.status_code < 500
        assert "evil.example" not in r.get("Location", ""), url


def test_switch_team_to_a_team_i_am_not_in_is_refused(client, world, team_b_objects):
    login(client, world.alice)
    client.post(reverse("switch-team"), {"team": "team-b", "slug": "team-b", "team_id": world.team_b.pk})
    body = client.get(reverse("reviews:queue")).content.decode()
    assert "secret" not in body


def test_join_with_bogus_token_is_not_a_500(client, world):
    login(client, world.bob)
    for token in ["nope", "x" * 500, "%00"]:
        r = client.get(f"/teams/team-a/join/{token}/")
        assert r.status_code in (200, 400, 403, 404), (token, r.status_code)
        r = client.post(f"/teams/team-a/join/{token}/")
        assert r.status_code in (200, 302, 400, 403, 404), (token, r.status_code)
    assert not world.team_a.memberships.filter(user=world.bob).exists()


def test_missing_values_are_not_shown_as_none(client, world):
    session = SessionFactory(team=world.team_a, agent="", task="", outcome="", events=[], event_count=0)
    proposal = make_proposal(world.store_a, rationale="", sessions=[], prevalence=(0, 0), confidence=0)
    entry = make_entry(world.store_a, key="bare", content="Bare entry.")
    login(client, world.alice)
    bad = []
    for url in [
        reverse("memory:session", args=[session.pk]),
        reverse("memory:sessions"),
        reverse("reviews:queue"),
        reverse("reviews:proposal", args=[proposal.pk]),
        reverse("memory:entry", args=[entry.pk]),
        reverse("memory:entries", args=[world.store_a.pk]),
    ]:
        r = client.get(url)
        if r.status_code != 200:
            bad.append((url, r.status_code))
            continue
        text = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", r.content.decode(), flags=re.S))
        for pat in [r"\bNone\b(?![.])", r"\bnan\b", r"NaN", r"division"]:
            m = re.search(pat, text)
            if m:
                bad.append((url, pat, text[max(0, m.start() - 60) : m.end() + 60]))
    assert bad == [], bad


def test_queue_htmx_partial_has_no_full_page(client, world):
    make_proposal(world.store_a)
    body = login(client, world.alice).get(reverse("reviews:queue") + "?page=2", **HTMX).content.decode()
    assert "<html" not in body.lower()


def test_unknown_object_ids_are_404_not_500(client, world):
    login(client, world.alice)
    bad = []
    for url in [
        "/memory/entries/999999999/",
        "/memory/stores/999999999/",
        "/memory/sessions/999999999/",
        "/reviews/proposals/999999999/",
        "/reviews/proposals/999999999/evidence/",
        "/reviews/runs/999999999/",
        "/reviews/stores/999999999/policy/",
        "/memory/entries/99999999999999999999999/",
        "/skills/team-a/nope/",
        "/teams/nope/members/",
    ]:
        r = client.get(url)
        if r.status_code != 404:
            bad.append((url, r.status_code))
    assert bad == [], bad


NUL_PARAMS = [
    "q",
    "agent",
    "task",
    "outcome",
    "store",
    "kind",
    "risk",
    "status",
    "tag",
    "scope",
    "sort",
    "operation",
    "author",
    "key",
    "source",
    "page",
]


@pytest.mark.parametrize(
    "name,args",
    [
        ("reviews:queue", []),
        ("reviews:decided", []),
        ("reviews:runs", []),
        ("memory:sessions", []),
        ("memory:entries", ["store"]),
        ("skills_registry:list", []),
        ("memory:entry", ["entry"]),
    ],
)
def test_nul_byte_in_any_filter_is_not_a_500(client, world, name, args):
    make_proposal(world.store_a)
    entry = make_entry(world.store_a, key="k", content="Text.")
    SessionFactory(team=world.team_a)
    real = [{"store": world.store_a.pk, "entry": entry.pk}[a] for a in args]
    login(client, world.alice)
    client.raise_request_exception = False
    bad = []
    for param in NUL_PARAMS:
        r = client.get(reverse(name, args=real) + f"?{param}=a%00b")
        if r.status_code >= 500:
            bad.append((param, r.status_code))
    assert bad == [], bad


def test_nul_byte_in_posted_text_is_not_a_500(client, world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    proposal = make_proposal(world.store_a)
    other = make_proposal(world.store_a, content="Another fact to reject.")
    login(client, world.adam)
    client.raise_request_exception = False
    bad = []
    posts = [
        (reverse("reviews:reject", args=[other.pk]), {"reason": "a\x00b"}),
        (reverse("reviews:preview", args=[proposal.pk]), {"content": "a\x00b", "key": "k\x00"}),
        (reverse("reviews:approve", args=[proposal.pk]), {"edited": "1", "content": "a\x00b", "key": "nul-key"}),
        (reverse("memory:archive", args=[entry.pk]), {"base_version": 1, "reason": "a\x00b"}),
        (reverse("memory:entry-edit", args=[entry.pk]), {"base_version": 1, "key": "k", "content": "a\x00b"}),
        (
            reverse("reviews:policy", args=[world.store_a.pk]),
            {
                "mode": "manual",
                "agents": "a\x00b",
                "min_sessions": 4,
                "min_share": 0.1,
                "min_confidence_auto": 0.7,
                "max_sessions": 500,
                "token_budget": 100000,
                "schedule_minutes": 60,
                "analyzer": "rules",
            },
        ),
        (reverse("member-add", args=["team-a"]), {"username": "a\x00b", "role": "viewer"}),
        (reverse("member-invite", args=["team-a"]), {"email": "a\x00b@example.test", "role": "viewer"}),
        (reverse("agent-keys", args=["team-a"]), {"name": "a\x00b", "label": "a\x00b"}),
        (reverse("reviews:bulk"), {"ids": [proposal.pk], "action": "reject", "reason": "a\x00b"}),
    ]
    for url, data in posts:
        r = client.post(url, data, **HTMX)
        if r.status_code >= 500:
            bad.append((url, r.status_code))
    assert bad == [], bad


def test_last_admin_cannot_demote_or_remove_themselves(client, world):
    from dreamweb.models import Membership

    mine = Membership.objects.get(team=world.team_a, user=world.adam)
    login(client, world.adam)
    client.raise_request_exception = False
    r1 = client.post(reverse("member-role", args=["team-a", mine.pk]), {"role": "viewer"}, follow=True)
    r2 = client.post(reverse("member-remove", args=["team-a", mine.pk]), follow=True)
    assert r1.status_code < 500 and r2.status_code < 500
    mine = Membership.objects.filter(pk=mine.pk).first()
    assert mine is not None and mine.role == "admin"


def test_member_actions_on_other_team_membership_are_refused(client, world):
    from dreamweb.models import Membership

    theirs = Membership.objects.get(team=world.team_b, user=world.bob)
    login(client, world.adam)
    client.raise_request_exception = False
    statuses = []
    for url in [
        reverse("member-role", args=["team-a", theirs.pk]),
        reverse("member-remove", args=["team-a", theirs.pk]),
        reverse("member-role", args=["team-b", theirs.pk]),
        reverse("member-remove", args=["team-b", theirs.pk]),
    ]:
        r = client.post(url, {"role": "viewer"}, follow=True)
        msgs = re.findall(r'class="msg[^"]*"[^>]*>(.*?)<', r.content.decode())
        statuses.append((url, r.redirect_chain[0][1] if r.redirect_chain else r.status_code, msgs))
    assert Membership.objects.filter(pk=theirs.pk, role="reviewer").exists(), "team B membership changed"
    # Refused: 403/404, or a redirect saying the same as for an id that does not exist (no existence oracle).
    ghost = client.post(reverse("member-role", args=["team-a", 99999999]), {"role": "viewer"}, follow=True)
    ghost_msgs = re.findall(r'class="msg[^"]*"[^>]*>(.*?)<', ghost.content.decode())
    assert all(code in (403, 404) or msgs == ghost_msgs for _, code, msgs in statuses), (statuses, ghost_msgs)


def test_overlong_archive_reason_is_not_a_500_and_not_silently_cut(client, world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    login(client, world.alice)
    client.raise_request_exception = False
    r = client.post(reverse("memory:archive", args=[entry.pk]), {"base_version": 1, "reason": "r" * 50000}, follow=True)
    assert r.status_code < 500


def test_decided_proposal_partials_still_render(client, world):
    proposal = make_proposal(world.store_a)
    login(client, world.alice)
    client.post(reverse("reviews:approve", args=[proposal.pk]))
    client.raise_request_exception = False
    bad = []
    for name in ["reviews:proposal", "reviews:evidence", "reviews:budget"]:
        for kwargs in ({}, HTMX):
            r = client.get(reverse(name, args=[proposal.pk]), **kwargs)
            if r.status_code != 200:
                bad.append((name, bool(kwargs), r.status_code))
    assert bad == [], bad


def test_skill_pages_escape_hostile_text(client, world):
    make_skill(
        world.team_a,
        name="xss-skill",
        description="Desc " + XSS,
        body="# Body\n\n" + XSS + '\n\n[click](javascript:alert(3))\n\n<a href="javascript:alert(4)">a</a>\n',
        references={"notes.md": "Ref " + XSS + " [r](javascript:alert(5))"},
    )
    login(client, world.alice)
    client.raise_request_exception = False
    bad = []
    for url in [
        reverse("skills_registry:list"),
        reverse("skills_registry:detail", args=["team-a", "xss-skill"]),
        reverse("skills_registry:versions", args=["team-a", "xss-skill"]),
        reverse("skills_registry:diff", args=["team-a", "xss-skill"]),
        reverse("skills_registry:reference", args=["team-a", "xss-skill", "notes.md"]),
    ]:
        for kwargs in ({}, HTMX):
            r = client.get(url, **kwargs)
            body = r.content.decode()
            if r.status_code >= 500:
                bad.append((url, r.status_code))
                continue
            for marker in RAW_MARKERS:
                if marker in body:
                    bad.append((url, marker))
            m = re.search(r'<[^>]*href\s*=\s*["\']?\s*javascript:[^>]*>', body, flags=re.I)
            if m:
                bad.append((url, m.group(0)))
    assert bad == [], bad


def test_team_store_and_member_names_are_escaped(client, world):
    from dreamweb.models import Membership

    world.team_a.name = "Team " + XSS
    world.team_a.save()
    world.store_a.name = "Store " + XSS
    world.store_a.save()
    evil = world.bob.__class__.objects.create(username="evil<script>alert(1)</script>", email="e@example.test")
    Membership.objects.create(team=world.team_a, user=evil, role="viewer")
    entry = make_entry(world.store_a, key="k", content="Text.")
    login(client, world.adam)
    client.raise_request_exception = False
    bad = []
    for url in [
        reverse("reviews:queue"),
        reverse("memory:stores"),
        reverse("memory:entries", args=[world.store_a.pk]),
        reverse("memory:entry", args=[entry.pk]),
        reverse("memory:entry-create", args=[world.store_a.pk]),
        reverse("reviews:policy", args=[world.store_a.pk]),
        reverse("reviews:effectiveness", args=[world.store_a.pk]),
        reverse("members", args=["team-a"]),
        reverse("agent-keys", args=["team-a"]),
        reverse("reviews:runs"),
    ]:
        r = client.get(url)
        body = r.content.decode()
        if r.status_code != 200:
            bad.append((url, r.status_code))
        for marker in RAW_MARKERS:
            if marker in body:
                bad.append((url, marker))
    assert bad == [], bad


def test_messages_after_actions_escape_hostile_keys(client, world):
    proposal = make_proposal(world.store_a, content="Plain text.", key_hint='k"><img src=x onerror=alert(2)>')
    login(client, world.alice)
    client.raise_request_exception = False
    r = client.post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, follow=True)
    assert r.status_code == 200
    assert_escaped(r.content.decode(), "approve message")
    r = client.post(reverse("reviews:undo", args=[proposal.pk]), {"next": "/reviews/"}, follow=True)
    assert r.status_code == 200
    assert_escaped(r.content.decode(), "undo message")


def test_policy_agents_with_hostile_names_are_escaped_in_history(client, world):
    login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    data = {
        "mode": "manual",
        "min_sessions": 4,
        "min_share": 0.1,
        "min_confidence_auto": 0.7,
        "max_sessions": 500,
        "token_budget": 100000,
        "agents": "<script>alert(1)</script>",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    r = client.post(url, data, follow=True)
    assert r.status_code == 200
    assert_escaped(r.content.decode(), "policy")
    assert_escaped(client.get(url).content.decode(), "policy page")


def test_double_rollback_of_a_run_applies_once(client, world):
    proposal = make_proposal(world.store_a)
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    Proposal.objects.filter(pk=proposal.pk).update(run=run)
    login(client, world.alice)
    client.post(reverse("reviews:approve", args=[proposal.pk]))
    n = MemoryVersion.objects.count()
    client.raise_request_exception = False
    r1 = client.post(reverse("reviews:run-rollback", args=[run.pk]), {"confirmed": "1"}, follow=True)
    n1 = MemoryVersion.objects.count()
    r2 = client.post(reverse("reviews:run-rollback", args=[run.pk]), {"confirmed": "1"}, follow=True)
    assert r1.status_code < 500 and r2.status_code < 500
    assert MemoryVersion.objects.count() == n1
    assert n1 in (n, n + 1)


def test_rebase_twice_does_not_500(client, world):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    proposal = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    update_entry(entry, content="Deploy with make ship.", author=Author.system(), base_hash=entry.content_hash)
    login(client, world.alice)
    client.raise_request_exception = False
    client.post(reverse("reviews:approve", args=[proposal.pk]))
    r1 = client.post(reverse("reviews:rebase", args=[proposal.pk]), follow=True)
    r2 = client.post(reverse("reviews:rebase", args=[proposal.pk]), follow=True)
    assert r1.status_code < 500 and r2.status_code < 500
    entry.refresh_from_db()
    assert entry.content == "Deploy with make ship."


DETAIL_ODD = [
    "page=-1",
    "page=abc",
    "offset=-5",
    "offset=abc",
    "limit=-1",
    "limit=99999999999",
    "a=x&b=y",
    "from=-1",
    "to=abc",
    "version=%00",
    "v=99999999999999999999",
    "compare=1,abc",
    "n=1e99",
    "agent=%00",
    "more=abc",
    "start=-1",
    "event=abc",
    "show=all&page=0",
]


@pytest.mark.parametrize("qs", DETAIL_ODD)
def test_odd_query_strings_on_detail_pages_and_partials_do_not_500(client, world, qs):
    entry = make_entry(world.store_a, key="k", content="Text.")
    proposal = make_proposal(world.store_a)
    session = SessionFactory(team=world.team_a)
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    make_skill(world.team_a, name="a-skill")
    login(client, world.alice)
    client.raise_request_exception = False
    bad = []
    for url in [
        reverse("memory:entry", args=[entry.pk]),
        reverse("memory:session", args=[session.pk]),
        reverse("reviews:proposal", args=[proposal.pk]),
        reverse("reviews:evidence", args=[proposal.pk]),
        reverse("reviews:budget", args=[proposal.pk]),
        reverse("reviews:run", args=[run.pk]),
        reverse("reviews:policy", args=[world.store_a.pk]),
        reverse("reviews:effectiveness", args=[world.store_a.pk]),
        reverse("reviews:entry-effectiveness", args=[entry.pk]),
        reverse("skills_registry:diff", args=["team-a", "a-skill"]),
        reverse("skills_registry:versions", args=["team-a", "a-skill"]),
        reverse("members", args=["team-a"]),
    ]:
        for kwargs in ({}, HTMX):
            r = client.get(url + "?" + qs, **kwargs)
            if r.status_code >= 500:
                bad.append((url, bool(kwargs), r.status_code))
    assert bad == [], bad


def test_revert_is_visible_in_history_with_author_and_reason(client, world):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="k", content="first text")
    update_entry(entry, content="second text", author=Author.system(), base_hash=entry.content_hash)
    login(client, world.alice)
    client.post(reverse("memory:revert", args=[entry.pk]), {"number": 1, "base_version": 2, "reason": "undo-typo"})
    entry.refresh_from_db()
    assert entry.content == "first text" and entry.version == 3
    page = client.get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert "undo-typo" in page and "alice" in page and re.search(r"revert", page, re.I)


def test_pin_and_unpin_are_recorded(client, world):
    entry = make_entry(world.store_a, key="k", content="Text.")
    login(client, world.alice)
    client.post(reverse("memory:pin", args=[entry.pk]), {"base_version": 1})
    entry.refresh_from_db()
    assert entry.pinned and entry.version == 2
    page = client.get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert reverse("memory:unpin", args=[entry.pk]) in page and re.search(r"pin", page, re.I)


def test_policy_change_can_be_seen_and_reverted_from_history(client, world):
    login(client, world.adam)
    url = reverse("reviews:policy", args=[world.store_a.pk])
    data = {
        "mode": "autonomous",
        "min_sessions": 4,
        "min_share": 0.1,
        "min_confidence_auto": 0.7,
        "max_sessions": 500,
        "token_budget": 100000,
        "agents": "",
        "schedule_minutes": 60,
        "analyzer": "rules",
    }
    assert client.post(url, data).status_code == 302
    page = client.get(url).content.decode()
    history = page.split("History", 1)[-1]
    assert "adam" in history
    # The way back: the old value is shown so it can be restored.
    assert re.search(r"<del>[^<]*</del>", history)


def test_anonymous_gets_sign_in_everywhere_and_sees_nothing(client, world, team_b_objects):
    client.raise_request_exception = False
    bad = []
    for url in _b_urls(world, team_b_objects) + [reverse("reviews:queue"), reverse("memory:sessions")]:
        r = client.get(url)
        if r.status_code not in (302, 403, 404, 405) or "secret" in r.content.decode():
            bad.append((url, r.status_code))
        elif r.status_code == 302 and not r.url.startswith(reverse("login")):
            bad.append((url, r.url))
    assert bad == [], bad


def test_htmx_request_after_sign_out_asks_for_a_full_page_sign_in(client, world):
    """An htmx click after the session expired must not swap the sign-in page into the card."""
    proposal = make_proposal(world.store_a)
    client.raise_request_exception = False
    bad = []
    for method, url in [
        ("post", reverse("reviews:approve", args=[proposal.pk])),
        ("post", reverse("reviews:reject", args=[proposal.pk])),
        ("get", reverse("reviews:evidence", args=[proposal.pk])),
        ("get", reverse("reviews:queue") + "?page=1"),
    ]:
        r = getattr(client, method)(url, **HTMX)
        if not (r.get("HX-Redirect") or r.get("HX-Location") or r.get("HX-Refresh") or r.status_code in (401, 403)):
            bad.append((method, url, r.status_code, r.get("Location")))
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    assert bad == [], bad


def test_remove_proposal_for_an_entry_edited_since_is_refused(client, world):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="old", content="Old fact.")
    proposal = make_proposal(world.store_a, operation="remove", targets=["old"], content="", risk="high")
    update_entry(
        entry, content="Old fact, now corrected by a person.", author=Author.system(), base_hash=entry.content_hash
    )
    login(client, world.alice)
    r = client.post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, follow=True)
    entry.refresh_from_db()
    assert entry.status == "active" and entry.content == "Old fact, now corrected by a person."
    assert re.search(r"changed|conflict", r.content.decode(), re.I)


def test_update_proposal_for_an_entry_archived_since_is_refused(client, world):
    from dreamweb.provenance import Author
    from memory.services import archive_entry

    entry = make_entry(world.store_a, key="gone", content="Gone fact.")
    proposal = make_proposal(world.store_a, operation="update", targets=["gone"], content="Gone fact, updated.")
    archive_entry(entry, author=Author.system(), base_hash=entry.content_hash)
    login(client, world.alice)
    client.raise_request_exception = False
    r = client.post(reverse("reviews:approve", args=[proposal.pk]), {"next": "/reviews/"}, follow=True)
    assert r.status_code < 500
    entry.refresh_from_db()
    assert entry.status == "archived" and entry.content == "Gone fact."
    proposal.refresh_from_db()
    assert proposal.status != ProposalStatus.APPLIED


def test_bulk_approve_posted_twice_applies_once(client, world):
    a = make_proposal(world.store_a, content="Fact one for bulk.")
    b = make_proposal(world.store_a, content="Fact two for bulk.")
    login(client, world.alice)
    data = {"ids": [a.pk, b.pk], "action": "approve", "confirmed": "1"}
    client.post(reverse("reviews:bulk"), data)
    n = MemoryVersion.objects.count()
    assert n == 2, "the first bulk post applied both"
    client.raise_request_exception = False
    r = client.post(reverse("reviews:bulk"), data, follow=True)
    assert r.status_code < 500
    assert MemoryVersion.objects.count() == n


def test_admin_of_a_cannot_revoke_team_b_key(client, world):
    from dreamweb.models import AgentKey

    key, _raw = AgentKey.generate(team=world.team_b, name="b-key")
    login(client, world.adam)
    client.raise_request_exception = False
    for kwargs in ({}, HTMX):
        r = client.post(reverse("revoke-agent-key", args=[key.pk]), **kwargs)
        assert r.status_code in (403, 404), r.status_code
    key.refresh_from_db()
    assert key.usable() if callable(getattr(key, "usable", None)) else key.revoked_at is None


def test_viewer_and_reviewer_cannot_revoke_own_team_key(client, world):
    from dreamweb.models import AgentKey

    key, _raw = AgentKey.generate(team=world.team_a, name="a-key")
    client.raise_request_exception = False
    for user in (world.victor, world.alice):
        login(client, user)
        r = client.post(reverse("revoke-agent-key", args=[key.pk]))
        assert r.status_code in (403, 404), (user.username, r.status_code)
    assert AgentKey.objects.filter(pk=key.pk, revoked_at__isnull=True).exists()


def test_key_names_are_escaped_on_keys_page(client, world):
    from dreamweb.models import AgentKey

    AgentKey.generate(team=world.team_a, name='k"><img src=x onerror=alert(2)>')
    body = login(client, world.adam).get(reverse("agent-keys", args=["team-a"])).content.decode()
    assert_escaped(body, "keys")


def test_revoke_is_recorded_and_shown(client, world):
    from dreamweb.models import AgentKey

    key, _raw = AgentKey.generate(team=world.team_a, name="a-key")
    login(client, world.adam)
    r = client.post(reverse("revoke-agent-key", args=[key.pk]), follow=True)
    assert r.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None
    page = client.get(reverse("agent-keys", args=["team-a"])).content.decode()
    assert "a-key" in page and re.search(r"revoked", page, re.I)


def test_session_tool_calls_and_metadata_are_escaped(client, world):
    session = SessionFactory(
        team=world.team_a,
        external_id='ext"><img src=x onerror=alert(2)>',
        outcome="failure",
        events=[
            {
                "type": "tool_call",
                "id": "c1",
                "name": "<script>alert(1)</script>",
                "arguments": {"command": XSS, "<script>alert(1)</script>": "k"},
            },
            {"type": "tool_result", "call_id": "c1", "content": XSS, "is_error": True, "exit_code": 1},
            {"type": "message", "role": '"><img src=x onerror=alert(2)>', "content": XSS},
        ],
        event_count=3,
    )
    proposal = make_proposal(world.store_a, sessions=[session])
    login(client, world.alice)
    client.raise_request_exception = False
    bad = []
    for url in [
        reverse("memory:session", args=[session.pk]),
        reverse("memory:sessions"),
        reverse("reviews:evidence", args=[proposal.pk]),
        reverse("reviews:proposal", args=[proposal.pk]),
        reverse("reviews:queue"),
    ]:
        for kwargs in ({}, HTMX):
            r = client.get(url, **kwargs)
            body = r.content.decode()
            if r.status_code != 200:
                bad.append((url, r.status_code))
            for marker in RAW_MARKERS:
                if marker in body:
                    bad.append((url, marker))
    assert bad == [], bad


@pytest.mark.parametrize(
    "name,args",
    [
        ("reviews:queue", []),
        ("reviews:decided", []),
        ("reviews:runs", []),
        ("memory:sessions", []),
        ("memory:entries", ["store"]),
        ("skills_registry:list", []),
        ("memory:entry", ["entry"]),
        ("memory:stores", []),
    ],
)
def test_query_strings_are_not_reflected_raw(client, world, name, args):
    from urllib.parse import quote

    make_proposal(world.store_a)
    entry = make_entry(world.store_a, key="k", content="Text.")
    SessionFactory(team=world.team_a)
    real = [{"store": world.store_a.pk, "entry": entry.pk}[a] for a in args]
    login(client, world.alice)
    client.raise_request_exception = False
    payload = quote('"><img src=x onerror=alert(2)><script>alert(1)</script>')
    bad = []
    for param in [
        "q",
        "agent",
        "task",
        "outcome",
        "store",
        "kind",
        "risk",
        "status",
        "tag",
        "scope",
        "sort",
        "next",
        "operation",
        "page",
    ]:
        for kwargs in ({}, HTMX):
            r = client.get(reverse(name, args=real) + f"?{param}={payload}", **kwargs)
            body = r.content.decode()
            for marker in RAW_MARKERS:
                if marker in body:
                    bad.append((param, marker))
            if re.search(r'href="[^"]*"><img', body):
                bad.append((param, "attribute break-out"))
    assert bad == [], bad


def test_skill_revert_is_a_new_version_shown_in_history(client, world):
    from dreamweb.provenance import Author
    from skills_registry.services import update_skill

    skill = make_skill(world.team_a, name="rev-skill", body="# One\n")
    skill = update_skill(skill, body="# Two\n", author=Author.system(), base_hash=skill.content_hash)
    seen_hash = skill.content_hash
    login(client, world.adam)
    client.raise_request_exception = False
    form = {"reason": "back", "base_hash": seen_hash}
    url = reverse("skills_registry:revert", args=["team-a", "rev-skill", 1])
    r = client.post(url, form, follow=True)
    skill.refresh_from_db()
    assert "# One" in skill.body
    versions = skill.versions.count() if hasattr(skill, "versions") else None
    again = client.post(url, form, follow=True)  # the same form posted twice (double click)
    assert again.status_code < 500
    if versions is not None:
        assert skill.versions.count() == versions

    assert r.status_code == 200, r.status_code
    page = client.get(reverse("skills_registry:versions", args=["team-a", "rev-skill"])).content.decode()
    assert re.search(r"\b3\b", page) and "adam" in page


def test_a_team_without_stores_gets_useful_empty_states(client, db):
    from dreamweb.models import Role
    from tests.factories import MembershipFactory, TeamFactory, UserFactory

    team = TeamFactory(slug="fresh", name="Fresh")
    user = UserFactory(username="newbie")
    MembershipFactory(team=team, user=user, role=Role.ADMIN)
    login(client, user)
    bad = []
    for url in [
        reverse("memory:stores"),
        reverse("reviews:queue"),
        reverse("memory:sessions"),
        reverse("reviews:runs"),
        reverse("reviews:decided"),
        reverse("agent-keys", args=["fresh"]),
        reverse("skills_registry:list"),
    ]:
        r = client.get(url)
        if r.status_code != 200:
            bad.append((url, r.status_code))
            continue
        main = r.content.decode().split("<main", 1)[-1]
        text = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", main, flags=re.S))
        if not re.search(r"\b(no|nothing|empty|yet|none)\b", text, flags=re.I):
            bad.append((url, "no empty-state text"))
        if re.search(r"\bNone\b(?![.])", text):
            bad.append((url, "None shown"))
    assert bad == [], bad


def test_not_found_and_forbidden_pages_look_finished(client, world, team_b_objects):
    login(client, world.victor)
    entry = make_entry(world.store_a, key="k", content="Text.")
    bad = []
    for url, method in [
        (reverse("memory:entry", args=[team_b_objects["entry"].pk]), "get"),
        ("/reviews/proposals/99999999/", "get"),
        (reverse("memory:entry-edit", args=[entry.pk]), "get"),  # viewer: 403
        (reverse("reviews:policy", args=[world.store_b.pk]), "get"),
    ]:
        r = getattr(client, method)(url)
        body = r.content.decode()
        title = re.search(r"<title>(.*?)</title>", body, flags=re.S)
        if r.status_code not in (403, 404):
            bad.append((url, r.status_code))
        if not title or not title.group(1).strip():
            bad.append((url, "no title"))
        if "Traceback" in body or "secret" in body:
            bad.append((url, "leak"))
        if reverse("reviews:queue") not in body and 'href="/"' not in body:
            bad.append((url, "no way back to the app"))
    assert bad == [], bad


@pytest.mark.parametrize(
    "changes",
    [
        {"valid_from": "2030-01-01T00:00", "valid_until": "2020-01-01T00:00"},
        {"valid_until": "not-a-date"},
        {"content": ""},
        {"content": "   "},
    ],
)
def test_entry_edit_bad_values_show_errors_and_write_nothing(client, world, changes):
    entry = make_entry(world.store_a, key="k", content="Original text.")
    login(client, world.alice)
    client.raise_request_exception = False
    data = _form_data(client.get(reverse("memory:entry-edit", args=[entry.pk])).content.decode())
    data.update({"reason": "typed reason kept"})
    data.update(changes)
    r = client.post(reverse("memory:entry-edit", args=[entry.pk]), data)
    assert r.status_code in (200, 400, 422), r.status_code
    body = r.content.decode()
    assert "form-error" in body and "typed reason kept" in body
    entry.refresh_from_db()
    assert entry.version == 1


def test_saving_an_unchanged_entry_does_not_write_an_empty_version(client, world):
    entry = make_entry(world.store_a, key="k", content="Original text.")
    login(client, world.alice)
    data = _form_data(client.get(reverse("memory:entry-edit", args=[entry.pk])).content.decode())
    data.update({"reason": "nothing really"})
    r = client.post(reverse("memory:entry-edit", args=[entry.pk]), data, follow=True)
    assert r.status_code == 200
    entry.refresh_from_db()
    assert entry.version == 1, "an edit that changes nothing wrote a new version"


@pytest.mark.parametrize("action", ["archive", "pin"])
def test_action_from_a_stale_page_is_refused_with_a_message(client, world, action):
    from dreamweb.provenance import Author
    from memory.services import update_entry

    entry = make_entry(world.store_a, key="k", content="v1")
    update_entry(entry, content="v2 by someone else", author=Author.system(), base_hash=entry.content_hash)
    login(client, world.alice)
    r = client.post(reverse(f"memory:{action}", args=[entry.pk]), {"base_version": 1, "reason": "x"}, follow=True)
    entry.refresh_from_db()
    assert entry.version == 2 and entry.status == "active" and not entry.pinned
    assert re.search(r"changed|version|reload|since", r.content.decode(), re.I)
