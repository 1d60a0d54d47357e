"""Blind probe, round 2: dreamweb-mcp and the Claude Code / Codex hooks under real-world failure.

The MCP server is the installed console script driven by the official MCP SDK client over stdio; the hooks run as
subprocesses fed the documented hook input. Expectations come from docs/agents.md and docs/api.md. A failing test
is a finding."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.utils import timezone
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from dreamweb.models import AgentKey
from memory.models import AgentSession, ContextServe, MemoryEntry
from tests.factories import StoreFactory, TeamFactory, make_entry, make_skill
from tests.scoping import all_teams

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.all_teams]

BIN = Path(sys.executable).parent
SERVER = BIN / "dreamweb-mcp"
CLAUDE_HOOK = BIN / "dreamweb-claude-code-hook"
CODEX_NOTIFY = BIN / "dreamweb-codex-notify"
DOCUMENTED = {"get_context", "remember", "search_memory", "feedback", "list_skills", "read_skill", "update_memory"}
ALL_SCOPES = ["memory:read", "memory:write", "sessions:write", "skills:read"]
SEEDED = "Run the billing migrations with `make migrate-billing` before any deploy of invoicer."
REAL = Path("/work/shared/real/transcripts")
CC_REAL = REAL / "claude-code" / "codemie-4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"
CC_REAL_ID = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
CODEX_A = "019e1625-789d-76c0-80ab-3724b5ddb799"
CODEX_B = "019e1695-0522-7c83-8b39-0dd379793f80"


def key(team, scopes=ALL_SCOPES, name="probe2"):
    return AgentKey.generate(team=team, name=name, scopes=scopes, writable_stores=["*"])


def raw_key(team, scopes=ALL_SCOPES, name="probe2") -> str:
    return key(team, scopes, name)[1]


def params(url: str | None, api_key: str | None, **env) -> StdioServerParameters:
    environ = {"PATH": os.environ.get("PATH", ""), "DREAMWEB_AGENT": "probe-bot", **env}
    if url is not None:
        environ["DREAMWEB_URL"] = url
    if api_key is not None:
        environ["DREAMWEB_API_KEY"] = api_key
    return StdioServerParameters(command=str(SERVER), env=environ)


def run(p: StdioServerParameters, body, timeout: float = 60):
    async def go():
        async with stdio_client(p) as (read, write), ClientSession(read, write, read_timeout_seconds=timeout) as s:
            await s.initialize()
            return await body(s)

    return asyncio.run(asyncio.wait_for(go(), timeout=timeout * 2))


def calls(p: StdioServerParameters, seq: list[tuple[str, dict]], timeout: float = 60) -> list:
    async def body(session):
        return [await session.call_tool(name, args) for name, args in seq]

    return run(p, body, timeout)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def clean_error(result) -> str:
    t = text(result)
    print("\nTOOL-ERROR:", repr(t[:400]))
    assert result.is_error, f"expected a tool error, got: {t[:500]!r}"
    assert t.strip(), "error result has no message"
    assert "Traceback" not in t and 'File "' not in t, f"traceback in the tool error: {t[:800]!r}"
    return t


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def world():
    team = TeamFactory(slug="probe2-team")
    store = StoreFactory(team=team, slug="ops", agents_may_write=True)
    make_entry(store, key="billing-migrations", content=SEEDED)
    make_skill(team, name="rotate-certs", description="Rotate TLS certificates on the edge nodes.", body="# Rotate\n")
    other = TeamFactory(slug="probe2-other")
    secret = StoreFactory(team=other, slug="vault", agents_may_write=True)
    make_entry(secret, key="other-secret-entry", content="The other team's private runbook.")
    return team, store, other, secret


@pytest.fixture
def good(live_server, world):
    team = world[0]
    return params(live_server.url, raw_key(team), DREAMWEB_SESSION="probe2-session")


# ---------------------------------------------------------------- a TCP proxy that can go down and come back


class Proxy:
    """Forwards 127.0.0.1:port to the live server; stop() closes the port (connection refused), start() reopens it."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.port = free_port()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", self.port))
        lst.listen(50)
        self.listener = lst
        threading.Thread(target=self._accept, args=(lst,), daemon=True).start()

    def _accept(self, lst):
        while True:
            try:
                client, _ = lst.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream, timeout=30)
            except OSError:
                client.close()
                continue
            self.conns += [client, up]
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                b.shutdown(socket.SHUT_WR)

    def stop(self):
        if self.listener:
            with contextlib.suppress(OSError):
                self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
            self.listener = None
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        self.conns.clear()


@pytest.fixture
def proxy(live_server):
    host, port = live_server.url.removeprefix("http://").split(":")
    p = Proxy((host, int(port)))
    p.start()
    yield p
    p.stop()


# ---------------------------------------------------------------- a fake HTTP server


class _Fake(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.server.paths.append(self.path)
        if self.server.mode == "slow":
            time.sleep(30)
        elif self.server.mode == "html200":
            body = b"<html><body>Please log in to the guest Wi-Fi</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        elif self.server.mode == "reset":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        body = json.dumps({"detail": "Not found.", "code": "not_found"}).encode()
        with contextlib.suppress(OSError):
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    do_POST = do_GET


@pytest.fixture
def fake():
    servers = []

    def start(mode):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
        srv.mode = mode
        srv.paths = []
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


# ================================================================ tool listing


def test_every_documented_tool_is_listed_with_an_object_schema_and_description(good):
    """docs/agents.md lists seven tools, update_memory included; a model can only use a tool it sees described."""

    async def body(s):
        return (await s.list_tools()).tools

    tools = {t.name: t for t in run(good, body)}
    assert set(tools) >= DOCUMENTED, f"missing: {DOCUMENTED - set(tools)}"
    for name in DOCUMENTED:
        t = tools[name]
        assert t.description and len(t.description) > 20, name
        assert t.input_schema.get("type") == "object", (name, t.input_schema)


def test_update_memory_schema_requires_key_content_etag(good):
    """update_memory is documented with key, content, etag (and store): the write is conditional, so etag is needed."""

    async def body(s):
        return {t.name: t.input_schema for t in (await s.list_tools()).tools}

    schema = run(good, body)["update_memory"]
    assert {"key", "content", "etag"} <= set(schema.get("required", [])), schema
    assert "store" in schema.get("properties", {}), schema


def test_feedback_rating_schema_accepts_words_and_numbers(good):
    """rating is `helpful`, `unhelpful` or 1-5: the schema a client validates against must allow both kinds."""

    async def body(s):
        return {t.name: t.input_schema for t in (await s.list_tools()).tools}

    rating = run(good, body)["feedback"]["properties"]["rating"]
    dumped = json.dumps(rating)
    assert "string" in dumped and ("integer" in dumped or "number" in dumped), rating


# ================================================================ server down / restarting


def test_server_going_down_mid_session_gives_a_clear_error(proxy, world):
    """After a working call, the server goes away: the next call is a tool error pointing at DREAMWEB_URL."""
    p = params(proxy.url, raw_key(world[0]))

    async def body(s):
        first = await s.call_tool("list_skills", {})
        proxy.stop()
        second = await s.call_tool("get_context", {"query": "billing"})
        return first, second

    first, second = run(p, body)
    assert not first.is_error, text(first)
    t = clean_error(second)
    assert "DREAMWEB_URL" in t, t


def test_server_coming_back_mid_session_is_used_again(proxy, world):
    """Server restarted while the agent runs: once it is back, the same MCP process answers again (no relaunch)."""
    p = params(proxy.url, raw_key(world[0]))

    async def body(s):
        await s.call_tool("list_skills", {})
        proxy.stop()
        down = await s.call_tool("search_memory", {"query": "billing"})
        proxy.start()
        back = await s.call_tool("search_memory", {"query": "billing"})
        return down, back

    down, back = run(p, body)
    assert down.is_error
    assert not back.is_error and SEEDED in text(back), text(back)[:400]


def test_remember_while_down_then_again_when_back_stores_the_note(proxy, world):
    """The agent retries a failed `remember` once the server is back: the note arrives, once."""
    team = world[0]
    p = params(proxy.url, raw_key(team), DREAMWEB_SESSION="retry-session")
    note = "After a restart of the broker, purge the stale `invoicer.*` queues."

    async def body(s):
        proxy.stop()
        down = await s.call_tool("remember", {"content": note})
        proxy.start()
        back = await s.call_tool("remember", {"content": note})
        return down, back

    down, back = run(p, body)
    assert down.is_error and not back.is_error, text(back)
    assert AgentSession.objects.filter(team=team, metadata__note_of="retry-session").count() == 1


def test_connection_reset_by_server_is_a_clean_error(fake, world):
    """A proxy that drops the connection mid-request: a tool error with a readable message, no traceback."""
    _, url = fake("reset")
    (res, again) = calls(params(url, "dw_whatever"), [("list_skills", {}), ("list_skills", {})])
    t = clean_error(res)
    assert len(t) < 2000 and "DREAMWEB_URL" in t, t
    clean_error(again)


# ================================================================ keys


def test_key_revoked_mid_session_is_explained(live_server, world):
    """A key revoked while the agent runs: 401 explained, pointing at DREAMWEB_API_KEY."""
    agent_key, raw = key(world[0])
    p = params(live_server.url, raw)

    async def body(s):
        first = await s.call_tool("search_memory", {"query": "billing"})
        with all_teams():
            AgentKey.objects.filter(pk=agent_key.pk).update(revoked_at=timezone.now())
        second = await s.call_tool("search_memory", {"query": "billing"})
        return first, second

    first, second = run(p, body)
    assert not first.is_error
    t = clean_error(second)
    assert "DREAMWEB_API_KEY" in t and ("401" in t or "revoked" in t.lower()), t


@pytest.mark.parametrize("tool,args", [("remember", {"content": "x y z"}), ("feedback", {"key": "k", "rating": 5})])
def test_wrong_key_is_never_echoed(live_server, world, tool, args):
    """A refused key must not be repeated in the tool output (the model's transcript is stored and shared)."""
    secret = "dw_PROBE2secretKEYvalue0123456789abcdef"
    (res,) = calls(params(live_server.url, secret), [(tool, args)])
    t = clean_error(res)
    assert "PROBE2secret" not in t and "DREAMWEB_API_KEY" in t, t


def test_key_with_trailing_newline_works_or_is_explained(live_server, world):
    """A key read with `$(cat keyfile)` may carry a newline: it works, or the error names DREAMWEB_API_KEY."""
    raw = raw_key(world[0])
    (res,) = calls(params(live_server.url, raw + "\n"), [("list_skills", {})])
    if res.is_error:
        t = clean_error(res)
        assert "DREAMWEB_API_KEY" in t and raw not in t, t
    else:
        assert "rotate-certs" in text(res)


# ================================================================ slow server


def test_slow_server_remember_times_out(fake, world):
    """`remember` against a server that never answers: a tool error within DREAMWEB_TIMEOUT, not a hang."""
    _, url = fake("slow")
    started = time.monotonic()
    (res,) = calls(params(url, "dw_x", DREAMWEB_TIMEOUT="1"), [("remember", {"content": "slow note"})], timeout=40)
    elapsed = time.monotonic() - started
    t = clean_error(res)
    assert elapsed < 8, f"took {elapsed:.1f}s with DREAMWEB_TIMEOUT=1"
    assert "DREAMWEB_TIMEOUT" in t, t


def test_slow_server_does_not_block_other_tool_calls(fake, live_server, world):
    """Two calls in flight: the timeout of one does not make the process unresponsive for the protocol."""
    _, url = fake("slow")
    p = params(url, "dw_x", DREAMWEB_TIMEOUT="3")

    async def body(s):
        started = time.monotonic()
        results = await asyncio.gather(
            s.call_tool("get_context", {"query": "a"}), s.call_tool("search_memory", {"query": "b"}), s.list_tools()
        )
        return results, time.monotonic() - started

    (ctx, search, tools), elapsed = run(p, body, timeout=40)
    assert ctx.is_error and search.is_error and tools.tools
    assert elapsed < 8, f"two concurrent calls with DREAMWEB_TIMEOUT=3 took {elapsed:.1f}s (serialised?)"


# ================================================================ huge memory and the budget


@pytest.fixture
def big_store(world):
    team, store = world[0], world[1]
    for i in range(150):
        size = 6000 if i % 3 == 0 else 150
        filler = ("deploy invoicer carefully " * (size // 26 + 1))[:size]
        make_entry(store, key=f"bulk-{i:03d}", content=f"<<S{i}>> {filler} <<E{i}>>")
    return team, store


def test_get_context_respects_max_tokens_with_huge_memory(live_server, big_store):
    """docs/api.md: never more than max_tokens tokens of text (about four characters a token)."""
    p = params(live_server.url, raw_key(big_store[0]))
    (res,) = calls(p, [("get_context", {"query": "deploy invoicer", "max_tokens": 300})])
    assert not res.is_error, text(res)[:300]
    t = text(res)
    assert len(t) <= 300 * 4 + 400, f"{len(t)} characters for max_tokens=300"


def test_get_context_never_cuts_an_entry(live_server, big_store):
    """An entry that does not fit is skipped, not cut: every entry started in the text is finished."""
    p = params(live_server.url, raw_key(big_store[0]))
    (res,) = calls(p, [("get_context", {"query": "deploy invoicer", "max_tokens": 2500})])
    t = text(res)
    starts = set(re.findall(r"<<S(\d+)>>", t))
    ends = set(re.findall(r"<<E(\d+)>>", t))
    assert starts, t[:300]
    assert starts == ends, f"cut entries: {sorted(starts - ends)}"


def test_hook_session_start_respects_max_tokens(live_server, big_store):
    """The SessionStart hook's additionalContext stays within DREAMWEB_MAX_TOKENS."""
    raw = raw_key(big_store[0])
    doc = {"session_id": "s-budget", "transcript_path": "/nowhere.jsonl", "cwd": "/", "hook_event_name": "SessionStart"}
    done = run_hook(doc, hook_env(live_server.url, raw, DREAMWEB_MAX_TOKENS="200", DREAMWEB_STORE="ops"))
    assert done.returncode == 0, done.stderr
    ctx = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert 0 < len(ctx) <= 200 * 4 + 200, len(ctx)


# ================================================================ odd text in remember / feedback


def test_remember_rtl_and_bidi_controls_roundtrip(good, world):
    """Notes are user text: RTL, bidi overrides, ZWJ emoji and combining marks come back exactly as written."""
    note = "שלום עולם \u202eevil\u202c مرحبا 👩‍👩‍👧‍👦 e\u0301 🇫🇷 — done"
    (res,) = calls(good, [("remember", {"content": note})])
    assert not res.is_error, text(res)
    s = AgentSession.objects.get(team=world[0], metadata__note_of="probe2-session")
    assert s.events[0]["content"] == note


def raw_rpc(p: StdioServerParameters, raw_calls: list[str], timeout: float = 30) -> list[dict]:
    """Speak JSON-RPC to the server by hand (as a Node client would, escapes and all); one answer per raw call."""
    proc = subprocess.Popen(
        [p.command], env=p.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    answers: list[dict] = []
    try:
        lines = [json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), *raw_calls]
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        reader = threading.Thread(target=lambda: [answers.append(json.loads(ln)) for ln in proc.stdout], daemon=True)
        reader.start()
        while time.monotonic() < deadline and len([a for a in answers if a.get("id")]) < len(raw_calls):
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return [a for a in answers if a.get("id")]


def test_remember_lone_surrogate_does_not_kill_the_server(good, world):
    """A cut emoji (a lone surrogate, sent as the JSON escape \\ud83d) in a note: stored (as U+FFFD) or a clean
    tool error, and the server keeps answering the next call."""
    note = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        '"params":{"name":"remember","arguments":{"content":"cut \\ud83d x"}}}'
    )
    after = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_skills","arguments":{}}}'
    answers = {a["id"]: a for a in raw_rpc(good, [note, after], timeout=15)}
    print("\nANSWERS:", json.dumps(answers)[:800])
    assert 1 in answers and 2 in answers, answers
    first = answers[1].get("result", {})
    if first.get("isError"):
        assert "Traceback" not in json.dumps(first)
    else:
        assert "error" not in answers[1], answers[1]
    assert "rotate-certs" in json.dumps(answers[2].get("result"))


def test_feedback_comment_with_nul_and_rtl_is_counted(good, world):
    """A comment pasted from a terminal (NUL byte, RTL text) must not cost the rating: transcripts get U+FFFD for NUL
    (docs/session-formats.md), a feedback comment should too, rather than the whole rating being refused."""
    store = world[1]
    before = MemoryEntry.objects.get(store=store, key="billing-migrations").rating_count
    comment = "خطأ: the command\x00 failed ⛔ " + "x" * 3000
    (res,) = calls(good, [("feedback", {"key": "billing-migrations", "rating": "helpful", "comment": comment})])
    assert not res.is_error, text(res)[:400]
    assert MemoryEntry.objects.get(store=store, key="billing-migrations").rating_count == before + 1


def test_remember_200k_characters_is_stored_or_refused_clearly(good, world):
    """A very long note (a pasted log): stored whole, or a clean error that says it is too long."""
    note = ("Σ long note line with ünïcode " * 7000)[:200_000]
    (res,) = calls(good, [("remember", {"content": note})])
    if res.is_error:
        t = clean_error(res)
        assert re.search(r"too (long|large)|413|limit", t, re.I), t
    else:
        s = AgentSession.objects.get(team=world[0], metadata__note_of="probe2-session")
        assert s.events[0]["content"] == note


# ================================================================ remember: once


def test_remember_twice_is_stored_once_and_not_an_error(good, world):
    """docs: the same note remembered twice in one session has one id and is stored once; the second call is fine."""
    note = "Use `pnpm`, not `npm`, in the web/ folder."
    (a, b) = calls(good, [("remember", {"content": note}), ("remember", {"content": note})])
    assert not a.is_error and not b.is_error, (text(a), text(b))
    assert AgentSession.objects.filter(team=world[0], metadata__note_of="probe2-session").count() == 1


def test_same_note_raced_concurrently_is_stored_once(good, world):
    """Eight concurrent `remember` calls with the same text: every call succeeds, one note session."""
    note = "The CI cache key must include the lockfile hash."

    async def body(s):
        return await asyncio.gather(*[s.call_tool("remember", {"content": note}) for _ in range(8)])

    results = run(good, body)
    assert [r.is_error for r in results] == [False] * 8, [text(r)[:200] for r in results if r.is_error]
    assert AgentSession.objects.filter(team=world[0], metadata__note_of="probe2-session").count() == 1


def test_same_note_in_two_sessions_is_two_notes(live_server, world):
    """One note per session: the same text remembered in two different sessions is two pieces of evidence."""
    team = world[0]
    raw = raw_key(team)
    note = "Staging DB password rotates every Monday; re-read it from the vault."
    calls(params(live_server.url, raw, DREAMWEB_SESSION="sess-one"), [("remember", {"content": note})])
    calls(params(live_server.url, raw, DREAMWEB_SESSION="sess-two"), [("remember", {"content": note})])
    owners = AgentSession.objects.filter(team=team, metadata__has_key="note_of")
    assert sorted(m["note_of"] for m in owners.values_list("metadata", flat=True)) == ["sess-one", "sess-two"]


# ================================================================ the session of a call


def test_codex_thread_id_meta_links_the_context_serve(live_server, world):
    """Codex sends `_meta.threadId` with each tool call: the serve is recorded under that thread id."""
    team = world[0]
    p = params(live_server.url, raw_key(team), DREAMWEB_AGENT="codex")

    async def body(s):
        return await s.call_tool("get_context", {"query": "billing"}, meta={"threadId": CODEX_A})

    res = run(p, body)
    assert not res.is_error, text(res)
    serves = list(ContextServe.objects.filter(team=team).values_list("session_external_id", flat=True))
    assert serves == [CODEX_A], serves


def test_claude_code_session_env_links_the_note(live_server, world):
    """Claude Code sets CLAUDE_CODE_SESSION_ID for its MCP servers: the note names that session."""
    team = world[0]
    p = params(live_server.url, raw_key(team), CLAUDE_CODE_SESSION_ID="cc-session-777")
    (res,) = calls(p, [("remember", {"content": "Prefer `rg` over `grep -r` here."})])
    assert not res.is_error, text(res)
    assert AgentSession.objects.filter(team=team, metadata__note_of="cc-session-777").count() == 1


# ================================================================ read_skill


def test_read_skill_other_case_is_found_or_cleanly_missing(good):
    """`Rotate-Certs` for `rotate-certs`: the skill, or a clean not-found error that suggests list_skills."""
    (res,) = calls(good, [("read_skill", {"name": "Rotate-Certs"})])
    if res.is_error:
        t = clean_error(res)
        assert "list_skills" in t or "not found" in t.lower(), t
    else:
        assert "# Rotate" in text(res)


@pytest.mark.parametrize("path", ["../../../../etc/passwd", "..%2f..%2fapi%2fv1%2fstores%2f", "/etc/passwd"])
def test_read_skill_path_traversal_in_path(good, path):
    """A `path` that climbs out of the skill is a clean error, never another resource."""
    (res, after) = calls(good, [("read_skill", {"name": "rotate-certs", "path": path}), ("list_skills", {})])
    t = clean_error(res)
    assert "root:" not in t and "vault" not in t and "ops" not in t.split(), t
    assert not after.is_error


def test_read_skill_unknown_name_is_not_found(good):
    """An unknown skill: a tool error saying it does not exist (not a generic failure)."""
    (res,) = calls(good, [("read_skill", {"name": "no-such-skill-x"})])
    t = clean_error(res)
    assert "no-such-skill-x" in t and ("not found" in t.lower() or "no skill" in t.lower() or "404" in t), t


# ================================================================ feedback across teams


def _normalise(t: str, *names: str) -> str:
    for n in names:
        t = t.replace(n, "<KEY>")
    return t


def test_feedback_on_other_teams_entry_does_not_reveal_it(good, world):
    """Feedback for another team's key (naming its store) reads exactly like feedback for a key that exists nowhere."""
    (a, b) = calls(
        good,
        [
            ("feedback", {"key": "other-secret-entry", "rating": 1, "store": "vault"}),
            ("feedback", {"key": "never-existed-entry", "rating": 1, "store": "vault"}),
        ],
    )
    ta, tb = clean_error(a), clean_error(b)
    assert _normalise(ta, "other-secret-entry") == _normalise(tb, "never-existed-entry"), (ta, tb)


def test_feedback_on_other_teams_entry_leaves_its_rating(good, world):
    """Another team's entry is not rated by this team's key, whatever arguments the model tries."""
    secret = world[3]
    before = MemoryEntry.objects.get(store=secret, key="other-secret-entry").rating_count
    calls(
        good,
        [
            ("feedback", {"key": "other-secret-entry", "rating": 1}),
            ("feedback", {"key": "other-secret-entry", "rating": 1, "store": "vault"}),
            ("feedback", {"key": "vault/other-secret-entry", "rating": 1}),
        ],
    )
    assert MemoryEntry.objects.get(store=secret, key="other-secret-entry").rating_count == before


# ================================================================ environment variables


def test_url_with_trailing_slash_works(live_server, world):
    """DREAMWEB_URL=http://host:port/ (copied from a browser) works like without the slash."""
    (res,) = calls(params(live_server.url + "/", raw_key(world[0])), [("search_memory", {"query": "billing"})])
    assert not res.is_error and SEEDED in text(res), text(res)[:300]


def test_url_with_path_prefix_keeps_the_prefix(fake):
    """Dreamweb behind a reverse proxy at /dreamweb: requests go to /dreamweb/api/v1/..., not /api/v1/..."""
    srv, url = fake("404")
    calls(params(url + "/dreamweb", "dw_x"), [("list_skills", {})])
    assert srv.paths and all(p.startswith("/dreamweb/api/") for p in srv.paths), srv.paths


def test_url_without_scheme_works_or_names_the_variable(live_server, world):
    """DREAMWEB_URL=127.0.0.1:8000: it works (http assumed) or the error names DREAMWEB_URL, no traceback."""
    bare = live_server.url.removeprefix("http://")
    (res,) = calls(params(bare, raw_key(world[0])), [("list_skills", {})])
    if res.is_error:
        assert "DREAMWEB_URL" in clean_error(res)
    else:
        assert "rotate-certs" in text(res)


def test_url_with_surrounding_whitespace_works_or_names_the_variable(live_server, world):
    """A URL pasted with a trailing newline/space: works, or a clean error naming DREAMWEB_URL."""
    (res,) = calls(params(" " + live_server.url + "\n", raw_key(world[0])), [("list_skills", {})])
    if res.is_error:
        assert "DREAMWEB_URL" in clean_error(res)
    else:
        assert "rotate-certs" in text(res)


# ================================================================ hooks


def hook_env(url: str, api_key: str, **extra) -> dict:
    return {"PATH": os.environ.get("PATH", ""), "DREAMWEB_URL": url, "DREAMWEB_API_KEY": api_key, **extra}


def run_hook(document, env: dict, timeout: float = 90) -> subprocess.CompletedProcess:
    data = document if isinstance(document, str) else json.dumps(document)
    return subprocess.run(
        [str(CLAUDE_HOOK)], input=data, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def end_doc(transcript: Path, session_id: str, event: str = "SessionEnd") -> dict:
    return {
        "session_id": session_id,
        "transcript_path": str(transcript),
        "cwd": "/tmp/private",
        "permission_mode": "default",
        "hook_event_name": event,
        "reason": "prompt_input_exit",
    }


def cc_line(session_id: str, n: int, role: str, content: str) -> str:
    msg = {"role": role, "content": content}
    if role == "assistant":
        msg = {
            "model": "claude-sonnet-4-5",
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": content}],
        }
    return json.dumps(
        {
            "parentUuid": None if n == 0 else f"u{n - 1:05d}",
            "isSidechain": False,
            "userType": "external",
            "cwd": "/tmp/private",
            "sessionId": session_id,
            "version": "2.0.64",
            "type": role,
            "message": msg,
            "uuid": f"u{n:05d}",
            "timestamp": "2026-05-11T10:00:00.000Z",
        }
    )


def project_dir(tmp_path: Path) -> Path:
    d = tmp_path / ".claude" / "projects" / "-tmp-private"
    d.mkdir(parents=True)
    return d


def sessions_key(team) -> str:
    return raw_key(team, scopes=["sessions:write", "memory:read"], name="hook")


def test_hook_truncated_last_line_still_stores_the_session(live_server, tmp_path):
    """SessionEnd fired while the last line is mid-write: the complete lines arrive under the transcript's id."""
    team = TeamFactory(slug="hook-trunc")
    transcript = project_dir(tmp_path) / f"{CC_REAL_ID}.jsonl"
    shutil.copyfile(CC_REAL, transcript)
    with transcript.open("a") as f:
        f.write('{"parentUuid":"x","sessionId":"' + CC_REAL_ID + '","type":"assistant","message":{"role":"assis')
    done = run_hook(end_doc(transcript, CC_REAL_ID), hook_env(live_server.url, sessions_key(team)))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    s = AgentSession.objects.get(team=team, external_id=CC_REAL_ID)
    assert s.agent == "claude-code" and s.event_count > 0


def test_hook_truncated_transcript_has_the_same_events_as_the_whole_one(live_server, tmp_path):
    """The cut-off line is the only thing lost: the events equal those of the file without it."""
    t_cut, t_whole = TeamFactory(slug="hook-cut"), TeamFactory(slug="hook-whole")
    d1, d2 = project_dir(tmp_path / "a"), project_dir(tmp_path / "b")
    cut, whole = d1 / f"{CC_REAL_ID}.jsonl", d2 / f"{CC_REAL_ID}.jsonl"
    shutil.copyfile(CC_REAL, cut)
    shutil.copyfile(CC_REAL, whole)
    with cut.open("a") as f:
        f.write('{"parentUuid":"x","sessionId":"' + CC_REAL_ID + '","type":"user","mess')
    run_hook(end_doc(cut, CC_REAL_ID), hook_env(live_server.url, sessions_key(t_cut)))
    run_hook(end_doc(whole, CC_REAL_ID), hook_env(live_server.url, sessions_key(t_whole)))
    a = AgentSession.objects.get(team=t_cut, external_id=CC_REAL_ID)
    b = AgentSession.objects.get(team=t_whole, external_id=CC_REAL_ID)
    assert a.events == b.events


@pytest.mark.xfail(
    strict=True,
    reason=(
        "by design (docs/session-formats.md): a session past DREAMWEB_MAX_SESSION_BYTES is refused whole (413, "
        "the limit named), nothing is cut to fit; raise the setting for transcripts with very large outputs"
    ),
)
def test_hook_huge_transcript_arrives_in_time(live_server, tmp_path):
    """A long session (~11 MB transcript, 2,400 turns, common for a day-long Claude Code session): pushed whole, within
    Claude Code's 60 s hook timeout. The hook has no spool or retry, so a refused push loses the session for good."""
    team = TeamFactory(slug="hook-huge")
    sid = "aaaaaaaa-1111-4222-8333-444444444444"
    transcript = project_dir(tmp_path) / f"{sid}.jsonl"
    chunk = "log output line with some words in it; " * 120
    with transcript.open("w") as f:
        for n in range(2400):
            role = "user" if n % 2 == 0 else "assistant"
            f.write(cc_line(sid, n, role, f"turn {n}: {chunk}") + "\n")
    started = time.monotonic()
    done = run_hook(end_doc(transcript, sid), hook_env(live_server.url, sessions_key(team)), timeout=120)
    elapsed = time.monotonic() - started
    print("\nHOOK-STDERR:", done.stderr[:500], f"{elapsed:.1f}s", transcript.stat().st_size)
    assert done.returncode == 0
    assert elapsed < 60, f"the hook took {elapsed:.1f}s"
    s = AgentSession.objects.get(team=team, external_id=sid)
    assert s.event_count == 2400, s.event_count


def test_hook_server_down_exits_zero_with_one_line(tmp_path):
    """SessionEnd with the server down: exit 0, quickly, exactly one line on stderr (docs: one line)."""
    transcript = project_dir(tmp_path) / f"{CC_REAL_ID}.jsonl"
    shutil.copyfile(CC_REAL, transcript)
    started = time.monotonic()
    done = run_hook(end_doc(transcript, CC_REAL_ID), hook_env(f"http://127.0.0.1:{free_port()}", "dw_k"))
    elapsed = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == "" and elapsed < 15
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr


def test_hook_slow_server_is_bounded_by_timeout(fake, tmp_path):
    """SessionEnd against a server that hangs: with DREAMWEB_TIMEOUT=2 the hook returns within seconds, exit 0."""
    _, url = fake("slow")
    transcript = project_dir(tmp_path) / f"{CC_REAL_ID}.jsonl"
    shutil.copyfile(CC_REAL, transcript)
    started = time.monotonic()
    done = run_hook(end_doc(transcript, CC_REAL_ID), hook_env(url, "dw_k", DREAMWEB_TIMEOUT="2"), timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 0 and elapsed < 10, (elapsed, done.stderr)


@pytest.mark.parametrize("stdin", ["", "null", "[]", '{"hook_event_name": 5}', '{"hook_event_name": "SessionEnd"}'])
def test_hook_odd_input_never_breaks_the_agent(live_server, world, stdin):
    """Whatever Claude Code hands the hook, it exits 0 with no traceback and no stdout garbage."""
    done = run_hook(stdin, hook_env(live_server.url, sessions_key(world[0])), timeout=30)
    assert done.returncode == 0 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr


def test_hook_transcript_path_is_a_directory(live_server, world, tmp_path):
    """transcript_path pointing at a folder: exit 0, one clear line, no traceback."""
    done = run_hook(end_doc(tmp_path, "sid-dir"), hook_env(live_server.url, sessions_key(world[0])), timeout=30)
    assert done.returncode == 0 and "Traceback" not in done.stderr and done.stderr.strip(), done.stderr


def test_hook_stop_then_session_end_keeps_the_whole_session(live_server, tmp_path):
    """docs: the hook also pushes on Stop if registered. A user who registers it on Stop and SessionEnd expects the
    stored session to be the whole one, not the first turn (a longer version under the same id is a 409)."""
    team = TeamFactory(slug="hook-stop")
    sid = "bbbbbbbb-1111-4222-8333-444444444444"
    transcript = project_dir(tmp_path) / f"{sid}.jsonl"
    transcript.write_text(
        cc_line(sid, 0, "user", "fix the flaky test") + "\n" + cc_line(sid, 1, "assistant", "Looking.") + "\n"
    )
    env = hook_env(live_server.url, sessions_key(team))
    run_hook(end_doc(transcript, sid, "Stop"), env)
    with transcript.open("a") as f:
        f.write(cc_line(sid, 2, "user", "now also update the changelog") + "\n")
        f.write(cc_line(sid, 3, "assistant", "Changelog updated with the SECOND-TURN fix.") + "\n")
    done = run_hook(end_doc(transcript, sid), env)
    assert done.returncode == 0
    s = AgentSession.objects.get(team=team, external_id=sid)
    assert "SECOND-TURN" in json.dumps(s.events), f"stored {s.event_count} events; stderr: {done.stderr}"


def test_hook_session_end_uses_dreamweb_agent(live_server, tmp_path):
    """DREAMWEB_AGENT names the agent for context; the pushed session is stored under the same agent name."""
    team = TeamFactory(slug="hook-agent")
    transcript = project_dir(tmp_path) / f"{CC_REAL_ID}.jsonl"
    shutil.copyfile(CC_REAL, transcript)
    run_hook(end_doc(transcript, CC_REAL_ID), hook_env(live_server.url, sessions_key(team), DREAMWEB_AGENT="web-bot"))
    s = AgentSession.objects.get(team=team, external_id=CC_REAL_ID)
    assert s.agent == "web-bot", s.agent


def _codex_home(tmp_path: Path) -> Path:
    home = tmp_path / "codex"
    day = home / "sessions" / "2026" / "05" / "11"
    day.mkdir(parents=True)
    for src in (REAL / "codex").glob("codemie-rollout-*.jsonl"):
        shutil.copyfile(src, day / src.name.removeprefix("codemie-"))
    return home


def _notify(thread: str, env: dict) -> subprocess.CompletedProcess:
    doc = {
        "type": "agent-turn-complete",
        "thread-id": thread,
        "turn-id": "1",
        "cwd": "/repo",
        "input-messages": ["go"],
        "last-assistant-message": "done",
    }
    return subprocess.run([str(CODEX_NOTIFY), json.dumps(doc)], env=env, capture_output=True, text=True, timeout=60)


def test_codex_notify_retries_a_push_that_failed_while_down(live_server, tmp_path):
    """docs: every recorded rollout not pushed at its present size is posted; a push lost to a down server is sent at
    a later turn (of any thread) once the server is back."""
    team = TeamFactory(slug="codex-retry")
    home = _codex_home(tmp_path)
    raw = sessions_key(team)
    down = _notify(
        CODEX_A, hook_env(f"http://127.0.0.1:{free_port()}", raw, CODEX_HOME=str(home), DREAMWEB_SETTLE_SECONDS="0")
    )
    assert down.returncode == 0
    up = _notify(CODEX_B, hook_env(live_server.url, raw, CODEX_HOME=str(home), DREAMWEB_SETTLE_SECONDS="0"))
    assert up.returncode == 0, up.stderr
    got = set(AgentSession.objects.filter(team=team).values_list("external_id", flat=True))
    assert {CODEX_A, CODEX_B} <= got, (got, up.stderr)


def test_codex_notify_server_down_exits_zero_quickly(tmp_path):
    """The notify program with the server down: exit 0, one line, quickly (Codex waits for it)."""
    home = _codex_home(tmp_path)
    started = time.monotonic()
    done = _notify(
        CODEX_A, hook_env(f"http://127.0.0.1:{free_port()}", "dw_k", CODEX_HOME=str(home), DREAMWEB_SETTLE_SECONDS="0")
    )
    assert done.returncode == 0 and time.monotonic() - started < 15
    assert len([ln for ln in done.stderr.splitlines() if ln.strip()]) == 1, done.stderr


def test_hook_large_transcript_under_the_limit_arrives_quickly(live_server, tmp_path):
    """A 4 MB transcript (800 turns): stored whole, and the hook returns well within Claude Code's 60 s timeout."""
    team = TeamFactory(slug="hook-large")
    sid = "cccccccc-1111-4222-8333-444444444444"
    transcript = project_dir(tmp_path) / f"{sid}.jsonl"
    chunk = "log output line with some words in it; " * 120
    with transcript.open("w") as f:
        for n in range(800):
            f.write(cc_line(sid, n, "user" if n % 2 == 0 else "assistant", f"turn {n}: {chunk}") + "\n")
    started = time.monotonic()
    done = run_hook(end_doc(transcript, sid), hook_env(live_server.url, sessions_key(team)), timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 0 and elapsed < 30, (elapsed, done.stderr)
    assert AgentSession.objects.get(team=team, external_id=sid).event_count == 800


def test_hook_stores_the_transcripts_session_id(live_server, tmp_path):
    """The hook input names one session id, the file another (a resumed session): what arrives is the file's
    session, under the sessionId the transcript holds."""
    team = TeamFactory(slug="hook-ids")
    transcript = project_dir(tmp_path) / f"{CC_REAL_ID}.jsonl"
    shutil.copyfile(CC_REAL, transcript)
    doc = end_doc(transcript, "99999999-0000-4000-8000-000000000000")
    done = run_hook(doc, hook_env(live_server.url, sessions_key(team)))
    assert done.returncode == 0
    ids = list(AgentSession.objects.filter(team=team).values_list("external_id", flat=True))
    assert ids == [CC_REAL_ID], (ids, done.stderr)


def test_hook_transcript_with_nul_and_latin1_bytes_is_stored(live_server, tmp_path):
    """docs/session-formats.md: NUL and non-UTF-8 bytes become U+FFFD; one bad byte never costs the session."""
    team = TeamFactory(slug="hook-bytes")
    sid = "dddddddd-1111-4222-8333-444444444444"
    transcript = project_dir(tmp_path) / f"{sid}.jsonl"
    good_lines = cc_line(sid, 0, "user", "show the log") + "\n"
    bad = cc_line(sid, 1, "assistant", "binary \\u0000 here and caf@ there").replace("@", "\x00") + "\n"
    transcript.write_bytes(good_lines.encode() + bad.encode().replace(b"\x00", b"\xe9"))
    done = run_hook(end_doc(transcript, sid), hook_env(live_server.url, sessions_key(team)))
    assert done.returncode == 0
    s = AgentSession.objects.filter(team=team, external_id=sid).first()
    assert s is not None and s.event_count == 2, done.stderr


# ================================================================ more isolation and odd answers


def test_update_memory_concurrent_writes_with_one_etag_one_wins(good, world):
    """Two agents' writes with the same etag at once: exactly one is applied, the other is told it is stale."""
    store = world[1]

    async def body(s):
        found = await s.call_tool("search_memory", {"query": "billing migrations"})
        tag = re.search(r"etag: (\S+)", text(found)).group(1)
        return await asyncio.gather(
            *[
                s.call_tool(
                    "update_memory", {"key": "billing-migrations", "content": f"Writer {i} version.", "etag": tag}
                )
                for i in range(2)
            ]
        )

    results = run(good, body)
    ok = [r for r in results if not r.is_error]
    assert len(ok) == 1, [text(r)[:200] for r in results]
    loser = next(r for r in results if r.is_error)
    assert "search_memory" in text(loser), text(loser)
    content = MemoryEntry.objects.get(store=store, key="billing-migrations").content
    assert content in ("Writer 0 version.", "Writer 1 version.")


def test_update_memory_other_teams_entry_reads_like_a_missing_one(good, world):
    """update_memory on another team's store/key answers exactly as for a key that exists nowhere."""
    (a, b) = calls(
        good,
        [
            ("update_memory", {"key": "other-secret-entry", "content": "x", "etag": '"1.1"', "store": "vault"}),
            ("update_memory", {"key": "never-existed-entry", "content": "x", "etag": '"1.1"', "store": "vault"}),
        ],
    )
    ta, tb = clean_error(a), clean_error(b)
    assert _normalise(ta, "other-secret-entry") == _normalise(tb, "never-existed-entry"), (ta, tb)


def test_dreamweb_store_of_other_team_reads_like_a_missing_store(live_server, world):
    """DREAMWEB_STORE naming another team's store must not reveal that the store exists."""
    raw = raw_key(world[0])
    (a,) = calls(params(live_server.url, raw, DREAMWEB_STORE="vault"), [("get_context", {"query": "x"})])
    (b,) = calls(params(live_server.url, raw, DREAMWEB_STORE="nowhere-st"), [("get_context", {"query": "x"})])
    ta, tb = clean_error(a), clean_error(b)
    assert _normalise(ta, "vault") == _normalise(tb, "nowhere-st"), (ta, tb)


def test_search_memory_never_shows_another_teams_entry(good):
    """Another team's entry never comes back from search, however precisely it is asked for."""
    (res,) = calls(good, [("search_memory", {"query": "other team's private runbook other-secret-entry"})])
    assert "The other team's private runbook." not in text(res) and "vault/" not in text(res), text(res)


def test_html_page_with_200_is_an_error_not_memory(fake):
    """A captive portal / SSO proxy answering 200 with an HTML page: a tool error, not that page served as memory."""
    _, url = fake("html200")
    (res,) = calls(params(url, "dw_x"), [("get_context", {"query": "x"})])
    t = clean_error(res)
    assert "guest Wi-Fi" not in t or "DREAMWEB_URL" in t, t
