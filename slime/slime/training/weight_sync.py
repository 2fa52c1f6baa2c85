"""Publishing trainer weights to the engines after optimizer steps (disk transport).

Each version is written once as an HF folder (full weights) or a PEFT adapter folder (LoRA) under
`--update-weight-disk-dir/v<version>`, then every engine loads it with `/update_weights_from_disk`.
Engines swap between batches, so no request fails; the last `--keep-weight-versions` folders stay on
disk. (The GPU path broadcasts tensors over NCCL instead; see issue 7.)
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from slime.engine.client import EngineClient


class WeightPublisher:
    def __init__(self, args, engine_urls: list[str], is_main: bool, start_version: int = 0):
        self.directory = Path(args.update_weight_disk_dir)
        self.keep = max(1, args.keep_weight_versions)
        self.is_main = is_main
        self.version = start_version
        self.last_folder: Path | None = None  # the folder of `version`, while it holds the live weights
        self.clients = [EngineClient(url, timeout=1800.0) for url in engine_urls] if is_main else []

    def publish(self, actor) -> dict:
        """Collective: every rank calls it; rank 0 writes the folder and updates every engine."""
        started = time.perf_counter()
        version = self.version + 1
        folder = self.directory / f"v{version:06d}"
        actor.export_hf(folder)
        if self.is_main:
            for client in self.clients:
                client.update_weights_from_disk(str(folder), weight_version=str(version))
            self._prune()
        self.version = version
        self.last_folder = folder
        return {"perf/update_weights_time": time.perf_counter() - started, "train/weight_version": version}

    def _prune(self):
        versions = sorted(p for p in self.directory.glob("v*") if p.is_dir())
        for old in versions[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def close(self):
        for client in self.clients:
            client.close()
