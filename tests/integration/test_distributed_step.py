"""One training step gives the same weights alone, under DDP and under FSDP2 (2 processes, gloo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _step(tmp_path: Path, procs: int, strategy: str, *flags: str) -> tuple[dict, dict]:
    out = tmp_path / f"{strategy}-{procs}-{abs(hash(flags))}.pt"
    # --standalone lets torchrun pick its own free rendezvous port (no race with a port chosen here)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}",
           str(REPO / "tests" / "helpers" / "one_train_step.py"), str(out), strategy, *flags]
    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return torch.load(out), json.loads(Path(str(out) + ".json").read_text())


@pytest.mark.parametrize("flags", [(), ("--use-lora", "--lora-rank", "4", "--lora-alpha", "8")], ids=["full", "lora"])
def test_single_ddp_and_fsdp2_steps_agree(tmp_path, tiny_model_path, flags):
    single, single_info = _step(tmp_path, 1, "auto", *flags)
    ddp, ddp_info = _step(tmp_path, 2, "ddp", *flags)
    fsdp, fsdp_info = _step(tmp_path, 2, "fsdp", *flags)
    assert (single_info["strategy"], ddp_info["strategy"], fsdp_info["strategy"]) == ("none", "ddp", "fsdp")
    assert single.keys() == ddp.keys() == fsdp.keys()
    for key in single:
        assert torch.allclose(single[key], ddp[key], atol=1e-6), key
        assert torch.allclose(single[key], fsdp[key], atol=1e-6), key
    for name in ("train/pg_loss", "train/grad_norm", "train/pg_clipfrac"):
        assert single_info["metrics"][name] == pytest.approx(ddp_info["metrics"][name], abs=1e-5), name
        assert single_info["metrics"][name] == pytest.approx(fsdp_info["metrics"][name], abs=1e-5), name
    assert single_info["metrics"]["train/pg_clipfrac"] > 0  # the step exercised clipping, not only the identity


def test_custom_loss_plugin_is_what_trains(tmp_path, tiny_model_path):
    """--loss-type custom_loss routes through the plugin: the built-in loss given as a plugin trains
    identically, and a plugin that scales the loss changes the step."""
    builtin, _ = _step(tmp_path, 1, "auto")
    plugin, info = _step(tmp_path, 1, "auto", "--loss-type", "custom_loss",
                         "--custom-loss-function-path", "slime.utils.loss.policy_loss_function")
    assert all(torch.equal(builtin[k], plugin[k]) for k in builtin)
    assert info["metrics"]["train/pg_loss"] != 0
