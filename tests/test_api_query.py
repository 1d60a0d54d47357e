# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The query string read without the serializer (dreamweb.api_query) says what the serializer says: when the fast
path answers, the serializer validates the same input to the same values; when it does not, the serializer answers
(so a 400's body is the serializer's, word for word). And the context request's usual query takes the fast path."""

from __future__ import annotations

import random

import pytest
from rest_framework import serializers

from dreamweb.api_query import fast_parameters, fast_plan
from memory.api.serializers import ContextQuerySerializer
from reviews.api.views import ProposalFilterSerializer
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures

TEXT = ["", " ", "a", " a ", "agent-07", "x" * 100, "x" * 101, " " + "x" * 100 + " ", "é" * 100, "é" * 101]
TEXT += ["\ud800", "a\x00b", "deploy the release", "\t\n", "两个字"]
SLUG = ["main", "", " ", " main ", "ma in", "mä", "a-b_C9", "main\n", "not a slug!", "-", "_"]
NUMBER = ["0", "1", "20", "007", "1000", "1001", "999999", "1000000", "1000001", "-1", "+5", " 5", "5 ", "5.0"]
NUMBER += ["5.5", "1_000", "", " ", "abc", "٥", "9" * 20, "9" * 1001, "1e3", "0x10", "00000000000000000001"]
BOOLEAN = ["true", "True", "TRUE", "1", "0", "yes", "No", "on", "OFF", "t", "F", "y", "n", "", "null", "maybe", " 1"]
VALUES = {
    "store": SLUG,
    "agent": TEXT,
    "task": TEXT,
    "query": TEXT + ["w" * 2000, "w" * 2001],
    "max_items": NUMBER,
    "max_tokens": NUMBER,
    "session": TEXT + ["s" * 200, "s" * 201],
    "skills": BOOLEAN,
}


def by_serializer(params: dict):
    s = ContextQuerySerializer(data=params)
    return dict(s.validated_data) if s.is_valid() else None


def test_each_value_alone_gets_the_serializers_answer():
    for name, values in VALUES.items():
        for value in values:
            fast = fast_parameters({name: value}, ContextQuerySerializer)
            if fast is not None:
                assert fast == by_serializer({name: value}), (name, value)


def test_combinations_get_the_serializers_answer_and_plain_ones_take_the_fast_path():
    rng = random.Random(15)
    fast_answers = 0
    for _ in range(3000):
        params = {name: rng.choice(values) for name, values in VALUES.items() if rng.random() < 0.5}
        params["unknown"] = "ignored"
        fast = fast_parameters(params, ContextQuerySerializer)
        want = by_serializer(params)
        if fast is not None:
            fast_answers += 1
            assert fast == want, params
    assert fast_answers > 100
    plain = {"store": "main", "agent": "a", "task": "t", "query": "deploy", "max_items": "20", "max_tokens": "2000"}
    assert fast_parameters(plain, ContextQuerySerializer) == by_serializer(plain)
    assert fast_parameters({}, ContextQuerySerializer) == by_serializer({}) == {"skills": True}
    assert fast_parameters({"skills": "false"}, ContextQuerySerializer) == {"skills": False}


def test_only_serializers_made_of_known_fields_get_a_plan():
    assert fast_plan(ContextQuerySerializer) is not None
    assert fast_plan(ProposalFilterSerializer) is None  # a choice field: the serializer reads it

    class Checked(serializers.Serializer):
        name = serializers.CharField(required=False)

        def validate(self, attrs):
            raise serializers.ValidationError("never")

    class Required(serializers.Serializer):
        name = serializers.CharField()

    class Sourced(serializers.Serializer):
        name = serializers.CharField(required=False, source="other")

    assert fast_plan(Checked) is None and fast_plan(Sourced) is None
    assert fast_parameters({}, Required) is None  # missing and required: the serializer says so
    assert fast_parameters({"name": " x "}, Required) == {"name": "x"}


@pytest.mark.django_db
@pytest.mark.all_teams
def test_context_reads_its_usual_query_without_the_serializer(world, keys, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("the serializer ran")

    query = {"store": "eng", "agent": "bot", "task": "release", "query": "deploy", "max_items": 20, "max_tokens": 900}
    monkeypatch.setattr(ContextQuerySerializer, "is_valid", refuse)
    assert Api(keys.full).get("/api/v1/context/", query=query).status_code == 200
    monkeypatch.undo()
    # What the fast path does not take still gets the serializer's answer, 200 or 400 with its messages.
    assert Api(keys.full).get("/api/v1/context/", query={**query, "max_items": " 5"}).status_code == 200
    r = Api(keys.full).get("/api/v1/context/", query={**query, "max_items": "5.5", "agent": "x" * 101})
    assert r.status_code == 400
    assert r.json() == {
        "detail": "Invalid input: agent: Ensure this field has no more than 100 characters.",
        "code": "invalid",
        "errors": {
            "agent": ["Ensure this field has no more than 100 characters."],
            "max_items": ["A valid integer is required."],
        },
    }
