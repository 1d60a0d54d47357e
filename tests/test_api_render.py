"""The API's JSON renderer (dreamweb.api_render) writes what DRF's JSONRenderer writes: the same bytes for every kind
of value the API returns, and DRF's own rendering where orjson would differ or refuse."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict

from dreamweb.api_render import APIJSONRenderer

UTC = dt.UTC


def _both(data, media_type=None):
    return APIJSONRenderer().render(data, media_type, {}), JSONRenderer().render(data, media_type, {})


def test_the_same_bytes_for_the_values_the_api_returns():
    documents = [
        {"ok": True, "team": "eng", "scopes": ["memory:read"], "n": None, "count": 3, "score": 1.234567},
        {"items": [{"content": 'naïve “quotes” — 日本語 🙂 \\ " \n\t\x01', "score": 0.5}], "text": "a\u2028b\u2029c"},
        {"at": dt.datetime(2026, 12, 1, 1, 2, 3, 456789, tzinfo=UTC), "day": dt.date(2026, 12, 1)},
        {"naive": dt.datetime(2026, 12, 1, 1, 2, 3), "time": dt.time(4, 5, 6, 7000), "span": dt.timedelta(seconds=90)},
        {"d": Decimal("1.50"), "u": uuid.UUID(int=7), "lazy": gettext_lazy("Not found.")},
        {"detail": ErrorDetail("No store 'x' in this key's team.", code="not_found"), "code": "not_found"},
        ReturnDict({"b": 1, "a": [1, 2, (3, 4)]}, serializer=None),
        [1, -2, 2**63 - 1, 0.1, 1e16, -0.0, 3.0000001, "", {}, []],
        {"set": {1}},
    ]
    for data in documents:
        fast, drf = _both(data)
        assert fast == drf, data


def test_what_orjson_refuses_or_indents_is_drfs():
    for data in ({1: "int key"}, {"big": 2**70}):
        fast, drf = _both(data)
        assert fast == drf
    fast, drf = _both({"a": [1, 2]}, "application/json; indent=4")
    assert fast == drf and b"\n" in fast
    assert APIJSONRenderer().render(None) == b""


def test_small_floats_are_the_same_numbers():
    data = {"scores": [1e-06, 1e-05, 2.5e-07, 0.000123]}
    fast, drf = _both(data)
    assert json.loads(fast) == json.loads(drf) == data


def test_a_plain_document_does_not_go_through_the_standard_encoder(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("rendered by the standard encoder")

    monkeypatch.setattr("rest_framework.renderers.json.dumps", refuse)
    data = {"items": [{"key": "k", "score": 0.5, "scope": {"agent": None}}], "at": dt.datetime(2026, 1, 1, tzinfo=UTC)}
    assert json.loads(APIJSONRenderer().render(data)) == {**data, "at": "2026-01-01T00:00:00Z"}
