"""``dreamweb-codex-notify``: Codex's ``notify`` program (``notify = ["dreamweb-codex-notify"]`` in
``~/.codex/config.toml``). Codex runs it after each turn with one argument, a JSON document: ``type``
(``agent-turn-complete``), ``thread-id``, ``turn-id``, ``cwd``, ``input-messages``, ``last-assistant-message``.

It finds the thread's rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``, CODEX_HOME
defaulting to ``~/.codex``) and pushes it as it is (``format=codex``). Every failure is one line on standard error;
the exit status is 0, so the agent never waits on Dreamweb.
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


def _say(message: str) -> None:
    print(f"dreamweb: {message}", file=sys.stderr)


def codex_home() -> Path:
    return Path(os.path.expanduser(os.environ.get("CODEX_HOME") or "~/.codex"))


def find_rollout(thread_id: str, home: Path | None = None) -> Path | None:
    """The newest rollout file of the thread (a resumed thread may have several)."""
    if not thread_id or "/" in thread_id or "*" in thread_id:
        return None
    sessions = (home or codex_home()) / "sessions"
    found = sorted(sessions.rglob(f"rollout-*-{thread_id}.jsonl"), key=lambda p: p.name)
    return found[-1] if found else None


def run(notification: dict, settings: Settings, home: Path | None = None) -> None:
    if notification.get("type") != "agent-turn-complete":
        _say(f"nothing to do for a {notification.get('type')!r} notification")
        return
    thread_id = str(notification.get("thread-id") or "")
    rollout = find_rollout(thread_id, home)
    if rollout is None:
        _say(f"no rollout for thread {thread_id!r} under {(home or codex_home()) / 'sessions'}; nothing pushed")
        return
    with settings.client() as dw:
        answer = push_file(dw, rollout, format="codex", agent=settings.agent or None, task=settings.task)
    _say(f"pushed {rollout.name}: {summary(answer)}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        notification = json.loads(args[-1]) if args else {}
    except ValueError as exc:
        _say(f"the notification is not JSON ({exc}); nothing done")
        return 0
    if not isinstance(notification, dict):
        _say("the notification is not a JSON object; nothing done")
        return 0
    settings = Settings.from_env()
    if settings.missing():
        _say(f"set {' and '.join(settings.missing())}; nothing done")
        return 0
    try:
        run(notification, settings)
    except DreamwebError as exc:
        _say(f"Dreamweb refused: {exc}")
    except (httpx.HTTPError, OSError) as exc:
        _say(f"Dreamweb is not reachable at {settings.url}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
