# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The API takes what its schema says and refuses the rest with a 400: JSON types as declared (no number taken for
a string, no 1 for true), query parameters as declared (an empty value is a value; limit and offset in range), an
If-Match that is a list of entity tags. (The schemathesis test checks the same against generated requests.)"""

from __future__ import annotations

import json

import pytest
from rest_framework.exceptions import ValidationError

from memory.models import AgentSession, Feedback, MemoryEntry
from reviews.models import DreamRun
from tests.api_support import Api, fast_passwords, keys, session_doc  # noqa: F401 - fixtures
from tests.factories import make_entry

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

ENTRIES = "/api/v1/stores/eng/entries/"
ENTRY = ENTRIES + "deploy-command/"


@pytest.fixture
def api(world, keys):
    world.store_a.agents_may_write = True
    world.store_a.save()
    make_entry(world.store_a)
    return Api(keys.full)


def _refused(r, field: str) -> None:
    assert r.status_code == 400, r.content[:300]
    assert field in r.json()["errors"], r.json()


@pytest.mark.parametrize(
    "path, body, field",
    [
        (ENTRIES, {"key": 5, "content": "x"}, "key"),
        (ENTRIES, {"key": "k", "content": 5}, "content"),
        (ENTRIES, {"key": "k", "content": "x", "tags": [1]}, "tags"),
        (ENTRIES, {"key": "k", "content": "x", "session_id": 0}, "session_id"),
        (ENTRIES, {"key": "k", "content": "x", "scope": {"agent": 7}}, "scope"),
        (ENTRY + "feedback/", {"helpful": 1}, "helpful"),
        (ENTRY + "feedback/", {"helpful": "yes"}, "helpful"),
        (ENTRY + "feedback/", {"score": "5"}, "score"),
        (ENTRY + "feedback/", {"score": 4.0}, "score"),
        (ENTRY + "feedback/", {"score": True}, "score"),
        (ENTRY + "feedback/", {"helpful": True, "comment": 3}, "comment"),
        ("/api/v1/stores/eng/dreams/", {"dry_run": 0}, "dry_run"),
        ("/api/v1/stores/eng/dreams/", {"all_sessions": "true"}, "all_sessions"),
        ("/api/v1/stores/eng/dreams/", {"analyzer": "no-such"}, "analyzer"),
    ],
)
def test_json_values_of_the_wrong_type_are_refused(api, path, body, field):
    _refused(api.post(path, body), field)
    assert not MemoryEntry.objects.filter(key="k").exists() and not Feedback.objects.exists()


def test_the_right_json_types_are_taken(api):
    assert api.post(ENTRY + "feedback/", {"score": 4}).status_code == 201
    assert api.post(ENTRY + "feedback/", {"helpful": False, "comment": ""}).status_code == 201
    r = api.post(ENTRIES, {"key": "k", "content": "x", "tags": ["a"], "scope": {"agent": None, "task": ""}})
    assert r.status_code == 201, r.json()


@pytest.mark.parametrize(
    "key, stored",
    [("  spaced  ", "spaced"), ("a.b-c_d", "a.b-c_d"), ("ümlaut key", "ümlaut key")],
)
def test_keys_are_stripped(api, key, stored):
    assert api.post(ENTRIES, {"key": key, "content": "x"}).status_code == 201
    assert MemoryEntry.objects.filter(key=stored).exists()


@pytest.mark.parametrize("key", ["", "   ", "a/b", "a\tb", "a\nb", "tail\t", "\rhead"])
def test_keys_with_slashes_tabs_or_line_breaks_anywhere_are_refused(api, key):
    _refused(api.post(ENTRIES, {"key": key, "content": "x"}), "key")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/proposals/?store=",
        "/api/v1/proposals/?target_kind=",
        "/api/v1/dream-runs/?store=",
        "/api/v1/context/?store=",
        ENTRIES + "?updated_since=",
        ENTRIES + "?agent=",
        ENTRIES + "?q=%20%20",
    ],
)
def test_an_empty_filter_is_a_value_and_refused_where_the_schema_says_so(api, path):
    name = path.split("?")[1].split("=")[0]
    _refused(api.get(path), name)


def test_empty_values_are_taken_where_the_schema_allows_them(api):
    assert api.get("/api/v1/context/?agent=&task=&query=").status_code == 200


@pytest.mark.parametrize(
    "query, name",
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=abc", "limit"),
        ("limit=", "limit"),
        ("offset=-1", "offset"),
        ("offset=1.5", "offset"),
        ("offset=" + str(2**63), "offset"),
        ("offset=null", "offset"),
    ],
)
def test_limit_and_offset_out_of_range_are_refused(api, query, name):
    for path in ("/api/v1/stores/", ENTRIES, "/api/v1/skills/", "/api/v1/proposals/"):
        _refused(api.get(f"{path}?{query}"), name)


def test_limit_and_offset_at_their_bounds(api):
    for query in ("limit=1", "limit=500", "offset=0", f"offset={2**63 - 1}"):
        r = api.get(f"{ENTRIES}?{query}")
        assert r.status_code == 200, (query, r.json())
    assert len(api.get(f"{ENTRIES}?limit=1").json()["results"]) == 1


@pytest.mark.parametrize("header", ["*", "abc", "1.1", '"unterminated', 'W/"1.1" junk', '"a" "b"', ","])
def test_an_if_match_that_is_not_a_list_of_entity_tags_is_428(api, header):
    r = api.patch(ENTRY, {"tags": ["x"]}, headers={"If-Match": header})
    assert r.status_code == 428 and r.json()["code"] == "precondition_required", (header, r.json())
    assert MemoryEntry.objects.get(key="deploy-command").version == 1


def test_unknown_event_types_are_kept_as_the_schema_says(api):
    doc = {"external_id": "odd", "agent": "a", "events": [{"type": "screenshot", "ts": None, "blob": "x"}]}
    r = api.request("POST", "/api/v1/sessions/", json.dumps(doc).encode())
    assert r.status_code == 201, r.json()


def test_the_schema_says_what_is_required(api):
    schema = api.get("/api/schema/?format=json").json()
    ops = schema["paths"]
    for method in ("put", "patch", "delete"):
        (if_match,) = [
            p for p in ops["/api/v1/stores/{slug}/entries/{key}/"][method]["parameters"] if p["name"] == "If-Match"
        ]
        assert if_match["required"] is True and if_match["schema"]["pattern"]
    assert ops["/api/v1/sessions/"]["post"]["requestBody"]["required"] is True
    feedback = ops["/api/v1/stores/{slug}/entries/{key}/feedback/"]["post"]["requestBody"]
    assert feedback["required"] is True and len(feedback["content"]["application/json"]["schema"]["oneOf"]) == 2
    (limit,) = [p for p in ops["/api/v1/stores/"]["get"]["parameters"] if p["name"] == "limit"]
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 500)


# Every JSON body the schema describes, one field at a time given a value of another JSON type than its own: a
# number for a string (or a list's string item, or an object's string field), 1 for a boolean, "5" for a whole
# number. Taken from the served schema, so an endpoint added later is checked without a line here.
_WRONG = {"string": 7, "boolean": 1, "integer": "5"}
_VALID_BODY = {
    ("post", "/api/v1/sessions/"): lambda: session_doc("typed"),
    ("post", "/api/v1/stores/{slug}/entries/"): lambda: {"key": "k", "content": "x"},
    ("put", "/api/v1/stores/{slug}/entries/{key}/"): lambda: {"content": "x"},
    ("post", "/api/v1/stores/{slug}/entries/{key}/feedback/"): lambda: {"helpful": True},
    ("put", "/api/v1/stores/{slug}/agents/"): lambda: {"agents": []},
}


def _resolve(schema: dict, components: dict) -> dict:
    while True:
        if "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        elif "allOf" in schema and len(schema["allOf"]) == 1:
            schema = schema["allOf"][0]
        elif "oneOf" in schema and "properties" not in schema:
            schema = next(s for s in schema["oneOf"] if s.get("type") == "object")  # a session, not a batch
        else:
            return schema


def _type_of(schema: dict) -> str | None:
    if "enum" in schema:
        return "string" if all(isinstance(v, str) for v in schema["enum"]) else None
    return schema.get("type")


def _wrong_values(schema: dict, components: dict):
    """(top-level field, a wrong value for it) for every scalar the body schema types, nested ones included."""
    for name, prop in _resolve(schema, components).get("properties", {}).items():
        prop = _resolve(prop, components)
        kind = _type_of(prop)
        if kind in _WRONG:
            yield name, _WRONG[kind]
        elif kind == "array" and _type_of(_resolve(prop.get("items", {}), components)) in _WRONG:
            yield name, [_WRONG[_type_of(_resolve(prop["items"], components))]]
        elif kind == "object":
            for sub, wrong in _wrong_values(prop, components):
                yield name, {sub: wrong}


def test_every_json_body_refuses_every_field_of_another_type(api, world):
    schema = api.get("/api/schema/?format=json").json()
    etag = api.get(ENTRY)["ETag"]
    checked, wrong = 0, []
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            body_schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body_schema is None:
                continue
            url = path.replace("{slug}", "eng").replace("{key}", "deploy-command")
            for name, value in _wrong_values(body_schema, schema["components"]["schemas"]):
                body = _VALID_BODY.get((method, path), dict)() | {name: value}
                r = api.request(method.upper(), url, json.dumps(body).encode(), headers={"If-Match": etag})
                errors = r.json().get("errors", {}) if r.status_code == 400 else {}
                named = any(k == name or k.startswith((f"{name}.", f"{name}[")) for k in errors)
                checked += 1
                if not named:
                    wrong.append((method, path, body, r.status_code, r.content[:200]))
    assert checked >= 20 and not wrong, wrong
    world.store_a.refresh_from_db()
    assert world.store_a.agents in ([], None) and not AgentSession.objects.exists() and not Feedback.objects.exists()
    assert MemoryEntry.objects.get(key="deploy-command").version == 1 and not DreamRun.objects.exists()


def test_store_agents_are_strings(api, world):
    r = api.put("/api/v1/stores/eng/agents/", {"agents": ["deploy-bot", 1]})
    _refused(r, "agents")
    assert "1" in r.json()["errors"]["agents"], r.json()  # the item at fault
    assert api.get("/api/v1/stores/eng/agents/").json()["agents"] == []
    assert api.put("/api/v1/stores/eng/agents/", {"agents": ["deploy-bot"]}).json()["agents"] == ["deploy-bot"]


def test_a_choice_is_a_string_not_a_number_that_prints_as_one():
    from dreamweb.api_base import JSONChoice

    field = JSONChoice(choices=["1", "rules"])
    assert field.run_validation("1") == "1"
    with pytest.raises(ValidationError):
        field.run_validation(1)  # DRF's ChoiceField takes it: str(1) is a choice
