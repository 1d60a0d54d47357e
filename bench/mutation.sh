#!/usr/bin/env bash
# The mutation bench: mutmut over the modules of the core rules ([tool.mutmut] in pyproject.toml), each mutant tested
# by the tests that aim at them, on PostgreSQL as the application role (as scripts/test runs them). CPU-heavy: run it
# on a quiet machine. Prints mutmut's summary; `mutmut results` lists the survivors, `mutmut show NAME` shows one.
#   bench/mutation.sh [MAX_CHILDREN]             every mutant (default MAX_CHILDREN: the number of cores)
#   bench/mutation.sh --sample N [--seed S] [MAX_CHILDREN]
#                                                a uniform random sample of N mutants (the score with its 95 % interval):
#                                                the whole run takes hours on two cores, a sample of 300 about 20 minutes
# Environment: as scripts/test (DATABASE_URL, DATABASE_OWNER_URL), DREAMWEB_TEST_DB_NAME (default test_dw_mutation),
# DREAMWEB_TEST_REDIS_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
sample="" seed=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sample) sample=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) break ;;
  esac
done
children=${1:-$(nproc)}
./scripts/bootstrap
. .venv/bin/activate
./scripts/pg_setup.sh >/dev/null
export DATABASE_URL=${DATABASE_URL:-postgres://dreamweb_app:dreamweb_app@127.0.0.1:5432/dreamweb}
export DATABASE_OWNER_URL=${DATABASE_OWNER_URL:-postgres://dreamweb_owner:dreamweb_owner@127.0.0.1:5432/dreamweb}
export DREAMWEB_TEST_DB_NAME=${DREAMWEB_TEST_DB_NAME:-test_dw_mutation}
rm -rf mutants
# One plain run first: creates the test database that every mutant's run reuses (--reuse-db).
pytest -q -p no:randomly --create-db tests/test_smoke_rls.py >/dev/null
if [ -z "$sample" ]; then
  mutmut run --max-children "$children"
  mutmut results >/dev/null || true
  python bench/mutation_score.py
  exit 0
fi
# A sample: a first call makes every mutant and the test-to-function map, and stops at a name that matches nothing;
# then the sampled names are run. Their names are kept in mutants/sample.txt for the score.
mutmut run --max-children "$children" "no-such-mutant" >/dev/null 2>&1 || true
python bench/mutation_score.py --draw "$sample" --seed "$seed" > mutants/sample.txt
xargs -a mutants/sample.txt mutmut run --max-children "$children"
python bench/mutation_score.py --names mutants/sample.txt
