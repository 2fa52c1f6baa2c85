"""Checkpoint folders: `{save}/iter_{rollout_id+1:07d}/` plus `latest_checkpointed_iteration.txt`.

Inside: `model/` (HF safetensors loadable by `from_pretrained`, or a PEFT adapter), `optimizer.pt`
(optimizer, LR scheduler, step), `rng_rank{r}.pt` (torch, Python and NumPy generators of each rank),
`data_source.json` (prompt order and position), `meta.json` (rollout ids, weight version, world size).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch

from slime.backends.fsdp.parallel import barrier

TRACKER = "latest_checkpointed_iteration.txt"


def iteration_dir(save: str | Path, rollout_id: int) -> Path:
    return Path(save) / f"iter_{rollout_id + 1:07d}"


def save_checkpoint(save: str | Path, rollout_id: int, actor, dist, data_source_state: dict | None,
                    weight_version: int, exported: Path | None = None) -> Path:
    folder = iteration_dir(save, rollout_id)
    if dist.is_main:
        folder.mkdir(parents=True, exist_ok=True)
    barrier()
    actor.save_checkpoint(folder, exported)
    torch.save({"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()},
               folder / f"rng_rank{dist.rank}.pt")
    if dist.is_main:
        if data_source_state is not None:
            (folder / "data_source.json").write_text(json.dumps(data_source_state))
        meta = {"rollout_id": rollout_id, "next_rollout_id": rollout_id + 1, "global_step": actor.global_step,
                "weight_version": weight_version, "world_size": dist.world_size}
        (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    barrier()
    if dist.is_main:  # the tracker moves only once the folder is complete
        (Path(save) / TRACKER).write_text(folder.name)
    return folder


def resolve_load(load: str | Path | None) -> Path | None:
    """The iteration folder to resume from: `--load` may name the save root or an iteration folder."""
    if not load:
        return None
    root = Path(load)
    if (root / "meta.json").exists():
        return root
    tracker = root / TRACKER
    if not tracker.exists():
        raise FileNotFoundError(f"--load {root}: no {TRACKER} and no meta.json; nothing to resume from")
    return root / tracker.read_text().strip()


def load_meta(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text())


def restore_rng(folder: Path, rank: int):
    path = folder / f"rng_rank{rank}.pt"
    if not path.exists():
        raise FileNotFoundError(f"{path} missing: was the checkpoint written with a different world size?")
    state = torch.load(path, weights_only=False)
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def load_data_source_state(folder: Path) -> dict | None:
    path = folder / "data_source.json"
    return json.loads(path.read_text()) if path.exists() else None
