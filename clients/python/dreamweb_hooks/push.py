"""Push agents' own transcript files to Dreamweb (``POST /api/v1/sessions/?format=...``, the raw file as the body):
the hooks use it for one session, ``dreamweb-push`` for files and folders by hand or from cron.

    dreamweb-push ~/.codex/sessions --format codex
    dreamweb-push ~/.claude/projects/-home-me-myproject/ --format claude-code --agent my-agent

Settings come from the environment (DREAMWEB_URL, DREAMWEB_API_KEY, DREAMWEB_AGENT, DREAMWEB_TASK). The server
converts each file (same detection and errors as ``manage.py import_sessions``); a file it already holds is
``unchanged``, so pushing a folder again is safe.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import httpx
from dreamweb_client import DreamwebClient, DreamwebError
from dreamweb_mcp.config import Settings

SUFFIXES = (".jsonl", ".json")


def transcript_files(paths: Iterable[Path]) -> list[Path]:
    """The files themselves, and every *.jsonl / *.json under the folders, in name order."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
        else:
            out.append(path)
    return out


def push_file(dw: DreamwebClient, path: Path, *, format: str, agent: str | None, task: str | None) -> dict:
    return dw.push_transcript(path.read_bytes(), format=format, agent=agent, task=task, filename=path.name)


def summary(answer: dict) -> str:
    counts = {k: v for k, v in answer.items() if isinstance(v, int)}
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "done"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dreamweb-push", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="Transcript files or folders.")
    parser.add_argument("--format", default="auto", help="auto (default), claude-code, codex, gemini-cli, ...")
    parser.add_argument("--agent", help="Agent name (default: DREAMWEB_AGENT, else the format's).")
    parser.add_argument("--task", help="Task name (default: DREAMWEB_TASK).")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    if settings.missing():
        parser.error(f"set {' and '.join(settings.missing())}")
    files = transcript_files(args.paths)
    if not files:
        print("no *.jsonl or *.json file under the given paths", file=sys.stderr)
        return 1
    failed = 0
    with settings.client() as dw:
        for i, path in enumerate(files, 1):
            try:
                agent, task = args.agent or settings.agent or None, args.task or settings.task
                answer = push_file(dw, path, format=args.format, agent=agent, task=task)
            except DreamwebError as exc:
                failed += 1
                print(f"[{i}/{len(files)}] {path}: {exc}", file=sys.stderr)
                continue
            except (OSError, httpx.HTTPError) as exc:  # unreadable file, or the server is not reachable
                failed += 1
                print(f"[{i}/{len(files)}] {path}: {exc}", file=sys.stderr)
                continue
            print(f"[{i}/{len(files)}] {path}: {summary(answer)}", file=sys.stderr)
    print(f"pushed {len(files) - failed} of {len(files)} files" + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
