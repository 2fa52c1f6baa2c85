"""Per-row sampling for a decode batch: temperature, top-k, top-p, min-p, seeds. Pure tensor functions.

Semantics follow SGLang's: the log-probs reported for a token are those of the temperature-scaled
distribution *before* top-k/top-p/min-p truncation (truncation only decides what can be drawn);
temperature 0 means greedy and reports log-probs at temperature 1.

The per-row settings arrive as CPU tensors and the logits wherever the model runs (a GPU): every function
works on the logits' device, so a [B, vocab] row never crosses to the host; only the random numbers are drawn on
the CPU (from the requests' own generators, so a seed gives the same draw on any device).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

GREEDY_EPS = 1e-5


@dataclass
class SamplingConfig:
    """Validated sampling settings of one sequence (see protocol.py for the wire format)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    min_p: float = 0.0
    max_new_tokens: int = 128
    min_new_tokens: int = 0
    stop: list[str] = field(default_factory=list)
    stop_token_ids: set[int] = field(default_factory=set)
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS or self.top_k == 1

    @property
    def logprob_temperature(self) -> float:
        return 1.0 if self.temperature < GREEDY_EPS else self.temperature

    @property
    def truncates(self) -> bool:
        return self.top_k > 1 or self.top_p < 1.0 or self.min_p > 0.0


def scaled_logprobs(logits: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits / T) per row, in float32. `temperatures` is [B] (already 1.0 for greedy rows)."""
    return torch.log_softmax(logits.float() / temperatures.to(logits.device).unsqueeze(-1), dim=-1)


def truncate(logprobs: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Set to -inf every token outside each row's top-k / nucleus (top-p) / min-p set.

    top_k is [B] long (0 = off), top_p and min_p [B] float. Rows with nothing to truncate pass through.
    """
    out = logprobs
    # which filters any row uses is decided on the settings (host tensors), so no device sync is needed for it
    use_k, use_p, use_min_p = bool((top_k > 0).any()), bool((top_p < 1.0).any()), bool((min_p > 0).any())
    k_max = int(top_k.clamp(max=logprobs.shape[-1]).max()) if use_k else 0
    top_k, top_p, min_p = (t.to(logprobs.device) for t in (top_k, top_p, min_p))
    top_k = top_k.clamp(max=logprobs.shape[-1])  # k beyond the vocabulary keeps everything
    if use_k:
        kth = torch.topk(logprobs, k_max, dim=-1).values  # [B, k_max], descending
        k_index = (top_k.clamp(min=1) - 1).unsqueeze(-1)
        threshold = kth.gather(-1, k_index)
        threshold = torch.where(top_k.unsqueeze(-1) > 0, threshold, torch.full_like(threshold, -float("inf")))
        out = out.masked_fill(out < threshold, -float("inf"))
    if use_p:
        sorted_lp, order = torch.sort(out, dim=-1, descending=True)
        cumulative = sorted_lp.exp().cumsum(-1)
        # keep a token if the mass strictly before it is below top_p (so the top token always stays)
        drop_sorted = (cumulative - sorted_lp.exp()) >= top_p.unsqueeze(-1)
        # float32 running sums reach 1.0 before the tail: rows without top-p must not lose it
        drop_sorted &= (top_p < 1.0).unsqueeze(-1)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, -float("inf"))
    if use_min_p:
        best = out.max(dim=-1, keepdim=True).values
        threshold = best + torch.log(min_p.clamp(min=1e-12)).unsqueeze(-1)
        threshold = torch.where(min_p.unsqueeze(-1) > 0, threshold, torch.full_like(threshold, -float("inf")))
        out = out.masked_fill(out < threshold, -float("inf"))
    return out


def draw(
    logprobs: torch.Tensor, greedy: torch.Tensor, generators: list[torch.Generator | None], shared: torch.Generator
) -> torch.Tensor:
    """Pick one token per row: argmax for greedy rows, inverse-CDF sampling otherwise.

    One uniform number per row is compared with the row's cumulative distribution (in float64, so
    rounding over a large vocabulary does not bias the tail); -inf entries have zero mass. This costs
    one cumsum instead of vocabulary-sized random noise per row. Rows with their own generator (a
    request seed) draw their number from it, so a seeded request is reproducible whichever other
    requests share its batch.
    """
    uniforms = torch.empty(logprobs.shape[0], dtype=torch.float64)
    seeded = [i for i, g in enumerate(generators) if g is not None]
    if len(seeded) < len(generators):
        uniforms.uniform_(generator=shared)
    for i in seeded:
        uniforms[i : i + 1].uniform_(generator=generators[i])
    cdf = logprobs.double().exp().cumsum(dim=-1)
    targets = (uniforms.to(cdf.device) * cdf[:, -1]).unsqueeze(-1)
    sampled = torch.searchsorted(cdf, targets, right=True).squeeze(-1).clamp(max=logprobs.shape[-1] - 1)
    return torch.where(greedy.to(logprobs.device), logprobs.argmax(dim=-1), sampled)


def top_logprobs(logprobs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k most likely tokens per row: (values [B, k], indices [B, k])."""
    values, indices = torch.topk(logprobs, k, dim=-1)
    return values, indices
