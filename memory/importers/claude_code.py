"""Claude Code project transcripts (~/.claude/projects/<project>/<session>.jsonl, CLI 1.0.x to 2.x).

What a file holds and how it maps (../shared/real/transcripts/FORMATS.md has every field):
* One API message is split over several lines, one content block a line; adjacent text blocks of one `message.id`
  become one assistant message, and its `usage` (repeated on every line) is counted once.
* `tool_use` blocks are calls; `tool_result` blocks are results, `is_error` kept; a `<tool_use_error>` wrapper is an
  error whatever the flag says, and a Bash error's `Exit code N` header becomes `exit_code` (the header is not output).
* Background jobs: a BashOutput/TaskOutput call that polls a job started in the session is folded onto the call that
  started it (its output appended, the job's exit code on that call), so a poll is never a step of its own; the
  CLI's wrapping (the "running in background" line, `<status>`, `<exit_code>`, `<stdout>`, `<stderr>` tags) is not
  output and goes.
* `isMeta` lines, slash-command wrappers, local-command output, compaction summaries and interruptions are system
  text, not a person's words; thinking is dropped; `summary` lines, cwd, git branch and CLI version go to metadata.
* Subagents get sessions of their own, `<sessionId>:<agent id>` (2.x writes them to `agent-<id>.jsonl` with the
  parent's sessionId; 1.0.x interleaves them in the parent's file as `isSidechain` chains): their "user" turns are
  the parent agent's prompts, marked `"author": "agent"`, and metadata links them to the parent session and call.
* Hook, progress, queue and file-snapshot lines are bookkeeping of the CLI and are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .base import AUTHOR_AGENT, Format, Options, Parsed, Transcript, block_text, clean_text, mcp_name
from .source import Source

CONVERSATION = {"user", "assistant"}
BOOKKEEPING = {"summary", "file-history-snapshot", "system", "progress", "queue-operation"}
POLL_TOOLS = {"BashOutput", "TaskOutput"}
# What the CLI wraps a polled job's output in: `<status>failed</status>`, `<exit_code>2</exit_code>`, `<stdout>…`,
# `<stderr>…`, `<timestamp>…`. The output is the job's; the tags are the CLI's (never quoted in a lesson).
JOB_TAG = re.compile(r"<(status|exit_code|stdout|stderr|timestamp)>\n?(.*?)\n?</\1>", re.S)
BACKGROUND_NOTICE = re.compile(r"Command running in background with ID: \S+")


def _job_output(content: str) -> tuple[str, int | None]:
    """A poll's result as the job's own output (stdout, then stderr) and its exit code, when the CLI wrapped it."""
    tags = {m.group(1): m.group(2) for m in JOB_TAG.finditer(content)}
    if not tags:
        return content, None
    code = tags.get("exit_code", "").strip()
    rest = JOB_TAG.sub("", content).strip()
    output = "\n".join(t for t in (tags.get("stdout", ""), tags.get("stderr", ""), rest) if t.strip())
    return output, int(code) if code.lstrip("-").isdigit() else None


JOB_KEYS = ("backgroundTaskId", "shellId", "bash_id", "task_id", "agentId")
# What every line repeats about where the CLI ran: the last value of each goes to metadata.
CONTEXT_KEYS = (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "cli_version"), ("slug", "slug"))
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

TOOL_USE_ERROR = re.compile(r"\s*<tool_use_error>(.*)</tool_use_error>\s*", re.S)
EXIT_HEADER = re.compile(r"Exit code (-?\d+)[ \t]*(?:\r?\n|$)")
COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.S)
COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
# Text the CLI wraps in its own tags (output of local commands, `!` shell input/output, hook text, reminders): the
# whole message is hyphenated tags, one or several in a row (`<bash-stdout>…</bash-stdout><bash-stderr></bash-stderr>`),
# which a person's prose is not.
CLI_WRAPPER = re.compile(r"(?:\s*<([a-z]+(?:-[a-z]+)+)>.*?</\1>)+\s*", re.S)
CLI_TAG = re.compile(r"<([a-z]+(?:-[a-z]+)+)>(.*?)</\1>", re.S)


def cli_text(text: str) -> str:
    """What the CLI's tags hold, without the tags (`<local-command-stdout>Total cost: $0.42</…>` reads "Total cost:
    $0.42"); `!` shell input keeps its `!`, as it was typed."""
    parts = []
    for m in CLI_TAG.finditer(text):
        body = m.group(2).strip()
        if body:
            parts.append("! " + body if m.group(1) == "bash-input" else body)
    return "\n".join(parts) or text.strip()


INTERRUPTED = re.compile(r"\s*\[Request interrupted by user[^\]]*\]\s*")
# What the CLI adds to tool output: reminders to the model (e.g. after every Read, "consider whether it would be
# considered malware... you MUST refuse"), and the line numbers of Read ("    12→text").
SYSTEM_REMINDER = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.S)
READ_LINE_NUMBER = re.compile(r" *\d+(?:→|\t)")


def sniff(source: Source) -> bool:
    values = [v for v in source.head_values() if v is not None]
    if not values or not all(isinstance(v, dict) for v in values):
        return False
    for v in values:
        kind = v.get("type")
        if kind in CONVERSATION and "sessionId" in v and isinstance(v.get("message"), dict):
            return True
        if not (
            (kind == "summary" and "leafUuid" in v)
            or (kind == "file-history-snapshot" and "snapshot" in v)
            or (kind in BOOKKEEPING and "sessionId" in v)
            # A record type this reader does not know yet (custom-title, attachment, whatever the CLI adds next) is
            # still one of the CLI's when it is typed and names its session: it does not decide the format alone.
            or (isinstance(kind, str) and kind and isinstance(v.get("sessionId"), str))
        ):
            return False
    return True


@dataclass
class _Stream:
    """One conversation of the file: the main session or one subagent."""

    key: str
    agent_id: str | None = None
    root_uuid: str | None = None
    t: Transcript = field(default_factory=Transcript)
    model: str | None = None
    context: dict = field(default_factory=dict)
    usage: dict[str, dict] = field(default_factory=dict)
    last_text: dict | None = None
    last_text_mid: str | None = None
    first_prompt: str | None = None
    jobs: dict[str, str] = field(default_factory=dict)
    polls: dict[str, str] = field(default_factory=dict)
    ending: str = "unknown"

    @property
    def is_subagent(self) -> bool:
        return self.key != ""


def _command_text(text: str) -> str | None:
    """ "/name args" for a slash-command wrapper, else None."""
    if not text.lstrip().startswith("<command-"):
        return None  # tested first: a search of the whole text for a tag it does not start with costs more
    name = COMMAND_NAME.search(text)
    if name is None:
        return None
    args = COMMAND_ARGS.search(text)
    return f"{name.group(1).strip()} {args.group(1).strip() if args else ''}".strip()


def _without_line_numbers(text: str) -> str:
    """A file's text as Read showed it numbered ("     1→first line"), without the numbers."""
    lines = text.split("\n")
    numbered = [READ_LINE_NUMBER.match(line) for line in lines]
    if not any(numbered) or any(m is None and line for m, line in zip(numbered, lines, strict=True)):
        return text
    return "\n".join(line[m.end() :] if m else line for m, line in zip(numbered, lines, strict=True))


class _File:
    def __init__(self):
        self.session_id: str | None = None
        self.streams: dict[str, _Stream] = {}
        self.chain_of: dict[str, str] = {}
        self.seen: set[str] = set()
        self.summaries: list[str] = []
        self.task_calls: dict[str, dict] = {}  # Task tool_use id -> its input, in the main stream
        self.agent_calls: dict[str, str] = {}  # 2.x agentId -> the Task call that ran it
        self.unknown: dict[str, int] = {}  # line types this version does not read, counted for a notice

    def stream_for(self, line: dict) -> _Stream:
        if not line.get("isSidechain") and "" in self.streams:
            return self.streams[""]  # the main conversation, once it has begun: most lines
        uuid = line.get("uuid") if isinstance(line.get("uuid"), str) else None
        if not line.get("isSidechain"):
            key = ""
        elif isinstance(line.get("agentId"), str) and line["agentId"]:
            key = "agent:" + line["agentId"]
        else:
            key = self.chain_of.get(line.get("parentUuid") or "") or f"chain:{uuid or len(self.streams)}"
        if uuid and key:
            self.chain_of[uuid] = key
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = _Stream(key=key)
            if key.startswith("agent:"):
                stream.agent_id = line["agentId"]
            elif key.startswith("chain:"):
                stream.root_uuid = uuid
        return stream

    def add(self, line: dict) -> None:
        kind = line.get("type")
        if kind == "summary":
            if isinstance(line.get("summary"), str) and line["summary"] not in self.summaries:
                self.summaries.append(line["summary"])
            return
        if kind not in CONVERSATION:
            if isinstance(kind, str) and kind not in BOOKKEEPING:
                self.unknown[kind[:60]] = self.unknown.get(kind[:60], 0) + 1
            return
        uuid = line.get("uuid")
        if isinstance(uuid, str):
            if uuid in self.seen:
                return  # a replayed line (resume, copy) is the same line
            self.seen.add(uuid)
        if self.session_id is None and isinstance(line.get("sessionId"), str):
            self.session_id = line["sessionId"]
        stream = self.stream_for(line)
        context = stream.context
        for src, dst in CONTEXT_KEYS:
            value = line.get(src)
            if value and isinstance(value, str):
                context[dst] = value
        message = line.get("message") if isinstance(line.get("message"), dict) else {}
        if kind == "assistant":
            self.assistant(stream, line, message)
        else:
            self.user(stream, line, message)

    # assistant lines -------------------------------------------------------------------------------------------

    def assistant(self, stream: _Stream, line: dict, message: dict) -> None:
        ts = line.get("timestamp")
        model = message.get("model")
        if line.get("isApiErrorMessage") or model == "<synthetic>":
            # A message the CLI wrote when the API call failed: not the model's words.
            stream.t.say("system", block_text(message.get("content")) or "API error", ts)
            stream.ending = "failure"
            stream.last_text = None
            return
        if isinstance(model, str) and model:
            stream.model = model
        mid = message.get("id") if isinstance(message.get("id"), str) else None
        if mid and isinstance(message.get("usage"), dict):
            stream.usage[mid] = message["usage"]  # repeated on every line of the message: counted once
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                self.assistant_text(stream, block["text"], mid, ts)
            elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                name = str(block.get("name") or "tool")
                if kind == "mcp_tool_use":
                    name = mcp_name(name, block.get("server_name"))
                self.tool_use(stream, str(block.get("id") or ""), name, block.get("input"), ts)
                stream.last_text = None
            elif isinstance(kind, str) and kind.endswith("tool_result"):
                self.tool_result(stream, line, block, ts, single=False)
                stream.last_text = None
            # thinking and redacted_thinking blocks are dropped: reasoning, not what the agent said or did
        stream.ending = "unknown"

    def assistant_text(self, stream: _Stream, text: str, mid: str | None, ts) -> None:
        last = stream.t.events[-1] if stream.t.events else None
        if mid is not None and last is not None and last is stream.last_text and stream.last_text_mid == mid:
            last["content"] += "\n" + clean_text(text)
            return
        stream.last_text = stream.t.say("assistant", text, ts)
        stream.last_text_mid = mid

    def tool_use(self, stream: _Stream, call_id: str, name: str, arguments, ts) -> None:
        args = arguments if isinstance(arguments, dict) else {}
        if name in POLL_TOOLS:
            job = next((args[k] for k in ("bash_id", "shell_id", "task_id") if isinstance(args.get(k), str)), None)
            if job in stream.jobs:
                stream.polls[call_id] = stream.jobs[job]
                return
        if name in ("Task", "Agent") and not stream.is_subagent:
            self.task_calls[call_id] = args
        stream.t.call(call_id, name, arguments, ts)

    # user lines --------------------------------------------------------------------------------------------------

    def user(self, stream: _Stream, line: dict, message: dict) -> None:
        ts = line.get("timestamp")
        system = bool(line.get("isMeta") or line.get("isCompactSummary") or line.get("isVisibleInTranscriptOnly"))
        content = message.get("content")
        if isinstance(content, str):
            self.user_text(stream, content, ts, system)
            return
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        results = sum(1 for b in blocks if b.get("type") == "tool_result")
        texts: list[str] = []
        for block in blocks:
            if block.get("type") == "tool_result":
                if texts:
                    self.user_text(stream, "\n".join(texts), ts, system)
                    texts = []
                self.tool_result(stream, line, block, ts, single=results == 1)
            else:
                text = block_text([block])
                if text:
                    texts.append(text)
        if texts:
            self.user_text(stream, "\n".join(texts), ts, system)

    def user_text(self, stream: _Stream, text: str, ts, system: bool) -> None:
        stream.last_text = None
        if system:
            stream.t.say("system", text, ts)
            return
        command = _command_text(text)
        if command is not None:
            stream.t.say("system", command, ts)
        elif INTERRUPTED.fullmatch(text):
            stream.t.say("system", text.strip(), ts)
            stream.ending = "abandoned"
        elif CLI_WRAPPER.fullmatch(text):
            stream.t.say("system", cli_text(text), ts)
        else:
            if stream.first_prompt is None:
                stream.first_prompt = text.strip()
            stream.t.say("user", text, ts, author=AUTHOR_AGENT if stream.is_subagent else None)
            stream.ending = "unknown"

    def tool_result(self, stream: _Stream, line: dict, block: dict, ts, *, single: bool) -> None:
        call_id = str(block.get("tool_use_id") or "")
        content = block_text(block.get("content"))
        is_error = bool(block.get("is_error"))
        wrapped = TOOL_USE_ERROR.fullmatch(content) if "<tool_use_error>" in content else None
        if wrapped:
            content, is_error = wrapped.group(1).strip(), True
        if "<system-reminder>" in content:
            content = SYSTEM_REMINDER.sub("\n", content).strip("\n")
        call = stream.t.calls.get(call_id)
        if call is not None and call["name"] == "Read" and not is_error:
            content = _without_line_numbers(content)
        exit_code = None
        if is_error and (header := EXIT_HEADER.match(content)):
            exit_code, content = int(header.group(1)), content[header.end() :]
        # The line's structured result belongs to its one tool_result block.
        structured = line.get("toolUseResult") if single and isinstance(line.get("toolUseResult"), dict) else {}
        code = structured.get("exitCode")
        if isinstance(code, int) and not isinstance(code, bool):
            exit_code = code
        origin = stream.polls.get(call_id)
        if origin is not None:
            self.fold_poll(stream, origin, content, exit_code)
            return
        for key in JOB_KEYS:
            job = structured.get(key)
            if job and isinstance(job, str):
                stream.jobs[job] = call_id
        if isinstance(structured.get("agentId"), str) and call_id in self.task_calls:
            self.agent_calls[structured["agentId"]] = call_id
        stream.t.result(call_id, content, ts, is_error=is_error, exit_code=exit_code)

    def fold_poll(self, stream: _Stream, origin: str, content: str, exit_code: int | None) -> None:
        result = stream.t.results.get(origin)
        if result is None:
            return
        content, polled_code = _job_output(content)
        exit_code = polled_code if exit_code is None else exit_code
        if BACKGROUND_NOTICE.fullmatch(result["content"].strip()):
            result["content"] = ""  # the CLI's "running in background" line: the job's output replaces it
        if content.strip():
            result["content"] = (result["content"] + "\n" + clean_text(content)).strip("\n")
        if exit_code is not None:
            result["exit_code"] = exit_code
            if exit_code != 0:
                result["is_error"] = True

    # sessions ----------------------------------------------------------------------------------------------------

    def link_subagents(self) -> dict[str, tuple[str, dict]]:
        """stream key -> (the Task call that ran it, the call's input)."""
        links: dict[str, tuple[str, dict]] = {}
        unmatched = dict(self.task_calls)
        for key, stream in self.streams.items():
            if stream.agent_id is not None and stream.agent_id in self.agent_calls:
                call_id = self.agent_calls[stream.agent_id]
                links[key] = (call_id, self.task_calls.get(call_id, {}))
                unmatched.pop(call_id, None)
        for key, stream in self.streams.items():
            if key.startswith("chain:") and stream.first_prompt:
                # 1.0.x names no agent: the chain is the Task call whose prompt it starts with.
                for call_id, args in unmatched.items():
                    if isinstance(args.get("prompt"), str) and args["prompt"].strip() == stream.first_prompt:
                        links[key] = (call_id, args)
                        del unmatched[call_id]
                        break
        return links

    def sessions(self, options: Options) -> Iterator[Parsed]:
        if self.session_id is None:
            what = "summary lines only" if self.summaries else "no conversation lines"
            yield Parsed("file", notice=f"no session to import ({what})")
            return
        sid = self.session_id
        links = self.link_subagents()
        ids = {}
        for key, stream in self.streams.items():
            if key:
                call_id = links.get(key, ("", {}))[0]
                ids[key] = f"{sid}:{stream.agent_id or call_id or stream.root_uuid}"
        agent = options.agent or FORMAT.default_agent
        for key, stream in sorted(self.streams.items(), key=lambda kv: kv[0] != ""):
            if not stream.t.events:
                continue
            usage: dict[str, int] = {}
            for u in stream.usage.values():
                for k in USAGE_KEYS:
                    if isinstance(u.get(k), int):
                        usage[k] = usage.get(k, 0) + u[k]
            metadata = {"source_format": FORMAT.name, **stream.context, "usage": usage}
            if key:
                call_id, args = links.get(key, ("", {}))
                metadata.update(
                    parent_session=sid,
                    parent_tool_call=call_id,
                    subagent_id=stream.agent_id,
                    subagent_type=args.get("subagent_type"),
                    subagent_description=args.get("description"),
                )
            else:
                elsewhere = {f"{sid}:{agent_id}" for agent_id in self.agent_calls}  # 2.x: in agent-<id>.jsonl
                metadata.update(summaries=self.summaries, subagents=sorted(set(ids.values()) | elsewhere))
            doc = stream.t.document(
                external_id=ids.get(key, sid),
                agent=agent,
                task=options.task,
                model=stream.model,
                metadata=metadata,
                outcome=stream.ending,
            )
            yield Parsed(f"session {doc['external_id']}", doc=doc)


def read(source: Source, options: Options) -> Iterator[Parsed]:
    f = _File()
    for number, values, error in source.values():
        if error is not None:
            yield Parsed(f"line {number}", notice=f"skipped, {error}" if values is None else error)
            if values is None:
                continue
        for value in values or ():
            if isinstance(value, dict):
                f.add(value)
    if f.unknown:
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted(f.unknown.items()))
        yield Parsed("file", notice=f"skipped lines of a type this version does not read: {kinds}")
    for parsed in f.sessions(options):
        if parsed.doc is not None:
            parsed.hints = source.hints  # the checks its lines call for, no more (validate_session)
        yield parsed


FORMAT = Format(
    name="claude-code",
    label="Claude Code project transcript, JSON Lines",
    default_agent="claude-code",
    sniff=sniff,
    read=read,
)
