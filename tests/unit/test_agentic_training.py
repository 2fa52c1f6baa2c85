"""The trainer's side of multi-turn agent rollouts: dynamic history, step_wise, the constant-group drop and the
carried tail, through `train_data` and `advantages` as the training loop calls them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from slime.training.advantages import attach_advantages
from slime.training.train_data import drop_constant, post_process_rewards, take_whole_steps, to_rows
from slime.utils.ppo_utils import SingletonGroupTracker
from slime.utils.types import Sample


def args_for(**kw):
    base = dict(advantage_estimator="grpo", rewards_normalization=True, disable_rewards_normalization=False,
                grpo_std_normalization=True, disable_grpo_std_normalization=False, reward_key="score",
                normalize_advantages=False, dynamic_history=False, constant_groups="keep", hooks={})
    base.update(kw)
    return SimpleNamespace(**base)


def step(group, traj, reward, n=2, **kw):
    return Sample(group_index=group, index=traj, tokens=[1] * (3 + n), response_length=n, loss_mask=[1] * n,
                  reward={"score": reward}, **kw)


def test_dynamic_history_normalises_per_trajectory_and_broadcasts_to_steps():
    # group 0: trajectory 0 (3 steps, reward 1), trajectory 1 (1 step, reward -1): two trajectories, not 4 samples
    samples = [step(0, 0, 1.0), step(0, 0, 1.0), step(0, 0, 1.0), step(0, 1, -1.0)]
    raw, adv, metrics = post_process_rewards(args_for(dynamic_history=True), samples, SingletonGroupTracker())
    # mean 0, unbiased std of (1, -1) = sqrt(2): 1 / (sqrt 2 + 1e-6)
    expected = 1 / (2 ** 0.5 + 1e-6)
    assert adv == pytest.approx([expected, expected, expected, -expected])
    assert metrics["rollout/trajectories"] == 2
    # without the flag too: the samples share trajectories (per-turn samples), so they are not z-scored as 4 samples
    _, flat, _ = post_process_rewards(args_for(), samples, SingletonGroupTracker())
    assert flat == pytest.approx(adv)


def test_constant_groups_are_dropped_only_when_asked_and_counted():
    samples = [step(0, 0, 1.0), step(0, 1, 1.0), step(1, 2, 1.0), step(1, 3, -1.0)]
    kept, metrics = drop_constant(args_for(constant_groups="drop"), samples)
    assert [s.group_index for s in kept] == [1, 1] and metrics["rollout/dropped_constant_groups"] == 1
    assert drop_constant(args_for(), samples) == (samples, {})
    # every group constant: drop keeps the first (upstream's), drop-all keeps none (the rollout trains nothing)
    agreed = [step(0, 0, 1.0), step(0, 1, 1.0), step(1, 2, -1.0), step(1, 3, -1.0)]
    assert [s.group_index for s in drop_constant(args_for(constant_groups="drop"), agreed)[0]] == [0, 0]
    kept, metrics = drop_constant(args_for(constant_groups="drop-all"), agreed)
    assert kept == [] and metrics["rollout/dropped_constant_groups"] == 2


def test_step_wise_gives_per_token_advantages_on_each_steps_span():
    def prm_sample(traj, scores):
        # 6 response tokens: step 0 on [0, 2), an observation [2, 4) (mask 0), step 1 on [4, 6)
        s = Sample(group_index=0, index=traj, tokens=[1] * 9, response_length=6, loss_mask=[1, 1, 0, 0, 1, 1],
                   reward={"score": 0.0})
        s.metadata = {"step_wise": {"step_scores": scores, "step_indices": [0, 1],
                                    "step_token_spans": [[0, 2], [4, 6]]}}
        return s

    samples = [prm_sample(0, [1.0, 2.0]), prm_sample(1, [-1.0, 0.0])]
    args = args_for(advantage_estimator="step_wise")
    raw, rewards, metrics = post_process_rewards(args, samples, SingletonGroupTracker())
    # bucket (0, step 0): 1 and -1, population std 1 -> +-1/(1+1e-6); bucket (0, step 1): 2 and 0 -> +-1 likewise
    z = 1 / (1 + 1e-6)
    assert rewards[0] == pytest.approx([z, z, 0, 0, z, z]) and rewards[1] == pytest.approx([-z, -z, 0, 0, -z, -z])
    rows = to_rows(args, samples, rewards, raw)
    for row in rows:
        row["old_log_probs"] = [0.0] * 6
    attach_advantages(args, rows, torch.device("cpu"))
    assert rows[0]["advantages"] == pytest.approx([z, z, 0, 0, z, z])
    with pytest.raises(ValueError, match="has no metadata\\['step_wise'\\]"):
        post_process_rewards(args, [step(0, 0, 1.0)], SingletonGroupTracker())


def test_the_tail_beyond_whole_steps_is_carried_not_dropped():
    rows = [{"i": i} for i in range(10)]
    now, carried = take_whole_steps(rows, 4)
    assert [r["i"] for r in now] == list(range(8)) and [r["i"] for r in carried] == [8, 9]
    now, carried = take_whole_steps(carried + [{"i": 10}, {"i": 11}], 4)
    assert [r["i"] for r in now] == [8, 9, 10, 11] and carried == []


def test_the_producer_carries_short_rollouts_and_marks_every_source_trained():
    from slime.training.loop import RolloutProducer

    class Source:  # a data source that keeps per-sample state, like the conversation store
        def __init__(self):
            self.marked = []

        def mark_trained(self, rollout_id):
            self.marked.append(rollout_id)

    def rollout(args, rollout_id, data_source):
        return [[step(rollout_id * 10 + i, i, float(i % 2))] for i in range(3)]  # 3 samples a rollout

    args = args_for(advantage_estimator="reinforce_plus_plus_baseline", disable_rewards_normalization=True,
                    global_batch_size=4, save_debug_rollout_data=None, hooks={"rollout_function_path": rollout},
                    use_tis=False, use_rollout_logprobs=False)
    source = Source()
    producer = RolloutProducer(args, source, dp_size=2)
    try:
        shards, metrics = producer.get(0)  # 3 < 4: no step, all 3 wait
        assert shards == [[], []] and metrics["rollout/carried_samples"] == 3
        shards, metrics = producer.get(1)  # 3 carried + 3 new: one step of 4, 2 carried
        assert sum(len(s) for s in shards) == 4 and metrics["rollout/carried_samples"] == 2
        assert [r["rollout_id"] for s in shards for r in s].count(0) == 3
        producer.mark_trained(1)
        # rollout 0's rows all trained; 2 of rollout 1's rows still wait in the carry, so it is not trained yet
        assert source.marked == [0]
        shards, metrics = producer.get(2)  # 2 carried + 3 new: one step of 4, rollout 2's last row carried
        assert [r["rollout_id"] for s in shards for r in s].count(1) == 2 and metrics["rollout/carried_samples"] == 1
        producer.mark_trained(2)
        assert source.marked == [0, 1]
    finally:
        producer.close()
