"""What both training backends (`fsdp`, `megatron`) share: the learning-rate schedule, the choice of loss
function, the reference-model check, the metric sums of a step, and hard-linking exported weights into a checkpoint."""

from __future__ import annotations

import math
import os
from pathlib import Path

from slime.utils.loss import BUILT_IN_LOSSES
from slime.utils.ppo_utils import MaskedMetric

__all__ = ["accumulate_metrics", "average_metrics", "link_tree", "load_loss_function", "lr_lambda"]

_COUNT = "/__count__"  # the key suffix a MaskedMetric's count travels under in the sums


def lr_lambda(args, total_steps: int):
    """Warm-up then constant / linear / cosine decay to min_lr, as a multiplier of --lr."""
    warmup = args.lr_warmup_iters or int((args.lr_warmup_fraction or 0.0) * total_steps)
    decay_steps = max(1, (args.lr_decay_iters or total_steps) - warmup)
    floor = (args.min_lr / args.lr) if args.lr else 0.0

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if args.lr_decay_style == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / decay_steps)
        if args.lr_decay_style == "linear":
            return floor + (1 - floor) * (1 - progress)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def link_tree(source: Path, target: Path) -> None:
    """Hard-link every file of `source` into `target` (copy where linking is impossible): the published
    version folder may be pruned later, the checkpoint keeps its own links."""
    import shutil

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, dirs_exist_ok=True)


def load_loss_function(args):
    """The loss `--loss-type` names: a built-in one, or the `--custom-loss-function-path` plugin."""
    if args.loss_type != "custom_loss":
        return BUILT_IN_LOSSES[args.loss_type]
    loaded = getattr(args, "hooks", {}).get("custom_loss_function_path")
    if loaded is None:  # an actor built outside the training loop loads its plugin itself
        from slime.utils.hooks import load_function

        loaded = load_function(args.custom_loss_function_path, "--custom-loss-function-path")
    if getattr(args, "custom_loss_batch_layout", "slime") == "upstream":
        from slime.backends.upstream_batch import upstream_layout

        return upstream_layout(loaded)
    return loaded


def accumulate_metrics(sums: dict[str, float], metrics: dict) -> None:
    """Add one micro-batch's loss metrics to the step's running sums (a `MaskedMetric` adds its total and count)."""
    for key, value in metrics.items():
        if isinstance(value, MaskedMetric):
            sums[key] = sums.get(key, 0.0) + float(value.total)
            sums[key + _COUNT] = sums.get(key + _COUNT, 0.0) + float(value.count)
        else:
            sums[key] = sums.get(key, 0.0) + float(value)


def average_metrics(totals: dict[str, float], denominator: float) -> dict[str, float]:
    """`train/<key>` of a step from the sums of every micro-batch and rank: a plain metric divided by the loss's
    denominator (the global batch size, or its token count), a masked one by its own count (and left out of the
    step when nothing of the batch was in its subset)."""
    out: dict[str, float] = {}
    for key, value in totals.items():
        if key.endswith(_COUNT):
            continue
        if key + _COUNT in totals:
            count = totals[key + _COUNT]
            if count > 0:
                out[f"train/{key}"] = value / count
        else:
            out[f"train/{key}"] = value / max(denominator, 1.0)
    return out
