#!/usr/bin/env bash
# Create the two PostgreSQL roles Dreamweb uses, and its database, idempotently.
#   dreamweb_owner  owns the tables and runs migrations (CREATEDB so the test suite can make its database)
#   dreamweb_app    what the application connects as: not a superuser, not the owner, no BYPASSRLS
# The owner is made a member of dreamweb_app (never the other way round): the test suite logs in as the owner and runs
# as dreamweb_app (SET ROLE), so that only its own test code can switch back (tests/scoping.py).
# Needs a superuser connection: PGHOST/PGPORT/PGUSER (default 127.0.0.1:5432, postgres).
set -euo pipefail
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
OWNER_PASSWORD=${DREAMWEB_OWNER_PASSWORD:-dreamweb_owner}
APP_PASSWORD=${DREAMWEB_APP_PASSWORD:-dreamweb_app}
psql -v ON_ERROR_STOP=1 -q -d postgres <<SQL
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dreamweb_owner') THEN
    CREATE ROLE dreamweb_owner LOGIN CREATEDB PASSWORD '${OWNER_PASSWORD}';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dreamweb_app') THEN
    CREATE ROLE dreamweb_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD '${APP_PASSWORD}';
  END IF;
END
\$\$;
GRANT dreamweb_app TO dreamweb_owner;
SQL
if ! psql -tAq -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'dreamweb'" | grep -q 1; then
  psql -q -d postgres -c "CREATE DATABASE dreamweb OWNER dreamweb_owner"
fi
echo "roles dreamweb_owner, dreamweb_app and database dreamweb are ready on $PGHOST:$PGPORT"
