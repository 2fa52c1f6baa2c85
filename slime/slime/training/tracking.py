"""Training logs: a console line per step, TensorBoard always, Weights & Biases when asked (offline works)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

# (metric key, console label, format)
_CONSOLE = [
    ("rollout/raw_reward", "reward", "{:.3f}"),
    ("rollout/raw_reward_std", "±", "{:.3f}"),
    ("train/loss", "loss", "{:+.4f}"),
    ("train/pg_loss", "pg", "{:+.4f}"),
    ("train/pg_clipfrac", "clip", "{:.3f}"),
    ("train/kl_loss", "kl", "{:.4f}"),
    ("train/entropy_loss", "ent", "{:.3f}"),
    ("train/grad_norm", "gnorm", "{:.3f}"),
    ("train/lr", "lr", "{:.2e}"),
    ("perf/train_tokens_per_s", "tok/s", "{:.0f}"),
    ("rollout/staleness", "stale", "{:.2f}"),
    ("train/train_rollout_logprob_abs_diff", "|Δlogp|", "{:.4f}"),
]


def console_line(step: int, total: int, metrics: dict) -> str:
    parts = [f"step {step}/{total}"]
    for key, label, fmt in _CONSOLE:
        if key in metrics:
            value = fmt.format(metrics[key])
            parts.append(f"{label} {value}" if label != "±" else f"± {value}")
    return " | ".join(parts).replace(" | ± ", " ± ")


class Tracker:
    """Only the main rank writes; the others get a tracker that does nothing."""

    def __init__(self, args, run_dir: Path, enabled: bool):
        self.enabled = enabled
        self.tb = None
        self.wandb = None
        self.jsonl = None
        if not enabled:
            return
        # one JSON object per optimizer step: the plain-text record scripts and tests read
        self.jsonl = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
        if getattr(args, "use_tensorboard", True):
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(Path(args.tb_dir) if getattr(args, "tb_dir", None) else run_dir / "tensorboard"))
        if getattr(args, "use_wandb", False):
            import wandb

            mode = getattr(args, "wandb_mode", None) or os.environ.get("WANDB_MODE") or "online"
            if getattr(args, "wandb_key", None) and mode == "online":
                wandb.login(key=args.wandb_key)
            self.wandb = wandb.init(project=args.wandb_project or "slime", group=getattr(args, "wandb_group", None),
                                    dir=str(getattr(args, "wandb_dir", None) or run_dir), mode=mode,
                                    config={k: v for k, v in vars(args).items() if _plain(v)})

    def log(self, metrics: dict, step: int):
        if not self.enabled:
            return
        scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        self.jsonl.write(json.dumps({"step": step, **scalars}) + "\n")
        self.jsonl.flush()
        if self.tb is not None:
            for key, value in scalars.items():
                self.tb.add_scalar(key, value, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log({**scalars, "train/step": step}, step=step)

    def close(self):
        if self.jsonl is not None:
            self.jsonl.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _plain(value) -> bool:
    return isinstance(value, (int, float, str, bool, list, tuple)) or value is None
