# The two commands a newcomer needs: `make run` and `make test`.
.PHONY: run test lint lock

run:  ## set up, load demo data and serve on http://127.0.0.1:8000 (SQLite, tasks in-process)
	./scripts/run

test:  ## the test suite on PostgreSQL (as the non-superuser app role) and Redis when they are up
	./scripts/test

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

lock:  ## after changing a dependency in pyproject.toml: pin it (and what it needs) in requirements*.txt
	./scripts/bootstrap
	.venv/bin/pip-compile -q --no-emit-index-url --no-emit-find-links --strip-extras --extra dev \
		-o requirements-dev.txt pyproject.toml
	.venv/bin/pip-compile -q --no-emit-index-url --no-emit-find-links --strip-extras -c requirements-dev.txt \
		-o requirements.txt pyproject.toml
