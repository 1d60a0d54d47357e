"""The mutation score of the last `mutmut run`, per module and in all: killed (a test failed, or the mutant timed
out) over every mutant made. A mutant no selected test reached ("no tests") counts as not killed.
Usage: python bench/mutation_score.py   (after bench/mutation.sh; reads `mutmut results --all true`)"""

from __future__ import annotations

import collections
import subprocess
import sys

KILLED = {"killed", "timeout", "caught by type check"}


def main() -> int:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout
    by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if not name:
            continue
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
