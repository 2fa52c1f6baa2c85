"""What one LoRA training step costs on a CPU, over every layer and over the top layers only, on rows the size of an
agentic step sample (a GUI step with the compact prompt: ~570 prompt tokens, ~40 response tokens).

    OMP_NUM_THREADS=1 python bench/lora_step_cost.py [--model qwen2.5-coder-0.5b] [--rows 8] [--prompt-len 530]
        [--response-len 40] [--top-layers 8] [--threads 2]

Both steps run the fsdp actor as the trainer does (PPO on +-1 advantages, the same rows, the same seed, LoRA rank 16),
one after the other in this process: the baseline is LoRA on every layer, then `--lora-top-layers N`. With adapters on
the top N of L layers only, autograd records nothing below the lowest adapted layer, so the backward pass stops there:
the forward is the same, the backward about N/L of it. Printed per run: the step's seconds, tokens per second, and how
far the step moved the rows' log-probabilities (a smaller update space moves them less at the same learning rate).

Last line: `RESULT lora_top_layers_speedup value=<all-layer step s / top-layer step s> target=>=1.5 PASS|FAIL`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "slime"))
TARGET = 1.5


def rows_for(vocab: int, n: int, prompt_len: int, response_len: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        p = prompt_len + rng.randint(-prompt_len // 5, prompt_len // 5)
        tokens = [rng.randrange(vocab) for _ in range(p + response_len)]
        rows.append({"tokens": tokens, "response_length": response_len, "loss_mask": [1] * response_len,
                     "advantages": [1.0 if i % 2 == 0 else -1.0] * response_len, "rollout_log_probs": None})
    return rows


def one_step(model_path: str, rows: list[dict], flags: list[str]) -> dict:
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed
    from slime.utils.arguments import parse_args

    dist = init_distributed("cpu")
    args = parse_args(["--hf-checkpoint", model_path, "--rollout-batch-size", str(len(rows)), "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "4e-5", "--disable-rewards-normalization",
                       "--use-lora", "--lora-rank", "16", "--lora-alpha", "32", *flags], world_size=dist.world_size)
    actor = FSDPActor(args, dist, model_path, AutoTokenizer.from_pretrained(model_path))
    rows = [dict(r) for r in rows]
    for row, lp in zip(rows, actor.compute_log_probs(rows)):
        row["old_log_probs"] = lp
    start = time.monotonic()
    actor.train_step(rows, len(rows))
    seconds = time.monotonic() - start
    after = actor.compute_log_probs(rows)
    moved = statistics.fmean(abs(a - b) for lp, row in zip(after, rows) for a, b in zip(lp, row["old_log_probs"]))
    trainable = sum(p.numel() for p in actor.hf_model.parameters() if p.requires_grad)
    tokens = sum(len(r["tokens"]) for r in rows)
    return {"step_s": seconds, "tokens_per_s": tokens / seconds, "mean_logprob_change": moved,
            "trainable_params": trainable}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=530)
    parser.add_argument("--response-len", type=int, default=40)
    parser.add_argument("--top-layers", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the trainer (a CPU script's SFT: 2)")
    opts = parser.parse_args()

    import torch
    from transformers import AutoConfig

    from slime.models import resolve_model_path

    torch.set_num_threads(opts.threads)
    path = str(resolve_model_path(opts.model))
    config = AutoConfig.from_pretrained(path)
    layers = int(getattr(config, "text_config", config).num_hidden_layers)
    rows = rows_for(int(config.vocab_size), opts.rows, opts.prompt_len, opts.response_len)
    print(f"{opts.model}: {layers} layers; {opts.rows} rows, {sum(len(r['tokens']) for r in rows)} tokens, "
          f"{opts.threads} thread(s)", flush=True)
    runs = {}
    for name, flags in (("all layers", []), (f"top {opts.top_layers}", ["--lora-top-layers", str(opts.top_layers)])):
        runs[name] = one_step(path, rows, flags)
        r = runs[name]
        print(f"LoRA on {name}: step {r['step_s']:.1f} s ({r['tokens_per_s']:.1f} tokens/s), "
              f"{r['trainable_params']} trainable parameters, mean |d log p| {r['mean_logprob_change']:.4f}",
              flush=True)
    base, top = runs["all layers"], runs[f"top {opts.top_layers}"]
    speedup = base["step_s"] / top["step_s"]
    print(f"RESULT lora_top_layers_speedup value={speedup:.2f} target=>={TARGET} "
          f"{'PASS' if speedup >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
