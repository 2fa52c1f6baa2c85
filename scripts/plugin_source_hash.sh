#!/usr/bin/env bash
# Prints the hash of the rl-training-headers plugin's sources (what a build is made from): setup_openclaw.sh stamps
# a build with it, tests/e2e/openclaw_harness.py compares it to tell a stale build. One definition for both.
#   bash scripts/plugin_source_hash.sh [PLUGIN_SRC]
set -euo pipefail
PLUGIN_SRC="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/extensions/rl-training-headers}"
cd "$PLUGIN_SRC"
cat package.json package-lock.json tsconfig.json openclaw.plugin.json $(ls src/*.ts | LC_ALL=C sort) | sha256sum | cut -c1-16
