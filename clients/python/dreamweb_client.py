"""A small Python client for Dreamweb's agents' API (/api/v1/), built on httpx.

    from dreamweb_client import DreamwebClient, StaleEntry

    dw = DreamwebClient("http://127.0.0.1:8000", api_key="dw_...")
    ctx = dw.context(store="eng", agent="deploy-bot", task="release", query="ship v2", max_tokens=1500)
    prompt = ctx["text"] + "\n\n" + task_prompt
    ...
    dw.push_session({"external_id": run_id, "agent": "deploy-bot", "events": events})

One file, no dependency but httpx: copy it next to your agent, or ``pip install ./clients/python``, which also installs
the ``dreamweb-mcp`` server and the Claude Code / Codex hooks (docs/agents.md). See docs/api.md for the agent loop.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["DreamwebClient", "DreamwebError", "StaleEntry", "EntryExists", "EntryArchived", "NotFound"]


def _seg(value) -> str:
    """One path segment: a store, key or skill name with `/`, `?`, `#` or `..` in it names nothing else on the server
    (`read_skill("../stores/x/entries/y")` must not reach an entry)."""
    quoted = quote(str(value), safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


class DreamwebError(Exception):
    """An error answer of the API: ``status``, ``code`` and ``detail`` (and ``errors`` for invalid input)."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        self.code = body.get("code", "")
        self.detail = body.get("detail", "")
        self.errors = body.get("errors")
        super().__init__(f"{status} {self.code}: {self.detail}")


class NotFound(DreamwebError):
    pass


class EntryExists(DreamwebError):
    pass


class StaleEntry(DreamwebError):
    """412: the entry changed since you read it; ``current_etag`` is its ETag now. Nothing was written."""

    @property
    def current_etag(self) -> str | None:
        return self.body.get("current_etag")


class EntryArchived(DreamwebError):
    """409 `archived`: the entry is archived and refuses writes (a person can restore it)."""


_ERRORS = {404: NotFound, 409: EntryExists, 412: StaleEntry}


class DreamwebClient:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        session_id: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        """``session_id``: the external_id of the session this agent is running, sent as X-Session-Id so that
        context serves, in-band writes and feedback are linked to it."""
        headers = {"Authorization": f"Api-Key {api_key}", "Accept": "application/json"}
        if session_id:
            headers["X-Session-Id"] = session_id
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/v1/", headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DreamwebClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text[:500], "code": "error"}
            error = _ERRORS.get(response.status_code, DreamwebError)
            raise (EntryArchived if body.get("code") == "archived" else error)(response.status_code, body)
        return response

    @staticmethod
    def _params(**params) -> dict:
        return {k: v for k, v in params.items() if v is not None}

    def _pages(self, path: str, params: dict) -> list[dict]:
        """Every item of a paginated list."""
        items: list[dict] = []
        offset = 0
        while True:
            page = self._request("GET", path, params={**params, "limit": 500, "offset": offset}).json()
            items.extend(page["results"])
            offset += len(page["results"])
            if not page.get("next") or not page["results"]:
                return items

    # --- the agent loop ------------------------------------------------------------------------------
    def ping(self) -> dict:
        return self._request("GET", "ping/").json()

    def context(
        self,
        *,
        store: str | None = None,
        agent: str | None = None,
        task: str | None = None,
        query: str | None = None,
        max_items: int | None = None,
        max_tokens: int | None = None,
        session: str | None = None,
        skills: bool = True,
    ) -> dict:
        """{"items", "skills", "text", "tokens", ...}: put ``text`` in the prompt as it is."""
        params = self._params(
            store=store,
            agent=agent,
            task=task,
            query=query,
            max_items=max_items,
            max_tokens=max_tokens,
            session=session,
            skills="true" if skills else "false",
        )
        return self._request("GET", "context/", params=params).json()

    def push_session(self, session: dict) -> dict:
        """Push one session (contracts/session.schema.json). Idempotent on external_id."""
        return self._request("POST", "sessions/", json=session).json()

    def push_transcript(
        self,
        data: bytes,
        *,
        format: str = "auto",
        agent: str | None = None,
        task: str | None = None,
        filename: str | None = None,
        grow: bool = True,
    ) -> dict:
        """Push an agent's own transcript file as it is (a Claude Code project JSONL, a Codex rollout...): the server
        converts it (``format``: auto, claude-code, codex, gemini-cli, openai-chat, anthropic-messages). ``grow``: a
        transcript pushed before, now longer (pushed after a turn, then at the end), replaces what was stored."""
        params = self._params(format=format, agent=agent, task=task, grow="true" if grow else None)
        # ``filename`` only picks the content type: one JSON document (.json) or JSON lines (the rest).
        content_type = "application/json" if (filename or "").endswith(".json") else "application/x-ndjson"
        return self._request(
            "POST", "sessions/", params=params, content=data, headers={"Content-Type": content_type}
        ).json()

    def push_sessions(self, sessions: list[dict], *, batch_size: int = 200) -> dict:
        """Push many sessions in batches; returns the summed counts."""
        total = {"created": 0, "unchanged": 0}
        for start in range(0, len(sessions), batch_size):
            result = self._request("POST", "sessions/", json=sessions[start : start + batch_size]).json()
            total["created"] += result["created"]
            total["unchanged"] += result["unchanged"]
        return total

    # --- memory ---------------------------------------------------------------------------------------
    def stores(self) -> list[dict]:
        return self._pages("stores/", {})

    def entries(self, store: str, **filters) -> list[dict]:
        """Filters: agent, task, q, updated_since (ISO 8601), status (active | archived | all)."""
        return self._pages(f"stores/{_seg(store)}/entries/", self._params(**filters))

    def entry(self, store: str, key: str) -> dict:
        """One entry; its ``etag`` is what update / archive need."""
        return self._request("GET", f"stores/{_seg(store)}/entries/{_seg(key)}/").json()

    def create_entry(
        self,
        store: str,
        key: str,
        content: str,
        *,
        agent: str | None = None,
        task: str | None = None,
        tags: list[str] | None = None,
    ) -> dict:
        body: dict[str, Any] = {"key": key, "content": content, "scope": {"agent": agent, "task": task}}
        if tags is not None:
            body["tags"] = tags
        return self._request("POST", f"stores/{_seg(store)}/entries/", json=body).json()

    def update_entry(
        self, store: str, key: str, *, etag: str, content: str | None = None, session_id: str | None = None, **fields
    ) -> dict:
        """Change an entry you read with ``etag``; raises StaleEntry (412) when someone changed it meanwhile.
        ``session_id`` names the session this write comes from (else the client's)."""
        body = dict(fields)
        if content is not None:
            body["content"] = content
        headers = {"If-Match": etag}
        if session_id:
            headers["X-Session-Id"] = session_id
        return self._request("PATCH", f"stores/{_seg(store)}/entries/{_seg(key)}/", json=body, headers=headers).json()

    def archive_entry(self, store: str, key: str, *, etag: str) -> dict:
        return self._request("DELETE", f"stores/{_seg(store)}/entries/{_seg(key)}/", headers={"If-Match": etag}).json()

    def feedback(
        self,
        store: str,
        key: str,
        *,
        helpful: bool | None = None,
        score: int | None = None,
        source: str = "agent",
        comment: str = "",
    ) -> dict:
        body = self._params(helpful=helpful, score=score, source=source, comment=comment)
        return self._request("POST", f"stores/{_seg(store)}/entries/{_seg(key)}/feedback/", json=body).json()

    # --- skills, dreams --------------------------------------------------------------------------------
    def skills(self) -> list[dict]:
        return self._pages("skills/", {})

    def skill(self, name: str) -> dict:
        return self._request("GET", f"skills/{_seg(name)}/").json()

    def proposals(self, **filters) -> list[dict]:
        return self._pages("proposals/", self._params(**filters))

    def dream_runs(self, **filters) -> list[dict]:
        return self._pages("dream-runs/", self._params(**filters))

    def dream_run(self, run_id: int) -> dict:
        return self._request("GET", f"dream-runs/{run_id}/").json()

    def start_dream(
        self, store: str, *, dry_run: bool = False, all_sessions: bool = False, analyzer: str | None = None
    ):
        body = self._params(dry_run=dry_run, all_sessions=all_sessions, analyzer=analyzer)
        return self._request("POST", f"stores/{_seg(store)}/dreams/", json=body).json()
