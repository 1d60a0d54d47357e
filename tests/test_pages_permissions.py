# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Every page and action against the personas: another team's object is a 404 (its existence is hidden), a role
too low is a 403, a POST-only action answers GET with 405, anonymous people are sent to sign in (an htmx request as
a whole page, HX-Redirect), and a POST without the CSRF token fails."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from dreamweb.models import AgentKey
from reviews.models import DreamRun, Proposal
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import PageClient as Client
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@dataclass
class Objects:
    entry: object
    proposal: object
    session: object
    run: object
    key: object
    store: object
    team: object


def _objects(team, store) -> Objects:
    entry = make_entry(store, key=f"entry-{team.slug}")
    session = SessionFactory(team=team, external_id=f"session-{team.slug}")
    proposal = make_proposal(store, sessions=[session], content=f"Fact of {team.slug}.")
    run = DreamRun.objects.create(team=team, store=store, status="succeeded")
    key, _ = AgentKey.generate(team=team, name=f"key-{team.slug}")
    return Objects(entry, proposal, session, run, key, store, team)


@pytest.fixture
def objs(world):
    return {"a": _objects(world.team_a, world.store_a), "b": _objects(world.team_b, world.store_b)}


# (name, url builder, role needed to read)
PAGES = [
    ("proposal", lambda o: reverse("reviews:proposal", args=[o.proposal.pk]), "viewer"),
    ("run", lambda o: reverse("reviews:run", args=[o.run.pk]), "viewer"),
    ("policy", lambda o: reverse("reviews:policy", args=[o.store.pk]), "viewer"),
    ("entries", lambda o: reverse("memory:entries", args=[o.store.pk]), "viewer"),
    ("entry", lambda o: reverse("memory:entry", args=[o.entry.pk]), "viewer"),
    ("session", lambda o: reverse("memory:session", args=[o.session.pk]), "viewer"),
    ("members", lambda o: reverse("members", args=[o.team.slug]), "viewer"),
    ("edit", lambda o: reverse("reviews:edit", args=[o.proposal.pk]), "reviewer"),
    ("keys", lambda o: reverse("agent-keys", args=[o.team.slug]), "admin"),
]

# (name, url builder, POST data builder, role needed, expected success status)
ACTIONS = [
    ("approve", lambda o: reverse("reviews:approve", args=[o.proposal.pk]), lambda o: {}, "reviewer"),
    ("reject", lambda o: reverse("reviews:reject", args=[o.proposal.pk]), lambda o: {"reason": "no"}, "reviewer"),
    (
        "revert",
        lambda o: reverse("memory:revert", args=[o.entry.pk]),
        lambda o: {"number": 1, "base_version": o.entry.version},
        "reviewer",
    ),
    ("dream", lambda o: reverse("reviews:dream", args=[o.store.pk]), lambda o: {"dry_run": "on"}, "reviewer"),
    (
        "policy",
        lambda o: reverse("reviews:policy", args=[o.store.pk]),
        lambda o: {
            "mode": "manual",
            "min_sessions": 5,
            "min_share": 0,
            "min_confidence_auto": 0.6,
            "max_sessions": 10,
            "token_budget": 10,
            "schedule_minutes": 60,
            "analyzer": "rules",
        },
        "admin",
    ),
    ("revoke", lambda o: reverse("revoke-agent-key", args=[o.key.pk]), lambda o: {}, "admin"),
    (
        "create-key",
        lambda o: reverse("agent-keys", args=[o.team.slug]),
        lambda o: {"name": "new", "scopes": ["dreams"]},
        "admin",
    ),
]


def _viewer_membership(o) -> int:
    from dreamweb.models import Membership

    return Membership.objects.filter(team=o.team, role="viewer").values_list("pk", flat=True).first() or 0


def _invitation(o) -> int:
    from dreamweb.members import create_invitation

    return create_invitation(o.team, by=None, role="viewer")[0].pk


ACTIONS += [
    (
        "member-add",
        lambda o: reverse("member-add", args=[o.team.slug]),
        lambda o: {"identifier": "x", "role": "viewer"},
        "admin",
    ),
    ("member-invite", lambda o: reverse("member-invite", args=[o.team.slug]), lambda o: {"role": "viewer"}, "admin"),
    (
        "member-role",
        lambda o: reverse("member-role", args=[o.team.slug, _viewer_membership(o)]),
        lambda o: {"role": "reviewer"},
        "admin",
    ),
    (
        "member-remove",
        lambda o: reverse("member-remove", args=[o.team.slug, _viewer_membership(o)]),
        lambda o: {},
        "admin",
    ),
    (
        "invitation-revoke",
        lambda o: reverse("invitation-revoke", args=[o.team.slug, _invitation(o)]),
        lambda o: {},
        "admin",
    ),
    (
        "policy-apply-pending",
        lambda o: reverse("reviews:policy-apply-pending", args=[o.store.pk]),
        lambda o: {},
        "admin",
    ),
]
POST_ONLY = {
    "approve",
    "reject",
    "revert",
    "dream",
    "revoke",
    "member-add",
    "member-invite",
    "member-role",
    "member-remove",
    "invitation-revoke",
    "policy-apply-pending",
}

RANK = {"viewer": 1, "reviewer": 2, "admin": 3}
PERSONA_ROLE = {"victor": "viewer", "alice": "reviewer", "adam": "admin"}


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(("name", "url", "role"), PAGES, ids=[p[0] for p in PAGES])
def test_pages(world, objs, name, url, role):
    target = url(objs["a"])
    for persona, persona_role in PERSONA_ROLE.items():
        expected = 200 if RANK[persona_role] >= RANK[role] else 403
        assert _as(getattr(world, persona)).get(target).status_code == expected, persona
    assert _as(world.bob).get(target).status_code == 404
    anonymous = Client().get(target)
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))


@pytest.mark.parametrize("name", ["queue", "runs", "stores", "sessions"])
def test_lists_for_every_member_and_sign_in_for_strangers(world, objs, name):
    url = {
        "queue": reverse("reviews:queue"),
        "runs": reverse("reviews:runs"),
        "stores": reverse("memory:stores"),
        "sessions": reverse("memory:sessions"),
    }[name]
    for persona in ("victor", "alice", "adam", "bob"):
        assert _as(getattr(world, persona)).get(url).status_code == 200
    assert Client().get(url).status_code == 302


@pytest.mark.parametrize(("name", "url", "data", "role"), ACTIONS, ids=[a[0] for a in ACTIONS])
def test_actions(world, objs, name, url, data, role):
    a = objs["a"]
    target, payload = url(a), data(a)
    # Too low a role: 403, and nothing changed.
    for persona, persona_role in PERSONA_ROLE.items():
        if RANK[persona_role] < RANK[role]:
            assert _as(getattr(world, persona)).post(target, payload).status_code == 403, persona
    assert _as(world.bob).post(target, payload).status_code == 404
    anonymous = Client().post(target, payload)
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))
    a.proposal.refresh_from_db()
    assert a.proposal.status == "pending"
    # Without the CSRF token even the right person is refused.
    allowed = next(getattr(world, p) for p, r in PERSONA_ROLE.items() if RANK[r] >= RANK[role])
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(allowed)
    assert strict.post(target, payload).status_code == 403
    if name in POST_ONLY:
        assert _as(allowed).get(target).status_code == 405
    # And with it, the action goes through.
    response = _as(allowed).post(target, payload)
    assert response.status_code in (200, 201, 302), response.status_code


LISTS = ["reviews:queue", "reviews:decided", "reviews:runs", "memory:stores", "memory:sessions", "skills_registry:list"]


def _htmx_requests(o):
    """(method, url, data) of every page, list and action, as htmx sends them from a card or a list."""
    yield from (("get", url(o), {}) for _, url, _ in PAGES)
    yield from (("get", reverse(name) + "?page=1", {}) for name in LISTS)
    yield ("get", reverse("reviews:evidence", args=[o.proposal.pk]), {})
    yield from (("post", url(o), data(o)) for _, url, data, _ in ACTIONS)


def _sign_in_target(response) -> tuple[str, list[str]]:
    target = urlsplit(response["HX-Redirect"])
    return target.path, parse_qs(target.query).get("next", [])


def test_an_htmx_request_without_a_sign_in_is_sent_to_the_sign_in_page_as_a_whole_page(world, objs):
    """After a sign-out (or an expired session) htmx must not swap the sign-in form into a card: HX-Redirect to the
    sign-in page, coming back to the page the person was on (HX-Current-URL), not to the partial or the POST."""
    a = objs["a"]
    page = reverse("reviews:queue") + "?risk=high"
    headers = {"HX-Request": "true", "HX-Current-URL": "http://testserver" + page}
    for method, url, data in _htmx_requests(a):
        response = getattr(Client(), method)(url, data, headers=headers)
        assert response.status_code == 200 and "Location" not in response, (url, response.status_code)
        assert _sign_in_target(response) == (reverse("login"), [page]), url
        assert response.content == b"", url
    a.proposal.refresh_from_db()
    assert a.proposal.status == "pending"


def test_an_htmx_sign_in_redirect_never_comes_back_to_another_site_and_plain_requests_keep_the_redirect(world, objs):
    url = reverse("reviews:approve", args=[objs["a"].proposal.pk])
    elsewhere = Client().post(url, headers={"HX-Request": "true", "HX-Current-URL": "https://evil.example/x"})
    assert _sign_in_target(elsewhere) == (reverse("login"), [])
    unnamed = Client().get(reverse("reviews:queue"), headers={"HX-Request": "true"})
    assert _sign_in_target(unnamed) == (reverse("login"), [])
    plain = Client().get(reverse("reviews:queue") + "?page=1")
    assert plain.status_code == 302 and plain.url == reverse("login") + "?next=/reviews/%3Fpage%3D1"
    assert "HX-Redirect" not in plain


def test_a_signed_in_htmx_request_is_answered_as_before(world, objs):
    response = _as(world.alice).get(reverse("reviews:queue") + "?page=1", headers={"HX-Request": "true"})
    assert response.status_code == 200 and "HX-Redirect" not in response


def test_csrf_token_from_the_page_is_accepted(world, objs):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.alice)
    strict.get(reverse("reviews:queue"))
    token = strict.cookies["csrftoken"].value
    proposal = objs["a"].proposal
    response = strict.post(reverse("reviews:reject", args=[proposal.pk]), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert Proposal.objects.get(pk=proposal.pk).status == "rejected"


def test_bulk_needs_reviewer_and_never_touches_other_teams(world, objs):
    a, b = objs["a"].proposal, objs["b"].proposal
    assert _as(world.victor).post(reverse("reviews:bulk"), {"ids": [a.pk], "action": "approve"}).status_code == 302
    assert _as(world.bob).post(reverse("reviews:bulk"), {"ids": [a.pk], "action": "reject"}).status_code == 302
    assert Proposal.objects.get(pk=a.pk).status == "pending"
    assert _as(world.alice).get(reverse("reviews:bulk")).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.alice)
    assert strict.post(reverse("reviews:bulk"), {"ids": [a.pk], "action": "approve"}).status_code == 403
    _as(world.alice).post(reverse("reviews:bulk"), {"ids": [a.pk, b.pk], "action": "approve", "confirmed": "1"})
    assert Proposal.objects.get(pk=a.pk).status == "applied"
    assert Proposal.objects.get(pk=b.pk).status == "pending"


def test_team_switcher_only_switches_to_my_teams(world, objs):
    from tests.factories import MembershipFactory

    MembershipFactory(team=world.team_b, user=world.alice, role="viewer")
    client = _as(world.alice)
    assert objs["a"].proposal.content.encode() in client.get(reverse("reviews:queue")).content
    assert client.post(reverse("switch-team"), {"team": world.team_b.pk}).status_code == 302
    html = client.get(reverse("reviews:queue")).content.decode()
    assert "Fact of team-b." in html and "Fact of team-a." not in html
    assert _as(world.victor).post(reverse("switch-team"), {"team": world.team_b.pk}).status_code == 404
    assert client.get(reverse("switch-team")).status_code == 405


def test_agent_key_secret_is_shown_once_and_revoke_works(world, objs):
    client = _as(world.adam)
    url = reverse("agent-keys", args=[world.team_a.slug])
    response = client.post(url, {"name": "fleet-1", "scopes": ["sessions:write", "memory:read"]})
    assert response.status_code == 201
    key = AgentKey.objects.get(name="fleet-1")
    html = response.content.decode()
    raw = html.split('id="new-key"')[0].rsplit('value="', 1)[1].split('"')[0]
    assert raw.startswith(f"dw_{key.prefix}_")
    assert key.hashed_key != raw and raw not in client.get(url).content.decode()
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    client.post(reverse("revoke-agent-key", args=[key.pk]))
    key.refresh_from_db()
    assert key.revoked_at is not None
    duplicate = client.post(url, {"name": "fleet-1", "scopes": ["dreams"]})
    assert duplicate.status_code == 200 and "exists already" in duplicate.content.decode()
