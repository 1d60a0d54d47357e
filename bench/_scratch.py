"""Scratch PostgreSQL databases for the benchmarks, set up as in production: the owner role creates and migrates
the database (it owns the tables), the benchmark then works as the application role (row-level security in force),
and the database is dropped at the end (or kept, by a benchmark that reuses it on its next run).

    from _scratch import scratch_database

    with scratch_database("dreamweb_bench_x") as db:  # dropped on the way out, also after an error
        env = {**os.environ, "DATABASE_URL": db.app_url}

Environment: DATABASE_OWNER_URL (owner role) and DATABASE_URL (application role) of the PostgreSQL server; only
their server and credentials are used, the database name is the benchmark's own. Defaults: the local dreamweb roles.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
OWNER_URL = os.environ.get("DATABASE_OWNER_URL", "postgres://dreamweb_owner:dreamweb_owner@127.0.0.1:5432/dreamweb")
APP_URL = os.environ.get("DATABASE_URL", "postgres://dreamweb_app:dreamweb_app@127.0.0.1:5432/dreamweb")
if not APP_URL.startswith("postgres"):  # a SQLite DATABASE_URL in the shell says nothing about the server
    APP_URL = "postgres://dreamweb_app:dreamweb_app@127.0.0.1:5432/dreamweb"


def with_db(url: str, name: str) -> str:
    """The same server and credentials, another database."""
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


class ScratchDatabase:
    def __init__(self, name: str, *, owner_url: str = OWNER_URL, app_url: str = APP_URL):
        self.name = name
        self.owner_url = with_db(owner_url, name)
        self.app_url = with_db(app_url, name)
        # CREATE and DROP DATABASE run from the server's maintenance database, never from the one they change.
        self._maintenance_url = with_db(owner_url, "postgres")

    def create(self, *, env: dict | None = None) -> ScratchDatabase:
        """Drop what an earlier run left, create the database and migrate it as the owner role. ``env`` is the
        environment of `manage.py migrate` (default: this process's), with DATABASE_URL set to the owner's."""
        self.drop()
        self._admin(f'CREATE DATABASE "{self.name}"')
        env = {**(os.environ if env is None else env), "DATABASE_URL": self.owner_url, "DATABASE_OWNER_URL": ""}
        subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, env=env, check=True)
        return self

    def drop(self) -> None:
        """Drop the database, closing this process's Django connections to it first (other sessions are ended)."""
        if "django.db" in sys.modules:
            from django.conf import settings

            if settings.configured:
                from django.db import connections

                connections.close_all()
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def _admin(self, sql: str) -> None:
        import psycopg  # imported here so that a SQLite-only run of a benchmark does not need the driver

        with psycopg.connect(self._maintenance_url, autocommit=True) as conn:
            conn.execute(sql)


@contextmanager
def scratch_database(name: str, *, env: dict | None = None) -> Iterator[ScratchDatabase]:
    """A freshly created and migrated scratch database, dropped on the way out (also after an error)."""
    db = ScratchDatabase(name)
    try:
        yield db.create(env=env)
    finally:
        db.drop()
