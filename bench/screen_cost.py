"""What the screen and the secret scan cost on real and hostile text: `screening.screen` and `secret_scan.redact` over
the real transcripts (each cut to 64 KB) and every blind payload and secret text, several passes, median wall time.

Run it from a checkout: `.venv/bin/python bench/screen_cost.py [--passes 3] [--transcripts 30]`. Set PYTHONPATH to
another checkout to time that one with the same texts (before/after, alternated, in one sitting).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
REAL = HERE.parent / "shared" / "real" / "transcripts"
if not REAL.exists():
    REAL = Path("/work/shared/real/transcripts")


def texts(transcripts: int) -> list[str]:
    out = [p.read_text(errors="ignore")[:64000] for p in sorted(REAL.rglob("*.jsonl"))[:transcripts]]
    blind = HERE / "tests" / "data" / "blind"
    for path in sorted(blind.glob("poison-payloads*.json")):
        out += [item["text"] for item in json.loads(path.read_text())["items"]]
    for path in sorted(blind.glob("secret-texts-*.json")):
        out += [item["text"] for item in json.loads(path.read_text())]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--transcripts", type=int, default=30)
    ns = ap.parse_args()
    from dreamweb import screening, secret_scan

    corpus = texts(ns.transcripts)
    times = []
    for _ in range(ns.passes):
        t0 = time.perf_counter()
        for text in corpus:
            screening.screen(text, allowed_hosts=["github.com"])
            secret_scan.redact(text)
        times.append(time.perf_counter() - t0)
    print(
        f"{len(corpus)} texts, {ns.passes} passes: median {statistics.median(times):.2f} s "
        f"({', '.join(f'{t:.2f}' for t in times)}) [{screening.__file__}]"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
