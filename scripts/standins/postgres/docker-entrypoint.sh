#!/bin/sh
# The official image's first start, in short: a cluster in PGDATA owned by POSTGRES_USER with
# POSTGRES_PASSWORD, the database POSTGRES_DB, password logins from the network.
set -eu
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:?the official image refuses to start without it}" > "$pwfile"
  # POSTGRES_INITDB_ARGS is a list of options, split as the official entrypoint splits it.
  # shellcheck disable=SC2086
  initdb --username="$user" --pwfile="$pwfile" ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA"
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  if [ "$db" != postgres ]; then
    PGPASSWORD=$POSTGRES_PASSWORD createdb --username="$user" "$db"
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec "$@"
