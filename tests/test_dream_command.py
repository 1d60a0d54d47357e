"""manage.py dream as contracts/README.md describes it: one JSON document of dream-output.schema.json on stdout,
progress on stderr, --dry-run persists nothing, text format readable, errors for unknown teams and stores."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from django.core.management import CommandError, call_command

from reviews.models import AutonomyPolicy, DreamRun, Proposal, SessionAnalysis

from .dream_sessions import ingest, mixed_corpus
from .factories import StoreFactory, TeamFactory, make_entry
from .scoping import no_scope

pytestmark = pytest.mark.all_teams

SCHEMA = json.loads((Path(__file__).parent / "data" / "dream-output.schema.json").read_text())


@pytest.fixture
def world(db):
    team_a, team_b = TeamFactory(slug="acme"), TeamFactory(slug="globex")
    store = StoreFactory(team=team_a, slug="acme-eng")
    StoreFactory(team=team_b, slug="globex-ops")
    ingest(team_a, mixed_corpus("a"))
    ingest(team_b, mixed_corpus("b"))
    make_entry(store, key="deploy-command", content="Deploy with `make deploy` from the repository root.")
    return SimpleNamespace(team=team_a, store=store)


def dream(*args):
    out, err = io.StringIO(), io.StringIO()
    with no_scope():  # the command opens its own scope
        call_command("dream", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_dry_run_json_is_one_schema_document_and_persists_nothing(world):
    out, err = dream("--team", "acme", "--store", "acme-eng", "--dry-run", "--all-sessions", "--format", "json")
    doc = json.loads(out)  # exactly one JSON document: anything else on stdout would fail here
    jsonschema.validate(doc, SCHEMA)
    assert doc["store"] == "acme-eng"
    assert doc["run"]["id"] is None and doc["run"]["analyzer"] == "rules"
    assert doc["run"]["sessions_selected"] == doc["run"]["sessions_analysed"] == 20
    assert doc["proposals"] and {p["status"] for p in doc["proposals"]} == {"preview"}
    update = next(p for p in doc["proposals"] if p["operation"] == "update")
    assert update["targets"] == ["deploy-command"]
    assert update["supporting_sessions"] and all(s.startswith("a-cmd-") for s in update["supporting_sessions"])
    for p in doc["proposals"]:  # the other team's sessions never show up
        assert not any(s.startswith("b-") for s in p["supporting_sessions"])
    assert "sessions" in err  # progress on standard error
    assert not DreamRun.objects.exists() and not SessionAnalysis.objects.exists()
    assert not Proposal.objects.exists() and not AutonomyPolicy.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_real_run_json_reports_stored_proposals(world):
    # A real run is enqueued when its row commits and the command waits for it: no test transaction around it.
    out, _ = dream("--team", "acme", "--store", "acme-eng", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    run = DreamRun.objects.get()
    assert doc["run"]["id"] == run.pk and doc["run"]["status"] == "succeeded"
    assert sorted(p["id"] for p in doc["proposals"]) == sorted(Proposal.objects.values_list("pk", flat=True))
    assert {p["status"] for p in doc["proposals"]} <= {"pending", "quarantined"}


@pytest.mark.django_db(transaction=True)
def test_text_format_is_a_readable_summary(world):
    out, _ = dream("--team", "acme", "--store", "acme-eng", "--max-sessions", "8")
    assert out.startswith("dream #")
    assert "sessions: 8 selected, 8 analysed, 0 failed" in out
    assert "proposals:" in out and "isolated findings:" in out


def test_openai_without_configuration_falls_back_to_rules(world, settings):
    settings.DREAMWEB_LLM_MODEL = ""
    out, err = dream("--team", "acme", "--store", "acme-eng", "--dry-run", "--analyzer", "openai", "--format", "json")
    assert json.loads(out)["run"]["analyzer"] == "rules"
    assert "not configured" in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--team", "nope", "--store", "acme-eng"], "no team 'nope'"),
        (["--team", "acme", "--store", "globex-ops"], "no store 'globex-ops' in team acme"),
        (["--team", "acme", "--store", "acme-eng", "--analyzer", "magic"], "unknown analyzer"),
    ],
)
def test_errors(world, args, message):
    with pytest.raises(CommandError, match=message):
        dream(*args)
