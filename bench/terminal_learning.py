"""Does terminal RL learn? A model on unseen shell tasks: base, warm start and after RL, measured in one run.

    OMP_NUM_THREADS=1 python bench/terminal_learning.py --model qwen2.5-coder-0.5b [--resume]
        [--sft-steps 60] [--rl-rollouts 16] [--eval-samples 1] [--max-steps 4] [--lora-rank 16]

The tasks are families (`terminal-rl/terminal_families.py`): 12 kinds of shell task with generated instances (file
names, data, parameters and wording drawn per instance; the expected outputs computed from the same data; one
scripted solution per family) and 6 more kinds that nothing trains on. Stages, each the setting's own CPU script as
a user runs it (real `slime/train*.py` processes, the embedded engine, the environment service's pool server, tmux
shells in the bubblewrap sandbox):

0. **Tasks**: the families written under `<out>/families/` (the same seed writes the same bytes): demonstration and
   RL instances of the training families (disjoint), unseen instances of them (`instances`), instances of the
   held-out families (`tasks`).
1. **Demonstrations**: each demonstration instance solved by the scripted agent through the real service and shell
   tools (with `--tools lean`, the default: the family's solution as one shell_exec call, then the answer; with
   upstream's four tools it looks at /app first), kept only when its tests passed
   (`terminal-rl/terminal_demonstrations.py`): hundreds of verified trajectories, one SFT row per model turn.
2. **SFT warm start** (`terminal-rl/run_cpu_smollm2_terminal_sft.sh`, `--sft-steps` steps of 8 rows, LoRA): both
   held-out sets evaluated before it (the base model) and after it (the warm start). The adapter is then merged
   into a full model folder, which RL starts from (and anchors its KL term to).
3. **RL** (`terminal-rl/run_cpu_smollm2_terminal.sh`, `--rl-rollouts` rollouts of `--rl-tasks` instances x
   `--rl-samples` episodes, GRPO on the tests' outcome, LoRA): both held-out sets evaluated after the last step.

The stages, resuming and run files are `learning_protocol.py`'s (shared with `gui_learning.py`). Every evaluation
runs `--eval-samples` episodes per held-out instance through the terminal turn loop at `--temperature` (default
1.0; the RL rollouts sample at it too), at most `--max-steps` turns. Success is per episode: every test of the
instance passed.

`--resume` continues an interrupted run in `--out`: a finished stage (its settings recorded in its
`stage_settings.json` and checked against this run's) is reused, an RL stage that saved a checkpoint continues from
it (`--load`, every `--save-interval` rollouts). Progress: the trainer's step lines with an ETA.

Run files (`<out>/`, committed under `bench/results/terminal_learning/` by `--commit-results`): every evaluated
episode (`eval_<policy>_<set>.jsonl`: task, family, reward, tests passed, the turns' text), the trainer metrics of
both stages, the stage timings and `result.json`, from which `--recompute` prints the table and the RESULT line
again. Last line: `RESULT terminal_learning value=<success after RL - success of the warm start, unseen instances>
target=>=0.1 PASS|FAIL`; the unseen tasks' numbers are printed on the line before it, not counted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from learning_protocol import Setting, add_arguments, run, run_module
from train_stages import REPO

sys.path.insert(0, str(REPO / "slime"))
sys.path.insert(0, str(REPO / "terminal-rl"))  # the method folder's task families
from terminal_families import family_of, write_families  # noqa: E402


def demonstrate(families: Path, out: Path, opts) -> str:
    """The scripted demonstrations over demos.jsonl (a pool server of their own); their summary line."""
    return run_module(["terminal_demonstrations", "--data", str(families / "demos.jsonl"),
                       "--tasks-dir", str(families / "tasks"), "--out", str(out), "--tools", opts.tools], "demos",
                      python_path=(REPO / "terminal-rl",))


SETTING = Setting(
    name="terminal_learning", target=0.1,
    sft_script="terminal-rl/run_cpu_smollm2_terminal_sft.sh", rl_script="terminal-rl/run_cpu_smollm2_terminal.sh",
    write_families=write_families,
    demonstrate=demonstrate,
    stage_flags=lambda opts, families: ["--terminal-tools", opts.tools, "--eval-max-response-len", "256"],
    stage_env=lambda opts, families: {"TASKS_DIR": str(families / "tasks")},
    family_of=family_of,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # 10 unseen instances per family: 120 episodes, so that a +0.10 gain is more than the noise of one evaluation
    add_arguments(parser, "terminal_learning", {"heldout_instances": 10})
    parser.add_argument("--tools", choices=["lean", "upstream"], default="lean",
                        help="the terminal tool profile (lean: shell_exec with a command; 226 prompt tokens of system "
                             "prompt and tools instead of 913)")
    return run(SETTING, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
