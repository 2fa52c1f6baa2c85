"""Does SWE RL learn? A model fixing real bugs of unseen instances and an unseen project: base, warm start and after
RL, measured in one run.

    OMP_NUM_THREADS=1 python bench/swe_learning.py --model qwen2.5-coder-0.5b [--resume]
        [--sft-steps 30] [--rl-rollouts 8] [--eval-samples 2] [--max-steps 8] [--lora-rank 16]

The instances are the shipped ones (`swe-rl/data/instances.jsonl`: 47 bugs of six pinned PyPI projects, SWE-bench
format, sealed evaluation). The split (no instance in two sets):

- **unseen project** (`tasks`): every instance of `HELDOUT_PROJECT` (astanin/python-tabulate, 8): a code base
  nothing trains on;
- **unseen instances** (`instances`): the last `--heldout-instances` (2) instances of every other project (10);
- **training**: the rest (29), for the demonstrations and for the RL prompts alike (47 instances are too few to split
  them again).

Stages and run files are `learning_protocol.py`'s (shared with `terminal_learning.py` and `gui_learning.py`), each the
setting's own CPU script as a user runs it:

1. **Demonstrations** (`swe-rl/swe_demonstrations.py`): a scripted engineer finds the function, reads it, edits
   it, runs the module's tests and submits, through the real service; kept when the sealed evaluation resolved it.
2. **SFT warm start** (`swe-rl/run_cpu_smollm2_swe_sft.sh`, LoRA), base and warm start evaluated.
3. **RL** (`swe-rl/run_cpu_smollm2_swe.sh`, LoRA, GRPO on the sealed outcome, one sample per trajectory with the
   observations masked: `SAMPLE_UNIT=trajectory`, a third of the tokens of one sample per step), evaluated after.

Every evaluation runs `--eval-samples` episodes per held-out instance at temperature 1.0, at most `--max-steps` steps
of 384 tokens. Besides the resolve rate, the step-level signals of each evaluation: `submitted` (the episode ended
with the submit command), `tests_ran` (the host saw a test runner run), `right_file` (the patch changes a file the
gold patch changes), `f2p_passed` (the share of FAIL_TO_PASS tests the patch made pass), `format_errors` (steps
without one bash block, per episode). Last line: `RESULT swe_learning value=<resolve rate after RL - of the warm
start, unseen instances> target=>=0.05 PASS|FAIL`.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from learning_protocol import Setting, add_arguments, run, run_module
from train_stages import REPO

sys.path.insert(0, str(REPO / "slime"))
from slime.agentic.swe.instances import as_training_row, load_instances  # noqa: E402
from slime.agentic.swe.patches import patch_paths  # noqa: E402
from slime.agentic.swe.provider import DEFAULT_INSTANCES  # noqa: E402
from slime.agentic.task_families import write_data_files  # noqa: E402

HELDOUT_PROJECT = "astanin/python-tabulate"


def split(instances: list, heldout_project: str, per_project: int) -> dict[str, list]:
    """{data file: instances}: the held-out project's instances, the last `per_project` of each other project, the
    rest for both demonstrations and RL."""
    projects: dict[str, list] = {}
    for inst in instances:
        projects.setdefault(inst.repo, []).append(inst)
    if heldout_project not in projects:
        raise SystemExit(f"held-out project {heldout_project!r} has no instances (projects: {', '.join(projects)})")
    out: dict[str, list] = {"demos": [], "rl": [], "heldout_instances": [], "heldout_tasks": projects[heldout_project]}
    for repo, members in projects.items():
        if repo == heldout_project:
            continue
        if len(members) <= per_project:
            raise SystemExit(f"{repo} has {len(members)} instances: none left to train on after {per_project} held out")
        out["heldout_instances"] += members[-per_project:]
        out["demos"] += members[:-per_project]
    out["rl"] = list(out["demos"])
    return out


def write_families(out: Path, train_instances: int, demo_share: float, heldout_instances: int, seed: int) -> dict:
    """The protocol's tasks stage for SWE: the split written as training rows (`--input-key text`) in the four data
    files (`train_instances`, `demo_share` and `seed` do not apply: the instances are fixed)."""
    out.mkdir(parents=True, exist_ok=True)
    parts = split(load_instances(DEFAULT_INSTANCES), HELDOUT_PROJECT, heldout_instances)
    return write_data_files(out, {name: [as_training_row(i) for i in insts] for name, insts in parts.items()})


def demonstrate(families: Path, out: Path, opts) -> str:
    return run_module(["swe_demonstrations", "--data", str(families / "demos.jsonl"),
                       "--instances", str(DEFAULT_INSTANCES), "--out", str(out), "--max-steps",
                       str(opts.max_steps)], "demos", python_path=(REPO / "swe-rl",))


def project_of(instance_id: str) -> str:
    """`owner__repo-N` -> `owner/repo`."""
    return instance_id.split(":")[0].rsplit("-", 1)[0].replace("__", "/", 1)


@functools.cache
def _gold() -> dict:
    return {i.instance_id: i for i in load_instances(DEFAULT_INSTANCES)}


def signals(rows: list[dict]) -> dict[str, float]:
    """The step-level signals of one evaluation's episodes (see the module docstring)."""
    gold = _gold()
    n = len(rows) or 1

    def f2p_share(row: dict) -> float:
        inst = gold[row["task"]]
        outcomes = (row.get("evaluation") or {}).get("outcomes") or {}
        return sum(outcomes.get(t) == "passed" for t in inst.FAIL_TO_PASS) / len(inst.FAIL_TO_PASS)

    return {"submitted": sum(r.get("exit_status") == "submitted" for r in rows) / n,
            "tests_ran": sum(bool(r.get("tests_ran")) for r in rows) / n,
            "right_file": sum(bool(set(r.get("patch_files") or []) & set(patch_paths(gold[r["task"]].patch)[0]))
                              for r in rows) / n,
            "f2p_passed": sum(f2p_share(r) for r in rows) / n,
            "format_errors": sum(int(r.get("format_errors") or 0) for r in rows) / n}


SETTING = Setting(
    name="swe_learning", target=0.05,
    sft_script="swe-rl/run_cpu_smollm2_swe_sft.sh", rl_script="swe-rl/run_cpu_smollm2_swe.sh",
    write_families=write_families,
    demonstrate=demonstrate,
    stage_flags=lambda opts, families: ["--eval-max-response-len", "384"],
    stage_env=lambda opts, families: {"INSTANCES": str(DEFAULT_INSTANCES), "SAMPLE_UNIT": "trajectory"},
    family_of=project_of,
    key_field="instance_id",
    row_fields=("exit_status", "patch_files", "tests_ran", "format_errors", "patch_source"),
    signals=signals,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, "swe_learning", {"heldout_instances": 2, "sft_steps": 30, "rl_rollouts": 8, "rl_tasks": 2,
                                           "eval_samples": 2, "max_steps": 8, "save_interval": 2})
    return run(SETTING, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
