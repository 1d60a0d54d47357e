"""Aggregation time at 1k / 10k / 100k synthetic findings (median of 3 runs), to show near-linear growth.

    .venv/bin/python bench/aggregate_scaling.py [--sizes 1000,10000,100000] [--runs 3]

The synthetic mix resembles real analyses: five findings per session, a tenth of them recurring patterns (corrected
commands, corrections, paraphrased notes with shared numbers, lookups) and the rest one-off noise with unique
anchors, plus 200 memory entries to diff against.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviews.analysis.aggregate import aggregate  # noqa: E402
from reviews.analysis.findings import SessionFindings  # noqa: E402
from reviews.analysis.normalize import clear_caches  # noqa: E402

WORDS = ["deploy", "build", "cache", "refund", "finance", "export", "report", "ticket", "staging", "release", "queue"]


def ev(text, trust="agent"):
    return [{"event_index": 3, "excerpt": text[:120], "trust": trust}]


def finding(rng: random.Random, i: int, patterns: int) -> dict:
    r = rng.random()
    if r < 0.1:  # recurring patterns, drawn from a pool that grows with the corpus
        p = rng.randrange(patterns)
        kind = p % 4
        if kind == 0:
            old, new = f"make target{p}", f"make target{p}-v2"
            return {
                "kind": "corrected_command",
                "key": f"cmd:{old}=>{new}",
                "old": old,
                "new": new,
                "summary": f"Use `{new}` instead of `{old}`.",
                "error": f"No rule to make target 'target{p}'.",
                "trust": "tool",
                "confidence": 0.7,
                "evidence": ev(new),
            }
        if kind == 1:
            return {
                "kind": "correction",
                "key": f"pref:tool{p}=>tool{p}x",
                "old": f"tool{p} run",
                "new": f"tool{p}x run",
                "said_old": [f"tool{p}"],
                "said_new": [f"tool{p}x"],
                "summary": f"Use tool{p}x, not tool{p}.",
                "trust": "agent",
                "confidence": 0.75,
                "evidence": ev("Use the other one", "user"),
            }
        if kind == 2:
            w = rng.sample(WORDS, 3)
            text = f"The {w[0]} limit for {w[1]} {w[2]} is {1000 + p} units."
            return {
                "kind": "note",
                "key": "",
                "summary": text,
                "trust": "agent",
                "confidence": 0.6,
                "evidence": ev(text),
            }
        return {
            "kind": "lookup",
            "key": f"lookup:read_file:docs/area{p}.md",
            "query": f"docs/area{p}.md",
            "summary": f"`read_file docs/area{p}.md` answers a recurring question.",
            "trust": "agent",
            "confidence": 0.35,
            "evidence": ev(f"docs/area{p}.md"),
        }
    # one-off noise with unique anchors
    marker = f"zq{i:07d}x"
    if r < 0.55:
        text = f"Ticket {marker} was a duplicate; closed it."
        return {"kind": "note", "key": "", "summary": text, "trust": "agent", "confidence": 0.6, "evidence": ev(text)}
    sig = f"curl: (28) operation timed out for {marker}"
    return {
        "kind": "tool_failure",
        "key": f"err:bash:{sig}",
        "old": f"curl https://{marker}.internal",
        "error": sig,
        "summary": sig,
        "trust": "tool",
        "confidence": 0.3,
        "evidence": ev(sig, "tool"),
    }


def synth(n: int, seed: int = 7) -> list[SessionFindings]:
    rng = random.Random(seed)
    per = 5
    patterns = max(8, n // 200)
    sessions = []
    agents = [f"agent-{a}" for a in range(6)]
    for s in range(n // per):
        fs = [finding(rng, s * per + j, patterns) for j in range(per)]
        sessions.append(SessionFindings(s, f"s{s:07d}", rng.choice(agents), rng.choice(["a", "b", None]), fs))
    return sessions


def memory(n=200):
    out = []
    for i in range(n):
        text = f"Entry {i}: the {WORDS[i % len(WORDS)]} runbook is docs/runbook-{i}.md."
        out.append(
            {
                "key": f"k{i}",
                "content": text,
                "content_hash": hashlib.sha256(text.encode()).hexdigest(),
                "scope_agent": None,
                "scope_task": None,
                "origin": "human",
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    mem = memory()
    prev = None
    print("findings  sessions  median_wall_s  median_cpu_s  cpu_ms_per_1k  proposals  cpu_ratio_to_previous")
    for n in [int(x) for x in ns.sizes.split(",")]:
        sessions = synth(n)
        wall, cpu = [], []
        for _ in range(ns.runs):
            clear_caches()  # every run starts cold
            t0, c0 = time.perf_counter(), time.process_time()
            res = aggregate(sessions, sessions_analysed=len(sessions), memory=mem, min_sessions=3)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        w, c = statistics.median(wall), statistics.median(cpu)
        ratio = f"{c / prev:.1f}x" if prev else "-"
        per_1k = 1000 * c / n * 1000
        print(
            f"{n:>8}  {len(sessions):>8}  {w:>13.3f}  {c:>12.3f}  {per_1k:>13.1f}  {len(res.proposals):>9}  {ratio:>8}"
        )
        prev = c
    return 0


if __name__ == "__main__":
    sys.exit(main())
