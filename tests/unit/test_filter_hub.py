"""The ready-made dynamic-sampling filter keeps only groups that would train (their rewards differ)."""

from types import SimpleNamespace

from slime.rollout.filter_hub import check_reward_nonzero_std
from slime.utils.types import Sample

ARGS = SimpleNamespace(reward_key=None)


def _sample(reward: float) -> Sample:
    return Sample(prompt="p", response="r", reward=reward)


def test_a_group_of_single_samples_is_kept_only_when_its_rewards_differ():
    assert check_reward_nonzero_std(ARGS, [_sample(1.0), _sample(0.0)]).keep
    out = check_reward_nonzero_std(ARGS, [_sample(1.0), _sample(1.0)])
    assert not out.keep and out.reason == "zero_std_1"


def test_episodes_of_step_samples_are_judged_by_their_rewards_across_the_group():
    # a multi-step agent returns each episode as its step samples, which all carry the episode's reward
    solved, failed = [_sample(1.0)] * 3, [_sample(-1.0)] * 5
    assert check_reward_nonzero_std(ARGS, [solved, failed, failed]).keep
    out = check_reward_nonzero_std(ARGS, [failed, failed])
    assert not out.keep and out.reason == "zero_std_-1"
