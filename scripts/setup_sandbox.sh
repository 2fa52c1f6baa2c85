#!/usr/bin/env bash
# Make bubblewrap available for the agentic sandbox (slime/slime/agentic/sandbox.py: no network, a read-only
# system, a private work directory, an unprivileged uid per sandbox; see slime/README.md).
#
#   bash scripts/setup_sandbox.sh       # idempotent: does nothing when `bwrap`, `setpriv`, `prlimit`, `mkfs.ext4` are there
#
# Installs Debian's `bubblewrap` with apt-get only when `bwrap` is missing (root, or sudo without a password), and
# e2fsprogs when `mkfs.ext4` is (each sandbox's work directory is an ext4 of its own: its disk budget).
# Otherwise it says what to install; the sandbox then refuses to start with the same message (unless a caller opts
# into the weaker `isolation="rlimits"` mode) and the sandbox tests are skipped with the reason.
set -euo pipefail

log() { echo "setup_sandbox: $*" >&2; }

has() { command -v "$1" >/dev/null 2>&1 || [ -x "/sbin/$1" ] || [ -x "/usr/sbin/$1" ]; }
found() { has bwrap && has setpriv && has prlimit && has mkfs.ext4; }

if found; then
    exit 0
fi
pkgs=""
command -v bwrap >/dev/null 2>&1 || pkgs="bubblewrap"
# setpriv (drop to the sandbox uid) and prlimit (the rlimits) come with Debian's util-linux
{ has setpriv && has prlimit; } || pkgs="${pkgs:+$pkgs }util-linux"
has mkfs.ext4 || pkgs="${pkgs:+$pkgs }e2fsprogs"
# shellcheck disable=SC2086
bash "$(dirname "$0")/apt_install.sh" "the agentic sandbox" $pkgs
found && log "done" || log "bwrap/setpriv/prlimit/mkfs.ext4 are not all there: the sandbox will refuse to start and say why"
