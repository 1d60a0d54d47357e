"""The mutation score of the last `mutmut run`, per module and in all: killed (a test failed, or the mutant timed
out) over every mutant made. A mutant no selected test reached ("no tests") counts as not killed.
Usage: python bench/mutation_score.py   (after bench/mutation.sh; reads `mutmut results --all true`)
       python bench/mutation_score.py --draw N [--seed S]   prints N mutant names drawn uniformly (a sample to run)
       python bench/mutation_score.py --names FILE          the score over those mutants, with its 95 % interval"""

from __future__ import annotations

import argparse
import collections
import math
import pathlib
import random
import subprocess
import sys

KILLED = {"killed", "timeout", "caught by type check"}


def _results() -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout
    found = {}
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            found[name] = status
    return found


def wilson(killed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % interval of a proportion from a sample (Wilson's: sound near 0 and 1 and for small samples)."""
    if not n:
        return 0.0, 1.0
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draw", type=int, help="print this many mutant names drawn uniformly, one a line")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--names", help="score only the mutants named in this file")
    args = parser.parse_args()
    results = _results()
    if args.draw:
        print("\n".join(sorted(random.Random(args.seed).sample(sorted(results), min(args.draw, len(results))))))
        return 0
    if args.names:
        wanted = set(pathlib.Path(args.names).read_text().split())
        results = {name: status for name, status in results.items() if name in wanted}
    by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for name, status in results.items():
        module = name.split(".x_")[0].split(".xǁ")[0]
        by_module[module][status] += 1
    total = collections.Counter()
    print(f"{'module':40} {'mutants':>8} {'killed':>8} {'score':>7}  not killed")
    for module, counts in sorted(by_module.items()):
        made, killed = sum(counts.values()), sum(counts[s] for s in KILLED)
        rest = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s not in KILLED)
        print(f"{module:40} {made:8} {killed:8} {killed / made:7.1%}  {rest}")
        total.update(counts)
    made, killed = sum(total.values()), sum(total[s] for s in KILLED)
    print(f"{'all':40} {made:8} {killed:8} {killed / max(made, 1):7.1%}")
    if args.names:
        low, high = wilson(killed, made)
        print(f"a sample of {made} mutants: {killed / max(made, 1):.1%} killed, 95 % interval {low:.1%} to {high:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
