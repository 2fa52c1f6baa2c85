"""The trainer on samples with images (a tiny Qwen2.5-VL): token for token what the engine saw.

A real engine process serves the tiny VLM; its responses to prompts with images (and one text prompt)
become Samples as a rollout builds them (the engine's expanded prompt ids + output ids, its log-probs, the
images as base64), go through JSON and `to_rows` like the trainer's data path, and the fsdp actor must
score every response token as the engine did (1e-4, float32 CPU) and train the vision tower with the rest:
in this process, then with 2 processes under DDP and FSDP2 (gloo), which must agree with the single run.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from slime.engine.launch import EngineProcess
from slime.models.tiny_vlm import IMAGE_PLACEHOLDER, build_tiny_vlm
from slime.utils.types import Sample

REPO = Path(__file__).resolve().parents[2]
ATOL = 1e-4
VISION_KEY = "model.visual.blocks.0.mlp.gate_proj.weight"
TEXT_KEY = "model.language_model.layers.0.mlp.gate_proj.weight"


def _png(h: int, w: int, seed: int) -> str:
    from PIL import Image

    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def vlm_folder():
    return build_tiny_vlm()


@pytest.fixture(scope="module")
def samples(vlm_folder, tmp_path_factory) -> list[Sample]:
    """Four rollout samples from the engine: three with images (two sizes, one prompt with two images), one text."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(vlm_folder)
    requests = [
        ([_png(112, 168, 0)], f"Screen: {IMAGE_PLACEHOLDER} Where is the OK button?"),
        (None, "Which button closes the dialog?"),
        ([_png(60, 90, 1)], f"{IMAGE_PLACEHOLDER} What is shown?"),
        ([_png(56, 56, 2), _png(112, 84, 3)], f"Before {IMAGE_PLACEHOLDER} after {IMAGE_PLACEHOLDER} what changed?"),
    ]
    log = tmp_path_factory.mktemp("vlm_train_engine") / "engine.log"
    out: list[Sample] = []
    with EngineProcess(vlm_folder, log_path=log, ready_timeout=180) as proc, \
            httpx.Client(base_url=proc.url, timeout=180.0) as http:
        for index, (images, text) in enumerate(requests):
            body = {"return_logprob": True,
                    "sampling_params": {"max_new_tokens": 6, "temperature": 1.0, "ignore_eos": True}}
            if images:
                body.update(text=text, image_data=images)
            else:
                body["input_ids"] = tok.encode(text, add_special_tokens=False)
            response = http.post("/generate", json=body)
            assert response.status_code == 200, response.text
            result = response.json()
            meta = result["meta_info"]
            prompt_ids = meta["input_ids"] if images else body["input_ids"]
            sample = Sample(group_index=index // 2, index=index, prompt=text,
                            tokens=list(prompt_ids) + list(result["output_ids"]),
                            response_length=len(result["output_ids"]), reward=float(index % 2),
                            rollout_log_probs=[entry[0] for entry in meta["output_token_logprobs"]],
                            multimodal_inputs={"images": images} if images else None)
            sample.update_from_meta_info(meta)
            # through JSON, as a rollout's samples reach the trainer (store, rollout files, debug dumps)
            out.append(Sample.from_json(sample.to_json()))
    assert out[0].multimodal_inputs == {"images": requests[0][0]} and out[1].multimodal_inputs is None
    return out


def _args(model, world_size=1, *flags):
    from slime.utils.arguments import parse_args

    return parse_args(["--hf-checkpoint", str(model), "--rollout-batch-size", "4", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-2", "--adam-eps", "1e-3",
                       "--rollout-temperature", "1.0", "--disable-rewards-normalization", *flags],
                      world_size=world_size)


def _rows(model, samples: list[Sample]) -> list[dict]:
    from slime.training.train_data import to_rows

    rewards = [s.reward for s in samples]
    rows = to_rows(_args(model), samples, rewards, rewards)
    for row, sample in zip(rows, samples):
        assert ("multimodal_inputs" in row) == (sample.multimodal_inputs is not None)  # text rows stay as they were
    for row in rows:
        row["advantages"] = [row["reward"] - 0.5] * row["response_length"]
    return rows


def _state(actor) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in actor.full_state_dict().items()}


def test_trainer_scores_as_the_engine_did_and_trains_the_vision_tower(vlm_folder, samples, dist_info):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor

    # one micro-batch: image rows of different lengths beside a text row, right-padded
    args = _args(vlm_folder, 1, "--use-dynamic-batch-size", "--max-tokens-per-gpu", "100000")
    actor = FSDPActor(args, dist_info, str(vlm_folder), AutoTokenizer.from_pretrained(vlm_folder))
    assert actor.is_vision and type(actor.hf_model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    rows = _rows(vlm_folder, samples)
    log_probs = actor.compute_log_probs(rows)
    for row, lp in zip(rows, log_probs):
        np.testing.assert_allclose(lp, row["rollout_log_probs"], atol=ATOL, rtol=0)
    # the same rows one per micro-batch give the same log-probs (padding and batch neighbours change nothing)
    actor.args.use_dynamic_batch_size, actor.args.micro_batch_size = False, 1
    for lp, alone in zip(log_probs, actor.compute_log_probs(rows)):
        np.testing.assert_allclose(alone, lp, atol=1e-5, rtol=0)
    actor.args.use_dynamic_batch_size = True
    for row, lp in zip(rows, log_probs):
        row["old_log_probs"] = [v - 0.3 for v in lp]
    before = _state(actor)
    metrics = actor.train_step(rows, len(rows))
    after = _state(actor)
    assert metrics["train/grad_norm"] > 0
    assert not torch.equal(before[VISION_KEY], after[VISION_KEY])  # the vision tower is trained
    assert not torch.equal(before[TEXT_KEY], after[TEXT_KEY])
    # and the new weights score differently: the step reached the forward the log-probs come from
    moved = actor.compute_log_probs(rows)
    assert max(abs(a - b) for a, b in zip(moved[0], log_probs[0])) > 1e-3


def test_text_only_policy_refuses_image_rows(tiny_model_path, samples, dist_info):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor

    actor = FSDPActor(_args(tiny_model_path), dist_info, tiny_model_path, AutoTokenizer.from_pretrained(tiny_model_path))
    assert not actor.is_vision
    rows = _rows(tiny_model_path, samples[:1])
    with pytest.raises(ValueError, match="text-only"):
        actor.compute_log_probs(rows)


def test_image_pad_mismatch_is_refused(vlm_folder, samples, dist_info):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor

    actor = FSDPActor(_args(vlm_folder), dist_info, str(vlm_folder), AutoTokenizer.from_pretrained(vlm_folder))
    rows = _rows(vlm_folder, samples[:1])
    pad = actor.image_token_id
    first = rows[0]["tokens"].index(pad)
    rows[0]["tokens"] = rows[0]["tokens"][:first] + rows[0]["tokens"][first + 1:]  # one pad short
    with pytest.raises(ValueError, match="image pad tokens"):
        actor.compute_log_probs(rows)


def _torchrun(tmp_path: Path, rows_file: Path, procs: int, strategy: str) -> tuple[dict, dict]:
    out = tmp_path / f"{strategy}-{procs}.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}",
           str(REPO / "tests" / "helpers" / "vlm_train_step.py"), str(build_tiny_vlm()), str(rows_file), str(out),
           strategy, "--micro-batch-size", "1"]
    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return torch.load(out), json.loads(Path(str(out) + ".json").read_text())


def test_two_processes_match_the_engine_and_a_single_process(vlm_folder, samples, tmp_path):
    rows = _rows(vlm_folder, samples)
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(rows))
    # rank 1 gets the text row alone in a micro-batch: its vision tower must still run (an idle image) so that
    # DDP sees a gradient for every parameter and FSDP2's all-gathers stay in step across ranks
    single, single_info = _torchrun(tmp_path, rows_file, 1, "auto")
    ddp, ddp_info = _torchrun(tmp_path, rows_file, 2, "ddp")
    fsdp, fsdp_info = _torchrun(tmp_path, rows_file, 2, "fsdp")
    assert (single_info["strategy"], ddp_info["strategy"], fsdp_info["strategy"]) == ("none", "ddp", "fsdp")
    for info in (single_info, ddp_info, fsdp_info):
        for position, row in enumerate(rows):
            np.testing.assert_allclose(info["log_probs"][str(position)], row["rollout_log_probs"], atol=ATOL, rtol=0)
    assert single.keys() == ddp.keys() == fsdp.keys()
    for key in single:
        assert torch.allclose(single[key], ddp[key], atol=1e-6), key
        assert torch.allclose(single[key], fsdp[key], atol=1e-6), key
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(vlm_folder, dtype=torch.float32).state_dict()
    assert not torch.equal(single[VISION_KEY], base[VISION_KEY])
    assert not torch.equal(single[TEXT_KEY], base[TEXT_KEY])


def test_lora_on_a_vision_model_scores_as_the_engine_and_adapts_the_vision_mlp(vlm_folder, samples, dist_info):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor

    # gate_proj/up_proj/down_proj name the vision tower's MLP too: its adapters train with the decoder's
    args = _args(vlm_folder, 1, "--use-lora", "--lora-rank", "4", "--lora-alpha", "8",
                 "--lora-target-modules", "q_proj,v_proj,gate_proj,up_proj,down_proj")
    actor = FSDPActor(args, dist_info, str(vlm_folder), AutoTokenizer.from_pretrained(vlm_folder))
    rows = _rows(vlm_folder, samples)
    for row, lp in zip(rows, actor.compute_log_probs(rows)):  # a fresh adapter is the identity
        np.testing.assert_allclose(lp, row["rollout_log_probs"], atol=ATOL, rtol=0)
        row["old_log_probs"] = [v - 0.3 for v in lp]
    adapters = {n: p.detach().clone() for n, p in actor.hf_model.named_parameters() if p.requires_grad}
    assert any(".visual." in n for n in adapters)
    actor.train_step(rows, len(rows))
    moved = {n for n, p in actor.hf_model.named_parameters() if p.requires_grad and not torch.equal(p, adapters[n])}
    assert any(".visual." in n for n in moved) and any(".language_model." in n for n in moved)
