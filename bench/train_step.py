"""Training-step throughput of the `fsdp` backend vs a minimal plain-PyTorch loop on the same batch.

Both compute the same objective (PPO clipped surrogate on temperature-scaled log-probs, sample-mean
aggregation over the global batch) on the same padded batch, with AdamW and gradient clipping, in one
process. The plain loop is the floor a framework cannot beat; the ratio shows what our machinery
(micro-batching by token budget, response alignment, metric reduction) costs.

    python bench/train_step.py [--model-path smollm2] [--samples 8] [--steps 5]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

import torch


def make_rows(tokenizer, n: int, prompt_len: int, response_len: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    vocab = len(tokenizer)
    rows = []
    for i in range(n):
        p, r = prompt_len + rng.randint(-8, 8), response_len + rng.randint(-8, 8)
        tokens = [rng.randrange(vocab) for _ in range(p + r)]
        rows.append({"tokens": tokens, "response_length": r, "loss_mask": [1] * r,
                     "advantages": [rng.choice([-1.0, 1.0])] * r,
                     "old_log_probs": [0.0] * r, "rollout_log_probs": None})
    return rows


def framework_args(model_path: str, samples: int, max_tokens: int):
    from slime.utils.arguments import parse_args

    return parse_args(["--hf-checkpoint", model_path, "--rollout-batch-size", str(samples), "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-6", "--rollout-temperature", "0.7",
                       "--use-dynamic-batch-size", "--max-tokens-per-gpu", str(max_tokens)])


def plain_loop_step(model, optimizer, rows, pad_id: int, temperature: float, eps: float = 0.2) -> int:
    """The same objective written the shortest way: one padded batch, one backward."""
    longest = max(len(r["tokens"]) for r in rows)
    ids = torch.full((len(rows), longest), pad_id)
    attn = torch.zeros_like(ids)
    for b, r in enumerate(rows):
        ids[b, : len(r["tokens"])] = torch.tensor(r["tokens"])
        attn[b, : len(r["tokens"])] = 1
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits.float() / temperature
    loss = 0.0
    for b, r in enumerate(rows):
        n, k = len(r["tokens"]), r["response_length"]
        lp = torch.log_softmax(logits[b, n - k - 1 : n - 1], -1).gather(-1, ids[b, n - k : n, None]).squeeze(-1)
        ratio = torch.exp(lp - torch.tensor(r["old_log_probs"]))
        adv = torch.tensor(r["advantages"])
        per_token = torch.maximum(-ratio * adv, -ratio.clamp(1 - eps, 1 + eps) * adv)
        loss = loss + per_token.mean()
    (loss / len(rows)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return int(attn.sum())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default="smollm2")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=48)
    parser.add_argument("--response-len", type=int, default=48)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--target", type=float, default=0.9)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed
    from slime.models import resolve_model_path

    model_path = str(resolve_model_path(opts.model_path))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    rows = make_rows(tokenizer, opts.samples, opts.prompt_len, opts.response_len, seed=0)
    budget = opts.samples * (opts.prompt_len + opts.response_len + 16)  # the whole batch in one micro-batch
    args = framework_args(model_path, opts.samples, budget)
    dist = init_distributed("cpu")
    print(f"model {os.path.basename(model_path)}, {opts.samples} samples of ~{opts.prompt_len}+{opts.response_len} "
          f"tokens, {opts.steps} timed steps, {opts.threads} thread(s)", flush=True)

    actor = FSDPActor(args, dist, model_path, tokenizer)
    actor.train_step(rows, args.global_batch_size)  # warm-up
    tokens, started = 0, time.perf_counter()
    for _ in range(opts.steps):
        actor.train_step(rows, args.global_batch_size)
        tokens += sum(len(r["tokens"]) for r in rows)
    ours = tokens / (time.perf_counter() - started)
    del actor

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0)
    plain_loop_step(model, optimizer, rows, tokenizer.pad_token_id or 0, 0.7)  # warm-up
    tokens, started = 0, time.perf_counter()
    for _ in range(opts.steps):
        tokens += plain_loop_step(model, optimizer, rows, tokenizer.pad_token_id or 0, 0.7)
    plain = tokens / (time.perf_counter() - started)

    ratio = ours / plain
    print(f"framework train_step: {ours:.0f} tokens/s", flush=True)
    print(f"plain PyTorch loop:   {plain:.0f} tokens/s", flush=True)
    print(f"RESULT train_step value={ratio:.2f} target=>={opts.target} {'PASS' if ratio >= opts.target else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
