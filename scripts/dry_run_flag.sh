# Sourced by the launch scripts' shared bodies (scripts/cpu_launch_env.sh, scripts/agentic_gpu_launch.sh): takes
# --dry-run out of the caller's arguments wherever it lands and sets DRY_RUN=1 (DRY_RUN may also come from the
# environment); the other arguments stay, in order.
DRY_RUN=${DRY_RUN:-0}
_PASSED=()
for _arg in "$@"; do
    if [ "$_arg" = --dry-run ]; then DRY_RUN=1; else _PASSED+=("$_arg"); fi
done
set -- "${_PASSED[@]}"
unset _PASSED _arg
