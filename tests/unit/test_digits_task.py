"""The digit-repeat task: exact-match reward, prompt files, and the warm-start policy."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from slime.tasks import digits
from slime.utils.types import Sample


def reward_of(response, label="7"):
    return asyncio.run(digits.reward(None, Sample(response=response, label=label)))


@pytest.mark.parametrize("response, expected", [
    ("7", 1.0),
    (" 7 ", 1.0),
    ("7\n", 1.0),
    ("7<|im_end|>", 1.0),
    (" 7<|im_end|>\n", 1.0),
    ("77", 0.0),
    ("", 0.0),
    ("seven", 0.0),
    ("8", 0.0),
    ("7 7", 0.0),
    ("<|im_end|>", 0.0),
    ("The digit is 7", 0.0),
])
def test_reward_is_exact_match(response, expected):
    assert reward_of(response) == expected


def test_reward_label_types_and_batches():
    assert reward_of("3", label=3) == 1.0
    assert reward_of("3", label=None) == 0.0
    assert reward_of(None) == 0.0
    batch = [Sample(response="1", label="1"), Sample(response="2", label="1")]
    assert asyncio.run(digits.reward(None, batch)) == [1.0, 0.0]


def test_reward_is_a_valid_custom_rm_hook():
    from slime.utils.hooks import load_function

    assert load_function("slime.tasks.digits.reward", "--custom-rm-path") is digits.reward


def test_make_prompts_format_and_determinism(tmp_path):
    path = digits.make_prompts(500, 0, tmp_path / "sub" / "train.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 500
    for row in rows:
        assert set(row) == {"prompt", "label"}
        assert row["label"] in digits.DIGITS
        assert row["prompt"] == [{"role": "user", "content": f"Repeat this digit: {row['label']}"}]
    counts = Counter(row["label"] for row in rows)
    assert set(counts) == set(digits.DIGITS) and min(counts.values()) > 25
    again = digits.make_prompts(500, 0, tmp_path / "again.jsonl")
    assert again.read_text() == path.read_text()
    assert digits.make_prompts(500, 1, tmp_path / "other.jsonl").read_text() != path.read_text()


def test_cli_writes_prompts(tmp_path, capsys):
    out = tmp_path / "data" / "digits_train.jsonl"
    digits.main(["--out", str(out), "--n", "20", "--seed", "3"])
    assert out.read_text() == digits.make_prompts(20, 3, tmp_path / "ref.jsonl").read_text()
    assert str(out) in capsys.readouterr().out


def test_digits_are_single_tokens_in_the_tiny_tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    digit_ids, eos = digits.digit_token_ids(tokenizer)
    assert len(set(digit_ids)) == 10
    assert eos == tokenizer.eos_token_id
    for digit, token in zip(digits.DIGITS, digit_ids):
        assert tokenizer.encode(digit + "<|im_end|>", add_special_tokens=False) == [token, eos]


def test_digit_policy_answers_one_digit_and_is_right_only_sometimes(tiny_model_path):
    """The warm start answers <digit><|im_end|>, right well below what RL reaches (built once, cached)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = digits.build_digit_policy()
    assert path.name.startswith("digit-policy-") and path.parent.name == "tiny"
    assert digits.build_digit_policy() == path  # cached
    recipe = json.loads((path / "digit_policy_recipe.json").read_text())
    low, high = digits.ACCURACY_RANGE
    assert low <= recipe["sampled_accuracy"] <= high
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    report = digits.evaluate_policy(model, tokenizer, n=400, seed=7)
    assert low <= report["sampled_accuracy"] <= high
    assert low <= report["expected_accuracy"] <= high
    assert report["format_rate"] >= 0.95
    assert all(answer in digits.DIGITS for answer in report["greedy_answers"])


def test_the_curve_check_reads_one_reward_per_rollout_and_needs_the_rise(tmp_path, capsys):
    """The scripts' proof of learning: only rows with a rollout reward count (optimizer steps without one are
    skipped), and the rise is the last 3 rollouts' mean minus the first 3's."""
    metrics = tmp_path / "metrics.jsonl"
    rows = [{"train/loss": 0.1}] + [{"rollout/raw_reward": r} for r in (0.2, 0.2, 0.3, 0.5, 0.6, 0.7)]
    metrics.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert digits.reward_curve(metrics) == [0.2, 0.2, 0.3, 0.5, 0.6, 0.7]
    assert digits.learning_gain([0.2, 0.2, 0.3, 0.5, 0.6, 0.7]) == pytest.approx(0.6 - 0.7 / 3)
    assert digits.learning_gain([0.1, 0.5]) == pytest.approx(0.0)  # two rollouts: both windows are the whole curve
    assert digits.print_curve(metrics, 0.3)
    assert not digits.print_curve(metrics, 0.5)
    assert "did not rise by 0.5" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        digits.main(["--curve", str(metrics), "--min-gain", "0.5"])
    with pytest.raises(ValueError):
        digits.learning_gain([])
