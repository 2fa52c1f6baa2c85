"""What the learning benchmarks share: run a setting's own CPU script as a user runs it (progress passed through,
the whole output kept in a log), read the evaluations its trainer logged, find the weights it ended with.

Used by `toolcall_learning.py`, `terminal_learning.py`, `gui_learning.py` and `swe_harness.py` (scripts in this
folder import it as a sibling); the last three also share how an agentic evaluation's dumped samples become episodes and a summary.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_stage(tag: str, script: str, env: dict, flags: list[str], log: Path) -> float:
    """`bash script flags...` from the repository root with `env` added; the trainer's step and evaluation lines
    (and any error line) are echoed with `[tag]`, a step line with the stage's elapsed time and an ETA from the
    steps done so far (evaluations included), everything goes to `log` (appended to: a resumed stage keeps its
    first part). Returns the wall seconds; a non-zero exit ends the benchmark with the log's path."""
    started = time.monotonic()
    print(f"[{tag}] bash {script} {' '.join(flags)}  (log: {log})", flush=True)
    first_step = None
    with open(log, "a", encoding="utf-8") as fh:
        # unbuffered: the trainer's lines arrive as they are written, not in 8 KiB blocks
        proc = subprocess.Popen(["bash", script, *flags], cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:  # the scripts' own progress lines, passed through
            fh.write(line)
            fh.flush()
            if (line.startswith(("step ", "eval after")) or "Error" in line or "error:" in line
                    or re.search(r": eval \S+: \d+/\d+ samples done", line)):
                text = line.rstrip()[:400]
                step = re.match(r"step (\d+)/(\d+)", line)
                if step:
                    done, total = int(step.group(1)), int(step.group(2))
                    now = time.monotonic()
                    # the rate counts from the first step, not from the start (loading and an evaluation)
                    first_step = first_step or (done, now)
                    eta = eta_seconds(started, first_step, done, total, now)
                    text += f" | {(now - started) / 60:.1f} min, ETA {eta / 60:.1f} min"
                print(f"[{tag}] {text}", flush=True)
        code = proc.wait()
    if code != 0:
        raise SystemExit(f"[{tag}] exited with {code}; see {log}")
    return time.monotonic() - started


STAGE_SETTINGS = "stage_settings.json"


def record_stage_settings(run_dir: Path, settings: dict, name: str = STAGE_SETTINGS) -> None:
    """What a finished stage was run with (or, `name` stage_started.json, an unfinished one was started with), so a
    later run that reuses or continues it can check it is the same stage."""
    (run_dir / name).write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def settings_differ(recorded: dict, settings: dict) -> dict:
    """{key: (recorded, now)} for every setting a recorded stage had otherwise."""
    return {k: (recorded.get(k), v) for k, v in settings.items() if recorded.get(k) != v}


def eta_seconds(started: float, first_step: tuple[int, float], done: int, total: int, now: float) -> float:
    """Seconds left at step `done` of `total`: the rate from this process's first step line on, or, at that first
    line, the whole time so far for the one step it ran (a resumed stage's first step is not step 1)."""
    first, first_at = first_step
    rate = (now - first_at) / (done - first) if done > first else now - started
    return rate * (total - done)


def check_stage_settings(run_dir: Path, settings: dict, flag: str) -> None:
    """Refuse to reuse a stage run with other settings (or whose settings were not recorded)."""
    path = run_dir / STAGE_SETTINGS
    if not path.is_file():
        raise SystemExit(f"{flag}: {path} is missing (a stage from before settings were recorded, or unfinished): "
                         "run the stage again")
    differ = settings_differ(json.loads(path.read_text(encoding="utf-8")), settings)
    if differ:
        raise SystemExit(f"{flag}: {run_dir} was run with other settings: "
                         + ", ".join(f"{k} {was!r} there, {now!r} now" for k, (was, now) in sorted(differ.items())))


def eval_records(run_dir: Path) -> list[dict]:
    """The evaluation records of a run's metrics.jsonl (`eval/...` keys), in order."""
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [r for r in rows if "eval/rollout_id" in r]


def eval_sample_files(run_dir: Path, dataset: str = "heldout") -> list[Path]:
    """Every evaluation's dumped samples (`<run dir>/eval/<when>/<dataset>.jsonl`), before training first."""
    folder = run_dir / "eval"
    files = sorted(folder.glob(f"rollout_*/{dataset}.jsonl"))
    before = folder / "before_training" / f"{dataset}.jsonl"
    return ([before] if before.exists() else []) + files


def last_model(ckpt: Path) -> Path:
    """The HF model folder of the last checkpoint under `ckpt` (what a next stage starts from)."""
    folders = sorted(p for p in ckpt.glob("iter_*") if (p / "model" / "config.json").exists())
    if not folders:
        raise SystemExit(f"no checkpoint with a model folder under {ckpt}")
    return folders[-1] / "model"


def episode_samples(samples_file: Path, key_field: str = "task_key") -> dict[tuple, list[dict]]:
    """An agentic evaluation's dumped samples grouped by episode: with one sample per step, the steps of an episode
    share its task key (`metadata[key_field]`), group and index. {(key, group_index, index): [samples in file order]}"""
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for line in samples_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            sample = json.loads(line)
            key = str((sample.get("metadata") or {}).get(key_field) or "?")
            grouped[(key, sample.get("group_index"), sample.get("index"))].append(sample)
    return dict(grouped)


def episode_outcome(sample: dict) -> dict:
    """What every step sample of an episode carries about its outcome: accuracy (1.0 when solved), parse error."""
    meta = sample.get("metadata") or {}
    reward = sample.get("reward") if isinstance(sample.get("reward"), dict) else {}
    accuracy = float(meta.get("accuracy", reward.get("acc", 0.0)))
    return {"accuracy": accuracy, "solved": accuracy >= 1.0,
            "parse_error": float(reward.get("parse_error", 0.0)) > 0 or int(meta.get("parse_error_count", 0)) > 0}


def episodes(samples_file: Path, task_of=lambda key: key, key_field: str = "task_key") -> list[dict]:
    """One row per evaluated episode (`episode_samples`): its task (`task_of` maps the task key to the task's name),
    accuracy, whether it was solved and whether it had a parse error."""
    return [{"task": task_of(key), **episode_outcome(steps[-1])}
            for (key, _, _), steps in episode_samples(samples_file, key_field).items()]


def summarize(rows: list[dict]) -> dict:
    """Success rate, mean accuracy (e.g. the share of tests passed), parse-error rate and per-task successes."""
    if not rows:
        raise SystemExit("an evaluation with no episodes")
    per_task: dict[str, list[bool]] = defaultdict(list)
    for row in rows:
        per_task[row["task"]].append(row["solved"])
    return {"episodes": len(rows), "success": sum(r["solved"] for r in rows) / len(rows),
            "accuracy": sum(r["accuracy"] for r in rows) / len(rows),
            "parse_error": sum(r["parse_error"] for r in rows) / len(rows),
            "per_task": {task: f"{sum(s)}/{len(s)}" for task, s in sorted(per_task.items())}}
