"""The team scope of test code on PostgreSQL (see the rules in tests/conftest.py).

A test starts with no scope, as a fresh request, task or command does: on PostgreSQL it sees no team's rows and may
write none. Test code that creates or reads rows says so:

* ``with all_teams():`` around setup and assertions (the scope before the block comes back after it);
* ``@pytest.mark.all_teams`` (on a test, a class or a module's ``pytestmark``) when the whole test body is trusted
  caller code, e.g. tests of a service that expects its caller to have opened the scope;
* ``with no_scope():`` to call an entry point (command, task, beat, or a service that must open its own scope) from
  inside such a scope, so that the code under test cannot lean on the test's scope.

The test clients (tests/api_support.Api, tests/page_support.PageClient) send every request from no scope, as a real
request starts, and give the test code its scope back afterwards.

How: the application role cannot see every team (the all-teams value counts only for the table owner's role,
dreamweb.rls). So the test connection logs in as the owner and runs as the application role (``SET ROLE``, from the
connection's start: tests/conftest.py); only test code inside ``all_teams()`` switches back to the owner, with the
all-teams value. Code under test therefore always runs as the application role, as in production.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.conf import settings
from django.db import connection

from dreamweb import rls

SETTING = rls.SETTING


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def app_role() -> str:
    return settings.DREAMWEB_DB_APP_ROLE


def test_code_role() -> str:
    """The role test code switches to for every team's rows: the login of the test connection (the owner)."""
    return connection.settings_dict["USER"]


def current_state() -> tuple[str, str]:
    """(role, scope) of the connection now."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_setting(%s, true)", [SETTING])
        role, value = cursor.fetchone()
    return role, value or ""


def set_state(role: str, value: str, *, local: bool) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('role', %s, %s), set_config(%s, %s, %s)", [role, local, SETTING, value, local]
        )


@contextlib.contextmanager
def _state(role: str, value: str) -> Iterator[None]:
    """The block runs as this role with this scope, whatever the test's; then the previous ones come back.

    Inside a transaction both are transaction-local (what the code under test also uses); outside one (tests with
    real transactions) they are set for the connection, so that transactions the block opens start from them."""
    if not _on_postgres():
        yield
        return
    local = connection.in_atomic_block
    previous = current_state()
    set_state(role, value, local=local)
    try:
        yield
    finally:
        if not (local and connection.needs_rollback) and connection.connection is not None:
            set_state(*previous, local=local)


def all_teams() -> contextlib.AbstractContextManager[None]:
    """Test code inside the block sees and writes every team's rows."""
    return _state(test_code_role(), rls.ALL_TEAMS) if _on_postgres() else contextlib.nullcontext()


def no_scope() -> contextlib.AbstractContextManager[None]:
    """Code inside the block runs as the application role with no scope, as a request, task, command or beat tick
    starts in production."""
    return _state(app_role(), "") if _on_postgres() else contextlib.nullcontext()
