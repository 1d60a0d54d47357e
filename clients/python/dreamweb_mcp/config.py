"""Settings of the agents' tools, from the environment (the MCP server and the hooks read the same names)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from dreamweb_client import DreamwebClient

DEFAULT_TIMEOUT = 20.0


@dataclass(frozen=True)
class Settings:
    url: str
    api_key: str
    agent: str = ""  # empty: guessed per call (claude-code, codex) or "mcp-agent"
    task: str | None = None
    store: str | None = None  # empty: every store the key can read
    session: str = ""  # a fixed session id (DREAMWEB_SESSION); else per call or per process
    client_agent: str = ""  # the agent the environment says started this process (Claude Code names its session)
    timeout: float = DEFAULT_TIMEOUT
    # One id for this process, for the sessions of clients that name none (so its notes still form one session).
    process_session: str = field(default_factory=lambda: f"dreamweb-mcp-{uuid.uuid4()}")

    @classmethod
    def from_env(cls, environ=None) -> Settings:
        env = os.environ if environ is None else environ
        try:
            timeout = float(env.get("DREAMWEB_TIMEOUT") or DEFAULT_TIMEOUT)
        except ValueError:
            timeout = DEFAULT_TIMEOUT
        return cls(
            url=(env.get("DREAMWEB_URL") or "").strip(),
            api_key=(env.get("DREAMWEB_API_KEY") or "").strip(),
            agent=(env.get("DREAMWEB_AGENT") or "").strip(),
            task=(env.get("DREAMWEB_TASK") or "").strip() or None,
            store=(env.get("DREAMWEB_STORE") or "").strip() or None,
            # Claude Code names the session in the environment of every MCP server and hook it starts.
            session=(env.get("DREAMWEB_SESSION") or env.get("CLAUDE_CODE_SESSION_ID") or "").strip(),
            client_agent="claude-code" if (env.get("CLAUDE_CODE_SESSION_ID") or "").strip() else "",
            timeout=timeout,
        )

    def missing(self) -> list[str]:
        return [name for name, value in (("DREAMWEB_URL", self.url), ("DREAMWEB_API_KEY", self.api_key)) if not value]

    def client(self, **kwargs) -> DreamwebClient:
        return DreamwebClient(self.url, self.api_key, timeout=self.timeout, **kwargs)
