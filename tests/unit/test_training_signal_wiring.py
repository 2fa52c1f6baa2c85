"""Flags that must do what their help says, through the path the trainer takes (issue 36): samples -> rows
(`train_data`) -> advantages (`advantages.attach_advantages`) -> the loss batch (`batching.collate`, `loss_batch`,
`reducer`) -> the loss -> the step's metrics (`backends.common`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from slime.agentic import rewards as agentic_rewards
from slime.backends.common import accumulate_metrics, average_metrics
from slime.backends.fsdp import batching
from slime.training.advantages import attach_advantages
from slime.training.train_data import post_process_rewards, to_rows
import combine_loss
from slime.utils import loss as losses
from slime.utils.ppo_utils import SingletonGroupTracker
from slime.utils.types import Sample

V, R, K = 16, 4, 5


@pytest.fixture(autouse=True)
def _one_rank_and_no_loss_env(dist_info, clean_distill_env):
    """Advantage whitening all-reduces over ranks (a gloo group of one here); Combine reads its weights from the
    environment too."""


def trainer_args(**kw):
    base = dict(advantage_estimator="grpo", rewards_normalization=True, disable_rewards_normalization=False,
                grpo_std_normalization=True, disable_grpo_std_normalization=False, reward_key="score",
                normalize_advantages=False, dynamic_history=False, constant_groups="keep", hooks={},
                eps_clip=0.2, eps_clip_high=0.28, eps_clip_c=None, entropy_coef=0.0, use_kl_loss=False,
                kl_loss_coef=0.0, kl_loss_type="low_var_kl", kl_coef=0.0, use_unbiased_kl=False, use_tis=False,
                use_rollout_logprobs=False, off_policy_weight=1.0, combine_w_rl=1.0, combine_w_opd=1.0,
                opd_advantage_bound=None, distill_divergence="reverse", distill_head_positions=0,
                distill_divergent_positions=0, step_wise_singleton="zero", calculate_per_token_loss=False)
    base.update(kw)
    return SimpleNamespace(**base)


def _teacher(seed: int):
    g = torch.Generator().manual_seed(seed)
    top = torch.log_softmax(torch.randn(R, V, generator=g), -1).topk(K, -1)
    return (top.values[:, 0] - 0.1).tolist(), top.values.tolist(), top.indices.tolist()


def _sample(index: int, reward: float, off_policy: bool, teacher: bool = True) -> Sample:
    g = torch.Generator().manual_seed(100 + index)
    response = torch.randint(0, V, (R,), generator=g).tolist()
    lp, top_lp, top_ids = _teacher(index) if teacher else (None, None, None)
    # one group: GRPO's baseline over the batch (each sample alone in its group would have advantage 0)
    return Sample(group_index=0, index=index, tokens=[1, 2, 3] + response, response_length=R,
                  loss_mask=[1] * R, reward={"score": reward},
                  rollout_log_probs=None if off_policy else (-0.5 - 0.1 * torch.rand(R, generator=g)).tolist(),
                  metadata={"off_policy": True} if off_policy else {},
                  teacher_log_probs=lp, teacher_topk_log_probs=top_lp, teacher_topk_indices=top_ids)


def _rows(args, samples, advantages=True):
    raw, rewards, _ = post_process_rewards(args, samples, SingletonGroupTracker())
    rows = to_rows(args, samples, rewards, raw)
    for i, row in enumerate(rows):  # what the trainer recomputes before the advantages
        g = torch.Generator().manual_seed(7 + i)
        row["old_log_probs"] = (-0.6 - 0.2 * torch.rand(R, generator=g)).tolist()
        row["ref_log_probs"] = (-0.7 - 0.2 * torch.rand(R, generator=g)).tolist()
    if advantages:  # the top-K-only loss runs with --disable-compute-advantages-and-returns
        attach_advantages(args, rows, torch.device("cpu"))
    return rows


def _logit_grads(args, loss_fn, rows, per_token=False):
    batch = batching.loss_batch(batching.collate(rows, list(range(len(rows))), pad_token_id=0), torch.device("cpu"))
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(len(rows), R, V, generator=g, dtype=torch.float64).requires_grad_(True)
    loss, metrics = loss_fn(args, batch, logits, batching.reducer(batch, per_token))
    loss.backward()
    return logits.grad, metrics


# the conversation methods and their settings (the built-in method's `training`, openclaw-test's variants), all with
# the KL loss and an entropy bonus on where the loss has them, and whitened advantages where an estimator computes them
METHODS = {
    "rl": dict(loss=losses.policy_loss_function, kw=dict(normalize_advantages=True)),
    "opd": dict(loss=losses.policy_loss_function, kw=dict(advantage_estimator="on_policy_distillation",
                                                          normalize_advantages=True)),
    "combine": dict(loss=combine_loss.combine_loss_function, kw=dict(rewards_normalization=False,
                                                              disable_rewards_normalization=True)),
    "combine_topk": dict(loss=combine_loss.combine_topk_loss_function, kw=dict(rewards_normalization=False,
                                                                        disable_rewards_normalization=True)),
    "combine_head": dict(loss=combine_loss.combine_topk_loss_function, kw=dict(
        rewards_normalization=False, disable_rewards_normalization=True, distill_divergence="forward",
        distill_head_positions=2)),
    "opd_topk": dict(loss=losses.topk_distillation_loss_function, kw=dict(rewards_normalization=False,
                                                                         disable_rewards_normalization=True)),
}


@pytest.mark.parametrize("per_token", [False, True], ids=["sample_mean", "per_token"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_off_policy_weight_zero_leaves_no_gradient_from_the_row_under_every_method(method, per_token):
    spec = METHODS[method]
    args = trainer_args(off_policy_weight=0.0, use_kl_loss=True, kl_loss_coef=0.1, entropy_coef=0.01, **spec["kw"])
    samples = [_sample(0, 1.0, off_policy=False), _sample(1, -1.0, off_policy=True), _sample(2, 1.0, False)]
    rows = _rows(args, samples, advantages=method != "opd_topk")
    grad, _ = _logit_grads(args, spec["loss"], rows, per_token)
    assert torch.equal(grad[1], torch.zeros_like(grad[1])), f"{method}: the weight-0 trace still has gradient"
    assert grad[0].abs().sum() > 0 and grad[2].abs().sum() > 0


@pytest.mark.parametrize("method", ["rl", "opd"])
def test_off_policy_weight_scales_the_row_after_whitening(method):
    """With --normalize-advantages the weight multiplies the row's loss after whitening: the row's gradient scales
    by exactly the weight and the other rows do not change (weighting the advantage first moved the batch mean,
    and a weight-0 row ended at -mean * scale, pushed down instead of ignored)."""
    spec = METHODS[method]
    samples = [_sample(0, 1.0, False), _sample(1, 1.0, True), _sample(2, -1.0, False), _sample(3, 0.5, False)]

    def grads(weight):
        args = trainer_args(off_policy_weight=weight, **spec["kw"])
        return _logit_grads(args, spec["loss"], _rows(args, samples))[0]

    full, half = grads(1.0), grads(0.5)
    torch.testing.assert_close(half[1], 0.5 * full[1], rtol=1e-10, atol=1e-12)
    for i in (0, 2, 3):
        torch.testing.assert_close(half[i], full[i], rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------------------- step_wise


def _prm_step(traj: int, outcome: float, prm: float | None, coef: float = 1.0) -> Sample:
    """A per-turn (dynamic-history) step sample as the agentic reward functions leave it."""
    s = Sample(group_index=0, index=traj, tokens=[1] * 5, response_length=2, loss_mask=[1, 1],
               reward={"score": outcome}, metadata={"step_wise": {"prm_scores": [prm], "step_indices": [0]}})
    agentic_rewards.step_reward_fields(s.metadata, outcome, coef)
    return s


def test_step_wise_honours_disable_rewards_normalization():
    samples = [_prm_step(0, 1.0, 1.0), _prm_step(1, 1.0, -1.0), _prm_step(2, -1.0, 1.0)]
    args = trainer_args(advantage_estimator="step_wise", rewards_normalization=False,
                        disable_rewards_normalization=True)
    _, rewards, _ = post_process_rewards(args, samples, SingletonGroupTracker())
    assert rewards == [[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]  # the raw targets outcome + coef * prm, as upstream
    _, normalised, _ = post_process_rewards(trainer_args(advantage_estimator="step_wise"), samples,
                                            SingletonGroupTracker())
    assert normalised[0][0] > 1.0  # z-scored when normalisation is on


def test_an_unjudged_step_leaves_its_bucket_by_default_and_trains_on_the_outcome_when_asked():
    # bucket (group 0, step 0): judged targets 2 and 0, and an unjudged step of a failed trajectory (outcome -1)
    samples = [_prm_step(0, 1.0, 1.0), _prm_step(1, 1.0, -1.0), _prm_step(2, -1.0, None)]
    assert samples[2].metadata["step_wise"]["step_scores_with_outcome"] == [-1.0]  # logged: the outcome alone
    _, skip, metrics = post_process_rewards(trainer_args(advantage_estimator="step_wise"), samples,
                                            SingletonGroupTracker())
    z = 1 / (1 + 1e-6)  # (2, 0): mean 1, population std 1
    assert skip == [pytest.approx([z, z]), pytest.approx([-z, -z]), [0.0, 0.0]]
    assert metrics["rollout/step_wise/unscored_steps"] == 1
    _, outcome, _ = post_process_rewards(trainer_args(advantage_estimator="step_wise", step_wise_unjudged="outcome"),
                                         samples, SingletonGroupTracker())
    assert outcome[2][0] < -1.0 and outcome[0][0] != pytest.approx(z)  # in the bucket, as a 0 vote would be
    from slime.utils.arguments import build_parser

    assert build_parser().get_default("step_wise_unjudged") == "skip"


def test_constant_groups_and_buckets_are_kept_by_default():
    """Upstream drops constant GRPO groups and constant step_wise buckets; here both stay in the batch at advantage
    exactly 0 unless --constant-groups drop (UPSTREAM_DIFFERENCES.md)."""
    from slime.training.train_data import drop_constant
    from slime.utils.arguments import build_parser

    assert build_parser().get_default("constant_groups") == "keep"
    args = trainer_args(constant_groups=build_parser().get_default("constant_groups"))
    flat = [Sample(group_index=0, index=i, tokens=[1, 2, 3], response_length=1, reward={"score": 1.0})
            for i in range(2)]
    kept, _ = drop_constant(args, flat)
    assert kept == flat
    assert post_process_rewards(args, flat, SingletonGroupTracker())[1] == [0.0, 0.0]
    steps = [_prm_step(0, 1.0, 1.0), _prm_step(1, 1.0, 1.0)]
    step_args = trainer_args(advantage_estimator="step_wise", constant_groups="keep")
    _, adv, metrics = post_process_rewards(step_args, steps, SingletonGroupTracker())
    assert adv == [[0.0, 0.0], [0.0, 0.0]] and not any(s.remove_sample for s in steps)
    assert metrics["rollout/step_wise/constant_buckets"] == 1 and metrics["rollout/step_wise/dropped_buckets"] == 0


def test_per_turn_samples_are_grouped_by_trajectory_without_the_dynamic_history_flag():
    """Terminal and GUI return one sample per turn whatever the flag: a trajectory's reward must count once in its
    group's mean and std, not once per step."""
    def turn(traj, reward):
        return Sample(group_index=0, index=traj, tokens=[1, 2, 3], response_length=1, reward={"score": reward})

    samples = [turn(0, 1.0), turn(0, 1.0), turn(0, 1.0), turn(1, -1.0)]
    _, with_flag, _ = post_process_rewards(trainer_args(dynamic_history=True), samples, SingletonGroupTracker())
    _, without, metrics = post_process_rewards(trainer_args(), samples, SingletonGroupTracker())
    assert without == with_flag == pytest.approx([2 ** -0.5] * 3 + [-(2 ** -0.5)], rel=1e-5)
    assert metrics["rollout/trajectories"] == 2
    # one sample per trajectory (distinct indices): plain per-group GRPO, as before
    single = [turn(0, 1.0), turn(1, -1.0)]
    _, plain, metrics = post_process_rewards(trainer_args(), single, SingletonGroupTracker())
    assert "rollout/trajectories" not in metrics and plain == pytest.approx([2 ** -0.5, -(2 ** -0.5)], rel=1e-5)


# ------------------------------------------------------------------------------------------------------ metrics


def _tis_rows():
    return [{"tokens": [5, 6, 7, 8], "response_length": 2, "loss_mask": [1, 1], "advantages": [1.0, 1.0],
             "old_log_probs": [-1.0, -2.0], "rollout_log_probs": [-1.1, -2.1]},  # ratio exp(0.1) on both tokens
            {"tokens": [5, 6, 9], "response_length": 1, "loss_mask": [1], "advantages": [-1.0],
             "old_log_probs": [-0.5], "rollout_log_probs": None, "off_policy": True}]


def _step_metrics(args, loss_fn, micro_batches):
    """The step's logged metrics over several micro-batches, as both actors aggregate them."""
    sums: dict = {}
    total_rows = 0
    for rows in micro_batches:
        batch = batching.loss_batch(batching.collate(rows, list(range(len(rows))), 0), torch.device("cpu"))
        logits = torch.zeros(len(rows), max(r["response_length"] for r in rows), V, dtype=torch.float64)
        _, metrics = loss_fn(args, batch, logits, batching.reducer(batch, False))
        accumulate_metrics(sums, metrics)
        total_rows += len(rows)
    return average_metrics(sums, float(total_rows))


def test_tis_metrics_average_over_the_rows_tis_weighs():
    args = trainer_args(use_tis=True, tis_clip_low=0.0, tis_clip=2.0)
    rows = _tis_rows()
    logged = _step_metrics(args, losses.policy_loss_function, [rows, [rows[1]]])  # one micro-batch of a trace only
    ratio = torch.exp(torch.tensor(0.1)).item()
    assert logged["train/tis"] == pytest.approx(ratio)  # not (ratio + 1 + 1) / 3
    assert logged["train/tis_abs"] == pytest.approx(ratio - 1)
    assert logged["train/tis_clipfrac"] == 0.0 and logged["train/tis_weight"] == pytest.approx(ratio)


def test_rollout_logprob_gap_is_measured_against_the_current_forward_under_use_rollout_logprobs():
    rows = _tis_rows()[:1]
    rows[0]["old_log_probs"] = list(rows[0]["rollout_log_probs"])  # what --use-rollout-logprobs does
    logged = _step_metrics(trainer_args(use_rollout_logprobs=True), losses.policy_loss_function, [rows])
    current = torch.log_softmax(torch.zeros(V), -1)[0].item()  # the zero logits of _step_metrics: log(1/V)
    expected = (abs(current + 1.1) + abs(current + 2.1)) / 2
    assert logged["train/train_rollout_logprob_abs_diff"] == pytest.approx(expected)
    # recomputed old log-probs: old - rollout, with the trace row (no rollout log-probs) left out of the mean
    logged = _step_metrics(trainer_args(), losses.policy_loss_function, [_tis_rows()])
    assert logged["train/train_rollout_logprob_abs_diff"] == pytest.approx(0.1)


def test_teacher_topk_invalid_frac_counts_only_rows_that_have_a_teacher():
    args = trainer_args(rewards_normalization=False, disable_rewards_normalization=True)
    samples = [_sample(0, 1.0, False), _sample(1, -1.0, False, teacher=False)]
    rows = _rows(args, samples)
    logged = _step_metrics(args, combine_loss.combine_topk_loss_function, [rows, rows[1:]])
    assert logged["train/teacher_topk_invalid_frac"] == 0.0  # the teacher-less row's filler zeros are not invalid
    rows[0]["teacher_topk_log_probs"] = [[0.0] * K] + rows[0]["teacher_topk_log_probs"][1:]  # one padding row
    logged = _step_metrics(args, combine_loss.combine_topk_loss_function, [rows])
    assert logged["train/teacher_topk_invalid_frac"] == pytest.approx(1 / R)


# ------------------------------------------------------------------------------------------ zero-filled log-probs


def test_a_turn_with_fewer_logprobs_than_ids_is_off_policy_never_zero_padded():
    from slime.conversation.samples import sample_from_turn

    turn = SimpleNamespace(id=7, session_id="s", turn_num=2, prompt_ids=[1, 2, 3], response_ids=[9, 8, 0],
                           response_logprobs=[-0.1, -0.2], weight_version="4", finish_reason="stop",
                           response_message={"role": "assistant", "content": "ok"}, judgement={"judge": "rules"},
                           turn_reason="main")
    sample = sample_from_turn(turn, reward=1.0)
    assert sample.rollout_log_probs is None
    assert sample.metadata["off_policy"] is True and sample.metadata["source"] == "incomplete_logprobs"
    with pytest.raises(ValueError, match="--use-rollout-logprobs"):
        to_rows(trainer_args(use_rollout_logprobs=True), [sample], [1.0], [1.0])
    assert to_rows(trainer_args(use_tis=True), [sample], [1.0], [1.0])[0]["off_policy"] is True


def test_a_continued_response_without_earlier_logprobs_has_none():
    import asyncio

    from slime.rollout.default_rollout import generate

    class Engine:
        async def generate(self, input_ids, sampling_params, return_logprob):
            return {"text": "b", "meta_info": {"output_token_logprobs": [[-0.3, 11, None]],
                                               "finish_reason": {"type": "stop"}}}

    args = SimpleNamespace(rollout_max_response_len=8, rollout_temperature=1.0, rollout_top_p=1.0, rollout_top_k=-1,
                           rollout_stop=None, rollout_stop_token_ids=None, rollout_skip_special_tokens=False,
                           rollout_max_context_len=None, rollout_seed=1, seed=1, apply_chat_template=False,
                           mask_offpolicy_in_partial_rollout=False)
    partial = Sample(index=0, prompt="", tokens=[1, 2, 10], response="a", response_length=1, loss_mask=[1],
                     rollout_log_probs=None, status=Sample.Status.ABORTED)
    out = asyncio.run(generate(args, partial, {"max_new_tokens": 4}, client=Engine()))
    assert out.tokens == [1, 2, 10, 11] and out.rollout_log_probs is None
    with_known = Sample(index=0, prompt="", tokens=[1, 2, 10], response="a", response_length=1, loss_mask=[1],
                        rollout_log_probs=[-0.2], status=Sample.Status.ABORTED)
    assert asyncio.run(generate(args, with_known, {"max_new_tokens": 4}, client=Engine())).rollout_log_probs == \
        [-0.2, -0.3]


# ------------------------------------------------------------------------------------------------ KL flags


BASE = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3", "--disable-rollout-global-dataset"]


@pytest.mark.parametrize("flags", [
    ["--loss-type", "sft_loss"],
    ["--loss-type", "custom_loss", "--custom-loss-function-path", "slime.utils.loss.topk_distillation_loss_function"],
], ids=["sft_loss", "topk_only"])
def test_a_kl_coefficient_the_loss_never_reads_is_refused_at_start(flags):
    from slime.utils.arguments import ArgumentError, parse_args

    with pytest.raises(ArgumentError, match="has no KL term, so the reference model"):
        parse_args([*BASE, *flags, "--use-kl-loss", "--kl-loss-coef", "0.05"])
    assert parse_args([*BASE, *flags]).ref_model_needed is False


def test_losses_with_a_kl_term_still_take_the_kl_coefficient():
    from slime.utils.arguments import parse_args

    for flags in ([], ["--loss-type", "custom_loss", "--custom-loss-function-path",
                       "combine_loss.combine_topk_loss_function"]):
        assert parse_args([*BASE, *flags, "--use-kl-loss", "--kl-loss-coef", "0.05"]).ref_model_needed is True
