"""Does tool-call RL learn? SmolLM2-135M-Instruct on held-out maths problems, before and after RL, in one run.

    python bench/toolcall_learning.py [--heldout 200] [--sft-steps 75] [--rl-rollouts 24] [--lr 2e-5] [--base]
    python bench/toolcall_learning.py --model qwen2.5-coder-0.5b --warm-start none --lora-rank 16 --lr 4e-5

Two stages, each the setting's own CPU script as a user runs it (real `slime/train*.py` processes, the embedded
engine, the bubblewrap sandbox), evaluated through the tool-call loop itself (`--eval-interval`: one trajectory
per problem sampled at the RL temperature 1.0, so a policy that calls its tool on 60 % of the problems scores
as such rather than as its greedy choice; at most 4 turns of 256 tokens; the first `--heldout` problems of
`toolcall-rl/data/heldout.jsonl`):

1. **SFT warm start** (`toolcall-rl/run_cpu_smollm2_toolcall_sft.sh`): `--sft-steps` steps of 8 verified traces at `--sft-lr`
   from `toolcall-rl/data/sft_traces.jsonl` (half call the interpreter, half answer directly). Evaluated after
   (the warm start) and, with `--base`, before (the base model: it rambles to the length cap, so that evaluation
   alone takes about 15 minutes on 200 problems). SmolLM2 as shipped answers nothing right here (0 of 40 greedy,
   no parseable call), so RL from it would have no reward variance to learn from; upstream starts its ReTool RL
   from an SFT checkpoint too.
2. **RL** (`toolcall-rl/run_cpu_smollm2_toolcall.sh`) from the warm start: `--rl-rollouts` rollouts of 4 problems x
   4 samples, GRPO, the ReTool reward, on training problems that are not in the SFT traces. Evaluated after the last
   step; the warm start's evaluation (the end of stage 1, the same weights) is its "before".

The line before the result gives, for the base model, the warm start and the RL policy: held-out accuracy,
tool-call rate (trajectories with at least one call), parse-error rate (trajectories with an action the loop could
not parse) and answered rate. Last line:
`RESULT toolcall_learning value=<accuracy after RL - accuracy of the warm start> target=>=0.15 PASS|FAIL`
(RL's own gain; the warm start's gain over the base model is printed separately, not counted). With `--warm-start
none` (a model that already calls its tool, as issue 38 asks of Qwen2.5-Coder-0.5B) stage 1 is skipped, the RL stage
evaluates the base model before its first step, and the value is RL's gain over the base model. `--lora-rank` trains
LoRA adapters in both stages (merged into a full folder between them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from learning_protocol import full_model
from train_stages import REPO, eval_records, last_model, run_stage

sys.path.insert(0, str(REPO / "slime"))  # full_model merges a LoRA adapter with the framework's own code
TARGET = 0.15
DATA = REPO / "toolcall-rl" / "data"
KEYS = ("acc", "tool_call", "parse_error", "answered")


def _summary(record: dict, name: str = "heldout") -> dict:
    return {key: float(record[f"eval/{name}/{key}"]) for key in KEYS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heldout", type=int, default=200, help="held-out problems evaluated (first N)")
    parser.add_argument("--sft-steps", type=int, default=75, help="75 x 8 = one pass over the 600 traces")
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--base", action="store_true", help="also evaluate the base model before SFT")
    parser.add_argument("--model", default="smollm2", help="the base model (tiny: a quick smoke run of the bench)")
    parser.add_argument("--rl-rollouts", type=int, default=24)
    parser.add_argument("--lr", type=float, default=2e-5, help="RL learning rate")
    parser.add_argument("--warm-start", choices=["sft", "none"], default="sft",
                        help="none: RL from the base model (for a model that already calls its tool), the base "
                             "evaluated before the first step")
    parser.add_argument("--lora-rank", type=int, default=0, help="LoRA rank of both stages (0: full fine-tuning)")
    parser.add_argument("--sft-plain-tokens", nargs="*", default=[], metavar="TEXT",
                        help="added tokens the warm start trains as ordinary text (Qwen2.5-Coder's <tool_call> "
                             "</tool_call>: their rows are untrained; slime/rollout/sft_rollout.py)")
    parser.add_argument("--engine-threads", type=int, default=2,
                        help="the engine's threads (it generates while the trainer waits: both cores)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "toolcall_learning")
    opts = parser.parse_args()
    lora = ["--use-lora", "--lora-rank", str(opts.lora_rank), "--lora-alpha", str(2 * opts.lora_rank)] \
        if opts.lora_rank else []

    shutil.rmtree(opts.out, ignore_errors=True)  # metrics.jsonl is appended to: start from empty folders
    opts.out.mkdir(parents=True)
    heldout = opts.out / "heldout.jsonl"
    heldout.write_text("".join((DATA / "heldout.jsonl").read_text().splitlines(keepends=True)[: opts.heldout]))
    traced = {json.loads(line)["id"] for line in (DATA / "sft_traces.jsonl").read_text().splitlines()}
    rl_problems = opts.out / "rl_problems.jsonl"
    rl_problems.write_text("".join(line for line in (DATA / "train.jsonl").read_text().splitlines(keepends=True)
                                   if json.loads(line)["id"] not in traced))
    shared_flags = ["--engine-threads", str(opts.engine_threads),
                    "--eval-prompt-data", "heldout", str(heldout), "--eval-temperature", "1.0",
                    "--eval-max-response-len", "256", "--eval-reward-key", "acc"]

    sft_seconds = 0.0
    if opts.warm_start == "sft":
        sft_dir = opts.out / "sft"
        # the engine idles while SFT trains: the trainer gets both cores
        sft_seconds = run_stage("sft", "toolcall-rl/run_cpu_smollm2_toolcall_sft.sh",
                                {"RUN_DIR": str(sft_dir), "NUM_ROLLOUT": str(opts.sft_steps), "EVAL": "1",
                                 "EVAL_DATA": str(heldout), "OMP_NUM_THREADS": "2", "HF_CKPT": opts.model,
                                 "LR": str(opts.sft_lr)},
                                [*shared_flags, *([] if opts.base else ["--skip-eval-before-train"]), *lora,
                                 *(["--sft-plain-tokens", *opts.sft_plain_tokens] if opts.sft_plain_tokens else [])],
                                opts.out / "sft.log")
        sft_evals = eval_records(sft_dir)
        if len(sft_evals) != 1 + opts.base:
            raise SystemExit(f"expected {1 + opts.base} evaluation(s) in {sft_dir}/metrics.jsonl, found "
                             f"{len(sft_evals)}")
        base, warm = (_summary(sft_evals[0]) if opts.base else None), _summary(sft_evals[-1])
        start_model = str(full_model(sft_dir / "ckpt", opts.model) if opts.lora_rank else last_model(sft_dir / "ckpt"))
    else:
        base = warm = None  # the base model is RL's "before": evaluated by the RL stage before its first step
        start_model = opts.model

    rl_dir = opts.out / "rl"
    rl_seconds = run_stage("rl", "toolcall-rl/run_cpu_smollm2_toolcall.sh",
                           {"RUN_DIR": str(rl_dir), "HF_CKPT": start_model, "PROMPT_DATA": str(rl_problems),
                            "NUM_ROLLOUT": str(opts.rl_rollouts), "LR": str(opts.lr)},
                           ["--eval-interval", str(opts.rl_rollouts), *shared_flags,
                            *(["--skip-eval-before-train"] if warm is not None else []),
                            "--save-interval", str(opts.rl_rollouts), *lora],
                           opts.out / "rl.log")
    rl_evals = eval_records(rl_dir)
    if len(rl_evals) != 1 + (warm is None):
        raise SystemExit(f"expected {1 + (warm is None)} evaluation(s) in {rl_dir}/metrics.jsonl, found "
                         f"{len(rl_evals)}")
    if warm is None:
        base = warm = _summary(rl_evals[0])
    trained = _summary(rl_evals[-1])

    print(f"{'policy':<12} {'accuracy':>9} {'tool call':>10} {'parse err':>10} {'answered':>9}")
    policies = (("base", base), ("RL", trained)) if opts.warm_start == "none" else \
        (("base", base), ("warm start", warm), ("RL", trained))
    for name, row in policies:
        if row is not None:
            print(f"{name:<12} {row['acc']:>9.3f} {row['tool_call']:>10.3f} {row['parse_error']:>10.3f} "
                  f"{row['answered']:>9.3f}")
    gain = trained["acc"] - warm["acc"]
    base_text = (f"base accuracy {base['acc']:.3f} (tool calls {base['tool_call']:.3f}, parse errors "
                 f"{base['parse_error']:.3f}), " if base else "")
    start = "no warm start: the base model" if opts.warm_start == "none" else \
        f"warm start (SFT, {opts.sft_steps} steps, {sft_seconds:.0f} s)"
    print(f"held-out n={opts.heldout}, {opts.model}: {'' if opts.warm_start == 'none' else base_text}{start} "
          f"accuracy {warm['acc']:.3f} -> after RL ({opts.rl_rollouts} rollouts, {rl_seconds:.0f} s) "
          f"{trained['acc']:.3f}; tool-call rate {warm['tool_call']:.3f} -> {trained['tool_call']:.3f}; "
          f"parse-error rate {warm['parse_error']:.3f} -> {trained['parse_error']:.3f}; answered "
          f"{warm['answered']:.3f} -> {trained['answered']:.3f}")
    print(f"RESULT toolcall_learning value={gain:.3f} target=>={TARGET} {'PASS' if gain >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
