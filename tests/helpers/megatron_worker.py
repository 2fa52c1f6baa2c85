"""Worker for tests/integration/test_megatron_model.py, run under torchrun (gloo, CPU, with the megatron_cpu shim).

    torchrun --nproc_per_node=N tests/helpers/megatron_worker.py logits MODEL_DIR OUT
        GPTModel at TP=N from MODEL_DIR's HF weights; rank 0 writes the gathered logits, the HF model's logits
        and whether the exported HF state dict equals the original (OUT, torch.save).
    torchrun --nproc_per_node=N tests/helpers/megatron_worker.py step BACKEND OUT [flags...]
        One log-prob pass and the gradients of one training step of the megatron (TP=N) or fsdp actor on
        fixed rows; rank 0 writes the log-probs, the loss metrics and the gradients (HF names).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `helpers` importable under torchrun

from helpers import megatron_cpu  # noqa: E402


def fixed_input(vocab: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)  # the same ids on every rank
    return torch.randint(0, vocab, (2, 12), generator=generator)


def logits_mode(model_dir: str, out: str) -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import gather_from_tensor_model_parallel_region
    from transformers import AutoModelForCausalLM

    from slime.backends.megatron import model as mmodel

    dist.init_process_group("gloo")
    tp = dist.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    megatron_cpu.install()
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    gpt = mmodel.build_gpt_model(hf.config, mmodel.ParallelSizes(tensor=tp), cpu_init=True)
    mmodel.load_hf_state_dict(gpt, hf.state_dict(), hf.config)
    gpt.eval()
    ids = fixed_input(hf.config.vocab_size)
    with torch.no_grad():
        local = gpt(ids, torch.arange(ids.shape[1]).expand_as(ids), None)
        logits = gather_from_tensor_model_parallel_region(local)[..., : hf.config.vocab_size]
        reference = hf(ids).logits
    exported = mmodel.gather_hf_state_dict(gpt, hf.config)
    if dist.get_rank() == 0:
        original = hf.state_dict()
        torch.save({"logits": logits, "reference": reference, "local_vocab": local.shape[-1],
                    "export_equal": {k: torch.equal(v, original[k]) for k, v in exported.items()}}, out)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


def fixed_rows() -> list[dict]:
    rng = random.Random(0)
    rows = []
    for _ in range(4):
        prompt, response = rng.randint(4, 12), rng.randint(2, 9)
        rows.append({"tokens": [rng.randrange(4000) for _ in range(prompt + response)], "response_length": response,
                     "loss_mask": [1] * response, "advantages": [rng.uniform(-1, 1)] * response,
                     "rollout_log_probs": None})
    return rows


def step_mode(backend: str, out: str, flags: list[str]) -> None:
    from transformers import AutoTokenizer

    from slime.backends.fsdp.parallel import init_distributed
    from slime.models import resolve_model_path
    from slime.training.loop import build_actor
    from slime.utils.arguments import parse_args

    dist = init_distributed("cpu")
    if backend == "megatron":
        from megatron.core import parallel_state

        parallel_state.initialize_model_parallel(tensor_model_parallel_size=dist.world_size)
        megatron_cpu.install()
        flags = ["--tensor-model-parallel-size", str(dist.world_size), *flags]
    args = parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--clip-grad", "0",
                       "--micro-batch-size", "2", "--rollout-temperature", "0.8", "--disable-rewards-normalization",
                       "--train-backend", backend, *flags], world_size=1)
    path = str(resolve_model_path("tiny"))
    actor = build_actor(args, dist, path, AutoTokenizer.from_pretrained(path), None)
    rows = fixed_rows()  # data-parallel size 1: every rank (TP peer) gets all rows
    log_probs = actor.compute_log_probs(rows)
    for row, lp in zip(rows, log_probs):
        row["old_log_probs"] = [v - 0.3 for v in lp]  # an off-policy gap so clipping matters
    # Gradients of one step, in HF layout. megatron-core's optimizers are CUDA-only, so no optimizer step:
    # megatron: the DDP grad buffers (param.main_grad) are copied into the weights and exported through the
    # same Megatron -> HF path as the weights; fsdp: a step with the optimizer update switched off.
    if backend == "megatron":
        sums, tokens, denominator = actor.accumulate_gradients(rows, 4)
        metrics = actor._reduce_metrics(sums, tokens, denominator)
        with torch.no_grad():
            for param in actor.module.parameters():
                param.copy_(param.main_grad)
        grads = actor.full_state_dict()
    else:
        actor.optimizer.step = lambda: None
        metrics = actor.train_step(rows, 4)
        grads = {name: p.grad.detach().clone() for name, p in actor.hf_model.named_parameters()}
    if dist.is_main:
        torch.save({"log_probs": log_probs, "metrics": metrics, "grads": grads,
                    "description": getattr(actor, "parallel_description", actor.strategy)}, out)

if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "logits":
        logits_mode(*rest)
    else:
        step_mode(rest[0], rest[1], rest[2:])
