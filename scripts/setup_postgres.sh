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
# the package's own cluster service is not used: keep it from starting
PREVENT_SERVICES=1 bash "$(dirname "$0")/apt_install.sh" "PostgreSQL store tests" postgresql
found && log "done" || log "no PostgreSQL binaries: the PostgreSQL store tests will be skipped"
