"""Rank 0's engines: start the embedded engine on the policy, or attach to running ones by URL."""

from __future__ import annotations

import logging
from pathlib import Path

from slime.engine.client import EngineClient
from slime.engine.launch import EngineProcess

log = logging.getLogger(__name__)


def engine_device_args(args) -> list[str]:
    """Engines follow the trainer onto the GPU (placement per GPU arrives with the scale-out issue)."""
    import torch

    device = getattr(args, "device", "auto")
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        return ["--device", "cuda", "--dtype", "bfloat16"]
    return []


class RolloutEngines:
    def __init__(self, args, model_path: Path, run_dir: Path):
        self.processes: list[EngineProcess] = []
        external = list(getattr(args, "rollout_external_engine_addrs", None) or [])
        if external:
            self.urls = external
        else:
            extra = ["--random-seed", str(args.seed), *engine_device_args(args)]
            if getattr(args, "rollout_max_context_len", None):
                # the configured context limit is enforced where prompts are rendered: prompts that do not
                # fit get a clear 400 (through the proxy too) instead of being silently cut
                extra += ["--context-length", str(args.rollout_max_context_len)]
            engine = EngineProcess(model_path, *extra, threads=args.engine_threads,
                                   log_path=run_dir / "engine.log", ready_timeout=600)
            log.info("starting the embedded engine on %s (log: %s)", model_path, run_dir / "engine.log")
            self.processes.append(engine.start())
            self.urls = [engine.url]
        for url in self.urls:
            with EngineClient(url, timeout=30.0) as client:
                client.wait_until_ready(timeout=600)

    def weight_version(self) -> str:
        with EngineClient(self.urls[0], timeout=30.0) as client:
            return client.weight_version()

    def stop(self):
        for engine in self.processes:
            engine.stop()
        self.processes.clear()
