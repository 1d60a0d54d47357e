"""Row-level security through PgBouncer in transaction pooling mode (docs/scaling.md).

The team scope is a transaction-local setting (``set_config(..., true)``, dreamweb.rls), and PgBouncer in
transaction mode hands a server connection to one client for exactly one transaction: so the scope travels with the
transaction and never reaches another client, even when both share a single server connection. Runs when the
``pgbouncer`` binary is installed (Debian: ``apt-get install pgbouncer``); it listens on a free port of 127.0.0.1
only and is stopped at the end.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from django.test import Client

from dreamweb import rls
from tests.api_support import make_key
from tests.conftest import app_credentials, is_postgres
from tests.factories import StoreFactory, TeamFactory, make_entry
from tests.scoping import all_teams

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature"),
    pytest.mark.skipif(PGBOUNCER is None, reason="pgbouncer is not installed"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bouncer(bouncer_url):
    """A function that opens a client connection through PgBouncer as the application role."""
    # prepare_threshold=None: no server-side prepared statements, as with PgBouncer before 1.21.
    return lambda: psycopg.connect(bouncer_url, autocommit=True, prepare_threshold=None)


@pytest.fixture
def bouncer_url():
    """PgBouncer in transaction mode with ONE server connection per database and user, in front of the test
    database; yields the URL of a client connection through it as the application role."""
    db = settings.DATABASES["default"]
    app = app_credentials()
    # PgBouncer refuses to run as root: then it runs as the postgres user (-u), which must read its files.
    run_as = ["-u", "postgres"] if os.geteuid() == 0 else []
    tmp_path = Path(tempfile.mkdtemp(prefix="dreamweb-pgbouncer-"))
    tmp_path.chmod(0o777)
    port = _free_port()
    (tmp_path / "users.txt").write_text(f'"{app["USER"]}" "{app["PASSWORD"]}"\n')
    (tmp_path / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"{db['NAME']} = host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432} dbname={db['NAME']}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = plain\nauth_file = {tmp_path / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 1\nmax_client_conn = 20\n"
        f"logfile = {tmp_path / 'pgbouncer.log'}\npidfile = {tmp_path / 'pgbouncer.pid'}\n"
    )
    proc = subprocess.Popen(
        [PGBOUNCER, *run_as, str(tmp_path / "pgbouncer.ini")], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    url = f"postgresql://{app['USER']}:{app['PASSWORD']}@127.0.0.1:{port}/{db['NAME']}"
    try:
        deadline = time.time() + 15
        while True:
            try:
                psycopg.connect(url, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if time.time() > deadline or proc.poll() is not None:
                    log = (tmp_path / "pgbouncer.log").read_text() if (tmp_path / "pgbouncer.log").exists() else ""
                    pytest.fail(f"pgbouncer did not start:\n{log[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp_path, ignore_errors=True)


def _keys(conn, team_id) -> tuple[set[str], int]:
    """In one transaction: the scope set to one team, what the memory table shows, and the server backend used."""
    with conn.transaction():
        conn.execute("SELECT set_config(%s, %s, true)", [rls.SETTING, str(team_id)])
        keys = {r[0] for r in conn.execute("SELECT key FROM memory_memoryentry")}
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    return keys, pid


def test_the_team_scope_stays_in_its_transaction_through_pgbouncer(bouncer):
    with all_teams():
        teams = [TeamFactory(slug="bouncer-a"), TeamFactory(slug="bouncer-b")]
        for team in teams:
            store = StoreFactory(team=team, slug="eng")
            make_entry(store, key=f"{team.slug}-lesson", content="only for this team")
    a, b = bouncer(), bouncer()
    try:
        pids = set()
        for _ in range(3):
            for conn, team in ((a, teams[0]), (b, teams[1])):
                keys, pid = _keys(conn, team.pk)
                assert keys == {f"{team.slug}-lesson"}
                pids.add(pid)
                # Outside a transaction with a scope, the next statement (on whichever client) sees no team at all.
                for other in (a, b):
                    assert other.execute("SELECT count(*) FROM memory_memoryentry").fetchone()[0] == 0
        assert len(pids) == 1, "the two clients were meant to share one server connection"
    finally:
        a.close()
        b.close()


@contextlib.contextmanager
def _django_through(url: str):
    """Django's connection through PgBouncer as the application role (logged in as it: PgBouncer passes no
    ``options`` on), as the web app connects in docker-compose.yml; as it was afterwards."""
    parts = psycopg.conninfo.conninfo_to_dict(url)
    conn = connections["default"]
    conn.close()
    saved = copy.deepcopy(conn.settings_dict)
    conn.settings_dict.update(HOST=parts["host"], PORT=parts["port"], USER=parts["user"], PASSWORD=parts["password"])
    conn.settings_dict["OPTIONS"] = {k: v for k, v in saved.get("OPTIONS", {}).items() if k != "options"}
    try:
        yield
    finally:
        conn.close()
        conn.settings_dict.clear()
        conn.settings_dict.update(saved)


def test_context_through_pgbouncer_prepares_nothing_when_told(bouncer_url, settings):
    """DATABASE_PREPARED_STATEMENTS=false (docker-compose.yml, behind PgBouncer before 1.21): the API's hot
    statements (dreamweb.prepared) are sent unprepared, so no server connection holds a statement another
    transaction could miss; context is served to two teams' keys in turn over the one server connection."""
    settings.DREAMWEB_DB_PREPARED_STATEMENTS = False
    with all_teams():
        teams = [TeamFactory(slug="bouncer-a"), TeamFactory(slug="bouncer-b")]
        raws = []
        for team in teams:
            make_entry(StoreFactory(team=team, slug="eng"), key=f"{team.slug}-lesson", content="only for this team")
            raws.append(make_key(team))
    with _django_through(bouncer_url):
        client = Client()
        for _ in range(3):
            for raw, team in zip(raws, teams, strict=True):
                r = client.get(
                    "/api/v1/context/", {"store": "eng", "query": "team"}, headers={"Authorization": f"Api-Key {raw}"}
                )
                assert r.status_code == 200, r.content[:300]
                assert [i["key"] for i in r.json()["items"]] == [f"{team.slug}-lesson"]
        with psycopg.connect(bouncer_url, autocommit=True, prepare_threshold=None) as peek:
            # The same server connection (a pool of one) as the requests'.
            assert peek.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
