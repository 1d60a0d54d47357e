"""``dreamweb-claude-code-hook``: connects Claude Code to Dreamweb with no code (settings snippet in docs/agents.md).

Claude Code runs it with the hook's input document on standard input:

* ``SessionStart`` (``session_id``, ``transcript_path``, ``cwd``, ``source``): the memory and skill index for this
  agent and task are printed as ``hookSpecificOutput.additionalContext``, which Claude Code adds to the session's
  context; the serve is recorded under the session's id, so the dream knows what it gave this session.
* ``SessionEnd`` (and ``Stop``, if configured): the transcript file (``transcript_path``) is pushed as it is
  (``format=claude-code``), with the session's subagent files (Claude Code 2.x writes each subagent to
  ``<session id>/subagents/agent-*.jsonl`` beside it, or to ``agent-*.jsonl`` in the same folder).

A hook must never stand in the agent's way: every failure is one line on standard error and the exit status is 0.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
from dreamweb_client import DreamwebError
from dreamweb_mcp.config import Settings

from .push import push_file, summary

DEFAULT_AGENT = "claude-code"
DEFAULT_MAX_TOKENS = 2000
PUSH_EVENTS = {"SessionEnd", "Stop", "SubagentStop", "PreCompact"}


def _say(message: str) -> None:
    print(f"dreamweb: {message}", file=sys.stderr)


def session_files(transcript: Path, session_id: str) -> list[Path]:
    """The session's transcript and its subagents' files."""
    files = [transcript]
    nested = transcript.parent / session_id / "subagents"
    if nested.is_dir():
        files += sorted(nested.glob("agent-*.jsonl"))
    for sibling in sorted(transcript.parent.glob("agent-*.jsonl")):
        if _first_session_id(sibling) == session_id:
            files.append(sibling)
    return files


def _first_session_id(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            return json.loads(f.readline() or b"{}").get("sessionId")
    except (OSError, ValueError, AttributeError):
        return None


def session_start(settings: Settings, hook: dict) -> dict | None:
    max_tokens = int(os.environ.get("DREAMWEB_MAX_TOKENS") or DEFAULT_MAX_TOKENS)
    with settings.client() as dw:
        result = dw.context(
            store=settings.store,
            agent=settings.agent or DEFAULT_AGENT,
            task=settings.task,
            max_tokens=max_tokens,
            session=hook.get("session_id") or None,
        )
    text = (result.get("text") or "").strip()
    if not text:
        return None
    context = "Memory and skills from Dreamweb (this team's reviewed knowledge):\n\n" + text
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


def push_session(settings: Settings, hook: dict) -> None:
    transcript = Path(os.path.expanduser(hook.get("transcript_path") or ""))
    if not hook.get("transcript_path") or not transcript.is_file():
        _say(f"no transcript file at {hook.get('transcript_path')!r}; nothing pushed")
        return
    with settings.client() as dw:
        for path in session_files(transcript, str(hook.get("session_id") or "")):
            try:
                answer = push_file(dw, path, format="claude-code", agent=settings.agent or None, task=settings.task)
            except DreamwebError as exc:
                if exc.status != 409:
                    raise
                # A resumed session: the server keeps the version it was given first.
                _say(f"{path.name}: the server holds another version of this session ({exc.detail}); not replaced")
                continue
            _say(f"pushed {path.name}: {summary(answer)}")


def run(hook: dict, settings: Settings) -> dict | None:
    event = hook.get("hook_event_name")
    if event == "SessionStart":
        return session_start(settings, hook)
    if event in PUSH_EVENTS:
        push_session(settings, hook)
        return None
    _say(f"nothing to do for the {event!r} event")
    return None


def main() -> int:
    try:
        hook = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        _say(f"the hook input is not JSON ({exc}); nothing done")
        return 0
    if not isinstance(hook, dict):
        _say("the hook input is not a JSON object; nothing done")
        return 0
    settings = Settings.from_env()
    if settings.missing():
        _say(f"set {' and '.join(settings.missing())}; nothing done")
        return 0
    try:
        output = run(hook, settings)
    except DreamwebError as exc:
        _say(f"Dreamweb refused: {exc}")
        return 0
    except (httpx.HTTPError, OSError) as exc:
        _say(f"Dreamweb is not reachable at {settings.url}: {exc}")
        return 0
    if output is not None:
        print(json.dumps(output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
