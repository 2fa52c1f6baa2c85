"""Does terminal RL learn? SmolLM2-135M-Instruct on held-out shell tasks, success before and after RL, in one run.

    OMP_NUM_THREADS=1 python bench/terminal_learning.py [--sft-steps 32] [--rl-rollouts 16] [--lr 1e-5]
        [--eval-samples 4] [--base] [--model smollm2]

SmolLM2 as shipped writes no tool call at all (0 in 3 episodes, terminal-rl/README.md), so RL from it has no
reward to learn from. As in `toolcall_learning.py` (and upstream, whose agentic RL starts from an SFT checkpoint)
there are two stages, each the setting's own CPU script as a user runs it (real `slime/train*.py` processes, the
embedded engine, the environment service's pool server, tmux shells in the bubblewrap sandbox), evaluated through
the terminal turn loop itself on the 9 held-out tasks of `terminal-rl/data/heldout.jsonl` (tasks that no
demonstration and no RL prompt uses), `--eval-samples` episodes per task at temperature 1.0 (the RL temperature,
so a policy that solves a task half the time scores as such), at most `--max-steps` turns:

1. **SFT warm start** (`terminal-rl/run_cpu_smollm2_terminal_sft.sh`): `--sft-steps` steps of 8 verified
   demonstration turns (`terminal-rl/data/sft_demos.jsonl`: the 28 training tasks solved through the real service
   and tools, kept only where the tests passed). Evaluated after it and, with `--base`, before it.
2. **RL** (`terminal-rl/run_cpu_smollm2_terminal.sh`) from the warm start: `--rl-rollouts` rollouts of 4 training
   tasks x 4 episodes, GRPO on the tests' outcome (2 * passed/total - 1), one sample per turn. Evaluated after the
   last step; the warm start's evaluation (the end of stage 1, the same weights) is its "before".

Success is per episode: every test of the task passed. The line before the result gives, per policy, the success
rate, the mean share of tests passed, the parse-error rate and the per-task successes. Last line:
`RESULT terminal_learning value=<success after RL - success of the warm start> target=>=0.1 PASS|FAIL`
(RL's own gain; the warm start's gain over the base model is printed, not counted).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from train_stages import REPO, episodes, eval_records, eval_sample_files, last_model, run_stage, summarize

TARGET = 0.1
DATA = REPO / "terminal-rl" / "data"


def task_name(key: str) -> str:
    """The data's task key is "<task>:<task path>": the task's name is its first part."""
    return key.split(":")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-steps", type=int, default=32, help="32 x 8 = about three passes over the 84 turns")
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--base", action="store_true", help="also evaluate the base model before SFT")
    parser.add_argument("--model", default="smollm2", help="the base model (tiny: a quick smoke run of the bench)")
    parser.add_argument("--rl-rollouts", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-5, help="RL learning rate")
    parser.add_argument("--eval-samples", type=int, default=4, help="episodes per held-out task")
    parser.add_argument("--max-steps", type=int, default=6, help="model turns per episode (MAX_STEPS)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "terminal_learning")
    opts = parser.parse_args()

    shutil.rmtree(opts.out, ignore_errors=True)  # metrics.jsonl is appended to: start from empty folders
    opts.out.mkdir(parents=True)
    heldout = DATA / "heldout.jsonl"
    eval_flags = ["--eval-prompt-data", "heldout", str(heldout), "--eval-temperature", "1.0",
                  "--n-samples-per-eval-prompt", str(opts.eval_samples), "--eval-max-response-len", "256",
                  "--max-turns", str(opts.max_steps)]

    sft_dir = opts.out / "sft"
    # the engine idles while SFT trains: the trainer gets both cores
    sft_seconds = run_stage("sft", "terminal-rl/run_cpu_smollm2_terminal_sft.sh",
                            {"RUN_DIR": str(sft_dir), "NUM_ROLLOUT": str(opts.sft_steps), "EVAL": "1",
                             "OMP_NUM_THREADS": "2", "HF_CKPT": opts.model, "LR": str(opts.sft_lr)},
                            [*eval_flags, *([] if opts.base else ["--skip-eval-before-train"])], opts.out / "sft.log")
    sft_files = eval_sample_files(sft_dir)
    if len(eval_records(sft_dir)) != 1 + opts.base or len(sft_files) != 1 + opts.base:
        raise SystemExit(f"expected {1 + opts.base} evaluation(s) in {sft_dir}")
    base = summarize(episodes(sft_files[0], task_name)) if opts.base else None
    warm = summarize(episodes(sft_files[-1], task_name))

    rl_dir = opts.out / "rl"
    rl_seconds = run_stage("rl", "terminal-rl/run_cpu_smollm2_terminal.sh",
                           {"RUN_DIR": str(rl_dir), "HF_CKPT": str(last_model(sft_dir / "ckpt")),
                            "NUM_ROLLOUT": str(opts.rl_rollouts), "LR": str(opts.lr), "MAX_STEPS": str(opts.max_steps)},
                           ["--eval-interval", str(opts.rl_rollouts), "--skip-eval-before-train", *eval_flags,
                            "--save-interval", str(opts.rl_rollouts)],
                           opts.out / "rl.log")
    rl_files = eval_sample_files(rl_dir)
    if len(rl_files) != 1:
        raise SystemExit(f"expected 1 evaluation in {rl_dir}, found {len(rl_files)}")
    trained = summarize(episodes(rl_files[-1], task_name))

    print(f"{'policy':<12} {'success':>8} {'tests passed':>13} {'parse err':>10}  per task (solved/episodes)")
    for name, row in (("base", base), ("warm start", warm), ("RL", trained)):
        if row is not None:
            print(f"{name:<12} {row['success']:>8.3f} {row['accuracy']:>13.3f} {row['parse_error']:>10.3f}  "
                  + ", ".join(f"{t} {s}" for t, s in row["per_task"].items()))
    gain = trained["success"] - warm["success"]
    base_text = f"base success {base['success']:.3f}, " if base else ""
    print(f"held-out: {len(warm['per_task'])} tasks x {opts.eval_samples} episodes; {base_text}warm start (SFT, "
          f"{opts.sft_steps} steps, {sft_seconds:.0f} s) success {warm['success']:.3f} -> after RL "
          f"({opts.rl_rollouts} rollouts, {rl_seconds:.0f} s) {trained['success']:.3f}; tests passed "
          f"{warm['accuracy']:.3f} -> {trained['accuracy']:.3f}; parse errors {warm['parse_error']:.3f} -> "
          f"{trained['parse_error']:.3f}")
    print(f"RESULT terminal_learning value={gain:.3f} target=>={TARGET} {'PASS' if gain >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
