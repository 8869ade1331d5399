#!/bin/sh
# Creates Temporal's two databases in PostgreSQL if missing and brings their schemas up to
# the version the server image expects. Run by the temporal-schema service in
# docker-compose.yml, and by the e2e tests' PostgreSQL-backed server (which set
# TEMPORAL_SCHEMA_DIR to the server module's schema folder); safe to run again.
set -eu
tool() { temporal-sql-tool --plugin "$SQL_PLUGIN" --ep "$SQL_HOST" -p "$SQL_PORT" -u "$SQL_USER" --pw "$SQL_PASSWORD" "$@"; }
schema=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema}/postgresql/v12
for db in temporal visibility; do
  name=temporal
  [ "$db" = visibility ] && name=temporal_visibility
  tool --db "$name" create || true # already there on a second run
  tool --db "$name" setup-schema -v 0.0 || true # versioning table already there
  tool --db "$name" update-schema -d "$schema/$db/versioned"
done
echo "Temporal schemas are up to date."
