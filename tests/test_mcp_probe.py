"""Blind probe of dreamweb-mcp: the console script over stdio (official MCP SDK client) against a live server.
One test per case; a failing test is a finding. Written blind by a helper; of its 60 cases 7 failed on the code it
probed: a skill name walked the URL path to other endpoints (names, keys and stores are now one escaped path
segment each, dreamweb_client._seg), a query too long for a URL crashed the tool, a timeout and an unknown store did
not name the setting to change (all fixed); `rating: true` is documented as "helpful" (the case was dropped); the
SDK's own wording of argument validation errors is left, marked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from dreamweb.models import AgentKey
from memory.models import AgentSession, MemoryEntry
from reviews import dreams
from reviews.models import Proposal, SessionAnalysis
from tests.factories import StoreFactory, TeamFactory, make_entry, make_skill

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.all_teams]

SERVER = Path(sys.executable).parent / "dreamweb-mcp"
SIX = {"get_context", "remember", "search_memory", "feedback", "list_skills", "read_skill"}
ALL_SCOPES = ["memory:read", "memory:write", "sessions:write", "skills:read"]
SEEDED = "Run the billing migrations with `make migrate-billing` before any deploy of invoicer."
SKILL_BODY = "# Rotate certificates\n\n1. Run `certbot renew`.\n2. Reload nginx.\n"


def key(team, scopes=ALL_SCOPES, name="probe") -> str:
    _, raw = AgentKey.generate(team=team, name=name, scopes=scopes, writable_stores=["*"])
    return raw


def params(url: str | None, api_key: str | None, **env) -> StdioServerParameters:
    environ = {"DREAMWEB_AGENT": "probe-bot", "DREAMWEB_TASK": "", **env}
    if url is not None:
        environ["DREAMWEB_URL"] = url
    if api_key is not None:
        environ["DREAMWEB_API_KEY"] = api_key
    environ = {k: v for k, v in environ.items() if v != ""}
    return StdioServerParameters(command=str(SERVER), env=environ)


def run(p: StdioServerParameters, body, timeout: float = 60):
    """Start the real console script, initialize, and run `body(session)` (an async function)."""

    async def go():
        async with stdio_client(p) as (read, write), ClientSession(read, write, read_timeout_seconds=timeout) as s:
            await s.initialize()
            return await body(s)

    return asyncio.run(go())


def calls(p: StdioServerParameters, seq: list[tuple[str, dict]], timeout: float = 60) -> list:
    async def body(session):
        return [await session.call_tool(name, args) for name, args in seq]

    return run(p, body, timeout)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def clean_error(result):
    """An isError result with a readable message and no Python traceback text."""
    t = text(result)
    print("\nTOOL-ERROR:", repr(t[:300]))
    assert result.is_error, f"expected a tool error, got: {t[:500]!r}"
    assert t.strip(), "error result has no message"
    assert not re.fullmatch(r"Error executing tool \w+:?\s*", t), f"error says nothing beyond the tool name: {t!r}"
    assert "Traceback" not in t and 'File "' not in t, f"traceback in the tool error: {t[:800]!r}"
    assert len(t) < 4000, f"error text is {len(t)} characters"
    return t


@pytest.fixture
def world():
    team = TeamFactory(slug="probe-team")
    store = StoreFactory(team=team, slug="ops", agents_may_write=True)
    make_entry(store, key="billing-migrations", content=SEEDED)
    make_entry(store, key="emoji-entry", content="Ship it 🚀 — naïve café déjà vu.")
    make_skill(team, name="rotate-certs", description="Rotate TLS certificates on the edge nodes.", body=SKILL_BODY)
    return team, store


@pytest.fixture
def good(live_server, world):
    team, store = world
    return params(live_server.url, key(team), DREAMWEB_SESSION="probe-session-1")


def ok_after(p, seq):
    """Run a bad call sequence then a good call in the same process: the server must still answer."""
    results = calls(p, seq + [("list_skills", {})])
    last = results[-1]
    assert not last.is_error and "rotate-certs" in text(last), f"server did not recover: {text(last)[:300]!r}"
    return results[:-1]


pytestmark.append(pytest.mark.skipif(not SERVER.exists(), reason="dreamweb-mcp not installed"))


# ---------------------------------------------------------------- tools and schemas


def test_tool_list_names_and_server_name(good):
    async def go():
        async with stdio_client(good) as (read, write), ClientSession(read, write, read_timeout_seconds=60) as s:
            init = await s.initialize()
            return init, await s.list_tools()

    init, tools = asyncio.run(go())
    assert init.server_info.name == "dreamweb"
    names = {t.name for t in tools.tools}
    assert names >= SIX
    for t in tools.tools:
        assert t.description and len(t.description) > 20, f"{t.name} has no real description"


def test_tool_input_schemas(good):
    async def body(session):
        return {t.name: t.input_schema for t in (await session.list_tools()).tools}

    schemas = run(good, body)
    props = lambda n: schemas[n].get("properties", {})  # noqa: E731
    req = lambda n: set(schemas[n].get("required", []))  # noqa: E731
    assert props("get_context")["query"].get("type") == "string" or "anyOf" in props("get_context")["query"]
    mt = props("get_context")["max_tokens"]
    assert mt.get("type") == "integer" or any(a.get("type") == "integer" for a in mt.get("anyOf", []))
    assert req("remember") == {"content"} and props("remember")["content"]["type"] == "string"
    assert req("search_memory") == {"query"}
    assert {"key", "rating"} <= req("feedback") and "comment" in props("feedback")
    assert req("read_skill") == {"name"}
    assert not req("list_skills")
    for name in SIX:
        for pname, pschema in props(name).items():
            assert pschema.get("description"), f"{name}.{pname} has no description"


# ---------------------------------------------------------------- happy paths


def test_get_context_contains_seeded_memory_and_skill_index(good):
    (ctx,) = calls(good, [("get_context", {"query": "deploy invoicer billing", "max_tokens": 1000})])
    assert not ctx.is_error
    assert SEEDED in text(ctx)
    assert "rotate-certs" in text(ctx)


def test_get_context_without_arguments(good):
    (ctx,) = calls(good, [("get_context", {})])
    assert not ctx.is_error and SEEDED in text(ctx)


def test_search_memory_finds_entry_with_store_key_etag(good):
    (res,) = calls(good, [("search_memory", {"query": "billing migrations"})])
    assert not res.is_error
    t = text(res)
    assert "ops/billing-migrations" in t and "etag" in t.lower() and SEEDED in t


def test_search_memory_no_match_is_not_an_error(good):
    (res,) = calls(good, [("search_memory", {"query": "zzqxv nonexistentword"})])
    assert not res.is_error and text(res).strip()


def test_remember_creates_note_session_that_a_dream_sees(good, world):
    team, store = world
    note = "The invoicer staging box needs `sudo systemctl restart invoicer-worker` after a deploy."
    (res,) = calls(good, [("remember", {"content": note})])
    assert not res.is_error, text(res)
    s = AgentSession.objects.get(team=team, metadata__note_of="probe-session-1")
    assert s.agent == "probe-bot"
    assert [(e["type"], e["content"]) for e in s.events] == [("memory_write", note)]
    assert not MemoryEntry.objects.filter(content__contains="invoicer-worker").exists()
    dreams.start_run(store, analyzer="rules", wait=True)
    kinds = [f["kind"] for a in SessionAnalysis.objects.filter(session=s) for f in a.findings]
    assert "note" in kinds


def test_feedback_changes_rating(good, world):
    _, store = world
    before = MemoryEntry.objects.get(store=store, key="billing-migrations")
    (res,) = calls(good, [("feedback", {"key": "billing-migrations", "rating": "unhelpful", "comment": "stale"})])
    assert not res.is_error, text(res)
    after = MemoryEntry.objects.get(store=store, key="billing-migrations")
    assert after.rating_count == before.rating_count + 1 and after.rating < before.rating


def test_feedback_numeric_rating(good, world):
    _, store = world
    (res,) = calls(good, [("feedback", {"key": "billing-migrations", "rating": 5, "comment": "great"})])
    assert not res.is_error, text(res)
    assert MemoryEntry.objects.get(store=store, key="billing-migrations").rating > 0


def test_list_and_read_skill(good):
    skills, skill = calls(good, [("list_skills", {}), ("read_skill", {"name": "rotate-certs"})])
    assert not skills.is_error and "rotate-certs" in text(skills) and "Rotate TLS certificates" in text(skills)
    assert not skill.is_error and "1. Run `certbot renew`." in text(skill) and "Reload nginx" in text(skill)


# ---------------------------------------------------------------- bad input


def test_remember_missing_content(good):
    (res,) = ok_after(good, [("remember", {})])
    t = clean_error(res)
    assert "content" in t


def test_read_skill_missing_name(good):
    (res,) = ok_after(good, [("read_skill", {})])
    assert "name" in clean_error(res)


def test_extra_argument_is_refused_or_ignored_cleanly(good):
    (res,) = ok_after(good, [("search_memory", {"query": "billing", "bogus": 1})])
    if res.is_error:
        clean_error(res)
    else:
        assert "billing-migrations" in text(res)


def test_max_tokens_wrong_type(good):
    (res,) = ok_after(good, [("get_context", {"query": "x", "max_tokens": "lots"})])
    assert "max_tokens" in clean_error(res)


def test_max_tokens_negative(good):
    (res,) = ok_after(good, [("get_context", {"query": "deploy", "max_tokens": -5})])
    assert "max_tokens" in clean_error(res)


def test_max_tokens_zero(good):
    (res,) = ok_after(good, [("get_context", {"query": "deploy", "max_tokens": 0})])
    assert "max_tokens" in clean_error(res)


def test_max_tokens_huge(good):
    (res,) = ok_after(good, [("get_context", {"query": "deploy", "max_tokens": 10**15})])
    if res.is_error:
        assert "max_tokens" in clean_error(res)
    else:
        assert SEEDED in text(res)


def test_max_tokens_float(good):
    (res,) = ok_after(good, [("get_context", {"query": "deploy", "max_tokens": 12.5})])
    assert "max_tokens" in clean_error(res)


def test_query_wrong_type(good):
    (res,) = ok_after(good, [("search_memory", {"query": 42})])
    if res.is_error:
        assert "query" in clean_error(res)


def test_remember_empty_content(good, world):
    team, _ = world
    (res,) = ok_after(good, [("remember", {"content": "   "})])
    clean_error(res)
    assert not AgentSession.objects.filter(team=team).exists()


def test_search_memory_empty_query(good):
    (res,) = ok_after(good, [("search_memory", {"query": ""})])
    if res.is_error:
        clean_error(res)


def test_remember_one_megabyte(good, world):
    team, _ = world
    (res,) = ok_after(good, [("remember", {"content": "Lesson: " + "a" * (1024 * 1024)})])
    if res.is_error:
        clean_error(res)
    else:
        assert AgentSession.objects.filter(team=team).count() == 1


def test_remember_nul_character(good, world):
    team, _ = world
    (res,) = ok_after(good, [("remember", {"content": "Use tab\x00separated output for the export."})])
    if res.is_error:
        t = clean_error(res)
        assert "NUL" in t or "null" in t.lower() or "\\x00" in t or "\\u0000" in t
    else:
        s = AgentSession.objects.get(team=team)
        assert "\x00" not in s.events[0]["content"]


def test_remember_unicode_and_emoji_roundtrip(good, world):
    team, _ = world
    note = "Déploiement: utilisez `make ship` 🚢 — 日本語のメモ, Ελληνικά."
    (res,) = calls(good, [("remember", {"content": note})])
    assert not res.is_error, text(res)
    assert AgentSession.objects.get(team=team).events[0]["content"] == note


def test_search_memory_emoji(good):
    (res,) = calls(good, [("search_memory", {"query": "🚀 café"})])
    assert not res.is_error, text(res)


def test_read_unknown_skill(good):
    (res,) = ok_after(good, [("read_skill", {"name": "no-such-skill"})])
    t = clean_error(res)
    assert "no-such-skill" in t and ("not found" in t.lower() or "no skill" in t.lower() or "404" in t)


def test_read_skill_path_traversal_name(good):
    (res,) = ok_after(good, [("read_skill", {"name": "../../etc/passwd"})])
    t = clean_error(res)
    assert "../../etc/passwd" in t and "No API endpoint" not in t, "the skill name was not escaped in the URL path"


def test_read_skill_name_cannot_reach_other_endpoints(good):
    (res,) = ok_after(good, [("read_skill", {"name": "../stores/ops/entries/billing-migrations"})])
    print("\nREACH:", repr(text(res)[:400]))
    assert res.is_error, f"a skill name walked to another API endpoint: {text(res)[:300]!r}"
    assert SEEDED not in text(res)
    t = clean_error(res)  # observed: a GET of the entry endpoint, then an unhandled KeyError('name')
    assert "No published skill" in t or "not found" in t, t


def test_read_skill_name_with_query_string(good):
    (res,) = ok_after(good, [("read_skill", {"name": "rotate-certs?x=1"})])
    assert res.is_error and "certbot" not in text(res), f"'rotate-certs?x=1' read rotate-certs: {text(res)[:200]!r}"


@pytest.mark.xfail(
    strict=True,
    reason="known gap: the MCP SDK words argument validation errors itself (it names the field and the problem)",
)
def test_validation_errors_are_not_raw_pydantic_dumps(good):
    (res,) = ok_after(good, [("remember", {})])
    t = clean_error(res)
    assert "errors.pydantic.dev" not in t and "rememberArguments" not in t and "[type=" not in t, t


def test_feedback_unknown_entry(good):
    (res,) = ok_after(good, [("feedback", {"key": "no-such-entry", "rating": "helpful", "comment": ""})])
    t = clean_error(res)
    assert "no-such-entry" in t


# `true` is not among them: the tool's description says "'helpful' (or true)" (a boolean is an opinion).
@pytest.mark.parametrize("rating", ["great", 0, 6, -1, 3.5])
def test_feedback_bad_rating(good, world, rating):
    _, store = world
    (res,) = ok_after(good, [("feedback", {"key": "billing-migrations", "rating": rating, "comment": "x"})])
    t = clean_error(res)
    assert "rating" in t or "score" in t
    assert MemoryEntry.objects.get(store=store, key="billing-migrations").rating_count == 0


def test_unknown_tool(good):
    (res,) = ok_after(good, [("drop_database", {})])
    clean_error(res)


# ---------------------------------------------------------------- misconfiguration


def test_no_url(world):
    team, _ = world
    (res,) = calls(params(None, key(team)), [("get_context", {"query": "x"})])
    assert "DREAMWEB_URL" in clean_error(res)


def test_no_key(live_server):
    (res,) = calls(params(live_server.url, None), [("get_context", {"query": "x"})])
    assert "DREAMWEB_API_KEY" in clean_error(res)


def test_no_key_error_does_not_blame_url(live_server):
    (res,) = calls(params(live_server.url, None), [("list_skills", {})])
    t = clean_error(res)
    assert "DREAMWEB_API_KEY" in t and "DREAMWEB_URL" not in t.replace("DREAMWEB_URL and DREAMWEB_API_KEY", "")


def test_malformed_url(world):
    team, _ = world
    (res,) = calls(params("not a url", key(team)), [("get_context", {"query": "x"})])
    assert "DREAMWEB_URL" in clean_error(res)


def test_wrong_key_401(live_server, world):
    (res,) = calls(params(live_server.url, "dw_wrong_key_123"), [("search_memory", {"query": "x"})])
    t = clean_error(res)
    assert "401" in t and "DREAMWEB_API_KEY" in t


def test_missing_scope_403_explained(live_server, world):
    team, _ = world
    p = params(live_server.url, key(team, ["memory:read"], name="reader"))
    (res,) = calls(p, [("read_skill", {"name": "rotate-certs"})])
    t = clean_error(res)
    assert "403" in t and "skills:read" in t


def test_remember_without_sessions_scope_names_it(live_server, world):
    team, _ = world
    p = params(live_server.url, key(team, ["memory:read", "skills:read"], name="reader"))
    (res,) = calls(p, [("remember", {"content": "A note."})])
    t = clean_error(res)
    assert "403" in t and "sessions:write" in t


def test_server_refused(world):
    team, _ = world
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    (res, again) = calls(params(down, key(team)), [("get_context", {"query": "x"}), ("list_skills", {})])
    t = clean_error(res)
    assert "DREAMWEB_URL" in t and down in t
    clean_error(again)


class _Fake(BaseHTTPRequestHandler):
    mode = "500"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.server.mode == "slow":
            time.sleep(6)
            body = b'{"items": [], "skills": [], "text": "", "tokens": 0}'
            self.send_response(200)
        elif self.server.mode == "html":
            body = b"<html><body>Bad Gateway</body></html>"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        else:
            body = json.dumps({"detail": "Server error.", "code": "server_error"}).encode()
            self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    do_POST = do_GET


@pytest.fixture
def fake():
    servers = []

    def start(mode):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
        srv.mode = mode
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()


def test_slow_server_times_out_with_clear_message(fake):
    url = fake("slow")
    started = time.monotonic()
    (res,) = calls(params(url, "dw_x", DREAMWEB_TIMEOUT="1"), [("get_context", {"query": "x"})], timeout=30)
    elapsed = time.monotonic() - started
    t = clean_error(res)
    assert elapsed < 5.5, f"took {elapsed:.1f}s with DREAMWEB_TIMEOUT=1"
    assert "time" in t.lower() and "DREAMWEB_TIMEOUT" in t


def test_server_500(fake):
    url = fake("500")
    (res,) = calls(params(url, "dw_x"), [("search_memory", {"query": "x"})])
    t = clean_error(res)
    assert "500" in t


def test_server_html_502(fake):
    url = fake("html")
    (res,) = calls(params(url, "dw_x"), [("list_skills", {})])
    t = clean_error(res)
    assert "502" in t


def test_bad_timeout_env_does_not_crash(live_server, world):
    team, _ = world
    p = params(live_server.url, key(team), DREAMWEB_TIMEOUT="soon")
    (res,) = calls(p, [("list_skills", {})])
    if res.is_error:
        assert "DREAMWEB_TIMEOUT" in clean_error(res)


# ---------------------------------------------------------------- recovery, secrets, concurrency


def test_keeps_answering_after_errors(good):
    results = calls(
        good,
        [
            ("read_skill", {"name": "nope"}),
            ("get_context", {"max_tokens": "x"}),
            ("feedback", {"key": "nope", "rating": "helpful", "comment": ""}),
            ("get_context", {"query": "billing"}),
        ],
    )
    assert all(r.is_error for r in results[:3])
    assert not results[3].is_error and SEEDED in text(results[3])


def test_secret_in_remember_is_not_stored_as_memory(good, world):
    team, store = world
    secret = "AKIAIOSFODNN7EXAMPLE"
    aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    note = f"The deploy bucket credentials are aws_access_key_id={secret} aws_secret_access_key={aws}"
    (res,) = calls(good, [("remember", {"content": note})])
    if res.is_error:
        clean_error(res)
    dreams.start_run(store, analyzer="rules", wait=True)
    assert not MemoryEntry.objects.filter(content__contains=secret).exists()
    assert not MemoryEntry.objects.filter(content__contains=aws).exists()
    assert not Proposal.objects.filter(content__contains=aws).exists()
    assert not Proposal.objects.filter(content__contains=secret).exists()
    # and the next get_context does not serve it
    (ctx,) = calls(good, [("get_context", {"query": "deploy bucket credentials"})])
    assert aws not in text(ctx)


def test_concurrent_calls_in_flight(good):
    async def body(session):
        tasks = [
            session.call_tool("get_context", {"query": "billing", "max_tokens": 500}),
            session.call_tool("search_memory", {"query": "billing"}),
            session.call_tool("search_memory", {"query": "café"}),
            session.call_tool("list_skills", {}),
            session.call_tool("read_skill", {"name": "rotate-certs"}),
            session.call_tool("read_skill", {"name": "nope"}),
            session.call_tool("get_context", {"query": "emoji", "max_tokens": 300}),
            session.call_tool("search_memory", {"query": "migrate"}),
        ]
        return await asyncio.gather(*tasks)

    r = run(good, body)
    assert not r[0].is_error and SEEDED in text(r[0])
    assert "billing-migrations" in text(r[1])
    assert "emoji-entry" in text(r[2])
    assert "rotate-certs" in text(r[3])
    assert "certbot renew" in text(r[4])
    assert r[5].is_error
    assert not r[6].is_error
    assert "billing-migrations" in text(r[7])


def test_concurrent_remembers(good, world):
    team, _ = world

    async def body(session):
        return await asyncio.gather(
            *[session.call_tool("remember", {"content": f"Distinct lesson number {i}."}) for i in range(10)]
        )

    results = run(good, body)
    assert all(not r.is_error for r in results), [text(r) for r in results if r.is_error]
    assert AgentSession.objects.filter(team=team, metadata__note_of="probe-session-1").count() == 10


def test_unknown_store_env(live_server, world):
    team, _ = world
    p = params(live_server.url, key(team), DREAMWEB_STORE="no-such-store")
    (res,) = calls(p, [("get_context", {"query": "x"})])
    t = clean_error(res)
    assert "no-such-store" in t and "DREAMWEB_STORE" in t


def test_remember_when_server_down(world):
    team, _ = world
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    (res,) = calls(params(down, key(team)), [("remember", {"content": "A lesson."})])
    assert down in clean_error(res)


def test_search_memory_huge_query(good):
    (res,) = ok_after(good, [("search_memory", {"query": "billing " * 20000})])
    print("\nHUGE:", repr(text(res)[:300]))
    if res.is_error:
        t = clean_error(res)
        assert t.strip() != "Error executing tool search_memory", "error with no message at all"
        assert "query" in t or "long" in t or "414" in t


def test_get_context_query_with_nul_and_newlines(good):
    (res,) = ok_after(good, [("get_context", {"query": "billing\x00\nmigrations\r\n"})])
    if res.is_error:
        clean_error(res)
    else:
        assert SEEDED in text(res)


def test_feedback_comment_huge(good):
    big = {"key": "billing-migrations", "rating": "helpful", "comment": "x" * 1_000_000}
    (res,) = ok_after(good, [("feedback", big)])
    if res.is_error:
        clean_error(res)


def test_search_memory_long_query_8k(good):
    (res,) = ok_after(good, [("search_memory", {"query": "billing migrations " * 450})])
    print("\nLONG8K:", repr(text(res)[:300]))
    if res.is_error:
        clean_error(res)
    else:
        assert "billing-migrations" in text(res)
