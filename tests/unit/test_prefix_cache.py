"""PrefixCache: longest-prefix lookup, replacement of extended entries, LRU eviction, and real KV reuse."""

import random

import pytest
import torch

from slime.engine import model_runner
from slime.engine.kv_cache import BatchKVCache
from slime.engine.prefix_cache import PrefixCache, common_prefix_length

LAYERS = 2


def _synthetic(n: int, tag: float) -> BatchKVCache:
    """A single-row cache of n positions whose key at position p is tag + p (so copies are checkable)."""
    cache = BatchKVCache(LAYERS)
    for layer in cache.layers:
        k = (tag + torch.arange(n, dtype=torch.float32)).view(1, 1, n, 1).expand(1, 2, n, 3).contiguous()
        layer.set_buffers(k, -k, n)
    cache.mask = torch.ones((1, n), dtype=torch.long)
    cache.next_pos = torch.tensor([n])
    return cache


def _keys(cache: BatchKVCache) -> list[float]:
    return cache.layers[0].k_buf[0, 0, : cache.seq_len, 0].tolist()


# --------------------------------------------------------------------------------------------------
# common_prefix_length
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, n",
    [
        ([], [], 0),
        ([], [1, 2], 0),
        ([1, 2, 3], [1, 2, 3], 3),
        ([1, 2, 3], [1, 2, 4], 2),
        ([1, 2], [1, 2, 3, 4], 2),
        ([1, 2, 3, 4], [1, 2], 2),
        ([5, 1, 2], [6, 1, 2], 0),
        ([1, 2, 9, 4], [1, 2, 3, 4], 2),  # stops at the first difference, later matches do not count
    ],
)
def test_common_prefix_length(a, b, n):
    assert common_prefix_length(a, b) == n


# --------------------------------------------------------------------------------------------------
# lookup / insert (synthetic caches)
# --------------------------------------------------------------------------------------------------

A = list(range(100, 120))  # 20 tokens
B = list(range(100, 110)) + list(range(200, 220))  # shares 10 with A, 30 tokens


def _cache_ab(**kwargs):
    pc = PrefixCache(max_tokens=kwargs.pop("max_tokens", 1000), min_tokens=kwargs.pop("min_tokens", 4))
    pc.insert(A, _synthetic(len(A), 1000.0))
    pc.insert(B, _synthetic(len(B), 2000.0))
    return pc


def test_lookup_returns_the_longest_matching_prefix_as_a_fresh_copy():
    pc = _cache_ab()
    prompt = B[:16] + [7, 7, 7, 7]
    n, cache = pc.lookup(prompt, max_reuse=len(prompt) - 1)
    assert n == 16
    assert cache.batch_size == 1 and cache.seq_len == 16
    assert cache.mask.tolist() == [[1] * 16] and cache.next_pos.tolist() == [16]
    assert _keys(cache) == [2000.0 + p for p in range(16)]  # from B, not A
    # a copy: writing into it leaves the stored entry intact
    cache.layers[0].k_buf.zero_()
    n2, again = pc.lookup(prompt, max_reuse=len(prompt) - 1)
    assert n2 == 16 and _keys(again) == [2000.0 + p for p in range(16)]
    assert (pc.hits, pc.lookups) == (2, 2)


def test_lookup_prefers_the_other_entry_when_it_matches_more():
    pc = _cache_ab()
    prompt = A[:15] + [1, 2, 3]
    n, cache = pc.lookup(prompt, max_reuse=100)
    assert n == 15 and _keys(cache) == [1000.0 + p for p in range(15)]


def test_lookup_is_capped_by_max_reuse():
    pc = _cache_ab()
    prompt = list(B)  # the whole of B: at most max_reuse of it may be reused
    n, cache = pc.lookup(prompt, max_reuse=len(prompt) - 1)
    assert n == 29 and cache.seq_len == 29 and _keys(cache) == [2000.0 + p for p in range(29)]
    n, cache = pc.lookup(prompt, max_reuse=12)
    assert n == 12 and cache.seq_len == 12 and _keys(cache) == [2000.0 + p for p in range(12)]
    n, cache = pc.lookup(prompt, max_reuse=6)
    assert n == 6 and cache.seq_len == 6  # both entries match 6: either serves


def test_lookup_below_min_tokens_misses():
    pc = _cache_ab(min_tokens=12)
    # common prefix 11 with A (10 with B): one short of min_tokens
    assert pc.lookup(A[:11] + [150, 1, 2, 3], max_reuse=50) == (0, None)
    assert (pc.hits, pc.lookups) == (0, 1)
    # exactly min_tokens matches
    n, cache = pc.lookup(A[:12] + [1], max_reuse=50)
    assert n == 12 and cache is not None
    # max_reuse below min_tokens: no lookup at all
    assert pc.lookup(A, max_reuse=11) == (0, None)
    assert (pc.hits, pc.lookups) == (1, 2)


def test_lookup_without_any_match():
    pc = _cache_ab()
    assert pc.lookup([1, 2, 3, 4, 5, 6, 7], max_reuse=6) == (0, None)
    assert PrefixCache(max_tokens=100, min_tokens=1).lookup([1, 2, 3], max_reuse=2) == (0, None)


def test_insert_ignores_too_short_and_too_long_sequences():
    pc = PrefixCache(max_tokens=25, min_tokens=5)
    pc.insert([1, 2, 3, 4], _synthetic(4, 0.0))  # below min_tokens
    pc.insert(list(range(26)), _synthetic(26, 0.0))  # larger than the whole budget
    assert pc.size_tokens == 0
    pc.insert(list(range(25)), _synthetic(25, 0.0))  # exactly the budget fits
    assert pc.size_tokens == 25
    assert pc.lookup(list(range(30)), max_reuse=29)[0] == 25


def test_an_extension_replaces_the_entry_it_extends():
    pc = PrefixCache(max_tokens=1000, min_tokens=4)
    turn1 = list(range(10, 30))
    turn2 = turn1 + list(range(50, 60))  # next turn: the whole history plus more
    pc.insert(turn1, _synthetic(20, 1000.0))
    pc.insert(turn2, _synthetic(30, 2000.0))
    assert pc.size_tokens == 30
    n, cache = pc.lookup(turn1 + [1, 2], max_reuse=21)
    assert n == 20 and _keys(cache) == [2000.0 + p for p in range(20)]  # served by the extension


def test_an_unrelated_or_diverging_entry_is_not_replaced():
    pc = PrefixCache(max_tokens=1000, min_tokens=4)
    pc.insert(A, _synthetic(len(A), 1000.0))
    pc.insert(B, _synthetic(len(B), 2000.0))  # shares 10 tokens with A but does not extend it
    assert pc.size_tokens == len(A) + len(B)
    n, cache = pc.lookup(A + [1], max_reuse=len(A))
    assert n == 20 and _keys(cache)[0] == 1000.0


def test_reinserting_the_same_sequence_does_not_double_count():
    pc = PrefixCache(max_tokens=1000, min_tokens=4)
    pc.insert(A, _synthetic(len(A), 1000.0))
    pc.insert(A, _synthetic(len(A), 3000.0))
    assert pc.size_tokens == 20
    assert _keys(pc.lookup(A, max_reuse=19)[1])[0] == 1000.0  # the first one is kept


def test_lru_eviction_under_the_token_budget():
    pc = PrefixCache(max_tokens=50, min_tokens=4)
    a, b, c = list(range(0, 20)), list(range(100, 120)), list(range(200, 220))
    pc.insert(a, _synthetic(20, 0.0))
    pc.insert(b, _synthetic(20, 100.0))
    assert pc.size_tokens == 40
    assert pc.lookup(a + [9], max_reuse=20)[0] == 20  # a is now the most recently used
    pc.insert(c, _synthetic(20, 200.0))  # 60 > 50: the least recently used (b) goes
    assert pc.size_tokens == 40
    assert pc.lookup(b + [9], max_reuse=20) == (0, None)
    assert pc.lookup(a + [9], max_reuse=20)[0] == 20
    assert pc.lookup(c + [9], max_reuse=20)[0] == 20
    # now a was used before c: inserting d evicts a
    d = list(range(300, 320))
    pc.insert(d, _synthetic(20, 300.0))
    assert pc.lookup(a + [9], max_reuse=20) == (0, None)
    assert pc.lookup(c + [9], max_reuse=20)[0] == 20
    assert pc.lookup(d + [9], max_reuse=20)[0] == 20


def test_reinsert_refreshes_recency():
    pc = PrefixCache(max_tokens=50, min_tokens=4)
    a, b, c = list(range(0, 20)), list(range(100, 120)), list(range(200, 220))
    pc.insert(a, _synthetic(20, 0.0))
    pc.insert(b, _synthetic(20, 100.0))
    pc.insert(a, _synthetic(20, 0.0))  # touches a
    pc.insert(c, _synthetic(20, 200.0))
    assert pc.lookup(b + [9], max_reuse=20) == (0, None)
    assert pc.lookup(a + [9], max_reuse=20)[0] == 20


def test_eviction_of_several_entries_for_one_big_insert():
    pc = PrefixCache(max_tokens=50, min_tokens=4)
    for i in range(4):
        pc.insert(list(range(i * 100, i * 100 + 10)), _synthetic(10, 0.0))
    assert pc.size_tokens == 40
    pc.insert(list(range(1000, 1045)), _synthetic(45, 0.0))  # 85 tokens: all four older ones must go
    assert pc.size_tokens == 45
    assert pc.lookup(list(range(300, 310)) + [1], max_reuse=10) == (0, None)


def test_clear():
    pc = _cache_ab()
    pc.clear()
    assert pc.size_tokens == 0
    assert pc.lookup(A + [1], max_reuse=20) == (0, None)
    pc.insert(A, _synthetic(len(A), 1000.0))  # usable again
    assert pc.size_tokens == 20 and pc.lookup(A + [1], max_reuse=20)[0] == 20


def test_disabled_with_zero_budget():
    pc = PrefixCache(max_tokens=0, min_tokens=1)
    assert not pc.enabled
    pc.insert(A, _synthetic(len(A), 0.0))
    assert pc.size_tokens == 0
    assert pc.lookup(A + [1], max_reuse=20) == (0, None)
    assert PrefixCache(max_tokens=1).enabled


# --------------------------------------------------------------------------------------------------
# real KV from the tiny model
# --------------------------------------------------------------------------------------------------


def _ids(seed, n):
    rng = random.Random(seed)
    return [rng.randrange(3, 4096) for _ in range(n)]


@torch.inference_mode()
def _ref_last(model, seq):
    return model(input_ids=torch.tensor([seq])).logits[0, -1]


def test_reused_prefix_continues_like_a_fresh_prefill(tiny_model):
    model = tiny_model[0]
    layers = model_runner.num_cache_layers(model)
    pc = PrefixCache(max_tokens=10_000, min_tokens=8)

    first = _ids(1, 24)
    cache = BatchKVCache(layers)
    model_runner.prefill_chunk(model, cache, first, 0, len(first) - 1)
    pc.insert(first, cache)

    for seed, shared in [(2, 20), (3, 24), (4, 9)]:
        prompt = first[:shared] + _ids(seed, 10)
        reused, hit = pc.lookup(prompt, max_reuse=len(prompt) - 1)
        assert reused == shared
        logits = model_runner.prefill_chunk(model, hit, prompt[reused:], reused, len(prompt) - 1)
        torch.testing.assert_close(logits[-1], _ref_last(model, prompt), atol=1e-4, rtol=0)

    # a prompt identical to the cached sequence still recomputes its last position
    reused, hit = pc.lookup(first, max_reuse=len(first) - 1)
    assert reused == len(first) - 1
    logits = model_runner.prefill_chunk(model, hit, first[reused:], reused, len(first) - 1)
    torch.testing.assert_close(logits[-1], _ref_last(model, first), atol=1e-4, rtol=0)


def test_rows_extracted_from_a_batch_serve_later_prompts(tiny_model):
    """What the scheduler does: a finished row's KV (prompt + fed outputs) is extracted and reused."""
    model = tiny_model[0]
    layers = model_runner.num_cache_layers(model)
    pc = PrefixCache(max_tokens=10_000, min_tokens=8)
    batch = BatchKVCache(layers)
    seqs = []
    for seed, n in [(10, 14), (11, 9)]:
        prompt = _ids(seed, n)
        single = BatchKVCache(layers)
        last = model_runner.prefill_chunk(model, single, prompt, 0, n - 1)[-1]
        batch.append_rows(single)
        seqs.append(prompt + [int(last.argmax())])
    for _ in range(4):
        logits = model_runner.decode_step(model, batch, torch.tensor([s[-1] for s in seqs]))
        for row, s in enumerate(seqs):
            s.append(int(logits[row].argmax()))
    fed = seqs[1][:-1]  # the short, left-padded row
    pc.insert(fed, batch.extract_row(1))
    prompt = seqs[1] + _ids(12, 5)  # next turn: history + pending token + new text
    reused, hit = pc.lookup(prompt, max_reuse=len(prompt) - 1)
    assert reused == len(fed)
    logits = model_runner.prefill_chunk(model, hit, prompt[reused:], reused, len(prompt) - 1)
    torch.testing.assert_close(logits[-1], _ref_last(model, prompt), atol=1e-4, rtol=0)
