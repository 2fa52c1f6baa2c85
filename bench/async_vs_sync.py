"""Wall time of N rollouts with `slime/train.py` (synchronous) vs `slime/train_async.py` (one-step overlap).

Both runs are real `torchrun` jobs (`python -m torch.distributed.run`, this interpreter's torch) with the same
flags, seed and prompt file, started one after the other (never concurrently), each with its own --run-dir
under runs/bench/async_vs_sync/ and its own free --master-port. The measured quantity is the training loop's
wall time, read from the runs' own metrics: the sum of `perf/step_time` over the rollouts. In async mode the
first step's time includes generating rollout 0 (started just before the loop), so the sum covers the whole
loop in both modes. Process start-up (imports, model load, engine start) is excluded from that number but
shown as the total subprocess wall time.

    python bench/async_vs_sync.py [--num-rollout 8] [--nproc-per-node 1] [--repeats 1] [-- extra trainer flags]

Why these defaults (2-core CPU, one torch thread per process):
* Overlap can only help when generation (the engine process) and training take comparable time. The defaults
  use SmolLM2-135M-Instruct (`--hf-checkpoint smollm2`) on a tiny story prompt set written by the bench
  ("Write a short story about <topic>.", reward 1 if the story uses a topic keyword), 2 prompts x 4 samples
  per rollout, 96 new tokens: generating one rollout and training on it each take ~13 s here.
  Generation time grows with the response length (decoding a handful of sequences is bound by reading the
  weights once per token), training time with the number of tokens, so few samples with long responses
  balance the two.
* Stories are longer than 96 tokens, so nearly every response is truncated and both runs do the same work
  whatever the policy samples (the table shows samples, mean response length and truncated share per run).
* `--nproc-per-node 1`: the embedded engine is a separate process with one thread, so with one trainer rank
  engine and trainer each get one of the two cores while they overlap. With 2 trainer ranks, sync mode
  trains on 2 cores but async mode runs 3 busy processes on 2 cores, so the best possible speed-up is
  (2G + T) / (G + T) (<= 1.5 when G = T; G = generation, T = training core-seconds) against
  (G + T) / max(G, T) (<= 2) with one rank; on a machine with a core per process use --nproc-per-node 2.
* Not the tiny digit policy: with 2-token answers the engine does almost nothing and a rollout's time is the
  rollout client's own Python work (HTTP requests through httpx) in a thread of rank 0, which then competes
  for rank 0's GIL with training; async is no faster there (`--hf-checkpoint tiny-digits --prompt-set digits
  --rollout-batch-size 16 --lr 1e-3`).

Ends with one line `RESULT async_vs_sync value=<sync loop time / async loop time> target=>=1.3 PASS|FAIL`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 1.3  # fixed: async must finish the same rollouts at least 1.3x faster than sync
REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "runs" / "bench" / "async_vs_sync"
SCRIPTS = {"sync": REPO / "slime" / "train.py", "async": REPO / "slime" / "train_async.py"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# (topic, keyword): "Write a short story about <topic>." with reward 1 when the story uses the keyword.
STORY_TOPICS = [("a cat who learns to swim", "water"), ("the history of bread", "flour"),
                ("a lighthouse keeper", "storm"), ("how rain forms", "cloud"), ("a robot gardener", "flower"),
                ("the first day of school", "teacher"), ("a trip to the mountains", "snow"),
                ("a lost umbrella", "rain"), ("an old clock", "time"), ("a market at dawn", "fruit"),
                ("a chess tournament", "king"), ("the moon landing", "earth")]


def ensure_prompts(prompt_set: str) -> tuple[Path, str]:
    """The bench's own prompt file (written once under runs/bench/async_vs_sync/) and its reward hook."""
    if prompt_set == "digits":
        path = OUT / "digits_prompts.jsonl"
        if not path.exists():
            from slime.tasks.digits import make_prompts

            make_prompts(2000, 0, path)
        return path, "slime.tasks.digits.reward"
    path = OUT / "story_prompts.jsonl"
    if not path.exists():
        path.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"Write a short story about {t}."}],
                                            "label": k}) + "\n" for t, k in STORY_TOPICS * 20))
    return path, "bench.async_vs_sync.keyword_reward"


async def keyword_reward(args, sample, **kwargs):
    """Reward of the story prompts (loaded by the trainer as `bench.async_vs_sync.keyword_reward`)."""
    if isinstance(sample, list):
        return [await keyword_reward(args, s) for s in sample]
    return 1.0 if str(sample.label).lower() in (sample.response or "").lower() else 0.0


def trainer_flags(opts, prompt_file: Path, reward: str) -> list[str]:
    flags = ["--hf-checkpoint", opts.hf_checkpoint, "--prompt-data", str(prompt_file), "--apply-chat-template",
             "--rollout-batch-size", str(opts.rollout_batch_size),
             "--n-samples-per-prompt", str(opts.n_samples_per_prompt),
             "--num-rollout", str(opts.num_rollout),
             "--rollout-max-response-len", str(opts.rollout_max_response_len),
             "--rollout-temperature", "1.0", "--lr", str(opts.lr), "--seed", str(opts.seed),
             "--micro-batch-size", str(opts.micro_batch_size)]
    if opts.num_steps_per_rollout:
        flags += ["--num-steps-per-rollout", str(opts.num_steps_per_rollout)]
    flags += ["--custom-rm-path", opts.custom_rm_path or reward]
    if opts.max_tokens_per_gpu:
        flags += ["--use-dynamic-batch-size", "--max-tokens-per-gpu", str(opts.max_tokens_per_gpu)]
    return flags + list(opts.extra)


def run_one(mode: str, tag: str, opts, flags: list[str]) -> dict:
    run_dir = OUT / tag
    shutil.rmtree(run_dir, ignore_errors=True)  # metrics.jsonl is appended to: start from an empty folder
    run_dir.mkdir(parents=True)
    port = free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(opts.nproc_per_node),
           "--master_port", str(port), str(SCRIPTS[mode]), *flags, "--run-dir", str(run_dir.relative_to(REPO))]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log_path = run_dir / "console.log"
    print(f"[{tag}] {' '.join(cmd[1:4])} ... {SCRIPTS[mode].relative_to(REPO)} (log: "
          f"{log_path.relative_to(REPO)})", flush=True)
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        raise SystemExit(f"[{tag}] exited with {proc.returncode}; last lines of {log_path}:\n" + "\n".join(tail))
    rows = [json.loads(line) for line in open(run_dir / "metrics.jsonl", encoding="utf-8") if line.strip()]
    per_rollout = [r for r in rows if "perf/step_time" in r]  # the last optimizer step of each rollout
    if len(per_rollout) != opts.num_rollout:
        raise SystemExit(f"[{tag}] {len(per_rollout)} rollouts in {run_dir}/metrics.jsonl, expected {opts.num_rollout}")

    def mean(key):
        values = [r[key] for r in per_rollout if key in r]
        return statistics.fmean(values) if values else float("nan")

    return {
        "mode": mode, "tag": tag, "wall": wall, "loop": sum(r["perf/step_time"] for r in per_rollout),
        "step": mean("perf/step_time"), "rollout": mean("perf/rollout_time"), "train": mean("perf/train_time"),
        "publish": mean("perf/update_weights_time"), "samples": sum(r.get("rollout/samples", 0) for r in per_rollout),
        "resp_len": mean("rollout/response_len/mean"), "truncated": mean("rollout/truncated_ratio"), "stale": mean("rollout/staleness"),
        "reward_first": per_rollout[0].get("rollout/raw_reward", float("nan")),
        "reward_last": per_rollout[-1].get("rollout/raw_reward", float("nan")),
    }


def print_table(results: list[dict]):
    head = (f"{'run':<9}{'loop s':>8}{'wall s':>8}{'step s':>8}{'gen s':>7}{'train s':>8}{'publish s':>10}"
            f"{'samples':>8}{'resp len':>9}{'trunc':>6}{'stale':>6}{'reward 1st→last':>17}")
    print(head)
    print("-" * len(head))
    for r in results:
        print(f"{r['tag']:<9}{r['loop']:>8.1f}{r['wall']:>8.1f}{r['step']:>8.2f}{r['rollout']:>7.2f}{r['train']:>8.2f}"
              f"{r['publish']:>10.2f}{int(r['samples']):>8d}{r['resp_len']:>9.2f}{r['truncated']:>6.2f}{r['stale']:>6.2f}"
              f"{r['reward_first']:>9.3f}→{r['reward_last']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-rollout", type=int, default=8)
    parser.add_argument("--nproc-per-node", type=int, default=1, help="trainer ranks (see the module docstring)")
    parser.add_argument("--hf-checkpoint", default="smollm2")
    parser.add_argument("--prompt-set", choices=["stories", "digits"], default="stories",
                        help="prompt file the bench writes under runs/bench/async_vs_sync/ (and its reward)")
    parser.add_argument("--prompt-data", type=Path, default=None, help="use this prompt file instead")
    parser.add_argument("--custom-rm-path", default=None, help="default: the --prompt-set's reward")
    parser.add_argument("--max-tokens-per-gpu", type=int, default=None,
                        help="turn on --use-dynamic-batch-size with this token budget per micro-batch")
    parser.add_argument("--rollout-batch-size", type=int, default=2)
    parser.add_argument("--n-samples-per-prompt", type=int, default=4)
    parser.add_argument("--num-steps-per-rollout", type=int, default=None)
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--rollout-max-response-len", type=int, default=96)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1,
                        help="sync/async pairs; odd-numbered pairs run async first; the medians are compared")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="after `--`: more trainer flags for both runs")
    opts = parser.parse_args()
    if opts.extra and opts.extra[0] == "--":
        opts.extra = opts.extra[1:]

    from slime.models import resolve_model_path

    resolve_model_path(opts.hf_checkpoint)  # build/convert once here, so neither timed run pays for it
    OUT.mkdir(parents=True, exist_ok=True)
    prompt_file, reward = ensure_prompts(opts.prompt_set)
    flags = trainer_flags(opts, opts.prompt_data or prompt_file, reward)
    print(f"{opts.num_rollout} rollouts x {opts.rollout_batch_size} prompts x {opts.n_samples_per_prompt} samples, "
          f"{opts.hf_checkpoint}, {opts.nproc_per_node} trainer rank(s) + 1 engine process, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}, {os.cpu_count()} CPUs", flush=True)
    print("trainer flags: " + " ".join(flags), flush=True)

    results = []
    for i in range(opts.repeats):
        order = ("async", "sync") if i % 2 else ("sync", "async")
        for mode in order:
            tag = mode if opts.repeats == 1 else f"{mode}{i + 1}"
            results.append(run_one(mode, tag, opts, flags))
    print()
    print_table(results)
    sync = statistics.median(r["loop"] for r in results if r["mode"] == "sync")
    async_ = statistics.median(r["loop"] for r in results if r["mode"] == "async")
    sync_wall = statistics.median(r["wall"] for r in results if r["mode"] == "sync")
    async_wall = statistics.median(r["wall"] for r in results if r["mode"] == "async")
    print(f"\nloop time (sum of perf/step_time): sync {sync:.1f} s, async {async_:.1f} s -> {sync / async_:.2f}x; "
          f"total subprocess wall: sync {sync_wall:.1f} s, async {async_wall:.1f} s -> {sync_wall / async_wall:.2f}x")
    ratio = sync / async_
    print(f"RESULT async_vs_sync value={ratio:.2f} target=>={TARGET} {'PASS' if ratio >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
