#!/usr/bin/env bash
# The mutation bench: mutmut over the modules of the core rules ([tool.mutmut] in pyproject.toml), each mutant tested
# by the tests that aim at them, on PostgreSQL as the application role (as scripts/test runs them). CPU-heavy: run it
# on a quiet machine. Prints mutmut's summary; `mutmut results` lists the survivors, `mutmut show NAME` shows one.
#   bench/mutation.sh [MAX_CHILDREN]      (default: the number of cores)
# Environment: as scripts/test (DATABASE_URL, DATABASE_OWNER_URL), DREAMWEB_TEST_DB_NAME (default test_dw_mutation),
# DREAMWEB_TEST_REDIS_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap
. .venv/bin/activate
./scripts/pg_setup.sh >/dev/null
export DATABASE_URL=${DATABASE_URL:-postgres://dreamweb_app:dreamweb_app@127.0.0.1:5432/dreamweb}
export DATABASE_OWNER_URL=${DATABASE_OWNER_URL:-postgres://dreamweb_owner:dreamweb_owner@127.0.0.1:5432/dreamweb}
export DREAMWEB_TEST_DB_NAME=${DREAMWEB_TEST_DB_NAME:-test_dw_mutation}
rm -rf mutants
# One plain run first: creates the test database that every mutant's run reuses (--reuse-db).
pytest -q -p no:randomly --create-db tests/test_smoke_rls.py >/dev/null
mutmut run --max-children "${1:-$(nproc)}"
mutmut results >/dev/null || true
python bench/mutation_score.py
