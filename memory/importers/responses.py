"""Items of the OpenAI Responses API (`message`, `function_call`, `function_call_output`, `custom_tool_call`,
`web_search_call`, `mcp_call`, `reasoning`, ...), as a Codex rollout logs them and as a Responses conversation holds
them: one reading for both.

What Codex adds to plain items is here too because it lives in the items themselves: the output header of its exec
tool ("Chunk ID: … Wall time: … Process exited with code N … Output:"), stripped, its exit code kept; and commands
still running when their call returned, polled with `write_stdin` under another call id. An empty write is a poll:
it is folded onto the command (output appended, exit code on the command), so a poll is never a step of its own and
never blamed for the command it waits on. A write that sends input stays a call of its own.
"""

from __future__ import annotations

import re
import shlex

from dreamweb import input_guard

from .base import Transcript, block_text, clean_text, mcp_name
from .tool_output import reported_outcome

HEADER_LINE = re.compile(
    r"Chunk ID: .*|Wall time: .*|Original token count: .*|Process exited with code (?P<code>-?\d+)"
    r"|Process running with session ID (?P<session>\d+)|Exit code: (?P<code2>-?\d+)"
)
# Context an agent injects as user items (Codex: AGENTS.md, <environment_context>, <user_instructions>, ...).
INJECTED = re.compile(r"\s*(?:# AGENTS\.md instructions|<([a-z]+(?:[ _-][a-z]+)*)>.*</\1>\s*$)", re.S)


def parse_output(output) -> tuple[str, int | None, str | None]:
    """(text without the exec header, exit code, id of the process still running) of a tool output."""
    if not isinstance(output, str):
        if isinstance(output, dict) and "content" in output:
            output = output["content"]
        return block_text(output), None, None
    if output.startswith("{"):
        try:
            wrapped = input_guard.parse(output)[0]
        except ValueError:  # not JSON, or nested past what the parser takes (input_guard.Refused)
            wrapped = None
        if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str):
            # {"output": ..., "metadata": {"exit_code": N, "duration_seconds": s}}: apply_patch, older shell calls
            meta = wrapped.get("metadata") if isinstance(wrapped.get("metadata"), dict) else {}
            code = meta.get("exit_code")
            return wrapped["output"], code if isinstance(code, int) and not isinstance(code, bool) else None, None
    code = session = None
    pos = 0
    seen_header = False
    while True:
        end = output.find("\n", pos)
        line = output[pos:] if end == -1 else output[pos:end]
        if line == "Output:" and seen_header:
            pos = len(output) if end == -1 else end + 1
            break
        match = HEADER_LINE.fullmatch(line)
        if match is None:
            if not seen_header:
                return output, None, None
            break  # a header without "Output:": the rest is the output
        seen_header = True
        found = match.group("code") or match.group("code2")
        if found is not None:
            code = int(found)
        if match.group("session") is not None:
            session = match.group("session")
        if end == -1:
            pos = len(output)
            break
        pos = end + 1
    return output[pos:], code, session


def command_text(command) -> str | None:
    """A command given as argv (Codex's shell and local_shell calls) as the line a person would type: the script of
    `bash -lc SCRIPT`, else the words joined with shell quoting."""
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command) or not command:
        return None
    if len(command) == 3 and command[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and command[1] in ("-lc", "-c"):
        return command[2]
    return shlex.join(command)


def arguments(raw):
    """Call arguments as an object when they are a JSON object in a string (as the API sends them)."""
    if isinstance(raw, str):
        try:
            parsed = input_guard.parse(raw)[0]
        except ValueError:  # not JSON, or nested past what the parser takes (input_guard.Refused)
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw


class Items:
    """Canonical events from Responses items, fed one by one."""

    def __init__(self):
        self.t = Transcript()
        self.processes: dict[str, str] = {}  # process id -> the exec call that started it
        self.polls: dict[str, str] = {}  # empty write_stdin call -> the command it polls
        self.writes: dict[str, str] = {}  # write_stdin call that sent input -> the command
        self.exit_codes: dict[str, int] = {}  # what a process really returned (an end event), over the header
        self.failed: set[str] = set()  # calls that failed without an exit code (patches, MCP calls)
        self.fallback: dict[str, tuple[object, object]] = {}  # call id -> (output, ts) when no output item came
        self.user_items: list[dict] = []
        self.person_events = 0
        self.seen_text: dict[tuple[str, str], tuple[str, dict]] = {}
        self.web_searches = 0

    def message(self, role: str, text: str, ts, origin: str) -> None:
        """A message seen as an item (origin "item") or as an event (origin "event"): Codex logs most twice; the
        second copy is dropped. A user item seen as an event too is the person's."""
        key = (role, text.strip())
        if not key[1]:
            return
        earlier = self.seen_text.pop(key, None)
        if earlier is not None and earlier[0] != origin:
            if role == "user":
                earlier[1]["_person"] = True
            return
        event = self.t.say(role, text, ts)
        if event is None:
            return
        self.seen_text[key] = (origin, event)
        if role == "user":
            if origin == "item":
                self.user_items.append(event)
            else:
                event["_person"] = True

    def item(self, p: dict, ts) -> None:
        kind = p.get("type", "message" if "role" in p else None)
        if kind == "message":
            role = p.get("role")
            text = block_text(p.get("content"))
            if role in ("developer", "system"):
                self.t.say("system", text, ts)
            elif role in ("user", "assistant"):
                self.message(role, text, ts, "item")
        elif kind in ("function_call", "custom_tool_call"):
            name = mcp_name(str(p.get("name") or "tool"), p.get("namespace"))
            raw = p.get("arguments") if kind == "function_call" else p.get("input")
            self.call(str(p.get("call_id") or p.get("id") or ""), name, arguments(raw), ts)
        elif kind == "local_shell_call":
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            args = {"command": command_text(action.get("command")), "workdir": action.get("working_directory")}
            self.call(str(p.get("call_id") or p.get("id") or ""), "local_shell", args, ts)
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            self.output(str(p.get("call_id") or ""), p.get("output"), ts)
        elif kind == "mcp_call":
            call_id = str(p.get("id") or "")
            name = mcp_name(str(p.get("name") or "tool"), p.get("server_label"))
            self.t.call(call_id, name, arguments(p.get("arguments")), ts)
            error = p.get("error")
            self.t.result(call_id, str(error) if error else block_text(p.get("output")), ts, is_error=bool(error))
        elif kind == "web_search_call":
            self.web_searches += 1
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            self.t.call(str(p.get("id") or f"web_search_{self.web_searches}"), "web_search", action, ts)
        elif kind == "code_interpreter_call":
            # The code the model ran and what it printed (logs; an image output is a marker).
            call_id = str(p.get("id") or "")
            self.t.call(call_id, "code_interpreter", {"code": p.get("code") or ""}, ts)
            outputs = p.get("outputs") if isinstance(p.get("outputs"), list) else []
            printed = [
                o.get("logs") if isinstance(o, dict) and isinstance(o.get("logs"), str) else "[image]"
                for o in outputs
                if isinstance(o, dict)
            ]
            self.t.result(call_id, "\n".join(printed), ts, is_error=p.get("status") == "failed")
        # reasoning (opaque, often encrypted) and newer item types: nothing an analysis can read

    def call(self, call_id: str, name: str, args, ts) -> None:
        if isinstance(args, dict) and isinstance(args.get("command"), list) and command_text(args["command"]):
            args = {**args, "command": command_text(args["command"])}
        if name == "write_stdin" and isinstance(args, dict):
            target = self.processes.get(str(args.get("session_id")))
            if target is not None and not args.get("chars"):
                self.polls[call_id] = target
                return
            if target is not None:
                self.writes[call_id] = target
        self.t.call(call_id, name, args, ts)

    def output(self, call_id: str, output, ts) -> None:
        text, code, running = parse_output(output)
        if code is None and running is None and isinstance(output, str) and text is output:
            # No exec header: an application's own output, which may say how the call ended as chat tool messages
            # do (`{"stdout": …, "exit_code": 2}`, `{"error": "…"}`, "Exit code: 1"; memory.importers.tool_output).
            text, code, failed = reported_outcome(output)
            if failed:
                self.failed.add(call_id)
        target = self.polls.get(call_id) or self.writes.get(call_id)
        if running is not None:
            self.processes[running] = target or call_id
        if call_id in self.polls:
            result = self.t.results.get(target)
            if result is not None and text.strip():
                result["content"] = (result["content"] + "\n" + clean_text(text)).strip("\n")
            if result is not None and code is not None:
                result["exit_code"] = code
            return
        if call_id in self.writes:
            result = self.t.results.get(target)
            if result is not None and code is not None:
                result["exit_code"] = code
            code = None  # the process's exit code, not the write's
        self.t.result(call_id, text, ts, exit_code=code)

    def finish(self) -> None:
        for call_id, (output, ts) in self.fallback.items():
            if call_id in self.t.calls and call_id not in self.t.results:
                self.t.result(call_id, output if isinstance(output, str) else block_text(output), ts)
        for call_id, code in self.exit_codes.items():
            if call_id in self.t.results:
                self.t.results[call_id]["exit_code"] = code
        for call_id, result in self.t.results.items():
            code = result.get("exit_code")
            if call_id in self.failed or (isinstance(code, int) and code != 0) or result.get("is_error"):
                result["is_error"] = True
        for event in self.user_items:
            if not event.get("_person") and (self.person_events or INJECTED.match(event["content"])):
                event["role"] = "system"  # context the agent sent as a user item, never typed by the person
        for event in self.t.events:
            event.pop("_person", None)
