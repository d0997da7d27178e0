#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the memory backend tests, idempotently.
#
# Installs PostgreSQL with apt-get when no server binaries are present, creates a
# cluster in a temporary data directory owned by the `postgres` user, listens on
# 127.0.0.1 only, and sets a known password for the `postgres` role. Running it
# again while the server is up changes nothing. The last lines it prints are the
# variables to export, so CI can do:
#
#     eval "$(bash .ci/start-postgres.sh | grep '^export ')"
#
# Settings (environment): EVOMEMORY_PG_DATA (data dir, default /tmp/evomemory-pg),
# EVOMEMORY_PG_PORT (default 55432, so a developer's own server on 5432 is left
# alone), EVOMEMORY_PG_PASSWORD (default: a random one made when the cluster is
# created and kept in $EVOMEMORY_PG_DATA.password). The password must not be a word:
# the plugin masks PGPASSWORD's value wherever it appears in its output, so a
# password "evomemory" would mask the project's own name in every artefact.
set -euo pipefail

DATA="${EVOMEMORY_PG_DATA:-/tmp/evomemory-pg}"
PORT="${EVOMEMORY_PG_PORT:-55432}"
LOG="$DATA.log"
PASSWORD_FILE="$DATA.password"

log() { echo "start-postgres: $*" >&2; }

find_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
    done
    return 1
}

BINDIR="$(find_bindir || true)"
if [ -z "$BINDIR" ]; then
    log "no PostgreSQL server binaries found; installing with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # policy-rc.d stops the package from starting Debian's own cluster on 5432.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    apt-get install -y -qq postgresql >&2
    rm -f /usr/sbin/policy-rc.d
    BINDIR="$(find_bindir)"
fi
id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres

as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

if [ -n "${EVOMEMORY_PG_PASSWORD:-}" ]; then
    PASSWORD="$EVOMEMORY_PG_PASSWORD"
elif [ -s "$PASSWORD_FILE" ]; then
    PASSWORD="$(cat "$PASSWORD_FILE")"
else
    # a cluster made before passwords were random (or by hand): its password is unknown
    if [ -s "$DATA/PG_VERSION" ]; then
        log "recreating $DATA: its password is not recorded in $PASSWORD_FILE"
        as_postgres "$BINDIR/pg_ctl" -D "$DATA" -m immediate stop >&2 2>/dev/null || true
        rm -rf "$DATA"
    fi
    PASSWORD="ci-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    (umask 077 && printf '%s\n' "$PASSWORD" > "$PASSWORD_FILE")
fi

if [ ! -s "$DATA/PG_VERSION" ]; then
    log "creating cluster in $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA"
    chown postgres: "$DATA"
    chmod 700 "$DATA"
    PWFILE="$(mktemp)"
    printf '%s\n' "$PASSWORD" > "$PWFILE"
    chown postgres: "$PWFILE"
    as_postgres "$BINDIR/initdb" -D "$DATA" -U postgres --auth=scram-sha-256 \
        --pwfile="$PWFILE" --encoding=UTF8 --locale=C.UTF-8 >&2
    rm -f "$PWFILE"
    cat >> "$DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
CONF
fi

if as_postgres "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "server already running ($DATA)"
else
    touch "$LOG" && chown postgres: "$LOG"
    as_postgres "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >&2 || {
        log "server failed to start; log follows"; cat "$LOG" >&2; exit 1; }
fi

for _ in $(seq 1 30); do
    if "$BINDIR/pg_isready" -h 127.0.0.1 -p "$PORT" -q; then break; fi
    sleep 1
done
"$BINDIR/pg_isready" -h 127.0.0.1 -p "$PORT" >&2

echo "export PGHOST=127.0.0.1"
echo "export PGPORT=$PORT"
echo "export PGUSER=postgres"
echo "export PGDATABASE=postgres"
echo "export PGPASSWORD=$PASSWORD"
echo "export EVOMEMORY_PG_AVAILABLE=1"
