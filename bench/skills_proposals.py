"""Skill proposals: time of recurring_procedures + skill_drafts at 100 / 1,000 / 5,000 synthetic sessions (median of
several runs), and of rendering a skill page's markdown safely.

    .venv/bin/python bench/skills_proposals.py [--sizes 100,1000,5000] [--runs 5]

Each synthetic session has 40 tool calls (a fifth of them failing), drawn from 560 commands, plus, in a tenth of
the sessions of one agent/task, a planted 5-step procedure; 50 skills to match 2,000 finding groups against.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviews.analysis.procedures import recurring_procedures  # noqa: E402
from reviews.analysis.skills import skill_drafts  # noqa: E402
from skills_registry.rendering import render_markdown  # noqa: E402

_WORDS = "deploy build cache refund finance export report ticket staging release queue worker config table"
WORDS = _WORDS.split()
VERBS = [f"tool-{a}{b}" for a in "abcdefghij" for b in "abcd"]  # 40 programs x 14 words: 560 distinct commands
PLANTED = [
    "terraform init",
    "terraform plan -out p",
    "terraform apply p",
    "kubectl rollout status deploy/web",
    "make smoke",
]


def call(i: int, command: str, ok: bool) -> list[dict]:
    return [
        {"type": "tool_call", "id": f"c{i}", "name": "bash", "arguments": {"command": command}},
        {"type": "tool_result", "call_id": f"c{i}", "content": "x", "is_error": not ok, "exit_code": 0 if ok else 1},
    ]


def sessions(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for s in range(n):
        agent = f"agent-{s % 8}"
        events = []
        for i in range(40):
            events += call(i, f"{rng.choice(VERBS)} --flag {rng.choice(WORDS)}", rng.random() > 0.2)
        if s % 8 == 0 and rng.random() < 0.8:
            at = rng.randrange(len(events) // 2) * 2
            planted = [e for j, c in enumerate(PLANTED) for e in call(100 + j, c, True)]
            events[at:at] = planted
        out.append({"session_id": s, "external_id": f"s{s}", "agent": agent, "task": "t", "outcome": "success",
                    "events": events})  # fmt: skip
    return out


def skills(n: int = 50) -> list[dict]:
    rng = random.Random(3)
    return [
        {
            "name": f"skill-{i}",
            "description": " ".join(rng.choice(WORDS) for _ in range(12)),
            "body": " ".join(rng.choice(WORDS) for _ in range(300)),
            "content_hash": f"h{i}",
        }
        for i in range(n)
    ]


def groups(n: int = 2000) -> list[dict]:
    rng = random.Random(5)
    return [
        {
            "key": f"g{i}",
            "kind": "corrected_command",
            "summary": " ".join(rng.choice(WORDS) for _ in range(10)),
            "old": f"make {rng.choice(WORDS)}",
            "new": f"make {rng.choice(WORDS)}-v2",
            "tags": [],
            "sessions": list(range(rng.randrange(1, 12))),
            "confidence": 0.8,
            "trust": "agent",
            "evidence": [],
        }
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sk, gr = skills(), groups()
    for size in [int(x) for x in args.sizes.split(",")]:
        docs = sessions(size)
        proc_times, draft_times, found = [], [], 0
        for _ in range(args.runs):
            started = time.perf_counter()
            procs = recurring_procedures(docs, min_sessions=3)
            middle = time.perf_counter()
            drafts = skill_drafts(gr, sk, sessions_analysed=size, procedures=procs)
            proc_times.append(middle - started)
            draft_times.append(time.perf_counter() - middle)
            found = sum(1 for d in drafts if d["operation"] == "add")
        print(f"{size:>6} sessions ({size * 40:,} tool calls): recurring_procedures median "
              f"{statistics.median(proc_times) * 1000:8.1f} ms; skill_drafts ({len(gr)} groups x {len(sk)} skills) "
              f"{statistics.median(draft_times) * 1000:6.1f} ms; {len(drafts)} drafts, {found} new-skill")  # fmt: skip
    body = (Path(__file__).resolve().parent.parent / "tests/data/skills/release-process/SKILL.md").read_text() * 20
    times = []
    for _ in range(args.runs * 20):
        started = time.perf_counter()
        render_markdown(body)
        times.append(time.perf_counter() - started)
    print(f"render_markdown of a {len(body) // 1024} KiB skill: median {statistics.median(times) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
