"""`gui-rl/run_cpu_tiny_vlm_gui.sh` as a user runs it: the tiny random Qwen2.5-VL sees screenshots of real desktops
(one per episode, the task's Tk app under Xvfb in a sandbox) through the GUI loop, and the trainer, two torchrun
ranks (DDP on gloo), trains three steps: each sample carries the screenshots its prompt's image pads stand for, the
trainer's log-probs equal the engine's, the vision tower's and the language model's weights move and reach the
engine (a later rollout is sampled by trained weights), the checkpoint holds the image preprocessing, and every lease
is closed."""

from __future__ import annotations

import base64
import io
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import torch
from safetensors.torch import load_file

from helpers.gui_env import requires_desktop

REPO = Path(__file__).resolve().parents[2]
pytestmark = requires_desktop()
MAX_PIXELS = 230400
# a tensor of the vision tower and one of the language model (file names: the checkpoint's on-disk layout)
VISION_KEY = "visual.blocks.0.mlp.gate_proj.weight"
TEXT_KEY = "model.layers.0.mlp.gate_proj.weight"


def _pad_runs(tokens: list[int], pad: int) -> list[int]:
    """The lengths of the runs of `pad` in `tokens` (one run per image)."""
    runs, current = [], 0
    for tok in tokens + [None]:
        if tok == pad:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs


def test_the_tiny_vlm_trains_on_screenshots_under_torchrun(tmp_path):
    from PIL import Image
    from transformers import AutoConfig

    from slime.models.tiny_vlm import build_tiny_vlm
    from slime.models.vision import VisionSpec, smart_resize

    folder = build_tiny_vlm()
    pad_id = AutoConfig.from_pretrained(folder).image_token_id
    run_dir = tmp_path / "run"
    prompts = tmp_path / "rows.jsonl"
    prompts.write_text(json.dumps({"prompt": "notes/append-line", "label": "",
                                   "metadata": {"domain": "notes", "example_id": "append-line"}}) + "\n")
    dump = tmp_path / "rollout_{rollout_id}.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "ENV_SERVER_URL", "TRAINER_PROCS")}
    env.update(OMP_NUM_THREADS="1", NUM_ROLLOUT="3", ROLLOUT_BATCH_SIZE="1", N_SAMPLES="2", MAX_STEPS="2",
               RUN_DIR=str(run_dir), PROMPT_DATA=str(prompts), STEP_JUDGE="rules", LR="1e-4",
               MAX_PIXELS=str(MAX_PIXELS))
    # every reward is -1 (random weights write no valid action), so the advantages are 0: the entropy term gives
    # the step a gradient through the image features and the language model alike
    done = subprocess.run(["bash", "gui-rl/run_cpu_tiny_vlm_gui.sh", "--rollout-max-response-len", "16",
                           "--entropy-coef", "0.01", "--save-debug-rollout-data", str(dump)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "rank 1/2" in done.stdout + done.stderr  # two torchrun ranks trained

    dumps = [[json.loads(line) for line in Path(str(dump).format(rollout_id=k)).read_text().splitlines()]
             for k in range(3)]
    samples = dumps[0]
    assert len(samples) >= 2
    # the trained VLM's weights reach the engine (published after each step; async training samples the next rollout
    # during the step, so the third rollout is the first sampled by trained weights)
    assert {s["weight_version"] for s in samples} == {"0"}
    assert all(int(s["weight_version"]) >= 1 for s in dumps[2]), [s["weight_version"] for s in dumps[2]]
    spec = VisionSpec.from_folder(folder)
    for sample in samples:
        images = (sample.get("multimodal_inputs") or {}).get("images")
        assert images, "a step's sample carries its screenshots"
        runs = _pad_runs(sample["tokens"][: len(sample["tokens"]) - sample["response_length"]], pad_id)
        assert len(runs) == len(images) <= 3  # the current screen and at most two earlier ones
        for image, run in zip(images, runs):
            with Image.open(io.BytesIO(base64.b64decode(image))) as img:
                assert img.width * img.height <= MAX_PIXELS
                h, w = smart_resize(img.height, img.width, spec.factor, spec.min_pixels, spec.max_pixels)
            assert run == h * w // (spec.factor ** 2)  # the pad's width is this image's token count

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rollout = next(r for r in rows if "rollout/samples" in r)  # the first: sampled by the weights it trains
    assert rollout["rollout/samples"] == len(samples) and rollout["rollout/raw_reward"] == -1.0
    assert rollout["train/train_rollout_logprob_abs_diff"] < 1e-4  # the trainer scored what the engine sampled
    assert rollout["train/grad_norm"] > 0

    model = run_dir / "ckpt" / "iter_0000003" / "model"
    before, after = load_file(folder / "model.safetensors"), load_file(model / "model.safetensors")
    for key in (VISION_KEY, TEXT_KEY):
        assert not torch.equal(before[key], after[key]), f"{key} did not move"
    assert VisionSpec.from_folder(model) == spec  # the checkpoint serves images as the base model did

    state = run_dir / "env_service" / "pool0"
    with sqlite3.connect(state / "leases.db") as db:
        leases = db.execute("SELECT task_key, close_reason FROM leases").fetchall()
    assert len(leases) == 6 and all(reason == "closed by the client" for _, reason in leases)  # 3 rollouts x 2
    assert not any((state / "leases").iterdir())
