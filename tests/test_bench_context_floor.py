# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""bench/gunicorn_floor.py, the hooks behind bench/context_floor.py: a context request marked ``no_audit`` is ranked
and answered but leaves no audit row; one marked ``fixed_body`` is answered with the worker's first such result
(same shape, no ranking); an unmarked request is served and recorded as always."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import memory.api.context as view
import memory.context as context
from memory.models import ContextServe
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures
from tests.bench_support import load_bench
from tests.factories import make_entry

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@pytest.fixture
def floor(monkeypatch):
    hooks = load_bench("gunicorn_floor.py")
    # Registered first, so that the test's end gives the application its own functions back.
    monkeypatch.setattr(context, "record_serve", context.record_serve)
    monkeypatch.setattr(view, "build_context", view.build_context)
    monkeypatch.setattr(view.ContextView, "key_statement_extra", view.ContextView.key_statement_extra)
    hooks.post_worker_init(worker=None)

    def serve(raw, variant: str, **query):
        hooks.pre_request(None, SimpleNamespace(headers=[("X-BENCH-FLOOR", variant)] if variant else []))
        r = Api(raw).get("/api/v1/context/", query={"store": "eng", **query})
        assert r.status_code == 200, r.json()
        return r.json()

    return serve


def test_each_variant_takes_away_what_it_says(world, keys, floor):
    make_entry(world.store_a, key="deploy", content="Deploy with make release.")
    make_entry(world.store_a, key="tests", content="Run the tests before a merge.")

    served = floor(keys.full, "", query="deploy")
    assert [i["key"] for i in served["items"]][0] == "deploy" and served["serve_id"] is not None
    assert ContextServe.objects.count() == 1

    unrecorded = floor(keys.full, "no_audit", query="deploy")
    assert unrecorded["items"] == served["items"] and unrecorded["serve_id"] is None
    assert ContextServe.objects.count() == 1

    first = floor(keys.full, "fixed_body", query="tests")
    again = floor(keys.full, "fixed_body", query="deploy")  # another question, the same answer
    assert [i["key"] for i in first["items"]][0] == "tests"
    assert again == first and again["serve_id"] is None
    assert ContextServe.objects.count() == 1

    assert floor(keys.full, "", query="deploy")["items"] == served["items"]
    assert ContextServe.objects.count() == 2
