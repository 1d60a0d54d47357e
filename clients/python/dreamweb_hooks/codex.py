"""``dreamweb-codex-notify``: Codex's ``notify`` program (``notify = ["dreamweb-codex-notify"]`` in
``~/.codex/config.toml``). Codex runs it after each turn with one argument, a JSON document: ``type``
(``agent-turn-complete``), ``thread-id``, ``turn-id``, ``cwd``, ``input-messages``, ``last-assistant-message``.

A turn is not the end of a session, and the server keeps the first version of a session it is given (a longer one
under the same id is a conflict), so a rollout is pushed once its thread has settled: each notification records
the thread's rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``, CODEX_HOME defaulting to
``~/.codex``) in ``$CODEX_HOME/dreamweb-notify.json``, and pushes (``format=codex``) every recorded rollout that has
not changed for ``DREAMWEB_SETTLE_SECONDS`` (default 600) and was not pushed at that size. With 0, the current
thread is pushed after every turn (for one-shot ``codex exec`` runs). ``dreamweb-push ~/.codex/sessions`` pushes
whatever is left. Every failure is one line on standard error; the exit status is 0, so the agent never waits on
Dreamweb.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
from dreamweb_client import DreamwebError
from dreamweb_mcp.config import Settings

from .push import push_file, summary

STATE_FILE = "dreamweb-notify.json"
DEFAULT_SETTLE_SECONDS = 600


def _say(message: str) -> None:
    print(f"dreamweb: {message}", file=sys.stderr)


def codex_home() -> Path:
    return Path(os.path.expanduser(os.environ.get("CODEX_HOME") or "~/.codex"))


def settle_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("DREAMWEB_SETTLE_SECONDS") or DEFAULT_SETTLE_SECONDS))
    except ValueError:
        return DEFAULT_SETTLE_SECONDS


def find_rollout(thread_id: str, home: Path | None = None) -> Path | None:
    """The newest rollout file of the thread (a resumed thread may have several)."""
    if not thread_id or "/" in thread_id or "*" in thread_id:
        return None
    sessions = (home or codex_home()) / "sessions"
    found = sorted(sessions.rglob(f"rollout-*-{thread_id}.jsonl"), key=lambda p: p.name)
    return found[-1] if found else None


def load_state(home: Path) -> dict:
    try:
        state = json.loads((home / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def save_state(home: Path, state: dict) -> None:
    home.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=home, prefix=".dreamweb-notify-")
    with os.fdopen(fd, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, home / STATE_FILE)  # two notifications at once never leave half a file


def due(state: dict, now: float, settle: float) -> list[str]:
    """Threads whose rollout has not changed for ``settle`` seconds and was not pushed at its present size."""
    out = []
    for thread, entry in sorted(state.items()):
        try:
            st = Path(entry["path"]).stat()
        except (OSError, KeyError, TypeError):
            continue
        if now - st.st_mtime >= settle and entry.get("pushed") != st.st_size:
            out.append(thread)
    return out


def run(notification: dict, settings: Settings, home: Path | None = None, *, now: float | None = None) -> None:
    if notification.get("type") != "agent-turn-complete":
        _say(f"nothing to do for a {notification.get('type')!r} notification")
        return
    home = home or codex_home()
    state = {t: e for t, e in load_state(home).items() if isinstance(e, dict) and Path(e.get("path", "")).exists()}
    thread_id = str(notification.get("thread-id") or "")
    rollout = find_rollout(thread_id, home)
    if rollout is None:
        _say(f"no rollout for thread {thread_id!r} under {home / 'sessions'}")
    else:
        state.setdefault(thread_id, {})["path"] = str(rollout)
    threads = due(state, time.time() if now is None else now, settle_seconds())
    try:
        if threads:
            with settings.client() as dw:
                for thread in threads:
                    _push(dw, settings, state[thread])
    finally:
        save_state(home, state)


def _push(dw, settings: Settings, entry: dict) -> None:
    path = Path(entry["path"])
    size = path.stat().st_size
    try:
        answer = push_file(dw, path, format="codex", agent=settings.agent or None, task=settings.task)
    except DreamwebError as exc:
        if exc.status != 409:
            raise
        # The server holds another version of this session (the thread went on after it was pushed): say so once.
        entry["pushed"] = size
        _say(f"{path.name}: the server holds another version of this session ({exc.detail}); not replaced")
        return
    entry["pushed"] = size
    _say(f"pushed {path.name}: {summary(answer)}")


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
