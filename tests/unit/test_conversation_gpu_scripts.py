"""The GPU launch scripts of the conversation methods: layout checks up front, a command line the trainer accepts,
and the method each one selects (rl / opd token-level / opd top-K / combine, full and LoRA)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(str(p.relative_to(REPO)) for folder in ("openclaw-rl", "openclaw-opd", "openclaw-combine")
                 for p in (REPO / folder).glob("run_qwen3_4b_*.sh"))


def _run(script: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("NUM_GPUS", "ACTOR_GPUS", "ROLLOUT_GPUS", "PRM_GPUS")}
    full.update({"DRY_RUN": "1", "HF_CKPT": "tiny", "OPENCLAW_PROXY_API_KEY": "k", "PATH": os.environ["PATH"]}, **env)
    return subprocess.run(["bash", script], cwd=REPO, env=full, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("script", SCRIPTS)
def test_dry_run_command_parses(script):
    done = _run(script)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    assert words[0] == "torchrun"
    argv = words[words.index("slime/train_async.py") + 1:]
    args = parse_args(argv, mode="async", world_size=1)
    assert args.prm_type == "llm" and args.prm_enable and args.rollout_batch_size == 16
    assert args.data_source_path == "slime.conversation.rollout.ConversationDataSource"
    assert args.use_lora == script.endswith("_lora.sh")
    name = Path(script).name
    # each script checkpoints to its own folder, named after it
    assert Path(args.save).name == name.removeprefix("run_").removesuffix(".sh").replace("_", "-")
    if "_rl" in name:
        assert args.conversation_method == "rl" and args.loss_type == "policy_loss"
        assert args.eps_clip == 0.2 and args.eps_clip_high == 0.28 and args.disable_rewards_normalization
    elif "topk" in name:
        assert args.conversation_method == "opd" and args.distill_topk == 50 and args.lr == 1e-6
        assert args.custom_loss_function_path.endswith("topk_distillation_loss_function")
        assert args.disable_compute_advantages_and_returns
    elif "opd" in name:
        assert args.conversation_method == "opd" and args.advantage_estimator == "on_policy_distillation"
    else:
        assert args.conversation_method == "combine" and args.disable_rewards_normalization
        assert args.custom_loss_function_path == "combine_loss.combine_loss_function"
        assert args.eps_clip_high == 0.28


@pytest.mark.parametrize("script", SCRIPTS)
def test_impossible_layouts_are_rejected(script):
    too_many = _run(script, NUM_GPUS="2", ACTOR_GPUS="2", ROLLOUT_GPUS="1", PRM_GPUS="1")
    assert too_many.returncode == 2 and "exceeds NUM_GPUS=2" in too_many.stderr
    assert _run(script, ACTOR_GPUS="x").returncode == 2
    no_key = _run(script, OPENCLAW_PROXY_API_KEY="")
    assert no_key.returncode == 2 and "OPENCLAW_PROXY_API_KEY" in no_key.stderr
