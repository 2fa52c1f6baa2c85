"""Distillation math (slime.utils.distill), the top-K loss (slime.utils.loss) and Combine's (openclaw-combine/combine_loss.py).

The top-K loss is checked against a brute-force reference that does what upstream did: one
full-vocabulary cross-entropy per kept token, the tail as 1 - (sum of probabilities), in float64.
"""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from slime.utils import distill, ppo_utils
from combine_loss import combine_loss_function, combine_topk_loss_function
from slime.utils.loss import policy_loss_function, topk_distillation_loss_function

B, R, V, K = 3, 5, 40, 6


def args_for(**overrides):
    base = dict(advantage_estimator="grpo", eps_clip=0.2, eps_clip_high=0.28, eps_clip_c=None, entropy_coef=0.0,
                kl_loss_type="low_var_kl", use_kl_loss=True, kl_loss_coef=0.0, use_unbiased_kl=False)
    return SimpleNamespace(**{**base, **overrides})


def sample_mean_reduce(mask):
    return lambda x: ppo_utils.sum_of_sample_mean(x, mask)


def teacher_topk(seed=1, temperature=1.0, dtype=torch.float64):
    """A teacher's own top-K (indices and log-probs) from random logits: a valid distribution's head."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, R, V, generator=g, dtype=dtype) * 2
    log_probs = torch.log_softmax(logits / temperature, -1)
    values, indices = log_probs.topk(K, dim=-1)
    return values, indices


def student_logits(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, R, V, generator=g, dtype=dtype) * 2).requires_grad_(True)


def brute_force_topk_kl(logits, teacher_lp, teacher_idx, temperature):
    """Upstream's computation: K separate full-vocabulary cross-entropies, explicit tail via 1 - sum(p)."""
    scaled = logits / temperature
    student_k = torch.stack([
        -F.cross_entropy(scaled.reshape(-1, V), teacher_idx[..., k].reshape(-1), reduction="none").view(B, R)
        for k in range(K)
    ], dim=-1)
    student_tail = torch.log1p(-student_k.exp().sum(-1, keepdim=True))
    teacher_tail = torch.log1p(-teacher_lp.exp().sum(-1, keepdim=True))
    p = torch.cat([student_k, student_tail], -1)
    q = torch.cat([teacher_lp, teacher_tail], -1)
    # F.kl_div(input=q, target=p, log_target=True) = sum e^p (p - q): KL(student || teacher), as upstream
    return F.kl_div(q, p, log_target=True, reduction="none").sum(-1)


# ------------------------------------------------------------------------------------- top-K math


def test_student_topk_log_probs_equal_log_softmax_then_gather():
    logits, (_, idx) = student_logits(), teacher_topk()
    expected = torch.log_softmax(logits / 0.6, -1).gather(-1, idx)
    torch.testing.assert_close(distill.student_topk_log_probs(logits, idx, 0.6), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_topk_kl_and_its_gradient_match_the_k_pass_full_vocabulary_reference(temperature):
    teacher_lp, teacher_idx = teacher_topk(temperature=temperature)
    ours_logits, ref_logits = student_logits(), student_logits()
    ours = distill.topk_reverse_kl(ours_logits, teacher_lp, teacher_idx, temperature)
    reference = brute_force_topk_kl(ref_logits, teacher_lp, teacher_idx, temperature)
    assert ours.shape == (B, R)
    torch.testing.assert_close(ours, reference, atol=1e-12, rtol=0)
    weights = torch.rand(B, R, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    (ours * weights).sum().backward()
    (reference * weights).sum().backward()
    torch.testing.assert_close(ours_logits.grad, ref_logits.grad, atol=1e-12, rtol=0)
    assert ours_logits.grad.abs().sum() > 0


def test_topk_kl_is_zero_when_the_student_is_the_teacher_and_positive_otherwise():
    logits = student_logits()
    own_lp, own_idx = torch.log_softmax(logits.detach(), -1).topk(K, dim=-1)
    torch.testing.assert_close(distill.topk_reverse_kl(logits, own_lp, own_idx), torch.zeros(B, R, dtype=torch.float64),
                               atol=1e-12, rtol=0)
    other_lp, other_idx = teacher_topk()
    assert (distill.topk_reverse_kl(logits, other_lp, other_idx) > 0).all()


def test_tail_bin_is_finite_when_the_k_tokens_hold_all_the_mass():
    logits = student_logits()
    all_lp, all_idx = torch.log_softmax(logits.detach(), -1).topk(V, dim=-1)  # K = V: the tail is empty
    kl = distill.topk_reverse_kl(logits, all_lp, all_idx)
    kl.sum().backward()
    assert torch.isfinite(kl).all() and kl.abs().max() < 1e-5
    assert torch.isfinite(logits.grad).all()


def test_tail_bin_value():
    lp = torch.log(torch.tensor([[0.5, 0.2]], dtype=torch.float64))
    torch.testing.assert_close(distill.with_tail_bin(lp)[..., -1], torch.log(torch.tensor([0.3], dtype=torch.float64)))


def test_padding_and_garbage_teacher_rows_are_invalid_and_give_finite_gradients():
    teacher_lp, teacher_idx = teacher_topk()
    teacher_lp, teacher_idx = teacher_lp.clone(), teacher_idx.clone()
    teacher_lp[0, 0] = 0.0  # upstream's left-padding row: K log-probs of 0 (sum of probs = K)
    teacher_idx[0, 0] = torch.arange(K)
    teacher_lp[1, 2, 0] = float("-inf")  # an engine reporting an impossible token: still a valid row
    teacher_lp[2, 4] = float("nan")
    valid = distill.valid_teacher_topk_rows(teacher_lp)
    expected = torch.ones(B, R, dtype=torch.float64)
    expected[0, 0] = 0.0
    assert torch.equal(valid, expected)

    logits = student_logits()
    kl = distill.topk_reverse_kl(logits, teacher_lp, teacher_idx)
    assert torch.isfinite(kl).all()
    mask = torch.ones(B, R, dtype=torch.float64)
    mask[2, 4] = 0.0  # the NaN row is masked out by the loss mask
    (kl * valid * mask).sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[0, 0], torch.zeros(V, dtype=torch.float64))
    assert torch.equal(logits.grad[2, 4], torch.zeros(V, dtype=torch.float64))


# ---------------------------------------------------------------------------------- top-K loss


def topk_batch(dtype=torch.float64):
    teacher_lp, teacher_idx = teacher_topk(dtype=dtype)
    mask = torch.ones(B, R, dtype=dtype)
    mask[1, 3:] = 0.0  # a shorter response
    mask[2] = 0.0  # a sample with no trained tokens
    return {"teacher_topk_log_probs": teacher_lp, "teacher_topk_indices": teacher_idx, "loss_mask": mask}


def test_topk_loss_is_the_sample_mean_of_the_reference_kl():
    batch = topk_batch()
    ours_logits, ref_logits = student_logits(), student_logits()
    reduce = sample_mean_reduce(batch["loss_mask"])
    loss, metrics = topk_distillation_loss_function(args_for(), batch, ours_logits, reduce)
    reference = ppo_utils.sum_of_sample_mean(
        brute_force_topk_kl(ref_logits, batch["teacher_topk_log_probs"], batch["teacher_topk_indices"], 1.0),
        batch["loss_mask"])
    torch.testing.assert_close(loss, reference, atol=1e-12, rtol=0)
    assert set(metrics) >= {"loss", "kl_loss", "entropy_loss"}
    assert metrics["kl_loss"] == metrics["loss"]
    loss.backward()
    reference.backward()
    torch.testing.assert_close(ours_logits.grad, ref_logits.grad, atol=1e-12, rtol=0)
    # masked rows: no loss, exactly zero and finite gradient
    assert torch.equal(ours_logits.grad[2], torch.zeros(R, V, dtype=torch.float64))
    assert torch.equal(ours_logits.grad[1, 3:], torch.zeros(R - 3, V, dtype=torch.float64))


def test_topk_loss_ignores_padding_teacher_rows_and_stays_finite_in_float32():
    batch = topk_batch(torch.float32)
    batch["teacher_topk_log_probs"][0, :2] = 0.0  # two padding rows inside the trained mask
    logits = student_logits(dtype=torch.float32)
    loss, metrics = topk_distillation_loss_function(args_for(), batch, logits, sample_mean_reduce(batch["loss_mask"]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[0, :2], torch.zeros(2, V))
    # a masked metric: sample 0's 2 of R rows, averaged over the 2 samples that have a teacher and trained tokens
    assert metrics["teacher_topk_invalid_frac"].total.item() == pytest.approx(2 / R)
    assert metrics["teacher_topk_invalid_frac"].value.item() == pytest.approx(2 / R / 2)


def test_topk_loss_entropy_bonus():
    batch = topk_batch()
    reduce = sample_mean_reduce(batch["loss_mask"])
    plain, plain_metrics = topk_distillation_loss_function(args_for(), batch, student_logits(), reduce)
    bonus, metrics = topk_distillation_loss_function(args_for(entropy_coef=0.1), batch, student_logits(), reduce)
    assert metrics["entropy_loss"] > 0
    torch.testing.assert_close(bonus, plain - 0.1 * metrics["entropy_loss"])
    assert not plain_metrics["entropy_loss"].requires_grad


def test_topk_loss_without_teacher_topk_fields_says_what_is_missing():
    with pytest.raises(ValueError, match="distill-topk"):
        topk_distillation_loss_function(args_for(), {"loss_mask": torch.ones(B, R)}, student_logits(),
                                        sample_mean_reduce(torch.ones(B, R)))


# ------------------------------------------------------------------------------ OPD and Combine


def policy_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (B, R), generator=g)
    logits = torch.randn(B, R, V, generator=g, dtype=torch.float64)
    current = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    mask = torch.ones(B, R, dtype=torch.float64)
    mask[1, 3:] = 0.0
    reward = torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64)
    batch = {
        "tokens": tokens,
        "loss_mask": mask,
        "advantages": ppo_utils.grpo_advantages(reward, mask),  # grpo without normalisation: raw reward
        "old_log_probs": current + 0.3 * torch.randn(B, R, generator=g, dtype=torch.float64),  # clipping matters
        "teacher_log_probs": current + torch.randn(B, R, generator=g, dtype=torch.float64),
        "ref_log_probs": current - 0.1,
        "rollout_log_probs": current + 0.01,
    }
    return batch, logits


def run_loss(fn, args, batch, logits):
    logits = logits.clone().requires_grad_(True)
    loss, metrics = fn(args, batch, logits, sample_mean_reduce(batch["loss_mask"]))
    loss.backward()
    return loss, metrics, logits.grad


@pytest.fixture()
def no_combine_env(clean_distill_env, monkeypatch):
    return monkeypatch


def test_combine_with_w_opd_zero_is_exactly_binary_rl(no_combine_env):
    batch, logits = policy_batch()
    rl_loss, rl_metrics, rl_grad = run_loss(policy_loss_function, args_for(), batch, logits)
    loss, metrics, grad = run_loss(combine_loss_function, args_for(combine_w_rl=1.0, combine_w_opd=0.0), batch, logits)
    assert torch.equal(loss, rl_loss) and torch.equal(grad, rl_grad)
    for key in rl_metrics:
        assert torch.equal(torch.as_tensor(tuple(metrics[key])), torch.as_tensor(tuple(rl_metrics[key]))) \
            if isinstance(rl_metrics[key], ppo_utils.MaskedMetric) else torch.equal(metrics[key], rl_metrics[key]), key
    assert rl_metrics["pg_clipfrac"] > 0


def test_combine_with_w_rl_zero_is_exactly_opd(no_combine_env):
    batch, logits = policy_batch()
    opd_args = args_for(advantage_estimator="on_policy_distillation", eps_clip_high=0.2)
    opd_batch = {**batch, "advantages": ppo_utils.on_policy_distillation_advantages(
        batch["teacher_log_probs"], batch["old_log_probs"], batch["loss_mask"])}
    opd_loss, _, opd_grad = run_loss(policy_loss_function, opd_args, opd_batch, logits)
    no_combine_env.setenv("OPENCLAW_COMBINE_W_RL", "0")  # the environment fallback, as upstream's scripts use
    no_combine_env.setenv("OPENCLAW_COMBINE_W_OPD", "1")
    loss, metrics, grad = run_loss(combine_loss_function, opd_args, batch, logits)
    assert torch.equal(loss, opd_loss) and torch.equal(grad, opd_grad)
    assert metrics["opd_advantage_mean"] == ppo_utils.sum_of_sample_mean(opd_batch["advantages"], batch["loss_mask"])


def test_combine_default_weights_add_both_terms(no_combine_env):
    batch, logits = policy_batch()
    expected = batch["advantages"] + (batch["teacher_log_probs"] - batch["old_log_probs"]) * batch["loss_mask"]
    ref_loss, _, _ = run_loss(policy_loss_function, args_for(), {**batch, "advantages": expected}, logits)
    loss, metrics, _ = run_loss(combine_loss_function, args_for(), batch, logits)
    torch.testing.assert_close(loss, ref_loss, atol=1e-12, rtol=0)
    assert {"pg_loss", "pg_clipfrac", "ppo_kl", "entropy_loss", "kl_loss", "train_rollout_logprob_abs_diff",
            "opd_advantage_mean", "rl_advantage_mean", "advantage_mean", "loss"} <= set(metrics)


def test_combine_flags_take_precedence_over_the_environment(no_combine_env):
    from combine_loss import combine_weights

    no_combine_env.setenv("OPENCLAW_COMBINE_W_RL", "0.25")
    no_combine_env.setenv("OPENCLAW_COMBINE_W_OPD", "3")
    assert combine_weights(SimpleNamespace()) == (0.25, 3.0)
    assert combine_weights(SimpleNamespace(combine_w_rl=2.0, combine_w_opd=None)) == (2.0, 3.0)
    no_combine_env.delenv("OPENCLAW_COMBINE_W_OPD")
    assert combine_weights(SimpleNamespace()) == (0.25, 1.0)


def test_combine_samples_without_a_teacher_get_exactly_zero_opd(no_combine_env):
    """An RL-only sample gets an OPD advantage of exactly 0, never `rollout - recomputed`."""
    batch, logits = policy_batch()
    teacher_mask = torch.ones(B, R, dtype=torch.float64)
    teacher_mask[0] = 0.0  # sample 0 is RL-only: its teacher field is filler
    teacher = batch["teacher_log_probs"].clone()
    teacher[0] = float("-inf")
    adv = distill.combine_advantages(batch["advantages"], teacher, batch["old_log_probs"], 1.0, 1.0,
                                     mask=batch["loss_mask"], teacher_mask=teacher_mask)
    assert torch.equal(adv[0], batch["advantages"][0])
    assert torch.isfinite(adv).all()
    # no teacher field at all: pure RL whatever w_opd is
    no_teacher = {k: v for k, v in batch.items() if k != "teacher_log_probs"}
    rl_loss, _, _ = run_loss(policy_loss_function, args_for(), batch, logits)
    loss, metrics, _ = run_loss(combine_loss_function, args_for(combine_w_opd=5.0), no_teacher, logits)
    assert torch.equal(loss, rl_loss) and metrics["opd_advantage_mean"] == 0


def test_bounded_opd_advantage_is_clamped(no_combine_env):
    teacher = torch.tensor([[-12.0, -1.0, -0.5]], dtype=torch.float64)
    old = torch.tensor([[-0.5, -1.5, -9.0]], dtype=torch.float64)
    torch.testing.assert_close(distill.opd_advantages(teacher, old), teacher - old)
    torch.testing.assert_close(distill.opd_advantages(teacher, old, bound=2.0),
                               torch.tensor([[-2.0, 0.5, 2.0]], dtype=torch.float64))
    reward = torch.full((1, 3), 1.0, dtype=torch.float64)
    torch.testing.assert_close(distill.combine_advantages(reward, teacher, old, 1.0, 0.5, opd_bound=2.0),
                               torch.tensor([[0.0, 1.25, 2.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="bound"):
        distill.opd_advantages(teacher, old, bound=-1.0)
    # the loss reads the bound from --opd-advantage-bound (or its environment variable)
    batch, logits = policy_batch()
    clamped = distill.combine_advantages(batch["advantages"], batch["teacher_log_probs"], batch["old_log_probs"],
                                         1.0, 1.0, opd_bound=0.1, mask=batch["loss_mask"])
    ref_loss, _, _ = run_loss(policy_loss_function, args_for(), {**batch, "advantages": clamped}, logits)
    loss, metrics, _ = run_loss(combine_loss_function, args_for(opd_advantage_bound=0.1), batch, logits)
    assert torch.equal(loss, ref_loss)
    assert metrics["opd_advantage_abs_mean"] <= 0.1 * B


# ------------------------------------------------------------------------------ Combine with the top-K term


def combine_topk_batch():
    batch, logits = policy_batch()
    teacher_lp, teacher_idx = teacher_topk()
    return {**batch, "teacher_topk_log_probs": teacher_lp, "teacher_topk_indices": teacher_idx}, logits


def test_combine_topk_is_the_weighted_sum_of_binary_rl_and_topk_distillation(no_combine_env):
    batch, logits = combine_topk_batch()
    args = args_for(combine_w_rl=0.5, combine_w_opd=2.0)
    rl_loss, _, rl_grad = run_loss(policy_loss_function, args, {**batch, "advantages": 0.5 * batch["advantages"]},
                                   logits)
    kl_loss, _, kl_grad = run_loss(topk_distillation_loss_function, args, batch, logits)
    loss, metrics, grad = run_loss(combine_topk_loss_function, args, batch, logits)
    torch.testing.assert_close(loss, rl_loss + 2.0 * kl_loss, atol=1e-12, rtol=0)
    torch.testing.assert_close(grad, rl_grad + 2.0 * kl_grad, atol=1e-12, rtol=0)
    torch.testing.assert_close(metrics["topk_kl_loss"], kl_loss.detach())
    assert {"pg_loss", "pg_clipfrac", "rl_advantage_mean", "topk_kl_loss", "loss"} <= set(metrics)


def test_combine_topk_samples_without_a_teacher_get_only_the_rl_term(no_combine_env):
    batch, logits = combine_topk_batch()
    batch["teacher_topk_log_probs"][0] = 0.0  # sample 0 has no teacher: zero padding, as batching writes it
    batch["teacher_topk_indices"][0] = 0
    loss, _, grad = run_loss(combine_topk_loss_function, args_for(), batch, logits)
    rl_only, _, rl_grad = run_loss(policy_loss_function, args_for(), batch, logits)
    # sample 0's gradient is exactly the RL gradient; the others also carry the distillation term
    torch.testing.assert_close(grad[0], rl_grad[0], atol=1e-12, rtol=0)
    assert not torch.allclose(grad[1], rl_grad[1])
    assert torch.isfinite(grad).all()
    # no top-K fields at all (a batch of RL-only samples): exactly Binary RL
    plain = {k: v for k, v in batch.items() if not k.startswith("teacher_topk")}
    loss, metrics, grad = run_loss(combine_topk_loss_function, args_for(combine_w_opd=5.0), plain, logits)
    assert torch.equal(loss, rl_only) and metrics["topk_kl_loss"] == 0


def test_combine_topk_says_what_it_needs(no_combine_env):
    batch, logits = combine_topk_batch()
    with pytest.raises(ValueError, match="advantages and old_log_probs"):
        combine_topk_loss_function(args_for(), {k: v for k, v in batch.items() if k != "advantages"}, logits,
                                   sample_mean_reduce(batch["loss_mask"]))


# ------------------------------------------------------------------- top-K reference KL (--kl-loss-topk)


def ppo_batch(tokens_seed=3, **fields):
    g = torch.Generator().manual_seed(tokens_seed)
    mask = torch.ones(B, R, dtype=torch.float64)
    mask[1, 3:] = 0.0
    return {"tokens": torch.randint(0, V, (B, R), generator=g), "loss_mask": mask,
            "advantages": torch.zeros(B, R, dtype=torch.float64),
            "old_log_probs": torch.zeros(B, R, dtype=torch.float64), **fields}


def test_topk_kl_from_log_probs_equals_the_logits_version():
    logits = student_logits().detach()
    values, indices = teacher_topk()
    torch.testing.assert_close(distill.topk_reverse_kl_from_log_probs(torch.log_softmax(logits, -1), values, indices),
                               distill.topk_reverse_kl(logits, values, indices), atol=1e-12, rtol=0)


def test_reference_kl_over_the_whole_vocabulary_is_the_exact_kl():
    """With K = V the tail bin is empty and the top-K KL is the exact KL(policy || reference) per position."""
    policy, reference = student_logits(0).detach(), student_logits(5).detach()
    ref_lp = torch.log_softmax(reference, -1)
    values, indices = ref_lp.topk(V, dim=-1)
    policy_lp = torch.log_softmax(policy, -1)
    exact = (policy_lp.exp() * (policy_lp - ref_lp)).sum(-1)
    torch.testing.assert_close(distill.topk_reverse_kl_from_log_probs(policy_lp, values, indices), exact,
                               atol=1e-9, rtol=0)


def test_policy_loss_uses_the_topk_reference_kl_when_its_fields_are_present():
    logits = student_logits()
    ref_lp = torch.log_softmax(student_logits(5).detach(), -1)
    values, indices = ref_lp.topk(K, dim=-1)
    sampled_ref = ref_lp.gather(-1, ppo_batch()["tokens"].unsqueeze(-1)).squeeze(-1)
    batch = ppo_batch(ref_log_probs=sampled_ref, ref_topk_log_probs=values, ref_topk_indices=indices)
    reduce = sample_mean_reduce(batch["loss_mask"])
    loss, metrics = policy_loss_function(args_for(kl_loss_coef=0.5), batch, logits, reduce)
    expected_kl = reduce(distill.topk_reverse_kl(logits.float(), values, indices))  # the loss works in float32
    torch.testing.assert_close(metrics["kl_loss"], expected_kl.detach())
    torch.testing.assert_close(loss, metrics["pg_loss"] + 0.5 * expected_kl)
    # without the top-K fields the sampled-token estimate is used, as before
    sampled_only = {k: v for k, v in batch.items() if not k.startswith("ref_topk")}
    _, metrics = policy_loss_function(args_for(kl_loss_coef=0.5), sampled_only, logits, reduce)
    log_probs = torch.log_softmax(logits.float(), -1).gather(-1, batch["tokens"].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(metrics["kl_loss"], reduce(
        ppo_utils.compute_approx_kl(log_probs, sampled_ref, "low_var_kl")).detach(), check_dtype=False)


def test_topk_reference_kl_pulls_back_mass_on_tokens_that_are_never_sampled():
    """The failure the sampled-token estimate cannot see: the policy moved mass onto a token the reference finds
    unlikely, but the sampled token has the same probability under both. The top-K KL is positive there and its
    gradient lowers that token's logit; the sampled-token estimate is exactly 0 and gives no gradient."""
    reference = torch.zeros(1, 1, V, dtype=torch.float64)
    reference[..., 0] = 3.0  # the reference's favourite: token 0
    reference[..., 7] = 1.0  # token 7: in the reference's top-K, but unlikely
    policy = reference.clone()
    policy[..., 7] = 3.0  # the policy moved mass onto token 7 ...
    # ... and raised token 0 just enough to keep its probability: e^d = (e^3 + V - 2) / (e^1 + V - 2)
    policy[..., 0] = 3.0 + math.log((math.e ** 3 + V - 2) / (math.e + V - 2))
    ref_lp, policy_lp = torch.log_softmax(reference, -1), torch.log_softmax(policy, -1)
    assert abs(float(policy_lp[..., 0] - ref_lp[..., 0])) < 1e-9  # the sampled token 0: same probability
    values, indices = ref_lp.topk(K, dim=-1)

    logits = policy.clone().requires_grad_(True)
    mask = torch.ones(1, 1, dtype=torch.float64)
    kl = distill.topk_reverse_kl_from_log_probs(torch.log_softmax(logits, -1), values, indices)
    assert float(kl) > 0.1
    kl.sum().backward()
    assert float(logits.grad[..., 7]) > 0  # descent lowers token 7's logit
    sampled = ppo_utils.compute_approx_kl(policy_lp[..., :1], ref_lp[..., :1], "low_var_kl") * mask
    assert float(sampled.abs().sum()) < 1e-9


# ------------------------------------------------------------------------ forward KL (--distill-divergence)


def brute_force_forward_topk_kl(logits, teacher_lp, teacher_idx):
    """KL(teacher || student) over the same K + 1 bins, from full-vocabulary probabilities in float64."""
    probs = torch.softmax(logits, -1)
    student_k = probs.gather(-1, teacher_idx)
    p = torch.cat([student_k, 1 - student_k.sum(-1, keepdim=True)], -1)
    t = torch.cat([teacher_lp.exp(), 1 - teacher_lp.exp().sum(-1, keepdim=True)], -1)
    return (t * (t.log() - p.log())).sum(-1)


def test_forward_topk_loss_is_the_sample_mean_of_kl_teacher_to_student():
    batch = topk_batch()
    ours_logits, ref_logits = student_logits(), student_logits()
    loss, _ = topk_distillation_loss_function(args_for(distill_divergence="forward"), batch, ours_logits,
                                              sample_mean_reduce(batch["loss_mask"]))
    reference = ppo_utils.sum_of_sample_mean(
        brute_force_forward_topk_kl(ref_logits, batch["teacher_topk_log_probs"], batch["teacher_topk_indices"]),
        batch["loss_mask"])
    torch.testing.assert_close(loss, reference, atol=1e-12, rtol=0)
    loss.backward()
    reference.backward()
    torch.testing.assert_close(ours_logits.grad, ref_logits.grad, atol=1e-12, rtol=0)
    reverse, _ = topk_distillation_loss_function(args_for(), batch, student_logits(),
                                                 sample_mean_reduce(batch["loss_mask"]))
    assert abs(reverse.item() - loss.item()) > 1e-3  # the two directions are different numbers


def test_forward_kl_pulls_up_a_token_the_student_almost_never_samples_where_reverse_kl_barely_does():
    # one position, V = 4: the student puts 0.1 % on token 3 ("Sure"), the hinted teacher 10 %
    student = torch.log(torch.tensor([[[0.599, 0.3, 0.1, 0.001]]], dtype=torch.float64)).requires_grad_(True)
    teacher_lp = torch.log(torch.tensor([[[0.5, 0.3, 0.1, 0.1]]], dtype=torch.float64))
    teacher_idx = torch.tensor([[[0, 1, 2, 3]]])
    batch = {"teacher_topk_log_probs": teacher_lp, "teacher_topk_indices": teacher_idx,
             "loss_mask": torch.ones(1, 1, dtype=torch.float64)}
    pushes = {}
    for divergence in ("reverse", "forward"):
        logits = student.detach().clone().requires_grad_(True)
        loss, _ = topk_distillation_loss_function(args_for(distill_divergence=divergence), batch, logits,
                                                  sample_mean_reduce(batch["loss_mask"]))
        loss.backward()
        pushes[divergence] = -logits.grad[0, 0, 3].item()  # gradient descent raises the logit by this much
    assert pushes["forward"] == pytest.approx(0.1 - 0.001, abs=1e-9)  # e^q - e^p at full strength
    assert 0 < pushes["reverse"] < pushes["forward"] / 10  # scaled by the student's own 0.1 %


def test_combine_topk_uses_the_chosen_divergence(no_combine_env):
    batch, logits = combine_topk_batch()
    args = args_for(distill_divergence="forward")
    kl_loss, _, kl_grad = run_loss(topk_distillation_loss_function, args, batch, logits)
    rl_loss, _, rl_grad = run_loss(policy_loss_function, args, batch, logits)
    loss, metrics, grad = run_loss(combine_topk_loss_function, args, batch, logits)
    torch.testing.assert_close(loss, rl_loss + kl_loss, atol=1e-12, rtol=0)
    torch.testing.assert_close(grad, rl_grad + kl_grad, atol=1e-12, rtol=0)


def test_head_position_weights_put_a_samples_weight_on_its_first_trained_tokens():
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 1, 0], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
                        dtype=torch.float64)
    weights = distill.head_position_weights(mask, 2)
    # 6 trained tokens, the first two carry all of them; masked positions (a tool output) are not counted
    torch.testing.assert_close(weights[0], torch.tensor([3, 3, 0, 0, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(weights[1], torch.tensor([0, 1.5, 0, 1.5, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(weights[2], torch.tensor([1, 0, 0, 0, 0, 0], dtype=torch.float64))  # shorter than N
    assert weights[3].abs().sum() == 0  # nothing trained: no weight, no NaN
    torch.testing.assert_close(weights.sum(-1), mask.sum(-1))
    x = torch.arange(24, dtype=torch.float64).view(4, 6)
    # the per-sample masked mean of x * weights is the mean of x over each sample's first two trained tokens
    assert ppo_utils.sum_of_sample_mean(x * weights, mask).item() == pytest.approx((0 + 1) / 2 + (7 + 9) / 2 + 12)
    with pytest.raises(ValueError, match="positions must be >= 1"):
        distill.head_position_weights(mask, 0)


@pytest.mark.parametrize("divergence", ["reverse", "forward"])
def test_topk_loss_on_the_head_positions_is_the_head_mean_and_trains_nothing_after_it(divergence):
    batch = topk_batch()
    logits = student_logits()
    loss, _ = topk_distillation_loss_function(args_for(distill_divergence=divergence, distill_head_positions=2),
                                              batch, logits, sample_mean_reduce(batch["loss_mask"]))
    per_token = distill.kl_over_bins(
        distill.with_tail_bin(distill.student_topk_log_probs(logits, batch["teacher_topk_indices"])),
        distill.with_tail_bin(batch["teacher_topk_log_probs"]), divergence)
    # samples 0 and 1 have >= 2 trained tokens, sample 2 none: the loss is the mean KL of the first two positions
    expected = per_token[0, :2].mean() + per_token[1, :2].mean()
    torch.testing.assert_close(loss, expected, atol=1e-12, rtol=0)
    loss.backward()
    assert logits.grad[:, 2:].abs().max() == 0 and logits.grad[:2, :2].abs().min() >= 0
    assert logits.grad[0, 0].abs().max() > 0
    everywhere, _ = topk_distillation_loss_function(args_for(distill_divergence=divergence), batch, student_logits(),
                                                    sample_mean_reduce(batch["loss_mask"]))
    assert abs(everywhere.item() - loss.item()) > 1e-6  # 0 keeps the old every-token loss


def test_combine_topk_head_positions_weigh_only_the_distillation_term(no_combine_env):
    batch, logits = combine_topk_batch()
    args = args_for(distill_divergence="forward", distill_head_positions=1)
    kl_loss, _, kl_grad = run_loss(topk_distillation_loss_function, args, batch, logits)
    rl_loss, _, rl_grad = run_loss(policy_loss_function, args, batch, logits)
    loss, _, grad = run_loss(combine_topk_loss_function, args, batch, logits)
    torch.testing.assert_close(loss, rl_loss + kl_loss, atol=1e-12, rtol=0)
    torch.testing.assert_close(grad, rl_grad + kl_grad, atol=1e-12, rtol=0)
    assert rl_grad[:, 1:].abs().max() > 0 and kl_grad[:, 1:].abs().max() == 0


def test_top_scored_position_weights_put_a_samples_weight_on_its_highest_scored_trained_tokens():
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 1, 0], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
                        dtype=torch.float64)
    scores = torch.tensor([[0.1, 0.9, 0.2, 0.0, 0.8, 0.3],   # the two largest: positions 1 and 4
                           [9.0, 0.5, 9.0, 0.1, 0.7, 9.0],   # 9s are masked (tool output, padding): never chosen
                           [0.0, 5.0, 5.0, 5.0, 5.0, 5.0],   # one trained token only
                           [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], dtype=torch.float64, requires_grad=True)
    weights = distill.top_scored_position_weights(mask, scores, 2)
    torch.testing.assert_close(weights[0], torch.tensor([0, 3, 0, 0, 3, 0], dtype=torch.float64))
    torch.testing.assert_close(weights[1], torch.tensor([0, 1.5, 0, 0, 1.5, 0], dtype=torch.float64))
    torch.testing.assert_close(weights[2], torch.tensor([1, 0, 0, 0, 0, 0], dtype=torch.float64))
    assert weights[3].abs().sum() == 0  # nothing trained: no weight, no NaN
    torch.testing.assert_close(weights.sum(-1), mask.sum(-1))
    assert not weights.requires_grad  # the choice is detached: the scores get no gradient through it
    with pytest.raises(ValueError, match="positions must be >= 1"):
        distill.top_scored_position_weights(mask, scores, 0)


@pytest.mark.parametrize("divergence", ["reverse", "forward"])
def test_topk_loss_on_the_divergent_positions_is_the_mean_of_the_largest_kls(divergence):
    batch = topk_batch()
    logits = student_logits()
    loss, _ = topk_distillation_loss_function(args_for(distill_divergence=divergence, distill_divergent_positions=2),
                                              batch, logits, sample_mean_reduce(batch["loss_mask"]))
    per_token = distill.kl_over_bins(
        distill.with_tail_bin(distill.student_topk_log_probs(logits, batch["teacher_topk_indices"])),
        distill.with_tail_bin(batch["teacher_topk_log_probs"]), divergence).detach()
    mask = batch["loss_mask"]
    expected = sum(per_token[b][mask[b] > 0].topk(min(2, int(mask[b].sum()))).values.mean()
                   for b in range(mask.shape[0]) if mask[b].sum() > 0)
    torch.testing.assert_close(loss, expected, atol=1e-12, rtol=0)
    loss.backward()
    chosen = distill.top_scored_position_weights(mask, per_token, 2) > 0
    assert logits.grad[~chosen].abs().max() == 0 and logits.grad[chosen].abs().sum() > 0


def test_an_unknown_divergence_is_refused():
    bins = torch.log_softmax(torch.zeros(2, 3), -1)
    assert distill.kl_over_bins(bins, bins, "forward").abs().max() == 0
    with pytest.raises(ValueError, match="unknown divergence 'js'"):
        distill.kl_over_bins(bins, bins, "js")


# ---------------------------------------------------------------------- truncated importance sampling (--use-tis)


def tis_batch():
    """policy_batch with rollout log-probs far enough from the recomputed ones that TIS clips on both sides."""
    batch, logits = policy_batch()
    g = torch.Generator().manual_seed(11)
    batch["rollout_log_probs"] = batch["old_log_probs"] + 0.4 * torch.randn(B, R, generator=g, dtype=torch.float64)
    return batch, logits


TIS_ARGS = dict(use_tis=True, tis_clip_low=0.8, tis_clip=1.25)


def test_tis_loss_is_the_policy_loss_reweighted_token_by_token():
    batch, logits = tis_batch()
    weights = torch.exp(batch["old_log_probs"] - batch["rollout_log_probs"]).clamp(0.8, 1.25)
    clipped = weights != torch.exp(batch["old_log_probs"] - batch["rollout_log_probs"])
    assert clipped[batch["loss_mask"] > 0].any() and (~clipped)[batch["loss_mask"] > 0].any()
    assert (weights[clipped] == 0.8).any() and (weights[clipped] == 1.25).any()

    plain_loss, plain_metrics, plain_grad = run_loss(policy_loss_function, args_for(), batch, logits)
    loss, metrics, grad = run_loss(policy_loss_function, args_for(**TIS_ARGS), batch, logits)
    # the loss by hand: the clipped PPO surrogate per token, times the weight, sample-mean reduced
    reduce = sample_mean_reduce(batch["loss_mask"])
    log_probs = torch.log_softmax(logits.float(), -1).gather(-1, batch["tokens"].unsqueeze(-1)).squeeze(-1)
    pg, _, _ = ppo_utils.clipped_policy_loss(batch["old_log_probs"] - log_probs, batch["advantages"], 0.2, 0.28)
    torch.testing.assert_close(plain_loss, reduce(pg))
    torch.testing.assert_close(loss, reduce(pg * weights))
    assert abs(loss.item() - plain_loss.item()) > 1e-3
    # the weights are constants: every token's gradient is exactly its weight times the un-weighted one
    torch.testing.assert_close(grad, plain_grad * weights.unsqueeze(-1), atol=1e-9, rtol=1e-5)
    # every row is on-policy: the masked metrics' totals are the plain reductions, over all B samples
    torch.testing.assert_close(metrics["tis_weight"].total, reduce(weights))
    torch.testing.assert_close(metrics["tis_clipfrac"].total, reduce(clipped.double()))
    torch.testing.assert_close(metrics["tis"].total,
                               reduce(torch.exp(batch["old_log_probs"] - batch["rollout_log_probs"])))
    assert metrics["tis"].count.item() == B
    assert 0 < metrics["tis_clipfrac"].value < 1
    assert not {"tis", "tis_weight", "tis_clipfrac"} & set(plain_metrics)


def test_tis_with_identical_log_probs_changes_nothing():
    batch, logits = tis_batch()
    batch["rollout_log_probs"] = batch["old_log_probs"].clone()
    plain_loss, _, plain_grad = run_loss(policy_loss_function, args_for(), batch, logits)
    loss, metrics, grad = run_loss(policy_loss_function, args_for(**TIS_ARGS), batch, logits)
    assert torch.equal(loss, plain_loss) and torch.equal(grad, plain_grad)
    assert metrics["tis_clipfrac"].total == 0


def test_tis_ignores_filler_rollout_log_probs_on_untrained_tokens():
    batch, logits = tis_batch()
    batch["rollout_log_probs"][1, 3:] = float("nan")  # sample 1's tokens 3.. are masked out: NaN * 0 is NaN
    loss, metrics, grad = run_loss(policy_loss_function, args_for(**TIS_ARGS), batch, logits)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert all(torch.isfinite(metrics[k].total) for k in ("tis", "tis_weight", "tis_clipfrac", "tis_abs"))


def test_tis_without_rollout_log_probs_is_an_error():
    batch, logits = tis_batch()
    del batch["rollout_log_probs"]
    with pytest.raises(ValueError, match="--use-tis needs rollout_log_probs.*the batch has none"):
        run_loss(policy_loss_function, args_for(**TIS_ARGS), batch, logits)
    run_loss(policy_loss_function, args_for(), batch, logits)  # without TIS they are optional


def test_tis_batch_from_rows_carries_rollout_log_probs_and_refuses_rows_without_them():
    """Both backends build the loss batch with batching.collate + loss_batch."""
    from slime.backends.fsdp import batching

    rows = [{"tokens": [5, 6, 7, 8], "response_length": 2, "loss_mask": [1, 1], "advantages": [1.0, 1.0],
             "old_log_probs": [-1.0, -2.0], "rollout_log_probs": [-1.5, -1.0]},
            {"tokens": [5, 6, 9], "response_length": 1, "loss_mask": [1], "advantages": [-1.0],
             "old_log_probs": [-0.5], "rollout_log_probs": [-0.5]}]
    logits = torch.randn(2, 2, V, dtype=torch.float64)
    batch = batching.loss_batch(batching.collate(rows, [0, 1], pad_token_id=0), torch.device("cpu"))
    torch.testing.assert_close(batch["rollout_log_probs"], torch.tensor([[-1.5, -1.0], [-0.5, 0.0]]))
    assert "rollout_log_probs_mask" not in batch
    _, metrics = policy_loss_function(args_for(**TIS_ARGS), batch, logits, sample_mean_reduce(batch["loss_mask"]))
    assert metrics["tis_clipfrac"].value > 0  # exp(0.5) and exp(-1) are both outside [0.8, 1.25]
    # a trained row without rollout log-probs: its zeros are fillers, TIS must not weigh by exp(old - 0)
    rows[1]["rollout_log_probs"] = None
    batch = batching.loss_batch(batching.collate(rows, [0, 1], pad_token_id=0), torch.device("cpu"))
    with pytest.raises(ValueError, match="some samples of the batch lack them"):
        policy_loss_function(args_for(**TIS_ARGS), batch, logits, sample_mean_reduce(batch["loss_mask"]))
    # ... unless that row trains nothing
    rows[1]["loss_mask"] = [0]
    batch = batching.loss_batch(batching.collate(rows, [0, 1], pad_token_id=0), torch.device("cpu"))
    policy_loss_function(args_for(**TIS_ARGS), batch, logits, sample_mean_reduce(batch["loss_mask"]))


def test_tis_rows_are_refused_on_rank_zero_when_a_sample_has_no_rollout_log_probs():
    from slime.training.train_data import to_rows
    from slime.utils.types import Sample

    def sample(logprobs):
        return Sample(index=4, tokens=[1, 2, 3], response_length=2, loss_mask=[1, 1], rollout_log_probs=logprobs)

    args = SimpleNamespace(use_tis=True)
    assert to_rows(args, [sample([-0.1, -0.2])], [1.0], [1.0])[0]["rollout_log_probs"] == [-0.1, -0.2]
    with pytest.raises(ValueError, match="--use-tis needs rollout_log_probs on every sample; sample 4"):
        to_rows(args, [sample(None)], [1.0], [1.0])
    assert to_rows(SimpleNamespace(use_tis=False), [sample(None)], [1.0], [1.0])[0]["rollout_log_probs"] is None


def test_off_policy_rows_are_left_at_weight_one_by_tis_and_on_policy_rows_are_still_weighted():
    """Traces another model wrote (POST /v1/traces) have no behaviour log-probs: TIS cannot correct them and
    leaves them at weight 1, while the on-policy rows of the same batch keep their TIS weights."""
    from slime.backends.fsdp import batching

    rows = [{"tokens": [5, 6, 7, 8], "response_length": 2, "loss_mask": [1, 1], "advantages": [1.0, 1.0],
             "old_log_probs": [-1.0, -2.0], "rollout_log_probs": [-1.5, -1.0]},
            {"tokens": [5, 6, 9], "response_length": 1, "loss_mask": [1], "advantages": [-1.0],
             "old_log_probs": [-0.5], "rollout_log_probs": None, "off_policy": True}]
    logits = torch.randn(2, 2, V, dtype=torch.float64)
    batch = batching.loss_batch(batching.collate(rows, [0, 1], pad_token_id=0), torch.device("cpu"))
    assert batch["off_policy_mask"].tolist() == [[0.0], [1.0]]
    reduce = sample_mean_reduce(batch["loss_mask"])
    loss, metrics = policy_loss_function(args_for(**TIS_ARGS), batch, logits, reduce)
    plain, _ = policy_loss_function(args_for(), batch, logits, reduce)
    weights = torch.tensor([[1.25, 0.8], [1.0, 1.0]])  # exp(0.5) and exp(-1) clipped; the trace row at 1
    log_probs = torch.log_softmax(logits.float(), -1).gather(-1, batch["tokens"].unsqueeze(-1)).squeeze(-1)
    pg, _, _ = ppo_utils.clipped_policy_loss(batch["old_log_probs"] - log_probs, batch["advantages"], 0.2, 0.28)
    torch.testing.assert_close(loss, reduce(pg * weights.to(pg.dtype)))
    assert not torch.equal(loss, plain)
    # a batch of traces only: no rollout log-probs at all, every weight 1, the loss is the plain one
    only = batching.loss_batch(batching.collate([rows[1]], [0], pad_token_id=0), torch.device("cpu"))
    assert "rollout_log_probs" not in only
    alone, metrics = policy_loss_function(args_for(**TIS_ARGS), only, logits[1:], sample_mean_reduce(only["loss_mask"]))
    expected, _ = policy_loss_function(args_for(), only, logits[1:], sample_mean_reduce(only["loss_mask"]))
    torch.testing.assert_close(alone, expected)
    assert metrics["tis_weight"].count == 0  # no on-policy row: TIS weighs nothing, its metrics have no rows


def test_off_policy_samples_pass_tis_on_rank_zero_and_carry_their_weight():
    """The off-policy weight is the row's `sample_weight` (applied to its whole loss by batching.reducer), not a
    factor on its advantages."""
    from slime.training.advantages import attach_advantages
    from slime.training.train_data import to_rows
    from slime.utils.types import Sample

    trace = Sample(index=9, tokens=[1, 2, 3], response_length=2, loss_mask=[1, 1], rollout_log_probs=None,
                   metadata={"off_policy": True})
    rows = to_rows(SimpleNamespace(use_tis=True, off_policy_weight=0.25), [trace], [1.0], [1.0])
    assert rows[0]["off_policy"] is True and rows[0]["rollout_log_probs"] is None
    assert rows[0]["sample_weight"] == 0.25
    with pytest.raises(ValueError, match="--use-rollout-logprobs.*an off-policy trace"):
        to_rows(SimpleNamespace(use_rollout_logprobs=True), [trace], [1.0], [1.0])
    on_policy = {**rows[0], "off_policy": False, "sample_weight": 1.0}
    rows = [dict(rows[0], old_log_probs=[-1.0, -1.0]), dict(on_policy, old_log_probs=[-1.0, -1.0])]
    args = SimpleNamespace(advantage_estimator="grpo", normalize_advantages=False, off_policy_weight=0.25)
    attach_advantages(args, rows, torch.device("cpu"))
    assert rows[0]["advantages"] == [1.0, 1.0] and rows[1]["advantages"] == [1.0, 1.0]


def test_combine_losses_apply_tis(no_combine_env):
    batch, logits = tis_batch()
    tis = args_for(**TIS_ARGS)
    advantages = distill.combine_advantages(batch["advantages"], batch["teacher_log_probs"], batch["old_log_probs"],
                                            1.0, 1.0, mask=batch["loss_mask"])
    expected, _, expected_grad = run_loss(policy_loss_function, tis, {**batch, "advantages": advantages}, logits)
    loss, metrics, grad = run_loss(combine_loss_function, tis, batch, logits)
    without, _, _ = run_loss(combine_loss_function, args_for(), batch, logits)
    assert torch.equal(loss, expected) and torch.equal(grad, expected_grad)
    assert "tis_clipfrac" in metrics and abs(loss.item() - without.item()) > 1e-4
    # the top-K Combine: its RL term is the TIS-weighted policy loss
    topk_batch_, topk_logits = combine_topk_batch()
    topk_batch_["rollout_log_probs"] = batch["rollout_log_probs"]
    rl, _, _ = run_loss(policy_loss_function, tis, topk_batch_, topk_logits)
    kl, _, _ = run_loss(topk_distillation_loss_function, tis, topk_batch_, topk_logits)
    loss, metrics, _ = run_loss(combine_topk_loss_function, tis, topk_batch_, topk_logits)
    torch.testing.assert_close(loss, rl + kl, atol=1e-12, rtol=0)
    assert "tis_clipfrac" in metrics


# --------------------------------------------------------------------------- --use-unbiased-kl with low_var_kl


def test_unbiased_low_var_kl_clamps_after_the_importance_ratio_in_the_loss():
    """Reference far from the policy on one token (kl > 10) and a ratio < 1: upstream's clamp(ratio * kl) differs
    from ratio * clamp(kl), the order the loss used to compute."""
    batch = ppo_batch()
    logits = torch.zeros(B, R, V, dtype=torch.float64)
    log_probs = torch.log_softmax(logits.float(), -1).gather(-1, batch["tokens"].unsqueeze(-1)).squeeze(-1).double()
    batch["old_log_probs"] = log_probs + 0.7          # ratio exp(new - old) = exp(-0.7) ~ 0.5
    batch["ref_log_probs"] = log_probs + 15.0         # d = -15: k3 = e^15 - 16, far above the clamp
    reduce = sample_mean_reduce(batch["loss_mask"])
    _, metrics = policy_loss_function(args_for(use_unbiased_kl=True), batch, logits, reduce)
    ratio = torch.exp(torch.tensor(-0.7, dtype=torch.float64))
    k3 = math.exp(15.0) - 16.0
    expected = reduce(torch.full((B, R), min(float(ratio) * k3, 10.0), dtype=torch.float64))
    clamp_before = reduce(torch.full((B, R), float(ratio) * 10.0, dtype=torch.float64))
    torch.testing.assert_close(metrics["kl_loss"].double(), expected, atol=1e-5, rtol=0)
    assert abs(float(metrics["kl_loss"]) - float(clamp_before)) > 1.0


# ------------------------------------------------------------------ a non-finite teacher at a masked token (OPD)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_opd_with_a_non_finite_teacher_at_a_masked_token_gives_a_finite_loss(clean_distill_env, bad):
    from slime.training.advantages import attach_advantages

    batch, logits = policy_batch()
    teacher = batch["teacher_log_probs"].clone()
    teacher[1, 4] = bad  # sample 1's token 4 is masked out
    assert batch["loss_mask"][1, 4] == 0
    # the estimator path (--advantage-estimator on_policy_distillation)
    args = args_for(advantage_estimator="on_policy_distillation", normalize_advantages=False, kl_coef=0.0,
                    opd_advantage_bound=None)
    rows = [{"old_log_probs": batch["old_log_probs"][i].tolist(), "loss_mask": batch["loss_mask"][i].tolist(),
             "reward": 0.0, "teacher_log_probs": teacher[i].tolist()} for i in range(B)]
    attach_advantages(args, rows, torch.device("cpu"))
    advantages = torch.tensor([row["advantages"] for row in rows], dtype=torch.float64)
    assert torch.isfinite(advantages).all() and advantages[1, 4] == 0
    clean = ppo_utils.on_policy_distillation_advantages(batch["teacher_log_probs"], batch["old_log_probs"],
                                                        batch["loss_mask"])
    torch.testing.assert_close(advantages, clean, atol=1e-12, rtol=0)
    loss, _, grad = run_loss(policy_loss_function, args, {**batch, "advantages": advantages,
                                                          "teacher_log_probs": teacher}, logits)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    # the Combine path (distill.opd_advantages, the same function underneath)
    torch.testing.assert_close(distill.opd_advantages(teacher, batch["old_log_probs"], batch["loss_mask"]), clean,
                               atol=1e-12, rtol=0)
    loss, _, grad = run_loss(combine_loss_function, args_for(), {**batch, "teacher_log_probs": teacher}, logits)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
