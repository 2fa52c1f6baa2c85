"""Does GUI RL learn? SmolLM2-135M-Instruct with text observations on held-out GUI tasks, success before and after
training, in one run; and how fast the environment steps.

    OMP_NUM_THREADS=1 python bench/gui_learning.py [--sft-steps 32] [--rl-rollouts 16] [--lr 1e-5]
        [--eval-samples 2] [--max-steps 8] [--model smollm2] [--reuse-sft]

As in `terminal_learning.py`, two stages, each the setting's own CPU script as a user runs it (real `slime/train*.py`
processes, the embedded engine, the environment service's pool server, one desktop per episode: Xvfb, the task's
Tk app or chromium page, in the bubblewrap sandbox), evaluated through the GUI loop itself on the held-out tasks
(`gui-rl/data/heldout.jsonl`: every fourth task of each app, which no demonstration and no RL prompt uses),
`--eval-samples` episodes per task at temperature 1.0, at most `--max-steps` steps:

1. **SFT warm start** (`gui-rl/run_cpu_smollm2_gui_text_sft.sh`): `--sft-steps` steps of 8 verified demonstration
   steps (`gui-rl/data/sft_demos.jsonl`: the training tasks' scripted solutions played on real desktops, kept only
   when the evaluator scored them 1). Evaluated before it (the base model) and after it.
2. **RL** (`gui-rl/run_cpu_smollm2_gui_text.sh`) from the warm start: `--rl-rollouts` rollouts of 2 training tasks x
   4 episodes, GRPO on the evaluator's outcome (+1 / -1), one sample per step. Evaluated after the last step.

The environment's speed is measured first, in the same run: every held-out task's scripted solution through a pool
server of the `gui` provider, steps (action + screenshot + OCR text view) per second and the reset time.

Last line: `RESULT gui_learning value=<success after training - success of the base model> target=>=0.1
PASS|FAIL`, the line before it the environment's steps/s; the table before that gives, per policy, the success
rate, the parse-error rate and the per-task successes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from train_stages import (REPO, check_stage_settings, episodes, eval_records, eval_sample_files, last_model,
                          record_stage_settings, run_stage, summarize)

TARGET = 0.1
DATA = REPO / "gui-rl" / "data"


def environment_speed() -> dict:
    """Steps per second of the real environment: the held-out tasks' scripted solutions through a pool server."""
    from slime.agentic.env_service.client import EnvClient
    from slime.agentic.env_service.launch import PoolServerProcess
    from slime.agentic.env_service.settings import PoolSettings
    from slime.agentic.gui.agent import AgentSettings, ScriptedGuiPolicy, run_episode
    from slime.agentic.gui.scripted import load_solution
    from slime.agentic.gui.tasks import load_tasks, split_of

    tasks = [t for t in load_tasks() if split_of(t) == "heldout"]
    with tempfile.TemporaryDirectory(prefix="gui-speed-") as state, \
            PoolServerProcess(PoolSettings(provider="gui", state_dir=state)) as pool:
        async def go():
            async with EnvClient(pool.url) as env:
                out = []
                for task in tasks:
                    start = time.monotonic()
                    episode = await run_episode(ScriptedGuiPolicy(load_solution(task)), env, task.key,
                                                AgentSettings(max_steps=30))
                    out.append((episode, time.monotonic() - start))
                return out

        results = asyncio.run(go())
    steps = sum(len(e.steps) for e, _ in results)
    timings = [e.evaluation.get("timings", {}) for e, _ in results if e.evaluation]
    acting = sum(t.get("actions", 0.0) + t.get("observations", 0.0) for t in timings)
    return {"tasks": len(results), "solved": sum(e.reward == 1.0 for e, _ in results), "steps": steps,
            "steps_per_s": steps / acting if acting else 0.0,
            "episode_s": sum(s for _, s in results) / max(1, len(results))}


def sft_settings(opts) -> dict:
    """What makes two SFT stages the same one (recorded with a finished stage, checked by --reuse-sft)."""
    return {"model": opts.model, "sft_steps": opts.sft_steps, "sft_lr": opts.sft_lr,
            "eval_samples": opts.eval_samples, "max_steps": opts.max_steps}


def reused_sft_stage(sft_dir: Path, opts) -> None:
    """A finished SFT stage of an earlier run (`--reuse-sft`), checked against this run's settings from its own
    files: --sft-steps training steps, two evaluations of --eval-samples episodes per held-out task, a checkpoint.
    Its wall time is not known again (the summary says "reused")."""
    check_stage_settings(sft_dir, sft_settings(opts), "--reuse-sft")
    rows = [json.loads(line) for line in (sft_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = sum(1 for r in rows if "train/loss" in r)
    if steps != opts.sft_steps:
        raise SystemExit(f"--reuse-sft: {sft_dir} trained {steps} steps, not --sft-steps {opts.sft_steps}")
    files = eval_sample_files(sft_dir)
    heldout = len((DATA / "heldout.jsonl").read_text().splitlines())
    for path in files:
        if len(episodes(path)) != heldout * opts.eval_samples:
            raise SystemExit(f"--reuse-sft: {path} holds {len(episodes(path))} episodes, not "
                             f"{heldout} tasks x --eval-samples {opts.eval_samples}")
    last_model(sft_dir / "ckpt")
    print(f"[sft] reused {sft_dir}: {steps} steps, {len(files)} evaluations", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-steps", type=int, default=32)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--model", default="smollm2", help="the base model (tiny: a quick smoke run of the bench)")
    parser.add_argument("--rl-rollouts", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-5, help="RL learning rate")
    parser.add_argument("--eval-samples", type=int, default=2, help="episodes per held-out task")
    parser.add_argument("--max-steps", type=int, default=8, help="steps per episode")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "gui_learning")
    parser.add_argument("--reuse-sft", action="store_true",
                        help="reuse the finished SFT stage in --out (its two evaluations and its checkpoint, checked to "
                             "have been run with this run's --model, --sft-steps, --sft-lr, --eval-samples and "
                             "--max-steps, recorded in its stage_settings.json) and run only RL")
    opts = parser.parse_args()

    speed = environment_speed()
    print(f"environment: {speed['tasks']} held-out tasks' scripted solutions, {speed['solved']} solved, "
          f"{speed['steps']} steps at {speed['steps_per_s']:.2f} steps/s (action + screenshot + OCR), "
          f"{speed['episode_s']:.1f} s per episode with reset and evaluation", flush=True)

    eval_flags = ["--eval-prompt-data", "heldout", str(DATA / "heldout.jsonl"), "--eval-temperature", "1.0",
                  "--n-samples-per-eval-prompt", str(opts.eval_samples), "--eval-max-response-len", "128",
                  "--max-turns", str(opts.max_steps)]
    sft_dir = opts.out / "sft"
    if opts.reuse_sft:
        sft_seconds = reused_sft_stage(sft_dir, opts)
        shutil.rmtree(opts.out / "rl", ignore_errors=True)
    else:
        shutil.rmtree(opts.out, ignore_errors=True)
        opts.out.mkdir(parents=True)
        sft_seconds = run_stage("sft", "gui-rl/run_cpu_smollm2_gui_text_sft.sh",
                                {"RUN_DIR": str(sft_dir), "NUM_ROLLOUT": str(opts.sft_steps), "EVAL": "1",
                                 "OMP_NUM_THREADS": "2", "HF_CKPT": opts.model, "LR": str(opts.sft_lr)},
                                eval_flags, opts.out / "sft.log")
        record_stage_settings(sft_dir, sft_settings(opts))
    sft_files = eval_sample_files(sft_dir)
    if len(eval_records(sft_dir)) != 2 or len(sft_files) != 2:
        raise SystemExit(f"expected 2 evaluations (before and after SFT) in {sft_dir}")
    base, warm = summarize(episodes(sft_files[0])), summarize(episodes(sft_files[-1]))

    rl_dir = opts.out / "rl"
    rl_seconds = run_stage("rl", "gui-rl/run_cpu_smollm2_gui_text.sh",
                           {"RUN_DIR": str(rl_dir), "HF_CKPT": str(last_model(sft_dir / "ckpt")),
                            "NUM_ROLLOUT": str(opts.rl_rollouts), "LR": str(opts.lr), "MAX_STEPS": str(opts.max_steps)},
                           ["--eval-interval", str(opts.rl_rollouts), "--skip-eval-before-train", *eval_flags,
                            "--save-interval", str(opts.rl_rollouts)], opts.out / "rl.log")
    rl_files = eval_sample_files(rl_dir)
    if len(rl_files) != 1:
        raise SystemExit(f"expected 1 evaluation in {rl_dir}, found {len(rl_files)}")
    trained = summarize(episodes(rl_files[-1]))

    print(f"{'policy':<12} {'success':>8} {'parse err':>10}  per task (solved/episodes)")
    for name, row in (("base", base), ("warm start", warm), ("RL", trained)):
        print(f"{name:<12} {row['success']:>8.3f} {row['parse_error']:>10.3f}  "
              + ", ".join(f"{t} {s}" for t, s in row["per_task"].items()))
    gain = trained["success"] - base["success"]
    print(f"held-out: {len(base['per_task'])} tasks x {opts.eval_samples} episodes; base {base['success']:.3f} -> "
          f"SFT ({opts.sft_steps} steps, {'reused' if sft_seconds is None else f'{sft_seconds:.0f} s'}) {warm['success']:.3f} -> RL ({opts.rl_rollouts} "
          f"rollouts, {rl_seconds:.0f} s) {trained['success']:.3f}")
    print(f"environment: {speed['steps_per_s']:.2f} steps/s")
    print(f"RESULT gui_learning value={gain:.3f} target=>={TARGET} {'PASS' if gain >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
