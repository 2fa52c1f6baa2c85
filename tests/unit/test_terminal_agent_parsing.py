"""The terminal agent's pure parts: strict tool-call parsing, message-level context fitting, samples per turn."""

from __future__ import annotations

import pytest

from generate import Episode, episode_samples, task_of

from slime.agentic.agent_loop import OMITTED_NOTE, Turn, fit_messages, parse_tool_calls
from slime.utils.types import Sample


def test_several_calls_in_one_turn_are_parsed_in_order_with_the_text_around_them():
    text = ('Let me look.\n<tool_call>\n{"name": "shell_exec", "arguments": {"id": "main", "command": "ls"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "shell_view", "arguments": "{\\"id\\": \\"main\\"}"}\n</tool_call>')
    parsed = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("shell_exec", {"id": "main", "command": "ls"}),
                                                             ("shell_view", {"id": "main"})]
    assert parsed.errors == [] and parsed.content == "Let me look."


@pytest.mark.parametrize("block, reason", [
    ('{"name": "shell_exec", "arguments": {"command": "ls"', "not valid JSON"),
    ('["shell_exec"]', 'string "name"'),
    ('{"arguments": {}}', 'string "name"'),
    ('{"name": "shell_exec", "arguments": [1]}', '"arguments" must be a JSON object'),
    ('{"name": "shell_exec", "arguments": "{oops"}', '"arguments" string is not valid JSON'),
])
def test_malformed_calls_are_parse_errors_with_a_reason(block, reason):
    parsed = parse_tool_calls(f"<tool_call>\n{block}\n</tool_call>")
    assert parsed.calls == [] and len(parsed.errors) == 1 and reason in parsed.errors[0]


def test_an_unclosed_block_cut_by_the_token_limit_is_a_parse_error_and_plain_text_is_an_answer():
    cut = parse_tool_calls('<tool_call>\n{"name": "shell_exec", "arguments": {"command": "ls"}}')
    assert cut.calls == [] and "not closed" in cut.errors[0]
    answer = parse_tool_calls("The file now has 3 lines.")
    assert answer.calls == [] and answer.errors == [] and answer.content == "The file now has 3 lines."
    mixed = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{bad}</tool_call>')
    assert [c.name for c in mixed.calls] == ["a"] and len(mixed.errors) == 1


def conversation(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for k in range(turns):
        messages.append({"role": "assistant", "content": f"call {k}"})
        messages.append({"role": "tool", "content": f"result {k} " + "x" * 10})
        if k % 2:
            messages.append({"role": "tool", "content": f"second result {k}"})
    return messages


def chars(messages):
    return sum(len(m["content"]) for m in messages)


def test_fitting_keeps_the_head_and_the_latest_whole_turns_with_a_note():
    messages = conversation(6)
    assert fit_messages(messages, chars, 10_000) == (messages, 0)
    budget = chars(messages) - 40
    fitted, omitted = fit_messages(messages, chars, budget)
    assert fitted[:2] == messages[:2] and chars(fitted) <= budget
    assert fitted[2] == {"role": "user", "content": OMITTED_NOTE.format(n=omitted)}
    assert fitted[3]["role"] == "assistant"  # a turn is never split from its results
    assert fitted[3:] == messages[len(messages) - len(fitted) + 3:]
    assert omitted == len(messages) - len(fitted) + 1
    assert fit_messages(messages, chars, 12) is None  # not even the head and the last turn


def test_one_sample_per_turn_with_the_exact_ids_and_untrainable_when_failed():
    sample = Sample(group_index=3, index=7, prompt={"task_name": "t", "task_path": "p", "instruction": "i"})
    episode = Episode("t:p", turns=[Turn([1, 2, 3], [4, 5], [-0.1, -0.2], "a", "stop"),
                                    Turn([1, 2, 3, 4, 5, 6], [7], [-0.3], "b", "stop")],
                      status="completed", accuracy=0.5)
    samples = episode_samples(episode, sample)
    assert [s.tokens for s in samples] == [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7]]
    assert [s.response_length for s in samples] == [2, 1] and samples[1].rollout_log_probs == [-0.3]
    assert all(s.loss_mask == [1] * s.response_length and not s.remove_sample for s in samples)
    assert [s.metadata["turn_idx"] for s in samples] == [0, 1] and samples[0].metadata["num_turns"] == 2
    assert (samples[0].group_index, samples[0].index) == (3, 7)
    episode.status = "failed"
    assert all(s.remove_sample and s.status == Sample.Status.FAILED for s in episode_samples(episode, sample))


def test_the_task_comes_from_the_prompt_object():
    assert task_of(Sample(prompt={"task": {"task_name": "a", "task_path": "x/a", "instruction": "do"}})) == (
        "a:x/a", {"task_name": "a", "task_path": "x/a", "instruction": "do"})
    assert task_of(Sample(prompt='{"task_name": "b"}'))[0] == "b:"
    with pytest.raises(ValueError, match="task object"):
        task_of(Sample(prompt="solve it"))
