"""With DREAMWEB_REQUIRE_SERVICES=1 (what CI sets) a missing PostgreSQL, Redis or Chromium fails the run at once
instead of turning into SQLite or skipped tests; every run reports how many tests it skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A test file that needs no service: only the session start is under test.
PROBE = "tests/test_analysis_risk.py"


def _pytest(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PROBE, "-k", "nothing_matches_this"],
        cwd=ROOT, env={**os.environ, "DREAMWEB_REQUIRE_SERVICES": "1", **env}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "env, named",
    [
        ({"DATABASE_URL": "sqlite:///:memory:"}, "PostgreSQL"),
        ({"DREAMWEB_TEST_REDIS_URL": "redis://127.0.0.1:1/0"}, "Redis"),
        ({"DREAMWEB_CHROMIUM": "/nonexistent/chromium"}, "Chromium"),
    ],
)
def test_a_missing_service_fails_the_run(env, named):
    done = _pytest(**env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DREAMWEB_REQUIRE_SERVICES is set and these are missing" in done.stdout + done.stderr
    assert named in done.stdout + done.stderr


def test_the_skip_count_is_reported():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PROBE, "-k", "nothing_matches_this"],
        cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "DREAMWEB_REQUIRE_SERVICES"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "skipped tests: 0" in done.stdout
