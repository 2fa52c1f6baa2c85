"""From a list of training rows to padded micro-batches, and from model logits back to response rows.

A row is one sample: `tokens` (prompt then response) and per-response-token lists (loss mask,
advantages, old/ref/rollout/teacher log-probs). Micro-batches are right-padded `[b, L]` inputs whose
padded size `b * L` stays within the token budget (`--max-tokens-per-gpu`); per-token quantities are
response-aligned `[b, R]` (R = longest response in the micro-batch) with a mask for padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from slime.utils import ppo_utils

# per-response-token fields a row may carry, all of length response_length
RESPONSE_FIELDS = ("loss_mask", "advantages", "old_log_probs", "ref_log_probs", "rollout_log_probs",
                   "teacher_log_probs")
# per-response-token fields with a trailing K dimension (top-K distillation, the top-K reference KL)
TOPK_FIELDS = ("teacher_topk_log_probs", "teacher_topk_indices", "ref_topk_log_probs", "ref_topk_indices")


def split_by_token_budget(lengths: list[int], max_tokens: int | None, max_rows: int | None = None) -> list[list[int]]:
    """Group row indices into micro-batches whose padded size (rows x longest) fits `max_tokens`.

    Rows are taken longest first so similar lengths share a micro-batch (less padding). A single row
    longer than the budget still gets a micro-batch of its own: refusing it would drop data, and the
    budget exists to bound memory, not to reject samples. Without a budget, `max_rows` rows per batch.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        candidate_longest = max(longest, lengths[i])
        fits_tokens = max_tokens is None or candidate_longest * (len(current) + 1) <= max_tokens
        fits_rows = max_rows is None or len(current) < max_rows
        if current and not (fits_tokens and fits_rows):
            batches.append(current)
            current, candidate_longest = [], lengths[i]
        current.append(i)
        longest = candidate_longest
    if current:
        batches.append(current)
    return batches


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [b, L], right-padded
    attention_mask: torch.Tensor  # [b, L]
    total_lengths: list[int]
    response_lengths: list[int]
    response_mask: torch.Tensor  # [b, R]: 1 where a real response token is (before the loss mask)
    fields: dict[str, torch.Tensor]  # response-aligned [b, R] (or [b, R, K]) per field present
    rows: list[int]  # indices into the step's row list
    # the images of the rows that have any, concatenated in row order (vision-language models only)
    pixel_values: torch.Tensor | None = None  # [patches, C * T * P * P]
    image_grid_thw: torch.Tensor | None = None  # [images, 3]

    @property
    def loss_mask(self) -> torch.Tensor:
        return self.fields["loss_mask"] * self.response_mask


def collate(rows: list[dict], indices: list[int], pad_token_id: int) -> MicroBatch:
    chosen = [rows[i] for i in indices]
    total = [len(r["tokens"]) for r in chosen]
    resp = [int(r["response_length"]) for r in chosen]
    longest, longest_resp = max(total), max(max(resp), 1)
    input_ids = torch.full((len(chosen), longest), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(chosen), longest), dtype=torch.long)
    response_mask = torch.zeros((len(chosen), longest_resp))
    for b, row in enumerate(chosen):
        input_ids[b, : total[b]] = torch.tensor(row["tokens"], dtype=torch.long)
        attention[b, : total[b]] = 1
        response_mask[b, : resp[b]] = 1.0
    fields: dict[str, torch.Tensor] = {}
    for name in RESPONSE_FIELDS:
        present = [row.get(name) is not None for row in chosen]
        if not any(present):
            continue
        out = torch.zeros((len(chosen), longest_resp))
        for b, row in enumerate(chosen):
            if present[b]:
                values = row[name]
                out[b, : len(values)] = torch.as_tensor(values, dtype=torch.float32)
        fields[name] = out
        if name == "teacher_log_probs" and not all(present):
            # Combine mixes samples with a teacher (a hint was accepted) and without: the mask tells the
            # loss which zeros are fillers, so their OPD term is exactly 0 instead of 0 - log p_old
            fields["teacher_mask"] = torch.tensor(present, dtype=torch.float32)[:, None] * response_mask
        if name == "rollout_log_probs" and not all(present):
            # zeros here are fillers, not log-probs: --use-tis refuses such a batch instead of weighting by exp(old)
            fields["rollout_log_probs_mask"] = torch.tensor(present, dtype=torch.float32)[:, None] * response_mask
    if any(row.get("off_policy") for row in chosen):
        # samples another model wrote: TIS has no behaviour log-probs for them and leaves them at weight 1
        fields["off_policy_mask"] = torch.tensor([float(bool(row.get("off_policy"))) for row in chosen])[:, None]
    weights = [float(row.get("sample_weight", 1.0)) for row in chosen]
    if any(w != 1.0 for w in weights):
        # one weight per row (--off-policy-weight) that `reducer` applies to every term the row contributes
        fields["sample_weight"] = torch.tensor(weights)[:, None]
    for name in TOPK_FIELDS:
        sized = [row[name] for row in chosen if row.get(name)]
        if not sized:
            continue
        k = len(sized[0][0])
        dtype = torch.long if name.endswith("indices") else torch.float32
        out = torch.zeros((len(chosen), longest_resp, k), dtype=dtype)
        for b, row in enumerate(chosen):
            if row.get(name):
                out[b, : len(row[name])] = torch.as_tensor(row[name], dtype=dtype)
        fields[name] = out
        if name == "teacher_topk_log_probs" and len(sized) < len(chosen):
            # rows without a teacher (Combine's RL-only samples): their zero rows are fillers, not teacher rows
            fields["teacher_topk_mask"] = torch.tensor([float(bool(row.get(name))) for row in chosen])[:, None] \
                * response_mask
    if "loss_mask" not in fields:
        fields["loss_mask"] = response_mask.clone()
    pixel_values, image_grid_thw = _images(chosen)
    return MicroBatch(input_ids, attention, total, resp, response_mask, fields, list(indices), pixel_values,
                      image_grid_thw)


def _images(chosen: list[dict]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The rows' preprocessed images (`row["image_inputs"]`, a slime.models.vision.ImageInputs), concatenated in
    row order: the order in which the model scatters image features over the batch's image pads."""
    inputs = [row["image_inputs"] for row in chosen if row.get("image_inputs") is not None]
    if not inputs:
        return None, None
    pixels = torch.cat([torch.as_tensor(i.pixel_values, dtype=torch.float32) for i in inputs])
    grids = torch.cat([torch.as_tensor(i.image_grid_thw, dtype=torch.long).view(-1, 3) for i in inputs])
    return pixels, grids


def logit_window(batch: MicroBatch) -> tuple[int, int]:
    """The sequence positions whose logits predict some response token: [start, end).

    Passing them to the model (`logits_to_keep`) skips the LM head on prompt positions, which for a
    large vocabulary is a sizeable share of the forward and backward cost.
    """
    starts = [n - r - 1 for n, r in zip(batch.total_lengths, batch.response_lengths) if r]
    ends = [n - 1 for n, r in zip(batch.total_lengths, batch.response_lengths) if r]
    return (min(starts), max(ends)) if starts else (0, 1)


def response_logits(logits: torch.Tensor, batch: MicroBatch, temperature: float, offset: int = 0) -> torch.Tensor:
    """Pick the logits that predict each response token: `[b, R, V]`, divided by the temperature.

    For a row of n tokens whose last r are the response, positions n-r-1 .. n-2 predict tokens
    n-r .. n-1 (next-token shift); `offset` is the position of `logits[:, 0]` when only a window was
    computed. One `index_select` keeps the backward pass to a single scatter (per-row slicing would
    materialise a full-size zero gradient per row). Padding positions repeat a real row; they are
    masked out of every loss.
    """
    b, length, vocab = logits.shape
    longest_resp = batch.response_mask.shape[1]
    index = torch.zeros((b, longest_resp), dtype=torch.long)
    for i, (n, r) in enumerate(zip(batch.total_lengths, batch.response_lengths)):
        if r:
            index[i, :r] = torch.arange(n - r - 1, n - 1) - offset + i * length
            index[i, r:] = index[i, r - 1]
    picked = logits.reshape(b * length, vocab).index_select(0, index.flatten().to(logits.device))
    return picked.view(b, longest_resp, vocab) / temperature


def response_tokens(batch: MicroBatch) -> torch.Tensor:
    """The response token ids, response-aligned `[b, R]` (0 where padded)."""
    out = torch.zeros_like(batch.response_mask, dtype=torch.long)
    for i, (n, r) in enumerate(zip(batch.total_lengths, batch.response_lengths)):
        if r:
            out[i, :r] = batch.input_ids[i, n - r : n]
    return out


def reducer(batch: dict, per_token: bool):
    """The `reduce(x)` the loss functions receive for a loss batch (`loss_batch`): each sample's masked mean summed
    over samples, or with `--calculate-per-token-loss` the masked sum over tokens; either way every row's
    contribution is multiplied by its `sample_weight` (1 unless set), so one weight scales every term a row adds
    to the loss (policy gradient, KL, entropy, distillation), whatever the loss function."""
    mask, weights = batch["loss_mask"], batch.get("sample_weight")
    if per_token:
        return lambda x: ppo_utils.sum_of_tokens(x, mask, weights)
    return lambda x: ppo_utils.sum_of_sample_mean(x, mask, weights)


def loss_batch(batch: MicroBatch, device) -> dict:
    """The keyword batch the loss functions of slime.utils.loss receive, on `device` (both backends use it)."""
    fields = {name: value.to(device) for name, value in batch.fields.items()}
    fields["loss_mask"] = batch.loss_mask.to(device)
    fields["tokens"] = response_tokens(batch).to(device)
    fields["response_lengths"] = batch.response_lengths
    fields["total_lengths"] = batch.total_lengths
    return fields
