"""Does tool-call RL learn? SmolLM2-135M-Instruct on held-out maths problems, before and after RL, in one run.

    python bench/toolcall_learning.py [--heldout 200] [--sft-steps 75] [--rl-rollouts 24] [--lr 2e-5] [--base]
    python bench/toolcall_learning.py --model qwen2.5-coder-0.5b --lora-rank 16 --sft-lr 2e-4 --lr 4e-5
        --sft-plain-tokens '<tool_call>' '</tool_call>' [--heldout 40] [--rl-rollouts 8] [--resume]

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
none` (for a model that already calls its tool) stage 1 is skipped, the RL stage evaluates the base model before its
first step, and the value is RL's gain over the base model. Qwen2.5-Coder-0.5B-Instruct does not: on the first 40
held-out problems it called the tool in 10 % of the trajectories, 83 % had a parse error (a ```json block instead of
a `<tool_call>`), accuracy 0.025 (2026-12-02, 2,176 s), so it takes the warm start too. `--lora-rank` trains LoRA
adapters in both stages (merged into a full folder between them).

`--resume` reuses `--out`'s finished stages (their settings recorded in `stage_settings.json` and checked) and
continues an interrupted RL stage from its last checkpoint (every `--save-interval` rollouts); `timings.json` keeps
each stage's seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from learning_protocol import continue_flags, full_model, stage_done
from train_stages import REPO, eval_records, last_model, record_stage_settings, run_stage

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
    parser.add_argument("--save-interval", type=int, default=4, help="RL checkpoints (what --resume continues from)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "toolcall_learning")
    parser.add_argument("--resume", action="store_true",
                        help="reuse --out's finished stages (same settings) and continue RL from its last checkpoint")
    opts = parser.parse_args()
    lora = ["--use-lora", "--lora-rank", str(opts.lora_rank), "--lora-alpha", str(2 * opts.lora_rank)] \
        if opts.lora_rank else []

    if not opts.resume:
        shutil.rmtree(opts.out, ignore_errors=True)  # metrics.jsonl is appended to: start from empty folders
    opts.out.mkdir(parents=True, exist_ok=True)
    timings_path = opts.out / "timings.json"
    timings = json.loads(timings_path.read_text()) if opts.resume and timings_path.exists() else {}
    heldout = opts.out / "heldout.jsonl"
    heldout.write_text("".join((DATA / "heldout.jsonl").read_text().splitlines(keepends=True)[: opts.heldout]))
    traced = {json.loads(line)["id"] for line in (DATA / "sft_traces.jsonl").read_text().splitlines()}
    rl_problems = opts.out / "rl_problems.jsonl"
    rl_problems.write_text("".join(line for line in (DATA / "train.jsonl").read_text().splitlines(keepends=True)
                                   if json.loads(line)["id"] not in traced))
    shared_flags = ["--engine-threads", str(opts.engine_threads),
                    "--eval-prompt-data", "heldout", str(heldout), "--eval-temperature", "1.0",
                    "--eval-max-response-len", "256", "--eval-reward-key", "acc"]

    sft_settings = {"model": opts.model, "heldout": opts.heldout, "warm_start": opts.warm_start,
                    "sft_steps": opts.sft_steps, "sft_lr": opts.sft_lr, "base": opts.base, "lora_rank": opts.lora_rank,
                    "sft_plain_tokens": list(opts.sft_plain_tokens), "engine_threads": opts.engine_threads}
    if opts.warm_start == "sft":
        sft_dir = opts.out / "sft"
        if not stage_done(sft_dir, sft_settings, opts.resume):
            shutil.rmtree(sft_dir, ignore_errors=True)
            # the engine idles while SFT trains: the trainer gets both cores
            timings["sft"] = run_stage(
                "sft", "toolcall-rl/run_cpu_smollm2_toolcall_sft.sh",
                {"RUN_DIR": str(sft_dir), "NUM_ROLLOUT": str(opts.sft_steps), "EVAL": "1",
                 "EVAL_DATA": str(heldout), "OMP_NUM_THREADS": "2", "HF_CKPT": opts.model, "LR": str(opts.sft_lr)},
                [*shared_flags, *([] if opts.base else ["--skip-eval-before-train"]), *lora,
                 *(["--sft-plain-tokens", *opts.sft_plain_tokens] if opts.sft_plain_tokens else [])],
                opts.out / "sft.log")
            timings_path.write_text(json.dumps(timings, indent=1))
            record_stage_settings(sft_dir, sft_settings)
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
    rl_settings = {**sft_settings, "rl_rollouts": opts.rl_rollouts, "lr": opts.lr}
    if not stage_done(rl_dir, rl_settings, opts.resume):
        resume_flags = continue_flags(rl_dir, opts.resume)
        timings["rl"] = timings.get("rl", 0.0) + run_stage(
            "rl", "toolcall-rl/run_cpu_smollm2_toolcall.sh",
            {"RUN_DIR": str(rl_dir), "HF_CKPT": start_model, "PROMPT_DATA": str(rl_problems),
             "NUM_ROLLOUT": str(opts.rl_rollouts), "LR": str(opts.lr)},
            ["--eval-interval", str(opts.rl_rollouts), *shared_flags,
             *(["--skip-eval-before-train"] if warm is not None else []),
             "--save-interval", str(opts.save_interval), *lora, *resume_flags],
            opts.out / "rl.log")
        timings_path.write_text(json.dumps(timings, indent=1))
        record_stage_settings(rl_dir, rl_settings)
    sft_seconds, rl_seconds = timings.get("sft", 0.0), timings.get("rl", 0.0)
    # a resumed stage appends to metrics.jsonl: the evaluation after the last rollout is the last one logged, the
    # base model's (without a warm start) the first
    rl_evals = eval_records(rl_dir)
    if not rl_evals or rl_evals[-1]["eval/rollout_id"] != opts.rl_rollouts - 1 \
            or (warm is None and rl_evals[0]["eval/rollout_id"] != -1):
        raise SystemExit(f"{rl_dir}/metrics.jsonl lacks the evaluation after rollout {opts.rl_rollouts}"
                         + (" or the base model's before the first" if warm is None else ""))
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
