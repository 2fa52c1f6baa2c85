"""DTensor tensor parallel in the fsdp backend equals the single-process model (torchrun over gloo, CPU).

- forward/backward: logits and every parameter's gradient (gathered to a full tensor) of tiny Qwen3
  (tied embeddings, per-head q/k norms), Llama (untied) and Qwen2 (q/k/v biases) under TP=2 match the
  unsharded model;
- the actor's real train step (PPO loss, clipping, AdamW) under TP=2, and 2-D dp=2 x tp=2 with FSDP2 and
  with DDP, gives the loss, grad norm and updated weights of a single-process step; the exported HF folder
  holds full tensors, and a checkpoint resumed under TP continues exactly like the run that wrote it.

This file is also the worker that torchrun starts (`python -m torch.distributed.run ... thisfile MODE OUT`).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5  # float32; reductions in a different order (all-reduce of shards) differ by ~1e-6


# ------------------------------------------------------------------------------------------ tiny models

def _build_family(kind: str, tokenizer_dir: Path, out: Path) -> Path:
    """A tiny random-weight model of another family, sharing the tiny Qwen3's local tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if (out / "config.json").exists():
        return out
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  tie_word_embeddings=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                  bos_token_id=None)
    torch.manual_seed(1)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(head_dim=16, **common))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common))  # q/k/v projections carry biases
        with torch.no_grad():  # random (not zero) biases, so their sharding is exercised
            for name, param in model.named_parameters():
                if name.endswith("bias"):
                    param.normal_(0, 0.1)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def family_paths(tiny_model_path, tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("families")
    return {"qwen3": str(tiny_model_path),
            "llama": str(_build_family("llama", tiny_model_path, root / "llama")),
            "qwen2": str(_build_family("qwen2", tiny_model_path, root / "qwen2"))}


# ------------------------------------------------------------------------------------------ shared pieces

def _rows(count: int = 8) -> list[dict]:
    rng = random.Random(0)
    rows = []
    for _ in range(count):
        prompt, response = rng.randint(4, 12), rng.randint(2, 9)
        rows.append({"tokens": [rng.randrange(4000) for _ in range(prompt + response)], "response_length": response,
                     "loss_mask": [1] * response, "advantages": [rng.uniform(-1, 1)] * response,
                     "rollout_log_probs": None})
    return rows


def _actor(model_path: str, dist, tp: int, flags: list[str], resume: Path | None = None):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.utils.arguments import parse_args

    args = parse_args(["--hf-checkpoint", model_path, "--rollout-batch-size", "8", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-2", "--adam-eps", "1e-3",
                       "--use-dynamic-batch-size", "--max-tokens-per-gpu", "60", "--rollout-temperature", "0.8",
                       "--disable-rewards-normalization", "--tensor-model-parallel-size", str(tp), *flags],
                      world_size=dist.world_size // tp)
    return FSDPActor(args, dist, model_path, AutoTokenizer.from_pretrained(model_path), resume_dir=resume)


def _train_step(actor, rows: list[dict]) -> dict:
    """This rank's data-parallel share of the rows, old log-probs with an off-policy gap (so PPO clips), a step."""
    from slime.training.train_data import shard_for_ranks

    mine = [dict(r) for r in shard_for_ranks(rows, len(rows), actor.dp_size)[actor.dp_rank]]
    for row, lp in zip(mine, actor.compute_log_probs(mine)):
        row["old_log_probs"] = [v - 0.3 for v in lp]
    if actor.ref_model is not None:
        for row, lp in zip(mine, actor.compute_log_probs(mine, use_ref=True)):
            row["ref_log_probs"] = lp
    return actor.train_step(mine, len(rows))


def _single_process_step(dist_info, model_path: str, flags: list[str]) -> tuple[dict, dict]:
    actor = _actor(model_path, dist_info, 1, flags)
    metrics = _train_step(actor, _rows())
    return metrics, actor.full_state_dict()


def _torchrun(procs: int, mode: str, out: Path, config: dict, timeout: int = 300) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}",
           __file__, mode, str(out), json.dumps(config)]
    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads((out / "result.json").read_text())


def _assert_same_weights(expected: dict, got: dict, label: str):
    assert expected.keys() == got.keys(), label
    for name, tensor in expected.items():
        assert got[name].shape == tensor.shape, (label, name)  # full HF tensors, not shards
        assert torch.allclose(tensor, got[name], atol=TOLERANCE), (label, name, (tensor - got[name]).abs().max())


def _assert_same_metrics(expected: dict, got: dict, label: str):
    assert expected.keys() == got.keys(), label
    for name in ("train/pg_loss", "train/loss", "train/grad_norm", "train/pg_clipfrac", "train/tokens",
                 "train/kl_loss"):
        if name not in expected:
            continue
        assert got[name] == pytest.approx(expected[name], rel=TOLERANCE, abs=TOLERANCE), (label, name)
    assert expected["train/pg_clipfrac"] > 0 and expected["train/grad_norm"] > 1.0  # clipping of both kinds ran


# ------------------------------------------------------------------------------------------ tests

def test_logits_and_gradients_match_the_unsharded_model(tmp_path, family_paths):
    result = _torchrun(2, "forward", tmp_path, {"models": family_paths})
    for family, report in result.items():
        assert report["logits_max_diff"] < TOLERANCE, (family, report["logits_max_diff"])
        assert report["tied"] == (family == "qwen3"), family
        sharded = {name for name, info in report["params"].items() if info["sharded"]}
        # every projection, the embedding and the LM head are really split over the two ranks
        projections = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
        expected = {f"model.layers.{i}.{p}.weight" for i in range(2) for p in projections}
        expected.add("model.embed_tokens.weight")
        if not report["tied"]:
            expected.add("lm_head.weight")
        assert expected <= sharded, (family, expected - sharded)
        if family == "qwen2":
            assert "model.layers.0.self_attn.q_proj.bias" in sharded
        for name, info in report["params"].items():
            assert info["grad_max_diff"] < TOLERANCE, (family, name, info)
            assert info["grad_abs_max"] > 0, (family, name)  # a gradient that is all zeros compares too easily
        if family == "qwen3":  # the per-head norms got the gradient of all heads, not of this rank's half
            assert report["params"]["model.layers.0.self_attn.q_norm.weight"]["grad_max_diff"] < TOLERANCE


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_train_step_under_tp_matches_a_single_process_step(tmp_path, family_paths, dist_info, family):
    from safetensors.torch import load_file

    # llama also trains with a KL loss (its reference log-probs come from a tensor-parallel reference model),
    # qwen3 with activation checkpointing (the backward recomputes the sharded blocks)
    flags = ["--use-kl-loss", "--kl-loss-coef", "0.1"] if family == "llama" else ["--gradient-checkpointing"]
    single_metrics, single_state = _single_process_step(dist_info, family_paths[family], flags)
    result = _torchrun(2, "train", tmp_path, {"model": family_paths[family], "tp": 2, "flags": flags,
                                              "checkpoint": True})
    assert result["parallel"] == "none (dp=1 x tp=2)"
    _assert_same_metrics(single_metrics, result["metrics"], family)
    _assert_same_weights(single_state, torch.load(tmp_path / "state.pt"), family)
    # the exported HF folder (what engines load and checkpoints keep) holds the full tensors
    exported = load_file(tmp_path / "ckpt" / "model" / "model.safetensors")
    names = set(exported)
    assert names and names <= set(single_state)
    _assert_same_weights({k: single_state[k] for k in names}, exported, family + " export")
    # a run resumed from the checkpoint under TP continues exactly like the run that wrote it
    assert result["resumed_max_diff"] < TOLERANCE and result["continued_changed"] > 0
    if family == "llama":
        assert "train/kl_loss" in result["metrics"] and result["reference_tensor_parallel"]


@pytest.mark.slow
def test_two_dimensional_dp_x_tp_matches_a_single_process_step(tmp_path, family_paths, dist_info):
    """4 processes, dp=2 x tp=2: FSDP2 over the dp sub-mesh (per-token loss: a dp-group all-reduce decides
    the denominator) and the hand-made DDP average; both against one process on the whole batch."""
    for strategy, flags in (("fsdp", ["--calculate-per-token-loss"]), ("ddp", [])):
        single_metrics, single_state = _single_process_step(dist_info, family_paths["qwen3"], flags)
        out = tmp_path / strategy
        out.mkdir()
        result = _torchrun(4, "train", out, {"model": family_paths["qwen3"], "tp": 2, "checkpoint": strategy == "fsdp",
                                             "flags": ["--fsdp-strategy", strategy, *flags]}, timeout=420)
        assert result["parallel"] == f"{strategy} (dp=2 x tp=2)"
        _assert_same_metrics(single_metrics, result["metrics"], strategy)
        _assert_same_weights(single_state, torch.load(out / "state.pt"), strategy)
        if strategy == "fsdp":
            assert result["resumed_max_diff"] < TOLERANCE and result["continued_changed"] > 0


# ------------------------------------------------------------------------------------------ torchrun worker

def _forward_worker(out: Path, config: dict) -> None:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from transformers import AutoConfig, AutoModelForCausalLM

    from slime.backends.fsdp.tensor_parallel import apply_tensor_parallel, check_tensor_parallel, tensor_parallel_mesh

    dist.init_process_group("gloo")
    mesh = tensor_parallel_mesh("cpu", dist.get_world_size(), dist.get_world_size())
    report = {}
    for family, path in config["models"].items():
        plan = check_tensor_parallel(AutoConfig.from_pretrained(path), mesh["tp"].size(), dist.get_world_size())
        reference = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        sharded = apply_tensor_parallel(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
                                        mesh["tp"], plan)
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(0, 4000, (3, 13), generator=generator)
        mask = torch.ones_like(ids)
        mask[1, 9:] = 0  # a right-padded row
        targets = torch.randint(0, 4000, (3, 13), generator=generator)
        logits = {}
        for name, model in (("reference", reference), ("sharded", sharded)):
            out_logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
            torch.nn.functional.cross_entropy(out_logits.flatten(0, 1), targets.flatten(), reduction="none") \
                .mul(mask.flatten()).sum().backward()
            logits[name] = out_logits.detach()
        reference_params = dict(reference.named_parameters())
        params = {}
        for name, param in sharded.named_parameters():
            grad = param.grad.full_tensor() if isinstance(param.grad, DTensor) else param.grad
            expected = reference_params[name].grad
            local = param.to_local() if isinstance(param, DTensor) else param
            params[name] = {"sharded": local.shape != expected.shape,
                            "grad_max_diff": float((grad - expected).abs().max()),
                            "grad_abs_max": float(expected.abs().max())}
        report[family] = {"logits_max_diff": float((logits["reference"] - logits["sharded"]).abs().max()),
                          "tied": sharded.lm_head.weight is sharded.get_input_embeddings().weight,
                          "params": params}
    if dist.get_rank() == 0:
        (out / "result.json").write_text(json.dumps(report))


def _train_worker(out: Path, config: dict) -> None:
    from torch.distributed.tensor import DTensor

    from slime.backends.fsdp.parallel import barrier, init_distributed

    dist = init_distributed("cpu")
    rows = _rows()
    actor = _actor(config["model"], dist, config["tp"], config["flags"])
    metrics = _train_step(actor, rows)
    state = actor.full_state_dict()
    result = {"metrics": metrics, "parallel": actor.parallel_description,
              "reference_tensor_parallel": actor.ref_model is not None
              and isinstance(actor.ref_model.lm_head.weight, DTensor)}
    if dist.is_main:
        torch.save(state, out / "state.pt")
    if config.get("checkpoint"):
        ckpt = out / "ckpt"
        if dist.is_main:
            ckpt.mkdir()
        barrier()
        actor.save_checkpoint(ckpt)
        barrier()
        resumed = _actor(config["model"], dist, config["tp"], config["flags"], resume=ckpt)
        resumed.load_training_state(ckpt)
        _train_step(actor, rows)
        _train_step(resumed, rows)
        continued, again = actor.full_state_dict(), resumed.full_state_dict()
        if dist.is_main:
            result["resumed_max_diff"] = max(float((continued[k] - again[k]).abs().max()) for k in continued)
            result["continued_changed"] = max(float((continued[k] - state[k]).abs().max()) for k in continued)
    if dist.is_main:
        (out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    torch.set_num_threads(1)
    _mode, _out, _config = sys.argv[1:]
    {"forward": _forward_worker, "train": _train_worker}[_mode](Path(_out), json.loads(_config))
    from slime.backends.fsdp.parallel import leave_together

    leave_together()
