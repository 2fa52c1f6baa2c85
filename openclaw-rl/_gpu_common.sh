# Shared by the Qwen3-4B GPU launch scripts of this folder (sourced, not run).
# Validates the GPU layout up front and prints it; never kills processes by name.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

check_layout() {
    local total=$((ACTOR_GPUS + ROLLOUT_GPUS + PRM_GPUS))
    for name in NUM_GPUS ACTOR_GPUS ROLLOUT_GPUS PRM_GPUS; do
        if ! [[ "${!name}" =~ ^[0-9]+$ ]]; then
            echo "error: $name must be a non-negative integer, got '${!name}'" >&2; exit 2
        fi
    done
    if [ "$ACTOR_GPUS" -lt 1 ] || [ "$ROLLOUT_GPUS" -lt 1 ]; then
        echo "error: ACTOR_GPUS and ROLLOUT_GPUS must be >= 1 (got $ACTOR_GPUS, $ROLLOUT_GPUS)" >&2; exit 2
    fi
    if [ "$total" -gt "$NUM_GPUS" ]; then
        echo "error: ACTOR_GPUS + ROLLOUT_GPUS + PRM_GPUS = $total exceeds NUM_GPUS=$NUM_GPUS" >&2; exit 2
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        local have
        have=$(nvidia-smi -L | wc -l)
        if [ "$have" -lt "$NUM_GPUS" ]; then
            echo "error: NUM_GPUS=$NUM_GPUS but nvidia-smi lists $have GPU(s)" >&2; exit 2
        fi
    fi
    echo "layout: trainer GPUs 0..$((ACTOR_GPUS - 1)) | policy engine GPUs $ACTOR_GPUS..$((ACTOR_GPUS + ROLLOUT_GPUS - 1))" \
         "| judge GPUs $((ACTOR_GPUS + ROLLOUT_GPUS))..$((total - 1)) (PRM_GPUS=$PRM_GPUS) | proxy http://$HOST:$PORT/v1"
}

if [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$ROOT/.venv/bin/activate" ]; then
    # shellcheck disable=SC1091
    . "$ROOT/.venv/bin/activate"
fi
export HOST=${HOST:-0.0.0.0} PORT=${PORT:-30000} SERVED_MODEL_NAME=${SERVED_MODEL_NAME:-qwen3-4b}
if [ "$HOST" != "127.0.0.1" ] && [ "$HOST" != "localhost" ] && [ -z "${OPENCLAW_PROXY_API_KEY:-}" ]; then
    echo "error: HOST=$HOST exposes the proxy: set OPENCLAW_PROXY_API_KEY (clients send it as the bearer key)" >&2
    exit 2
fi
