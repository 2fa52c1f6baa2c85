"""A tiny policy that calls the code interpreter, warm-started through the trainer's own SFT path.

The random tiny model (slime.models.tiny) never writes a tool call, so a test of the tool-call loop would only
ever see invalid actions. This helper fine-tunes it with `slime/train.py --loss-type sft_loss
--rollout-function-path slime.rollout.sft_rollout.generate_rollout` (the path run_cpu_smollm2_toolcall_sft.sh
uses) on the shipped tool traces of one generator, `count_bits` (`print(bin(N).count('1'))`: a program that
still runs when the 2-layer model miscopies digits). Sampled at temperature 1 it then opens most trajectories
with a `<tool_call>`, and a share of those calls run without error in the sandbox; it does not answer right.
Built once (about 30 s), cached under cache_dir()/tiny/toolcall-policy-<key>, atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "toolcall-rl" / "data" / "sft_traces.jsonl"
SOURCE = "count_bits"
_RECIPE = {"version": 1, "steps": 150, "batch": 8, "lr": 3e-3, "seed": 1234}


def _traces() -> list[str]:
    return [line + "\n" for line in TRACES.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["source"] == SOURCE and json.loads(line)["metadata"]["kind"] == "tool"]


def _key(base: Path, traces: list[str]) -> str:
    blob = json.dumps({"recipe": _RECIPE, "base": base.name, "traces": hashlib.sha256("".join(traces).encode()).hexdigest()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build_toolcall_policy() -> Path:
    """Return the folder of the warm-started tiny policy (model + tokenizer), training it if not cached."""
    from slime.models.tiny import build_tiny_model
    from slime.utils.paths import atomic_directory, cache_dir

    base = build_tiny_model()
    traces = _traces()
    final = cache_dir() / "tiny" / f"toolcall-policy-{_key(base, traces)}"
    if (final / "config.json").exists():
        return final
    with atomic_directory(final) as tmp:
        data = tmp / "traces.jsonl"
        data.write_text("".join(traces), encoding="utf-8")
        steps = str(_RECIPE["steps"])
        command = [sys.executable, "slime/train.py", "--hf-checkpoint", str(base), "--prompt-data", str(data),
                   "--input-key", "prompt", "--label-key", "label", "--metadata-key", "metadata",
                   "--loss-type", "sft_loss", "--rollout-function-path", "slime.rollout.sft_rollout.generate_rollout",
                   "--num-rollout", steps, "--rollout-batch-size", str(_RECIPE["batch"]), "--n-samples-per-prompt", "1",
                   "--global-batch-size", str(_RECIPE["batch"]), "--rollout-shuffle", "--seed", str(_RECIPE["seed"]),
                   "--lr", str(_RECIPE["lr"]), "--lr-decay-style", "cosine", "--weight-decay", "0.0",
                   "--run-dir", str(tmp / "run"), "--save", str(tmp / "ckpt"), "--save-interval", steps,
                   "--update-weights-interval", steps]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        if done.returncode != 0:
            raise RuntimeError(f"the SFT run of the tool-call policy failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        model = tmp / "ckpt" / f"iter_{_RECIPE['steps']:07d}" / "model"
        for item in model.iterdir():
            os.replace(item, tmp / item.name)
        metrics = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines()]
        losses = [m["train/loss"] for m in metrics if "train/loss" in m]
        (tmp / "toolcall_policy_recipe.json").write_text(json.dumps(
            {**_RECIPE, "traces": len(traces), "source": SOURCE, "first_loss": losses[0], "final_loss": losses[-1]},
            indent=2))
        shutil.rmtree(tmp / "run")
        shutil.rmtree(tmp / "ckpt")
        data.unlink()
    return final
