#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the escrow-store tests.
#
# Installs PostgreSQL with apt-get when it is missing (root only), creates a cluster in
# a fresh temporary directory, starts it on 127.0.0.1 on a free port (trust auth,
# reachable only from this machine), creates the database `twinaudit_test`, and prints
# on stdout:
#
#   export TWINAUDIT_TEST_PG_DSN='postgresql://USER@127.0.0.1:PORT/twinaudit_test'
#   export TWINAUDIT_TEST_PG_DATA='/tmp/twinaudit-pg.XXXXXX'
#
# Everything else goes to stderr. `ci-postgres.sh stop` stops the server named by
# TWINAUDIT_TEST_PG_DATA and deletes its directory. Use it so that a failure to start
# stops CI, and the server goes away when CI ends:
#
#   PG_ENV="$(bash scripts/ci-postgres.sh)"; eval "$PG_ENV"; trap 'bash scripts/ci-postgres.sh stop' EXIT
set -euo pipefail

log() { echo "ci-postgres: $*" >&2; }

if [[ "${1:-}" == "stop" ]]; then
  DATA="${TWINAUDIT_TEST_PG_DATA:-}"
  if [[ -z "$DATA" || ! -f "$DATA/PG_VERSION" ]]; then
    log "nothing to stop (TWINAUDIT_TEST_PG_DATA is not a cluster directory)"
    exit 0
  fi
  PG_CTL="$(ls -d /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1)"
  if [[ "$(id -u)" -eq 0 ]]; then
    runuser -u postgres -- "$PG_CTL" -D "$DATA" -m fast -w stop >&2 || true
  else
    "$PG_CTL" -D "$DATA" -m fast -w stop >&2 || true
  fi
  rm -rf -- "$DATA"
  log "stopped and removed $DATA"
  exit 0
fi

find_bindir() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [[ -n "$dir" && -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
    echo "$dir"
  fi
}

BINDIR="$(find_bindir)"
if [[ -z "$BINDIR" ]]; then
  if [[ "$(id -u)" -ne 0 ]]; then
    log "PostgreSQL is not installed and installing it needs root"
    exit 1
  fi
  log "installing postgresql with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >&2
  BINDIR="$(find_bindir)"
  if [[ -z "$BINDIR" ]]; then
    log "postgresql installed but no initdb/pg_ctl under /usr/lib/postgresql/*/bin"
    exit 1
  fi
fi
log "using $BINDIR"

# The server refuses to run as root: as root, run it as the `postgres` user.
if [[ "$(id -u)" -eq 0 ]]; then
  DBUSER=postgres
  as_db() { runuser -u postgres -- "$@"; }
else
  DBUSER="$(id -un)"
  as_db() { "$@"; }
fi

DATA="$(mktemp -d "${TMPDIR:-/tmp}/twinaudit-pg.XXXXXX")"
chmod 0700 "$DATA"
if [[ "$(id -u)" -eq 0 ]]; then
  chown postgres: "$DATA"
fi
if ! initdb_log="$(as_db "$BINDIR/initdb" -D "$DATA" -U "$DBUSER" -A trust -E UTF8 2>&1)"; then
  echo "$initdb_log" >&2
  exit 1
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

started=""
for attempt in 1 2 3; do
  PORT="$(free_port)"
  if as_db "$BINDIR/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DATA" start >&2; then
    started=yes
    break
  fi
  log "start on port $PORT failed (attempt $attempt)"
  tail -n 20 "$DATA/server.log" >&2 || true
done
if [[ -z "$started" ]]; then
  log "could not start PostgreSQL"
  exit 1
fi

if ! as_db "$BINDIR/createdb" -h 127.0.0.1 -p "$PORT" -U "$DBUSER" twinaudit_test >&2; then
  log "could not create the database; stopping the server"
  as_db "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
  exit 1
fi
log "$("$BINDIR/postgres" --version) on 127.0.0.1:$PORT, data in $DATA"
echo "export TWINAUDIT_TEST_PG_DSN='postgresql://$DBUSER@127.0.0.1:$PORT/twinaudit_test'"
echo "export TWINAUDIT_TEST_PG_DATA='$DATA'"
