"""A judged turn becomes a sample made of exactly the ids the engine used; the Binary RL exclusion rule."""

from types import SimpleNamespace

from slime.conversation.samples import binary_rl_decision, sample_from_turn
from slime.utils.types import Sample


def _turn(**overrides):
    base = dict(id=7, session_id="s", turn_num=2, prompt_ids=[1, 2, 3], response_ids=[9, 8, 0],
                response_logprobs=[-0.1, -0.2, -0.3], weight_version="4", finish_reason="stop",
                response_message={"role": "assistant", "content": "ok"}, next_state=[{"role": "user", "content": "x"}],
                judgement={"score": 1.0, "failed": False, "judge": "rules"})
    base.update(overrides)
    return SimpleNamespace(**base)


def test_sample_uses_engine_ids_and_logprobs():
    sample = sample_from_turn(_turn(), reward=-1.0)
    assert sample.tokens == [1, 2, 3, 9, 8, 0] and sample.response_length == 3
    assert sample.rollout_log_probs == [-0.1, -0.2, -0.3] and sample.loss_mask == [1, 1, 1]
    assert sample.reward == {"score": -1.0} and sample.weight_version == "4"
    assert sample.status == Sample.Status.COMPLETED and sample.metadata["turn"] == 2
    assert Sample.from_dict(sample.to_dict()).tokens == sample.tokens
    assert sample_from_turn(_turn(finish_reason="length"), 1.0).status == Sample.Status.TRUNCATED


def test_binary_rl_rule():
    assert binary_rl_decision(_turn()).trainable and binary_rl_decision(_turn()).reward == 1.0
    assert binary_rl_decision(_turn(judgement={"score": -1.0, "failed": False})).reward == -1.0
    assert binary_rl_decision(_turn(next_state=None)).reason == "no_next_state"
    assert binary_rl_decision(_turn(judgement={"score": 0.0, "failed": False})).reason == "neutral"
    assert binary_rl_decision(_turn(judgement={"score": 0.0, "failed": True})).reason == "judge_failed"
    assert binary_rl_decision(_turn(judgement=None)).reason == "not_judged"
    assert binary_rl_decision(_turn(response_ids=[])).reason == "empty_response"
