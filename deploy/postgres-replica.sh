#!/usr/bin/env bash
# The read replica (docker-compose.yml, profile "replica"): on an empty volume, a base backup of the primary with
# streaming replication configured (-R), then PostgreSQL as a hot standby that follows the primary.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until PGPASSWORD="$DREAMWEB_REPLICATOR_PASSWORD" pg_basebackup -h postgres -U dreamweb_replicator \
      -D "$PGDATA" -R -X stream; do
    echo "waiting for the primary" >&2
    sleep 2
  done
  chmod 700 "$PGDATA"
fi
exec docker-entrypoint.sh postgres -c hot_standby=on
