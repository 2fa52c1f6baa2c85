"""slime.agentic.demo_agreement: greedy replies against demonstrated tool calls, verdict by verdict (the CLI on a
model: tests/integration/test_demo_agreement_cli.py)."""
import json

import pytest

from slime.agentic.demo_agreement import compare, demonstrated_reply, summarize


def call(arguments, name="computer_use"):
    return "Action: x\n<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


CLICK = {"action": "left_click", "coordinate": [59, 731]}


def test_verdicts_separate_the_exact_call_the_right_action_and_the_rest():
    assert compare(call(CLICK), call(CLICK)) == "exact"
    assert compare(call({"action": "left_click", "coordinate": [60, 731]}), call(CLICK)) == "kind"
    assert compare(call({"action": "key", "keys": ["enter"]}), call({"action": "key", "keys": ["end"]})) == "kind"
    assert compare(call({"action": "type", "text": "x"}), call(CLICK)) == "wrong"
    assert compare(call(CLICK, name="bash"), call(CLICK)) == "wrong"
    assert compare("Action: click Save", call(CLICK)) == "unparsed"
    assert compare(call(CLICK) + call(CLICK), call(CLICK)) == "unparsed"  # one call per step
    assert compare("<tool_call>\n{\"name\": \"computer_use\"", call(CLICK)) == "unparsed"  # cut by the cap
    with pytest.raises(ValueError, match="no single well-formed tool call"):
        compare(call(CLICK), "no call")


def test_the_demonstrated_reply_is_the_trained_segments_and_the_summary_counts_exact_as_right_kind():
    row = {"metadata": {"segments": [{"text": "a", "loss": 0}, {"text": "b", "loss": 1}, {"text": "c"}]}}
    assert demonstrated_reply(row) == "bc"
    with pytest.raises(ValueError):
        demonstrated_reply({"metadata": {"segments": [{"text": "a", "loss": 0}]}})
    assert summarize(["exact", "kind", "wrong", "unparsed"]) == \
        "exact 1/4, right action kind 2/4, wrong 1/4, unparsed 1/4"
