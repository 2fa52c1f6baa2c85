"""The SFT rollout (`slime.rollout.sft_rollout`): rows of a prompt and response segments become samples whose
trained tokens are exactly the segments with loss 1 and the end-of-turn token, in the layout the agent loop
samples (prompt rendered with the tools, then each piece appended)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slime.models.chat_template import render_prompt_ids
from slime.rollout.sft_rollout import generate_rollout, segment_ids, sft_sample
from slime.utils.types import RolloutFnTrainOutput, Sample

TOOLS = [{"type": "function", "function": {"name": "code_interpreter", "parameters": {}}}]
MESSAGES = [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "What is 6*7?"}]
SEGMENTS = [{"text": "<tool_call>\n{\"name\": \"code_interpreter\"}\n</tool_call>", "loss": 1},
            {"text": "\n\n<interpreter>\n42\n</interpreter>\n\n", "loss": 0},
            {"text": "Answer: \\boxed{42}", "loss": 1}]


@pytest.fixture(scope="module")
def tok(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


def test_segments_train_exactly_the_policy_pieces_and_the_end_of_turn(tok):
    tokens, mask, length = segment_ids(tok, MESSAGES, SEGMENTS, TOOLS)
    prompt = render_prompt_ids(tok, MESSAGES, TOOLS)
    assert tokens[:len(prompt)] == prompt and len(tokens) == len(prompt) + length == len(prompt) + len(mask)
    pieces = [tok.encode(s["text"], add_special_tokens=False) for s in SEGMENTS]
    assert tokens[len(prompt):] == pieces[0] + pieces[1] + pieces[2] + [tok.eos_token_id]
    assert mask == [1] * len(pieces[0]) + [0] * len(pieces[1]) + [1] * len(pieces[2]) + [1]
    _, no_eot, n = segment_ids(tok, MESSAGES, SEGMENTS[:1], TOOLS, end_of_turn=False)
    assert n == len(pieces[0]) and no_eot == [1] * n


def test_bad_rows_are_refused_with_the_reason(tok):
    with pytest.raises(ValueError, match="nothing to train"):
        segment_ids(tok, MESSAGES, [{"text": "obs", "loss": 0}], end_of_turn=False)
    with pytest.raises(ValueError, match="segment 0 must be"):
        segment_ids(tok, MESSAGES, [{"loss": 1}])
    with pytest.raises(ValueError, match="metadata.segments"):
        sft_sample(tok, Sample(prompt="hi", metadata={}))
    with pytest.raises(ValueError, match="a string or a list of chat messages"):
        sft_sample(tok, Sample(prompt=7, metadata={"segments": SEGMENTS}))


class _Rows:
    def __init__(self, samples):
        self.samples = samples

    def get_samples(self, n):
        out, self.samples = self.samples[:n], self.samples[n:]
        return [[s] for s in out]


def test_the_rollout_function_gives_trainable_groups(tok, tiny_model_path):
    rows = [Sample(prompt=MESSAGES, label="42", metadata={"segments": SEGMENTS, "tools": TOOLS}),
            Sample(prompt="Say hi.", metadata={"segments": [{"text": "hi", "loss": 1}]})]
    args = SimpleNamespace(hf_checkpoint=str(tiny_model_path), rollout_batch_size=2, loss_type="sft_loss")
    out = generate_rollout(args, 0, _Rows(rows))
    assert isinstance(out, RolloutFnTrainOutput) and [len(g) for g in out.samples] == [1, 1]
    first, second = out.samples[0][0], out.samples[1][0]
    assert first.loss_mask.count(0) == len(tok.encode(SEGMENTS[1]["text"], add_special_tokens=False))
    assert second.tokens[-2:] == [*tok.encode("hi", add_special_tokens=False)[-1:], tok.eos_token_id]
    assert first.reward == 0.0 and first.rollout_log_probs is None and first.status == Sample.Status.COMPLETED
    assert out.metrics["sft/rows"] == 2 and out.metrics["sft/trained_tokens"] == sum(map(sum, [first.loss_mask,
                                                                                              second.loss_mask]))
    with pytest.raises(ValueError, match="--loss-type sft_loss"):
        generate_rollout(SimpleNamespace(**{**vars(args), "loss_type": "policy_loss"}), 0, _Rows(rows))
