"""`toolcall-rl/run_cpu_smollm2_toolcall.sh` as a user runs it, on the tiny model: rollouts through the tool-call
loop (engine, parser, observations, reward), then trained steps, with one sample per trajectory and with dynamic
history; and a copy of the folder with its own prompt, reward and problems, which runs its own. The random model
never calls a tool (its trajectories end on the turn budget), so every reward is the same and every advantage 0:
this pins the plumbing from the script to a trained step, not learning."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dynamic", ["0", "1"])
def test_the_cpu_script_runs_the_loop_and_trains(tmp_path, dynamic):
    run = tmp_path / "run"
    env = {**os.environ, "RUN_DIR": str(run), "NUM_ROLLOUT": "2", "ROLLOUT_BATCH_SIZE": "2", "N_SAMPLES": "2",
           "MAX_TURNS": "2", "DYNAMIC_HISTORY": dynamic, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "toolcall-rl/run_cpu_smollm2_toolcall.sh", "--hf-checkpoint", "tiny",
                           "--rollout-max-response-len", "16", "--save-interval", "1000",
                           # stop strings the random model soon writes: turns end on "stop", so trajectories mostly
                           # take both turns, with the environment's observation in between
                           "--rollout-stop", " ", "e", "a", "t",
                           "--save-debug-rollout-data", str(run / "rollout_{rollout_id}.jsonl")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    samples = [json.loads(line) for line in (run / "rollout_0.jsonl").read_text().splitlines()]
    trajectories = {(s["group_index"], s["index"]) for s in samples}
    assert len(trajectories) == 4  # 2 problems x 2 samples
    for s in samples:
        assert s["reward"]["score"] == pytest.approx(-1.1) and s["metadata"]["answer"] is None
        assert s["label"] and len(s["loss_mask"]) == s["response_length"]
    turns = {(s["group_index"], s["index"]): s["metadata"]["turns"] for s in samples}
    assert any(t == 2 for t in turns.values()), turns  # most turns end on a stop string, not the 8-token cap
    if dynamic == "1":
        assert len(samples) == sum(turns.values()) and all(set(s["loss_mask"]) == {1} for s in samples)
    else:
        # the environment's observation between two turns is in the sample, with loss mask 0
        assert all((0 in s["loss_mask"]) == (s["metadata"]["turns"] == 2) for s in samples)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("train/pg_loss" in m for m in metrics), metrics


FORK_PROMPT = "You are the fork's calculator. Answer as \\\\boxed{answer}."
FORK_REWARD = '''

_retool_reward = reward_func


async def reward_func(args, item):
    """The fork's reward: the ReTool reward's fields, a constant score (a value ReTool never gives)."""
    out = await _retool_reward(args, item)
    for reward in out if isinstance(out, list) else [out]:
        reward["score"] = 0.375
    return out
'''


def _fork_toolcall_folder(destination: Path) -> Path:
    """What a researcher does: copy the folder, edit its prompt and reward, give it problems of its own."""
    shutil.copytree(REPO / "toolcall-rl", destination, ignore=shutil.ignore_patterns("__pycache__"))
    module = destination / "generate_with_retool.py"
    text = module.read_text()
    start = text.index("SYSTEM_PROMPT = (")
    end = text.index(")\n", start) + 2
    module.write_text(text[:start] + f"SYSTEM_PROMPT = {FORK_PROMPT!r}\n" + text[end:] + FORK_REWARD)
    (destination / "data" / "train.jsonl").write_text("".join(
        json.dumps({"prompt": f"What is {a} + {b}?", "label": str(a + b)}) + "\n" for a, b in ((17, 25), (40, 2))))
    return destination / "run_cpu_smollm2_toolcall.sh"


def test_a_copied_folder_runs_its_own_code_data_and_run_directory(tmp_path, tiny_model_path):
    script = _fork_toolcall_folder(tmp_path / "my-retool")
    env = {**os.environ, "SLIME_ROOT": str(REPO), "NUM_ROLLOUT": "1", "ROLLOUT_BATCH_SIZE": "2", "N_SAMPLES": "2",
           "MAX_TURNS": "1", "OMP_NUM_THREADS": "1"}
    # set up only: the copy's default run directory, data, tools and module folder
    dry = subprocess.run(["bash", str(script), "--dry-run"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert dry.returncode == 0, dry.stderr[-3000:]
    words = shlex.split(dry.stdout.strip().splitlines()[-1])
    args = parse_args(words[2:], mode="async", world_size=1)
    assert args.run_dir == "runs/my-retool-cpu" and args.extra_python_path == [str(tmp_path / "my-retool")]
    assert args.prompt_data == str(tmp_path / "my-retool/data/train.jsonl")
    assert args.tools_config == str(tmp_path / "my-retool/tools.json")

    run = tmp_path / "run"
    done = subprocess.run(["bash", str(script), "--hf-checkpoint", "tiny", "--rollout-max-response-len", "8",
                           "--save-interval", "1000",
                           "--save-debug-rollout-data", str(run / "rollout_{rollout_id}.jsonl")],
                          cwd=tmp_path, env={**env, "RUN_DIR": str(run)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    samples = [json.loads(line) for line in (run / "rollout_0.jsonl").read_text().splitlines()]
    assert len({(s["group_index"], s["index"]) for s in samples}) == 4
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    for s in samples:
        assert s["reward"]["score"] == 0.375 and "acc" in s["reward"]  # the copy's reward around ReTool's
        assert s["prompt"] in ("What is 17 + 25?", "What is 40 + 2?") and s["label"] == "42"  # the copy's data
        context = tok.decode(s["tokens"][:len(s["tokens"]) - s["response_length"]])
        assert "the fork's calculator" in context and "helpful assistant that can use Python" not in context
    assert not (REPO / "runs" / "my-retool-cpu").exists()
