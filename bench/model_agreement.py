"""Engine and trainer on one real model (issue 38): do they agree, do both fine-tuning modes train it, do published
weights reach the engine, and what does a step cost.

    OMP_NUM_THREADS=1 python bench/model_agreement.py [--model qwen2.5-coder-0.5b] [--replies 8] [--max-new-tokens 48]

In one run, on the model prepared by name (slime.models.resolve_model_path):

1. a real engine process serves the model (float32); `--replies` chat prompts (short coding and shell questions, the
   settings' kind) are sampled at temperature 1 with their log-probabilities: generation tokens/s, one stream at a
   time and all at once;
2. the fsdp actor (single process, float32) computes the log-probabilities of the same tokens: max and mean
   |engine - trainer| over every sampled token (target: max < 0.02);
3. one PPO step with full fine-tuning and one with LoRA (rank 16) on those replies (advantages +-1): the step's time
   and the mean change of the replies' log-probabilities (each must move); the full step's weights are published
   (`export_hf` + the engine's update from disk) and the engine's log-probabilities afterwards must be the trainer's
   (the same max < 0.02).

Last line: ``RESULT model_agreement value=<max |delta log p| before training> target=<0.02 PASS|FAIL``; the published
check's gap is on the line before it (both must pass for PASS).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "slime"))

PROMPTS = [
    "Write a Python function that returns the sum of the even numbers in a list.",
    "How do I count the lines of every .log file in a directory with a shell command?",
    "Fix this function so it returns the largest value: def top(xs): return xs[0]",
    "Write a bash one-liner that prints the third column of data.csv.",
    "What does `git stash pop` do? Answer in one sentence.",
    "Write a Python function that reverses the words of a sentence.",
    "Give the command to find files larger than 10 MB under /var.",
    "Write a function that checks whether a string is a palindrome, ignoring case.",
]


def _gap(a: list[list[float]], b: list[list[float]]) -> tuple[float, float]:
    diffs = [abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return max(diffs), statistics.fmean(diffs)


def sample(client, tokenizer, n: int, max_new_tokens: int) -> tuple[list[dict], dict]:
    """n replies with their engine log-probabilities, one stream at a time, then all n at once (tokens/s of each)."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [tokenizer.apply_chat_template([{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                                           add_generation_prompt=True, tokenize=False) for i in range(n)]
    prompts = [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    params = {"max_new_tokens": max_new_tokens, "temperature": 1.0}

    def one(i):
        return client.generate(input_ids=prompts[i], sampling_params={**params, "seed": 1000 + i}, return_logprob=True)

    start = time.monotonic()
    outs = [one(i) for i in range(n)]
    serial = time.monotonic() - start
    start = time.monotonic()
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(one, range(n)))
    batched = time.monotonic() - start
    rows = []
    for prompt, out in zip(prompts, outs):
        response = list(out["output_ids"])
        rows.append({"tokens": prompt + response, "response_length": len(response), "loss_mask": [1] * len(response),
                     "rollout_log_probs": [lp for lp, *_ in out["meta_info"]["output_token_logprobs"]]})
    tokens = sum(r["response_length"] for r in rows)
    return rows, {"tokens": tokens, "one_stream_tok_s": tokens / serial, f"{n}_streams_tok_s": tokens / batched}


def actor_for(model_path: str, n: int, *flags: str):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed
    from slime.utils.arguments import parse_args

    dist = init_distributed("cpu")
    args = parse_args(["--hf-checkpoint", model_path, "--rollout-batch-size", str(n), "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-5", "--disable-rewards-normalization",
                       "--use-dynamic-batch-size", "--max-tokens-per-gpu", "2048", *flags],
                      world_size=dist.world_size)
    return FSDPActor(args, dist, model_path, AutoTokenizer.from_pretrained(model_path))


def train_once(actor, rows) -> dict:
    for i, (row, lp) in enumerate(zip(rows, actor.compute_log_probs(rows))):
        row["old_log_probs"] = lp
        row["advantages"] = [1.0 if i % 2 == 0 else -1.0] * row["response_length"]
    start = time.monotonic()
    metrics = actor.train_step(rows, len(rows))
    step_s = time.monotonic() - start
    after = actor.compute_log_probs(rows)
    moved = statistics.fmean(abs(a - b) for lp, row in zip(after, rows) for a, b in zip(lp, row["old_log_probs"]))
    return {"step_s": round(step_s, 1), "mean_logprob_change": moved, "grad_norm": metrics.get("train/grad_norm"),
            "after": after}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--replies", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, help="write the measurements here as JSON")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from slime.engine.client import EngineClient
    from slime.engine.launch import EngineProcess
    from slime.models import resolve_model_path

    torch.set_num_threads(1)
    path = str(resolve_model_path(args.model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    report: dict = {"model": args.model, "path": path}
    t0 = time.monotonic()
    with EngineProcess(path, log_path=Path("/tmp") / "model_agreement_engine.log", ready_timeout=600) as server, \
            EngineClient(server.url, timeout=1800.0) as client:
        report["engine_start_s"] = round(time.monotonic() - t0, 1)
        print(f"engine up in {report['engine_start_s']} s; sampling {args.replies} replies", flush=True)
        rows, speed = sample(client, tokenizer, args.replies, args.max_new_tokens)
        report.update(speed)
        print(f"generation: {speed}", flush=True)

        full = actor_for(path, len(rows))
        trainer = full.compute_log_probs(rows)
        report["max_gap"], report["mean_gap"] = _gap(trainer, [r["rollout_log_probs"] for r in rows])
        print(f"engine vs trainer: max |dlogp| {report['max_gap']:.5f}, mean {report['mean_gap']:.6f}", flush=True)

        result = train_once(full, rows)
        report["full"] = {k: v for k, v in result.items() if k != "after"}
        print(f"full fine-tuning step: {report['full']}", flush=True)
        published = full.export_hf(Path("/tmp") / "model_agreement_v1")
        client.update_weights_from_disk(str(published), weight_version=1)
        scored = [client.score(r["tokens"][:-r["response_length"]], r["tokens"][-r["response_length"]:]).logprobs
                  for r in rows]
        report["published_max_gap"], report["published_mean_gap"] = _gap(scored, result["after"])
        print(f"published weights, engine vs trainer: max {report['published_max_gap']:.5f}", flush=True)
        del full

        lora = actor_for(path, len(rows), "--use-lora", "--lora-rank", "16", "--lora-alpha", "32")
        result = train_once(lora, rows)
        report["lora"] = {k: v for k, v in result.items() if k != "after"}
        print(f"LoRA step: {report['lora']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    ok = report["max_gap"] < 0.02 and report["published_max_gap"] < 0.02
    ok = ok and report["full"]["mean_logprob_change"] > 0 and report["lora"]["mean_logprob_change"] > 0
    print(f"published: max |dlogp| {report['published_max_gap']:.5f} (target < 0.02)")
    print(f"RESULT model_agreement value={report['max_gap']:.5f} target=<0.02 {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
