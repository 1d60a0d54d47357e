"""The team scope of test code on PostgreSQL (see the rules in tests/conftest.py).

A test starts with no scope, as a fresh request, task or command does: on PostgreSQL it sees no team's rows and may
write none. Test code that creates or reads rows says so:

* ``with all_teams():`` around setup and assertions (the scope before the block comes back after it);
* ``@pytest.mark.all_teams`` (on a test, a class or a module's ``pytestmark``) when the whole test body is trusted
  caller code, e.g. tests of a service that expects its caller to have opened the scope;
* ``with no_scope():`` to call an entry point (command, task, beat, or a service that must open its own scope) from
  inside such a scope, so that the code under test cannot lean on the test's scope.

The test clients (tests/api_support.Api, tests/page_support.PageClient) send every request from an empty scope, as
a real request starts, and give the test code its scope back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connection

from dreamweb import rls

SETTING = rls.SETTING


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def current_scope() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [SETTING])
        return cursor.fetchone()[0] or ""


def _set(value: str, *, local: bool) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, %s)", [SETTING, value, local])


@contextlib.contextmanager
def scoped(value: str) -> Iterator[None]:
    """The block runs with this scope ('*', '' or a list of team ids), whatever the test's scope; then it comes back.

    Inside a transaction the setting is transaction-local (what the code under test also uses); outside one (tests
    with real transactions) it is set for the connection, so that transactions the block opens start from it."""
    if not _on_postgres():
        yield
        return
    local = connection.in_atomic_block
    previous = current_scope()
    _set(value, local=local)
    try:
        yield
    finally:
        if not (local and connection.needs_rollback) and connection.connection is not None:
            _set(previous, local=local)


def all_teams() -> contextlib.AbstractContextManager[None]:
    """Test code inside the block sees and writes every team's rows."""
    return scoped(rls.ALL_TEAMS)


def no_scope() -> contextlib.AbstractContextManager[None]:
    """Code inside the block starts from no scope, as a request, task, command or beat tick does in production."""
    return scoped("")
