#!/usr/bin/env bash
# SWE RL: the entry point of the usage guide. Runs run_cpu_smollm2_swe.sh when no GPU is visible and
# run_qwen3_8b_swe.sh (Qwen3-8B on 8 GPUs; HF_CKPT required, env in its header) when one is, and says which.
#   bash swe-rl/run_swe_agent.sh [--benchmark local|swe-bench-lite|PATH.jsonl] [--dry-run] [extra trainer flags]
# --benchmark (anywhere among the arguments):
#   local           the shipped instances, swe-rl/data/instances.jsonl, in the bubblewrap sandbox (the default,
#                   unless INSTANCES is set)
#   PATH.jsonl      any SWE-bench-format JSONL (INSTANCES=PATH); SWE_BACKEND / SWE_IMAGE choose where it runs
#   swe-bench-lite  SWE-bench Lite in Docker: SWE_BENCH_LITE names a JSONL export of princeton-nlp/SWE-bench_Lite,
#                   and Docker must hold SWE-bench's images (SWE_BACKEND=docker SWE_IMAGE=swebench are set)
# FORCE_DEVICE=cpu|gpu skips the detection (scripts/method_entry.sh).
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"

swe_usage() {
    sed -n '2,/^[^#]/p' "$0" | grep '^#' | grep -v shellcheck | sed 's/^# \{0,1\}//'
}

swe_lite_missing() {
    cat >&2 <<EOF
error: $ENTRY_NAME: --benchmark swe-bench-lite needs the dataset file and SWE-bench's Docker images; $1.
  1. The dataset: a JSONL export of princeton-nlp/SWE-bench_Lite, made on a machine with network:
       python -c "import datasets; datasets.load_dataset('princeton-nlp/SWE-bench_Lite', split='test').to_json('swe-bench-lite.jsonl')"
     then copied here and named by SWE_BENCH_LITE=/path/to/swe-bench-lite.jsonl.
  2. Docker with SWE-bench's images loaded, one per instance:
       swebench/sweb.eval.x86_64.<instance id with __ replaced by _1776_>:latest
     pulled on a machine with network (docker pull), written out with docker save and read in here with docker load
     (scripts/setup_docker.sh starts a daemon).
EOF
    exit 2
}

benchmark=""
passed=()
while [ $# -gt 0 ]; do
    case "$1" in
        --benchmark)
            if [ $# -lt 2 ]; then
                echo "error: $ENTRY_NAME: --benchmark needs a value" >&2; swe_usage >&2; exit 2
            fi
            benchmark=$2
            shift ;;
        --benchmark=*) benchmark=${1#--benchmark=} ;;
        -h | --help) swe_usage; exit 0 ;;
        *) passed+=("$1") ;;
    esac
    shift
done
set -- "${passed[@]}"

case "$benchmark" in
    "")  # no --benchmark: INSTANCES from the environment, else the shipped instances
        if [ -n "${INSTANCES:-}" ]; then
            how="the instances of INSTANCES=$INSTANCES"
        else
            how="the shipped instances (swe-rl/data/instances.jsonl)"
        fi ;;
    local)
        unset INSTANCES
        how="the shipped instances (swe-rl/data/instances.jsonl)" ;;
    swe-bench-lite)
        if [ -z "${SWE_BENCH_LITE:-}" ]; then
            swe_lite_missing "SWE_BENCH_LITE is not set"
        fi
        if [ ! -f "$SWE_BENCH_LITE" ]; then
            swe_lite_missing "SWE_BENCH_LITE=$SWE_BENCH_LITE is not a file"
        fi
        INSTANCES=$(realpath "$SWE_BENCH_LITE")  # the launch scripts run from the repository root
        export INSTANCES SWE_BACKEND=docker SWE_IMAGE=swebench
        how="SWE-bench Lite ($SWE_BENCH_LITE) in Docker (SWE_BACKEND=docker SWE_IMAGE=swebench; SWE-bench's images must be loaded)" ;;
    *.jsonl)
        if [ ! -f "$benchmark" ]; then
            echo "error: $ENTRY_NAME: --benchmark $benchmark: no such file" >&2; exit 2
        fi
        INSTANCES=$(realpath "$benchmark")
        export INSTANCES
        how="the instances of $benchmark" ;;
    *)
        echo "error: $ENTRY_NAME: --benchmark must be local, swe-bench-lite or a PATH.jsonl, got '$benchmark'" >&2
        swe_usage >&2
        exit 2 ;;
esac

detect_device
if [ "$DEVICE" = gpu ]; then
    echo "$ENTRY_NAME: $DEVICE_REASON: running the GPU script swe-rl/run_qwen3_8b_swe.sh on $how" >&2
    exec bash "$ENTRY_DIR/run_qwen3_8b_swe.sh" "$@"
fi
echo "$ENTRY_NAME: $DEVICE_REASON: running the CPU script swe-rl/run_cpu_smollm2_swe.sh on $how" >&2
exec bash "$ENTRY_DIR/run_cpu_smollm2_swe.sh" "$@"
