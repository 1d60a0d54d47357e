#!/usr/bin/env bash
# Runs once when the compose postgres volume is first created: a replication role for the read replica
# (docker-compose.yml, profile "replica"; docs/scaling.md) and the pg_hba line that lets it stream.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE ROLE dreamweb_replicator LOGIN REPLICATION PASSWORD '${DREAMWEB_REPLICATOR_PASSWORD}';
SQL
echo "host replication dreamweb_replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
