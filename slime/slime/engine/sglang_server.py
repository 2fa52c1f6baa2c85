"""Launch SGLang servers (`python -m sglang.launch_server`) for the policy and for judges/teachers.

The command is built from our flags only with argument names that SGLang defines (checked against the
pinned version's flag list in `slime.engine.known_flags`). The server runs as a child process pinned to its
GPUs through CUDA_VISIBLE_DEVICES, is ready once `/health` and `/v1/models` answer, and is stopped by PID.
Everything after start-up goes through `slime.engine.client.EngineClient`, exactly as with our CPU engine.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from slime.engine.launch import ChildServer

# Flags the trainer sets itself, so --sglang-extra-args may not repeat them: flag -> where to set it instead.
RESERVED_SGLANG_FLAGS = {
    "--model-path": "--hf-checkpoint / --prm-model-path",
    "--model": "--hf-checkpoint / --prm-model-path",
    "--host": "the engine host (loopback)",
    "--port": "the layout's ports (--rollout-base-port / --prm-base-port)",
    "--tp-size": "--rollout-num-gpus-per-engine / --prm-num-gpus-per-engine",
    "--tensor-parallel-size": "--rollout-num-gpus-per-engine / --prm-num-gpus-per-engine",
    "--mem-fraction-static": "--sglang-mem-fraction-static",
    "--context-length": "--sglang-context-length",
    "--reasoning-parser": "--sglang-reasoning-parser",
    "--tool-call-parser": "--sglang-tool-call-parser",
    "--api-key": "$SLIME_ENGINE_API_KEY",
    "--random-seed": "--seed",
    "--base-gpu-id": "the layout (CUDA_VISIBLE_DEVICES pins each engine)",
}


@dataclass(frozen=True)
class SGLangServerConfig:
    """What `sglang.launch_server` is told; None leaves SGLang's own default."""

    model_path: str
    port: int
    host: str = "127.0.0.1"
    tp_size: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    api_key: str | None = None
    served_model_name: str | None = None
    random_seed: int | None = None
    dtype: str | None = None  # "auto" | "bfloat16" | "float16" | "float32"
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if self.tp_size < 1:
            raise ValueError(f"tp_size must be >= 1, got {self.tp_size}")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static < 1:
            raise ValueError(f"mem_fraction_static must be in (0, 1), got {self.mem_fraction_static}")


def sglang_server_command(config: SGLangServerConfig, python: str = sys.executable) -> list[str]:
    cmd = [python, "-m", "sglang.launch_server", "--model-path", config.model_path, "--host", config.host,
           "--port", str(config.port), "--tp-size", str(config.tp_size)]
    optional = (("--mem-fraction-static", config.mem_fraction_static), ("--context-length", config.context_length),
                ("--reasoning-parser", config.reasoning_parser), ("--tool-call-parser", config.tool_call_parser),
                ("--api-key", config.api_key), ("--served-model-name", config.served_model_name),
                ("--random-seed", config.random_seed), ("--dtype", config.dtype))
    for flag, value in optional:
        if value is not None:
            cmd += [flag, str(value)]
    return cmd + list(config.extra_args)


def engine_dtype(args) -> str | None:
    """--fp16 serves in float16 (as upstream slime does); otherwise SGLang picks from the checkpoint."""
    return "float16" if getattr(args, "fp16", False) else None


def sglang_config_from_args(args, *, model_path: str | Path, port: int, tp_size: int, seed_offset: int = 0,
                            host: str = "127.0.0.1") -> SGLangServerConfig:
    """The server config of one engine from the trainer flags; policy and judge engines share the --sglang-* ones."""
    return SGLangServerConfig(
        model_path=str(model_path), host=host, port=port, tp_size=tp_size,
        mem_fraction_static=args.sglang_mem_fraction_static, context_length=args.sglang_context_length,
        reasoning_parser=args.sglang_reasoning_parser, tool_call_parser=args.sglang_tool_call_parser,
        api_key=os.environ.get("SLIME_ENGINE_API_KEY") or None,
        served_model_name=getattr(args, "served_model_name", None),
        random_seed=args.seed + seed_offset,  # one seed per engine, as upstream (seed + rank)
        dtype=engine_dtype(args), extra_args=tuple(args.sglang_extra_args or ()))


class GPUServer(ChildServer):
    """A GPU inference server as a child process, pinned to `visible_devices` (a CUDA_VISIBLE_DEVICES value)."""

    models_path = "/v1/models"

    def __init__(self, *, port: int, visible_devices: str, host: str = "127.0.0.1", api_key: str | None = None,
                 log_path: str | Path | None = None, ready_timeout: float = 1800.0):
        # Large models take many minutes to load and capture CUDA graphs; the default timeout allows for that.
        super().__init__(port=port, api_key=api_key, log_path=log_path, ready_timeout=ready_timeout, host=host)
        self.visible_devices = visible_devices

    def environment(self) -> dict:
        env = super().environment()
        env["CUDA_VISIBLE_DEVICES"] = self.visible_devices
        # OMP_NUM_THREADS=1 from ChildServer suits our CPU engine; GPU servers use their own threading.
        env.pop("OMP_NUM_THREADS", None)
        return env

    def _wait_ready(self):
        super()._wait_ready()  # /health: the HTTP server is up and the model loaded
        self._wait_for(self.models_path)  # and the OpenAI routes serve the model (what the proxy calls)

    def _wait_for(self, path: str):
        import httpx

        deadline = time.monotonic() + self.ready_timeout
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        with httpx.Client(timeout=10.0, headers=headers) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with code {self.process.returncode} before serving "
                                       f"{path}" + (f"; see {self.log_path}" if self.log_path else ""))
                try:
                    if client.get(self.url + path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
        raise TimeoutError(f"{self.name} at {self.url} does not answer {path} after {self.ready_timeout:.0f} s")


class SGLangServer(GPUServer):
    """`with SGLangServer(config, visible_devices="2,3") as server: EngineClient(server.url)...`"""

    name = "sglang"

    def __init__(self, config: SGLangServerConfig, *, visible_devices: str, log_path: str | Path | None = None,
                 ready_timeout: float = 1800.0):
        super().__init__(port=config.port, visible_devices=visible_devices, host=config.host, api_key=config.api_key,
                         log_path=log_path, ready_timeout=ready_timeout)
        self.config = config

    def command(self) -> list[str]:
        return sglang_server_command(self.config)
