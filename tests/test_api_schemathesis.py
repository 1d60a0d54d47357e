# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""schemathesis over the whole served schema, in process (WSGI), with a real key and a small data set and every check
on (as `--checks all`: no 5xx, every response matches the schema, schema-valid requests are accepted and invalid
ones refused, required headers, methods, auth), configured by the project's schemathesis.toml. Bounded examples keep
it to a few minutes; bench/api_schemathesis.py runs every phase against a real server."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from schemathesis.checks import CHECKS as REGISTRY
from schemathesis.checks import load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.generation.modes import GenerationMode

from dreamweb.api_throttling import AgentKeyRateThrottle
from reviews.models import DreamRun, Proposal, ProposalEvidence
from tests.api_support import fast_passwords, make_key, session_doc  # noqa: F401 - fixtures
from tests.factories import SessionFactory, make_entry, make_skill

pytestmark = pytest.mark.all_teams

ROOT = Path(__file__).resolve().parent.parent
load_all_checks()
CHECKS = list(REGISTRY.get_all())


@pytest.fixture
def api_data(world, monkeypatch):
    """A small, real data set in team A, and a key with every scope. Half the generated requests are pointed at
    real objects (see below), so the success paths are exercised, not only 404s."""
    monkeypatch.setattr(AgentKeyRateThrottle, "THROTTLE_RATES", {"agent_key": "100000/min"})
    store = world.store_a
    store.agents_may_write = True
    store.save()
    make_entry(store, key="deploy-command", content="Deploy with `make release`.", scope_agent="deploy-bot")
    make_entry(store, key="tests", content="Run `make test` before pushing; {{ not a template }}.")
    make_skill(world.team_a, name="release", description="How to release.", body="# Release\n")
    session = SessionFactory(team=world.team_a, external_id="seed-1")
    run = DreamRun.objects.create(team=world.team_a, store=store, status="succeeded")
    proposal = Proposal.objects.create(
        team=world.team_a, store=store, run=run, operation="add", content="Tag first.", signature="s1"
    )
    ProposalEvidence.objects.create(team=world.team_a, proposal=proposal, session=session, event_index=0, excerpt="x")
    raw = make_key(world.team_a, "schemathesis")
    # Requests run in process, inside the test's transaction: keep Django from closing the connection at the end
    # of each request (its test client does the same).
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield {
        "headers": {"Authorization": f"Api-Key {raw}"},
        "real": {
            "slug": ["eng"],
            "key": ["deploy-command", "tests"],
            "name": ["release"],
            "id": [proposal.pk, run.pk],
        },
    }
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def _document() -> dict:
    """The schema exactly as /api/schema/ serves it (generated without a request or a database)."""
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated, renderer_context={}))


schema = schemathesis.openapi.from_dict(
    _document(), config=SchemathesisConfig.from_path(str(ROOT / "schemathesis.toml"))
)
schema.app = get_wsgi_application()
_turn = itertools.count()


@pytest.mark.django_db
@schema.parametrize()
@hypothesis.settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)
def test_api_conforms_to_its_schema(case, api_data):
    if (case.query and "format" in case.query) or case.media_type not in (None, "application/json"):
        # A transcript file for POST /sessions/ (`?format=`, or a file's content type): its content is only
        # described as "a file in one of these formats", so any bytes fit the schema; and with `?format=` a JSON body
        # is a file of that format, not the canonical session the JSON schema describes (OpenAPI cannot tie a body's
        # shape to a query parameter). File bodies are tested in tests/test_api_session_files.py.
        return
    # Every other valid case aims at real objects, so 200s and writes are checked too, not only 404s. (Never an
    # invalid case: its invalid path parameter would be replaced by a valid one.)
    positive = case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE
    if positive and case.path_parameters and next(_turn) % 2 == 0:
        for name in case.path_parameters:
            choices = api_data["real"].get(name)
            if choices:
                case.path_parameters[name] = choices[next(_turn) % len(choices)]
    case.call_and_validate(headers=api_data["headers"], checks=CHECKS)
