"""Every limit at its boundary: the value at the limit passes, one past it is refused (or cut), for the context budget
(items, tokens, the server's caps, skip-and-try-next), the session size and event count, the required fields of each
event kind, and the allowed-host rule of the risk screen."""

from __future__ import annotations

import json

import pytest

from dreamweb.models import AgentKey
from memory import sessions
from memory.context import MEMORY_HEADER, build_context, clamp_budget, render_item
from memory.sessions import SessionInvalid, SessionTooLarge, validate_session
from reviews.analysis import risk
from tests.api_support import make_key, session_doc
from tests.factories import make_entry

# --- context budget -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "asked, caps, expected",
    [
        ((None, None), (200, 32000), (20, 2000)),  # the defaults
        ((200, 32000), (200, 32000), (200, 32000)),  # at the server's caps
        ((201, 32001), (200, 32000), (200, 32000)),  # one past them: cut to them
        ((0, 0), (200, 32000), (0, 0)),
        ((-1, -1), (200, 32000), (0, 0)),  # never negative
    ],
)
def test_clamp_budget_at_its_boundaries(settings, asked, caps, expected):
    settings.DREAMWEB_CONTEXT_DEFAULT_ITEMS, settings.DREAMWEB_CONTEXT_DEFAULT_TOKENS = 20, 2000
    settings.DREAMWEB_CONTEXT_MAX_ITEMS, settings.DREAMWEB_CONTEXT_MAX_TOKENS = caps
    assert clamp_budget(*asked) == expected


@pytest.fixture
def key(world) -> AgentKey:
    make_key(world.team_a, "budget")
    return AgentKey.objects.get(name="budget")


def _context(key, store, **budget):
    return build_context(key, store=store, record=False, include_skills=False, **budget)


def _content_filling(tokens: int, key: str = "k", extra: int = 0) -> str:
    """Content whose rendered entry, with the header, is exactly ``tokens`` tokens of 4 characters (plus ``extra``)."""
    overhead = len(MEMORY_HEADER) + len(render_item(key, ""))
    return "x" * (4 * tokens - overhead + extra)


@pytest.mark.all_teams
@pytest.mark.parametrize("extra, served", [(0, 1), (-3, 1), (1, 0)])
def test_an_entry_of_exactly_the_token_budget_fits_one_character_more_does_not(world, key, extra, served):
    make_entry(world.store_a, key="k", content=_content_filling(10, extra=extra))
    result = _context(key, world.store_a, max_tokens=10)
    assert len(result.items) == served
    assert result.tokens <= 10


@pytest.mark.all_teams
def test_an_entry_too_long_is_skipped_and_the_next_one_tried(world, key):
    make_entry(world.store_a, key="short", content="Short.")
    make_entry(world.store_a, key="long", content="y" * 400)  # newer: ranked first
    result = _context(key, world.store_a, max_tokens=20)
    assert result.considered == 2 and [i.key for i in result.items] == ["short"]


@pytest.mark.all_teams
@pytest.mark.parametrize("asked, cap, served", [(3, 200, 3), (5, 5, 5), (6, 5, 5), (0, 200, 0)])
def test_the_item_budget_and_the_server_cap(world, key, settings, asked, cap, served):
    settings.DREAMWEB_CONTEXT_MAX_ITEMS = cap
    for n in range(8):
        make_entry(world.store_a, key=f"e{n}", content=f"Lesson {n}.")
    result = _context(key, world.store_a, max_items=asked, max_tokens=10000)
    assert len(result.items) == served and result.max_items == min(asked, cap)


@pytest.mark.all_teams
def test_the_server_token_cap_bounds_what_an_agent_asks_for(world, key, settings):
    settings.DREAMWEB_CONTEXT_MAX_TOKENS = 10
    make_entry(world.store_a, key="k", content=_content_filling(10, extra=1))
    result = _context(key, world.store_a, max_tokens=100000)
    assert result.max_tokens == 10 and result.items == []


# --- sessions -------------------------------------------------------------------------------------------------------


def _size(doc: dict) -> int:
    return len(json.dumps(doc, separators=(",", ":")).encode())


def test_a_session_of_exactly_the_size_limit_passes_one_byte_more_does_not(settings):
    doc = session_doc("size-1")
    settings.DREAMWEB_MAX_SESSION_BYTES = _size(doc)
    assert validate_session(doc).fields["external_id"] == "size-1"
    settings.DREAMWEB_MAX_SESSION_BYTES = _size(doc) - 1
    with pytest.raises(SessionTooLarge, match=f"session is {_size(doc)} bytes; the limit is {_size(doc) - 1}"):
        validate_session(doc)


def test_the_event_count_limit(monkeypatch):
    monkeypatch.setattr(sessions, "MAX_EVENTS", 4)
    doc = session_doc("count-1")
    assert len(doc["events"]) == 4
    assert len(validate_session(doc).fields["events"]) == 4
    doc["events"].append({"type": "message", "role": "user", "content": "One more."})
    with pytest.raises(SessionInvalid, match=r"events: at most 4 events \(got 5\)"):
        validate_session(doc)


EVENTS = {
    "message": {"type": "message", "role": "user", "content": "Hi."},
    "tool_call": {"type": "tool_call", "id": "c1", "name": "bash"},
    "tool_result": {"type": "tool_result", "call_id": "c1", "content": "ok"},
    "memory_write": {"type": "memory_write", "content": "Note."},
}
REQUIRED = [(kind, field) for kind, ev in EVENTS.items() for field in ev if field != "type"]


@pytest.mark.parametrize("kind, field", REQUIRED)
def test_every_required_field_of_every_event_kind(kind, field):
    event = {k: v for k, v in EVENTS[kind].items() if k != field}
    with pytest.raises(SessionInvalid, match=rf"events\[0\]\.{field}: is required for a {kind} event"):
        validate_session(session_doc("req-1", events=[event]))
    with pytest.raises(SessionInvalid, match=rf"events\[0\]\.{field}: must be a string"):
        validate_session(session_doc("req-2", events=[{**EVENTS[kind], field: 7}]))
    assert validate_session(session_doc("req-3", events=[EVENTS[kind]])).fields["events"] == [EVENTS[kind]]


def test_a_tool_result_with_empty_content_is_kept_one_without_content_is_refused():
    assert validate_session(session_doc("tr-1", events=[{**EVENTS["tool_result"], "content": ""}]))
    with pytest.raises(SessionInvalid, match="content: is required for a tool_result event"):
        validate_session(session_doc("tr-2", events=[{"type": "tool_result", "call_id": "c1"}]))


# --- allowed hosts of the risk screen -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, allowed, level",
    [
        ("https://acme.test/deploy", ["acme.test"], "low"),
        ("https://wiki.acme.test/deploy", ["acme.test"], "low"),  # a subdomain
        ("https://WIKI.ACME.TEST/deploy", [".acme.test"], "low"),  # any case, a leading dot
        ("https://evilacme.test/deploy", ["acme.test"], "high"),  # a bare suffix is another host
        ("https://acme.test.evil/deploy", ["acme.test"], "high"),
        ("https://xacme.test/deploy", ["acme.test"], "high"),
        ("https://acme.test/deploy", [], "high"),
    ],
)
def test_only_the_allowed_host_and_its_subdomains_pass(url, allowed, level):
    draft = {"operation": "add", "content": f"Docs are at {url}.", "rationale": "", "evidence": [], "targets": []}
    assert risk.assess(draft, allowed_hosts=allowed)[0] == level
