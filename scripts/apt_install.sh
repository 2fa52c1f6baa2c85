#!/usr/bin/env bash
# Install Debian packages with apt-get, as root or with passwordless sudo; the one place the setup scripts do it.
#
#   bash scripts/apt_install.sh WHAT_FOR PACKAGE [PACKAGE ...]
#
# Exits 0 without installing (and says what to install) when there is no apt-get or no root. PREVENT_SERVICES=1
# keeps the packages' own services from starting (policy-rc.d), e.g. PostgreSQL's cluster.
set -euo pipefail
what=$1
shift
log() { echo "apt_install ($what): $*" >&2; }
if ! command -v apt-get >/dev/null 2>&1; then
    log "no apt-get: install $* by hand"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        log "no root: install Debian's $* (apt-get install $*)"
        exit 0
    fi
fi
# A policy-rc.d that is already there (Docker images ship one) already refuses services and stays as it is; only one
# written here is removed again.
if [ "${PREVENT_SERVICES:-0}" = 1 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    $SUDO sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
log "installing Debian's $*"
$SUDO apt-get update -qq >&2 || log "apt-get update failed; trying the install anyway"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >&2
