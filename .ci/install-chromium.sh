#!/usr/bin/env bash
# Install a headless-capable Chromium for the report tests (marked `chromium`), idempotently.
#
# The HTML report tests open report.html in a real browser; in CI they must run
# (they fail instead of skipping when CI is set), so CI calls this first. When a
# Chromium is already at $EVOMEMORY_CHROMIUM or /usr/bin/chromium nothing is
# installed. Needs root (or sudo) and Debian/Ubuntu apt. Prints the browser path last.
set -euo pipefail

log() { echo "install-chromium: $*" >&2; }

for candidate in "${EVOMEMORY_CHROMIUM:-}" /usr/bin/chromium; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
        log "already installed: $candidate"
        echo "$candidate"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    log "no chromium at /usr/bin/chromium and no apt-get; install Chromium and set EVOMEMORY_CHROMIUM"
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { log "need root or sudo to apt-get install chromium"; exit 1; }
    SUDO="sudo"
fi

log "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
# Debian ships the browser as `chromium`; fonts so screenshots have readable text.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2

if [ ! -x /usr/bin/chromium ]; then
    log "apt-get finished but /usr/bin/chromium is missing (on Ubuntu, chromium is a snap; use a Debian image or set EVOMEMORY_CHROMIUM)"
    exit 1
fi
/usr/bin/chromium --version >&2 || true
echo /usr/bin/chromium
