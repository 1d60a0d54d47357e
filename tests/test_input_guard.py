# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""One input guard for the API and the pages: JSON nested too deeply, non-finite numbers (with their path), ids out
of range, newline paths, oversized bodies, oversized entries and NUL characters in a page's query string or form are
each answered with a clear 4xx (JSON under /api/), never a 500 or an HTML page where the API promises JSON."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.test import Client

from dreamweb import input_guard
from memory.models import AgentSession, MemoryEntry
from reviews.models import DreamRun
from tests.api_support import Api, fast_passwords, keys, make_key, session_doc  # noqa: F401 - fixtures
from tests.factories import make_entry, make_proposal
from tests.page_support import PageClient
from tests.test_pages_permissions import ACTIONS, PAGES, objs  # noqa: F401 - objs is a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HUGE = str(2**64)  # beyond any 64-bit id
ENTRIES = "/api/v1/stores/eng/entries/"
ENTRY = ENTRIES + "deploy-command/"


def nested(depth: int, leaf="x") -> object:
    """``depth`` containers, alternating objects and arrays, around a leaf."""
    value = leaf
    for level in range(depth):
        value = {"n": value} if level % 2 else [value]
    return value


@pytest.fixture
def api(world, keys):
    world.store_a.agents_may_write = True
    world.store_a.save()
    make_entry(world.store_a)
    api = Api(keys.full)
    api.client = Client(raise_request_exception=False)  # a 500 must show as a 500, as a server would answer
    return api


def _json_error(r, status: int) -> dict:
    assert r.status_code == status, r.content[:300]
    assert r["Content-Type"] == "application/json", r.content[:300]
    body = r.json()
    assert body["detail"] and body["code"], body
    return body


def _if_match(world) -> dict:
    entry = MemoryEntry.objects.get(store=world.store_a, key="deploy-command")
    return {"If-Match": f'"{entry.pk}.{entry.version}"'}


# --- the guard itself ------------------------------------------------------------------------------------------------


def test_depth_limit_boundary(settings):
    settings.DREAMWEB_MAX_JSON_DEPTH = 10
    assert input_guard.loads(json.dumps(nested(10))) == nested(10)
    with pytest.raises(input_guard.Refused) as refused:
        input_guard.loads(json.dumps(nested(11)))
    assert refused.value.code == "too_deep" and "10" in refused.value.message
    assert refused.value.path == "[0].n[0].n[0].n[0].n[0].n"  # the container one level too deep
    # A scalar is depth 0, an empty container depth 1.
    assert input_guard.loads("1") == 1 and input_guard.loads("[]") == []


def test_nesting_beyond_what_python_can_parse_is_refused_not_crashed():
    with pytest.raises(input_guard.Refused) as refused:
        input_guard.loads("[" * 100_000 + "]" * 100_000)
    assert refused.value.code == "too_deep"


# Whole numbers beyond a double's range are the same number as 1e999: 179769...(309 digits) is the first one past it.
BEYOND_INTEGERS = ["1" + "0" * 400, "-1" + "0" * 400, str(2**1024), "9" * 5000]


@pytest.mark.parametrize(
    "literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 400 + ".5", *BEYOND_INTEGERS]
)
def test_non_finite_numbers_are_refused_with_their_path(literal):
    text = '{"a": [1, 2.5, {"b": @}]}'.replace("@", literal)
    with pytest.raises(input_guard.Refused) as refused:
        input_guard.loads(text)
    assert (refused.value.code, refused.value.path) == ("not_finite", "a[2].b")
    assert "finite" in refused.value.message
    with pytest.raises(input_guard.Refused) as refused:
        input_guard.loads(literal)
    assert refused.value.path == "body"


@pytest.mark.parametrize(
    "literal",
    [
        "1e308",
        "-1e308",
        "1e-400",
        "123456789012345678901234567890",
        "0.5",
        "1" + "0" * 308,
        str(int(sys.float_info.max)),
    ],
)
def test_finite_numbers_pass(literal):
    assert input_guard.loads('{"x": @}'.replace("@", literal)) == {"x": json.loads(literal)}


@pytest.mark.parametrize(
    "text, path",
    [('{"a": "x\\u0000y"}', "a"), ('{"k\\u0000": 1}', "body (a key)"), ('["ok", "\\ud800"]', "[1]")],
)
def test_text_the_database_cannot_store_is_refused_with_its_path(text, path):
    with pytest.raises(input_guard.Refused) as refused:
        input_guard.loads(text)
    assert (refused.value.code, refused.value.path) == ("unstorable", path)


def test_the_checks_without_a_hint_find_the_same_problems():
    """validate_session and other callers check values that did not come from input_guard.parse."""
    assert input_guard.find_problem({"a": [float("nan")]}).path == "a[0]"
    assert input_guard.find_problem({"a": {"b": "\x00"}}).path == "a.b"
    assert input_guard.find_problem({"a": [1, 2.0, "ok", None, True]}) is None
    assert input_guard.find_problem({"a": {"b": 10**400}}).path == "a.b"  # the standard parser keeps every digit
    assert input_guard.find_problem([-(10**400)]).path == "[0]"


@pytest.mark.parametrize(
    "value, expected",
    [("1", 1), ("42", 42), (str(2**63 - 1), 2**63 - 1), (str(2**63), None), (HUGE, None), ("0", None)]
    + [("-1", None), ("", None), (None, None), ("1.0", None), ("١٢", None), (" 7", None), ("9" * 5000, None)],
)
def test_parse_id_range(value, expected):
    assert input_guard.parse_id(value) == expected


# --- deep JSON, NaN: the API answers a JSON 400 --------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", ENTRIES),
        ("PATCH", ENTRY),
        ("PUT", ENTRY),
        ("POST", "/api/v1/sessions/"),
        ("POST", ENTRY + "feedback/"),
        ("POST", "/api/v1/stores/eng/dreams/"),
    ],
)
@pytest.mark.parametrize("depth", [66, 2000, 100_000])
def test_deep_json_is_a_json_400(api, world, method, path, depth):
    body = ("[" * depth + "]" * depth).encode()
    r = api.request(method, path, body, headers=_if_match(world))
    error = _json_error(r, 400)
    assert error["code"] == "too_deep" and "nested" in error["detail"]
    assert MemoryEntry.objects.get(key="deploy-command").version == 1


def test_a_session_at_the_depth_limit_is_stored_and_one_level_more_is_refused(api, settings):
    settings.DREAMWEB_MAX_JSON_DEPTH = 12
    # The session object is level 1, metadata level 2: nested(10) inside fills the limit exactly.
    assert api.post("/api/v1/sessions/", session_doc("deep-ok", metadata={"x": nested(10)})).status_code == 201
    r = api.post("/api/v1/sessions/", session_doc("deep-no", metadata={"x": nested(11)}))
    error = _json_error(r, 400)
    assert error["code"] == "too_deep" and list(error["errors"]) == ["metadata.x" + "[0].n" * 5]
    # In a batch the limit is the same for each session (the batch's array does not count).
    r = api.post("/api/v1/sessions/", [session_doc("b-ok", metadata={"x": nested(10)})])
    assert r.status_code == 201
    r = api.post("/api/v1/sessions/", [session_doc("b-ok2"), session_doc("b-no", metadata={"x": nested(11)})])
    error = _json_error(r, 400)
    assert error["code"] == "too_deep" and list(error["errors"]) == ["1"]
    assert not AgentSession.objects.filter(external_id__in=["deep-no", "b-ok2", "b-no"]).exists()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", *BEYOND_INTEGERS[:2]])
def test_non_finite_numbers_in_a_session_are_a_400_with_their_path(api, literal):
    doc = json.dumps(session_doc("nan-1", metadata={"cost": "@"})).replace('"@"', literal)
    error = _json_error(api.request("POST", "/api/v1/sessions/", doc.encode()), 400)
    assert error["code"] == "invalid" and list(error["errors"]) == ["metadata.cost"]
    assert "finite" in error["errors"]["metadata.cost"][0]

    doc = session_doc("nan-2")
    doc["events"][1]["arguments"] = {"timeout": "@"}
    batch = json.dumps([session_doc("ok-1"), doc]).replace('"@"', literal)
    error = _json_error(api.request("POST", "/api/v1/sessions/", batch.encode()), 400)
    assert error["errors"] == {
        "1": {"events[1].arguments.timeout": [error["errors"]["1"]["events[1].arguments.timeout"][0]]}
    }
    assert not AgentSession.objects.exists()


@pytest.mark.parametrize(
    "method, path, body, field",
    [
        ("POST", ENTRIES, '{"key": "k", "content": "x", "tags": [NaN]}', "tags[0]"),
        ("PATCH", ENTRY, '{"tags": ["a"], "scope": {"agent": Infinity}}', "scope.agent"),
        ("POST", ENTRY + "feedback/", '{"score": -Infinity}', "score"),
        ("POST", ENTRY + "feedback/", '{"score": 1e400}', "score"),
        ("POST", ENTRY + "feedback/", '{"score": 1%s}' % ("0" * 400), "score"),
        ("POST", ENTRIES, '{"key": "k", "content": "x", "extra": -1%s}' % ("0" * 400), "extra"),
        ("PATCH", ENTRY, '{"tags": ["a"], "scope": {"agent": 1%s}}' % ("0" * 400), "scope.agent"),
    ],
)
def test_non_finite_numbers_anywhere_in_the_api_are_a_400_with_their_path(api, world, method, path, body, field):
    error = _json_error(api.request(method, path, body.encode(), headers=_if_match(world)), 400)
    assert list(error["errors"]) == [field] and "finite" in error["errors"][field][0]


# --- ids out of range ----------------------------------------------------------------------------------------------


def test_api_ids_out_of_range(api, world):
    _json_error(api.get(f"/api/v1/proposals/{HUGE}/"), 404)
    _json_error(api.get(f"/api/v1/dream-runs/{HUGE}/"), 404)
    error = _json_error(api.get("/api/v1/proposals/", query={"run": HUGE}), 400)
    assert list(error["errors"]) == ["run"]
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status="succeeded")
    assert api.get("/api/v1/proposals/", query={"run": run.pk}).status_code == 200


def _login(world) -> Client:
    client = PageClient(raise_request_exception=False)  # a 500 must show as a 500
    client.force_login(world.alice)
    return client


def test_pages_path_ids_out_of_range_are_404(world):
    client = _login(world)
    for path in ("/memory/entries/{}/", "/memory/stores/{}/", "/memory/sessions/{}/", "/reviews/proposals/{}/"):
        assert client.get(path.format(HUGE)).status_code == 404, path
        assert client.get(path.format("9" * 5000)).status_code == 404, path


def test_pages_id_filters_out_of_range_are_dropped_like_any_invalid_filter(world):
    """The pages' convention: a filter from the URL that does not validate is dropped, not an error page."""
    run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status="succeeded")
    client = _login(world)
    for value in (HUGE, "abc", "-3"):
        r = client.get("/reviews/runs/", {"store": value})
        assert r.status_code == 200 and f'href="/reviews/runs/{run.pk}/"' in r.text, value
        assert client.get("/reviews/", {"store": value}).status_code == 200


def test_bulk_decisions_with_ids_out_of_range_are_an_invalid_selection(world):
    proposal = make_proposal(world.store_a)
    client = _login(world)
    for bad in (HUGE, "0", "x"):
        r = client.post("/reviews/bulk/", {"ids": [str(proposal.pk), bad], "action": "reject"}, follow=True)
        assert r.status_code == 200 and "Invalid selection." in r.text, bad
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_skill_diff_with_version_numbers_out_of_range(world):
    from tests.factories import make_skill

    make_skill(world.team_a, name="release")
    r = _login(world).get("/skills/team-a/release/diff/", {"a": HUGE, "b": HUGE})
    assert r.status_code in (200, 404)


# --- NUL in a page's query string or form: a 400 page naming the field -----------------------------------------------


def test_param_problem_names_the_field_or_says_it_is_a_name():
    from django.http import QueryDict

    assert input_guard.param_problem(QueryDict("q=a&page=2")) is None
    assert input_guard.param_problem(QueryDict("q=ok&agent=a%00b")).path == "agent"
    assert input_guard.param_problem(QueryDict("a%00b=1")).path == "a parameter name"
    assert input_guard.param_problem(QueryDict("ids=1&ids=2%00")).path == "ids"  # any value of a list


LISTS = ["/reviews/", "/reviews/decided/", "/reviews/runs/", "/memory/", "/memory/sessions/", "/skills/"]
# Parameters the pages read (filters, search, paging) and one no page reads: the rule holds for every parameter.
NUL_PARAMS = ["q", "agent", "outcome", "task", "store", "kind", "risk", "status", "scope", "sort", "page", "next", "zz"]


def _nul_refused(response, name: str) -> None:
    if response.get("HX-Retarget") == "#flash":  # htmx: a message in the flash area (see the htmx test below)
        assert response.status_code == 200, (name, response.status_code)
    else:
        assert response.status_code == 400, (name, response.status_code)
    assert response["Content-Type"].startswith("text/html")
    assert "must not contain NUL characters" in response.text and f"“{name}”" in response.text, response.text[-800:]


@pytest.mark.parametrize("htmx", [False, True])
def test_a_nul_in_any_query_string_of_any_page_is_a_400_naming_it(world, objs, htmx):
    client = PageClient(raise_request_exception=False)
    client.force_login(world.adam)  # every page's role
    a = objs["a"]
    pages = LISTS + [f"/memory/stores/{world.store_a.pk}/"] + [url(a) for _, url, _ in PAGES]
    headers = {"HX-Request": "true"} if htmx else {}
    for page in pages:
        for name in NUL_PARAMS:
            response = client.get(page, {name: "a\x00b"}, headers=headers)
            assert ("HX-Retarget" in response) == htmx, page
            _nul_refused(response, name)
        assert client.get(page, {"q": "a b"}, headers=headers).status_code == 200, page


@pytest.mark.parametrize(("name", "url", "data", "role"), ACTIONS, ids=[a[0] for a in ACTIONS])
def test_a_nul_in_any_form_field_of_any_action_is_a_400_and_changes_nothing(world, objs, name, url, data, role):
    from memory.models import MemoryVersion
    from reviews.models import PolicyChange, Proposal

    a = objs["a"]
    client = PageClient(raise_request_exception=False)
    client.force_login(world.adam)  # every action's role
    before = (MemoryVersion.objects.count(), PolicyChange.objects.count(), list(Proposal.objects.values("status")))
    payload = data(a)
    for field in [*payload, "reason", "next"]:
        _nul_refused(client.post(url(a), {**payload, field: "a\x00b"}), field)
    after = (MemoryVersion.objects.count(), PolicyChange.objects.count(), list(Proposal.objects.values("status")))
    assert after == before


def test_a_refused_form_shows_back_what_was_typed_but_never_a_password_or_the_csrf_token(world):
    client = PageClient(raise_request_exception=False)
    client.force_login(world.alice)
    data = {"key": "k", "content": "my long text\x00 typed", "password": "hunter2", "csrfmiddlewaretoken": "tok"}
    response = client.post(f"/memory/stores/{world.store_a.pk}/new/", data)
    _nul_refused(response, "content")
    assert "my long text␀ typed" in response.text and "hunter2" not in response.text and ">tok<" not in response.text
    assert not MemoryEntry.objects.filter(key="k").exists()


def test_with_htmx_the_refusal_is_a_message_in_the_flash_area_and_the_target_stays(world):
    proposal = make_proposal(world.store_a)
    client = PageClient(raise_request_exception=False)
    client.force_login(world.alice)
    for response in (
        client.post(f"/reviews/proposals/{proposal.pk}/reject/", {"reason": "a\x00b"}, headers={"HX-Request": "true"}),
        client.get("/memory/sessions/", {"agent": "a\x00b"}, headers={"HX-Request": "true"}),
    ):
        assert response.status_code == 200 and response["HX-Retarget"] == "#flash"
        assert response["HX-Reswap"] == "innerHTML" and "must not contain NUL characters" in response.text
        assert "<html" not in response.text
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_the_policy_forms_agent_list_with_a_nul_is_refused_not_a_500(world):
    """The probe's case: the agents field splits its text into a list, which Django's own NUL check did not see."""
    from reviews.models import PolicyChange

    client = PageClient(raise_request_exception=False)
    client.force_login(world.adam)
    form = {"mode": "manual", "min_sessions": 4, "min_share": 0.1, "min_confidence_auto": 0.7, "max_sessions": 500}
    form.update(token_budget=100000, schedule_minutes=60, analyzer="rules", agents="deploy-bot, a\x00b")
    _nul_refused(client.post(f"/reviews/stores/{world.store_a.pk}/policy/", form), "agents")
    world.store_a.refresh_from_db()
    assert world.store_a.agents == [] and not PolicyChange.objects.exists()


def test_the_api_keeps_its_own_json_400_for_a_nul_in_a_query_string(api):
    r = api.get("/api/v1/sessions/", query={"agent": "a\x00b"})
    assert r.status_code == 400 and r["Content-Type"] == "application/json", r.content[:300]


# --- newline paths and other /api/ paths: JSON, always ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/stores/a%0Ab/entries/",
        "/api/v1/%0A",
        "/api/v1/stores/eng/entries/deploy-command/%0A",
        "/api/v1/stores%0A",
        "/api/v1/skills/%0A/x/",
        "/api/nothing",
        "/api/schema%0A/",
        "/api/",
    ],
)
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_every_api_path_answers_json(api, path, method):
    r = api.request(method, path, b"{}" if method == "POST" else None)
    error = _json_error(r, 404)
    assert error["code"] == "not_found"


def test_pages_keep_html_404(world):
    r = _login(world).get("/memory/nowhere%0A/")
    assert r.status_code == 404 and r["Content-Type"].startswith("text/html")


def test_an_api_server_error_is_json(api, monkeypatch):
    from dreamweb import api_views

    def boom(self, request):
        raise RuntimeError("boom")

    monkeypatch.setattr(api_views.PingView, "get", boom)
    error = _json_error(api.get("/api/v1/ping/"), 500)
    assert error["code"] == "server_error" and "boom" not in error["detail"]


# --- bodies too large ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", ENTRIES),
        ("PUT", ENTRY),
        ("POST", "/api/v1/sessions/"),
        ("POST", ENTRY + "feedback/"),
        ("POST", "/api/v1/nowhere/"),
    ],
)
def test_a_body_over_the_request_limit_is_a_json_413(api, world, settings, method, path):
    settings.DREAMWEB_MAX_REQUEST_BYTES = 1000
    body = json.dumps({"key": "k", "content": "x" * 1001}).encode()
    error = _json_error(api.request(method, path, body, headers=_if_match(world)), 413)
    assert error["code"] == "too_large" and error["limit"] == 1000 and "1000" in error["detail"]
    # At the limit, the request goes through to the view.
    body = json.dumps({"key": "k", "content": "x" * (1000 - 27)}).encode()
    assert len(body) == 1000
    assert api.request(method, path, body, headers=_if_match(world)).status_code != 413


def test_a_body_over_the_request_limit_on_a_page_is_a_413_page(world, settings):
    settings.DREAMWEB_MAX_REQUEST_BYTES = 1000
    client = _login(world)
    r = client.post("/reviews/bulk/", {"ids": ["1"], "action": "reject", "reason": "x" * 2000})
    assert r.status_code == 413 and r["Content-Type"].startswith("text/html")
    assert "1000" in r.text


def test_a_huge_real_body_to_the_entries_api_is_a_json_413(api):
    """The reported case, at the real default limit: a 33 MiB entries POST."""
    body = b'{"key": "k", "content": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    error = _json_error(api.request("POST", ENTRIES, body), 413)
    assert error["code"] == "too_large"


# --- entry content: a documented limit -------------------------------------------------------------------------------


def test_entry_content_limit_boundary(api, world, settings):
    settings.DREAMWEB_MAX_ENTRY_BYTES = 100
    assert api.post(ENTRIES, {"key": "at-limit", "content": "x" * 100}).status_code == 201
    error = _json_error(api.post(ENTRIES, {"key": "over", "content": "x" * 101}), 400)
    assert list(error["errors"]) == ["content"] and "100 bytes" in error["errors"]["content"][0]
    # Bytes, not characters: 34 three-byte characters are 102 bytes.
    _json_error(api.post(ENTRIES, {"key": "wide", "content": "€" * 34}), 400)
    assert api.post(ENTRIES, {"key": "wide", "content": "€" * 33}).status_code == 201
    r = api.patch(ENTRY, {"content": "y" * 101}, headers=_if_match(world))
    assert _json_error(r, 400)["errors"]["content"]
    assert not MemoryEntry.objects.filter(key="over").exists()
    assert MemoryEntry.objects.get(key="deploy-command").version == 1


def test_entry_content_limit_holds_for_every_writer(world, settings):
    from dreamweb.provenance import Author, InvalidChange
    from memory.portability import DocumentInvalid, validate_document
    from memory.services import create_entry

    settings.DREAMWEB_MAX_ENTRY_BYTES = 100
    with pytest.raises(InvalidChange, match="DREAMWEB_MAX_ENTRY_BYTES"):
        create_entry(world.store_a, key="big", content="x" * 101, author=Author.system())
    with pytest.raises(DocumentInvalid) as invalid:
        validate_document({"store": "eng", "entries": [{"key": "big", "content": "x" * 101}]})
    assert invalid.value.errors == ["entries[0].content: at most 100 bytes (got 101; DREAMWEB_MAX_ENTRY_BYTES)"]


# --- files: the same guard for the import commands -------------------------------------------------------------------


def test_import_sessions_rejects_deep_and_non_finite_lines_by_number_and_imports_the_rest(world, tmp_path):
    from django.core.management import CommandError, call_command

    ok = session_doc("file-ok")
    lines = [
        json.dumps(ok),
        "[" * 5000 + "]" * 5000,  # past the parser: was a RecursionError that ended the whole import
        json.dumps(session_doc("deep", metadata={"x": nested(70)})),
        json.dumps(session_doc("nan", metadata={"cost": "@"})).replace('"@"', "NaN"),
        json.dumps(session_doc("big", metadata={"tokens": "@"})).replace('"@"', "1" + "0" * 400),
        json.dumps(session_doc("file-ok-2")),
    ]
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_sessions", str(path), "--team", "team-a", stdout=out, stderr=err)
    assert out.getvalue() == "imported 2, unchanged 0, rejected 4\n"
    messages = err.getvalue().splitlines()
    assert [m.split(":")[0] for m in messages] == ["line 2", "line 3", "line 4", "line 5"]
    assert "nested deeper than 64 levels" in messages[0] and "nested deeper than 64 levels" in messages[1]
    assert messages[2].startswith("line 4: metadata.cost: must be a finite number")
    assert messages[3].startswith("line 5: metadata.tokens: must be a finite number")
    assert set(AgentSession.objects.values_list("external_id", flat=True)) == {"file-ok", "file-ok-2"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 64 levels"),
        ('{"store": "eng", "entries": [{"key": "k", "content": "x", "tags": [NaN]}]}', "entries[0].tags[0]: must be"),
        ("{not json", "not valid JSON"),
    ],
)
def test_import_memory_refuses_what_the_guard_refuses_with_a_clear_error(world, tmp_path, text, expected):
    from django.core.management import CommandError, call_command

    path = tmp_path / "memory.json"
    path.write_text(text)
    with pytest.raises(CommandError, match="nothing imported") as refused:
        call_command("import_memory", str(path), "--team", "team-a", stdout=io.StringIO())
    assert expected in str(refused.value)
    assert not MemoryEntry.objects.filter(key="k").exists()


@pytest.mark.parametrize("format", ["openai-chat", "anthropic-messages", "claude-code", "codex", "dreamweb"])
def test_transcript_files_nested_past_the_parser_are_refused_not_crashed(format):
    """The importers of every format parse through the guard: a file (or line) too deep is a named problem."""
    from tests.importer_support import convert

    deep = "[" * 5000 + "]" * 5000
    for text in (deep, deep + "\n" + deep + "\n"):
        try:
            _, docs, problems = convert(text, format=format)
        except Exception as exc:  # noqa: BLE001 - a clear refusal of the whole file is fine, a crash is not
            assert isinstance(exc, ValueError) and not isinstance(exc, RecursionError), exc
            continue
        assert docs == [] and problems, problems
        assert not any("Recursion" in str(p) for p in problems.values())


def test_a_transcript_file_nested_past_the_parser_is_a_json_400(api):
    from tests.scoping import no_scope

    body = ("[" * 5000 + "]" * 5000).encode()
    with no_scope():
        r = api.client.post(
            "/api/v1/sessions/?format=openai-chat",
            data=body,
            content_type="application/json",
            headers={"Authorization": f"Api-Key {api.raw}"},
        )
    assert 400 <= r.status_code < 500 and r["Content-Type"] == "application/json", r.content[:300]


def test_session_query_options_are_checked_whatever_the_body(api):
    for query in ("?task=" + "t" * 101, "?agent="):
        error = _json_error(
            api.request("POST", "/api/v1/sessions/" + query, json.dumps(session_doc("q")).encode()), 400
        )
        assert list(error["errors"]) in (["task"], ["agent"])
    assert api.post("/api/v1/sessions/?task=" + "t" * 100, session_doc("q")).status_code == 201


def test_a_content_length_of_absurd_size_is_a_413_not_a_crash(api):
    r = api.client.post(ENTRIES, data=b"{}", content_type="application/json", CONTENT_LENGTH="9" * 40)
    error = _json_error(r, 413)
    assert error["code"] == "too_large" and "too large" in error["detail"]


def test_a_page_body_past_djangos_own_limit_is_a_413_page(world, settings):
    """If DATA_UPLOAD_MAX_MEMORY_SIZE is set below the guard's limit, Django's own refusal is a 413 too."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 500
    r = _login(world).post("/reviews/bulk/", {"ids": ["1"], "action": "reject", "reason": "x" * 1000})
    assert r.status_code == 413 and r["Content-Type"].startswith("text/html")
    assert "500 bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)" in r.text


@pytest.mark.parametrize(
    "handler, status, code",
    [
        ("bad_request", 400, "bad_request"),
        ("permission_denied", 403, "permission_denied"),
        ("not_found", 404, "not_found"),
    ],
)
def test_error_handlers_answer_json_under_api_and_pages_elsewhere(rf, handler, status, code):
    from dreamweb import errors

    view = getattr(errors, handler)
    api = view(rf.get("/api/v1/anything"), Exception("x"))
    assert (api.status_code, api["Content-Type"]) == (status, "application/json")
    assert json.loads(api.content)["code"] == code
    assert view(rf.get("/api"), Exception("x"))["Content-Type"] == "application/json"
    page = view(rf.get("/apiary/"), Exception("x"))
    assert page.status_code == status and page["Content-Type"].startswith("text/html")
    server = errors.server_error(rf.get("/api/v1/x"))
    assert server.status_code == 500 and json.loads(server.content)["code"] == "server_error"
    assert errors.server_error(rf.get("/memory/"))["Content-Type"].startswith("text/html")
