"""The `megatron` training backend: a megatron-core GPTModel (tensor / pipeline parallel), megatron's DDP and
(distributed) optimizer, with the same loss functions, hooks, log-prob and export interface as FSDPActor.

Data: the training loop gives every data-parallel rank (`dp_rank` of `dp_size`, megatron-core's DP group) its
share of each global batch; all ranks of one model-parallel group (TP x PP) get the same rows and build the
same micro-batches.

Logits: GPTModel keeps logits vocab-sharded; they are all-gathered over TP (an autograd-aware gather) and
the vocabulary padding is cut off, so `slime.utils.loss` functions see exactly the `[b, R, V]` logits the
fsdp backend gives them.

Weights out (engine sync, HF checkpoints): TP all-gather + PP gather, then Megatron -> HF conversion
(`model.gather_hf_state_dict`). Weights in: HF folder -> conversion -> this rank's shard.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import torch
import torch.distributed as torch_dist

from slime.backends.common import accumulate_metrics, average_metrics, link_tree, load_loss_function, lr_lambda
from slime.backends.fsdp import batching
from slime.backends.fsdp.parallel import DistInfo, all_reduce_sum
from slime.backends.megatron import convert
from slime.backends.megatron import model as mmodel
from slime.utils import ppo_utils


def parallel_sizes(args) -> mmodel.ParallelSizes:
    return mmodel.ParallelSizes(tensor=args.tensor_model_parallel_size, pipeline=args.pipeline_model_parallel_size,
                                context=args.context_parallel_size, sequence_parallel=args.sequence_parallel)


def init_parallel(args, dist_info: DistInfo) -> None:
    """megatron-core process groups (TP, PP, CP, DP) over the already initialised default group."""
    from megatron.core import parallel_state, tensor_parallel

    sizes = parallel_sizes(args)
    model_parallel = sizes.tensor * sizes.pipeline * sizes.context
    if dist_info.world_size % model_parallel:
        raise ValueError(f"world size {dist_info.world_size} is not a multiple of TP x PP x CP = {sizes.tensor} x "
                         f"{sizes.pipeline} x {sizes.context}")
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=sizes.tensor,
                                                 pipeline_model_parallel_size=sizes.pipeline,
                                                 context_parallel_size=sizes.context)
    if dist_info.device.type == "cuda":
        # per-TP-rank CUDA RNG streams (dropout inside tensor-parallel regions); on CPU nothing is random
        tensor_parallel.model_parallel_cuda_manual_seed(args.seed)


def _dtype(args) -> torch.dtype:
    return torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32


class MegatronActor:
    strategy = "megatron"

    def __init__(self, args, dist_info: DistInfo, model_path: str, tokenizer, resume_dir: Path | None = None):
        from megatron.core import parallel_state
        from transformers import AutoConfig

        if args.context_parallel_size > 1:
            raise NotImplementedError("--context-parallel-size > 1: the megatron actor does not split sequences "
                                      "into context-parallel chunks yet (needs Transformer Engine attention)")
        self.args = args
        self.dist = dist_info
        self.tokenizer = tokenizer
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.model_path = Path(model_path)
        self.hf_config = AutoConfig.from_pretrained(model_path)
        mmodel.check_model_args(args, self.hf_config)
        self.vocab_size = self.hf_config.vocab_size
        init_parallel(args, dist_info)
        self.ps = parallel_state
        self.dp_size = parallel_state.get_data_parallel_world_size()
        self.dp_rank = parallel_state.get_data_parallel_rank()
        self.model = self._build_model()
        self.module = self.model.module  # the GPTModel inside megatron's DDP
        weights_from = resume_dir / "model" if resume_dir else self.model_path
        weights = convert.read_weights_as_hf(weights_from, self.hf_config)  # an HF folder or a converted checkpoint
        mmodel.load_hf_state_dict(self.module, weights, self.hf_config)
        self.ref_state = self._load_ref() if args.ref_model_needed else None
        self._optimizer = None  # built at the first step: megatron-core's optimizers are CUDA-only
        self.lr_factor = lr_lambda(args, max(1, args.train_iters or 1))
        self.global_step = 0
        self.loss_fn = load_loss_function(args)
        self.num_trainable = sum(p.numel() for p in self.module.parameters() if p.requires_grad)

    @property
    def parallel_description(self) -> str:
        sizes = parallel_sizes(self.args)
        return (f"megatron-core (dp={self.dp_size} tp={sizes.tensor} pp={sizes.pipeline}"
                f"{' sp' if sizes.sequence_parallel and sizes.tensor > 1 else ''}"
                f"{' distributed-optimizer' if self.args.use_distributed_optimizer else ''})")

    # --- construction -------------------------------------------------------------------
    def _build_model(self):
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig

        args = self.args
        recompute = mmodel.Recompute(args.recompute_granularity, args.recompute_method, args.recompute_num_layers)
        gpt = mmodel.build_gpt_model(self.hf_config, parallel_sizes(args), dtype=_dtype(args), recompute=recompute,
                                     cpu_init=self.dist.device.type == "cpu", impl=args.transformer_impl)
        if self.dist.device.type == "cuda":
            gpt = gpt.cuda(torch.cuda.current_device())
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=args.accumulate_allreduce_grads_in_fp32,
            overlap_grad_reduce=False,
            use_distributed_optimizer=args.use_distributed_optimizer)
        return DistributedDataParallel(config=gpt.config, ddp_config=ddp_config, module=gpt)

    @property
    def optimizer(self):
        if self._optimizer is None:
            self._optimizer = self._build_optimizer()
        return self._optimizer

    def _build_optimizer(self):
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        args = self.args
        config = OptimizerConfig(
            optimizer="adam", lr=args.lr, min_lr=args.min_lr, weight_decay=args.weight_decay,
            adam_beta1=args.adam_beta1, adam_beta2=args.adam_beta2, adam_eps=args.adam_eps,
            clip_grad=args.clip_grad or 0.0, bf16=args.bf16, fp16=args.fp16, params_dtype=_dtype(args),
            use_distributed_optimizer=args.use_distributed_optimizer,
            optimizer_cpu_offload=args.optimizer_cpu_offload,
            overlap_cpu_optimizer_d2h_h2d=args.overlap_cpu_optimizer_d2h_h2d,
            use_precision_aware_optimizer=args.use_precision_aware_optimizer)
        return get_megatron_optimizer(config, [self.model])

    def _load_ref(self) -> dict[str, torch.Tensor]:
        """The reference weights as a CPU stash of this rank's shard (swapped in for the ref log-prob pass,
        as upstream's TensorBackuper does: one model object, two weight sets)."""
        current = self._stash()
        mmodel.load_hf_state_dict(self.module, convert.read_weights_as_hf(self.args.ref_load, self.hf_config),
                                  self.hf_config)
        ref = self._stash()
        self._restore(current)
        return ref

    def _stash(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().to("cpu", copy=True) for name, p in self.module.named_parameters()}

    def _restore(self, stash: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, p in self.module.named_parameters():
                p.copy_(stash[name])

    # --- data ---------------------------------------------------------------------------
    def _micro_batches(self, rows: list[dict], budget: int | None) -> list[list[int]]:
        if any(r.get("multimodal_inputs") or r.get("multimodal_train_inputs") for r in rows):
            raise NotImplementedError("samples with images train on the fsdp backend only (--train-backend fsdp)")
        max_rows = None if self.args.use_dynamic_batch_size else self.args.micro_batch_size
        return batching.split_by_token_budget([len(r["tokens"]) for r in rows],
                                              budget if self.args.use_dynamic_batch_size else None, max_rows)

    # --- forward ------------------------------------------------------------------------
    def _logits(self, mb: batching.MicroBatch) -> torch.Tensor | None:
        """Response logits `[b, R, V]` at the rollout temperature (None on non-last pipeline stages)."""
        from megatron.core.tensor_parallel import gather_from_tensor_model_parallel_region

        device = self.dist.device
        ids = mb.input_ids.to(device)
        positions = torch.arange(ids.shape[1], device=device).expand_as(ids)
        # right padding + causal attention: real tokens never attend to padding, so no explicit mask is needed
        out = self.model(ids, positions, None)
        if not self.ps.is_pipeline_last_stage():
            return None
        full = gather_from_tensor_model_parallel_region(out)[..., : self.vocab_size]
        return batching.response_logits(full.float(), mb, self.args.rollout_temperature)

    @torch.no_grad()
    def compute_log_probs(self, rows: list[dict], use_ref: bool = False) -> list[list[float]]:
        if use_ref and self.ref_state is None:
            raise RuntimeError("no reference model was loaded (--use-kl-loss with a non-zero --kl-loss-coef needs one)")
        actor_state = self._stash() if use_ref else None
        if use_ref:
            self._restore(self.ref_state)
        self.model.eval()
        results: list[list[float]] = [[] for _ in rows]
        try:
            budget = self.args.log_probs_max_tokens_per_gpu or self.args.max_tokens_per_gpu
            for group in self._micro_batches(rows, budget):
                mb = batching.collate(rows, group, self.pad_token_id)
                logits = self._forward_stage(mb)
                if logits is None:
                    continue
                lp = ppo_utils.log_probs_from_logits(logits, batching.response_tokens(mb).to(logits.device)).cpu()
                for b, index in enumerate(group):
                    results[index] = lp[b, : mb.response_lengths[b]].tolist()
        finally:
            self.model.train()
            if actor_state is not None:
                self._restore(actor_state)
        if self.ps.get_pipeline_model_parallel_world_size() > 1:  # only the last stage has logits
            holder = [results]
            last = self.ps.get_pipeline_model_parallel_last_rank()
            torch_dist.broadcast_object_list(holder, src=last, group=self.ps.get_pipeline_model_parallel_group())
            results = holder[0]
        return results

    def _forward_stage(self, mb):
        if self.ps.get_pipeline_model_parallel_world_size() == 1:
            return self._logits(mb)
        outputs = []
        self._pipeline([mb], forward_only=True, on_logits=lambda mb_, logits: outputs.append(logits))
        return outputs[0] if outputs else None

    # --- training -----------------------------------------------------------------------
    def train_step(self, rows: list[dict], global_batch_size: int) -> dict:
        """One optimizer step on this rank's share of a global batch; returns metrics averaged globally."""
        args = self.args
        started = time.perf_counter()
        self.optimizer.zero_grad()
        sums, local_tokens, denominator = self.accumulate_gradients(rows, global_batch_size)
        for group in self.optimizer.param_groups:
            group["lr"] = args.lr * self.lr_factor(self.global_step)
        _, grad_norm, _ = self.optimizer.step()
        self.global_step += 1
        result = self._reduce_metrics(sums, local_tokens, denominator)
        elapsed = time.perf_counter() - started
        result.update({"train/grad_norm": float(grad_norm or 0.0),
                       "train/lr": args.lr * self.lr_factor(self.global_step - 1),
                       "perf/train_step_time": elapsed,
                       "perf/train_tokens_per_s": result["train/tokens"] / max(elapsed, 1e-9)})
        return result

    def accumulate_gradients(self, rows: list[dict], global_batch_size: int) -> tuple[dict, float, float]:
        """Forward/backward over the micro-batches of `rows`, gradients reduced over DP into the DDP buffers
        (`param.main_grad`). Returns (per-key metric sums, local masked tokens, loss denominator)."""
        args = self.args
        per_token = args.calculate_per_token_loss
        local_tokens = sum(sum(r["loss_mask"]) for r in rows)
        if per_token:
            denominator = self._dp_sum([float(local_tokens)])[0]
        else:
            denominator = float(global_batch_size)
        # megatron's DDP averages gradients over DP: x dp_size turns the average into the global sum / denominator
        scale = self.dp_size / max(denominator, 1.0)
        groups = [g for g in self._micro_batches(rows, args.max_tokens_per_gpu) if g]
        batches = [batching.collate(rows, g, self.pad_token_id) for g in groups]
        self.model.zero_grad_buffer()
        sums: dict[str, float] = {}

        def loss_of(mb, logits):
            batch = batching.loss_batch(mb, logits.device)
            loss, metrics = self.loss_fn(args, batch, logits, batching.reducer(batch, per_token))
            accumulate_metrics(sums, metrics)
            return loss * scale

        if self.ps.get_pipeline_model_parallel_world_size() == 1:
            for index, mb in enumerate(batches):
                # accumulate locally; the DP reduction runs once, in finalize_model_grads below
                sync = contextlib.nullcontext() if index == len(batches) - 1 else self.model.no_sync()
                with sync:
                    loss_of(mb, self._logits(mb)).backward()
            self._finalize_grads()
        else:
            self._pipeline(batches, forward_only=False, loss_of=loss_of)
        return sums, float(local_tokens), denominator

    def _reduce_metrics(self, sums: dict, local_tokens: float, denominator: float) -> dict:
        keys = sorted(sums)
        # metrics live on the last pipeline stage; every TP rank computed the same values: count TP rank 0 only
        counts = self.ps.is_pipeline_last_stage() and self.ps.get_tensor_model_parallel_rank() == 0
        local = [sums[k] if counts else 0.0 for k in keys] + [local_tokens if counts else 0.0]
        totals = all_reduce_sum(local, self.dist.device)  # over every rank
        result = average_metrics(dict(zip(keys, totals[:-1])), denominator)
        result["train/tokens"] = totals[-1]
        return result

    def _finalize_grads(self):
        from megatron.core.distributed import finalize_model_grads

        finalize_model_grads([self.model])

    def _pipeline(self, batches, forward_only: bool, loss_of=None, on_logits=None):
        """Pipeline-parallel schedule (megatron-core's get_forward_backward_func; GPU only, see README)."""
        from megatron.core.distributed import finalize_model_grads
        from megatron.core.pipeline_parallel import get_forward_backward_func

        config = self.module.config
        config.no_sync_func = self.model.no_sync
        config.finalize_model_grads_func = finalize_model_grads
        iterator = iter(batches)
        count = len(batches)

        def forward_step(data_iterator, model):
            mb = next(data_iterator)
            ids = mb.input_ids.to(self.dist.device)
            out = model(ids, torch.arange(ids.shape[1], device=ids.device).expand_as(ids), None)

            def loss_func(output):
                from megatron.core.tensor_parallel import gather_from_tensor_model_parallel_region

                full = gather_from_tensor_model_parallel_region(output)[..., : self.vocab_size]
                logits = batching.response_logits(full.float(), mb, self.args.rollout_temperature)
                if on_logits is not None:
                    on_logits(mb, logits)
                    return logits.sum() * 0, {}
                # the schedule divides by the number of micro-batches; undo it (our scale already normalises)
                return loss_of(mb, logits) * count, {}

            return out, loss_func

        get_forward_backward_func()(forward_step_func=forward_step, data_iterator=iterator, model=[self.model],
                                    num_microbatches=count, seq_length=max(b.input_ids.shape[1] for b in batches),
                                    micro_batch_size=max(b.input_ids.shape[0] for b in batches),
                                    forward_only=forward_only)

    def _dp_sum(self, values: list[float]) -> list[float]:
        return all_reduce_sum(values, self.dist.device, self.ps.get_data_parallel_group())

    # --- weights out ----------------------------------------------------------------------
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The whole model as an HF state dict on rank 0 (collective; other ranks get an empty dict)."""
        return mmodel.gather_hf_state_dict(self.module, self.hf_config)

    def export_hf(self, out_dir: Path, state_dict: dict | None = None) -> Path:
        """Write the policy as an HF folder (config, safetensors, tokenizer) that engines and `from_pretrained`
        load; rank 0 writes."""
        from safetensors.torch import save_file

        sd = self.full_state_dict() if state_dict is None else state_dict
        if self.dist.is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
            self.hf_config.save_pretrained(str(out_dir))
            save_file(sd, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
            self.tokenizer.save_pretrained(str(out_dir))
            generation = self.model_path / "generation_config.json"
            if generation.exists():
                (out_dir / "generation_config.json").write_bytes(generation.read_bytes())
        return out_dir

    # --- checkpoints --------------------------------------------------------------------
    def save_checkpoint(self, ckpt_dir: Path, exported: Path | None = None):
        """HF weights (ckpt_dir/model) plus each rank's optimizer shard (ckpt_dir/megatron_optimizer/)."""
        if exported is None:
            self.export_hf(ckpt_dir / "model")
        elif self.dist.is_main:
            link_tree(exported, ckpt_dir / "model")
        folder = ckpt_dir / "megatron_optimizer"
        folder.mkdir(parents=True, exist_ok=True)
        torch.save({"optimizer": self.optimizer.state_dict(), "global_step": self.global_step},
                   folder / f"rank_{self.dist.rank:05d}.pt")
        if self.args.use_distributed_optimizer:  # the Adam moments live in the DP-sharded parameter state
            self.optimizer.save_parameter_state(str(folder / "param_state.pt"))

    def load_training_state(self, ckpt_dir: Path):
        """Restore optimizer and step (the weights were loaded at construction). Same parallel layout only."""
        folder = ckpt_dir / "megatron_optimizer"
        state = torch.load(folder / f"rank_{self.dist.rank:05d}.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.args.use_distributed_optimizer:
            self.optimizer.load_parameter_state(str(folder / "param_state.pt"))
        self.global_step = state["global_step"]
