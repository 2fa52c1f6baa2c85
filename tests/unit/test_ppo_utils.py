"""Loss and advantage math (slime.utils.ppo_utils): hand-computed values, edge cases, and a TRL cross-check."""

import importlib.util
import inspect
import math
import re
import warnings
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from slime.utils.ppo_utils import (
    SingletonGroupTracker,
    SingletonGroupWarning,
    compute_approx_kl,
    clipped_policy_loss,
    entropy_from_logits,
    grpo_advantages,
    grpo_normalize,
    gspo_sequence_kl,
    log_probs_from_logits,
    masked_mean,
    masked_whiten,
    on_policy_distillation_advantages,
    reinforce_plus_plus_returns,
    sum_of_sample_mean,
    sum_of_tokens,
    truncated_importance_weights,
)


def t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


def close(actual, expected, atol=1e-6):
    expected = expected if isinstance(expected, torch.Tensor) else t(expected)
    torch.testing.assert_close(actual.to(expected.dtype), expected, atol=atol, rtol=0)


def ppo_kl_for(ratios):
    # ppo_kl = old - new and ratio = exp(-ppo_kl)  =>  ppo_kl = -log(ratio)
    return -torch.log(t(ratios))


# --------------------------------------------------------------------------------------------------
# KL estimators
# --------------------------------------------------------------------------------------------------

# log_probs - ref_log_probs = d = [1, 0, -2]
LOGP = [0.0, -1.0, -2.0]
REF = [-1.0, -1.0, 0.0]


def test_kl_k1_is_the_log_ratio():
    close(compute_approx_kl(t(LOGP), t(REF), "k1"), [1.0, 0.0, -2.0])


def test_kl_k2_is_half_the_squared_log_ratio():
    # d^2 / 2 = [0.5, 0, 2]
    close(compute_approx_kl(t(LOGP), t(REF), "k2"), [0.5, 0.0, 2.0])


@pytest.mark.parametrize("kl_type", ["k3", "low_var_kl"])
def test_kl_k3_and_low_var(kl_type):
    # exp(-d) - 1 + d: d=1 -> e^-1 = 0.367879; d=0 -> 0; d=-2 -> e^2 - 3 = 4.389056
    close(compute_approx_kl(t(LOGP), t(REF), kl_type), [0.36787944, 0.0, 4.38905610])


def test_low_var_kl_clamps_but_k3_does_not():
    # d = -15: exp(15) - 16 = 3269001.37 -> low_var_kl clamps to 10
    logp, ref = t([0.0]), t([15.0])
    close(compute_approx_kl(logp, ref, "low_var_kl"), [10.0])
    assert compute_approx_kl(logp, ref, "k3").item() == pytest.approx(3269001.3724721107)


def test_kl_unknown_type():
    with pytest.raises(ValueError, match="kl_type"):
        compute_approx_kl(t(LOGP), t(REF), "k4")


@pytest.mark.parametrize("kl_type", ["k1", "k2", "k3"])
def test_importance_ratio_multiplies_the_unclamped_estimators(kl_type):
    ratio = t([0.5, 2.0, 3.0])
    close(compute_approx_kl(t(LOGP), t(REF), kl_type, importance_ratio=ratio),
          ratio * compute_approx_kl(t(LOGP), t(REF), kl_type))


def test_unbiased_low_var_kl_clamps_after_the_importance_ratio():
    """--use-unbiased-kl with low_var_kl: clamp(ratio * kl, -10, 10), not ratio * clamp(kl, -10, 10) (upstream)."""
    # d = -2: kl = e^2 - 3 = 4.389 (inside the clamp), times 3 = 13.17 -> 10 (clamp-before would give 13.17);
    # d = -15: kl = 3269001.37 -> clamped 10 either way, times 0.5: clamp-after gives 10, clamp-before 5.
    logp, ref, ratio = t([0.0, 0.0, 0.0]), t([2.0, 15.0, 1.0]), t([3.0, 0.5, 2.0])
    kl = compute_approx_kl(logp, ref, "low_var_kl", importance_ratio=ratio)
    close(kl, [10.0, 10.0, 2.0 * (math.exp(1.0) - 2.0)])
    clamp_before = ratio * compute_approx_kl(logp, ref, "low_var_kl")
    assert not torch.allclose(kl, clamp_before)
    # a tiny ratio on a huge estimate: the product is kept (clamp-before would give 10 * 1e-9)
    assert compute_approx_kl(t([0.0]), t([15.0]), "low_var_kl", importance_ratio=t([1e-9])).item() == pytest.approx(
        3269001.3724721107 * 1e-9)


# --------------------------------------------------------------------------------------------------
# Truncated importance sampling (--use-tis)
# --------------------------------------------------------------------------------------------------


def test_truncated_importance_weights_are_the_clamped_ratio():
    # exp(old - rollout) = [0.5, 1, 3, 1.5]; clamped to [0.8, 2]
    rollout = t([[-1.0, -2.0, -0.5, -1.0]])
    old = rollout + torch.log(t([[0.5, 1.0, 3.0, 1.5]]))
    weights, ratio = truncated_importance_weights(old, rollout, 0.8, 2.0)
    close(ratio, [[0.5, 1.0, 3.0, 1.5]])
    close(weights, [[0.8, 1.0, 2.0, 1.5]])
    assert (weights != ratio).tolist() == [[True, False, True, False]]
    # the defaults are slime's: [0, 2]
    close(truncated_importance_weights(old, rollout)[0], [[0.5, 1.0, 2.0, 1.5]])


def test_truncated_importance_weights_are_detached():
    old = t([[-0.3, -1.0]]).requires_grad_(True)
    weights, ratio = truncated_importance_weights(old, t([[-0.5, -0.5]]), 0.0, 2.0)
    assert not weights.requires_grad and not ratio.requires_grad


@pytest.mark.parametrize("low, high", [(1.0, 1.0), (2.0, 1.0), (-0.1, 2.0)])
def test_truncated_importance_weights_refuse_bad_bounds(low, high):
    with pytest.raises(ValueError, match="clip_low"):
        truncated_importance_weights(t([0.0]), t([0.0]), low, high)


# --------------------------------------------------------------------------------------------------
# Policy loss
# --------------------------------------------------------------------------------------------------


def test_policy_loss_asymmetric_clip():
    # eps_clip 0.2 / eps_clip_high 0.28: ratio clipped to [0.8, 1.28]
    # ratio  A  | L1 = -r*A | L2 = -clip(r)*A | pg = max  | clipped (L2 > L1)
    #  1.5  +1  |  -1.5     |  -1.28          |  -1.28    | 1
    #  1.25 +1  |  -1.25    |  -1.25          |  -1.25    | 0   (inside the high bound of 1.28)
    #  0.5  +1  |  -0.5     |  -0.8           |  -0.5     | 0   (low ratio, positive A: not clipped)
    #  0.5  -1  |   0.5     |   0.8           |   0.8     | 1
    #  1.5  -1  |   1.5     |   1.28          |   1.5     | 0   (high ratio, negative A: not clipped)
    #  0.75 -2  |   1.5     |   1.6           |   1.6     | 1
    ratios = [1.5, 1.25, 0.5, 0.5, 1.5, 0.75]
    adv = t([1.0, 1.0, 1.0, -1.0, -1.0, -2.0])
    pg, clipfrac, dual = clipped_policy_loss(ppo_kl_for(ratios), adv, 0.2, 0.28)
    close(pg, [-1.28, -1.25, -0.5, 0.8, 1.5, 1.6])
    close(clipfrac, [1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    close(dual, [0.0] * 6)


def test_policy_loss_symmetric_by_default():
    # eps_clip_high defaults to eps_clip: ratio 1.25, A=+1 -> clipped to 1.2 -> pg = -1.2
    pg, clipfrac, _ = clipped_policy_loss(ppo_kl_for([1.25]), t([1.0]), 0.2)
    close(pg, [-1.2])
    close(clipfrac, [1.0])


def test_policy_loss_zero_kl_is_minus_advantage():
    adv = t([[0.3, -0.7], [2.0, 0.0]])
    pg, clipfrac, _ = clipped_policy_loss(torch.zeros_like(adv), adv, 0.2, 0.28)
    close(pg, -adv)
    close(clipfrac, torch.zeros_like(adv))


def test_dual_clip_only_bounds_negative_advantages():
    # eps_clip_c = 3, eps 0.2/0.28
    # ratio  A  | pg before dual | -c*A | after     | dual clipped
    #  4.0  -1  |  4.0           |  3   |  3.0      | 1
    #  4.0  +1  | -1.28          | -3   | -1.28     | 0   (positive A untouched)
    #  0.5  -1  |  0.8           |  3   |  0.8      | 0   (already below the bound)
    # 10.0  +1  | -1.28          | -3   | -1.28     | 0
    #  2.0  -0.5|  1.0           | 1.5  |  1.0      | 0
    #  5.0  -0.5|  2.5           | 1.5  |  1.5      | 1
    ratios = [4.0, 4.0, 0.5, 10.0, 2.0, 5.0]
    adv = t([-1.0, 1.0, -1.0, 1.0, -0.5, -0.5])
    pg, clipfrac, dual = clipped_policy_loss(ppo_kl_for(ratios), adv, 0.2, 0.28, eps_clip_c=3.0)
    close(pg, [3.0, -1.28, 0.8, -1.28, 1.0, 1.5])
    close(dual, [1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    # The ordinary clip indicator is unaffected by the dual clip.
    close(clipfrac, [0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    # Without dual clip the same inputs differ only at the negative-advantage, high-ratio tokens.
    pg_plain, _, _ = clipped_policy_loss(ppo_kl_for(ratios), adv, 0.2, 0.28)
    close(pg_plain, [4.0, -1.28, 0.8, -1.28, 1.0, 2.5])


@pytest.mark.parametrize("c", [1.0, 0.5, 0.0])
def test_dual_clip_requires_c_above_one(c):
    with pytest.raises(ValueError, match="eps_clip_c"):
        clipped_policy_loss(t([0.0]), t([-1.0]), 0.2, 0.2, eps_clip_c=c)


def test_gspo_sequence_kl_is_masked_sample_mean():
    # row 0: (1 + 2) / 2 = 1.5 on every token, including the unmasked one
    # row 1: all-zero mask -> 0 / max(1, 0) = 0
    ppo_kl = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = t([[1, 1, 0], [0, 0, 0]])
    close(gspo_sequence_kl(ppo_kl, mask), [[1.5, 1.5, 1.5], [0.0, 0.0, 0.0]])


# --------------------------------------------------------------------------------------------------
# Logits
# --------------------------------------------------------------------------------------------------


def test_entropy_from_logits_values():
    # uniform over 4: ln 4 = 1.386294
    # probs [0.25, 0.75]: -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.346574 + 0.215762 = 0.562335
    # one logit 1000 above the other: a point mass, entropy ~0 (and no NaN/inf)
    logits = t([[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3.0), -1e9, -1e9], [1000.0, 0.0, 0.0, 0.0]])
    close(entropy_from_logits(logits), [1.38629436, 0.56233514, 0.0])


def test_entropy_upcasts_half_precision():
    out = entropy_from_logits(torch.zeros(2, 3, 8, dtype=torch.bfloat16))
    assert out.dtype == torch.float32 and out.shape == (2, 3)
    close(out, torch.full((2, 3), math.log(8.0), dtype=torch.float64), atol=1e-5)


def test_log_probs_from_logits_values():
    # probs [0.25, 0.75]: log p(0) = ln 0.25 = -1.386294, log p(1) = ln 0.75 = -0.287682
    logits = t([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]])  # [B=1, T=2, V=2]
    tokens = torch.tensor([[1, 0]])
    close(log_probs_from_logits(logits, tokens), [[-0.28768207, -1.38629436]])


def test_log_probs_temperature():
    # logits [0, 2] / T=2 -> [0, 1]: log p(1) = 1 - ln(1 + e) = -0.313262
    out = log_probs_from_logits(t([[0.0, 2.0]]), torch.tensor([1]), temperature=2.0)
    close(out, [-0.31326169])


# --------------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------------

X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
MASK = [[1, 1, 0], [1, 1, 1], [0, 0, 0]]


def test_sum_of_sample_mean():
    # (1+2)/2 + (4+5+6)/3 + 0 (all-zero mask) = 1.5 + 5 + 0 = 6.5
    assert sum_of_sample_mean(t(X), t(MASK)).item() == pytest.approx(6.5)
    assert sum_of_sample_mean(t(X), torch.tensor(MASK, dtype=torch.bool)).item() == pytest.approx(6.5)


def test_sum_of_tokens():
    # 1 + 2 + 4 + 5 + 6 = 18
    assert sum_of_tokens(t(X), t(MASK)).item() == pytest.approx(18.0)
    assert sum_of_tokens(t(X), torch.tensor(MASK, dtype=torch.bool)).item() == pytest.approx(18.0)


def test_reductions_of_an_all_zero_mask_are_zero():
    zeros = torch.zeros(2, 3)
    x = torch.randn(2, 3)
    assert sum_of_sample_mean(x, zeros).item() == 0.0
    assert sum_of_tokens(x, zeros).item() == 0.0
    assert masked_mean(x, zeros).item() == 0.0


def test_masked_mean():
    # (1 + 2 + 4 + 5 + 6) / 5 = 3.6
    assert masked_mean(t(X), t(MASK)).item() == pytest.approx(3.6)


def test_reductions_return_scalars_with_gradients():
    x = torch.randn(2, 3, requires_grad=True)
    loss = sum_of_sample_mean(x, torch.ones(2, 3))
    assert loss.dim() == 0
    loss.backward()
    close(x.grad, torch.full((2, 3), 1 / 3, dtype=torch.float64))


# --------------------------------------------------------------------------------------------------
# GRPO normalisation
# --------------------------------------------------------------------------------------------------

# group 0: [1, 0, 1, 0]  mean 0.5, unbiased std sqrt(1/3) = 0.577350 -> +-0.5/0.577350 = +-0.866025
# group 1: [5]           singleton -> 0
# group 2: [2, 2]        constant  -> 0
# group 3: [7]           singleton -> 0
# group 4: [3, 1]        mean 2, unbiased std sqrt(2) -> +-1/1.414214 = +-0.707107
REWARDS = [1.0, 0.0, 1.0, 0.0, 5.0, 2.0, 2.0, 7.0, 3.0, 1.0]
GROUPS = [0, 0, 0, 0, 1, 2, 2, 3, 4, 4]


def test_grpo_normalize_with_std():
    out, info = grpo_normalize(t(REWARDS), torch.tensor(GROUPS), use_std=True)
    a, b = 0.8660254, 0.70710678
    close(out, [a, -a, a, -a, 0.0, 0.0, 0.0, 0.0, b, -b], atol=2e-6)  # eps=1e-6 shifts the 6th digit
    assert info == {"num_groups": 5, "singleton_groups": 2, "constant_groups": 1}


def test_grpo_normalize_mean_only():
    out, info = grpo_normalize(t(REWARDS), GROUPS, use_std=False)
    close(out, [0.5, -0.5, 0.5, -0.5, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0])
    assert info["singleton_groups"] == 2 and info["constant_groups"] == 1


def test_grpo_normalize_singletons_are_exactly_zero():
    out, info = grpo_normalize(t([0.1, 123.456, -7.0]), [0, 1, 2], use_std=True)
    assert out.tolist() == [0.0, 0.0, 0.0]
    assert info == {"num_groups": 3, "singleton_groups": 3, "constant_groups": 0}


def test_grpo_normalize_constant_group_without_eps_is_zero_not_nan():
    out, info = grpo_normalize(t([3.0, 3.0, 3.0]), [0, 0, 0], use_std=True, eps=0.0)
    assert out.tolist() == [0.0, 0.0, 0.0]
    assert info["constant_groups"] == 1


def test_grpo_normalize_unordered_ids_and_none():
    # ids [2, 0, 2, 0]: group 2 = [1, 3] mean 2 -> [-1, 1]; group 0 = [10, 20] mean 15 -> [-5, 5]
    out, _ = grpo_normalize(t([1.0, 10.0, 3.0, 20.0]), [2, 0, 2, 0], use_std=False)
    close(out, [-1.0, -5.0, 1.0, 5.0])
    # None = one shared group: [1, 3] -> [-1, 1]; group 3 = [0, 0] constant -> 0
    out, info = grpo_normalize(t([1.0, 3.0, 0.0, 0.0]), [None, None, 3, 3], use_std=False)
    close(out, [-1.0, 1.0, 0.0, 0.0])
    assert info == {"num_groups": 2, "singleton_groups": 0, "constant_groups": 1}


def test_grpo_normalize_shape_errors():
    with pytest.raises(ValueError, match="group_ids"):
        grpo_normalize(t([1.0, 2.0]), [0, 0, 0], use_std=True)
    with pytest.raises(ValueError, match="rewards"):
        grpo_normalize(t([[1.0, 2.0]]), [0, 0], use_std=True)


def test_grpo_normalize_integer_rewards():
    out, _ = grpo_normalize(torch.tensor([1, 0]), [0, 0], use_std=False)
    assert out.is_floating_point()
    close(out, [0.5, -0.5])


def test_singleton_tracker_warns_once_and_counts():
    tracker = SingletonGroupTracker()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker.record(0)
    assert caught == [] and tracker.total == 0 and not tracker.warned

    with pytest.warns(SingletonGroupWarning, match="2 GRPO group"):
        tracker.record(2)
    assert tracker.total == 2 and tracker.warned

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # would re-show a duplicate warning: the tracker must not emit one
        tracker.record(3)
        tracker.record(1)
    assert caught == []
    assert tracker.total == 6


def test_singleton_tracker_with_grpo_normalize():
    tracker = SingletonGroupTracker()
    with pytest.warns(SingletonGroupWarning):
        tracker.record(grpo_normalize(t(REWARDS), GROUPS, use_std=True)[1]["singleton_groups"])
    assert tracker.total == 2


def test_grpo_advantages_broadcast_and_mask():
    out = grpo_advantages(t([0.5, -1.0]), t([[1, 1, 0], [0, 1, 1]]))
    close(out, [[0.5, 0.5, 0.0], [0.0, -1.0, -1.0]])
    out = grpo_advantages(t([2.0]), torch.tensor([[True, False]]))
    close(out, [[2.0, 0.0]])


# --------------------------------------------------------------------------------------------------
# REINFORCE++, whitening, OPD
# --------------------------------------------------------------------------------------------------


def test_reinforce_plus_plus_returns():
    # kl_coef 0.5, gamma 0.9
    # row 0: mask [1,1,1,0], kl [.1,.2,.3,.4], reward 1 at t=2
    #   token rewards [-0.05, -0.1, -0.15 + 1 = 0.85, 0]
    #   G3 = 0; G2 = 0.85; G1 = -0.1 + 0.9*0.85 = 0.665; G0 = -0.05 + 0.9*0.665 = 0.5485
    # row 1: mask [1,0,1,1], kl 0.5 everywhere, reward 2 at t=3
    #   token rewards [-0.25, 0 (masked), -0.25, -0.25 + 2 = 1.75]
    #   G3 = 1.75; G2 = -0.25 + 1.575 = 1.325; G1 = 0.9*1.325 = 1.1925 (masked out); G0 = -0.25 + 1.07325 = 0.82325
    # row 2: all-zero mask -> zeros (its reward has no token to sit on)
    rewards = t([1.0, 2.0, 3.0])
    kl = t([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.5, 0.5], [1.0, 1.0, 1.0, 1.0]])
    mask = t([[1, 1, 1, 0], [1, 0, 1, 1], [0, 0, 0, 0]])
    out = reinforce_plus_plus_returns(rewards, kl, mask, kl_coef=0.5, gamma=0.9)
    close(out, [[0.5485, 0.665, 0.85, 0.0], [0.82325, 0.0, 1.325, 1.75], [0.0, 0.0, 0.0, 0.0]])


def test_reinforce_plus_plus_without_kl_and_discount_is_reward_to_go():
    rewards = t([2.0, -1.0])
    mask = t([[1, 1, 0], [0, 1, 1]])
    out = reinforce_plus_plus_returns(rewards, torch.ones(2, 3, dtype=torch.float64), mask, kl_coef=0.0, gamma=1.0)
    close(out, [[2.0, 2.0, 0.0], [0.0, -1.0, -1.0]])


def test_reinforce_plus_plus_does_not_modify_inputs():
    kl = t([[0.1, 0.2]])
    before = kl.clone()
    reinforce_plus_plus_returns(t([1.0]), kl, t([[1, 1]]), kl_coef=1.0, gamma=1.0)
    assert torch.equal(kl, before)


def test_masked_whiten():
    # masked values 1, 2, 3, 5: mean 2.75, deviations -1.75 -0.75 0.25 2.25,
    # population variance 8.75 / 4 = 2.1875, std 1.479020
    # -> -1.183216 -0.507093 0.169031 1.521278; unmasked positions -> 0
    x = t([[1.0, 2.0, 3.0], [100.0, 5.0, 0.0]])
    mask = t([[1, 1, 1], [0, 1, 0]])
    close(masked_whiten(x, mask), [[-1.18321596, -0.50709255, 0.16903085], [0.0, 1.52127766, 0.0]])
    # shift_mean=False adds the mean 2.75 back
    close(masked_whiten(x, mask, shift_mean=False), [[1.56678404, 2.24290745, 2.91903085], [0.0, 4.27127766, 0.0]])


def test_masked_whiten_all_zero_mask():
    out = masked_whiten(torch.randn(2, 3), torch.zeros(2, 3))
    assert torch.equal(out, torch.zeros(2, 3))


def test_masked_whiten_has_unit_masked_stats():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 9, generator=g, dtype=torch.float64) * 3 + 1
    mask = (torch.rand(4, 9, generator=g) > 0.3).double()
    w = masked_whiten(x, mask)
    n = mask.sum()
    assert (w * mask).sum().item() / n.item() == pytest.approx(0.0, abs=1e-9)
    assert (w.square() * mask).sum().item() / n.item() == pytest.approx(1.0, abs=1e-6)


def test_on_policy_distillation_advantages():
    # teacher - old = [-1 + 1.5, -2 + 0.5, -0.5 + 0.5] = [0.5, -1.5, 0]; third token unmasked
    teacher = t([[-1.0, -2.0, -0.5]])
    old = t([[-1.5, -0.5, -0.9]])
    mask = t([[1, 1, 0]])
    close(on_policy_distillation_advantages(teacher, old, mask), [[0.5, -1.5, 0.0]])
    close(on_policy_distillation_advantages(teacher, old, mask, bound=1.0), [[0.5, -1.0, 0.0]])
    with pytest.raises(ValueError, match="bound"):
        on_policy_distillation_advantages(teacher, old, mask, bound=0.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_on_policy_distillation_advantages_ignore_a_non_finite_teacher_at_a_masked_token(bad):
    """NaN * 0 is NaN: a masked token's teacher value must not leak into the advantages (nor the loss)."""
    teacher = t([[-1.0, -2.0, bad]])
    old = t([[-1.5, -0.5, -0.9]])
    mask = t([[1, 1, 0]])
    adv = on_policy_distillation_advantages(teacher, old, mask)
    assert torch.isfinite(adv).all()
    close(adv, [[0.5, -1.5, 0.0]])
    close(on_policy_distillation_advantages(teacher, old, mask.bool(), bound=1.0), [[0.5, -1.0, 0.0]])
    assert sum_of_sample_mean(adv, mask).isfinite()


# --------------------------------------------------------------------------------------------------
# Cross-check against TRL
# --------------------------------------------------------------------------------------------------

requires_trl = pytest.mark.skipif(
    importlib.util.find_spec("trl") is None,
    reason="trl is not installed (test-only dependency: pip install -c <(echo torch==2.13.0) trl)",
)


def _random_batch(seed, batch=8, length=11):
    g = torch.Generator().manual_seed(seed)
    new = -torch.rand(batch, length, generator=g, dtype=torch.float64) * 3
    old = new + 0.35 * torch.randn(batch, length, generator=g, dtype=torch.float64)  # enough drift to clip
    ref = new + 0.2 * torch.randn(batch, length, generator=g, dtype=torch.float64)
    adv = torch.randn(batch, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    mask = (torch.arange(length) < lengths[:, None]).double()
    mask[1] = 0.0  # one fully padded row
    mask[2, 0] = 0.0  # a hole in the middle of a response, like a tool observation
    return new, old, ref, adv, mask


class _SingleProcessAccelerator:
    def gather(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def _trl_grpo_loss(new, old, adv, mask, *, eps_low, eps_high, loss_type="grpo", level="token", beta=0.0, ref=None):
    """Run TRL's `GRPOTrainer._compute_loss` on given log-probs, with no model behind it."""
    from trl import GRPOTrainer

    trainer = GRPOTrainer.__new__(GRPOTrainer)  # no __init__: no model, datasets or accelerate state
    trainer.loss_type = loss_type
    trainer.importance_sampling_level = level
    trainer.epsilon_low, trainer.epsilon_high = eps_low, eps_high
    trainer.beta = beta
    trainer.top_entropy_quantile = 1.0
    trainer.off_policy_mask_threshold = None
    trainer.use_vllm = False
    trainer.aux_loss_enabled = False
    trainer._entropy_bonus_enabled = False
    trainer.args = SimpleNamespace(delta=None, use_bias_correction_kl=False)
    trainer.model = SimpleNamespace(training=False)  # eval mode: no gradient-accumulation divisor
    trainer.accelerator = _SingleProcessAccelerator()
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    # The model forward is replaced by the log-probs under test.
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (new, torch.zeros_like(new), None)
    batch, length = new.shape
    inputs = {
        "prompt_ids": torch.zeros(batch, 1, dtype=torch.long),
        "prompt_mask": torch.ones(batch, 1, dtype=torch.long),
        "completion_ids": torch.zeros(batch, length, dtype=torch.long),
        "completion_mask": mask,
        "advantages": adv,
        "old_per_token_logps": old,
    }
    if ref is not None:
        inputs["ref_per_token_logps"] = ref
    loss = trainer._compute_loss(None, inputs)
    return loss, trainer._metrics["eval"]


@requires_trl
class TestAgainstTRL:
    """Cross-check against TRL's GRPO (checked with trl 1.16.0; the version in use is in `trl.__version__`).

    * Advantages: `trl/trainer/grpo_trainer.py`, `GRPOTrainer._generate_and_score_completions`, branch
      `multi_objective_aggregation == "sum_then_normalize"`: `mean = nanmean(rewards.view(-1, G), 1)`,
      `std = nanstd(rewards.view(-1, G), 1)` (Bessel-corrected, i.e. unbiased, from `trl/trainer/utils.py`),
      `advantages = (rewards - mean) / (std + 1e-4)` for `scale_rewards="group"`, no division for "none".
      That code sits in the middle of generation and scoring, so it cannot be called alone; the test
      reproduces it with TRL's own `nanstd` and reads the eps from the method's source (skipping if the
      formula is no longer there). slime's default eps is 1e-6; the test passes TRL's eps explicitly.
    * Policy loss: `GRPOTrainer._compute_loss`, run for real on an instance built with `__new__` and the
      attributes the method reads, its model forward replaced by fixed log-probs. Per token TRL computes
      `coef_1 = exp(logp - old)`, `coef_2 = clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)`,
      `loss = -min(coef_1 * A, coef_2 * A)` (+ `beta * k3`), then `loss_type="grpo"`: mean over samples of
      the masked per-sample mean (= our `sum_of_sample_mean / B`); `"bnpo"`: masked token mean;
      `importance_sampling_level="sequence"`: GSPO's sequence-mean log-ratio. Its `clip_ratio/region_mean`
      metric is our masked mean of `clipfrac`.
    * `selective_log_softmax` and `entropy_from_logits` from `trl/trainer/utils.py`.
    """

    @staticmethod
    def _trl_group_eps():
        from trl import GRPOTrainer

        source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
        if "nanstd(rewards.view(-1, num_generations), dim=1)" not in source:
            pytest.skip("TRL's group std is no longer nanstd over rewards.view(-1, num_generations)")
        found = re.search(r"advantages = advantages / \(std_rewards \+ ([0-9.e-]+)\)", source)
        if found is None:
            pytest.skip("TRL's advantage normalisation formula changed; update this cross-check")
        return float(found.group(1))

    def test_trl_std_is_unbiased(self):
        from trl.trainer.utils import nanstd

        x = torch.randn(5, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        torch.testing.assert_close(nanstd(x, dim=1), x.std(dim=1, unbiased=True))

    @pytest.mark.parametrize("num_generations", [2, 4, 8])
    def test_group_advantages(self, num_generations):
        from trl.trainer.utils import nanstd

        eps = self._trl_group_eps()
        g = torch.Generator().manual_seed(num_generations)
        num_prompts = 6
        rewards = torch.randn(num_prompts * num_generations, generator=g, dtype=torch.float64)
        rewards[:num_generations] = 0.5  # one constant group: TRL gives 0 / (0 + eps) = 0 as well
        group_ids = torch.arange(num_prompts).repeat_interleave(num_generations)

        grouped = rewards.view(-1, num_generations)
        mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
        std = nanstd(grouped, dim=1).repeat_interleave(num_generations)

        ours, info = grpo_normalize(rewards, group_ids, use_std=True, eps=eps)
        torch.testing.assert_close(ours, (rewards - mean) / (std + eps))
        ours, _ = grpo_normalize(rewards, group_ids, use_std=False)
        torch.testing.assert_close(ours, rewards - mean)  # scale_rewards="none"
        assert info["constant_groups"] == 1

    @pytest.mark.parametrize("seed", [0, 1, 2])
    @pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.2), (0.2, 0.28)])
    def test_token_level_clipped_loss(self, seed, eps_low, eps_high):
        new, old, _, adv, mask = _random_batch(seed)
        trl_loss, metrics = _trl_grpo_loss(new, old, adv, mask, eps_low=eps_low, eps_high=eps_high)

        pg, clipfrac, _ = clipped_policy_loss(old - new, adv[:, None].expand_as(new), eps_low, eps_high)
        torch.testing.assert_close(sum_of_sample_mean(pg, mask) / new.shape[0], trl_loss)
        assert 0.0 < masked_mean(clipfrac, mask).item() < 1.0  # the batch does exercise clipping
        assert masked_mean(clipfrac, mask).item() == pytest.approx(metrics["clip_ratio/region_mean"][0])

    @pytest.mark.parametrize("seed", [0, 1])
    def test_token_mean_loss(self, seed):
        new, old, _, adv, mask = _random_batch(seed)
        trl_loss, _ = _trl_grpo_loss(new, old, adv, mask, eps_low=0.2, eps_high=0.28, loss_type="bnpo")
        pg, _, _ = clipped_policy_loss(old - new, adv[:, None].expand_as(new), 0.2, 0.28)
        torch.testing.assert_close(sum_of_tokens(pg, mask) / mask.sum(), trl_loss)

    @pytest.mark.parametrize("seed", [0, 1])
    def test_loss_with_k3_kl_term(self, seed):
        new, old, ref, adv, mask = _random_batch(seed)
        beta = 0.04
        trl_loss, metrics = _trl_grpo_loss(new, old, adv, mask, eps_low=0.2, eps_high=0.2, beta=beta, ref=ref)
        pg, _, _ = clipped_policy_loss(old - new, adv[:, None].expand_as(new), 0.2, 0.2)
        kl = compute_approx_kl(new, ref, "k3")
        torch.testing.assert_close(sum_of_sample_mean(pg + beta * kl, mask) / new.shape[0], trl_loss)
        assert masked_mean(kl, mask).item() == pytest.approx(metrics["kl"][0])

    @pytest.mark.parametrize("seed", [0, 1])
    def test_gspo_sequence_level(self, seed):
        new, old, _, adv, mask = _random_batch(seed)
        trl_loss, _ = _trl_grpo_loss(new, old, adv, mask, eps_low=3e-4, eps_high=4e-4, level="sequence")
        seq_kl = gspo_sequence_kl(old - new, mask)
        pg, _, _ = clipped_policy_loss(seq_kl, adv[:, None].expand_as(new), 3e-4, 4e-4)
        torch.testing.assert_close(sum_of_sample_mean(pg, mask) / new.shape[0], trl_loss)

    def test_log_probs_and_entropy(self):
        from trl.trainer.utils import entropy_from_logits as trl_entropy
        from trl.trainer.utils import selective_log_softmax

        g = torch.Generator().manual_seed(3)
        logits = torch.randn(3, 5, 17, generator=g) * 4
        tokens = torch.randint(0, 17, (3, 5), generator=g)
        torch.testing.assert_close(log_probs_from_logits(logits, tokens), selective_log_softmax(logits, tokens))
        torch.testing.assert_close(entropy_from_logits(logits), trl_entropy(logits))


def test_compute_policy_loss_keeps_upstreams_two_value_shape():
    """A custom loss ported from upstream unpacks `pg_losses, clipfrac = compute_policy_loss(...)`."""
    from slime.utils.ppo_utils import compute_policy_loss

    ppo_kl, adv = torch.tensor([0.3, -0.3, 0.0]), torch.tensor([1.0, -1.0, 0.5])
    pg_losses, clipfrac = compute_policy_loss(ppo_kl, adv, 0.2, 0.28)
    expected, expected_clip, _ = clipped_policy_loss(ppo_kl, adv, 0.2, 0.28)
    assert torch.equal(pg_losses, expected) and torch.equal(clipfrac, expected_clip)
