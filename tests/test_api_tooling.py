# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""Skills by progressive disclosure, proposals and dream runs for tooling, and triggering a dream over the API."""

from __future__ import annotations

import pytest

from reviews.models import DreamRun, Proposal, ProposalEvidence
from tests.api_support import Api, fast_passwords, keys  # noqa: F401 - fixtures
from tests.factories import SessionFactory, make_skill

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def test_skills_index_then_body(world, keys):
    make_skill(world.team_a, name="release", description="How to release.", body="# Release\n\nTag {{ first }}.\n")
    make_skill(world.team_a, name="draft", description="Unpublished.", status="draft")
    api = Api(keys.full)
    index = api.get("/api/v1/skills/").json()["results"]
    assert [(s["name"], s["version"]) for s in index] == [("release", 1)]
    assert "body" not in index[0]
    r = api.get("/api/v1/skills/release/")
    assert r.status_code == 200
    assert r.json()["body"] == "# Release\n\nTag {{ first }}.\n" and r.json()["references"] == {}
    assert api.get("/api/v1/skills/draft/").status_code == 404


def test_proposals_and_runs_with_filters(world, keys):
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status="succeeded", proposals_count=2)
    session = SessionFactory(team=world.team_a, external_id="ev-1")
    low = Proposal.objects.create(
        team=world.team_a, store=world.store_a, run=run, operation="add", content="Tag first.", signature="a"
    )
    Proposal.objects.create(
        team=world.team_a, store=world.store_a, run=run, operation="remove", risk="high", signature="b", targets=["x"]
    )
    ProposalEvidence.objects.create(
        team=world.team_a, proposal=low, session=session, event_index=3, excerpt="git tag v1", trust="tool"
    )
    api = Api(keys.full)
    assert len(api.get("/api/v1/proposals/").json()["results"]) == 2
    assert [p["operation"] for p in api.get("/api/v1/proposals/", query={"risk": "high"}).json()["results"]] == [
        "remove"
    ]
    assert len(api.get("/api/v1/proposals/", query={"store": "eng", "run": run.pk}).json()["results"]) == 2
    assert api.get("/api/v1/proposals/", query={"store": "nope"}).status_code == 404
    assert api.get("/api/v1/proposals/", query={"risk": "extreme"}).status_code == 400
    detail = api.get(f"/api/v1/proposals/{low.pk}/").json()
    assert detail["evidence"] == [{"session": "ev-1", "event_index": 3, "excerpt": "git tag v1", "trust": "tool"}]
    runs = api.get("/api/v1/dream-runs/", query={"status": "succeeded"}).json()["results"]
    assert [r["id"] for r in runs] == [run.pk]
    assert api.get(f"/api/v1/dream-runs/{run.pk}/").json()["proposals_count"] == 2
    assert api.get("/api/v1/dream-runs/", query={"status": "queued"}).json()["results"] == []


def test_trigger_a_dream(world, keys):
    api = Api(keys.full)
    r = api.post("/api/v1/stores/eng/dreams/", {"all_sessions": True})
    assert r.status_code == 202, r.content
    run = DreamRun.objects.get(pk=r.json()["id"])
    assert (run.trigger, run.store, run.dry_run, run.all_sessions) == ("api", world.store_a, False, True)
    # The first run has not finished (its work starts when the transaction commits): a second one is refused.
    r = api.post("/api/v1/stores/eng/dreams/", {})
    assert r.status_code == 409 and r.json()["detail"]
    r = api.post("/api/v1/stores/eng/dreams/", {"analyzer": "no-such-analyzer"})
    assert r.status_code == 400 and "analyzer" in r.json()["errors"]


def test_schema_and_docs_are_served_without_a_cdn(client):
    schema = client.get("/api/schema/", headers={"Accept": "application/json"})
    assert schema.status_code == 200
    doc = schema.json() if schema["Content-Type"].startswith("application/json") else None
    if doc is not None:
        assert "/api/v1/context/" in doc["paths"] and "ApiKey" in doc["components"]["securitySchemes"]
    else:
        assert b"/api/v1/context/" in schema.content
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html and "drf_spectacular_sidecar" in html
    assert "cdn." not in html and "unpkg.com" not in html and "jsdelivr" not in html


def test_the_schema_tells_clients_how_to_authenticate(client):
    """Generated clients read the security scheme: the header, its name, and the `Api-Key <key>` form of the contract
    (contracts: "Agents authenticate with `Authorization: Api-Key <key>`")."""
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200 and schema["Content-Type"].startswith("application/vnd.oai.openapi+json")
    doc = schema.json()
    scheme = doc["components"]["securitySchemes"]["ApiKey"]
    assert {k: scheme[k] for k in ("type", "in", "name")} == {"type": "apiKey", "in": "header", "name": "Authorization"}
    assert scheme["description"].startswith("`Api-Key <key>`")
    assert {"ApiKey": []} in doc["paths"]["/api/v1/context/"]["get"]["security"]
