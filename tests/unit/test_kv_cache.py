"""BatchKVCache + model_runner against plain full forward passes of the tiny model.

Every check compares the logits the engine computes through its left-padded, row-managed cache with
`model(input_ids=[full_sequence]).logits` (no cache, no padding): any mistake in padding, position ids,
masks, row bookkeeping or buffer copies shows up as a logits mismatch.
"""

import random

import pytest
import torch

from slime.engine import model_runner
from slime.engine.kv_cache import BatchKVCache

ATOL = 1e-4


@pytest.fixture(scope="module")
def model(tiny_model):
    return tiny_model[0]


@pytest.fixture(scope="module")
def layers(model):
    return model_runner.num_cache_layers(model)


def _ids(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 4096) for _ in range(n)]


@torch.inference_mode()
def _ref_all(model, seq: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([seq])).logits[0]


def _ref_last(model, seq: list[int]) -> torch.Tensor:
    return _ref_all(model, seq)[-1]


def _close(a: torch.Tensor, b: torch.Tensor):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def _prefill(model, layers, prompt: list[int]) -> tuple[BatchKVCache, torch.Tensor]:
    cache = BatchKVCache(layers)
    logits = model_runner.prefill_chunk(model, cache, prompt, 0, len(prompt) - 1)
    assert logits.shape[0] == 1
    return cache, logits[-1]


class _Batch:
    """A running batch plus, per row, the full token sequence it stands for (fed + next to feed)."""

    def __init__(self, model, layers):
        self.model, self.layers = model, layers
        self.cache = BatchKVCache(layers)
        self.seqs: list[list[int]] = []  # tokens fed so far + the pending (sampled, not yet fed) token

    def join(self, prompt: list[int]):
        cache, last = _prefill(self.model, self.layers, prompt)
        _close(last, _ref_last(self.model, prompt))
        self.cache.append_rows(cache)
        self.seqs.append(prompt + [int(last.argmax())])

    def step(self):
        last = torch.tensor([s[-1] for s in self.seqs])
        logits = model_runner.decode_step(self.model, self.cache, last)
        assert logits.shape[0] == len(self.seqs)
        for row, seq in enumerate(self.seqs):
            _close(logits[row], _ref_last(self.model, seq))
            seq.append(int(logits[row].argmax()))
        self.check_bookkeeping()

    def keep(self, rows: list[int]):
        self.cache.keep_rows(rows)
        self.seqs = [self.seqs[r] for r in rows]
        self.check_bookkeeping()

    def check_bookkeeping(self):
        c = self.cache
        assert c.batch_size == len(self.seqs)
        fed = [len(s) - 1 for s in self.seqs]
        assert c.next_pos.tolist() == fed
        assert c.mask.sum(dim=1).tolist() == fed
        assert c.mask.shape[1] == c.seq_len
        if self.seqs:
            # left padding: real slots are a right-aligned block, and some row starts at column 0
            assert c.seq_len == max(fed)
            for row, n in enumerate(fed):
                assert c.mask[row].tolist() == [0] * (c.seq_len - n) + [1] * n


def test_continuous_batching_matches_full_forward(model, layers):
    b = _Batch(model, layers)
    for seed, n in [(1, 5), (2, 9), (3, 3)]:
        b.join(_ids(seed, n))
    b.check_bookkeeping()
    for _ in range(3):
        b.step()
    b.keep([0, 2])  # drop the longest row mid-way
    b.step()
    b.join(_ids(4, 12))  # a new row, longer than every running one
    b.check_bookkeeping()
    for _ in range(2):
        b.step()
    b.join(_ids(5, 2))  # and a short one
    b.step()
    b.keep([2, 0])  # reorder while dropping
    for _ in range(2):
        b.step()


def test_decode_past_the_preallocated_capacity(model, layers):
    # append_rows leaves 64 spare columns: 70 steps force the layer buffers to grow while rows are padded
    b = _Batch(model, layers)
    b.join(_ids(10, 4))
    b.join(_ids(11, 7))
    start_len = b.cache.seq_len
    last = torch.tensor([s[-1] for s in b.seqs])
    for step in range(70):
        logits = model_runner.decode_step(model, b.cache, last)
        for row, seq in enumerate(b.seqs):
            if step in (0, 63, 64, 69):
                _close(logits[row], _ref_last(model, seq))
            seq.append(int(logits[row].argmax()))
        last = torch.tensor([s[-1] for s in b.seqs])
    assert b.cache.seq_len == start_len + 70
    assert b.cache.layers[0].k_buf.shape[2] >= start_len + 70
    b.check_bookkeeping()


def test_prefill_returns_only_the_kept_positions(model, layers):
    prompt = _ids(20, 12)
    ref = _ref_all(model, prompt)
    cache = BatchKVCache(layers)
    logits = model_runner.prefill_chunk(model, cache, prompt, 0, 0)
    assert logits.shape == ref.shape
    _close(logits, ref)
    cache = BatchKVCache(layers)
    logits = model_runner.prefill_chunk(model, cache, prompt, 0, 8)
    assert logits.shape[0] == 4
    _close(logits, ref[8:])
    assert cache.mask.tolist() == [[1] * 12] and cache.next_pos.tolist() == [12] and cache.seq_len == 12


@pytest.mark.parametrize("keep_from", [19, 10, 0])
def test_chunked_prefill_matches_one_shot(model, layers, keep_from):
    prompt = _ids(21, 20)
    ref = _ref_all(model, prompt)
    _, one_shot_last = _prefill(model, layers, prompt)
    cache = BatchKVCache(layers)
    pieces = []
    for start, end in [(0, 7), (7, 14), (14, 20)]:
        out = model_runner.prefill_chunk(model, cache, prompt[start:end], start, keep_from)
        assert out.shape[0] == max(0, end - max(start, keep_from))
        pieces.append(out)
        assert cache.seq_len == end and cache.next_pos.tolist() == [end] and cache.mask.tolist() == [[1] * end]
    logits = torch.cat(pieces)
    assert logits.shape[0] == 20 - keep_from
    _close(logits, ref[keep_from:])
    _close(logits[-1], one_shot_last)


def test_extract_row_and_truncated_copy_continue_like_the_original(model, layers):
    b = _Batch(model, layers)
    b.join(_ids(30, 11))
    b.join(_ids(31, 4))  # the shorter row is left-padded by 7 columns
    for _ in range(3):
        b.step()
    fed = b.seqs[1][:-1]  # 4 prompt tokens + 3 fed outputs
    row = b.cache.extract_row(1)
    assert row.batch_size == 1 and row.seq_len == len(fed) == 7
    assert row.mask.tolist() == [[1] * 7] and row.next_pos.tolist() == [7]

    more = _ids(32, 5)
    full = fed + more
    ref = _ref_all(model, full)
    logits = model_runner.prefill_chunk(model, row, more, len(fed), len(fed))
    _close(logits, ref[len(fed) :])

    # the extracted copy is independent of the batch: the batch still decodes correctly afterwards
    b.step()

    # a truncated copy of the extracted row (now 12 positions) continues from any cut
    for cut in (3, 7, 10):
        copy = row.truncated_copy(cut)
        assert copy.seq_len == cut and copy.mask.tolist() == [[1] * cut] and copy.next_pos.tolist() == [cut]
        logits = model_runner.prefill_chunk(model, copy, full[cut:], cut, cut)
        _close(logits, ref[cut:])
    # the copies did not write into the source: it still continues exactly
    logits = model_runner.prefill_chunk(model, row, [7, 8], len(full), len(full))
    _close(logits, _ref_all(model, full + [7, 8])[len(full) :])


def test_extracted_row_can_rejoin_a_batch(model, layers):
    b = _Batch(model, layers)
    b.join(_ids(40, 6))
    b.join(_ids(41, 3))
    b.step()
    fed, pending = b.seqs[1][:-1], b.seqs[1][-1]
    single = b.cache.extract_row(1)
    other = _Batch(model, layers)
    other.join(_ids(42, 8))
    other.cache.append_rows(single)
    other.seqs.append(fed + [pending])
    other.check_bookkeeping()
    other.step()
    other.step()


def test_keep_rows_trims_columns_that_are_padding_in_every_row(model, layers):
    b = _Batch(model, layers)
    b.join(_ids(50, 10))
    b.join(_ids(51, 4))
    b.join(_ids(52, 6))
    b.step()
    assert b.cache.seq_len == 11
    b.keep([1, 2])  # the longest row leaves: 4 padding columns go with it
    assert b.cache.seq_len == 7
    assert b.cache.mask.tolist() == [[0, 0] + [1] * 5, [1] * 7]
    b.step()
    b.keep([0])
    assert b.cache.seq_len == 6 and b.cache.mask.tolist() == [[1] * 6]
    b.step()
    b.join(_ids(53, 3))
    b.step()


def test_keep_rows_without_trimmable_columns_keeps_length(model, layers):
    b = _Batch(model, layers)
    b.join(_ids(60, 8))
    b.join(_ids(61, 5))
    b.keep([0])  # the longest row stays: nothing to trim
    assert b.cache.seq_len == 8
    b.step()


def test_keep_no_rows_then_adopt_new_ones(model, layers):
    b = _Batch(model, layers)
    b.join(_ids(70, 7))
    b.join(_ids(71, 3))
    b.step()
    b.keep([])
    assert b.cache.batch_size == 0 and b.cache.seq_len == 0
    assert tuple(b.cache.mask.shape) == (0, 0) and b.cache.next_pos.numel() == 0
    b.join(_ids(72, 5))
    assert b.cache.seq_len == 5
    b.join(_ids(73, 9))
    b.step()
    b.step()


def test_append_rows_of_empty_cache_is_a_no_op(model, layers):
    b = _Batch(model, layers)
    b.join(_ids(80, 4))
    before = b.cache.layers[0].k_buf[:, :, : b.cache.seq_len].clone()
    b.cache.append_rows(BatchKVCache(layers))
    assert b.cache.batch_size == 1 and b.cache.seq_len == 4
    assert torch.equal(b.cache.layers[0].k_buf[:, :, :4], before)
    b.step()
