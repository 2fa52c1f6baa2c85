"""Does GUI RL learn? A model with text observations on unseen desktop tasks: base, warm start and after RL, in one
run.

    OMP_NUM_THREADS=1 python bench/gui_learning.py --model qwen2.5-coder-0.5b [--resume]
        [--sft-steps 60] [--rl-rollouts 16] [--eval-samples 1] [--max-steps 8] [--lora-rank 16] [--response-len 96]
        [--constant-groups keep|drop|drop-all] [--temperature 1.0]

The tasks are families (`gui-rl/gui_families.py`): 8 kinds of desktop task over the Tk apps (the settings dialog,
the file manager, the notes editor) with generated instances (starting state, target and wording drawn per
instance; each training family in 3-4 variants that need other actions or a value read off the screen; the
evaluator's expected state computed from the same draw; one scripted solution per instance) and 6 more kinds that
nothing trains on. The policy sees the screen as text (the OCR text view, `--gui-observation text`: no
vision-language weights exist in any package here; the tiny-VLM screenshot path is tested on its own), one sample
per step, with the compact prompt that keeps a step affordable on 2 cores: the current screen only (`--gui-history
1`; earlier steps by their action lines) and the lean tool profile (`--gui-tools lean`): on the demonstrations
1,200 prompt tokens per step sample at upstream's layout, 884 with history 1, and 563 with both (measured on
the 550 demonstration rows of a 0.5B run). Stages and run files are `learning_protocol.py`'s (shared with
`terminal_learning.py`), each the setting's own CPU script as a user runs it (real `slime/train*.py` processes, the
embedded engine, the environment service's pool server, a desktop per episode: Xvfb and the task's Tk app in the
bubblewrap sandbox):

0. **Tasks**: the families written under `<out>/families/`; every held-out instance is then played once by its own
   scripted solution on a real desktop (`python -m slime.agentic.gui.check`), and one that its solution cannot solve
   is dropped (the OCR text view misses some words, e.g. a short line of the notes editor) and counted, so the
   held-out sets hold tasks a text policy can solve.
1. **Demonstrations** (`gui-rl/gui_demonstrations.py --data`): the demonstration instances' scripted solutions
   on real desktops, kept when the evaluator scored 1, one SFT row per step.
2. **SFT warm start** (`gui-rl/run_cpu_smollm2_gui_text_sft.sh`, LoRA), base and warm start evaluated.
3. **RL** (`gui-rl/run_cpu_smollm2_gui_text.sh`, LoRA, GRPO on the evaluator's outcome), evaluated after.

Every evaluation runs `--eval-samples` episodes per held-out instance at `--temperature` (default 1.0; the RL
rollouts sample at it too), at most `--max-steps` steps of `--response-len` tokens. Last line: `RESULT gui_learning
value=<success after RL - success of the warm start, unseen instances> target=>=0.1 PASS|FAIL`; the unseen tasks'
numbers are printed before it, not counted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from learning_protocol import Setting, add_arguments, run, run_module
from train_stages import REPO

sys.path.insert(0, str(REPO / "slime"))
sys.path.insert(0, str(REPO / "gui-rl"))  # the method folder's task families
from gui_families import family_of, write_families  # noqa: E402


# Screens per step prompt: the current one only (earlier steps are listed by their action lines). Upstream's 3 made a
# step sample ~1,200 prompt tokens on the 0.5B model, over half of them screens already acted on; generation on 2 CPU
# cores is bound by prefill and an RL step by prompt tokens, so 1 is what keeps a rollout affordable.
HISTORY = 1
TOOLS = "lean"  # the short system prompt and computer_use schema (as terminal_learning's lean shell tool)


def verify(families: Path, opts) -> str:
    """Plays every held-out instance's scripted solution once; rewrites both held-out data files with the instances
    that check out (solution 1, doing nothing 0). Returns what was dropped."""
    notes = []
    for name in ("heldout_instances", "heldout_tasks"):
        path = families / f"{name}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        with tempfile.TemporaryDirectory(prefix="gui-verify-") as tmp:
            report = Path(tmp) / "check.json"
            run_module(["slime.agentic.gui.check", "--tasks-dir", str(families / "tasks"), "--concurrency", "2",
                        "--json", str(report), *[r["prompt"] for r in rows]], "verify",
                       ok_codes=(0, 1))  # the check exits 1 when a task does not check out
            ok = {r["task"] for r in json.loads(report.read_text()) if r["ok"]}
        kept = [r for r in rows if r["prompt"] in ok]
        path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        dropped = sorted(r["prompt"] for r in rows if r["prompt"] not in ok)
        notes.append(f"{name}: {len(kept)} of {len(rows)} verified" + (f" (dropped {', '.join(dropped)})"
                                                                        if dropped else ""))
    return "; ".join(notes)


def demonstrate(families: Path, out: Path, opts) -> str:
    return run_module(["gui_demonstrations", "--tasks-dir", str(families / "tasks"),
                       "--data", str(families / "demos.jsonl"), "--out", str(out), "--history", str(HISTORY),
                       "--tools", TOOLS], "demos", python_path=(REPO / "gui-rl",))


SETTING = Setting(
    name="gui_learning", target=0.1,
    sft_script="gui-rl/run_cpu_smollm2_gui_text_sft.sh", rl_script="gui-rl/run_cpu_smollm2_gui_text.sh",
    write_families=write_families,
    demonstrate=demonstrate,
    # the response cap of evaluation and rollout alike: the longest demonstrated lean action is 65 tokens, and a policy
    # that does not act (the base model) writes to the cap on every step, which sets the base evaluation's time
    stage_flags=lambda opts, families: ["--eval-max-response-len", str(opts.response_len),
                                        "--rollout-max-response-len", str(opts.response_len),
                                        "--gui-history", str(HISTORY), "--gui-tools", TOOLS],
    stage_env=lambda opts, families: {"TASKS_DIR": str(families / "tasks")},
    family_of=family_of,
    verify=verify,
    settings_keys=("response_len",),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, "gui_learning", {"train_instances": 30, "heldout_instances": 4, "max_steps": 8,
                                           "rl_tasks": 2})
    parser.add_argument("--response-len", type=int, default=96,
                        help="tokens per step's response, evaluation and rollouts (the longest demonstrated: 65)")
    return run(SETTING, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
