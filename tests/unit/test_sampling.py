"""Unit tests of slime.engine.sampling: truncation, temperature scaling, drawing, SamplingConfig."""

import math

import pytest
import torch

from slime.engine.sampling import GREEDY_EPS, SamplingConfig, draw, scaled_logprobs, top_logprobs, truncate

NEG_INF = -float("inf")


def _lp(*probs):
    """A float32 log-prob row from plain probabilities (0 -> -inf)."""
    return [math.log(p) if p > 0 else NEG_INF for p in probs]


def _truncate(rows, top_k=None, top_p=None, min_p=None):
    b = len(rows)
    return truncate(
        torch.tensor(rows, dtype=torch.float32),
        torch.tensor(top_k if top_k is not None else [0] * b, dtype=torch.long),
        torch.tensor(top_p if top_p is not None else [1.0] * b, dtype=torch.float32),
        torch.tensor(min_p if min_p is not None else [0.0] * b, dtype=torch.float32),
    )


def _kept(row: torch.Tensor) -> list[int]:
    return [i for i, v in enumerate(row.tolist()) if v != NEG_INF]


# --------------------------------------------------------------------------------------------------
# truncate: top-k
# --------------------------------------------------------------------------------------------------


def test_top_k_keeps_exactly_the_k_best_and_leaves_their_values():
    row = [-3.0, -1.0, -4.0, -2.0, -5.0]
    out = _truncate([row], top_k=[2])
    assert out.tolist() == [[NEG_INF, -1.0, NEG_INF, -2.0, NEG_INF]]


def test_top_k_one_keeps_only_the_argmax():
    out = _truncate([[-3.0, -1.0, -4.0, -2.0]], top_k=[1])
    assert _kept(out[0]) == [1]


def test_top_k_ties_at_the_threshold_are_all_kept():
    # the 2nd best value (-2.0) is shared by two entries: the threshold comparison is strict, so both survive
    out = _truncate([[-2.0, -1.0, -2.0, -3.0]], top_k=[2])
    assert _kept(out[0]) == [0, 1, 2]


def test_top_k_zero_rows_are_untouched_next_to_top_k_rows():
    rows = [[-3.0, -1.0, -4.0, -2.0], [-0.5, -9.0, -30.0, -1.5], [-1.0, -2.0, -3.0, -4.0]]
    out = _truncate(rows, top_k=[0, 3, 1])
    assert out[0].tolist() == rows[0]
    assert _kept(out[1]) == [0, 1, 3]
    assert _kept(out[2]) == [0]


def test_top_k_equal_to_vocab_keeps_everything():
    row = [-3.0, -1.0, -4.0, -2.0]
    assert _truncate([row], top_k=[4]).tolist() == [row]


def test_top_k_larger_than_vocab_keeps_everything():
    """SamplingParams accepts any top_k >= -1 and nothing caps it at the vocabulary size.

    A request with top_k > vocab must behave like "no top-k" (SGLang clamps it), not raise: in the
    scheduler an exception here fails every running request of the batch.
    """
    rows = [[-3.0, -1.0, -4.0, -2.0], [-1.0, -2.0, -3.0, -4.0]]
    out = _truncate(rows, top_k=[10, 2])
    assert out[0].tolist() == rows[0]
    assert _kept(out[1]) == [0, 1]


# --------------------------------------------------------------------------------------------------
# truncate: top-p
# --------------------------------------------------------------------------------------------------

P4 = _lp(0.5, 0.25, 0.125, 0.125)


@pytest.mark.parametrize(
    "top_p, kept",
    [
        (0.3, [0]),  # the top token always stays, even when it alone exceeds top_p
        (0.49, [0]),
        (0.51, [0, 1]),  # mass before token 1 is 0.5 < 0.51
        (0.74, [0, 1]),
        (0.76, [0, 1, 2]),  # mass before token 2 is 0.75 < 0.76
        (0.88, [0, 1, 2, 3]),  # mass before token 3 is 0.875 < 0.88
    ],
)
def test_top_p_keeps_tokens_whose_preceding_mass_is_below_top_p(top_p, kept):
    out = _truncate([P4], top_p=[top_p])
    assert _kept(out[0]) == kept
    for i in kept:
        assert out[0, i].item() == pytest.approx(P4[i])


def test_top_p_maps_back_to_the_original_token_order():
    # same distribution, shuffled: the nucleus must be found by probability, not by position
    row = _lp(0.125, 0.25, 0.125, 0.5)
    out = _truncate([row], top_p=[0.6])
    assert _kept(out[0]) == [1, 3]


def test_top_p_with_ties_keeps_as_many_as_the_mass_needs():
    row = _lp(0.25, 0.25, 0.25, 0.25)
    out = _truncate([row], top_p=[0.6])  # preceding masses 0, .25, .5, .75 -> three survive
    assert len(_kept(out[0])) == 3


def test_top_p_after_top_k_uses_the_unrenormalised_mass():
    # top-k leaves {0.4, 0.3}; the mass before 0.3 is 0.4 of the *original* distribution (< 0.5), so it stays
    # (renormalising first would make it 0.4/0.7 = 0.57 and drop it)
    row = _lp(0.4, 0.3, 0.2, 0.1)
    out = _truncate([row], top_k=[2], top_p=[0.5])
    assert _kept(out[0]) == [0, 1]
    out = _truncate([row], top_k=[3], top_p=[0.65])
    assert _kept(out[0]) == [0, 1]


# --------------------------------------------------------------------------------------------------
# truncate: min-p
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "min_p, kept",
    [
        (0.25, [0, 1, 4]),  # threshold 0.125: 0.2 and 0.15 survive, 0.1 and 0.05 do not
        (0.35, [0, 1]),  # threshold 0.175
        (0.5, [0]),  # threshold 0.25
        (0.05, [0, 1, 2, 3, 4]),  # threshold 0.025
    ],
)
def test_min_p_is_relative_to_the_best_token(min_p, kept):
    row = _lp(0.5, 0.2, 0.1, 0.05, 0.15)
    out = _truncate([row], min_p=[min_p])
    assert _kept(out[0]) == kept


def test_min_p_also_works_on_unnormalised_rows():
    # relative: shifting every log-prob by a constant changes nothing
    row = [v + 3.0 for v in _lp(0.5, 0.2, 0.1, 0.05, 0.15)]
    assert _kept(_truncate([row], min_p=[0.25])[0]) == [0, 1, 4]


# --------------------------------------------------------------------------------------------------
# truncate: mixed batches
# --------------------------------------------------------------------------------------------------


def test_each_row_uses_only_its_own_settings():
    a = _lp(0.5, 0.2, 0.1, 0.05, 0.15)
    rows = [a, a, a, a]
    out = _truncate(
        rows,
        top_k=[2, 0, 0, 0],
        top_p=[1.0, 0.6, 1.0, 1.0],
        min_p=[0.0, 0.0, 0.25, 0.0],
    )
    assert _kept(out[0]) == [0, 1]  # top-k 2
    assert _kept(out[1]) == [0, 1]  # mass before 0.15 is 0.7 >= 0.6 -> dropped
    assert _kept(out[2]) == [0, 1, 4]  # min-p 0.25
    assert out[3].tolist() == torch.tensor(a).tolist()  # nothing asked: untouched


def test_nothing_to_truncate_returns_the_input_unchanged():
    lp = torch.log_softmax(torch.randn(3, 50, generator=torch.Generator().manual_seed(0)), -1)
    out = truncate(lp, torch.zeros(3, dtype=torch.long), torch.ones(3), torch.zeros(3))
    assert torch.equal(out, lp)


def test_min_p_zero_row_is_untouched_next_to_a_min_p_row():
    """Docstring: rows with nothing to truncate pass through. A min_p=0 row gets a threshold of
    best + log(1e-12) (= best - 27.6) instead of none when another row of the batch uses min-p."""
    rows = [[0.0, -40.0, -1.0], [0.0, -1.0, -2.0]]
    out = _truncate(rows, min_p=[0.0, 0.3])  # row 1: threshold log(0.3) = -1.2
    assert out[0].tolist() == rows[0]
    assert _kept(out[1]) == [0, 1]


def test_top_p_one_row_is_untouched_next_to_a_top_p_row():
    """Docstring: rows with nothing to truncate pass through. With top_p = 1.0 a token whose preceding
    float32 mass rounds to 1.0 is dropped anyway when another row of the batch uses top-p."""
    row = torch.log_softmax(torch.tensor([0.0, -21.0, -30.0]), -1)  # a normalised row with a tiny tail
    other = torch.tensor(_lp(0.5, 0.25, 0.25))
    out = truncate(torch.stack([row, other]), torch.zeros(2, dtype=torch.long), torch.tensor([1.0, 0.6]), torch.zeros(2))
    assert torch.equal(out[0], row)
    assert _kept(out[1]) == [0, 1] or _kept(out[1]) == [0, 2]


# --------------------------------------------------------------------------------------------------
# scaled_logprobs / top_logprobs
# --------------------------------------------------------------------------------------------------


def test_scaled_logprobs_hand_values():
    # logits [0, 2 ln 3] at T=2 -> softmax of [0, ln 3] -> [1/4, 3/4]; at T=1 -> [1/10, 9/10]
    logits = torch.tensor([[0.0, 2 * math.log(3)], [0.0, 2 * math.log(3)]])
    out = scaled_logprobs(logits, torch.tensor([2.0, 1.0]))
    assert out.exp().tolist() == [pytest.approx([0.25, 0.75]), pytest.approx([0.1, 0.9])]


def test_scaled_logprobs_matches_log_softmax_per_row_temperature():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 33, generator=g) * 5
    temps = torch.tensor([1.0, 0.5, 2.0, 0.7])
    out = scaled_logprobs(logits, temps)
    for i in range(4):
        torch.testing.assert_close(out[i], torch.log_softmax(logits[i] / temps[i], -1))
    assert out.dtype == torch.float32


def test_scaled_logprobs_is_float32_for_half_inputs():
    logits = torch.randn(2, 8).to(torch.bfloat16)
    out = scaled_logprobs(logits, torch.ones(2))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.log_softmax(logits.float(), -1))


def test_top_logprobs_returns_sorted_best_k():
    lp = torch.tensor([[-3.0, -1.0, -4.0, -2.0]])
    values, indices = top_logprobs(lp, 2)
    assert values.tolist() == [[-1.0, -2.0]]
    assert indices.tolist() == [[1, 3]]


# --------------------------------------------------------------------------------------------------
# draw
# --------------------------------------------------------------------------------------------------


def _uniform_rows(b, v):
    return torch.full((b, v), -math.log(v))


def test_greedy_rows_take_the_argmax():
    lp = torch.tensor([_lp(0.1, 0.6, 0.3), _lp(0.2, 0.3, 0.5), _lp(0.7, 0.2, 0.1)])
    shared = torch.Generator().manual_seed(0)
    for _ in range(20):
        out = draw(lp, torch.tensor([True, True, True]), [None, None, None], shared)
        assert out.tolist() == [1, 2, 0]


def test_greedy_rows_ignore_their_generator_and_non_greedy_rows_still_sample():
    v = 1000
    lp = _uniform_rows(2, v)
    lp[0, 123] = 0.0  # the argmax of row 0
    shared = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(20):
        out = draw(lp, torch.tensor([True, False]), [torch.Generator().manual_seed(5), None], shared)
        assert out[0].item() == 123
        seen.add(out[1].item())
    assert len(seen) > 10  # a uniform 1000-way row is not stuck on one token


def _seeded_draws(seed, neighbours_before, neighbours_after, steps=8, v=1000):
    """Draw `steps` tokens for one seeded uniform row placed among other rows; return its tokens."""
    gen = torch.Generator().manual_seed(seed)
    shared = torch.Generator().manual_seed(999)
    b = neighbours_before + 1 + neighbours_after
    lp = _uniform_rows(b, v)
    gens = [None] * b
    # neighbours: one seeded with another seed, the rest shared
    if neighbours_before:
        gens[0] = torch.Generator().manual_seed(seed + 1)
    gens[neighbours_before] = gen
    greedy = torch.zeros(b, dtype=torch.bool)
    return [draw(lp, greedy, gens, shared)[neighbours_before].item() for _ in range(steps)]


def test_seeded_row_is_reproducible_whatever_its_neighbours():
    alone = _seeded_draws(42, 0, 0)
    assert _seeded_draws(42, 2, 3) == alone
    assert _seeded_draws(42, 0, 5) == alone
    assert _seeded_draws(42, 4, 0) == alone
    assert len(set(alone)) > 1
    assert _seeded_draws(43, 0, 0) != alone


def test_seeded_row_matches_its_generator_uniforms():
    # inverse CDF on a uniform 1000-way row: token = floor(u * 1000) where u is the generator's next float64
    gen = torch.Generator().manual_seed(7)
    expected = [int(u * 1000) for u in torch.empty(5, dtype=torch.float64).uniform_(generator=gen).tolist()]
    gen = torch.Generator().manual_seed(7)
    lp = _uniform_rows(1, 1000).double()
    got = [draw(lp, torch.tensor([False]), [gen], torch.Generator()).item() for _ in range(5)]
    assert got == expected


def test_all_seeded_batch_does_not_consume_the_shared_generator():
    shared = torch.Generator().manual_seed(3)
    before = shared.get_state()
    draw(_uniform_rows(2, 10), torch.tensor([False, False]), [torch.Generator(), torch.Generator()], shared)
    assert torch.equal(shared.get_state(), before)


def test_empirical_distribution_matches_softmax():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    logits = torch.log(probs) * 1.7 + 0.3  # arbitrary logits with T = 1.7 giving back `probs`
    n = 20000
    lp = scaled_logprobs(logits.expand(n, 4), torch.full((n,), 1.7))
    shared = torch.Generator().manual_seed(1234)
    out = draw(lp, torch.zeros(n, dtype=torch.bool), [None] * n, shared)
    freq = torch.bincount(out, minlength=4).double() / n
    assert freq.tolist() == pytest.approx(probs.tolist(), abs=0.015)


def test_truncated_mass_is_renormalised_when_drawing():
    # the drawable mass is 0.75: tokens 0 and 1 must come out 2:1
    n = 20000
    lp = torch.tensor(_lp(0.5, 0.25, 0.0, 0.0)).expand(n, 4)
    out = draw(lp, torch.zeros(n, dtype=torch.bool), [None] * n, torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=4).double() / n
    assert freq.tolist() == pytest.approx([2 / 3, 1 / 3, 0.0, 0.0], abs=0.015)


@pytest.mark.parametrize(
    "row",
    [
        _lp(0.0, 0.5, 0.0, 0.5),
        _lp(1.0, 0.0, 0.0, 0.0),  # only the first token can be drawn
        _lp(0.0, 0.0, 0.0, 1.0),  # only the last
        _lp(0.0, 0.3, 0.7, 0.0),
    ],
)
def test_minus_inf_entries_are_never_drawn(row):
    n = 20000
    lp = torch.tensor(row).expand(n, 4)
    out = draw(lp, torch.zeros(n, dtype=torch.bool), [None] * n, torch.Generator().manual_seed(0))
    allowed = {i for i, v in enumerate(row) if v != NEG_INF}
    assert set(out.tolist()) == allowed


def test_draw_after_truncate_only_yields_kept_tokens():
    g = torch.Generator().manual_seed(5)
    n = 4000
    lp = torch.log_softmax(torch.randn(1, 64, generator=g) * 3, -1).expand(n, 64)
    cand = truncate(lp, torch.full((n,), 5, dtype=torch.long), torch.ones(n), torch.zeros(n))
    out = draw(cand, torch.zeros(n, dtype=torch.bool), [None] * n, torch.Generator().manual_seed(0))
    top5 = set(torch.topk(lp[0], 5).indices.tolist())
    assert set(out.tolist()) == top5


# --------------------------------------------------------------------------------------------------
# SamplingConfig
# --------------------------------------------------------------------------------------------------


def test_sampling_config_defaults():
    c = SamplingConfig()
    assert (c.temperature, c.top_p, c.top_k, c.min_p, c.max_new_tokens) == (1.0, 1.0, 0, 0.0, 128)
    assert c.stop == [] and c.stop_token_ids == set() and c.seed is None
    assert not c.greedy and not c.truncates and c.logprob_temperature == 1.0
    # mutable defaults are not shared
    c.stop.append("x")
    assert SamplingConfig().stop == []


@pytest.mark.parametrize(
    "kwargs, greedy",
    [
        ({"temperature": 0.0}, True),
        ({"temperature": GREEDY_EPS / 2}, True),
        ({"temperature": GREEDY_EPS}, False),
        ({"temperature": 0.7}, False),
        ({"temperature": 1.0, "top_k": 1}, True),
        ({"temperature": 1.0, "top_k": 2}, False),
    ],
)
def test_greedy(kwargs, greedy):
    assert SamplingConfig(**kwargs).greedy is greedy


@pytest.mark.parametrize("temperature, expected", [(0.0, 1.0), (1e-6, 1.0), (0.7, 0.7), (1.5, 1.5)])
def test_logprob_temperature(temperature, expected):
    assert SamplingConfig(temperature=temperature).logprob_temperature == expected


@pytest.mark.parametrize(
    "kwargs, truncates",
    [
        ({}, False),
        ({"top_k": 1}, False),  # greedy anyway
        ({"top_k": 2}, True),
        ({"top_p": 0.9}, True),
        ({"top_p": 1.0}, False),
        ({"min_p": 0.05}, True),
        ({"temperature": 0.0}, False),
    ],
)
def test_truncates(kwargs, truncates):
    assert SamplingConfig(**kwargs).truncates is truncates


def test_sampling_works_on_the_logits_device_with_host_settings():
    """The per-row settings are CPU tensors while the logits live with the model (on a GPU). The "meta" device
    stands in for a device that is not the CPU here: an op that mixes it with a CPU tensor raises, which is how the
    embedded engine failed on an H100 (`scaled_logprobs`: "found at least two devices, cuda:0 and cpu")."""
    logits = torch.zeros(3, 10, device="meta")
    lp = scaled_logprobs(logits, torch.tensor([1.0, 0.5, 1.0]))
    assert lp.device.type == "meta" and lp.dtype == torch.float32
    kept = truncate(lp, torch.tensor([0, 2, 0]), torch.tensor([1.0, 0.9, 1.0]), torch.tensor([0.0, 0.0, 0.1]))
    assert kept.device.type == "meta" and kept.shape == (3, 10)
    chosen = draw(kept, torch.tensor([False, True, False]), [None, None, torch.Generator().manual_seed(1)],
                  torch.Generator().manual_seed(0))
    assert chosen.device.type == "meta" and chosen.shape == (3,)
