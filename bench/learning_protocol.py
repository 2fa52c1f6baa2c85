"""The protocol the agentic learning benchmarks share (`terminal_learning.py`, `gui_learning.py`): task families with
generated instances, a warm start from verified demonstrations, RL, and three policies (base, warm start, after RL)
measured on the same held-out episodes, in one resumable run.

Stages (each skipped with `--resume` when it finished with the same settings, `stage_settings.json`):

0. `families/`: the setting's families written (`<setting>.families.write_families`): `demos.jsonl`, `rl.jsonl`
   (disjoint training instances), `heldout_instances.jsonl` (unseen instances of the trained families) and
   `heldout_tasks.jsonl` (families nothing trains on). A setting may verify its held-out instances first (`verify`:
   the GUI's scripted solutions through the real desktop; an instance its own solution cannot solve is dropped and
   counted, so the held-out sets hold solvable tasks only).
1. `demos/`: the scripted demonstrations of `demos.jsonl` through the real service, kept when the task's own check
   passed.
2. `sft/`: the SFT warm start (the setting's SFT script, LoRA by default), both held-out sets evaluated before it
   (the base model) and after it (the warm start); the adapter merged into a full model folder for RL. A checkpoint
   every `--sft-save-interval` steps; interrupted before the first, it keeps its evaluation of the base model,
   and a `--resume` may then change how it trains (`TRAINING_ONLY_SETTINGS`: steps, rate, LoRA, plain tokens).
3. `rl/`: RL from the warm start (the setting's RL script, LoRA), both sets evaluated after the last step; a
   checkpoint every `--save-interval` rollouts, from which `--resume` continues an interrupted stage (`--load`).

`--temperature` (default 1.0) is every evaluation's and the RL rollouts' (the trainer scores at it too). A warm start
trains the same at any temperature, so `--resume` at another one keeps a finished SFT stage and evaluates the base
model and the warm start again at it (`sft/eval_t<temperature>/`: the SFT script with no steps); a finished RL stage
is not reused at another temperature (remove `<out>/rl` to run it again). `--resume` with more `--sft-steps` than a
finished warm start trained continues it from its last checkpoint to the new count (`extend_warm_start`: the shorter
warm start's evaluations and the RL stage trained from it move to `<out>/superseded_sft<steps>/`); `--resume
--rerun-rl` sets an RL stage run with other RL settings aside (`<out>/superseded_rl<N>/`) and runs RL again from the
kept warm start, whose evaluations are reused. `--rollout-temperature` samples the RL rollouts at another
temperature than the evaluations', and `--rl-over-sampling N` is dynamic sampling (groups generated N at a time until
`--rl-tasks` of them have a contrast). `--constant-groups
drop-all` (GRPO groups whose episodes all scored the same left out, none kept) skips the optimizer step of a rollout
that found no contrast: on 2 cores a GUI step that only the KL term would move costs 8-10 minutes.

Run files in `--out`: `eval_<base|warm|rl>_<instances|tasks>.jsonl` (every evaluated episode: task, family,
accuracy, status, the evaluation, the turns' text), both stages' `metrics.jsonl`, `timings.json`, `result.json`,
and RL's training episodes (`rl/rollouts/rollout_<n>.jsonl`, every step sample the trainer got, written by its
`--save-debug-rollout-data`); `--commit-results` copies them (compressed; the training episodes as one
`rl_rollouts.jsonl.gz` without token ids, log-probs and chat prompts) to `bench/results/<setting>/<model>/`, and
`--recompute` prints the table and the RESULT line from them again.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from train_stages import (REPO, STAGE_SETTINGS, check_stage_settings, episode_outcome, episode_samples,
                          eval_sample_files, record_stage_settings, run_stage, settings_differ, summarize)

SETS = ("instances", "tasks")  # unseen instances of trained families; unseen families
POLICIES = (("base", "base"), ("warm", "warm start"), ("rl", "after RL"))


@dataclass
class Setting:
    """What a learning benchmark plugs into the protocol."""
    name: str  # the RESULT name, e.g. terminal_learning
    target: float  # RL's gain over the warm start on unseen instances
    sft_script: str
    rl_script: str
    # the setting's families module's write_families(out, train_instances, demo_share, heldout_instances, seed)
    write_families: Callable[[Path, int, float, int, int], dict]
    demonstrate: Callable[[Path, Path, argparse.Namespace], str]  # (families, out jsonl, opts) -> summary line
    stage_flags: Callable[[argparse.Namespace, Path], list[str]]  # the setting's trainer flags (both stages)
    stage_env: Callable[[argparse.Namespace, Path], dict]  # the scripts' environment (tasks folder, ...)
    family_of: Callable[[str], str]  # a task key -> its family
    verify: Callable[[Path, argparse.Namespace], str] | None = None  # filters the held-out sets; -> summary line
    key_field: str = "task_key"  # the sample metadata field that names an episode's task
    row_fields: tuple[str, ...] = ()  # more of an episode's metadata kept in its run-file row
    settings_keys: tuple[str, ...] = ()  # the setting's own options recorded with the SFT and RL stages' settings
    # step-level numbers of one evaluation beside success ({name: value}), from its kept rows
    signals: Callable[[list[dict]], dict[str, float]] | None = None


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:  # RL samples its groups: a greedy policy would give every group one outcome
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser, setting: str, defaults: dict) -> None:
    """The protocol's flags, with the setting's defaults."""
    d = {"model": "qwen2.5-coder-0.5b", "train_instances": 45, "heldout_instances": 6, "sft_steps": 60,
         "sft_lr": 2e-4, "lora_rank": 16, "rl_rollouts": 16, "rl_tasks": 4, "rl_samples": 4, "lr": 4e-5,
         "save_interval": 4, "eval_samples": 1, "max_steps": 4, "engine_threads": 2, **defaults}
    parser.add_argument("--model", default=d["model"], help="the base model (tiny-qwen2: a smoke run)")
    parser.add_argument("--train-instances", type=int, default=d["train_instances"],
                        help="per training family (half for demonstrations, half for RL)")
    parser.add_argument("--heldout-instances", type=int, default=d["heldout_instances"],
                        help="per family, in each held-out set")
    parser.add_argument("--sft-steps", type=int, default=d["sft_steps"], help="SFT steps of 8 demonstration rows")
    parser.add_argument("--sft-lr", type=float, default=d["sft_lr"])
    parser.add_argument("--lora-rank", type=int, default=d["lora_rank"], help="0: full fine-tuning")
    parser.add_argument("--lora-top-layers", type=int, default=d.get("lora_top_layers", 0),
                        help="LoRA on the top N layers only (0: every layer): a cheaper step on a CPU")
    parser.add_argument("--rl-rollouts", type=int, default=d["rl_rollouts"])
    parser.add_argument("--rl-tasks", type=int, default=d["rl_tasks"], help="instances per rollout")
    parser.add_argument("--rl-samples", type=int, default=d["rl_samples"], help="episodes per instance (GRPO group)")
    parser.add_argument("--lr", type=float, default=d["lr"], help="RL learning rate (of the LoRA weights)")
    parser.add_argument("--constant-groups", choices=["keep", "drop", "drop-all"],
                        default=d.get("constant_groups", "keep"),
                        help="RL: drop GRPO groups whose episodes all scored the same (no advantage, but a training "
                             "step's forward and backward passes on a CPU; the loss then averages over the rest); "
                             "drop keeps one when all agree, drop-all none (that rollout takes no step)")
    parser.add_argument("--save-interval", type=int, default=d["save_interval"],
                        help="RL checkpoint every N rollouts (what --resume continues from)")
    parser.add_argument("--sft-save-interval", type=int, default=d.get("sft_save_interval", 10),
                        help="SFT checkpoint every N steps (what --resume continues an interrupted warm start from)")
    parser.add_argument("--eval-samples", type=int, default=d["eval_samples"], help="episodes per held-out instance")
    parser.add_argument("--temperature", type=_positive_float, default=d.get("temperature", 1.0),
                        help="sampling temperature of every evaluation and of the RL rollouts (the trainer scores "
                             "at the same temperature)")
    parser.add_argument("--rollout-temperature", type=_positive_float, default=None,
                        help="the RL rollouts' temperature when not --temperature's (the trainer scores at it): a "
                             "warm start that solves most training instances at the evaluation's temperature leaves "
                             "most GRPO groups without a contrast")
    parser.add_argument("--rl-over-sampling", type=int, default=0, metavar="GROUPS",
                        help="dynamic sampling (DAPO): generate groups GROUPS at a time until --rl-tasks of them "
                             "have a contrast (slime.rollout.filter_hub.check_reward_nonzero_std), so that every "
                             "rollout takes its steps (a rollout that finds none in max(16 x --rl-tasks, 4 x "
                             "GROUPS) groups stops the stage with an error; --resume continues from its last "
                             "checkpoint); 0: off (with --constant-groups drop-all a rollout whose groups all agree "
                             "takes no step)")
    parser.add_argument("--max-steps", type=int, default=d["max_steps"], help="model turns per episode")
    parser.add_argument("--engine-threads", type=int, default=d["engine_threads"],
                        help="the embedded engine's torch threads (evaluations run while the trainer waits)")
    parser.add_argument("--sft-plain-tokens", nargs="*", default=["<tool_call>", "</tool_call>"], metavar="TEXT",
                        help="added tokens the warm start trains as ordinary text (slime/rollout/sft_rollout.py: "
                             "Qwen2.5-Coder-0.5B's tool-call tags have untrained rows); none: give the flag alone")
    parser.add_argument("--seed", type=int, default=0, help="the families' instances")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / setting)
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out: reuse finished stages, continue RL from its checkpoint")
    parser.add_argument("--rerun-rl", action="store_true",
                        help="with --resume: set the run's RL stage aside (<out>/superseded_rl<N>/) and run RL again "
                             "from the kept warm start with this run's RL flags")
    parser.add_argument("--recompute", action="store_true", help="print the table and RESULT from --out's run files")
    parser.add_argument("--commit-results", action="store_true",
                        help=f"copy the run files to bench/results/{setting}/<model> at the end")


def run_module(args: list[str], what: str, ok_codes: tuple[int, ...] = (0,), python_path: tuple[Path, ...] = ()) -> str:
    """`python -m <args>` from the repository root (the framework on its path, and `python_path`: a method folder
    whose module it is); its last output line. Another exit status, or no output, ends the benchmark with its error
    output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [*map(str, python_path), str(REPO / "slime"),
                                                                     os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, env=env)
    if proc.returncode not in ok_codes or not proc.stdout.strip():
        raise SystemExit(f"[{what}] failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def lora_flags(opts) -> list[str]:
    top = ["--lora-top-layers", str(opts.lora_top_layers)] if opts.lora_top_layers else []
    return ["--use-lora", "--lora-rank", str(opts.lora_rank), "--lora-alpha", str(2 * opts.lora_rank), *top] \
        if opts.lora_rank else []


def sft_stage_settings(demo_settings: dict, opts, settings_keys: tuple[str, ...] = ()) -> dict:
    """The SFT stage's recorded settings (a `--resume` must match them): the demonstrations', the warm start's and
    the evaluations' episode shape, with the setting's own `settings_keys`. Not the temperature: a warm start
    trains the same at any, and a resumed run evaluates it again at another (`policy_evaluations`)."""
    return {**demo_settings, **{k: getattr(opts, k) for k in settings_keys},
            "model": opts.model, "sft_steps": opts.sft_steps, "sft_lr": opts.sft_lr,
            "lora_rank": opts.lora_rank, "lora_top_layers": opts.lora_top_layers,
            "eval_samples": opts.eval_samples, "max_steps": opts.max_steps,
            "engine_threads": opts.engine_threads, "sft_plain_tokens": list(opts.sft_plain_tokens)}


def rl_stage_settings(sft_settings: dict, opts) -> dict:
    """The RL stage's recorded settings (a `--resume` must match them): the warm start's and RL's own."""
    return {**sft_settings, "rl_rollouts": opts.rl_rollouts, "rl_tasks": opts.rl_tasks,
            "rl_samples": opts.rl_samples, "lr": opts.lr, "old_log_probs": "rollout",
            # recorded only when not the default, so runs from before the flag still resume
            **({"constant_groups": opts.constant_groups} if opts.constant_groups != "keep" else {}),
            **({"temperature": opts.temperature} if opts.temperature != 1.0 else {}),
            **({"rollout_temperature": rollout_temperature(opts)}
               if rollout_temperature(opts) != opts.temperature else {}),
            **({"rl_over_sampling": opts.rl_over_sampling} if opts.rl_over_sampling else {})}


def rollout_temperature(opts) -> float:
    return opts.temperature if opts.rollout_temperature is None else opts.rollout_temperature


def rl_flags(opts) -> list[str]:
    """The RL stage's trainer flags of the protocol: one evaluation after the last rollout, checkpoints to resume from.
    PPO's old log-probs are the engine's own (`--use-rollout-logprobs`): in async mode they are the behaviour
    policy's (a version behind the trainer), engine and trainer agree on them (mean |d log p| 0.01 on the 0.5B), and
    recomputing them was a forward pass over every sample: a quarter of an RL step's time on the CPU."""
    dynamic = ["--over-sampling-batch-size", str(opts.rl_over_sampling),
               "--dynamic-sampling-filter-path", "slime.rollout.filter_hub.check_reward_nonzero_std"] \
        if opts.rl_over_sampling else []
    return ["--eval-interval", str(opts.rl_rollouts), "--skip-eval-before-train", "--use-rollout-logprobs",
            "--rollout-temperature", str(rollout_temperature(opts)),
            "--constant-groups", opts.constant_groups, "--save-interval", str(opts.save_interval), *dynamic]


def eval_flags(opts, families: Path) -> list[str]:
    return ["--engine-threads", str(opts.engine_threads),
            "--eval-prompt-data", "instances", str(families / "heldout_instances.jsonl"),
            "tasks", str(families / "heldout_tasks.jsonl"), "--eval-temperature", str(opts.temperature),
            "--n-samples-per-eval-prompt", str(opts.eval_samples), "--max-turns", str(opts.max_steps)]


EVAL_TEMPERATURE = "eval_temperature.json"  # the temperature a stage evaluates at, recorded when it starts (missing: 1.0)
EVAL_ONLY = ["--update-weights-interval", "1", "--save-interval", "1", "--eval-interval", "1"]  # with NUM_ROLLOUT=0


def evaluated_at(run_dir: Path) -> float:
    path = run_dir / EVAL_TEMPERATURE
    return json.loads(path.read_text())["temperature"] if path.is_file() else 1.0


def record_evaluated_at(run_dir: Path, temperature: float) -> None:
    (run_dir / EVAL_TEMPERATURE).write_text(json.dumps({"temperature": temperature}) + "\n")


def evaluate_only(setting: "Setting", opts, model: str, run_dir: Path, env: dict, flags: list[str],
                  log: Path) -> dict[str, Path]:
    """Both held-out sets evaluated on `model` and nothing trained: the setting's SFT script with no steps (its
    evaluation before training is the one that runs). Reused with `--resume` once finished at this temperature."""
    settings = {"model": model, "temperature": opts.temperature}
    if not stage_done(run_dir, settings, opts.resume):
        shutil.rmtree(run_dir, ignore_errors=True)
        run_stage(f"eval {run_dir.name}", setting.sft_script,
                  {**env, "RUN_DIR": str(run_dir), "NUM_ROLLOUT": "0", "EVAL": "1", "OMP_NUM_THREADS": "2",
                   "HF_CKPT": model}, [*flags, *EVAL_ONLY], log)
        record_stage_settings(run_dir, settings)
    (files,) = evaluations(run_dir, 1)
    return files


def policy_evaluations(setting: "Setting", opts, sft_dir: Path, warm_model: Path, env: dict,
                       flags: list[str]) -> tuple[dict[str, Path], dict[str, Path]]:
    """The base model's and the warm start's evaluations: the SFT stage's own (before and after its steps) when
    they ran at `--temperature`, else both evaluated again at it (`sft/eval_t<temperature>/`, the training kept)."""
    ran_at = evaluated_at(sft_dir)
    if ran_at == opts.temperature:
        base, warm = evaluations(sft_dir, 2)
        return base, warm
    folder = sft_dir / f"eval_t{opts.temperature:g}"
    print(f"[sft] its evaluations ran at temperature {ran_at:g}: evaluating the base model and the "
          f"warm start again at {opts.temperature:g} in {folder}", flush=True)
    return tuple(evaluate_only(setting, opts, str(model), folder / policy, env, flags,
                               opts.out / f"eval_{policy}_t{opts.temperature:g}.log")
                 for policy, model in (("base", opts.model), ("warm", warm_model)))


def stage_done(run_dir: Path, settings: dict, resume: bool) -> bool:
    """A finished stage of an earlier run is reused with --resume (its recorded settings must be this run's)."""
    if resume and (run_dir / "stage_settings.json").is_file():
        check_stage_settings(run_dir, settings, "--resume")
        print(f"[{run_dir.name}] reused {run_dir} (finished, same settings)", flush=True)
        return True
    return False


STAGE_STARTED = "stage_started.json"  # what an unfinished training stage was started with
# what only training reads: an SFT stage interrupted before its first checkpoint may go on with other values of
# these and keep its evaluation of the base model (a second try at a warm start need not pay for it again)
TRAINING_ONLY_SETTINGS = ("sft_steps", "sft_lr", "lora_rank", "lora_top_layers", "sft_plain_tokens")


def continue_flags(run_dir: Path, resume: bool, settings: dict | None = None,
                   keep_first_eval: bool = False) -> list[str]:
    """An unfinished training stage: `--load` its last checkpoint with `--resume` when it saved one, else start it
    again from an empty folder (its metrics.jsonl is appended to). `keep_first_eval` (the SFT stage, whose evaluation
    of the base model before training costs half an hour on the GUI): interrupted before its first checkpoint but
    after that evaluation, it starts training again with `--skip-eval-before-train` and keeps the evaluation (its
    files and its metrics row), and may then change its `TRAINING_ONLY_SETTINGS`. `settings` are recorded when a
    stage starts and checked when it continues (a stage started before they were recorded continues unchecked)."""
    started = run_dir / STAGE_STARTED
    checkpointed = any((run_dir / "ckpt").glob("iter_*"))
    first_eval_kept = keep_first_eval and all((run_dir / "eval" / "before_training" / f"{name}.jsonl").is_file()
                                              for name in SETS)
    if resume and started.is_file() and settings is not None:
        differ = settings_differ(json.loads(started.read_text(encoding="utf-8")), settings)
        if differ and not checkpointed and first_eval_kept and set(differ) <= set(TRAINING_ONLY_SETTINGS):
            # nothing trained is kept, and the evaluation before training does not depend on how training runs
            print(f"[{run_dir.name}] training again with "
                  + ", ".join(f"{k} {now!r} (was {was!r})" for k, (was, now) in sorted(differ.items())), flush=True)
            record_stage_settings(run_dir, settings, STAGE_STARTED)
        else:
            check_stage_settings_file(started, run_dir, settings)
    if resume and checkpointed:
        print(f"[{run_dir.name}] continuing from the last checkpoint in {run_dir / 'ckpt'}", flush=True)
        return ["--load", str(run_dir / "ckpt")]
    if resume and first_eval_kept:
        keep_metrics_rows(run_dir / "metrics.jsonl", step=0)
        shutil.rmtree(run_dir / "ckpt", ignore_errors=True)
        print(f"[{run_dir.name}] keeping its evaluation before training; training from the start", flush=True)
        return ["--skip-eval-before-train"]
    shutil.rmtree(run_dir, ignore_errors=True)
    if settings is not None:
        run_dir.mkdir(parents=True)
        record_stage_settings(run_dir, settings, STAGE_STARTED)
    return []


def extend_warm_start(out: Path, settings: dict) -> int | None:
    """`--resume` with more `--sft-steps` than a finished warm start trained (every other setting the same): the SFT
    stage is made unfinished again so that it continues from its last checkpoint (`--load`: optimizer, data order
    and step kept; the cosine schedule is recomputed for the new total, so the rate rises back to its value at that
    step of it) up to the new count. What was measured on the shorter warm start no longer describes the policy:
    its evaluation (`sft/eval/rollout_*`, `sft/eval_t*/warm`) and the RL stage trained from it are moved to
    `<out>/superseded_sft<steps>/`; the base model's evaluations stay. Returns the earlier step count, or None
    when there is nothing to extend (any other difference is `stage_done`'s to report)."""
    sft_dir = out / "sft"
    path = sft_dir / STAGE_SETTINGS
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    steps = recorded.get("sft_steps")
    if not isinstance(steps, int) or steps >= settings["sft_steps"] or \
            set(settings_differ(recorded, settings)) != {"sft_steps"}:
        return None
    superseded = out / f"superseded_sft{steps}"
    set_aside(out, superseded, [
        *((d, superseded / "sft" / "eval" / d.name) for d in sorted((sft_dir / "eval").glob("rollout_*"))),
        *((d, superseded / "sft" / d.parent.name / "warm") for d in sorted(sft_dir.glob("eval_t*/warm")))],
        warm_start=True)
    record_stage_settings(sft_dir, settings, STAGE_STARTED)
    path.unlink()  # last: interrupted before it, the next --resume extends again (what is left to move)
    print(f"[sft] extending the finished warm start from {steps} to {settings['sft_steps']} steps (its evaluation "
          f"and the RL stage trained from it moved to {superseded})", flush=True)
    return steps


def set_aside(out: Path, superseded: Path, moves: list[tuple[Path, Path]] = (), warm_start: bool = False) -> None:
    """Move a superseded RL stage into `superseded`: `<out>/rl`, `rl.log`, the run's after-RL files (with
    `warm_start`, the warm start's too, and `moves`) and its `result.json`, so that a `--recompute` reports an
    unfinished run, not the old numbers; its time leaves `timings.json` for `superseded/timings.json` (a stage run
    again adds to what is left)."""
    own = [(path, superseded / path.name)
           for path in sorted([out / "rl", out / "rl.log", out / "result.json", *out.glob("eval_rl_*"),
                               *(out.glob("eval_warm_*") if warm_start else ())])
           if path.exists()]
    for source, target in [*moves, *own]:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)
    timings_path = out / "timings.json"
    if timings_path.is_file():
        timings = json.loads(timings_path.read_text(encoding="utf-8"))
        if "rl" in timings:
            superseded.mkdir(parents=True, exist_ok=True)
            (superseded / "timings.json").write_text(json.dumps({"rl": timings.pop("rl")}, indent=1))
            timings_path.write_text(json.dumps(timings, indent=1))


def rerun_rl(out: Path, settings: dict) -> Path | None:
    """`--resume --rerun-rl`: an RL stage run or started with other RL settings than `settings` is set aside in
    `<out>/superseded_rl<N>/` (the first free N), with its evaluation and its time; the warm start and both
    policies' evaluations are kept, so the run goes on with RL under this run's RL flags (another temperature for
    rollouts, dynamic sampling, a rate). One with these settings is this rerun itself: it is continued (the same
    command resumes an interrupted rerun)."""
    rl_dir = out / "rl"
    if not rl_dir.exists():
        return None
    recorded = next((json.loads(path.read_text(encoding="utf-8")) for path in
                     (rl_dir / STAGE_SETTINGS, rl_dir / STAGE_STARTED) if path.is_file()), None)
    if recorded is not None and not settings_differ(recorded, settings):
        return None
    number = 1
    while (out / f"superseded_rl{number}").exists():
        number += 1
    superseded = out / f"superseded_rl{number}"
    set_aside(out, superseded)
    print(f"[rl] the earlier RL stage set aside in {superseded}; RL runs again", flush=True)
    return superseded


def check_stage_settings_file(path: Path, run_dir: Path, settings: dict) -> None:
    differ = settings_differ(json.loads(path.read_text(encoding="utf-8")), settings)
    if differ:
        raise SystemExit(f"--resume: {run_dir} was started with other settings: "
                         + ", ".join(f"{k} {was!r} there, {now!r} now" for k, (was, now) in sorted(differ.items()))
                         + f" (remove {run_dir} to start it again)")


def keep_metrics_rows(path: Path, step: int) -> None:
    """Drop the rows of an interrupted run's training steps (they are trained again), keep those of `step`."""
    if path.is_file():
        rows = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line).get("step") == step]
        path.write_text("".join(line + "\n" for line in rows), encoding="utf-8")


def adapter_or_model(ckpt: Path) -> Path:
    """The last checkpoint's model folder (a full HF folder, or a LoRA adapter)."""
    folders = sorted(p / "model" for p in ckpt.glob("iter_*")
                     if (p / "model" / "config.json").exists() or (p / "model" / "adapter_config.json").exists())
    if not folders:
        raise SystemExit(f"no checkpoint with a model folder under {ckpt}")
    return folders[-1]


def full_model(ckpt: Path, base: str) -> Path:
    """A full HF folder of the last checkpoint: a LoRA adapter is merged into `base` once (in `<model>/merged`)."""
    folder = adapter_or_model(ckpt)
    if (folder / "config.json").exists():
        return folder
    if not (folder / "merged" / "config.json").exists():
        from slime.training.weight_sync import merge_lora_folder

        merge_lora_folder(folder, base)
    return folder / "merged"


def episode_rows(samples_file: Path, family_of: Callable[[str], str], key_field: str = "task_key",
                 fields: tuple[str, ...] = ()) -> list[dict]:
    """Every evaluated episode of a dumped evaluation, with its turns' text (one sample per turn) and the metadata
    `fields` of its last step."""
    def turn_of(sample: dict) -> int:
        meta = sample.get("metadata") or {}
        return meta.get("turn_idx") if meta.get("turn_idx") is not None else meta.get("step") or 0

    rows = []
    for (key, _, _), steps in episode_samples(samples_file, key_field).items():
        steps = sorted(steps, key=turn_of)
        meta = steps[-1].get("metadata") or {}
        rows.append({"task": key.split(":")[0], "family": family_of(key), **episode_outcome(steps[-1]),
                     "status": meta.get("status"), "evaluation": meta.get("evaluation"),
                     **{name: meta.get(name) for name in fields},
                     "turns": [{"turn": turn_of(s), "text": s.get("response")} for s in steps]})
    return rows


def evaluations(run_dir: Path, count: int) -> list[dict[str, Path]]:
    """The run's evaluations in order, each {set name: dumped samples file}; exactly `count` of them."""
    found = [eval_sample_files(run_dir, name) for name in SETS]
    if any(len(files) != count for files in found):
        raise SystemExit(f"expected {count} evaluation(s) of {', '.join(SETS)} in {run_dir}, found "
                         + ", ".join(str(len(f)) for f in found))
    return [dict(zip(SETS, files)) for files in zip(*found)]


def keep_episodes(out: Path, policy: str, files: dict[str, Path], setting: Setting) -> None:
    for name, path in files.items():
        rows = episode_rows(path, setting.family_of, setting.key_field, setting.row_fields)
        (out / f"eval_{policy}_{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _read_rows(out: Path, policy: str, name: str) -> list[dict] | None:
    plain, packed = out / f"eval_{policy}_{name}.jsonl", out / f"eval_{policy}_{name}.jsonl.gz"
    if plain.exists():
        text = plain.read_text()
    elif packed.exists():
        text = gzip.decompress(packed.read_bytes()).decode()
    else:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def summaries(out: Path, signals: Callable[[list[dict]], dict[str, float]] | None = None) -> dict:
    """{policy: {set: summary}} from the kept episodes (what --recompute reads; plain or committed .gz files), with
    the setting's step-level `signals` under "signals"."""
    result: dict[str, dict] = {}
    for policy, _ in POLICIES:
        result[policy] = {}
        for name in SETS:
            rows = _read_rows(out, policy, name)
            if rows:
                result[policy][name] = summarize([{"task": r["family"], "accuracy": r["accuracy"],
                                                   "solved": r["accuracy"] >= 1.0,
                                                   "parse_error": bool(r.get("parse_error"))} for r in rows])
                if signals is not None:
                    result[policy][name]["signals"] = signals(rows)
    return result


def report(out: Path, timings: dict, name: str, target: float,
           signals: Callable[[list[dict]], dict[str, float]] | None = None) -> float:
    """The table (per policy and set: episodes, success, mean accuracy, per family, the step-level signals) and the
    RESULT line."""
    table = summaries(out, signals)
    print(f"{'policy':<11} {'set':<10} {'episodes':>8} {'success':>8} {'acc':>6}  per family (solved/episodes)")
    for policy, label in POLICIES:
        for set_name in SETS:
            row = table[policy].get(set_name)
            if row:
                print(f"{label:<11} {set_name:<10} {row['episodes']:>8} {row['success']:>8.3f} {row['accuracy']:>6.3f}  "
                      + ", ".join(f"{t} {s}" for t, s in row["per_task"].items()))
                if row.get("signals"):
                    print(f"{'':<11} {'':<10} signals: " + ", ".join(f"{k} {v:.3f}" for k, v in row["signals"].items()))

    def rate(policy: str, set_name: str) -> str:
        row = table[policy].get(set_name)
        return f"{row['success']:.3f}" if row else "-"

    missing = [label for policy, label in POLICIES if "instances" not in table[policy]]
    if missing:  # a run stopped before its last evaluation: the table of what it measured, no RESULT
        raise SystemExit(f"{name}: no evaluation of the unseen instances for {', '.join(missing)}: the run is not "
                         f"finished (--resume continues it)")
    gain = table["rl"]["instances"]["success"] - table["warm"]["instances"]["success"]
    print(f"unseen instances: base {rate('base', 'instances')}, warm start {rate('warm', 'instances')}, after RL "
          f"{rate('rl', 'instances')}; unseen tasks: base {rate('base', 'tasks')}, warm start {rate('warm', 'tasks')}, "
          f"after RL {rate('rl', 'tasks')}; times: "
          + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items() if isinstance(v, (int, float))))
    print(f"RESULT {name} value={gain:.3f} target=>={target} {'PASS' if gain >= target else 'FAIL'}")
    return gain


ROLLOUTS = "rollouts"  # the RL stage's training episodes, one file per rollout (the trainer's --save-debug-rollout-data)
HEAVY_SAMPLE_FIELDS = ("tokens", "loss_mask", "rollout_log_probs", "teacher_log_probs", "teacher_topk_log_probs",
                       "teacher_topk_indices", "multimodal_inputs", "multimodal_train_inputs")


def rollout_number(path: Path) -> int:
    """`rollout_<n>.jsonl` -> n (the trainer fills in `{rollout_id}`)."""
    return int(path.stem.rsplit("_", 1)[-1])


def compact_rollout_lines(path: Path) -> list[str]:
    """A rollout file's samples without their token ids, log-probs and chat prompts (what a reader of the committed
    run needs is each step's reply, reward, status and task, not a 10 KB array per step); an agent's prompt that is
    its task's record (a dict: name, family, variant) is kept. Each line gets its rollout's number."""
    rollout = rollout_number(path)
    return [json.dumps({"rollout": rollout, **{k: v for k, v in json.loads(line).items()
                                              if k not in HEAVY_SAMPLE_FIELDS
                                              and not (k == "prompt" and not isinstance(v, dict))}},
                       ensure_ascii=False)
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def commit_results(out: Path, setting: str, model: str) -> Path:
    """The run files a RESULT line can be recomputed from, compressed, under bench/results/<setting>/<model>."""
    dest = REPO / "bench" / "results" / setting / model.replace("/", "_")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for path in sorted(out.glob("eval_*.jsonl")):
        (dest / (path.name + ".gz")).write_bytes(gzip.compress(path.read_bytes(), mtime=0))
    for stage in ("sft", "rl"):
        metrics = out / stage / "metrics.jsonl"
        if metrics.exists():
            (dest / f"{stage}_metrics.jsonl.gz").write_bytes(gzip.compress(metrics.read_bytes(), mtime=0))
    rollout_files = sorted((out / "rl" / ROLLOUTS).glob("rollout_*.jsonl"), key=rollout_number)
    if rollout_files:
        text = "".join(line + "\n" for path in rollout_files for line in compact_rollout_lines(path))
        (dest / "rl_rollouts.jsonl.gz").write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    for name in ("result.json", "timings.json"):
        if (out / name).exists():
            shutil.copyfile(out / name, dest / name)
    print(f"run files -> {dest}", flush=True)
    return dest


def run(setting: Setting, opts) -> int:
    """The whole protocol (see the module's docstring) for one setting."""
    if opts.recompute:
        timings_path = opts.out / "timings.json"
        report(opts.out, json.loads(timings_path.read_text()) if timings_path.exists() else {}, setting.name,
               setting.target, setting.signals)
        return 0
    if opts.rl_over_sampling and opts.rl_over_sampling < opts.rl_tasks:  # the trainer's rule, said before any stage
        raise SystemExit(f"--rl-over-sampling {opts.rl_over_sampling} must be 0 or at least --rl-tasks "
                         f"({opts.rl_tasks}): it is how many groups are generated at a time")
    if opts.rerun_rl and not opts.resume:  # before anything is removed
        raise SystemExit("--rerun-rl runs the RL stage of a kept run again: give --resume too")
    if not opts.resume:
        shutil.rmtree(opts.out, ignore_errors=True)  # metrics.jsonl is appended to: start from empty folders
    opts.out.mkdir(parents=True, exist_ok=True)
    timings_path = opts.out / "timings.json"

    def timings() -> dict:
        # read each time: setting a stage aside (set_aside) takes its time out of the file
        return json.loads(timings_path.read_text()) if timings_path.exists() else {}

    def timed(name: str, seconds: float, add: bool = False) -> None:
        """A stage's time; `add`: to what earlier, interrupted parts of the same stage took."""
        recorded = timings()
        recorded[name] = recorded.get(name, 0.0) + seconds if add else seconds
        timings_path.write_text(json.dumps(recorded, indent=1))

    families = opts.out / "families"
    family_settings = {"seed": opts.seed, "train_instances": opts.train_instances,
                       "heldout_instances": opts.heldout_instances}
    if not stage_done(families, family_settings, opts.resume):
        shutil.rmtree(families, ignore_errors=True)
        started = time.monotonic()
        counts = setting.write_families(families, opts.train_instances, 0.5, opts.heldout_instances, opts.seed)
        print("[families] " + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
        if setting.verify is not None:
            print(f"[families] {setting.verify(families, opts)}", flush=True)
        timed("families", time.monotonic() - started)
        record_stage_settings(families, family_settings)

    demos = opts.out / "demos"
    demo_settings = {**family_settings, **{k: getattr(opts, k) for k in ("tools",) if hasattr(opts, k)}}
    if not stage_done(demos, demo_settings, opts.resume):
        shutil.rmtree(demos, ignore_errors=True)
        demos.mkdir()
        started = time.monotonic()
        print(f"[demos] {setting.demonstrate(families, demos / 'sft_demos.jsonl', opts)} "
              f"({time.monotonic() - started:.0f} s)", flush=True)
        timed("demonstrations", time.monotonic() - started)
        record_stage_settings(demos, demo_settings)
    demo_rows = len((demos / "sft_demos.jsonl").read_text().splitlines())
    flags = [*eval_flags(opts, families), *setting.stage_flags(opts, families)]
    env = setting.stage_env(opts, families)

    sft_dir = opts.out / "sft"
    sft_settings = sft_stage_settings(demo_settings, opts, setting.settings_keys)
    if opts.resume:
        extend_warm_start(opts.out, sft_settings)
    if not stage_done(sft_dir, sft_settings, opts.resume):
        sft_resume = continue_flags(sft_dir, opts.resume, sft_settings, keep_first_eval=True)
        if not sft_resume:  # a fresh stage: its evaluation before training runs at this temperature
            record_evaluated_at(sft_dir, opts.temperature)
        # the stage evaluates its last step only at the temperature its base model was evaluated at (a stage continued
        # at another: policy_evaluations evaluates both policies in sft/eval_t<temperature>/)
        own_eval = evaluated_at(sft_dir) == opts.temperature
        # the engine idles while SFT trains: the trainer gets both cores
        timed("sft", add=True, seconds=run_stage("sft", setting.sft_script,
                               {**env, "RUN_DIR": str(sft_dir), "NUM_ROLLOUT": str(opts.sft_steps),
                                "EVAL": "1" if own_eval else "loop",
                                "OMP_NUM_THREADS": "2", "HF_CKPT": opts.model, "LR": str(opts.sft_lr),
                                "SFT_DATA": str(demos / "sft_demos.jsonl")},
                               [*flags, *lora_flags(opts),
                                *(["--sft-plain-tokens", *opts.sft_plain_tokens] if opts.sft_plain_tokens else []),
                                "--save-interval", str(opts.sft_save_interval), *sft_resume],
                               opts.out / "sft.log"))
        record_stage_settings(sft_dir, sft_settings)
    warm_model = full_model(sft_dir / "ckpt", opts.model)
    # the SFT script's own data, though nothing trains: without it a script builds its default demonstrations first
    base_files, warm_files = policy_evaluations(setting, opts, sft_dir, warm_model,
                                                {**env, "SFT_DATA": str(demos / "sft_demos.jsonl")}, flags)
    keep_episodes(opts.out, "base", base_files, setting)
    keep_episodes(opts.out, "warm", warm_files, setting)

    rl_dir = opts.out / "rl"
    rl_settings = rl_stage_settings(sft_settings, opts)
    if opts.rerun_rl:
        rerun_rl(opts.out, rl_settings)
    if not stage_done(rl_dir, rl_settings, opts.resume):
        resume_flags = continue_flags(rl_dir, opts.resume, rl_settings)
        seconds = run_stage("rl", setting.rl_script,
                            {**env, "RUN_DIR": str(rl_dir), "HF_CKPT": str(warm_model),
                             "PROMPT_DATA": str(families / "rl.jsonl"), "NUM_ROLLOUT": str(opts.rl_rollouts),
                             "ROLLOUT_BATCH_SIZE": str(opts.rl_tasks), "N_SAMPLES": str(opts.rl_samples),
                             "LR": str(opts.lr), "MAX_STEPS": str(opts.max_steps)},
                            [*rl_flags(opts), *flags, *lora_flags(opts), *resume_flags,
                             "--save-debug-rollout-data", str(rl_dir / ROLLOUTS / "rollout_{rollout_id}.jsonl")],
                            opts.out / "rl.log")
        timed("rl", seconds, add=True)
        record_stage_settings(rl_dir, rl_settings)
    (rl_files,) = evaluations(rl_dir, 1)
    keep_episodes(opts.out, "rl", rl_files, setting)

    gain = report(opts.out, timings(), setting.name, setting.target, setting.signals)
    (opts.out / "result.json").write_text(json.dumps(
        {"settings": rl_settings, "demonstration_rows": demo_rows, "timings": timings(),
         "summaries": summaries(opts.out, setting.signals), "value": gain, "target": setting.target}, indent=1))
    if opts.commit_results:
        commit_results(opts.out, setting.name, opts.model)
    return 0
