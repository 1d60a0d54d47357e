#!/usr/bin/env python
"""Render canonical sessions as the files Claude Code or Codex would have written for them.

    python bench/render_corpus.py claude-code|codex SESSIONS.jsonl OUTDIR

writes one transcript file per session under OUTDIR/<agent>/<task or "-">/ (Claude Code and Codex files do not name
the agent or the task: they are given at import, `import_sessions DIR --agent A --task T`). The session's
external_id becomes the file's session id, so a dream over the imported files can be scored against the corpus's
answer key unchanged.

Faithful to the real files (../shared/real/transcripts/FORMATS.md), because the project is scored on corpora
rendered this way and the import has to map every shape back:

* Claude Code (CLI 2.1): one line per content block, the blocks of one API message sharing `message.id` and
  repeating its `usage`; a `uuid`/`parentUuid` chain; tools as Claude Code names them (`Bash`, `Read` with numbered
  lines and the CLI's `<system-reminder>`, `Grep`, `WebFetch`, `WebSearch`, other tools as MCP tools
  `mcp__tools__<name>`); a failed Bash is `is_error` with the `Exit code N` header and no exit code of its own,
  another failed tool a `<tool_use_error>`; a success carries no exit code; notes are calls of
  `mcp__dreamweb__remember`; a summary and a file-history snapshot line, as the CLI writes them.
* Codex (0.125): `session_meta`, `turn_context`, the developer's permissions and the injected environment as
  items, every user and assistant message twice (item and `event_msg`), reasoning items, `token_count`; a shell
  command is `exec_command` (reads as `cat`, searches as `rg`) with the output header and an `exec_command_end`;
  one command in three is still running when its call returns and is polled with `write_stdin` under another call
  id; other tools are MCP calls (`namespace: mcp__tools__`) with an `mcp_tool_call_end`; notes are calls of the
  dreamweb MCP server's `remember`.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path

SHELL = {"bash", "sh", "shell", "run", "run_command", "exec", "terminal", "command"}
WEB_FETCH = {"web_fetch", "fetch_url", "http_get", "browser", "browser_navigate", "fetch", "open_url"}
REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be considered malware. "
    "You CAN and SHOULD provide analysis of malware, what it is doing. But you MUST refuse to improve or augment the "
    "code. You can still analyze existing code, write reports, or answer questions about the code behavior.\n"
    "</system-reminder>\n"
)


def _arg(arguments) -> str:
    """The one string a canonical call of the corpus carries (command, path or query)."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        for key in ("command", "cmd", "path", "file_path", "query", "url", "pattern"):
            if isinstance(arguments.get(key), str):
                return arguments[key]
        values = [v for v in arguments.values() if isinstance(v, str)]
        if values:
            return values[0]
    return json.dumps(arguments)


def _seed(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16)


def _ts(value: str | None, fallback: datetime) -> str:
    return value or fallback.isoformat().replace("+00:00", "Z")


def _later(ts: str, ms: int) -> str:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Claude Code --------------------------------------------------------------------------------------------------------


class ClaudeCodeFile:
    VERSION = "2.1.5"
    MODEL = "claude-sonnet-4-5-20250929"

    def __init__(self, session: dict):
        self.session = session
        self.sid = session["external_id"]
        self.lines: list[dict] = []
        self.parent: str | None = None
        self.message_id: str | None = None  # the API message the next assistant block belongs to
        self.usage: dict = {}
        self.calls: dict[str, str] = {}  # canonical call id -> the tool Claude Code used
        self.n = 0

    def _uuid(self) -> str:
        self.n += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sid}/{self.n}"))

    def _line(self, kind: str, ts: str, **fields) -> dict:
        line = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/work/project",
            "sessionId": self.sid,
            "version": self.VERSION,
            "gitBranch": "main",
            "slug": "quiet-rendered-otter",
            "type": kind,
            **fields,
            "uuid": self._uuid(),
            "timestamp": ts,
        }
        self.parent = line["uuid"]
        self.lines.append(line)
        return line

    def user(self, content, ts: str, **fields) -> dict:
        self.message_id = None
        return self._line("user", ts, message={"role": "user", "content": content}, **fields)

    def assistant_block(self, block: dict, ts: str) -> None:
        if self.message_id is None:
            self.message_id = "msg_" + hashlib.sha256(f"{self.sid}/{self.n}".encode()).hexdigest()[:24]
            seed = _seed(self.message_id)
            self.usage = {
                "input_tokens": 4 + seed % 20,
                "cache_creation_input_tokens": seed % 3000,
                "cache_read_input_tokens": 12000 + seed % 9000,
                "output_tokens": 20 + seed % 400,
                "service_tier": "standard",
            }
        message = {
            "model": self.MODEL,
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage,
        }
        self._line("assistant", ts, message=message, requestId="req_" + self.message_id[4:])

    def tool_use(self, event: dict, ts: str) -> None:
        name, arg = event["name"], _arg(event.get("arguments"))
        if name in SHELL:
            tool, args = "Bash", {"command": arg, "description": "Run " + arg.split(" ")[0]}
        elif name == "read_file":
            tool, args = "Read", {"file_path": arg}
        elif name == "search":
            tool, args = "Grep", {"pattern": arg, "output_mode": "content"}
        elif name in WEB_FETCH:
            tool, args = "WebFetch", {"url": arg, "prompt": "Summarize the page."}
        elif name == "web_search":
            tool, args = "WebSearch", {"query": arg}
        else:
            tool, args = (
                f"mcp__tools__{name}",
                event.get("arguments") if isinstance(event.get("arguments"), dict) else {"input": arg},
            )
        self.calls[event["id"]] = tool
        self.assistant_block({"type": "tool_use", "id": event["id"], "name": tool, "input": args}, ts)

    def tool_result(self, event: dict, ts: str) -> None:
        tool = self.calls.get(event["call_id"], "Bash")
        content, failed = event.get("content") or "", bool(event.get("is_error")) or bool(event.get("exit_code"))
        block: dict = {"tool_use_id": event["call_id"], "type": "tool_result"}
        structured: object
        if tool == "Bash":
            if failed:
                code = event.get("exit_code") if isinstance(event.get("exit_code"), int) else 1
                block.update(content=f"Exit code {code}\n{content}", is_error=True)
                structured = f"Error: Exit code {code}\n{content}"
            else:
                block.update(content=content, is_error=False)
                structured = {"stdout": content, "stderr": "", "interrupted": False, "isImage": False}
        elif failed:
            block.update(content=f"<tool_use_error>{content}</tool_use_error>", is_error=True)
            structured = f"Error: {content}"
        elif tool == "Read":
            numbered = "\n".join(f"{i:>6}→{text}" for i, text in enumerate(content.split("\n"), start=1))
            block["content"] = numbered + REMINDER
            structured = {"type": "text", "file": {"filePath": "", "content": content, "numLines": 1}}
        else:
            block["content"] = [{"type": "text", "text": content}] if tool.startswith("mcp__") else content
            structured = {"content": content} if not tool.startswith("mcp__") else [{"type": "text", "text": content}]
        self.user([block], ts, toolUseResult=structured, sourceToolAssistantUUID=self.parent)

    def render(self) -> list[dict]:
        events = self.session["events"]
        start = _ts(self.session.get("started_at"), datetime(2026, 1, 1))
        first_user = next((e for e in events if e.get("type") == "message" and e.get("role") == "user"), None)
        self.lines.append(
            {
                "type": "summary",
                "summary": (first_user or {}).get("content", "Session")[:60],
                "leafUuid": str(uuid.uuid5(uuid.NAMESPACE_URL, self.sid + "/leaf")),
            }
        )
        self.lines.append(
            {
                "type": "file-history-snapshot",
                "messageId": str(uuid.uuid5(uuid.NAMESPACE_URL, self.sid)),
                "snapshot": {"messageId": self.sid, "trackedFileBackups": {}, "timestamp": start},
                "isSnapshotUpdate": False,
            }
        )
        for i, event in enumerate(events):
            ts = _ts(event.get("ts"), datetime(2026, 1, 1) + timedelta(seconds=i))
            kind = event.get("type")
            if kind == "message" and event["role"] == "user":
                self.user(event["content"], ts)
            elif kind == "message" and event["role"] == "system":
                self.user([{"type": "text", "text": event["content"]}], ts, isMeta=True)
            elif kind == "message":
                self.assistant_block({"type": "text", "text": event["content"]}, ts)
            elif kind == "tool_call":
                self.tool_use(event, ts)
            elif kind == "tool_result":
                self.tool_result(event, ts)
            elif kind == "memory_write":
                call_id = "toolu_" + hashlib.sha256(f"{self.sid}/{i}".encode()).hexdigest()[:24]
                note = {"content": event["content"], **({"store": event["store"]} if event.get("store") else {})}
                self.assistant_block(
                    {"type": "tool_use", "id": call_id, "name": "mcp__dreamweb__remember", "input": note}, ts
                )
                self.user(
                    [
                        {
                            "tool_use_id": call_id,
                            "type": "tool_result",
                            "content": [{"type": "text", "text": "Saved as an in-band note."}],
                        }
                    ],
                    _later(ts, 40),
                )
        end = _later(self.lines[-1].get("timestamp", start), 500)
        self._line(
            "system",
            end,
            subtype="stop_hook_summary",
            hookCount=0,
            hookInfos=[],
            hookErrors=[],
            preventedContinuation=False,
            stopReason="",
            hasOutput=False,
            level="suggestion",
        )
        return self.lines


# Codex --------------------------------------------------------------------------------------------------------------


class CodexRollout:
    CLI = "0.125.0"
    MODEL = "gpt-5.5"
    CWD = "/home/dev/work/project"

    def __init__(self, session: dict):
        self.session = session
        self.sid = session["external_id"]
        self.lines: list[dict] = []
        self.turn = 0
        self.tokens = 0
        self.pending: dict[str, dict] = {}  # call id -> how the call was rendered

    def _line(self, kind: str, ts: str, payload: dict) -> None:
        self.lines.append({"timestamp": ts, "type": kind, "payload": payload})

    def _id(self, *parts) -> str:
        return hashlib.sha256("/".join((self.sid, *map(str, parts))).encode()).hexdigest()

    def start_turn(self, ts: str) -> None:
        self.turn += 1
        turn_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sid}/turn/{self.turn}"))
        self._line("event_msg", ts, {"type": "task_started", "turn_id": turn_id, "model_context_window": 258400})
        self._line(
            "turn_context",
            ts,
            {
                "turn_id": turn_id,
                "cwd": self.CWD,
                "current_date": ts[:10],
                "timezone": "Etc/UTC",
                "approval_policy": "on-request",
                "model": self.MODEL,
                "effort": "medium",
                "sandbox_policy": {"type": "workspace-write", "network_access": False},
                "summary": "auto",
            },
        )

    def token_count(self, ts: str) -> None:
        self.tokens += 900 + _seed(self.sid, str(len(self.lines))) % 4000
        usage = {
            "input_tokens": self.tokens,
            "cached_input_tokens": self.tokens // 2,
            "output_tokens": self.tokens // 40,
            "reasoning_output_tokens": self.tokens // 90,
            "total_tokens": self.tokens + self.tokens // 40,
        }
        self._line(
            "event_msg",
            ts,
            {
                "type": "token_count",
                "info": {"total_token_usage": usage, "last_token_usage": usage, "model_context_window": 258400},
                "rate_limits": None,
            },
        )

    @staticmethod
    def header(body: str, *, code: int | None = None, session: int | None = None, seed: int = 0) -> str:
        state = f"Process exited with code {code}" if session is None else f"Process running with session ID {session}"
        return (
            f"Chunk ID: {seed % 0xFFFFFF:06x}\nWall time: {(seed % 3000) / 1000:.4f} seconds\n{state}\n"
            f"Original token count: {len(body) // 4}\nOutput:\n{body}"
        )

    def call(self, event: dict, ts: str) -> None:
        name, arg, call_id = event["name"], _arg(event.get("arguments")), event["id"]
        if name in SHELL or name in ("read_file", "search"):
            cmd = (
                arg
                if name in SHELL
                else (f"cat {shlex.quote(arg)}" if name == "read_file" else f"rg -n {shlex.quote(arg)}")
            )
            args = {"cmd": cmd, "workdir": self.CWD, "yield_time_ms": 1000, "max_output_tokens": 12000}
            self._line(
                "response_item",
                ts,
                {"type": "function_call", "name": "exec_command", "arguments": json.dumps(args), "call_id": call_id},
            )
            self.pending[call_id] = {"kind": "exec", "cmd": cmd}
        else:
            args = event.get("arguments") if isinstance(event.get("arguments"), dict) else {"input": arg}
            self._line(
                "response_item",
                ts,
                {
                    "type": "function_call",
                    "name": name,
                    "namespace": "mcp__tools__",
                    "arguments": json.dumps(args),
                    "call_id": call_id,
                },
            )
            self.pending[call_id] = {"kind": "mcp", "name": name, "args": args}

    def result(self, event: dict, ts: str) -> None:
        call_id, content = event["call_id"], event.get("content") or ""
        rendered = self.pending.pop(call_id, {"kind": "mcp", "name": "tool", "args": {}})
        failed = bool(event.get("is_error")) or bool(event.get("exit_code"))
        if rendered["kind"] == "mcp":
            self._line(
                "response_item",
                ts,
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": json.dumps([{"type": "text", "text": content}]),
                },
            )
            self._line(
                "event_msg",
                ts,
                {
                    "type": "mcp_tool_call_end",
                    "call_id": call_id,
                    "invocation": {"server": "tools", "tool": rendered["name"], "arguments": rendered["args"]},
                    "duration": {"secs": 0, "nanos": 120000000},
                    "result": {"Ok": {"content": [{"type": "text", "text": content}], "isError": failed}},
                },
            )
            return
        code = event.get("exit_code") if isinstance(event.get("exit_code"), int) else (1 if failed else 0)
        seed = _seed(self.sid, call_id)
        end = {
            "type": "exec_command_end",
            "call_id": call_id,
            "process_id": str(1000 + seed % 90000),
            "turn_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sid}/turn/{self.turn}")),
            "command": ["/bin/bash", "-lc", rendered["cmd"]],
            "cwd": self.CWD,
            "parsed_cmd": [{"type": "unknown", "cmd": rendered["cmd"]}],
            "source": "unified_exec_startup",
            "stdout": "",
            "stderr": "",
            "aggregated_output": content,
            "exit_code": code,
            "duration": {"secs": 1, "nanos": 0},
            "formatted_output": "",
            "status": "completed" if code == 0 else "failed",
        }
        if seed % 3 == 0:
            # Still running when the call returned: Codex polls it with write_stdin under another call id.
            process = 1000 + seed % 90000
            self._line(
                "response_item",
                ts,
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": self.header("", session=process, seed=seed),
                },
            )
            poll_id = "call_" + self._id("poll", call_id)[:24]
            poll_args = {"session_id": process, "chars": "", "yield_time_ms": 1000, "max_output_tokens": 12000}
            later = _later(ts, 1000)
            self._line(
                "response_item",
                later,
                {
                    "type": "function_call",
                    "name": "write_stdin",
                    "arguments": json.dumps(poll_args),
                    "call_id": poll_id,
                },
            )
            self._line("event_msg", later, end)
            self._line(
                "response_item",
                later,
                {
                    "type": "function_call_output",
                    "call_id": poll_id,
                    "output": self.header(content, code=code, seed=seed + 1),
                },
            )
        else:
            self._line(
                "response_item",
                ts,
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": self.header(content, code=code, seed=seed),
                },
            )
            self._line("event_msg", ts, end)

    def render(self) -> list[dict]:
        events = self.session["events"]
        start = _ts(self.session.get("started_at"), datetime(2026, 1, 1))
        self._line(
            "session_meta",
            start,
            {
                "id": self.sid,
                "timestamp": start,
                "cwd": self.CWD,
                "originator": "codex-tui",
                "cli_version": self.CLI,
                "source": "cli",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex, a coding agent based on GPT-5."},
                "git": {
                    "commit_hash": self._id("git")[:40],
                    "branch": "main",
                    "repository_url": "git@example.org:team/project.git",
                },
            },
        )
        self.start_turn(start)
        self._line(
            "response_item",
            start,
            {
                "type": "message",
                "role": "developer",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<permissions instructions>\nFilesystem sandboxing defines which files can "
                        "be read or written. `sandbox_mode` is `workspace-write`.\n</permissions instructions>",
                    }
                ],
            },
        )
        self._line(
            "response_item",
            start,
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"<environment_context>\n  <cwd>{self.CWD}</cwd>\n  <shell>bash</shell>\n"
                        "</environment_context>",
                    }
                ],
            },
        )
        users = 0
        for i, event in enumerate(events):
            ts = _ts(event.get("ts"), datetime(2026, 1, 1) + timedelta(seconds=i))
            kind = event.get("type")
            if kind == "message" and event["role"] == "user":
                if users:
                    self.start_turn(ts)
                users += 1
                self._line(
                    "response_item",
                    ts,
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": event["content"]}]},
                )
                self._line(
                    "event_msg",
                    ts,
                    {
                        "type": "user_message",
                        "message": event["content"],
                        "images": [],
                        "local_images": [],
                        "text_elements": [],
                    },
                )
            elif kind == "message" and event["role"] == "system":
                self._line(
                    "response_item",
                    ts,
                    {
                        "type": "message",
                        "role": "developer",
                        "content": [{"type": "input_text", "text": event["content"]}],
                    },
                )
            elif kind == "message":
                self._line(
                    "response_item",
                    ts,
                    {
                        "type": "reasoning",
                        "summary": [],
                        "content": None,
                        "encrypted_content": "gAAAAB" + self._id("r", i)[:40],
                    },
                )
                self._line(
                    "event_msg",
                    ts,
                    {
                        "type": "agent_message",
                        "message": event["content"],
                        "phase": "commentary",
                        "memory_citation": None,
                    },
                )
                self._line(
                    "response_item",
                    ts,
                    {
                        "type": "message",
                        "role": "assistant",
                        "phase": "commentary",
                        "content": [{"type": "output_text", "text": event["content"]}],
                    },
                )
            elif kind == "tool_call":
                self.call(event, ts)
            elif kind == "tool_result":
                self.result(event, ts)
                self.token_count(ts)
            elif kind == "memory_write":
                call_id = "call_" + self._id("note", i)[:24]
                note = {"content": event["content"], **({"store": event["store"]} if event.get("store") else {})}
                self._line(
                    "response_item",
                    ts,
                    {
                        "type": "function_call",
                        "name": "remember",
                        "namespace": "mcp__dreamweb__",
                        "arguments": json.dumps(note),
                        "call_id": call_id,
                    },
                )
                self._line(
                    "response_item",
                    _later(ts, 50),
                    {"type": "function_call_output", "call_id": call_id, "output": '[{"type":"text","text":"Saved."}]'},
                )
        last = next(
            (e["content"] for e in reversed(events) if e.get("type") == "message" and e.get("role") == "assistant"),
            None,
        )
        end = _later(self.lines[-1]["timestamp"], 200)
        self._line("event_msg", end, {"type": "task_complete", "last_agent_message": last})
        return self.lines


RENDERERS = {"claude-code": ClaudeCodeFile, "codex": CodexRollout}


def file_name(format: str, session: dict) -> str:
    if format == "codex":
        stamp = (session.get("started_at") or "2026-01-01T00:00:00Z")[:19].replace(":", "-")
        return f"rollout-{stamp}-{session['external_id']}.jsonl"
    return f"{session['external_id']}.jsonl"


def render(format: str, sessions_path: Path, out: Path) -> dict[tuple[str, str | None], Path]:
    """Write the files; return the folder of each (agent, task)."""
    folders: dict[tuple[str, str | None], Path] = {}
    with sessions_path.open() as fh:
        for raw in fh:
            if not raw.strip():
                continue
            session = json.loads(raw)
            key = (session["agent"], session.get("task"))
            folder = folders.setdefault(key, out / session["agent"] / (session.get("task") or "-"))
            folder.mkdir(parents=True, exist_ok=True)
            lines = RENDERERS[format](session).render()
            with (folder / file_name(format, session)).open("w") as dst:
                for line in lines:
                    dst.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    return folders


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in RENDERERS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    folders = render(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
    print(f"wrote {sum(1 for f in folders.values() for _ in f.iterdir())} files in {len(folders)} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
