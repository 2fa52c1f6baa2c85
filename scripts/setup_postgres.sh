#!/usr/bin/env bash
# Make PostgreSQL's server binaries available for the store's PostgreSQL tests (tests/helpers/postgres.py starts a
# private server per test module on a free loopback port and stops it; nothing is left running).
#
#   bash scripts/setup_postgres.sh      # idempotent: does nothing when initdb/postgres are already there
#
# Installs Debian's `postgresql` package with apt-get only when the binaries are missing (root, or sudo without a
# password). The package's own cluster service is not used and not started. Where apt-get is not available the
# tests that need a server are skipped with the reason.
set -euo pipefail

log() { echo "setup_postgres: $*" >&2; }

found() {
    command -v initdb >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null
}

if found; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "no PostgreSQL binaries and no apt-get: the PostgreSQL store tests will be skipped"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        log "no PostgreSQL binaries and no root: install Debian's postgresql to run the PostgreSQL store tests"
        exit 0
    fi
fi
log "installing Debian's postgresql (server binaries for the store tests)"
# policy-rc.d 101: the package must not start its own cluster service
$SUDO sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
$SUDO apt-get update -qq >&2 || log "apt-get update failed; trying the install anyway"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql >&2
found && log "done" || log "postgresql installed but its binaries were not found"
