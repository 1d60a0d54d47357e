"""``dreamweb-mcp``: Dreamweb's memory and skills as a Model Context Protocol server on standard input/output.

    DREAMWEB_URL=http://127.0.0.1:8000 DREAMWEB_API_KEY=dw_... DREAMWEB_AGENT=my-agent dreamweb-mcp

Tools: get_context, remember, search_memory, feedback, list_skills, read_skill (and update_memory, an in-band write
with optimistic concurrency). Every failure is a tool error the model can read (``is_error``): the server is down,
the key is refused or lacks a scope, a write is stale. Standard output carries only the protocol; logs go to
standard error. See docs/agents.md.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import httpx
from dreamweb_client import DreamwebClient, DreamwebError, StaleEntry
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from . import stdio
from .config import Settings
from .notes import note_session

log = logging.getLogger("dreamweb_mcp")

SERVER_NAME = "dreamweb"
INSTRUCTIONS = (
    "Dreamweb keeps this team's long-term memory and skills. At the start of a task call get_context with what you "
    "are about to do, and follow what it returns. When you learn something a later session should know (a command "
    "that works here, a path, a convention the user corrected), call remember with one short, self-contained fact. "
    "Rate served memory with feedback. list_skills and read_skill give the team's procedures."
)
MAX_SEARCH_RESULTS = 20
T = TypeVar("T")


class DreamwebTools:
    """The tools, bound to settings and a way to make clients (tests pass their own transport)."""

    def __init__(self, settings: Settings, client_factory: Callable[..., DreamwebClient] | None = None):
        self.settings = settings
        self._client_factory = client_factory or settings.client
        self._client: DreamwebClient | None = None
        self._stores_of_keys: dict[str, str] = {}  # entry key -> store, from what this process served or found
        self._delivered: set[str] = set()

    # --- plumbing ---------------------------------------------------------------------------------------------
    def client(self) -> DreamwebClient:
        missing = self.settings.missing()
        if missing:
            raise ToolError(f"dreamweb-mcp is not configured: set {' and '.join(missing)} in the server's environment")
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def call(self, fn: Callable[[DreamwebClient], T]) -> T:
        """Run API calls; turn every failure into a ToolError that says what happened and what to do (the SDK
        prefixes it with the tool's name)."""
        try:
            return fn(self.client())
        except ToolError:
            raise
        except StaleEntry as exc:
            raise ToolError(
                f"Not written: the entry changed since you read it (its etag is now {exc.current_etag}). "
                "Read it again with search_memory, merge your change into what it says now, and retry with the new "
                "etag."
            ) from exc
        except DreamwebError as exc:
            message = _explain(exc)
            if exc.status == 404 and self.settings.store and "store" in (exc.detail or "").lower():
                message += f". DREAMWEB_STORE is {self.settings.store!r}: is that the store's slug?"
            raise ToolError(message) from exc
        except httpx.TimeoutException as exc:
            raise ToolError(
                f"Dreamweb at {self.settings.url} did not answer within {self.settings.timeout:g} s "
                f"({type(exc).__name__}); try again later, or raise DREAMWEB_TIMEOUT"
            ) from exc
        except httpx.InvalidURL as exc:  # e.g. a query too long for a URL: the request never left
            raise ToolError(f"the request could not be sent ({exc}); shorten what you passed and retry") from exc
        except httpx.TransportError as exc:
            raise ToolError(
                f"Dreamweb is not reachable at {self.settings.url} ({exc or type(exc).__name__}). "
                "Is the server running, and is DREAMWEB_URL right?"
            ) from exc

    def session_of(self, ctx: Context | None) -> str:
        """The id of the agent session a call belongs to, as its transcript names it: the client's per-call metadata
        (Codex sends its thread id), else DREAMWEB_SESSION / CLAUDE_CODE_SESSION_ID, else this process."""
        meta = _meta(ctx)
        thread = meta.get("threadId")
        if isinstance(thread, str) and thread.strip():
            return thread.strip()
        return self.settings.session or self.settings.process_session

    def agent_of(self, ctx: Context | None) -> str:
        """DREAMWEB_AGENT, else the name the importers give the client's transcripts (so notes and transcripts share
        one agent): the call's metadata says which client it is, else the environment; else ``mcp-agent``."""
        if self.settings.agent:
            return self.settings.agent
        meta = _meta(ctx)
        if "claudecode/toolUseId" in meta:
            return "claude-code"
        if "threadId" in meta:
            return "codex"
        return self.settings.client_agent or "mcp-agent"

    def _stores(self, dw: DreamwebClient, store: str | None) -> list[str]:
        if store or self.settings.store:
            return [store or self.settings.store]
        return [s["slug"] for s in dw.stores()]

    # --- tools --------------------------------------------------------------------------------------------------
    def get_context(
        self,
        query: Annotated[str, Field(description="What you are about to do, in a few words (ranks the memory).")] = "",
        max_tokens: Annotated[
            int | None, Field(ge=1, le=100_000, description="Budget for the returned text, in tokens.")
        ] = None,
        ctx: Context | None = None,
    ) -> str:
        """The memory and skill index that apply to this agent and task, best first, within a token budget. Put it
        to use as it is; rate what helped with feedback."""
        session, agent = self.session_of(ctx), self.agent_of(ctx)
        result = self.call(
            lambda dw: dw.context(
                store=self.settings.store,
                agent=agent,
                task=self.settings.task,
                query=query or None,
                max_tokens=max_tokens,
                session=session,
            ),
        )
        for item in result.get("items", []):
            self._stores_of_keys[item["key"]] = item["store"]
        text = result.get("text") or ""
        if not text.strip():
            return "Dreamweb has no memory or skills for this agent and task yet."
        return text

    def remember(
        self,
        content: Annotated[str, Field(description="One short, self-contained fact or lesson, in your own words.")],
        ctx: Context | None = None,
    ) -> str:
        """Save a note for future sessions (an in-band note). It is not memory yet: the next dream weighs it with
        the other sessions' evidence and proposes a change that a reviewer or the store's policy accepts."""
        text = (content or "").strip()
        if not text:
            raise ToolError("the note is empty; say the fact to keep in one or two sentences")
        session = self.session_of(ctx)
        doc = note_session(
            text, session=session, agent=self.agent_of(ctx), task=self.settings.task, store=self.settings.store
        )
        if doc["external_id"] in self._delivered:
            return f"Already noted in this session ({doc['external_id']}); nothing new was stored."

        def push(dw: DreamwebClient) -> bool:
            try:
                return bool(dw.push_session(doc).get("created"))
            except DreamwebError as exc:
                if exc.status == 409:  # the same note, stored earlier at another time (another server process)
                    return False
                raise

        created = self.call(push)
        self._delivered.add(doc["external_id"])
        if created:
            return f"Noted ({doc['external_id']}). The next dream will weigh it with the other sessions' evidence."
        return f"Already noted in this session ({doc['external_id']}); nothing new was stored."

    def search_memory(
        self,
        query: Annotated[str, Field(description="Words to look for in entry keys and contents.")],
        ctx: Context | None = None,
    ) -> str:
        """Find memory entries by words, in the configured store or every store the key can read. Each result shows
        its store, key, scope and etag (what update_memory needs)."""
        if not (query or "").strip():
            raise ToolError("give some words to look for")

        def search(dw: DreamwebClient) -> list[dict]:
            found: list[dict] = []
            for store in self._stores(dw, None):
                found += dw.entries(store, q=query)
            return found

        entries = self.call(search)
        if not entries:
            return f"No memory entry matches {query!r}."
        lines = [f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} match {query!r}:"]
        for entry in entries[:MAX_SEARCH_RESULTS]:
            self._stores_of_keys[entry["key"]] = entry["store"]
            lines.append(
                f"\n[{entry['store']}/{entry['key']}] scope: {_scope(entry)}; etag: {entry.get('etag', '')}\n"
                f"{entry['content']}"
            )
        if len(entries) > MAX_SEARCH_RESULTS:
            lines.append(f"\n(and {len(entries) - MAX_SEARCH_RESULTS} more; narrow the query)")
        return "\n".join(lines)

    def feedback(
        self,
        key: Annotated[str, Field(description="The entry's key (as get_context or search_memory showed it).")],
        rating: Annotated[
            bool | int | Literal["helpful", "unhelpful"],
            Field(
                description="'helpful' (or true), 'unhelpful' (or false), or a score from 1 (useless or wrong) to 5 "
                "(exactly right)."
            ),
        ],
        comment: Annotated[str, Field(description="Why, in a sentence (optional).")] = "",
        store: Annotated[str | None, Field(description="The entry's store, when the key is in several.")] = None,
        ctx: Context | None = None,
    ) -> str:
        """Say whether a memory entry helped. Ratings decide what is served first and what a dream proposes to
        retire."""
        if isinstance(rating, bool) or rating in ("helpful", "unhelpful"):
            # A boolean is an opinion, not the score 1 or 0 it would coerce to.
            body: dict[str, Any] = {"helpful": rating in (True, "helpful")}
        elif 1 <= rating <= 5:
            body = {"score": rating}
        else:
            raise ToolError("a score is from 1 to 5 (or say 'helpful' / 'unhelpful')")

        def send(dw: DreamwebClient) -> str:
            where = self._store_of(dw, key, store)
            # A comment pasted from a terminal may hold a NUL, which the API refuses in any text but a transcript:
            # replaced as transcripts are (U+FFFD), so the rating is not lost to one byte of its comment.
            dw.feedback(where, key, comment=(comment or "").replace("\x00", "\ufffd"), **body)
            return where

        where = self.call(send)
        return f"Thanks: feedback recorded for {where}/{key}."

    def list_skills(self, ctx: Context | None = None) -> str:
        """The team's published skills: name and what each is for. read_skill gives one in full."""
        skills = self.call(lambda dw: dw.skills())
        if not skills:
            return "The team has no published skills."
        return "\n".join(f"- {s['name']}: {s['description']}" for s in skills)

    def read_skill(
        self,
        name: Annotated[str, Field(description="The skill's name, as list_skills shows it.")],
        path: Annotated[
            str | None, Field(description="One of the skill's files to read instead of its instructions.")
        ] = None,
        ctx: Context | None = None,
    ) -> str:
        """A skill's instructions (its SKILL.md body) and the list of its files; with ``path``, that file's text."""

        def fetch(dw: DreamwebClient):
            try:
                return dw.skill(name)
            except DreamwebError as exc:
                if exc.status == 404:
                    raise ToolError(f"not found: no skill named {name!r}; list_skills shows the team's skills") from exc
                raise

        skill = self.call(fetch)
        references = skill.get("references") or {}
        if path is not None:
            if path not in references:
                known = ", ".join(sorted(references)) or "none"
                raise ToolError(f"skill {name!r} has no file {path!r} (its files: {known})")
            return _reference_text(references[path], path)
        if not isinstance(skill, dict) or not isinstance(skill.get("body"), str):
            raise ToolError(f"no skill named {name!r}; list_skills shows the team's skills")
        out = [f"# {skill.get('name', name)} (version {skill.get('version')})", skill.get("description", ""), ""]
        out.append(skill["body"])
        if references:
            out.append("\nFiles (read one with read_skill(name, path)):")
            out += [f"- {p}{_file_note(v)}" for p, v in sorted(references.items())]
        return "\n".join(out)

    def update_memory(
        self,
        key: Annotated[str, Field(description="The entry's key.")],
        content: Annotated[str, Field(description="The entry's new text, whole.")],
        etag: Annotated[str, Field(description="The etag search_memory showed for the entry you read.")],
        store: Annotated[str | None, Field(description="The entry's store, when the key is in several.")] = None,
        ctx: Context | None = None,
    ) -> str:
        """Change a memory entry in a store that lets agents write (needs a key with memory:write). The etag makes
        it safe with other agents: if the entry changed since you read it, nothing is written and you are told."""
        session = self.session_of(ctx)
        tag = etag.strip()
        if tag and not tag.startswith(('"', "W/")):
            tag = f'"{tag}"'  # an entity tag is quoted; a model may drop the quotes it was shown

        def write(dw: DreamwebClient) -> dict:
            where = self._store_of(dw, key, store)
            return dw.update_entry(where, key, etag=tag, content=content, session_id=session)

        entry = self.call(write)
        return f"Written: {entry['store']}/{entry['key']} is now version {entry['version']} (etag {entry['etag']})."

    # --- helpers ------------------------------------------------------------------------------------------------
    def _store_of(self, dw: DreamwebClient, key: str, store: str | None) -> str:
        """The store holding ``key``: given, configured, seen in this process, else the only store that has it."""
        if store or self.settings.store:
            return store or self.settings.store
        if key in self._stores_of_keys:
            return self._stores_of_keys[key]
        holding = []
        for slug in self._stores(dw, None):
            try:
                dw.entry(slug, key)
            except DreamwebError as exc:
                if exc.status == 404:
                    continue
                raise
            holding.append(slug)
        if len(holding) == 1:
            return holding[0]
        if not holding:
            raise ToolError(f"no memory entry with key {key!r} in the stores this key can read")
        raise ToolError(f"the key {key!r} is in several stores ({', '.join(holding)}): name the store")


def _meta(ctx: Context | None) -> dict:
    if ctx is None:
        return {}
    try:
        meta = ctx.request_context.meta
    except (AttributeError, ValueError, LookupError):
        return {}
    return dict(meta) if isinstance(meta, dict) else {}


def _scope(entry: dict) -> str:
    scope = entry.get("scope") or {}
    parts = [f"{level} {scope[level]}" for level in ("agent", "task") if scope.get(level)]
    return ", ".join(parts) or "store-wide"


def _reference_text(value, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("encoding") == "utf-8":
        return value.get("data", "")
    return f"{path} is a binary file; it cannot be shown as text."


def _file_note(value) -> str:
    if isinstance(value, dict):
        notes = ["binary"] if value.get("encoding") == "base64" else []
        if value.get("mode") == "755":
            notes.append("executable")
        return f" ({', '.join(notes)})" if notes else ""
    return ""


def _explain(exc: DreamwebError) -> str:
    detail = exc.detail or exc.code or "no detail"
    if exc.status == 401:
        return f"Dreamweb refused the API key (401: {detail}). Check DREAMWEB_API_KEY."
    if exc.status == 403:
        return f"the API key may not do this (403: {detail}). Ask an admin for a key with that scope."
    if exc.status == 404:
        return f"not found (404: {detail})"
    if exc.status == 409:
        return f"conflict (409: {detail})"
    if exc.status == 428:
        return f"an etag is required (428: {detail}); read the entry first with search_memory"
    if exc.status == 429:
        return f"rate limited (429: {detail}); wait and retry"
    if exc.status == 413:
        return f"too large (413: {detail})"
    if exc.status == 400:
        errors = f" {exc.errors}" if exc.errors else ""
        return f"refused as invalid (400: {detail}){errors}"
    return f"Dreamweb answered {exc.status} ({detail})"


TOOLS = (
    ("get_context", ToolAnnotations(read_only_hint=True)),
    ("remember", ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)),
    ("search_memory", ToolAnnotations(read_only_hint=True)),
    ("feedback", ToolAnnotations(read_only_hint=False, destructive_hint=False)),
    ("list_skills", ToolAnnotations(read_only_hint=True)),
    ("read_skill", ToolAnnotations(read_only_hint=True)),
    ("update_memory", ToolAnnotations(read_only_hint=False, destructive_hint=True)),
)


class DreamwebServer(MCPServer):
    async def run_stdio_async(self) -> None:
        # The SDK's own stdio loop, with stdin's lines repaired (dreamweb_mcp.stdio). The low-level server is the
        # SDK's attribute (mcp 2.x, pinned below 3 in pyproject.toml).
        await stdio.serve(self._lowlevel_server)


def build_server(settings: Settings | None = None, client_factory=None) -> MCPServer:
    tools = DreamwebTools(settings or Settings.from_env(), client_factory)
    server = DreamwebServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    for name, hints in TOOLS:
        server.add_tool(getattr(tools, name), name=name, annotations=hints, structured_output=False)
    return server


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="dreamweb-mcp: %(message)s")
    settings = Settings.from_env()
    if settings.missing():
        # Start anyway: the client shows tool errors to the model and the user, a crashed server only in its logs.
        log.warning("%s not set; every tool will answer with an error", " and ".join(settings.missing()))
    build_server(settings).run("stdio")


if __name__ == "__main__":
    main()
