"""Test setup. On PostgreSQL the test database is created and migrated by the owner role, then every test runs as
the application role (not superuser, not owner), so row-level security is really in force; the connection logs in
as the owner and runs as the application role, so that test code alone can switch back (tests/scoping.py).

Team scope: a PostgreSQL test starts with NO scope, like a fresh request, API call, task, command or beat tick, so
code under test that forgets to open its own scope finds no rows and the test fails. Test code that creates or reads
rows opens a scope explicitly (tests/scoping.py):

    from tests.scoping import all_teams, no_scope

    with all_teams():                 # setup and assertions of test code: every team's rows
        store = StoreFactory(team=team)
    response = client.get(url)        # the clients send each request from an empty scope, as production does
    with all_teams():
        assert MemoryEntry.objects.filter(store=store).count() == 1

    @pytest.mark.all_teams            # or pytestmark = ...: the whole test body is trusted caller code (service tests)
    def test_service(...):
        with no_scope():              # an entry point called from inside that scope must not lean on it
            call_command("dream", ...)

Fixtures that build data (``world``, ``keys``) open the scope themselves for their inserts. On SQLite the scope does
nothing and the querysets alone apply.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys

import dj_database_url
import pytest
from django.conf import settings
from django.db import connections

from dreamweb import rls

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def is_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def _credentials(url: str) -> dict:
    parsed = dj_database_url.parse(url)
    return {"USER": parsed["USER"], "PASSWORD": parsed["PASSWORD"]}


_APP: dict = {}


def app_credentials() -> dict:
    """USER and PASSWORD of the application role (for connections and processes the tests open themselves)."""
    return dict(_APP)


def _switch(creds: dict) -> None:
    for alias in connections:
        conn = connections[alias]
        conn.close()
        conn.settings_dict.update(creds)


def _run_as(role: str | None) -> None:
    """Connections opened from now on log in as they are configured and then run as this role (None: as the login)."""
    for alias in connections:
        conn = connections[alias]
        conn.close()
        options = conn.settings_dict.setdefault("OPTIONS", {})
        if role:
            options["options"] = f"-c role={role}"
        else:
            options.pop("options", None)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    if is_postgres() and settings.DATABASE_OWNER_URL:
        default = settings.DATABASES["default"]
        _APP.update({"USER": default["USER"], "PASSWORD": default["PASSWORD"]})
        _switch(_credentials(settings.DATABASE_OWNER_URL))
    yield
    if _APP:  # the settings as they were, for a second pytest run in this process (the mutation bench does that)
        _switch(dict(_APP))
        _APP.clear()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database is created and migrated by the owner. The tests' connection then keeps the owner's login but
    runs as the application role (SET ROLE at the connection's start): code under test has exactly the application's
    rights, and test code alone can switch back to the owner to see every team (tests/scoping.py)."""
    if is_postgres() and _APP:
        role = settings.DREAMWEB_DB_APP_ROLE
        with django_db_blocker.unblock(), connections["default"].cursor() as cursor:
            # Tests that need a real transaction empty the tables afterwards with TRUNCATE; only the test
            # database grants that to the application role.
            cursor.execute(f'GRANT TRUNCATE ON ALL TABLES IN SCHEMA public TO "{role}"')
            cursor.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", [role])
            if not cursor.fetchone()[0]:
                pytest.exit(f"the owner role must be a member of {role} to run as it: run scripts/pg_setup.sh", 1)
        _run_as(role)
    yield
    if is_postgres() and _APP:
        _run_as(None)


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing():
    """PBKDF2 costs about a second a user; tests need logins, not hardness."""
    from django.contrib.auth.hashers import get_hashers, get_hashers_by_algorithm

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    get_hashers.cache_clear()
    get_hashers_by_algorithm.cache_clear()
    yield


def _uses_db(request) -> bool:
    names = set(request.fixturenames)
    return bool(
        request.node.get_closest_marker("django_db")
        or names & {"db", "transactional_db", "live_server", "django_db_reset_sequences"}
    )


@pytest.fixture(autouse=True)
def _test_scope(request):
    """No scope unless the test asks for one (@pytest.mark.all_teams): see the rules at the top of this file."""
    if not _uses_db(request) or not is_postgres():
        yield
        return
    request.getfixturevalue("_django_db_helper")
    from tests import scoping

    # Set for the connection (not the transaction), so that it holds in tests with real transactions as well.
    if request.node.get_closest_marker("all_teams"):
        scoping.set_state(scoping.test_code_role(), rls.ALL_TEAMS, local=False)
    else:
        scoping.set_state(scoping.app_role(), "", local=False)
    yield
    conn = connections["default"]
    if conn.connection is not None and not conn.needs_rollback:
        with contextlib.suppress(Exception):  # the connection may already be closed or broken by the test
            scoping.set_state(scoping.app_role(), "", local=False)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "all_teams: the test code (not the code under test) sees every team's rows; see tests/scoping.py"
    )


def chromium_path() -> str | None:
    """The Chromium the browser tests drive: DREAMWEB_CHROMIUM, else the one on PATH (Debian: /usr/bin/chromium)."""
    return os.environ.get("DREAMWEB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def llm_server_python() -> str:
    """The interpreter of the local model server's environment (scripts/llm_server_setup makes .venv-llm)."""
    default = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv-llm", "bin", "python")
    return os.environ.get("DREAMWEB_LLM_SERVER_PYTHON") or default


def _missing_services() -> list[str]:
    missing = []
    if not is_postgres():
        missing.append("PostgreSQL (the tests would run on SQLite, without row-level security)")
    redis_url = os.environ.get("DREAMWEB_TEST_REDIS_URL", "")
    try:
        import redis

        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()
    except Exception:  # noqa: BLE001 - any failure means: no Redis for the tests
        missing.append(f"Redis at DREAMWEB_TEST_REDIS_URL={redis_url or '(unset)'}")
    path = chromium_path()
    if not path or not os.access(path, os.X_OK):
        missing.append("Chromium (set DREAMWEB_CHROMIUM or put chromium on PATH)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("Playwright (pip install -r requirements-dev.txt)")
    if not os.access(llm_server_python(), os.X_OK):
        missing.append("the local model server (scripts/llm_server_setup installs it into .venv-llm)")
    if not shutil.which("dreamweb-mcp", path=os.path.dirname(sys.executable)):
        missing.append("the agents' console scripts (pip install -e ./clients/python)")
    return missing


def pytest_sessionstart(session):
    """With DREAMWEB_REQUIRE_SERVICES=1 (CI) a missing service fails the run at once instead of skipping its tests."""
    if os.environ.get("DREAMWEB_REQUIRE_SERVICES") and not session.config.option.collectonly:
        missing = _missing_services()
        if missing:
            pytest.exit("DREAMWEB_REQUIRE_SERVICES is set and these are missing: " + "; ".join(missing), returncode=1)


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    terminalreporter.write_line(f"skipped tests: {len(skipped)}")


@pytest.fixture
def store_threads(monkeypatch):
    """The name of the thread that stored each batch of an import (memory.importing._store, spied on)."""
    import threading

    from memory import importing

    names: list[str] = []
    real = importing._store

    def spy(*args, **kwargs):
        names.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(importing, "_store", spy)
    return names


from tests.personas import *  # noqa: E402,F401,F403 - personas fixtures


@pytest.fixture
def cycle(django_capture_on_commit_callbacks):
    """A store's dream cycle run to its end in this process (the tasks it queues on commit executed), the run read
    again: ``cycle(store, **start_run's options)``."""
    from reviews import dreams
    from tests.scoping import no_scope

    def run(store, **kwargs):
        with no_scope(), django_capture_on_commit_callbacks(execute=True):
            started = dreams.start_run(store, **kwargs)
        started.refresh_from_db()
        return started

    return run
