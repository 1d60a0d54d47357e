#!/usr/bin/env python
"""A `rules` dream over real transcripts, offline: every proposal with its evidence, and a junk check.

    .venv/bin/python bench/real_dream.py [DIR ...] [--copies N] [--min-sessions K] [--json OUT] [--verbose]

Default DIR: ../shared/real/transcripts/entire-cli (45 sessions of one team). Every file under each DIR is read by
the importers (format found by content, exactly as `import_sessions` reads it, nothing stored), each session is
analysed with `reviews.analysis.rules.analyze` and the team's findings are aggregated with an empty memory
(min_sessions 3, as a dream does). With --copies N every session is also taken N-1 more times under new ids (and a
new agent name per copy), so that the patterns of a handful of single files can recur (issue 10: "the 8 single real
files, copied several times under new ids").

Prints each proposal (operation, kind, prevalence, scope, content, rationale, supporting sessions) and, last, the
junk check: a proposal is junk when it carries an absolute home path or a user name of the machines the sessions
came from, a Codex exec header, a poll, a routine read offered as knowledge, or the prompt a parent agent wrote for
a subagent offered as a person's preference. Exit 1 when any proposal is junk.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")

import django  # noqa: E402

django.setup()

from memory.importers import Source  # noqa: E402
from memory.importers import read as read_file  # noqa: E402
from memory.importing import files_of, validated  # noqa: E402
from reviews.analysis import aggregate as agg  # noqa: E402
from reviews.analysis import rules  # noqa: E402
from reviews.analysis.findings import SessionFindings  # noqa: E402

REAL = ROOT.parent / "shared" / "real" / "transcripts"
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts")

# What no proposal may carry, whatever its kind (the junk kinds of issue 10).
HOME = re.compile(r"(?:/Users/|/home/|C:\\\\Users\\\\)[^/\s`'\"]+")
JUNK = [
    ("an absolute home path", HOME),
    ("a Codex exec header", re.compile(r"Chunk ID:|Wall time:|Process exited with code|Original token count")),
    ("a poll of a running command", re.compile(r"\bwrite_stdin\b|\bBashOutput\b|\bTaskOutput\b")),
    ("a routine read offered as knowledge", re.compile(r"answers a recurring question")),
    ("a bare listing", re.compile(r"\bls -la?\b.*(?:drwx|total \d)|drwx[r-][w-][x-]")),
]


def sessions_of(paths: list[Path]) -> list[dict]:
    docs = []
    for root in paths:
        for path, _ in files_of(root):
            with path.open("rb") as fh:
                found, items = read_file(Source(fh, str(path)))
                for item in items:
                    if item.doc is None:
                        continue
                    clean = validated(item, found.name)
                    if isinstance(clean, str):
                        print(f"{path}: {clean}", file=sys.stderr)
                        continue
                    docs.append(item.doc)
    return docs


def copies(docs: list[dict], n: int) -> list[dict]:
    """Each session n times: the original and n-1 copies under new ids (and agent names), links kept inside a copy."""
    out = list(docs)
    for i in range(1, n):
        for d in docs:
            c = copy.deepcopy(d)
            c["external_id"] = f"{d['external_id']}~copy{i}"
            meta = c.get("metadata") or {}
            if meta.get("parent_session"):
                meta["parent_session"] = f"{meta['parent_session']}~copy{i}"
            out.append(c)
    return out


OWNER = re.compile(r"(?m)^[-dl][rwxsStT-]{9}[@+.]?\s+\d+\s+(\S+)\s+\S+\s")


def users_of(docs: list[dict]) -> set[str]:
    """The user names of the machines the sessions came from: their home directories, and the owners that `ls -l`
    listings show."""
    names = set()
    for d in docs:
        for m in HOME.finditer(json.dumps(d.get("metadata") or {})):
            names.add(re.split(r"[/\\]", m.group(0).rstrip("/\\"))[-1])
        for e in d.get("events") or ():
            if e.get("type") == "tool_result" and isinstance(e.get("content"), str):
                names.update(OWNER.findall(e["content"]))
    return {n for n in names if len(n) >= 3 and n.lower() not in ("root", "user", "users", "staff", "wheel")}


def junk(proposal: dict, users: set[str], agent_prompts: list[str]) -> list[str]:
    text = f"{proposal['content']}\n{proposal['rationale']}"
    why = [name for name, pat in JUNK if pat.search(text)]
    why += [f"the user name {u!r}" for u in sorted(users) if re.search(rf"(?<![\w-]){re.escape(u)}(?![\w-])", text)]
    if proposal["kind"] in ("preference", "stale") and any(p[:60] and p[:60] in text for p in agent_prompts):
        why.append("a subagent's task prompt read as a person's words")
    return why


def dream(docs: list[dict], min_sessions: int) -> dict:
    sessions = []
    for i, d in enumerate(docs):
        found = rules.analyze(d).findings
        sessions.append(SessionFindings(i + 1, d["external_id"], d.get("agent") or "agent", d.get("task"), found))
    result = agg.aggregate(sessions, sessions_analysed=len(sessions), memory=[], min_sessions=min_sessions)
    return {
        "sessions": len(sessions),
        "proposals": [
            {
                "operation": p.operation,
                "kind": p.kind,
                "risk": p.risk,
                "sessions": p.prevalence_sessions,
                "of": p.prevalence_of,
                "scope_agent": p.scope_agent,
                "content": p.content,
                "rationale": p.rationale,
                "supporting_sessions": p.supporting_sessions,
            }
            for p in result.proposals
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path, default=[REAL / "entire-cli"])
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--min-sessions", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--verbose", action="store_true", help="print the evidence sessions of each proposal")
    args = parser.parse_args()
    docs = sessions_of(args.dirs)
    users = users_of(docs)
    agent_prompts = [
        e["content"]
        for d in docs
        for e in d["events"]
        if e.get("type") == "message" and e.get("author") == "agent" and isinstance(e.get("content"), str)
    ]
    out = dream(copies(docs, args.copies), args.min_sessions)
    bad = 0
    for i, p in enumerate(out["proposals"], 1):
        why = junk(p, users, agent_prompts)
        p["junk"] = why
        bad += bool(why)
        scope = f", agent {p['scope_agent']}" if p["scope_agent"] else ""
        print(f"p{i} {p['operation']} {p['kind']} ({p['sessions']} of {p['of']} sessions{scope}, risk {p['risk']})")
        print(f"   {p['content']}")
        print(f"   why: {p['rationale']}")
        if args.verbose:
            print(f"   sessions: {', '.join(s[:8] for s in p['supporting_sessions'])}")
        if why:
            print(f"   JUNK: {'; '.join(why)}")
    print(f"{len(out['proposals'])} proposals over {out['sessions']} sessions, {bad} junk")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
