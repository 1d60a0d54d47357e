"""Finalize of a stored dream run, again: its peak memory and its proposals, field by field, for a before/after
comparison of a change to finalize (issue 15: finalize's memory flat in the run's size, the proposals the same).

    .venv/bin/python bench/finalize_probe.py --setup 40000           # scratch database, 40,000 sessions, two runs
    .venv/bin/python bench/finalize_probe.py --run 10000 --dump a.json   # finalize the 10,000-session run again
    .venv/bin/python bench/finalize_probe.py --compare a.json b.json     # the same proposals?

--setup loads the sessions as bench/dream_cycle.py does (its scratch database, BENCH_CYCLE_DB names another) and
stores two runs, of 10,000 sessions and of all of them, through `manage.py dream`. --run N deletes the proposals,
sets the run of N sessions back to running and finalizes it in this process: RSS before, finalize's peak (the
process's high-water mark VmHWM, reset before finalize), the peak and RSS after each step, and the time; then every
proposal of the run (every field but ids and times) with its evidence rows in their order, and the run's counters,
isolated patterns and outcome.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dream_cycle  # noqa: E402 - the bench's scratch database and loader
from _procfs import status_mib  # noqa: E402

SKIP = {"id", "created_at", "updated_at", "decided_at", "run", "run_id"}


def reset_peak() -> None:
    """Linux: the process's peak RSS (VmHWM) starts again from its current RSS (proc(5), clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def setup(n: int) -> None:
    dream_cycle.setup(n)
    env = dream_cycle.base_env()
    for size in sorted({10_000, n}):
        cmd = [sys.executable, "manage.py", "dream", "--team", "acme", "--store", "acme-eng", "--all-sessions"]
        cmd += ["--max-sessions", str(size), "--format", "json", "-v0"]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"run of {size} sessions stored", file=sys.stderr)


def refinalize(size: int, dump: Path | None) -> None:
    os.environ["DATABASE_URL"] = dream_cycle.DB.app_url
    dream_cycle.django_setup()
    from dreamweb import rls
    from reviews.dreams import finalizing
    from reviews.models import DreamRun, Proposal, ProposalEvidence, RunStatus

    team_id = rls.team_id_for_slug("acme")
    with rls.team_scope(team_id):
        run = next(r for r in DreamRun.objects.order_by("pk") if r.sessions_analysed == size)
        Proposal.objects.all().delete()
        DreamRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, finished_at=None)
    print(f"code: {finalizing.__file__}", file=sys.stderr)
    marks = []

    def marked(owner, name):
        real = getattr(owner, name)

        def step(*args, **kwargs):
            out = real(*args, **kwargs)
            marks.append(f"{name} {status_mib('VmHWM'):.0f}/{status_mib('VmRSS'):.0f}")
            return out

        setattr(owner, name, step)

    for step_name in ("run_procedures", "upkeep_proposals", "_session_findings", "skill_proposals", "_persist"):
        if hasattr(finalizing, step_name):  # the findings' read is no step of its own since stop 21
            marked(finalizing, step_name)
    marked(finalizing.aggregate_mod, "aggregate")
    gc.collect()
    reset_peak()  # finalize's own peak, not the deletion's above
    before = status_mib("VmRSS")
    started = time.perf_counter()
    finalizing.finalize(run.pk)
    seconds = time.perf_counter() - started
    peak = status_mib("VmHWM")
    print(f"run of {size}: RSS before {before:.1f} MiB, peak {peak:.1f} MiB (+{peak - before:.1f}), {seconds:.2f} s")
    print("  after each step, peak/RSS MiB: " + ", ".join(marks))
    if dump is None:
        return
    with rls.team_scope(team_id):
        run.refresh_from_db()
        proposals = []
        for p in Proposal.objects.filter(run=run).order_by("signature", "pk"):
            row = {f.attname: getattr(p, f.attname) for f in p._meta.concrete_fields if f.attname not in SKIP}
            rows = ProposalEvidence.objects.filter(proposal=p).order_by("pk")
            row["evidence"] = list(rows.values("session_id", "event_index", "excerpt", "trust", "context"))
            proposals.append(row)
        out = {
            "run": {
                "status": run.status,
                "sessions_analysed": run.sessions_analysed,
                "proposals_count": run.proposals_count,
                "isolated": run.isolated,
                "options": run.options,
            },
            "proposals": proposals,
        }
    dump.write_text(json.dumps(out, indent=1, sort_keys=True, default=str))
    print(f"{len(proposals)} proposals, {sum(len(p['evidence']) for p in proposals)} evidence rows -> {dump}")


def compare(a: Path, b: Path) -> int:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    problems = []
    if left["run"] != right["run"]:
        for k in left["run"]:
            if left["run"][k] != right["run"].get(k):
                problems.append(f"run.{k} differs")
    lp = {p["signature"]: p for p in left["proposals"]}
    rp = {p["signature"]: p for p in right["proposals"]}
    for sig in sorted(set(lp) ^ set(rp)):
        problems.append(f"proposal {sig} only in {'the first' if sig in lp else 'the second'}")
    for sig in sorted(set(lp) & set(rp)):
        for k in sorted(set(lp[sig]) | set(rp[sig])):
            if lp[sig].get(k) != rp[sig].get(k):
                problems.append(f"proposal {sig}: {k} differs")
    print("\n".join(problems[:50]) or f"identical: {len(lp)} proposals, every field, evidence and run outcome")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", type=int, metavar="N")
    parser.add_argument("--run", type=int, metavar="N", help="finalize again the stored run of N sessions")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path)
    args = parser.parse_args()
    if args.setup:
        setup(args.setup)
    if args.run:
        refinalize(args.run, args.dump)
    if args.compare:
        return compare(*args.compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
