"""dreamweb-mcp end to end: a live server, the console script started as a subprocess by the official MCP client over
stdio, its tools listed and called. get_context serves the store's entries (and records the serve under the
agent's session), remember becomes a note the next dream sees (once, even when the session's transcript repeats
it), and a stale write, a refused key, a missing scope or a server that is down are clear tool errors."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from dreamweb.models import AgentKey
from memory.api.common import etag
from memory.models import AgentSession, ContextServe, Feedback, MemoryEntry
from memory.services import Author, update_entry
from memory.sessions import store_batch, validate_session
from reviews import dreams
from reviews.models import SessionAnalysis
from tests.factories import StoreFactory, TeamFactory, make_entry, make_skill

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.all_teams]

SERVER = Path(sys.executable).parent / "dreamweb-mcp"
TOOLS = {"get_context", "remember", "search_memory", "feedback", "list_skills", "read_skill", "update_memory"}
SESSION = "0b6f3c1e-5c1a-4c55-9d1e-2f1f7c1a9e01"  # as Claude Code names it (CLAUDE_CODE_SESSION_ID)
NOTE = "Staging needs `make migrate` before `make release`."


def key(team, scopes, name="mcp") -> str:
    _, raw = AgentKey.generate(team=team, name=name, scopes=scopes, writable_stores=["*"])
    return raw


def server(url: str, api_key: str, **env) -> StdioServerParameters:
    environ = {"DREAMWEB_URL": url, "DREAMWEB_API_KEY": api_key, "DREAMWEB_AGENT": "deploy-bot", **env}
    return StdioServerParameters(command=str(SERVER), env=environ)


def run(params: StdioServerParameters, calls: list[tuple[str, dict]]) -> tuple[set[str], list]:
    """Start the server, list its tools, make the calls in order; (tool names, results)."""

    async def session():
        async with Client(params, read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            results = [await client.call_tool(name, args) for name, args in calls]
            return names, results

    return asyncio.run(session())


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.fixture
def world():
    team = TeamFactory(slug="mcp-team")
    store = StoreFactory(team=team, slug="eng", agents_may_write=True)
    make_entry(store, key="deploy-command", content="Deploy with `make release`, never `make deploy`.")
    make_entry(store, key="other-bot-secret-sauce", content="Only for the other bot.", scope_agent="other-bot")
    make_skill(team, name="release-process", description="How to release to production.", body="# Release\nSteps.\n")
    other = TeamFactory(slug="other-team")
    make_entry(StoreFactory(team=other, slug="eng"), key="their-entry", content="Another team's memory.")
    return team, store


@pytest.mark.skipif(not SERVER.exists(), reason="dreamweb-mcp is not installed (pip install -e ./clients/python)")
def test_tools_over_stdio_against_a_live_server(live_server, world):
    team, store = world
    raw = key(team, ["memory:read", "memory:write", "sessions:write", "skills:read"])
    names, results = run(
        server(live_server.url, raw, DREAMWEB_SESSION=SESSION),
        [
            ("get_context", {"query": "deploy a release", "max_tokens": 800}),
            ("search_memory", {"query": "release"}),
            ("feedback", {"key": "deploy-command", "rating": "helpful", "comment": "exactly right"}),
            ("list_skills", {}),
            ("read_skill", {"name": "release-process"}),
            ("remember", {"content": NOTE}),
            ("remember", {"content": NOTE}),
        ],
    )
    context, search, feedback, skills, skill, noted, again = results
    assert names >= TOOLS

    # get_context: the store's entries for this agent (not another agent's, not another team's) and the skills.
    assert not context.is_error
    assert "Deploy with `make release`, never `make deploy`." in text(context)
    assert "release-process" in text(context)
    assert "Only for the other bot." not in text(context) and "Another team" not in text(context)
    serve = ContextServe.objects.get(team=team)
    assert (serve.agent, serve.session_external_id) == ("deploy-bot", SESSION)

    entry = MemoryEntry.objects.get(store=store, key="deploy-command")
    read_etag = etag(entry)
    assert "[eng/deploy-command]" in text(search) and f"etag: {read_etag}" in text(search)
    assert not feedback.is_error and Feedback.objects.filter(entry__key="deploy-command").count() == 1
    assert "- release-process: How to release to production." in text(skills)
    assert "# Release\nSteps." in text(skill)

    # remember: one note session linked to the agent's session; the same note again stores nothing new.
    assert not noted.is_error and "Noted" in text(noted)
    assert not again.is_error and "Already noted" in text(again)
    notes = AgentSession.objects.filter(team=team, metadata__note_of=SESSION)
    assert notes.count() == 1
    note = notes.get()
    assert note.agent == "deploy-bot"
    assert [(e["type"], e["content"]) for e in note.events] == [("memory_write", NOTE)]

    # Another agent changes the entry after this one read it: the write with the etag read is stale, a tool error
    # that says what to do, and nothing is written; with the etag read again it goes through.
    entry = update_entry(entry, base_version=entry.version, author=Author.system(), content="Deploy with `make rel`.")
    _, (stale, reread) = run(
        server(live_server.url, raw, DREAMWEB_SESSION=SESSION),
        [
            ("update_memory", {"key": "deploy-command", "content": "Deploy with `make ship`.", "etag": read_etag}),
            ("search_memory", {"query": "deploy"}),
        ],
    )
    assert stale.is_error
    assert "changed since you read it" in text(stale) and "search_memory" in text(stale)
    assert f"its etag is now {etag(entry)}" in text(stale) and f"etag: {etag(entry)}" in text(reread)
    assert MemoryEntry.objects.get(store=store, key="deploy-command").content == "Deploy with `make rel`."
    _, (written,) = run(
        server(live_server.url, raw, DREAMWEB_SESSION=SESSION),
        [("update_memory", {"key": "deploy-command", "content": "Deploy with `make ship`.", "etag": etag(entry)})],
    )
    assert not written.is_error and "eng/deploy-command is now version 3" in text(written)
    assert MemoryEntry.objects.get(store=store, key="deploy-command").content == "Deploy with `make ship`."

    # The session's transcript arrives later holding the same note (the importers turn the remember call into an
    # in-band note): the next dream sees the note once, from the note session, not again from the transcript.
    transcript = {
        "external_id": SESSION,
        "agent": "deploy-bot",
        "events": [
            {"type": "message", "role": "user", "content": "Ship the release to staging."},
            {"type": "tool_call", "id": "toolu_1", "name": "mcp__dreamweb__remember", "arguments": {"content": NOTE}},
            {"type": "tool_result", "call_id": "toolu_1", "content": "Noted."},
            {"type": "memory_write", "content": NOTE},
            {"type": "memory_write", "content": "The staging database is `stage-db-2`."},
        ],
    }
    store_batch(team, [validate_session(transcript)])
    dreams.start_run(store, analyzer="rules", wait=True)
    findings = {
        a.session.external_id: [f["kind"] for f in a.findings]
        for a in SessionAnalysis.objects.filter(run__store=store).select_related("session")
    }
    assert findings[note.external_id] == ["note"]
    transcript_notes = [
        f["summary"]
        for a in SessionAnalysis.objects.filter(session__external_id=SESSION)
        for f in a.findings
        if f["kind"] == "note"
    ]
    assert transcript_notes and all("stage-db-2" in s for s in transcript_notes)


@pytest.mark.skipif(not SERVER.exists(), reason="dreamweb-mcp is not installed (pip install -e ./clients/python)")
def test_refused_keys_missing_scopes_and_a_server_that_is_down_are_tool_errors(live_server, world):
    team, _ = world
    read_only = key(team, ["memory:read"], name="reader")
    revoked_key, revoked_raw = AgentKey.generate(team=team, name="gone", scopes=["memory:read"])
    revoked_key.revoke()

    _, (wrong,) = run(server(live_server.url, "dw_not_a_key"), [("get_context", {})])
    assert wrong.is_error and "refused the API key (401" in text(wrong) and "DREAMWEB_API_KEY" in text(wrong)

    _, (revoked,) = run(server(live_server.url, revoked_raw), [("list_skills", {})])
    assert revoked.is_error and "refused the API key (401" in text(revoked)

    _, (note, write) = run(
        server(live_server.url, read_only),
        [("remember", {"content": NOTE}), ("update_memory", {"key": "deploy-command", "content": "x", "etag": "e"})],
    )
    assert note.is_error and "may not do this (403" in text(note)
    assert write.is_error and "may not do this (403" in text(write)
    assert not AgentSession.objects.filter(team=team).exists()

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _, (unreachable,) = run(server(down, read_only), [("get_context", {"query": "x"})])
    assert unreachable.is_error and f"not reachable at {down}" in text(unreachable)

    _, (unset,) = run(StdioServerParameters(command=str(SERVER), env={}), [("get_context", {})])
    assert unset.is_error and "set DREAMWEB_URL and DREAMWEB_API_KEY" in text(unset)


@pytest.mark.django_db
def test_delivered_notes_cover_the_session_and_its_subagents_of_this_team_only():
    from reviews.dreams.selection import delivered_notes
    from tests.factories import SessionFactory

    team, other = TeamFactory(slug="notes-a"), TeamFactory(slug="notes-b")

    def note(team, of, content):
        events = [{"type": "memory_write", "content": content}]
        return SessionFactory(
            team=team, external_id=f"note-{of}-{content[:5]}", events=events, metadata={"note_of": of}
        )

    main = SessionFactory(team=team, external_id="sess-1", metadata={})
    sub = SessionFactory(team=team, external_id="sess-1:a485154", metadata={"parent_session": "sess-1"})
    plain = SessionFactory(team=team, external_id="sess-2", metadata={})
    note(team, "sess-1", "Use make release.")
    note(team, "sess-9", "Not in this batch.")
    note(other, "sess-2", "Another team's note.")
    assert delivered_notes(team.pk, [main, sub, plain]) == {
        "sess-1": ["Use make release."],
        "sess-1:a485154": ["Use make release."],
    }
    assert delivered_notes(team.pk, []) == {}


def test_the_session_and_agent_of_a_call_come_from_the_clients_metadata():
    """Codex names its thread in every call's _meta (threadId: its rollout's session id), Claude Code sends the
    tool_use id (claudecode/toolUseId) and names its session in the environment (CLAUDE_CODE_SESSION_ID)."""
    import httpx
    from dreamweb_client import DreamwebClient
    from dreamweb_mcp.config import Settings
    from dreamweb_mcp.server import build_server

    pushed: list[dict] = []
    served: list[dict] = []

    def api(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sessions/"):
            pushed.append(json.loads(request.content))
            return httpx.Response(201, json={"created": 1, "unchanged": 0, "results": []})
        served.append(dict(request.url.params))
        return httpx.Response(200, json={"items": [], "skills": [], "text": "memory"})

    def connect(settings):
        return build_server(settings, lambda: DreamwebClient("http://dw", "k", transport=httpx.MockTransport(api)))

    async def calls(server, meta):
        async with Client(server) as client:
            await client.call_tool("get_context", {"query": "q"}, meta=meta)
            await client.call_tool("remember", {"content": NOTE}, meta=meta)

    codex_thread = "019e1625-789d-76c0-80ab-3724b5ddb799"
    asyncio.run(calls(connect(Settings(url="http://dw", api_key="k")), {"threadId": codex_thread}))
    claude = Settings.from_env(
        {"DREAMWEB_URL": "http://dw", "DREAMWEB_API_KEY": "k", "CLAUDE_CODE_SESSION_ID": SESSION}
    )
    asyncio.run(calls(connect(claude), {"claudecode/toolUseId": "toolu_01"}))
    anonymous = Settings(url="http://dw", api_key="k")
    asyncio.run(calls(connect(anonymous), None))

    assert [(s["agent"], s["session"]) for s in served] == [
        ("codex", codex_thread),
        ("claude-code", SESSION),
        ("mcp-agent", anonymous.process_session),
    ]
    assert [(p["agent"], p["metadata"]["note_of"]) for p in pushed] == [
        ("codex", codex_thread),
        ("claude-code", SESSION),
        ("mcp-agent", anonymous.process_session),
    ]
    assert len({p["external_id"] for p in pushed}) == 3  # one note, three sessions: three notes


def test_feedback_ratings_and_etags_as_models_write_them():
    """true / 'helpful' is helpful (never the score 1 a boolean coerces to), 1-5 is a score, anything else is a tool
    error; an etag sent without its quotes is quoted."""
    import httpx
    from dreamweb_client import DreamwebClient
    from dreamweb_mcp.config import Settings
    from dreamweb_mcp.server import build_server

    sent: list[tuple[str, dict, str | None]] = []

    def api(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, json.loads(request.content or b"{}"), request.headers.get("If-Match")))
        if request.method == "PATCH":
            return httpx.Response(200, json={"store": "eng", "key": "k", "version": 2, "etag": '"7.2"'})
        return httpx.Response(201, json={"id": 1})

    server = build_server(
        Settings(url="http://dw", api_key="k", store="eng"),
        lambda: DreamwebClient("http://dw", "k", transport=httpx.MockTransport(api)),
    )

    async def calls():
        async with Client(server) as client:
            out = []
            for rating in (True, False, "helpful", "unhelpful", 4, 0, 9):
                out.append(await client.call_tool("feedback", {"key": "k", "rating": rating}))
            out.append(await client.call_tool("update_memory", {"key": "k", "content": "c", "etag": "7.1"}))
            return out

    results = asyncio.run(calls())
    assert [r.is_error for r in results] == [False, False, False, False, False, True, True, False]
    assert "a score is from 1 to 5" in text(results[5])
    bodies = [body for method, body, _ in sent if method == "POST"]
    assert [{k: v for k, v in b.items() if k in ("helpful", "score")} for b in bodies] == [
        {"helpful": True},
        {"helpful": False},
        {"helpful": True},
        {"helpful": False},
        {"score": 4},
    ]
    assert sent[-1][0] == "PATCH" and sent[-1][2] == '"7.1"'


def _transcript_api() -> bool:
    try:
        from memory.api import session_files  # noqa: F401 - the file upload of POST /sessions/
    except ImportError:
        return False
    return True


def claude_code_lines(session: str, note: str, other_note: str) -> bytes:
    """A Claude Code session as the CLI writes it: the user's request, a remember call through MCP and its result,
    then a second remember the server never got (it was down: the call ended in an error)."""

    def line(kind, uuid, parent, message, minute):
        return {
            "type": kind,
            "sessionId": session,
            "uuid": uuid,
            "parentUuid": parent,
            "timestamp": f"2026-11-30T10:0{minute}:00.000Z",
            "cwd": "/home/me/app",
            "version": "2.1.7",
            "isSidechain": False,
            "userType": "external",
            "message": message,
        }

    def remember(uuid, parent, call, content, minute):
        use = {"type": "tool_use", "id": call, "name": "mcp__dreamweb__remember", "input": {"content": content}}
        return line("assistant", uuid, parent, {"id": f"msg_{uuid}", "role": "assistant", "content": [use]}, minute)

    def result(uuid, parent, call, text, minute, error=False):
        block = {"type": "tool_result", "tool_use_id": call, "content": text, "is_error": error}
        return line("user", uuid, parent, {"role": "user", "content": [block]}, minute)

    lines = [
        line("user", "u1", None, {"role": "user", "content": "Ship the release to staging."}, 1),
        remember("a1", "u1", "toolu_01", note, 2),
        result("u2", "a1", "toolu_01", "Noted (dreamweb-note-...).", 3),
        remember("a2", "u2", "toolu_02", other_note, 4),
        result("u3", "a2", "toolu_02", "Error executing tool remember: Dreamweb is not reachable", 5, error=True),
    ]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


@pytest.mark.skipif(not SERVER.exists(), reason="dreamweb-mcp is not installed (pip install -e ./clients/python)")
@pytest.mark.skipif(not _transcript_api(), reason="POST /sessions/ does not take transcript files yet")
def test_a_note_remembered_over_mcp_is_one_piece_of_evidence_when_the_claude_code_transcript_follows(live_server):
    """remember delivers the note at once; the Claude Code transcript of the same session, pushed at its end, holds
    the remember call (imported as an in-band note): the dream counts the delivered note once, from its note session,
    and counts from the transcript only the note that never reached the server."""
    from dreamweb_client import DreamwebClient

    team = TeamFactory(slug="mcp-notes")
    store = StoreFactory(team=team, slug="eng")
    raw = key(team, ["memory:read", "sessions:write"])
    _, (noted,) = run(
        server(live_server.url, raw, CLAUDE_CODE_SESSION_ID=SESSION, DREAMWEB_AGENT=""),
        [
            ("remember", {"content": NOTE}),
        ],
    )
    assert not noted.is_error
    lost = "The staging database is `stage-db-2`."
    with DreamwebClient(live_server.url, raw) as dw:
        answer = dw.push_transcript(claude_code_lines(SESSION, NOTE, lost), format="claude-code", filename="s.jsonl")
    assert answer["created"] == 1
    transcript = AgentSession.objects.get(team=team, external_id=SESSION)
    assert [e["content"] for e in transcript.events if e["type"] == "memory_write"] == [NOTE, lost]

    dreams.start_run(store, analyzer="rules", wait=True)
    notes = [
        (a.session.external_id, f["summary"])
        for a in SessionAnalysis.objects.filter(run__store=store).select_related("session")
        for f in a.findings
        if f["kind"] == "note"
    ]
    from_note_session = [s for eid, s in notes if eid != SESSION]
    from_transcript = [s for eid, s in notes if eid == SESSION]
    assert len(from_note_session) == 1 and "make migrate" in from_note_session[0]
    assert len(from_transcript) == 1 and "stage-db-2" in from_transcript[0]
    note_session = AgentSession.objects.get(team=team, metadata__note_of=SESSION)
    assert note_session.agent == transcript.agent == "claude-code"
