"""A judged turn becomes a sample made of exactly the ids the engine used (the rules for which turns train are
the methods', tests/unit/test_conversation_methods.py)."""

from types import SimpleNamespace

from slime.conversation.samples import sample_from_turn
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
    assert sample_from_turn(_turn(), 1.0, method="combine").metadata["method"] == "combine"
