"""OpenAI Codex rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl): `{timestamp, type, payload}` lines.

How a rollout maps (../shared/real/transcripts/FORMATS.md has every field):
* `session_meta` gives the id (the external id), cwd, CLI version, origin and git; `turn_context` the model, effort
  and sandbox; the last `token_count` the token usage.
* `response_item`s are read as Responses items (memory.importers.responses: exec headers stripped, `write_stdin`
  polls folded onto the command they poll). Developer text and injected context are system text; a user item is
  the person's only when Codex also logged it as `event_msg/user_message` (a rollout without user items, as Codex
  Desktop writes, takes the person's turns from those events); the other `event_msg` copies of messages are dropped.
* Exit codes: `exec_command_end` (what the process returned), else the output header, else the patch's metadata; a
  failed patch (`patch_apply_end.success=false`) or MCP call (`mcp_tool_call_end` with an error) is an error. An MCP
  call that no item names comes from its `mcp_tool_call_end`, as `mcp__<server>__<tool>`.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from .base import Format, Options, Parsed, block_text, mcp_name
from .responses import Items
from .source import Source

LINE_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens")


# The rollouts of 2025 before session_meta: a first line that is the meta itself ({id, timestamp, instructions,
# git}), then the items unwrapped, with `{"record_type": "state"}` lines between them.
OLDER_ITEMS = {
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
    "reasoning",
}


def _older_meta(v) -> bool:
    return (
        isinstance(v, dict)
        and "type" not in v
        and "payload" not in v
        and isinstance(v.get("id"), str)
        and isinstance(v.get("timestamp"), str)
        and ("instructions" in v or "git" in v)
    )


def _older_line(v) -> bool:
    return isinstance(v, dict) and ("record_type" in v or v.get("type") in OLDER_ITEMS)


def sniff(source: Source) -> bool:
    """Every line a `{type, payload}` record, and either all of known types or the first the session's meta: a
    newer Codex that writes a line of a type this reader does not know still writes a rollout (read, that line
    named as skipped)."""
    values = [v for v in source.head_values() if v is not None]
    if values and _older_meta(values[0]):
        return all(_older_line(v) for v in values[1:])
    if not values or not all(
        isinstance(v, dict) and isinstance(v.get("type"), str) and isinstance(v.get("payload"), dict) for v in values
    ):
        return False
    return values[0]["type"] == "session_meta" or all(v["type"] in LINE_TYPES for v in values)


class _Rollout(Items):
    def __init__(self):
        super().__init__()
        self.meta: dict = {}
        self.context: dict = {}
        self.model: str | None = None
        self.usage: dict | None = None
        self.ending = "unknown"

    def turn_context(self, p: dict) -> None:
        if isinstance(p.get("model"), str):
            self.model = p["model"]
        for key in ("cwd", "effort", "approval_policy"):
            if isinstance(p.get(key), str):
                self.context[key] = p[key]
        sandbox = p.get("sandbox_policy")
        if isinstance(sandbox, dict) and isinstance(sandbox.get("type"), str):
            self.context["sandbox"] = sandbox["type"]

    def event(self, p: dict, ts) -> None:
        kind = p.get("type")
        call_id = str(p.get("call_id") or "")
        if kind == "user_message" and isinstance(p.get("message"), str):
            self.person_events += 1
            self.message("user", p["message"], ts, "event")
        elif kind == "agent_message" and isinstance(p.get("message"), str):
            self.message("assistant", p["message"], ts, "event")
        elif kind == "exec_command_end":
            code = p.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                self.exit_codes[call_id] = code
            output = p.get("aggregated_output") or p.get("formatted_output") or p.get("stdout") or ""
            self.fallback.setdefault(call_id, (output, ts))
        elif kind == "patch_apply_end":
            if p.get("success") is False:
                self.failed.add(call_id)
            self.fallback.setdefault(call_id, (p.get("stderr") or p.get("stdout") or "", ts))
        elif kind == "mcp_tool_call_end":
            self.mcp_end(call_id, p, ts)
        elif kind == "token_count" and isinstance(p.get("info"), dict):
            total = p["info"].get("total_token_usage")
            if isinstance(total, dict):
                self.usage = {k: total[k] for k in USAGE_KEYS if isinstance(total.get(k), int)}
        elif kind == "turn_aborted":
            self.ending = "abandoned"
        elif kind == "task_started":
            self.ending = "unknown"

    def mcp_end(self, call_id: str, p: dict, ts) -> None:
        invocation = p.get("invocation") if isinstance(p.get("invocation"), dict) else {}
        result = p.get("result")
        if isinstance(result, dict) and "Err" in result:
            text, error = str(result["Err"]), True
        else:
            ok = result.get("Ok", result) if isinstance(result, dict) else {}
            ok = ok if isinstance(ok, dict) else {}
            text = block_text(ok.get("content"))
            error = bool(ok.get("isError") or ok.get("is_error") or p.get("error"))
        if error:
            self.failed.add(call_id)
        if call_id not in self.t.calls and call_id not in self.t.notes:
            name = mcp_name(str(invocation.get("tool") or "tool"), invocation.get("server"))
            self.t.call(call_id, name, invocation.get("arguments"), ts)
        self.fallback.setdefault(call_id, (text, ts))

    def document(self, options: Options) -> dict:
        meta = self.meta
        git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
        metadata = {
            "source_format": FORMAT.name,
            "cwd": self.context.get("cwd") or meta.get("cwd"),
            "originator": meta.get("originator"),
            "cli_version": meta.get("cli_version"),
            "source": meta.get("source"),
            "model_provider": meta.get("model_provider"),
            "git_branch": git.get("branch"),
            "git_commit": git.get("commit_hash"),
            "repository_url": git.get("repository_url"),
            "reasoning_effort": self.context.get("effort"),
            "approval_policy": self.context.get("approval_policy"),
            "sandbox": self.context.get("sandbox"),
            "usage": self.usage,
        }
        self.t.touch(meta.get("timestamp"))
        return self.t.document(
            external_id=str(meta["id"]),
            agent=options.agent or FORMAT.default_agent,
            task=options.task,
            model=self.model,
            metadata=metadata,
            outcome=self.ending,
        )


def _identity(payload) -> str:
    """A payload as comparable text (its JSON with sorted keys): two writes of one line give the same."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(payload)


def _older(r: _Rollout, line: dict) -> None:
    """A line of the older layout (OLDER_ITEMS): its meta line, or an item as a response_item's payload."""
    ts = line.get("timestamp")
    if _older_meta(line) and not r.meta:
        r.meta = {k: line[k] for k in ("id", "timestamp", "git") if k in line}
        r.t.touch(ts)
        if isinstance(line.get("instructions"), str) and line["instructions"].strip():
            r.t.say("system", line["instructions"], ts)
    elif line.get("type") in OLDER_ITEMS:
        r.t.touch(ts)
        r.item(line, ts)


def read(source: Source, options: Options) -> Iterator[Parsed]:
    r = _Rollout()
    seen: set[tuple] = set()
    unknown: dict[str, int] = {}
    for number, values, error in source.values():
        if error is not None:
            yield Parsed(f"line {number}", notice=f"skipped, {error}" if values is None else error)
            if values is None:
                continue
        for line in values or ():
            if not isinstance(line, dict):
                continue
            # A line written twice (a replayed append, a copied tail) is the same line: its time and payload say so
            # (Codex's calls and messages carry no id of their own that every line has).
            identity = (line.get("timestamp"), line.get("type"), _identity(line.get("payload")))
            if line.get("timestamp") is not None:
                if identity in seen:
                    continue
                seen.add(identity)
            if isinstance(line.get("payload"), dict) and line.get("type") not in LINE_TYPES:
                unknown[str(line.get("type"))[:60]] = unknown.get(str(line.get("type"))[:60], 0) + 1
                continue
            if not isinstance(line.get("payload"), dict):
                _older(r, line)
                continue
            p, ts = line["payload"], line.get("timestamp")
            r.t.touch(ts)
            kind = line.get("type")
            if kind == "session_meta":
                r.meta = r.meta or p  # a resumed rollout repeats the meta of the session it resumes
            elif kind == "turn_context":
                r.turn_context(p)
            elif kind == "response_item":
                r.item(p, ts)
            elif kind == "event_msg":
                r.event(p, ts)
            elif kind == "compacted" and isinstance(p.get("message"), str):
                r.t.say("system", p["message"], ts)
    if unknown:
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted(unknown.items()))
        yield Parsed("file", notice=f"skipped lines of a type this version does not read: {kinds}")
    if not isinstance(r.meta.get("id"), str) or not r.meta["id"]:
        yield Parsed("file", error="no session_meta line with the session id: not a whole Codex rollout")
        return
    r.finish()
    yield Parsed(f"session {r.meta['id']}", doc=r.document(options))


FORMAT = Format(
    name="codex",
    label="OpenAI Codex rollout, JSON Lines",
    default_agent="codex",
    sniff=sniff,
    read=read,
)
