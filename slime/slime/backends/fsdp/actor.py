"""The `fsdp` training backend: an HF causal LM under FSDP2 (or DDP), AdamW, LoRA through PEFT.

Vision-language models (Qwen2-VL / Qwen2.5-VL architecture) load as AutoModelForImageTextToText; a row with
images (`multimodal_inputs` / `multimodal_train_inputs`) gets them preprocessed as the engine did and its
forward gets pixel_values, image_grid_thw and explicit M-RoPE position_ids (slime.models.vlm), so the
trainer scores exactly the ids and pixels the engine sampled from. Text models keep the plain forward.

Every rank builds the same model and runs the same number of forward/backward passes per step
(micro-batch counts are agreed with an all-reduce, because FSDP2's per-layer all-gathers are
collectives). Losses come from `slime.utils.loss` or a custom plugin with the same contract.

With `--tensor-model-parallel-size tp > 1` the ranks form a (dp, tp) mesh: each decoder block is
sharded over the tp ranks (`tensor_parallel`), and FSDP2 (or a hand-made DDP all-reduce) runs over the
dp ranks only. Ranks of one tp group train on the same rows; batches are split over dp ranks.
"""

from __future__ import annotations

import json

import logging
import time
from pathlib import Path

import torch

from slime.backends.common import accumulate_metrics, average_metrics, link_tree, load_loss_function, lr_lambda
from slime.backends.fsdp import batching, gradients
from slime.backends.fsdp.parallel import DistInfo, all_reduce_max, all_reduce_sum, data_parallel_size
from slime.utils import ppo_utils

log = logging.getLogger(__name__)


def _top_layers(model, top: int) -> list[int] | None:
    """The indices of the top `top` transformer layers (None: every layer)."""
    if not top:
        return None
    config = getattr(model.config, "text_config", None) or model.config
    layers = int(config.num_hidden_layers)
    if top > layers:
        raise ValueError(f"--lora-top-layers {top}: the model has {layers} layers")
    return list(range(layers - top, layers))


def _names(value) -> list[str]:
    """Module names given as a list or a comma-separated string."""
    if not value:
        return []
    items = value.split(",") if isinstance(value, str) else value
    return [item.strip() for item in items if item.strip()]


def _decoder_layers(model) -> list[torch.nn.Module]:
    """Transformer blocks to shard one by one (by the class names HF lists in `_no_split_modules`)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(inner, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


class FSDPActor:
    def __init__(self, args, dist_info: DistInfo, model_path: str, tokenizer, resume_dir: Path | None = None):
        """`resume_dir`: a checkpoint folder whose weights replace those of `model_path` (before sharding)."""
        self.args = args
        self.dist = dist_info
        self.tokenizer = tokenizer
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.dtype = torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32
        self._init_vision(model_path)
        self._init_layout(model_path)
        self.hf_model = self._build(model_path, resume_dir / "model" if resume_dir else None)
        self.ref_model = self._build_ref() if args.ref_model_needed and not args.use_lora else None
        self.strategy = self._strategy()
        self.model = self._wrap(self.hf_model)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=args.lr, betas=(args.adam_beta1, args.adam_beta2),
                                           eps=args.adam_eps, weight_decay=args.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(args, max(1, args.train_iters)))
        self.global_step = 0
        self.loss_fn = load_loss_function(args)
        self.num_trainable = sum(p.numel() for p in trainable)

    # --- construction -------------------------------------------------------------------
    def _init_vision(self, model_path):
        """Is the policy a vision-language model (a vision tower and M-RoPE); if so its preprocessing constants."""
        from slime.models.vision import vision_constants

        constants = vision_constants(model_path)
        self.is_vision = constants is not None
        self.vision_spec, self.image_token_id = constants or (None, None)
        if self.is_vision:
            if (getattr(self.args, "tensor_model_parallel_size", None) or 1) > 1:
                raise ValueError("--tensor-model-parallel-size > 1 is not supported for vision-language models on "
                                 "the fsdp backend (the vision tower has no tensor-parallel plan)")

    def _init_layout(self, model_path):
        """Data- and tensor-parallel sizes, ranks and groups (validated before any weights are loaded)."""
        self.dp_size = data_parallel_size(self.dist.world_size, getattr(self.args, "tensor_model_parallel_size", None))
        self.tp_size = self.dist.world_size // self.dp_size
        self.dp_rank, self.tp_rank = divmod(self.dist.rank, self.tp_size)
        self.mesh = self.tp_plan = None
        if self.tp_size > 1:
            from transformers import AutoConfig

            from slime.backends.fsdp.tensor_parallel import check_tensor_parallel, tensor_parallel_mesh

            self.tp_plan = check_tensor_parallel(AutoConfig.from_pretrained(str(model_path)), self.tp_size,
                                                 self.dist.world_size, use_lora=self.args.use_lora)
            self.mesh = tensor_parallel_mesh(self.dist.device.type, self.dist.world_size, self.tp_size)
            if getattr(self.args, "sequence_parallel", False) and self.dist.is_main:
                log.warning("--sequence-parallel has no effect on the fsdp backend: activations between "
                            "blocks stay replicated over the %d tensor-parallel ranks", self.tp_size)
        # the group over which different rows are trained (None: every rank)
        self.dp_group = self.mesh.get_group("dp") if self.mesh is not None else None

    @property
    def parallel_description(self) -> str:
        tp = f" x tp={self.tp_size}" if self.tp_size > 1 else ""
        return f"{self.strategy} (dp={self.dp_size}{tp})"

    def _load_hf(self, path):
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

        # AutoModelForCausalLM refuses a Qwen2.5-VL config; the image-text class keeps the vision tower
        auto = AutoModelForImageTextToText if self.is_vision else AutoModelForCausalLM
        model = auto.from_pretrained(str(path), dtype=self.dtype).to(self.dist.device)
        if self.mesh is not None:
            from slime.backends.fsdp.tensor_parallel import apply_tensor_parallel

            apply_tensor_parallel(model, self.mesh["tp"], self.tp_plan)
        return model

    def _build(self, model_path, saved: Path | None):
        args = self.args
        torch.manual_seed(args.seed)
        model = self._load_hf(saved if saved is not None and not args.use_lora else model_path)
        if args.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if args.use_lora and saved is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(saved), is_trainable=True)
        elif args.use_lora:
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
                                target_modules=_names(args.lora_target_modules), bias="none", task_type="CAUSAL_LM",
                                modules_to_save=_names(getattr(args, "lora_modules_to_save", None)) or None,
                                layers_to_transform=_top_layers(model, getattr(args, "lora_top_layers", 0)))
            model = get_peft_model(model, config)
        model.train()
        return model

    def _build_ref(self):
        ref = self._load_hf(self.args.ref_load)
        ref.eval()
        ref.requires_grad_(False)
        return ref

    def _strategy(self) -> str:
        chosen = getattr(self.args, "fsdp_strategy", "auto")
        if self.dp_size == 1:  # a single process, or tensor parallel only
            return "none"
        if chosen == "auto":
            # On CPU/gloo the per-layer all-gathers of FSDP2 cost more than DDP's single gradient
            # all-reduce for the model sizes that fit a CPU; on GPUs sharding is what makes models fit.
            return "fsdp" if self.dist.device.type == "cuda" else "ddp"
        return chosen

    def _wrap(self, model):
        if self.strategy == "ddp" and self.mesh is not None:
            # DDP cannot wrap DTensor parameters: gradients are averaged over dp by `_finish_gradients`
            return model
        if self.strategy == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            # buffers (rotary tables) are identical on every rank; broadcasting them each forward
            # would add a collective per micro-batch
            return DistributedDataParallel(model, broadcast_buffers=False,
                                           device_ids=[self.dist.local_rank] if self.dist.device.type == "cuda" else None)
        if self.strategy == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            # under TP: the dp sub-mesh, so FSDP2 shards the TP DTensors further into 2-D DTensors
            mesh = self.mesh["dp"] if self.mesh is not None else init_device_mesh(self.dist.device.type,
                                                                                  (self.dist.world_size,))
            for layer in self._sharded_blocks(model):
                fully_shard(layer, mesh=mesh)
            fully_shard(model, mesh=mesh)
        return model

    def _sharded_blocks(self, model) -> list[torch.nn.Module]:
        """The blocks FSDP2 shards one by one. A vision tower's blocks stay in the root group, gathered with it
        once per forward: a micro-batch without images runs the tower after the language model
        (`_idle_vision_tower`), and per-block all-gathers there would come in another order than on a rank
        whose micro-batch has images (the tower first): a collective mismatch."""
        layers = _decoder_layers(model)
        if not self.is_vision:
            return layers
        from slime.models.vlm import _inner

        vision = {id(m) for m in _inner(model).visual.modules()}
        return [layer for layer in layers if id(layer) not in vision]

    # --- forward passes -------------------------------------------------------------------
    def _forward(self, model, mb: batching.MicroBatch) -> torch.Tensor:
        if self.is_vision:
            return self._forward_vision(model, mb)
        start, end = batching.logit_window(mb)
        out = model(input_ids=mb.input_ids.to(self.dist.device), attention_mask=mb.attention_mask.to(self.dist.device),
                    use_cache=False, logits_to_keep=torch.arange(start, end, device=self.dist.device))
        return batching.response_logits(out.logits.float(), mb, self.args.rollout_temperature, offset=start)

    def _forward_vision(self, model, mb: batching.MicroBatch) -> torch.Tensor:
        """A vision-language forward: the micro-batch's images and explicit M-RoPE positions (transformers infers
        3D positions only when also given mm_token_type_ids, and falls back to 1D ones silently otherwise)."""
        from slime.models import vlm

        device = self.dist.device
        start, end = batching.logit_window(mb)
        ids, mask = mb.input_ids.to(device), mb.attention_mask.to(device)
        # the unwrapped model (`model` may be the DDP/FSDP wrapper); a ref_model of None never matches, as the
        # `model(...)` call below needs a model
        hf = self.ref_model if model is self.ref_model else self.hf_model
        positions, _ = vlm.mrope_positions(hf, ids, mb.image_grid_thw, mask)
        images = {}
        if mb.pixel_values is not None:
            images = {"pixel_values": mb.pixel_values.to(device, self.dtype),
                      "image_grid_thw": mb.image_grid_thw.to(device)}
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions.to(device), use_cache=False,
                     logits_to_keep=torch.arange(start, end, device=device), **images)
        logits = out.logits.float()
        if mb.pixel_values is None and self.dp_size > 1:
            logits = logits + 0.0 * self._idle_vision_tower(hf)
        return batching.response_logits(logits, mb, self.args.rollout_temperature, offset=start)

    def _idle_vision_tower(self, hf) -> torch.Tensor:
        """The vision tower on a one-token blank image, summed: for micro-batches without images, so that every
        rank runs the same modules (FSDP2 all-gathers the vision blocks collectively; DDP expects a gradient,
        here 0, for every parameter)."""
        m, p, t = self.vision_spec.merge_size, self.vision_spec.patch_size, self.vision_spec.temporal_patch_size
        channels = getattr(hf.config.vision_config, "in_channels", None) or getattr(hf.config.vision_config,
                                                                                     "in_chans", 3)
        pixels = torch.zeros((m * m, channels * t * p * p), device=self.dist.device, dtype=self.dtype)
        grid = torch.tensor([[1, m, m]], device=self.dist.device)
        from slime.models.vlm import _inner

        features = _inner(hf).get_image_features(pixels, grid, return_dict=True).pooler_output
        return sum(f.float().sum() for f in features)

    def _attach_images(self, rows: list[dict]) -> None:
        """Preprocess each row's images once (kept on the row as `image_inputs` for collate) and check that its
        expanded image pads match them: a mismatch would put image features on the wrong tokens."""
        from slime.models.vision import image_token_counts, sample_image_inputs

        for row in rows:
            if "image_inputs" in row:
                continue
            mm, mm_train = row.get("multimodal_inputs"), row.get("multimodal_train_inputs")
            if not mm and not mm_train:
                row["image_inputs"] = None
                continue
            if not self.is_vision:
                raise ValueError(f"sample {row.get('index')} has images but the policy is a text-only model")
            inputs = sample_image_inputs(mm, mm_train, self.vision_spec)
            if inputs is not None:
                pads = sum(1 for t in row["tokens"] if t == self.image_token_id)
                needed = sum(image_token_counts(inputs.image_grid_thw, self.vision_spec.merge_size))
                if pads != needed:
                    raise ValueError(f"sample {row.get('index')}: {pads} image pad tokens (id {self.image_token_id}) "
                                     f"for images that take {needed}: tokens must hold the engine's expanded prompt ids")
            row["image_inputs"] = inputs

    def _micro_batches(self, rows: list[dict], budget: int | None) -> list[list[int]]:
        """Split rows by token budget, then agree on one micro-batch count across ranks."""
        lengths = [len(r["tokens"]) for r in rows]
        max_rows = None if self.args.use_dynamic_batch_size else self.args.micro_batch_size
        groups = batching.split_by_token_budget(lengths, budget if self.args.use_dynamic_batch_size else None,
                                                max_rows)
        target = all_reduce_max(len(groups), self.dist.device)
        while len(groups) < target:  # split the largest group; empty groups become zero-loss passes
            largest = max(range(len(groups)), key=lambda g: len(groups[g]))
            if len(groups[largest]) > 1:
                half = len(groups[largest]) // 2
                groups.append(groups[largest][half:])
                groups[largest] = groups[largest][:half]
            else:
                groups.append([])
        return groups

    @torch.no_grad()
    def compute_log_probs(self, rows: list[dict], use_ref: bool = False) -> list[list[float]]:
        """Per-row response log-probs under the current (or reference) weights, at the rollout temperature."""
        results: list[list[float]] = [[] for _ in rows]
        for group, mb, logits in self._response_logits(rows, use_ref):
            lp = ppo_utils.log_probs_from_logits(logits, batching.response_tokens(mb).to(logits.device)).cpu()
            for b, row_index in enumerate(group):
                results[row_index] = lp[b, : mb.response_lengths[b]].tolist()
        return results

    @torch.no_grad()
    def compute_ref_log_probs_and_topk(self, rows: list[dict], k: int) -> list[tuple[list, list, list]]:
        """Per row, from one reference forward: the sampled tokens' log-probs, and the reference's K most likely
        tokens at every response position (log-probs `[R][K]`, token ids `[R][K]`) for `--kl-loss-topk`."""
        results: list[tuple[list, list, list]] = [([], [], []) for _ in rows]
        for group, mb, logits in self._response_logits(rows, use_ref=True):
            log_probs = torch.log_softmax(logits.float(), dim=-1)
            sampled = log_probs.gather(-1, batching.response_tokens(mb).to(logits.device).unsqueeze(-1)).squeeze(-1)
            top_values, top_indices = log_probs.topk(min(k, log_probs.shape[-1]), dim=-1)
            sampled, top_values, top_indices = sampled.cpu(), top_values.cpu(), top_indices.cpu()
            for b, row_index in enumerate(group):
                n = mb.response_lengths[b]
                results[row_index] = (sampled[b, :n].tolist(), top_values[b, :n].tolist(), top_indices[b, :n].tolist())
        return results

    def _response_logits(self, rows: list[dict], use_ref: bool):
        """(row indices, micro-batch, response logits) per micro-batch of a no-grad pass; every rank runs the
        same number of passes (an empty group still runs one on row 0 and is not yielded)."""
        budget = self.args.log_probs_max_tokens_per_gpu or self.args.max_tokens_per_gpu
        self._attach_images(rows)
        for group in self._micro_batches(rows, budget):
            mb = batching.collate(rows, group or [0], self.pad_token_id)  # [0]: a pass to keep ranks in step
            if use_ref and self.ref_model is None:  # LoRA: the reference is the base without the adapter
                with self.hf_model.disable_adapter():
                    logits = self._forward(self.model, mb)
            else:
                logits = self._forward(self.ref_model if use_ref else self.model, mb)
            if group:
                yield group, mb, logits

    # --- training -----------------------------------------------------------------------
    def train_step(self, rows: list[dict], global_batch_size: int) -> dict:
        """One optimizer step on this rank's share of a global batch; returns metrics averaged globally."""
        args = self.args
        started = time.perf_counter()
        groups = self._micro_batches(rows, args.max_tokens_per_gpu)
        self._attach_images(rows)
        per_token = args.calculate_per_token_loss
        if per_token:
            local_tokens = sum(sum(r["loss_mask"]) for r in rows)
            denominator = all_reduce_sum([local_tokens], self.dist.device, self.dp_group)[0]
        else:
            denominator = float(global_batch_size)
        # DDP/FSDP average gradients over dp ranks; multiplying by the dp size turns that average
        # into the sum over the global batch divided by `denominator`. (TP ranks of one group compute
        # the same loss on the same rows; each gets the gradient of its own shards, nothing to average.)
        scale = self.dp_size / max(denominator, 1.0)
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        trained_tokens = 0
        for index, group in enumerate(groups):
            last = index == len(groups) - 1
            mb = batching.collate(rows, group or [0], self.pad_token_id)
            self._set_grad_sync(last)
            logits = self._forward(self.model, mb)
            batch = batching.loss_batch(mb, logits.device)
            mask = batch["loss_mask"] if group else torch.zeros_like(batch["loss_mask"])
            batch["loss_mask"] = mask
            loss, metrics = self.loss_fn(args, batch, logits, batching.reducer(batch, per_token))
            (loss * scale).backward()
            accumulate_metrics(sums, metrics)
            trained_tokens += int(mask.sum())
        self._set_grad_sync(True)
        self._finish_gradients()
        grad_norm = self._clip_gradients()
        self.optimizer.step()
        self.scheduler.step()
        self.global_step += 1
        keys = sorted(sums)
        totals = all_reduce_sum([sums[k] for k in keys] + [float(trained_tokens)], self.dist.device, self.dp_group)
        result = average_metrics(dict(zip(keys, totals[:-1])), denominator)
        elapsed = time.perf_counter() - started
        result.update({"train/grad_norm": grad_norm, "train/lr": self.scheduler.get_last_lr()[0],
                       "train/tokens": totals[-1], "perf/train_step_time": elapsed,
                       "perf/train_tokens_per_s": totals[-1] / max(elapsed, 1e-9)})
        return result

    def _set_grad_sync(self, enabled: bool):
        # accumulate locally over micro-batches and synchronise once, on the last backward
        if self.strategy == "ddp" and self.mesh is None:
            self.model.require_backward_grad_sync = enabled
        elif self.strategy == "fsdp":
            self.model.set_requires_gradient_sync(enabled)

    def _finish_gradients(self):
        """Under TP without FSDP2: complete partial (per-head) gradients, then DDP's average over dp."""
        if self.mesh is None or self.strategy == "fsdp":  # DDP/FSDP2 reduced during the last backward
            return
        params = [p for p in self.model.parameters() if p.grad is not None]
        gradients.complete_partial_gradients(params)
        if self.strategy == "ddp":
            gradients.average_gradients(params, self.dp_group)

    def _clip_gradients(self) -> float:
        params = [p for p in self.model.parameters() if p.grad is not None]
        if not params:
            return 0.0
        if self.mesh is not None:  # DTensors on several meshes next to plain tensors
            return gradients.clip_grad_norm(params, self.args.clip_grad)
        norm = torch.nn.utils.clip_grad_norm_(params, self.args.clip_grad or float("inf"))
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        return float(norm)

    # --- weights out ----------------------------------------------------------------------
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The whole model on rank 0 (collective under FSDP/TP; other ranks get an empty dict)."""
        if self.strategy == "fsdp" or self.mesh is not None:  # DTensor shards gathered to full HF tensors
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            sd = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
            return sd if self.dist.is_main else {}
        if not self.dist.is_main:
            return {}
        return {k: v.detach().cpu() for k, v in self.hf_model.state_dict().items()}

    def export_hf(self, out_dir: Path, state_dict: dict | None = None) -> Path:
        """Write the policy as a folder an engine or `from_pretrained` can load (rank 0 writes).

        Full fine-tuning writes safetensors weights; LoRA writes only the PEFT adapter (the engine
        merges it into its base weights).
        """
        sd = self.full_state_dict() if state_dict is None else state_dict
        if self.dist.is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
            self.hf_model.save_pretrained(str(out_dir), state_dict=sd, safe_serialization=True)
            if not self.args.use_lora:
                self.tokenizer.save_pretrained(str(out_dir))
                if self.is_vision:  # the image preprocessing travels with the weights (an engine reads it there)
                    (out_dir / "preprocessor_config.json").write_text(
                        json.dumps(self.vision_spec.to_preprocessor_config(), indent=2))
        return out_dir

    # --- checkpoints --------------------------------------------------------------------
    def save_checkpoint(self, ckpt_dir: Path, exported: Path | None = None):
        """`exported`: a folder `export_hf` already wrote from the current weights (the version just
        published); it is hard-linked instead of gathering and serialising the weights a second time."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        if exported is None:
            self.export_hf(ckpt_dir / "model")
        elif self.dist.is_main:
            link_tree(exported, ckpt_dir / "model")
        osd = get_optimizer_state_dict(self.model, self.optimizer,
                                       options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.dist.is_main:
            torch.save({"optimizer": osd, "scheduler": self.scheduler.state_dict(), "global_step": self.global_step},
                       ckpt_dir / "optimizer.pt")

    def load_training_state(self, ckpt_dir: Path):
        """Restore optimizer, scheduler and step (the weights were loaded at construction)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        from slime.backends.fsdp.parallel import broadcast_object

        state = torch.load(ckpt_dir / "optimizer.pt", weights_only=False) if self.dist.is_main else None
        if self.mesh is not None:
            # Under TP rank 0 sends each full tensor and every rank copies out its slice: the default path
            # (`distribute_tensor` on every rank) cannot split 2-D (dp, tp) shards of uneven size.
            optimizer_state = state["optimizer"] if self.dist.is_main else {}
            state = broadcast_object({k: v for k, v in state.items() if k != "optimizer"} if state else None)
            set_optimizer_state_dict(self.model, self.optimizer, optimizer_state,
                                     options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
        else:
            state = broadcast_object(state)
            set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"],
                                     options=StateDictOptions(full_state_dict=True))
        self.scheduler.load_state_dict(state["scheduler"])
        self.global_step = state["global_step"]
