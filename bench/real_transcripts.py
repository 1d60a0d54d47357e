#!/usr/bin/env python
"""What the importers make of every real transcript in ../shared/real/transcripts (format found by content).

    .venv/bin/python bench/real_transcripts.py [DIR] [--write-docs]

Prints, per file: the format found, sessions (subagents apart), messages by role, tool calls, tool errors and the
exit codes kept, plus the totals. With --write-docs the table replaces the one in docs/session-formats.md. No
database: the sessions are read and validated exactly as `import_sessions` reads them, not stored.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")

import django  # noqa: E402

django.setup()

from memory.importers import Source  # noqa: E402
from memory.importers import read as read_file  # noqa: E402
from memory.importing import files_of, validated  # noqa: E402

REAL = ROOT.parent / "shared" / "real" / "transcripts"
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts")
SECTION = "## The real transcripts, imported"
COLUMNS = ["sessions", "subagents", "user", "assistant", "system", "tool calls", "tool errors", "exit codes", "notes"]


def count(path: Path) -> tuple[str, Counter, list[str]]:
    c: Counter = Counter()
    problems = []
    with path.open("rb") as fh:
        found, items = read_file(Source(fh, str(path)))
        for item in items:
            if item.doc is None:
                problems.append(f"{item.where}: {item.error or item.notice}")
                continue
            clean = validated(item, found.name)
            if isinstance(clean, str):
                problems.append(f"{item.where}: {clean}")
                continue
            doc = item.doc
            c["subagents" if "parent_session" in doc["metadata"] else "sessions"] += 1
            for e in doc["events"]:
                if e["type"] == "message":
                    c[e["role"]] += 1
                elif e["type"] == "tool_call":
                    c["tool calls"] += 1
                elif e["type"] == "tool_result":
                    c["tool errors"] += bool(e.get("is_error"))
                    c["exit codes"] += e.get("exit_code") is not None
                elif e["type"] == "memory_write":
                    c["notes"] += 1
    return found.name, c, problems


def table(root: Path) -> tuple[list[str], list[str]]:
    rows = ["| file | format | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    total: Counter = Counter()
    problems = []
    for path, _ in files_of(root):
        found, c, trouble = count(path)
        total += c
        problems += [f"{path.relative_to(root)}: {p}" for p in trouble]
        cells = " | ".join(str(c[k]) for k in COLUMNS)
        rows.append(f"| {path.relative_to(root).as_posix()} | {found} | {cells} |")
    files = sum(1 for _ in files_of(root))
    rows.append(f"| **total ({files} files)** | | " + " | ".join(f"**{total[k]}**" for k in COLUMNS) + " |")
    return rows, problems


def write_docs(rows: list[str]) -> None:
    docs = ROOT / "docs" / "session-formats.md"
    text = docs.read_text()
    section = "\n".join(
        [
            SECTION,
            "",
            "Every file of `../shared/real/transcripts/` (published real sessions, see its `SOURCES.md`) imports as it "
            "is, by content, from its folder: `python manage.py import_sessions ../shared/real/transcripts --team T` "
            "gives `imported 60, unchanged 0, rejected 0`, and again `imported 0, unchanged 60, rejected 0` "
            "(`tests/test_commands_import_formats.py`). Per file (`bench/real_transcripts.py --write-docs`): "
            "sessions (main sessions, and subagents apart), messages by role, tool calls, results that are errors, "
            "results that kept an exit code, in-band notes.",
            "",
            *rows,
            "",
            "Claude Code writes an exit code only for a failed Bash command (2.x: the `Exit code N` header) and for a "
            "polled background job (BashOutput's `exitCode`); none of the 1.0.x files here has one. Codex writes one "
            "for every command.",
            "",
        ]
    )
    if SECTION in text:
        head, rest = text.split(SECTION, 1)
        nxt = rest.find("\n## ")
        text = head + section + (rest[nxt:] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    docs.write_text(text)
    print(f"wrote {docs.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=REAL)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    rows, problems = table(args.root)
    print("\n".join(rows))
    for p in problems:
        print(p, file=sys.stderr)
    if args.write_docs:
        write_docs(rows)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
