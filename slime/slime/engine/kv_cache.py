"""A batched, left-padded KV cache that rows can join and leave between decode steps.

Continuous batching on CPU with stock transformers models: every running sequence is one row of a
single `[B, heads, T, head_dim]` key/value buffer per layer, right-aligned (left padding), with a 2-D
attention mask marking real slots and per-row position ids for RoPE. A new request is prefilled in its
own single-row cache and merged in; a finished one is dropped. Joins and leaves copy the buffers once;
a decode step only writes one column, into preallocated capacity (the default transformers cache
concatenates, which copies the whole cache every step).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class _BufferedLayer(DynamicLayer):
    """One layer's keys/values in a buffer with spare capacity along the sequence dimension."""

    def __init__(self):
        super().__init__()
        self.k_buf: torch.Tensor | None = None
        self.v_buf: torch.Tensor | None = None
        self.length = 0

    def lazy_initialization(self, key_states, value_states):
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def _ensure_capacity(self, needed: int, like: torch.Tensor):
        if self.k_buf is not None and self.k_buf.shape[2] >= needed:
            return
        capacity = max(needed, 2 * (self.k_buf.shape[2] if self.k_buf is not None else 0), 64)
        b, h, _, d = like.shape
        k_new = like.new_zeros((b, h, capacity, d))
        v_new = like.new_zeros((b, h, capacity, d))
        if self.k_buf is not None and self.length:
            k_new[:, :, : self.length] = self.k_buf[:, :, : self.length]
            v_new[:, :, : self.length] = self.v_buf[:, :, : self.length]
        self.k_buf, self.v_buf = k_new, v_new

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        self._ensure_capacity(end, key_states)
        self.k_buf[:, :, self.length : end] = key_states
        self.v_buf[:, :, self.length : end] = value_states
        self.length = end
        self.keys = self.k_buf[:, :, :end]
        self.values = self.v_buf[:, :, :end]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def set_buffers(self, k: torch.Tensor, v: torch.Tensor, length: int):
        self.k_buf, self.v_buf, self.length = k, v, length
        self.keys, self.values = k[:, :, :length], v[:, :, :length]
        self.is_initialized = True
        self.dtype, self.device = k.dtype, k.device


class BatchKVCache(Cache):
    """HF-compatible cache plus the row bookkeeping continuous batching needs.

    `mask` is `[B, T]` (1 = real token, 0 = left padding); `next_pos` is each row's next position id
    (for an image prompt of a vision-language model: real tokens so far + its M-RoPE `rope_delta`, so the
    per-row delta follows every row operation here; model_runner sets it after prefill).
    """

    def __init__(self, num_layers: int):
        super().__init__(layers=[_BufferedLayer() for _ in range(num_layers)])
        self.mask = torch.zeros((0, 0), dtype=torch.long)
        self.next_pos = torch.zeros((0,), dtype=torch.long)

    @property
    def batch_size(self) -> int:
        return self.mask.shape[0]

    @property
    def seq_len(self) -> int:
        return self.layers[0].length

    # --- row management -------------------------------------------------------------------
    def keep_rows(self, rows: list[int]):
        """Keep only `rows` (in that order), then drop left columns that are padding in every kept row."""
        index = torch.tensor(rows, dtype=torch.long)
        self.mask = self.mask.index_select(0, index)
        self.next_pos = self.next_pos.index_select(0, index)
        if len(rows) == 0:
            for layer in self.layers:
                layer.set_buffers(layer.k_buf[:0, :, :0], layer.v_buf[:0, :, :0], 0)
            self.mask = self.mask[:, :0]
            return
        real_columns = self.mask.any(dim=0).nonzero()
        end = self.seq_len
        first = int(real_columns[0]) if len(real_columns) else end
        rows_there = index.to(self.layers[0].k_buf.device)  # the mask lives on the CPU, the buffers with the model
        for layer in self.layers:
            k = layer.k_buf.index_select(0, rows_there)[:, :, first:end].contiguous()
            v = layer.v_buf.index_select(0, rows_there)[:, :, first:end].contiguous()
            layer.set_buffers(k, v, end - first)
        self.mask = self.mask[:, first:].contiguous()

    def append_rows(self, other: "BatchKVCache", spare: int = 64):
        """Add the rows of `other` below ours, left-padding whichever side is shorter."""
        if other.batch_size == 0:
            return
        if self.batch_size == 0:
            self._adopt(other, spare)
            return
        t_self, t_other = self.seq_len, other.seq_len
        total = max(t_self, t_other)
        b_self, b_other = self.batch_size, other.batch_size
        for mine, theirs in zip(self.layers, other.layers):
            h, d = mine.k_buf.shape[1], mine.k_buf.shape[3]
            k = mine.k_buf.new_zeros((b_self + b_other, h, total + spare, d))
            v = mine.v_buf.new_zeros((b_self + b_other, h, total + spare, d))
            k[:b_self, :, total - t_self : total] = mine.k_buf[:, :, :t_self]
            v[:b_self, :, total - t_self : total] = mine.v_buf[:, :, :t_self]
            k[b_self:, :, total - t_other : total] = theirs.k_buf[:, :, :t_other]
            v[b_self:, :, total - t_other : total] = theirs.v_buf[:, :, :t_other]
            mine.set_buffers(k, v, total)
        mask = torch.zeros((b_self + b_other, total), dtype=torch.long)
        mask[:b_self, total - t_self :] = self.mask
        mask[b_self:, total - t_other :] = other.mask
        self.mask = mask
        self.next_pos = torch.cat([self.next_pos, other.next_pos])

    def _adopt(self, other: "BatchKVCache", spare: int):
        for mine, theirs in zip(self.layers, other.layers):
            t = theirs.length
            b, h, _, d = theirs.k_buf.shape
            k = theirs.k_buf.new_zeros((b, h, t + spare, d))
            v = theirs.v_buf.new_zeros((b, h, t + spare, d))
            k[:, :, :t] = theirs.k_buf[:, :, :t]
            v[:, :, :t] = theirs.v_buf[:, :, :t]
            mine.set_buffers(k, v, t)
        self.mask = other.mask.clone()
        self.next_pos = other.next_pos.clone()

    def truncated_copy(self, length: int) -> "BatchKVCache":
        """A single-row copy of the first `length` positions (row 0): used to seed a prefix-cache hit."""
        copy = BatchKVCache(len(self.layers))
        for mine, theirs in zip(copy.layers, self.layers):
            mine.set_buffers(
                theirs.k_buf[:1, :, :length].clone(), theirs.v_buf[:1, :, :length].clone(), length
            )
        copy.mask = torch.ones((1, length), dtype=torch.long)
        copy.next_pos = torch.tensor([length], dtype=torch.long)
        return copy

    def extract_row(self, row: int) -> "BatchKVCache":
        """A single-row, unpadded copy of one row's real positions (for the prefix cache)."""
        start = self.seq_len - int(self.mask[row].sum())
        copy = BatchKVCache(len(self.layers))
        length = self.seq_len - start
        for mine, theirs in zip(copy.layers, self.layers):
            mine.set_buffers(
                theirs.k_buf[row : row + 1, :, start : self.seq_len].clone(),
                theirs.v_buf[row : row + 1, :, start : self.seq_len].clone(),
                length,
            )
        copy.mask = torch.ones((1, length), dtype=torch.long)
        copy.next_pos = torch.tensor([length], dtype=torch.long)
        return copy
