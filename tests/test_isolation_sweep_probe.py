# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Isolation sweep (blind probe): team B's people and keys against team A's objects, on every URL pattern of the
project, in lists and searches, with restricted keys, and at the database (row-level security as the app role).

Contract (docs/api.md, docs/design.md): another team's object is a 404 (existence is not revealed), lists never show
or count another team's rows, keys act only within their scopes and writable stores, and on PostgreSQL every
team-owned table refuses rows of teams outside `dreamweb.team_ids`."""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import pytest
from django.contrib import admin
from django.db import DatabaseError, connection, transaction
from django.urls import URLPattern, URLResolver, get_resolver

from dreamweb import rls
from dreamweb.models import AgentKey, Membership, Role
from memory.models import AgentSession, MemoryEntry, MemoryStore, MemoryVersion
from reviews.models import AutonomyPolicy, DreamRun, Proposal, SessionAnalysis
from tests.api_support import Api, make_key, session_doc
from tests.conftest import is_postgres
from tests.factories import (
    MembershipFactory,
    SessionFactory,
    StoreFactory,
    TeamFactory,
    UserFactory,
    make_entry,
    make_proposal,
    make_skill,
)
from tests.page_support import PageClient, _fast_password_hashing, client  # noqa: F401 - fixtures
from tests.scoping import all_teams

pytestmark = [pytest.mark.django_db]

MISSING = 987654321
# Words only team A's rows carry: none of them may ever reach team B.
MARKERS = ["xylo-store", "xylo-entry", "xyloquartzfact", "xylo-session", "xylo-skill", "xylo-key", "Xylo Team"]


# --------------------------------------------------------------------------------------------------------------- world


@dataclass
class Iso:
    a: object
    b: object
    store_a: object
    store_a2: object
    store_b: object
    store_b2: object
    entry_a: object
    version_a: object
    session_a: object
    proposal_a: object
    run_a: object
    analysis_a: object
    policy_a: object
    skill_a: object
    key_a: object
    membership_a: object
    invitation_a: object
    adam: object
    bertha: object  # admin of B
    bob: object  # reviewer of B
    boss: object  # staff superuser, member of B only
    key_b_full: str = ""
    key_b_reader: str = ""
    key_b_writer: str = ""  # memory:write, only store b-store
    key_b_noread: str = ""
    extra: dict = field(default_factory=dict)


@pytest.fixture
def iso(db) -> Iso:
    from dreamweb.members import create_invitation

    with all_teams():
        a = TeamFactory(slug="xylo-team", name="Xylo Team A")
        b = TeamFactory(slug="beta-team", name="Beta Team B")
        adam = UserFactory(username="adam-a")
        viewer_a = UserFactory(username="vera-a")
        bertha, bob = UserFactory(username="bertha"), UserFactory(username="bob-b")
        boss = UserFactory(username="boss-b", is_staff=True, is_superuser=True)
        MembershipFactory(team=a, user=adam, role=Role.ADMIN)
        membership_a = MembershipFactory(team=a, user=viewer_a, role=Role.VIEWER)
        MembershipFactory(team=b, user=bertha, role=Role.ADMIN)
        MembershipFactory(team=b, user=bob, role=Role.REVIEWER)
        MembershipFactory(team=b, user=boss, role=Role.ADMIN)
        store_a = StoreFactory(team=a, slug="xylo-store", agents_may_write=True, description="xyloquartzfact store")
        store_a2 = StoreFactory(team=a, slug="xylo-store-two", agents_may_write=True)
        store_b = StoreFactory(team=b, slug="b-store", agents_may_write=True)
        store_b2 = StoreFactory(team=b, slug="b-other", agents_may_write=True)
        entry_a = make_entry(store_a, key="xylo-entry", content="The xyloquartzfact: deploy with make xylo.")
        make_entry(store_a, key="xylo-entry-agent", content="xyloquartzfact scoped", scope_agent="xylo-agent")
        make_entry(store_b, key="b-entry", content="B deploys with make beta.")
        version_a = MemoryVersion.objects.filter(entry=entry_a).order_by("-number").first()
        session_a = SessionFactory(team=a, external_id="xylo-session-1", agent="xylo-agent", task="xylo-task")
        SessionFactory(team=b, external_id="b-session-1")
        proposal_a = make_proposal(store_a, sessions=[session_a], content="Remember the xyloquartzfact.")
        run_a = DreamRun.objects.create(team=a, store=store_a, status="succeeded", proposals_count=1)
        Proposal.objects.filter(pk=proposal_a.pk).update(run=run_a)
        analysis_a = SessionAnalysis.objects.create(team=a, run=run_a, session=session_a, status="succeeded")
        policy_a, _ = AutonomyPolicy.objects.get_or_create(team=a, store=store_a)
        skill_a = make_skill(a, name="xylo-skill", description="xyloquartzfact skill", body="# Xylo\nxyloquartzfact\n")
        make_skill(b, name="beta-skill", description="B skill", body="# B\n")
        make_key(a, "xylo-key")
        key_a = AgentKey.objects.get(team=a, name="xylo-key")
        invitation_a = create_invitation(a, by=None, role="viewer")[0]
        iso = Iso(
            a,
            b,
            store_a,
            store_a2,
            store_b,
            store_b2,
            entry_a,
            version_a,
            session_a,
            proposal_a,
            run_a,
            analysis_a,
            policy_a,
            skill_a,
            key_a,
            membership_a,
            invitation_a,
            adam,
            bertha,
            bob,
            boss,
        )
        iso.key_b_full = make_key(b, "b-full")
        iso.key_b_reader = make_key(b, "b-reader", scopes=["memory:read"], writable_stores=())
        iso.key_b_writer = make_key(b, "b-writer", scopes=["memory:read", "memory:write"], writable_stores=["b-store"])
        iso.key_b_noread = make_key(b, "b-sessions", scopes=["sessions:write"], writable_stores=())
        raw_a = make_key(a, "xylo-key-2")
    # A's own agent leaves a serve, a rating and a policy change (audit rows of every kind for the sweeps)
    api_a = Api(raw_a)
    assert api_a.get("/api/v1/context/", {"store": "xylo-store", "session": "xylo-session-1"}).status_code == 200
    assert api_a.post("/api/v1/stores/xylo-store/entries/xylo-entry/feedback/", {"helpful": True}).status_code < 300
    assert api_a.put("/api/v1/stores/xylo-store/agents/", {"agents": ["xylo-agent"]}).status_code == 200
    return iso


def _team_tables() -> list[str]:
    """Every table with a team_id column, from the catalog (a new table cannot slip by), plus the team table."""
    with connection.cursor() as c:
        c.execute(
            """SELECT DISTINCT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
               JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND a.attname = 'team_id' AND NOT a.attisdropped
               ORDER BY 1"""
        )
        return [r[0] for r in c.fetchall()]


def _snapshot(team_id: int) -> dict[str, str]:
    """A fingerprint of every row of the team in every team-owned table (read as the owner)."""
    out = {}
    with all_teams():
        if not is_postgres():
            from django.apps import apps

            for model in apps.get_models():
                if any(f.name == "team" for f in model._meta.concrete_fields):
                    rows = sorted(map(repr, model._base_manager.filter(team_id=team_id).values()))
                    out[model._meta.db_table] = str(rows)
            return out
        with connection.cursor() as c:
            for table in [*_team_tables(), "dreamweb_team"]:
                col = "id" if table == "dreamweb_team" else "team_id"
                c.execute(
                    f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
                    f'FROM "{table}" t WHERE {col} = %s',
                    [team_id],
                )
                n, digest = c.fetchone()
                out[table] = f"{n}:{digest}"
    return out


def _diff(before: dict, after: dict) -> list[str]:
    return [
        f"{t}: {before.get(t)} -> {after.get(t)}"
        for t in sorted(set(before) | set(after))
        if before.get(t) != after.get(t)
    ]


# ------------------------------------------------------------------------------------------------------ URL patterns


def _routes(resolver=None, prefix="") -> list[str]:
    resolver = resolver or get_resolver()
    out = []
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            out += _routes(p, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            out.append(prefix + str(p.pattern))
    return out


def _team_owned(model) -> bool:
    return any(f.name == "team" and f.is_relation for f in model._meta.concrete_fields)


def _admin_models() -> dict[str, object]:
    return {f"admin/{m._meta.app_label}/{m._meta.model_name}/": m for m in admin.site._registry}


# Pages and API routes that name one object: route -> builder(iso) -> list of (url of A's object, url of nothing).
P = "page"
A = "api"
OBJECT_ROUTES: dict[str, tuple[str, object]] = {
    "teams/<slug:slug>/keys/": (P, lambda w: [("/teams/xylo-team/keys/", "/teams/no-such-team/keys/")]),
    "keys/<int:pk>/revoke/": (P, lambda w: [(f"/keys/{w.key_a.pk}/revoke/", f"/keys/{MISSING}/revoke/")]),
    "teams/<slug:slug>/members/": (P, lambda w: [("/teams/xylo-team/members/", "/teams/no-such-team/members/")]),
    "teams/<slug:slug>/members/add/": (
        P,
        lambda w: [("/teams/xylo-team/members/add/", "/teams/no-such-team/members/add/")],
    ),
    "teams/<slug:slug>/members/invite/": (
        P,
        lambda w: [("/teams/xylo-team/members/invite/", "/teams/no-such-team/members/invite/")],
    ),
    "teams/<slug:slug>/members/<int:pk>/role/": (
        P,
        lambda w: [
            (f"/teams/xylo-team/members/{w.membership_a.pk}/role/", f"/teams/no-such-team/members/{MISSING}/role/"),
            (f"/teams/beta-team/members/{w.membership_a.pk}/role/", f"/teams/beta-team/members/{MISSING}/role/"),
        ],
    ),
    "teams/<slug:slug>/members/<int:pk>/remove/": (
        P,
        lambda w: [
            (
                f"/teams/xylo-team/members/{w.membership_a.pk}/remove/",
                f"/teams/no-such-team/members/{MISSING}/remove/",
            ),
            (f"/teams/beta-team/members/{w.membership_a.pk}/remove/", f"/teams/beta-team/members/{MISSING}/remove/"),
        ],
    ),
    "teams/<slug:slug>/invitations/<int:pk>/revoke/": (
        P,
        lambda w: [
            (
                f"/teams/xylo-team/invitations/{w.invitation_a.pk}/revoke/",
                f"/teams/no-such-team/invitations/{MISSING}/revoke/",
            ),
            (
                f"/teams/beta-team/invitations/{w.invitation_a.pk}/revoke/",
                f"/teams/beta-team/invitations/{MISSING}/revoke/",
            ),
        ],
    ),
    "memory/stores/<int:store_pk>/": (P, lambda w: [(f"/memory/stores/{w.store_a.pk}/", f"/memory/stores/{MISSING}/")]),
    "memory/entries/<int:pk>/": (P, lambda w: [(f"/memory/entries/{w.entry_a.pk}/", f"/memory/entries/{MISSING}/")]),
    "memory/stores/<int:store_pk>/new/": (
        P,
        lambda w: [(f"/memory/stores/{w.store_a.pk}/new/", f"/memory/stores/{MISSING}/new/")],
    ),
    "memory/sessions/<int:pk>/": (
        P,
        lambda w: [(f"/memory/sessions/{w.session_a.pk}/", f"/memory/sessions/{MISSING}/")],
    ),
    "skills/<slug:team>/<slug:name>/": (
        P,
        lambda w: [
            ("/skills/xylo-team/xylo-skill/", "/skills/no-such-team/xylo-skill/"),
            ("/skills/beta-team/xylo-skill/", "/skills/beta-team/no-such-skill/"),
        ],
    ),
    "skills/<slug:team>/<slug:name>/versions/": (
        P,
        lambda w: [("/skills/xylo-team/xylo-skill/versions/", "/skills/no-such-team/xylo-skill/versions/")],
    ),
    "skills/<slug:team>/<slug:name>/diff/": (
        P,
        lambda w: [("/skills/xylo-team/xylo-skill/diff/?a=1&b=1", "/skills/no-such-team/xylo-skill/diff/?a=1&b=1")],
    ),
    "skills/<slug:team>/<slug:name>/revert/<int:number>/": (
        P,
        lambda w: [("/skills/xylo-team/xylo-skill/revert/1/", "/skills/no-such-team/xylo-skill/revert/1/")],
    ),
    "skills/<slug:team>/<slug:name>/status/": (
        P,
        lambda w: [("/skills/xylo-team/xylo-skill/status/", "/skills/no-such-team/xylo-skill/status/")],
    ),
    "skills/<slug:team>/<slug:name>/files/<path:path>": (
        P,
        lambda w: [("/skills/xylo-team/xylo-skill/files/README.md", "/skills/no-such-team/xylo-skill/files/README.md")],
    ),
    "api/v1/stores/<slug:slug>/entries/": (
        A,
        lambda w: [("/api/v1/stores/xylo-store/entries/", "/api/v1/stores/no-such-store/entries/")],
    ),
    "api/v1/^stores/(?P<slug>[-a-zA-Z0-9_]+)/entries/(?P<key>[^/]+)/feedback/$": (
        A,
        lambda w: [
            (
                "/api/v1/stores/xylo-store/entries/xylo-entry/feedback/",
                "/api/v1/stores/no-such-store/entries/xylo-entry/feedback/",
            ),
            (
                "/api/v1/stores/b-store/entries/xylo-entry/feedback/",
                "/api/v1/stores/b-store/entries/no-such-entry/feedback/",
            ),
        ],
    ),
    "api/v1/^stores/(?P<slug>[-a-zA-Z0-9_]+)/entries/(?P<key>[^/]+)/$": (
        A,
        lambda w: [
            ("/api/v1/stores/xylo-store/entries/xylo-entry/", "/api/v1/stores/no-such-store/entries/xylo-entry/"),
            ("/api/v1/stores/b-store/entries/xylo-entry/", "/api/v1/stores/b-store/entries/no-such-entry/"),
        ],
    ),
    "api/v1/^skills/(?P<name>[^/]+)/$": (
        A,
        lambda w: [("/api/v1/skills/xylo-skill/", "/api/v1/skills/no-such-skill/")],
    ),
    "api/v1/proposals/<int:id>/": (
        A,
        lambda w: [(f"/api/v1/proposals/{w.proposal_a.pk}/", f"/api/v1/proposals/{MISSING}/")],
    ),
    "api/v1/dream-runs/<int:id>/": (
        A,
        lambda w: [(f"/api/v1/dream-runs/{w.run_a.pk}/", f"/api/v1/dream-runs/{MISSING}/")],
    ),
    "api/v1/stores/<slug:slug>/agents/": (
        A,
        lambda w: [("/api/v1/stores/xylo-store/agents/", "/api/v1/stores/no-such-store/agents/")],
    ),
    "api/v1/stores/<slug:slug>/dreams/": (
        A,
        lambda w: [("/api/v1/stores/xylo-store/dreams/", "/api/v1/stores/no-such-store/dreams/")],
    ),
    "api/v1/stores/<slug:slug>/effectiveness/": (
        A,
        lambda w: [("/api/v1/stores/xylo-store/effectiveness/", "/api/v1/stores/no-such-store/effectiveness/")],
    ),
    "api/v1/^stores/(?P<slug>[-a-zA-Z0-9_]+)/entries/(?P<key>[^/]+)/effectiveness/$": (
        A,
        lambda w: [
            (
                "/api/v1/stores/xylo-store/entries/xylo-entry/effectiveness/",
                "/api/v1/stores/no-such-store/entries/xylo-entry/effectiveness/",
            ),
            (
                "/api/v1/stores/b-store/entries/xylo-entry/effectiveness/",
                "/api/v1/stores/b-store/entries/no-such-entry/effectiveness/",
            ),
        ],
    ),
}

for _route, _kind in [
    ("memory/entries/<int:pk>/edit/", "entry"),
    ("memory/entries/<int:pk>/archive/", "entry"),
    ("memory/entries/<int:pk>/restore/", "entry"),
    ("memory/entries/<int:pk>/pin/", "entry"),
    ("memory/entries/<int:pk>/unpin/", "entry"),
    ("memory/entries/<int:pk>/revert/", "entry"),
    ("reviews/entries/<int:pk>/effectiveness/", "entry"),
    ("reviews/proposals/<int:pk>/", "proposal"),
    ("reviews/proposals/<int:pk>/edit/", "proposal"),
    ("reviews/proposals/<int:pk>/approve/", "proposal"),
    ("reviews/proposals/<int:pk>/reject/", "proposal"),
    ("reviews/proposals/<int:pk>/rebase/", "proposal"),
    ("reviews/proposals/<int:pk>/preview/", "proposal"),
    ("reviews/proposals/<int:pk>/evidence/", "proposal"),
    ("reviews/proposals/<int:pk>/undo/", "proposal"),
    ("reviews/proposals/<int:pk>/budget/", "proposal"),
    ("reviews/runs/<int:pk>/", "run"),
    ("reviews/runs/<int:pk>/rollback/", "run"),
    ("reviews/stores/<int:store_pk>/dream/", "store"),
    ("reviews/stores/<int:store_pk>/policy/", "store"),
    ("reviews/stores/<int:store_pk>/policy/apply-pending/", "store"),
    ("reviews/stores/<int:store_pk>/effectiveness/", "store"),
]:
    _attr = {"entry": "entry_a", "proposal": "proposal_a", "run": "run_a", "store": "store_a"}[_kind]

    def _builder(w, route=_route, attr=_attr):
        head, _, tail = route.partition("<int:")
        tail = tail.partition(">")[2]
        return [("/" + head + str(getattr(w, attr).pk) + tail, "/" + head + str(MISSING) + tail)]

    OBJECT_ROUTES[_route] = (P, _builder)

# Routes that name no object of a team: covered by the list/search test below, or not team data (with why).
LIST_ROUTES = {
    "": "home page (list test)",
    "switch-team/": "switching to A's team is tested in the list test",
    "memory/": "stores list (list test)",
    "memory/sessions/": "sessions list and search (list test)",
    "skills/": "skills list (list test)",
    "reviews/": "queue, filters, counters (list test)",
    "reviews/bulk/": "bulk decision with A's ids (list test)",
    "reviews/decided/": "decided view (list test)",
    "reviews/runs/": "runs list (list test)",
    "api/v1/ping/": "key's own team",
    "api/v1/sessions/": "push with A's external ids (restricted key test)",
    "api/v1/context/": "context with A's store, agent, session (list test)",
    "api/v1/stores/": "stores list (list test)",
    "api/v1/skills/": "skills index (list test)",
    "api/v1/proposals/": "proposals with A's filters (list test)",
    "api/v1/dream-runs/": "runs with A's filters (list test)",
    "api/v1/^(?P<path>[\\s\\S]*)$": "unknown API path: 404",
    "api/schema/": "schema, no team data",
    "api/docs/": "schema UI",
    "api/redoc/": "schema UI",
    "healthz": "no team data",
    "favicon.ico": "static",
    "accounts/login/": "sign-in",
    "accounts/logout/": "sign-out",
    "teams/<slug:slug>/join/<str:token>/": "invitation link: the one cross-team lookup by design (tested: bad token)",
    "admin/": "admin index (list test)",
    "admin/login/": "admin sign-in",
    "admin/logout/": "admin sign-out",
    "admin/password_change/": "own password",
    "admin/password_change/done/": "own password",
    "admin/autocomplete/": "admin autocomplete (list test)",
    "admin/jsi18n/": "static",
    "admin/r/<path:content_type_id>/<path:object_id>/": "view on site of A's objects (admin test)",
    "admin/^(?P<app_label>auth|axes|dreamweb|memory|skills_registry|reviews)/$": "admin app index (list test)",
    "admin/(?P<url>.*)$": "admin catch-all",
    "admin/auth/user/<id>/password/": "auth_user is outside RLS by design (docs/design.md)",
}
ADMIN_SUFFIXES = [
    "",
    "add/",
    "<path:object_id>/history/",
    "<path:object_id>/delete/",
    "<path:object_id>/change/",
    "<path:object_id>/",
]


def _admin_object_routes() -> dict[str, object]:
    """Admin routes of team-owned models that name one object (route -> model)."""
    out = {}
    for prefix, model in _admin_models().items():
        if _team_owned(model) or model._meta.db_table == "dreamweb_team":
            for suffix in ADMIN_SUFFIXES[2:]:
                out[prefix + suffix] = model
    return out


def _admin_other_routes() -> set[str]:
    out = set()
    for prefix, model in _admin_models().items():
        owned = _team_owned(model) or model._meta.db_table == "dreamweb_team"
        for suffix in ADMIN_SUFFIXES[:2] if owned else ADMIN_SUFFIXES:
            out.add(prefix + suffix)  # changelists / add forms (list test); non-team models (auth, axes)
    return out


def test_every_url_pattern_is_covered_by_the_sweep():
    routes = _routes()
    covered = set(OBJECT_ROUTES) | set(LIST_ROUTES) | set(_admin_object_routes()) | _admin_other_routes()
    uncovered = [r for r in routes if r not in covered]
    assert not uncovered, f"URL patterns the isolation sweep does not cover (add them to its table): {uncovered}"
    stale = [r for r in OBJECT_ROUTES if r not in routes]
    assert not stale, f"the sweep names routes that no longer exist: {stale}"


# ----------------------------------------------------------------------------------------------------- normalising

_TOKEN = re.compile(r"[A-Za-z0-9_\-]{32,}")


def _norm(body: bytes, *idents: str) -> str:
    text = _TOKEN.sub("<TOKEN>", body.decode("utf-8", "replace"))
    for ident in sorted({i for i in idents if i}, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z0-9_\-]){re.escape(ident)}(?![A-Za-z0-9_\-])", "<ID>", text)
    return text


_FLASH = re.compile(r'<div id="flash"[^>]*>(.*?)</div>', re.S)


def _flash(client) -> str:
    """The messages a request left for the next page (drained, so that every request is compared on its own)."""
    m = _FLASH.search(client.get("/memory/").content.decode("utf-8", "replace"))
    return m.group(1).strip() if m else ""


def _idents(url_a: str, url_m: str) -> list[str]:
    """The parts in which the two urls differ (what the answers may echo)."""
    pa, pm = url_a.strip("/").split("/"), url_m.strip("/").split("/")
    out = [url_a, url_m]
    for x, y in zip(pa, pm, strict=False):
        if x != y:
            out += [x, y]
    return out


FORM = {
    "reason": "isolation probe",
    "number": "1",
    "base_version": "1",
    "role": "admin",
    "identifier": "bob-b",
    "name": "evil-key",
    "scopes": "dreams",
    "key": "evil",
    "content": "evil content",
    "mode": "autonomous",
    "min_sessions": "1",
    "min_share": "0",
    "min_confidence_auto": "0",
    "max_sessions": "10",
    "token_budget": "10",
    "schedule_minutes": "60",
    "analyzer": "rules",
    "dry_run": "",
    "confirmed": "1",
    "action": "approve",
    "agents": "evil-agent",
}
HTMX = {"HX-Request": "true", "HX-Current-URL": "http://testserver/reviews/"}


def _page_request(client, method, url, htmx):
    headers = dict(HTMX) if htmx else {}
    if method == "GET":
        return client.get(url, headers=headers)
    if method == "POST":
        return client.post(url, FORM, headers=headers)
    return getattr(client, method.lower())(
        url, urlencode(FORM), content_type="application/x-www-form-urlencoded", headers=headers
    )


def _api_body(url: str, w: Iso):
    if url.endswith("/feedback/"):
        return {"helpful": False, "comment": "probe"}
    if url.endswith("/agents/"):
        return {"agents": ["evil-agent"]}
    if url.endswith("/dreams/"):
        return {"dry_run": False, "all_sessions": True}
    if url.endswith("/entries/"):
        return {"key": "evil-entry", "content": "evil content"}
    return {"content": "evil content", "key": "xylo-entry", "tags": ["evil"]}


def _check_pair(problems, who, method, url_a, url_m, ra, rm, allow_status=(404, 405), markers=MARKERS):
    label = f"{who} {method} {url_a}"
    if ra.status_code not in allow_status and (ra.status_code < 300 or ra.status_code != rm.status_code):
        problems.append(f"{label}: status {ra.status_code} (expected one of {allow_status})")
    if ra.status_code != rm.status_code:
        problems.append(f"{label}: status {ra.status_code} but {rm.status_code} for a missing object (oracle)")
    body = ra.content.decode("utf-8", "replace")
    leaked = [m for m in markers if m in body.replace(url_a, "")]
    leaked = [m for m in leaked if m not in url_a]
    if leaked:
        problems.append(f"{label}: body shows A's data {leaked}")
    ids = _idents(url_a, url_m)
    if ra.status_code == rm.status_code and _norm(ra.content, *ids) != _norm(rm.content, *ids):
        na, nm = _norm(ra.content, *ids), _norm(rm.content, *ids)
        at = next((i for i, (x, y) in enumerate(zip(na, nm, strict=False)) if x != y), min(len(na), len(nm)))
        problems.append(
            f"{label}: body differs from the missing object's (oracle): {na[at - 60 : at + 80]!r} vs "
            f"{nm[at - 60 : at + 80]!r}"
        )
    if ra.status_code in (301, 302, 303) and _norm(ra.get("Location", "").encode(), *ids) != _norm(
        rm.get("Location", "").encode(), *ids
    ):
        problems.append(f"{label}: redirects to {ra.get('Location')} vs {rm.get('Location')}")


METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def test_pages_sweep_b_people_get_404_for_every_object_of_a(iso):
    before = _snapshot(iso.a.pk)
    problems: list[str] = []
    for user in (iso.bertha, iso.bob):
        client = PageClient()
        client.force_login(user)
        for route, (kind, build) in OBJECT_ROUTES.items():
            if kind != P:
                continue
            for url_a, url_m in build(iso):
                for method in METHODS:
                    for htmx in (False, True):
                        ra = _page_request(client, method, url_a, htmx)
                        fa = _flash(client)
                        rm = _page_request(client, method, url_m, htmx)
                        fm = _flash(client)
                        ids = _idents(url_a, url_m)
                        if _norm(fa.encode(), *ids) != _norm(fm.encode(), *ids):
                            problems.append(f"{user.username} {method} {url_a}: message {fa!r} vs {fm!r} (oracle)")
                        _check_pair(
                            problems,
                            f"{user.username}{' htmx' if htmx else ''} [{route}]",
                            method,
                            url_a,
                            url_m,
                            ra,
                            rm,
                        )
    after = _snapshot(iso.a.pk)
    changed = _diff(before, after)
    assert not changed, "team B's page requests changed team A's rows: " + "; ".join(changed)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_api_sweep_b_keys_get_404_for_every_object_of_a(iso):
    before = _snapshot(iso.a.pk)
    problems: list[str] = []
    with all_teams():
        etag = f'"{iso.entry_a.pk}.{MemoryEntry.objects.get(pk=iso.entry_a.pk).version}"'
    for raw, name in ((iso.key_b_full, "b-full"), (iso.key_b_writer, "b-writer")):
        api = Api(raw)
        for route, (kind, build) in OBJECT_ROUTES.items():
            if kind != A:
                continue
            for url_a, url_m in build(iso):
                for method in METHODS:
                    headers = {"If-Match": etag, "X-Session-Id": "xylo-session-1"}
                    body = None if method in ("GET", "DELETE") else _api_body(url_a, iso)
                    ra = api.request(method, url_a, body, headers=headers)
                    rm = api.request(method, url_m, body, headers=headers)
                    allow = (404, 405) if name == "b-full" else (403, 404, 405)
                    _check_pair(problems, f"{name} [{route}]", method, url_a, url_m, ra, rm, allow)
    after = _snapshot(iso.a.pk)
    changed = _diff(before, after)
    assert not changed, "team B's API calls changed team A's rows: " + "; ".join(changed)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def _admin_obj_pk(iso: Iso, model) -> int | None:
    with all_teams():
        if model._meta.db_table == "dreamweb_team":
            return iso.a.pk
        row = model._base_manager.filter(team_id=iso.a.pk).order_by("pk").first()
        return row.pk if row else None


def test_admin_sweep_b_superuser_cannot_reach_a_objects(iso):
    """A superuser sees the teams they belong to in the admin (docs/design.md): A's rows are like missing ones."""
    from django.contrib.contenttypes.models import ContentType

    before = _snapshot(iso.a.pk)
    problems: list[str] = []
    client = PageClient()
    client.force_login(iso.boss)
    missing_models = []
    for route, model in _admin_object_routes().items():
        pk = _admin_obj_pk(iso, model)
        if pk is None:
            missing_models.append(model.__name__)
            continue
        url_a = "/" + route.replace("<path:object_id>", str(pk))
        url_m = "/" + route.replace("<path:object_id>", str(MISSING))
        for method, data in (("GET", None), ("POST", {"post": "yes"})):
            _flash(client)
            ra = client.get(url_a) if method == "GET" else client.post(url_a, data)
            fa = _flash(client)
            rm = client.get(url_m) if method == "GET" else client.post(url_m, data)
            fm = _flash(client)
            ids = _idents(url_a, url_m)
            if _norm(fa.encode(), *ids) != _norm(fm.encode(), *ids):
                problems.append(f"boss {method} {url_a}: message {fa!r} vs {fm!r} (oracle)")
            _check_pair(problems, f"boss [{route}]", method, url_a, url_m, ra, rm, allow_status=(302, 404))
    with all_teams():
        ct = ContentType.objects.get_for_model(MemoryStore)
    ra = client.get(f"/admin/r/{ct.pk}/{iso.store_a.pk}/")
    rm = client.get(f"/admin/r/{ct.pk}/{MISSING}/")
    _check_pair(
        problems,
        "boss [admin/r]",
        "GET",
        f"/admin/r/{ct.pk}/{iso.store_a.pk}/",
        f"/admin/r/{ct.pk}/{MISSING}/",
        ra,
        rm,
        allow_status=(404,),
    )
    changed = _diff(before, _snapshot(iso.a.pk))
    assert not changed, "the B superuser's admin requests changed team A's rows: " + "; ".join(changed)
    assert not problems, f"{len(problems)} problems (models without A rows: {missing_models}):\n" + "\n".join(problems)


# ------------------------------------------------------------------------------------------------ lists and search


def _no_markers(problems, label, response, query=""):
    body = response.content.decode("utf-8", "replace")
    if query:
        body = body.replace(query, "")
    leaked = [m for m in MARKERS if m in body]
    if leaked:
        problems.append(f"{label}: status {response.status_code} shows A's {leaked}")


def test_lists_and_searches_never_show_a_rows_to_b_pages(iso):
    w = iso
    problems: list[str] = []
    pages = [
        "/",
        "/memory/",
        "/memory/sessions/",
        "/skills/",
        "/reviews/",
        "/reviews/decided/",
        "/reviews/runs/",
        f"/reviews/?store={w.store_a.pk}",
        f"/reviews/runs/?store={w.store_a.pk}",
        f"/reviews/?run={w.run_a.pk}",
        f"/reviews/decided/?store={w.store_a.pk}",
        "/reviews/?status=pending&risk=low",
        f"/memory/sessions/?store={w.store_a.pk}",
        "/memory/sessions/?agent=xylo-agent",
        "/reviews/?outcome=applied",
        f"/memory/?team={w.a.pk}",
        "/skills/?team=xylo-team",
        f"/reviews/?team={w.a.pk}",
        "/memory/sessions/?page=2",
        "/reviews/?page=2",
    ]
    searches = ["xylo", "xylo-session", "xyloquartzfact", "xylo-entry", "xylo-skill", "Xylo Team"]
    for user in (w.bertha, w.bob):
        client = PageClient()
        client.force_login(user)
        for url in pages:
            r = client.get(url)
            _no_markers(problems, f"{user.username} GET {url}", r)
            r = client.get(url, headers=HTMX)
            _no_markers(problems, f"{user.username} htmx GET {url}", r)
        for q in searches:
            for base in (
                "/memory/sessions/",
                "/reviews/",
                "/memory/",
                "/skills/",
                "/reviews/decided/",
                "/reviews/runs/",
            ):
                r = client.get(base, {"q": q})
                _no_markers(problems, f"{user.username} GET {base}?q={q}", r, q)
        # switching to A's team
        r = client.post("/switch-team/", {"team": w.a.pk})
        r = client.get("/memory/")
        _no_markers(problems, f"{user.username} after switch-team to A: /memory/", r)
        r = client.post("/switch-team/", {"team": "xylo-team"})
        r = client.get("/reviews/")
        _no_markers(problems, f"{user.username} after switch-team to A slug: /reviews/", r)
    # the admin of the B superuser: changelists, add forms, app indexes, autocomplete
    boss = PageClient()
    boss.force_login(w.boss)
    for prefix, model in _admin_models().items():
        if _team_owned(model) or model._meta.db_table == "dreamweb_team":
            for url in ("/" + prefix, "/" + prefix + "add/", "/" + prefix + "?q=xylo"):
                _no_markers(problems, f"boss GET {url}", boss.get(url), "xylo")
    for app in ("dreamweb", "memory", "skills_registry", "reviews"):
        _no_markers(problems, f"boss GET /admin/{app}/", boss.get(f"/admin/{app}/"))
    _no_markers(problems, "boss GET /admin/", boss.get("/admin/"))
    auto = boss.get(
        "/admin/autocomplete/",
        {"app_label": "memory", "model_name": "memoryentry", "field_name": "store", "term": "xylo"},
    )
    _no_markers(problems, "boss autocomplete store", auto, "xylo")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_bulk_decision_with_a_ids_decides_nothing_of_a(iso):
    before = _snapshot(iso.a.pk)
    client = PageClient()
    client.force_login(iso.bertha)
    for action in ("approve", "reject"):
        for htmx in (False, True):
            r = client.post(
                "/reviews/bulk/",
                {"ids": [iso.proposal_a.pk], "action": action, "reason": "probe", "confirmed": "1"},
                headers=HTMX if htmx else {},
            )
            body = r.content.decode("utf-8", "replace")
            assert not [m for m in MARKERS if m in body], f"bulk {action} shows A's data: {body[:300]}"
    with all_teams():
        assert Proposal.objects.get(pk=iso.proposal_a.pk).status == "pending"
    assert not _diff(before, _snapshot(iso.a.pk))


def test_join_with_a_bad_token_changes_nothing(iso):
    before = _snapshot(iso.a.pk)
    client = PageClient()
    client.force_login(iso.bob)
    for url in ("/teams/xylo-team/join/not-a-token/", "/teams/no-such-team/join/not-a-token/"):
        client.get(url)
        client.post(url, {})
    with all_teams():
        assert not Membership.objects.filter(team=iso.a, user=iso.bob).exists()
    assert not _diff(before, _snapshot(iso.a.pk))


def test_lists_and_filters_never_show_or_count_a_rows_to_b_api(iso):
    w = iso
    problems: list[str] = []
    api = Api(w.key_b_full)
    calls = [
        ("/api/v1/stores/", None),
        ("/api/v1/skills/", None),
        ("/api/v1/proposals/", None),
        ("/api/v1/proposals/", {"store": "xylo-store"}),
        ("/api/v1/proposals/", {"run": str(w.run_a.pk)}),
        ("/api/v1/proposals/", {"status": "pending", "limit": "500"}),
        ("/api/v1/proposals/", {"offset": "0", "limit": "1", "target_kind": "memory"}),
        ("/api/v1/dream-runs/", None),
        ("/api/v1/dream-runs/", {"store": "xylo-store"}),
        ("/api/v1/context/", {"store": "xylo-store"}),
        ("/api/v1/context/", {"store": "b-store", "agent": "xylo-agent", "query": "xyloquartzfact"}),
        ("/api/v1/context/", {"store": "b-store", "session": "xylo-session-1", "query": "xylo"}),
        ("/api/v1/stores/b-store/entries/", {"q": "xyloquartzfact"}),
        ("/api/v1/stores/b-store/entries/", {"agent": "xylo-agent", "status": "active"}),
        ("/api/v1/stores/b-store/effectiveness/", None),
        ("/api/v1/ping/", None),
    ]
    for url, query in calls:
        r = api.get(url, query)
        q = ""
        if query:
            q = next((v for v in query.values() if "xylo" in v), "")
        _no_markers(problems, f"GET {url} {query}", r, q)
        if r.status_code == 200:
            data = r.json()
            items = data.get("results", data.get("items", [])) if isinstance(data, dict) else data
            text = json.dumps(items)
            for ident in (f'"id": {w.proposal_a.pk}', f'"id": {w.run_a.pk}'):
                if url.startswith(("/api/v1/proposals/", "/api/v1/dream-runs/")) and ident in text:
                    with all_teams():
                        mine = set(Proposal.objects.filter(team=w.b).values_list("pk", flat=True)) | set(
                            DreamRun.objects.filter(team=w.b).values_list("pk", flat=True)
                        )
                    if int(ident.split()[-1]) not in mine:
                        problems.append(f"GET {url} {query}: lists A's object {ident}")
            count = data.get("count") if isinstance(data, dict) else None
            if isinstance(count, int) and count and url.startswith(("/api/v1/proposals/", "/api/v1/dream-runs/")):
                problems.append(f"GET {url} {query}: count {count} (B has no proposals or runs)")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


# --------------------------------------------------------------------------------------------------- restricted keys


def test_restricted_keys_stay_inside_their_scopes_and_stores(iso):
    w = iso
    before = _snapshot(w.a.pk)
    problems: list[str] = []
    reader, writer, pusher = Api(w.key_b_reader), Api(w.key_b_writer), Api(w.key_b_noread)

    def expect(label, response, allowed):
        if response.status_code not in allowed:
            problems.append(f"{label}: {response.status_code} (expected {allowed}) {response.content[:200]!r}")

    new = {"key": "probe-entry", "content": "A harmless probe note."}
    expect("reader POST entry", reader.post("/api/v1/stores/b-store/entries/", new), (403,))
    expect("reader POST session", reader.post("/api/v1/sessions/", session_doc("r-1")), (403,))
    expect("reader GET proposals", reader.get("/api/v1/proposals/"), (403,))
    expect("reader GET skills", reader.get("/api/v1/skills/"), (403,))
    expect("reader GET skill body", reader.get("/api/v1/skills/beta-skill/"), (403,))
    expect("reader POST dream", reader.post("/api/v1/stores/b-store/dreams/", {}), (403,))
    expect("reader PUT agents", reader.put("/api/v1/stores/b-store/agents/", {"agents": ["x"]}), (403,))
    ctx = reader.get("/api/v1/context/", {"store": "b-store"})
    if ctx.status_code == 200 and ctx.json().get("skills"):
        problems.append("reader (no skills:read) gets the skills index in /context/")
    expect("sessions-only GET entries", pusher.get("/api/v1/stores/b-store/entries/"), (403,))
    expect("sessions-only GET context", pusher.get("/api/v1/context/", {"store": "b-store"}), (403,))
    expect("sessions-only GET store entry", pusher.get("/api/v1/stores/b-store/entries/b-entry/"), (403,))
    expect("writer POST other store", writer.post("/api/v1/stores/b-other/entries/", new), (403,))
    expect("writer POST A store", writer.post("/api/v1/stores/xylo-store/entries/", new), (404,))
    expect("writer GET proposals", writer.get("/api/v1/proposals/"), (403,))
    r = writer.get("/api/v1/stores/b-store/entries/b-entry/")
    etag = r.get("ETag", '"0.0"')
    expect(
        "writer PUT entry in other store",
        writer.put("/api/v1/stores/b-other/entries/b-entry/", {"content": "x"}, headers={"If-Match": etag}),
        (403, 404),
    )
    # in-band write naming A's session by header and in the body: created in B, never linked to A's session
    ok = writer.post(
        "/api/v1/stores/b-store/entries/",
        {**new, "session_id": "xylo-session-1"},
        headers={"X-Session-Id": "xylo-session-1"},
    )
    expect("writer POST own store naming A's session", ok, (201,))
    with all_teams():
        bad = MemoryVersion.objects.filter(team=w.b, session__isnull=False).exclude(session__team=w.b).count()
        stores = set(MemoryStore.objects.filter(team=w.b).values_list("slug", flat=True))
    if bad:
        problems.append(f"{bad} of B's versions link to another team's session")
    if stores != {"b-store", "b-other"}:
        problems.append(f"B's stores changed: {stores}")
    # a session pushed by B under A's external id and agent: stored in B, A's untouched, no conflict oracle
    pushed = pusher.post("/api/v1/sessions/", session_doc("xylo-session-1", agent="xylo-agent"))
    expect("B pushes a session under A's external id", pushed, (201,))
    fresh = pusher.post("/api/v1/sessions/", session_doc("never-seen-id", agent="xylo-agent"))
    if pushed.status_code != fresh.status_code:
        problems.append(
            f"pushing A's external id answers {pushed.status_code}, a fresh one {fresh.status_code} (oracle)"
        )
    with all_teams():
        n_b = AgentSession.objects.filter(team=w.b, external_id="xylo-session-1").count()
    if n_b != 1:
        problems.append(f"B's push of A's external id stored {n_b} rows in B")
    # other agent names in a header: the key's team still decides
    for header in ({"X-Agent": "xylo-agent"}, {"X-Dreamweb-Agent": "xylo-agent"}, {"X-Team": "xylo-team"}):
        r = Api(w.key_b_full).get("/api/v1/stores/xylo-store/entries/", headers=header)
        expect(f"full key with header {header} reads A's store", r, (404,))
        r = Api(w.key_b_full).get("/api/v1/context/", {"store": "b-store", "agent": "xylo-agent"}, headers=header)
        _no_markers(problems, f"context with header {header}", r, "xylo-agent")
    changed = _diff(before, _snapshot(w.a.pk))
    if changed:
        problems.append("team A's rows changed: " + "; ".join(changed))
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_key_of_b_cannot_be_revoked_via_a_key_page_nor_a_key_of_a_by_b_admin(iso):
    with all_teams():
        before = AgentKey.objects.get(pk=iso.key_a.pk).revoked_at
    client = PageClient()
    client.force_login(iso.bertha)
    client.post(f"/keys/{iso.key_a.pk}/revoke/", {})
    client.post(f"/keys/{iso.key_a.pk}/revoke/", {}, headers=HTMX)
    with all_teams():
        assert AgentKey.objects.get(pk=iso.key_a.pk).revoked_at == before


# ------------------------------------------------------------------------------------------ row-level security (SQL)

needs_pg = pytest.mark.skipif(not is_postgres(), reason="row-level security is PostgreSQL's")


def _raw_attempts(a_id: int, b_id: int) -> list[str]:
    """As the code under test (application role), with whatever scope is set: try to read, update and delete
    team A's rows in every table with a team_id column, and move B's rows into A."""
    problems = []
    tables = _team_tables()
    assert "memory_memoryentry" in tables and "reviews_proposal" in tables, tables
    for table in tables:
        with connection.cursor() as c:
            try:
                with transaction.atomic():
                    c.execute(f'SELECT count(*) FROM "{table}" WHERE team_id = %s', [a_id])
                    n = c.fetchone()[0]
                    if n:
                        problems.append(f"SELECT {table}: {n} rows of A visible")
                    c.execute(f'SELECT count(*) FROM "{table}" WHERE team_id <> %s', [b_id])
                    n = c.fetchone()[0]
                    if n:
                        problems.append(f"SELECT {table}: {n} rows of other teams visible")
            except DatabaseError:
                pass  # the statement was refused: nothing read
            try:
                with transaction.atomic():
                    c.execute(f'UPDATE "{table}" SET team_id = team_id WHERE team_id = %s', [a_id])
                    if c.rowcount:
                        problems.append(f"UPDATE {table}: {c.rowcount} rows of A updated")
                    raise _Undo
            except _Undo:
                pass
            except DatabaseError:
                pass
            try:
                with transaction.atomic():
                    c.execute(f'DELETE FROM "{table}" WHERE team_id = %s', [a_id])
                    if c.rowcount:
                        problems.append(f"DELETE {table}: {c.rowcount} rows of A deleted")
                    raise _Undo
            except _Undo:
                pass
            except DatabaseError:
                pass
            try:
                with transaction.atomic():
                    c.execute(f'UPDATE "{table}" SET team_id = %s WHERE team_id = %s', [a_id, b_id])
                    if c.rowcount:
                        problems.append(f"UPDATE {table}: moved {c.rowcount} of B's rows into team A")
                    raise _Undo
            except _Undo:
                pass
            except DatabaseError:
                pass  # refused by the policy's check: right
    with connection.cursor() as c:
        try:
            with transaction.atomic():
                c.execute("SELECT count(*) FROM dreamweb_team WHERE id = %s", [a_id])
                if c.fetchone()[0]:
                    problems.append("SELECT dreamweb_team: A's team row visible")
                c.execute("UPDATE dreamweb_team SET name = 'owned' WHERE id = %s", [a_id])
                if c.rowcount:
                    problems.append("UPDATE dreamweb_team: A's team row updated")
                raise _Undo
        except _Undo:
            pass
        except DatabaseError:
            pass
    return problems


class _Undo(Exception):
    pass


@needs_pg
def test_rls_as_app_role_in_team_b_scope_hides_a_rows(iso):
    before = _snapshot(iso.a.pk)
    with connection.cursor() as c:
        c.execute("SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        user, superuser, bypass = c.fetchone()
    assert not superuser and not bypass, user
    problems = []
    with transaction.atomic(), rls.team_scope(iso.b):
        with connection.cursor() as c:
            c.execute("SELECT current_user, current_setting('dreamweb.team_ids', true)")
            role, scope = c.fetchone()
        assert scope and str(iso.a.pk) not in scope.split(","), scope
        problems += _raw_attempts(iso.a.pk, iso.b.pk)
        with connection.cursor() as c:
            c.execute("SELECT count(*) FROM memory_memoryentry")
            assert c.fetchone()[0] >= 1, "team B's own rows must be visible in its scope (the probe itself works)"
    assert not _diff(before, _snapshot(iso.a.pk))
    assert not problems, "\n".join(problems)


@needs_pg
def test_rls_as_app_role_with_no_scope_and_wildcards_hides_every_row(iso):
    problems = []
    for value in ("", "*", f"{iso.b.pk},*", " *", "0", f"{iso.b.pk} ", "all"):
        with transaction.atomic():
            with connection.cursor() as c:
                c.execute("SELECT set_config('dreamweb.team_ids', %s, true)", [value])
            for p in _raw_attempts(iso.a.pk, iso.b.pk):
                problems.append(f"team_ids={value!r}: {p}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------- error/timing oracle


def test_api_404_bodies_are_identical_for_a_objects_and_missing_ones(iso):
    api = Api(iso.key_b_full)
    pairs = [
        ("/api/v1/stores/xylo-store/entries/", "/api/v1/stores/zzzz-store/entries/"),
        ("/api/v1/stores/xylo-store/entries/xylo-entry/", "/api/v1/stores/zzzz-store/entries/zzzz-entry/"),
        (f"/api/v1/proposals/{iso.proposal_a.pk}/", f"/api/v1/proposals/{MISSING}/"),
        (f"/api/v1/dream-runs/{iso.run_a.pk}/", f"/api/v1/dream-runs/{MISSING}/"),
        ("/api/v1/skills/xylo-skill/", "/api/v1/skills/zzzz-skill/"),
    ]
    problems = []
    for url_a, url_m in pairs:
        ra, rm = api.get(url_a), api.get(url_m)
        if ra.status_code != 404 or rm.status_code != 404:
            problems.append(f"{url_a}: {ra.status_code} / {rm.status_code}")
        ids = _idents(url_a, url_m)
        if _norm(ra.content, *ids) != _norm(rm.content, *ids):
            problems.append(f"{url_a}: {ra.content!r} vs {rm.content!r}")
        for h in ("Content-Type", "Allow", "Vary", "ETag"):
            if ra.get(h) != rm.get(h):
                problems.append(f"{url_a}: header {h} {ra.get(h)!r} vs {rm.get(h)!r}")
    assert not problems, "\n".join(problems)


def test_timing_of_a_objects_is_like_missing_ones(iso):
    """Lenient: the median time of a 404 for A's object stays within 3x (and 30 ms) of a missing object's."""
    api = Api(iso.key_b_full)
    pairs = [
        ("/api/v1/stores/xylo-store/entries/xylo-entry/", "/api/v1/stores/zzzz-store/entries/zzzz-entry/"),
        (f"/api/v1/proposals/{iso.proposal_a.pk}/", f"/api/v1/proposals/{MISSING}/"),
    ]
    problems = []
    for url_a, url_m in pairs:
        times = {url_a: [], url_m: []}
        for _ in range(15):
            for url in (url_a, url_m):
                start = time.perf_counter()
                api.get(url)
                times[url].append(time.perf_counter() - start)
        ta, tm = statistics.median(times[url_a]), statistics.median(times[url_m])
        if ta > 3 * tm and ta - tm > 0.03:
            problems.append(f"{url_a}: {ta * 1000:.1f} ms vs {tm * 1000:.1f} ms for a missing one")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------ a person of both teams (viewer A, admin B)


def _mallory(iso: Iso):
    with all_teams():
        mallory = UserFactory(username="mallory")
        MembershipFactory(team=iso.a, user=mallory, role=Role.VIEWER)
        MembershipFactory(team=iso.b, user=mallory, role=Role.ADMIN)
    client = PageClient()
    client.force_login(mallory)
    client.post("/switch-team/", {"team": iso.b.pk})
    client.post("/switch-team/", {"team": iso.b.slug})
    return mallory, client


def test_admin_of_b_who_only_views_a_cannot_change_a_through_any_page(iso):
    """Row-level security admits both teams for such a person: only the gates keep B's admin role off A's rows
    (docs/architecture.md: gates.get_for_user, 404 outside the team, 403 for a role too low)."""
    mallory, client = _mallory(iso)
    before = _snapshot(iso.a.pk)
    problems: list[str] = []
    form = {**FORM, "identifier": "mallory"}
    for route, (kind, build) in OBJECT_ROUTES.items():
        if kind != P:
            continue
        for url_a, _ in build(iso):
            for method in ("POST", "PUT", "PATCH", "DELETE"):
                for htmx in (False, True):
                    headers = dict(HTMX) if htmx else {}
                    if method == "POST":
                        r = client.post(url_a, form, headers=headers)
                    else:
                        r = getattr(client, method.lower())(
                            url_a, urlencode(form), content_type="application/x-www-form-urlencoded", headers=headers
                        )
                    snap = _snapshot(iso.a.pk)
                    changed = _diff(before, snap)
                    if changed:
                        problems.append(f"mallory {method} {url_a} ({r.status_code}) changed A: {'; '.join(changed)}")
                        before = snap
                    elif r.status_code < 400 and "beta-team" not in url_a:
                        problems.append(f"mallory {method} {url_a}: {r.status_code} (expected 403/404/405)")
    r = client.post("/reviews/bulk/", {"ids": [iso.proposal_a.pk], "action": "approve", "confirmed": "1"})
    changed = _diff(before, _snapshot(iso.a.pk))
    if changed:
        problems.append(f"mallory bulk approve of A's proposal changed A: {'; '.join(changed)}")
    with all_teams():
        role = Membership.objects.get(team=iso.a, user=mallory).role
        keys_revoked = AgentKey.objects.filter(team=iso.a, revoked_at__isnull=False).count()
    if role != Role.VIEWER:
        problems.append(f"mallory's role in A is now {role}")
    if keys_revoked:
        problems.append(f"{keys_revoked} of A's keys revoked by mallory")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_a_person_of_both_teams_cannot_reach_a_skill_through_b_slug(iso):
    """skills/<team>/<name>/ names the team: A's skill under B's slug is not B's skill, even for someone in both."""
    _, client = _mallory(iso)
    problems = []
    for tail in ("", "versions/", "diff/?a=1&b=1", "files/README.md"):
        url_a, url_m = f"/skills/beta-team/xylo-skill/{tail}", f"/skills/beta-team/no-such-skill/{tail}"
        ra, rm = client.get(url_a), client.get(url_m)
        # mallory is in A: her team switcher names A's team, which is no leak
        _check_pair(problems, "mallory", "GET", url_a, url_m, ra, rm, markers=MARKERS[:-1])
    before = _snapshot(iso.a.pk)
    r = client.post("/skills/beta-team/xylo-skill/revert/1/", FORM)
    if r.status_code != 404:
        problems.append(f"mallory POST revert of A's skill under B's slug: {r.status_code}")
    assert not _diff(before, _snapshot(iso.a.pk))
    assert not problems, "\n".join(problems)


def test_an_invitation_of_a_opened_under_b_slug_joins_nobody(iso):
    from dreamweb.members import create_invitation

    with all_teams():
        _, token = create_invitation(iso.a, by=None, role="admin")
        carol = UserFactory(username="carol")
    client = PageClient()
    client.force_login(carol)
    client.get(f"/teams/beta-team/join/{token}/")
    client.post(f"/teams/beta-team/join/{token}/", {})
    with all_teams():
        joined = list(Membership.objects.filter(user=carol).values_list("team__slug", "role"))
    assert joined == [], f"A's invitation opened under B's slug made carol a member: {joined}"


def test_b_team_pages_of_a_person_of_both_teams_list_only_b(iso):
    """The members and keys pages name their team by slug: B's pages list B's people and keys, never A's."""
    _, client = _mallory(iso)
    problems = []
    for url in ("/teams/beta-team/members/", "/teams/beta-team/keys/"):
        body = client.get(url).content.decode("utf-8", "replace")
        leaked = [w for w in ("adam-a", "vera-a", "xylo-key") if w in body]
        if leaked:
            problems.append(f"mallory GET {url} lists A's {leaked}")
    assert not problems, "\n".join(problems)


def test_a_dream_of_b_reads_only_b_sessions(iso):
    """Selection inside the trusted layer (DESIGN.md guardrail 2): B's dream over every session never reads A's."""
    with all_teams():
        for n in range(4):
            SessionFactory(team=iso.a, external_id=f"xylo-extra-{n}", agent="deploy-bot")
            SessionFactory(team=iso.b, external_id=f"b-extra-{n}", agent="deploy-bot")
    before = _snapshot(iso.a.pk)
    r = Api(iso.key_b_full).post("/api/v1/stores/b-store/dreams/", {"all_sessions": True})
    assert r.status_code == 202, r.content
    with all_teams():
        run = DreamRun.objects.filter(team=iso.b).order_by("-pk").first()
        foreign = SessionAnalysis.objects.filter(run=run).exclude(session__team=iso.b).count()
        read = set(SessionAnalysis.objects.filter(run=run).values_list("session__external_id", flat=True))
    assert not foreign and not [s for s in read if s.startswith("xylo")], read
    assert not _diff(before, _snapshot(iso.a.pk))


def test_b_key_naming_a_store_slug_in_its_writable_stores_still_cannot_write_there(iso):
    with all_teams():
        raw = make_key(iso.b, "b-greedy", scopes=["memory:read", "memory:write"], writable_stores=["xylo-store"])
    before = _snapshot(iso.a.pk)
    api = Api(raw)
    r = api.post("/api/v1/stores/xylo-store/entries/", {"key": "evil", "content": "A harmless probe note."})
    assert r.status_code == 404, r.content
    stores = api.get("/api/v1/stores/").content.decode()
    assert "xylo" not in stores, stores
    assert not _diff(before, _snapshot(iso.a.pk))


def test_commands_for_team_b_never_export_or_dream_a_store(iso, tmp_path):
    from django.core.management import CommandError, call_command

    from tests.scoping import no_scope

    before = _snapshot(iso.a.pk)
    out = tmp_path / "export.json"
    for fmt in ("json", "markdown"):
        try:
            with no_scope():
                call_command(
                    "export_memory", "--team", "beta-team", "--store", "xylo-store", "--format", fmt, "-o", str(out)
                )
        except (CommandError, SystemExit):
            pass
        text = out.read_text() if out.exists() else ""
        leaked = [m for m in MARKERS if m in text]
        assert not leaked, f"export_memory --team beta-team --store xylo-store ({fmt}) wrote A's {leaked}"
    try:
        with no_scope():
            call_command("dream", "--team", "beta-team", "--store", "xylo-store", "--all-sessions")
    except (CommandError, SystemExit):
        pass
    with all_teams():
        assert not DreamRun.objects.filter(team=iso.b, store=iso.store_a).exists()
    assert not _diff(before, _snapshot(iso.a.pk))


def test_the_sweep_urls_reach_the_objects_for_their_own_team(iso):
    """The sweep is not vacuous: A's own admin and key reach every object URL of its table (no 404)."""
    client = PageClient()
    client.force_login(iso.adam)
    with all_teams():
        raw = make_key(iso.a, "xylo-key-3")
    api = Api(raw)
    misses = []
    for route, (kind, build) in OBJECT_ROUTES.items():
        for url_a, _ in build(iso):
            if "beta-team" in url_a or "b-store" in url_a or url_a.endswith("README.md"):
                continue  # variants naming A's object under B's team or store
            statuses = (
                [client.get(url_a).status_code, client.post(url_a, {}).status_code]
                if kind == P
                else [api.get(url_a).status_code, api.post(url_a, {}).status_code]
            )
            if 404 in statuses and all(s in (404, 405) for s in statuses):
                misses.append(f"{route}: {url_a} {statuses}")
    assert not misses, "sweep URLs that even team A cannot reach:\n" + "\n".join(misses)


def test_filters_naming_a_objects_answer_like_filters_naming_nothing(iso):
    """A filter with A's id or slug must answer as one naming nothing (no existence oracle in lists)."""
    w = iso
    problems: list[str] = []
    api = Api(w.key_b_full)
    api_pairs = [
        ("/api/v1/proposals/", {"store": "xylo-store"}, {"store": "zzzz-store"}),
        ("/api/v1/proposals/", {"run": str(w.run_a.pk)}, {"run": str(MISSING)}),
        ("/api/v1/dream-runs/", {"store": "xylo-store"}, {"store": "zzzz-store"}),
        ("/api/v1/context/", {"store": "xylo-store"}, {"store": "zzzz-store"}),
    ]
    for url, qa, qm in api_pairs:
        ra, rm = api.get(url, qa), api.get(url, qm)
        ids = [*qa.values(), *qm.values()]
        if ra.status_code != rm.status_code or _norm(ra.content, *ids) != _norm(rm.content, *ids):
            problems.append(
                f"GET {url} {qa}: {ra.status_code} {ra.content[:200]!r} vs {rm.status_code} {rm.content[:200]!r}"
            )
    client = PageClient()
    client.force_login(w.bertha)
    page_pairs = [
        ("/reviews/", {"store": str(w.store_a.pk)}, {"store": str(MISSING)}),
        ("/reviews/", {"run": str(w.run_a.pk)}, {"run": str(MISSING)}),
        ("/reviews/runs/", {"store": str(w.store_a.pk)}, {"store": str(MISSING)}),
        ("/reviews/decided/", {"store": str(w.store_a.pk)}, {"store": str(MISSING)}),
        ("/memory/sessions/", {"store": str(w.store_a.pk)}, {"store": str(MISSING)}),
        ("/memory/sessions/", {"q": "xylo-session-1"}, {"q": "zzzz-session-1"}),
        ("/reviews/decided/", {"who": str(w.adam.pk)}, {"who": str(MISSING)}),
    ]
    for url, qa, qm in page_pairs:
        ra, rm = client.get(url, qa), client.get(url, qm)
        ids = [*qa.values(), *qm.values()]
        na, nm = _norm(ra.content, *ids), _norm(rm.content, *ids)
        if ra.status_code != rm.status_code or na != nm:
            at = next((i for i, (x, y) in enumerate(zip(na, nm, strict=False)) if x != y), 0)
            problems.append(f"GET {url} {qa}: {ra.status_code} {na[at - 60 : at + 80]!r} vs {nm[at - 60 : at + 80]!r}")
    assert not problems, "\n".join(problems)


@needs_pg
def test_no_table_outside_rls_holds_rows_that_point_at_team_rows(iso):
    """Tables without a team_id column (and so no policy on it) must not carry references to team-owned rows:
    a join table or side table of a team-owned model would be readable by every team. Documented exceptions:
    auth_user, django_session, django_admin_log (docs/design.md), and the tables of Django and axes."""
    team_tables = set(_team_tables()) | {"dreamweb_team"}
    with connection.cursor() as c:
        c.execute(
            """SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, r.relname
               FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
               JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE k.contype = 'f' AND n.nspname = 'public'"""
        )
        refs = c.fetchall()
    problems = sorted(
        {
            f"{table} -> {parent} (rls={rls_on}, forced={forced})"
            for table, rls_on, forced, parent in refs
            if parent in team_tables
            and table not in team_tables
            and not (rls_on and forced)
            and not table.startswith(("django_", "auth_", "axes_"))
        }
    )
    assert not problems, "tables outside row-level security that point at team rows:\n" + "\n".join(problems)


def test_b_session_sharing_an_external_id_with_a_shows_none_of_a_serves(iso):
    """A's key was served xylo-entry for session xylo-session-1; B pushes its own session under that external id.
    B's session page (even for a person of both teams) shows B's session alone, never what A was served."""
    pushed = Api(iso.key_b_full).post("/api/v1/sessions/", session_doc("xylo-session-1", agent="b-bot"))
    assert pushed.status_code == 201, pushed.content
    with all_teams():
        b_session = AgentSession.objects.get(team=iso.b, external_id="xylo-session-1")
    problems = []
    for who in ("bertha", "mallory"):
        client = PageClient()
        if who == "bertha":
            client.force_login(iso.bertha)
        else:
            _, client = _mallory(iso)
        body = client.get(f"/memory/sessions/{b_session.pk}/").content.decode("utf-8", "replace")
        leaked = [m for m in ("xylo-entry", "xyloquartzfact", "xylo-key", "xylo-agent", "xylo-task") if m in body]
        if leaked:
            problems.append(f"{who}: B's session page shows A's {leaked}")
    assert not problems, "\n".join(problems)


def test_same_change_in_other_stores_never_reaches_across_teams(iso):
    """The card decides the same change pending in *the team's* other stores (docs/design.md, Decisions). B's card
    must not name A's store, and approving it (with A's proposal named in `also`) must leave A's proposal pending,
    for B's admin and for a person who is B's admin and only views A."""
    with all_teams():
        proposal_a = Proposal.objects.get(pk=iso.proposal_a.pk)
        proposals_b = [
            make_proposal(store, content=proposal_a.content, signature=proposal_a.signature, key_hint="")
            for store in (iso.store_b, iso.store_b2)
        ]
    _, mallory = _mallory(iso)
    before = _snapshot(iso.a.pk)
    problems = []
    bertha = PageClient()
    bertha.force_login(iso.bertha)
    for who, web, p in (("mallory", mallory, proposals_b[0]), ("bertha", bertha, proposals_b[1])):
        for url in ("/reviews/", f"/reviews/proposals/{p.pk}/"):
            body = web.get(url).content.decode("utf-8", "replace")
            spans = re.findall(r'<span class="writes-elsewhere">(.*?)</span>', body, re.S)
            if any("xylo" in s.lower() for s in spans):
                problems.append(f"{who} GET {url}: the card names A's store as the same change: {spans}")
        web.post(f"/reviews/proposals/{p.pk}/approve/", {"also": str(iso.proposal_a.pk)})
        web.post(f"/reviews/proposals/{p.pk}/approve/", {"also": f"{iso.proposal_a.pk}"}, headers=HTMX)
        with all_teams():
            status = Proposal.objects.get(pk=iso.proposal_a.pk).status
        if status != "pending":
            problems.append(f"{who} approving B's card made A's proposal {status}")
    changed = _diff(before, _snapshot(iso.a.pk))
    if changed:
        problems.append("A's rows changed: " + "; ".join(changed))
    assert not problems, "\n".join(problems)


def test_earlier_decisions_on_b_card_never_come_from_team_a(iso):
    """A card lists earlier decisions on the same change (same signature). A's rejection and its reason are A's:
    B's card never shows them, even to a person of both teams."""
    from reviews.services import reject

    with all_teams():
        proposal_a = Proposal.objects.get(pk=iso.proposal_a.pk)
        try:
            reject(proposal_a, user=iso.adam, reason="xyloquartzfact secret reason")
        except TypeError:
            Proposal.objects.filter(pk=proposal_a.pk).update(
                status="rejected", reason="xyloquartzfact secret reason", decided_by=iso.adam
            )
        proposal_a.refresh_from_db()
        assert proposal_a.status == "rejected"
        proposal_b = make_proposal(iso.store_b, content=proposal_a.content, signature=proposal_a.signature, key_hint="")
    _, mallory = _mallory(iso)
    bertha = PageClient()
    bertha.force_login(iso.bertha)
    problems = []
    for who, web in (("mallory", mallory), ("bertha", bertha)):
        for url in ("/reviews/", f"/reviews/proposals/{proposal_b.pk}/"):
            body = web.get(url).content.decode("utf-8", "replace")
            leaked = [m for m in ("xyloquartzfact secret reason", "adam-a") if m in body]
            if leaked:
                problems.append(f"{who} GET {url}: B's card shows A's decision {leaked}")
    assert not problems, "\n".join(problems)


def test_admin_add_forms_cannot_create_rows_in_team_a(iso):
    """B's superuser names A's team id in the admin's add forms: nothing is created in A (and no server error)."""
    client = PageClient()
    client.force_login(iso.boss)
    before = _snapshot(iso.a.pk)
    forms = {
        "/admin/dreamweb/membership/add/": {"team": iso.a.pk, "user": iso.boss.pk, "role": "admin"},
        "/admin/memory/memorystore/add/": {
            "team": iso.a.pk,
            "slug": "evil-store",
            "name": "evil",
            "kind": "project",
            "agents": "[]",
        },
        "/admin/dreamweb/agentkey/add/": {"team": iso.a.pk, "name": "evil", "scopes": '["dreams"]'},
        "/admin/skills_registry/skill/add/": {"team": iso.a.pk, "name": "evil", "description": "x", "body": "x"},
    }
    problems = []
    for url, data in forms.items():
        r = client.post(url, data)
        if r.status_code >= 500:
            problems.append(f"POST {url} with A's team: {r.status_code}")
    changed = _diff(before, _snapshot(iso.a.pk))
    if changed:
        problems.append("A's rows changed: " + "; ".join(changed))
    assert not problems, "\n".join(problems)


def test_a_viewer_who_is_admin_of_b_is_treated_in_a_exactly_as_a_plain_viewer_of_a(iso):
    """Differential: on every page route of A's objects, with every method, the admin of B who only views A gets
    the status a plain viewer of A gets (B's role never carries over into A)."""
    _, mallory = _mallory(iso)
    with all_teams():
        vera = Membership.objects.get(team=iso.a, role=Role.VIEWER, user__username="vera-a").user
    viewer = PageClient()
    viewer.force_login(vera)
    viewer.post("/switch-team/", {"team": iso.a.pk})
    before = _snapshot(iso.a.pk)
    problems = []
    for route, (kind, build) in OBJECT_ROUTES.items():
        if kind != P:
            continue
        for url_a, _ in build(iso):
            if "beta-team" in url_a:
                continue
            for method in METHODS:
                rm = _page_request(mallory, method, url_a, False)
                rv = _page_request(viewer, method, url_a, False)
                if rm.status_code != rv.status_code:
                    problems.append(
                        f"{method} {url_a}: admin-of-B {rm.status_code}, plain viewer of A {rv.status_code}"
                    )
    changed = _diff(before, _snapshot(iso.a.pk))
    if changed:
        problems.append("A's rows changed: " + "; ".join(changed))
    assert not problems, "\n".join(problems)
