"""The mutants issue 12 names, each applied to the code alone and tested by the tests that aim at it: every one must
be killed (a test fails). Complements the mutmut bench (bench/mutation.sh), which makes its mutants mechanically.

Usage (PostgreSQL and Redis as for scripts/test): python bench/named_mutants.py
Each mutant is a one-line change; the file is restored after its run, whatever happens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (name, file, the line as it is, the line as the mutant has it, tests that must catch it)
MUTANTS = [
    ("request middleware hands out the all-teams scope", "dreamweb/middleware.py",
     "rls.enter_member_scope(user.pk)", 'rls.set_scope("*")', ["tests/test_scope_entry_points.py"]),
    ("request middleware forgets the scope", "dreamweb/middleware.py",
     "rls.enter_member_scope(user.pk)", "pass",
     ["tests/test_scope_entry_points.py", "tests/test_pages_permissions.py"]),
    ("API-key authentication hands out the all-teams scope", "dreamweb/api_auth.py",
     "    rls.enter_key_scope(prefix)\n    return keys.first()",
     '    rls.enter_key_scope(prefix)\n    rls.set_scope("*")\n    return keys.first()',
     ["tests/test_scope_entry_points.py", "tests/test_api_permissions.py"]),
    ("the beat scans without its cross-team lookup", "reviews/schedule.py",
     "    if not rls.is_postgres():", "    if True:", ["tests/test_dream_schedule.py"]),
    ("the allowed-host check matches a bare suffix", "dreamweb/screening.py",
     'if a and (host == a or host.endswith("." + a)):', "if a and (host == a or host.endswith(a)):",
     ["tests/test_limits.py", "tests/test_analysis_risk.py", "tests/test_screening.py"]),
    ("context budget: an entry one token over still fits", "memory/context.py",
     "        if _tokens_for(chars + len(chunk)) > max_tokens:\n            continue",
     "        if _tokens_for(chars + len(chunk)) > max_tokens + 1:\n            continue", ["tests/test_limits.py"]),
    ("context budget: the item cap lets one more in", "memory/context.py",
     "        if len(items) >= max_items:", "        if len(items) > max_items:", ["tests/test_limits.py"]),
    ("context budget: no skip-and-try-next", "memory/context.py",
     "        if _tokens_for(chars + len(chunk)) > max_tokens:\n            continue",
     "        if _tokens_for(chars + len(chunk)) > max_tokens:\n            break", ["tests/test_limits.py"]),
    ("server-side item cap ignored", "memory/context.py",
     "        max(0, min(items, settings.DREAMWEB_CONTEXT_MAX_ITEMS)),", "        max(0, items),",
     ["tests/test_limits.py", "tests/test_api_context.py"]),
    ("session size limit off by one", "memory/sessions.py",
     "    if size > limit:", "    if size > limit + 1:", ["tests/test_limits.py"]),
    ("event-count limit off by one", "memory/sessions.py",
     "    elif len(events) > MAX_EVENTS:", "    elif len(events) > MAX_EVENTS + 1:", ["tests/test_limits.py"]),
    ("a tool result without content is accepted", "memory/sessions.py",
     '"tool_result": ("call_id", "content"),', '"tool_result": ("call_id",),',
     ["tests/test_limits.py", "tests/test_sessions_validation.py"]),
    ("only the first If-Match ETag counts", "memory/api/common.py",
     "            versions.add(int(match[2]))", "            versions.add(int(match[2]))\n            break",
     ["tests/test_api_etag.py"]),
    ("DELETE of an archived entry skips the stale check", "memory/api/entries.py",
     "        if entry.status == EntryStatus.ARCHIVED and entry.version in versions:",
     "        if entry.status == EntryStatus.ARCHIVED:", ["tests/test_api_etag.py"]),
]  # fmt: skip


def run(name, path, before, after, tests) -> bool:
    file = ROOT / path
    original = file.read_text()
    if original.count(before) != 1:
        print(f"?? {name}: the line is not (once) in {path}; update this bench")
        return False
    try:
        file.write_text(original.replace(before, after))
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "--reuse-db", *tests],
            cwd=ROOT, capture_output=True, text=True, env=os.environ,
        )  # fmt: skip
    finally:
        file.write_text(original)
    killed = done.returncode not in (0, 5)
    print(f"{'killed  ' if killed else 'SURVIVED'} {name}  ({' '.join(tests)})")
    return killed


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that the file of a mutant in progress is restored
    # A fresh test database that every mutant's run reuses (--reuse-db).
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--create-db", "tests/test_smoke_rls.py"],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    results = [run(*mutant) for mutant in MUTANTS]
    print(f"{sum(results)} of {len(results)} named mutants killed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
