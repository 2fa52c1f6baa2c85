"""The Sample type (slime.utils.types): accessors, invariants, SGLang meta_info folding, serialisation."""

import json
from types import SimpleNamespace

import pytest
import torch

from slime.utils.types import DynamicFilterOutput, RolloutFnEvalOutput, RolloutFnTrainOutput, Sample


def make_sample(**overrides):
    fields = dict(
        group_index=3,
        index=17,
        prompt="<|user|>2+2?<|assistant|>",
        tokens=[101, 102, 103, 7, 8, 9],
        response="4.",
        response_length=3,
        label="4",
        reward=1.0,
        loss_mask=[1, 0, 1],
        rollout_log_probs=[-0.1, 0.0, -0.3],
    )
    fields.update(overrides)
    return Sample(**fields)


def test_defaults():
    s = Sample()
    assert s.status is Sample.Status.PENDING
    assert s.tokens == [] and s.metadata == {} and s.weight_versions == []
    assert s.weight_version is None and s.teacher_log_probs is None and s.remove_sample is False
    # Mutable defaults are not shared between instances.
    Sample().metadata["x"] = 1
    assert Sample().metadata == {}


def test_status_values_are_strings():
    assert [s.value for s in Sample.Status] == ["pending", "completed", "truncated", "aborted", "failed"]
    assert Sample.Status.COMPLETED == "completed"
    assert Sample.Status("truncated") is Sample.Status.TRUNCATED


# --------------------------------------------------------------------------------------------------
# Reward and lengths
# --------------------------------------------------------------------------------------------------


def test_scalar_reward_needs_no_args():
    assert make_sample(reward=0.25).get_reward_value(None) == 0.25
    assert make_sample(reward=0.25).get_reward_value(SimpleNamespace(reward_key="acc")) == 0.25


def test_dict_reward_uses_reward_key():
    s = make_sample(reward={"acc": 1.0, "format": 0.5})
    assert s.get_reward_value(SimpleNamespace(reward_key="format")) == 0.5


@pytest.mark.parametrize("args", [None, SimpleNamespace(), SimpleNamespace(reward_key=None)])
def test_dict_reward_without_reward_key_is_a_clear_error(args):
    with pytest.raises(ValueError, match="reward-key"):
        make_sample(reward={"acc": 1.0}).get_reward_value(args)


def test_dict_reward_with_missing_key():
    with pytest.raises(ValueError, match="'f1' not in reward dict"):
        make_sample(reward={"acc": 1.0}).get_reward_value(SimpleNamespace(reward_key="f1"))


def test_unscored_reward():
    with pytest.raises(ValueError, match="not been scored"):
        make_sample(reward=None).get_reward_value(None)


def test_lengths_and_response_tokens():
    s = make_sample()
    assert s.prompt_length == 3
    assert s.response_tokens == [7, 8, 9]
    assert s.effective_response_length == 2  # loss_mask [1, 0, 1]
    assert make_sample(loss_mask=None).effective_response_length == 3


def test_empty_response():
    s = make_sample(response_length=0, loss_mask=[], rollout_log_probs=[])
    assert s.response_tokens == []  # not tokens[-0:], which is everything
    assert s.prompt_length == 6
    assert s.effective_response_length == 0
    s.validate()


# --------------------------------------------------------------------------------------------------
# validate()
# --------------------------------------------------------------------------------------------------


def test_validate_accepts_a_consistent_sample():
    make_sample(
        teacher_log_probs=[-1.0, -2.0, -3.0],
        teacher_topk_log_probs=[[-0.1, -2.0], [-0.2, -3.0], [-0.3, -4.0]],
        teacher_topk_indices=[[7, 1], [8, 2], [9, 3]],
    ).validate()
    make_sample(loss_mask=None, rollout_log_probs=None).validate()


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"loss_mask": [1, 1]}, "loss_mask"),
        ({"rollout_log_probs": [-0.1, -0.2, -0.3, -0.4]}, "rollout_log_probs"),
        ({"teacher_log_probs": [-1.0]}, "teacher_log_probs"),
        ({"teacher_topk_log_probs": [[-0.1], [-0.2]]}, "teacher_topk_log_probs"),
        ({"teacher_topk_log_probs": [[-0.1, -1.0], [-0.2], [-0.3, -1.0]]}, "teacher_topk_log_probs"),
        ({"teacher_topk_indices": [[1, 2], [3, 4], [5]]}, "teacher_topk_indices"),
        (
            {"teacher_topk_log_probs": [[-0.1], [-0.2], [-0.3]], "teacher_topk_indices": [[1, 2], [3, 4], [5, 6]]},
            "teacher_topk_indices",
        ),
        ({"response_length": 7, "loss_mask": None, "rollout_log_probs": None}, "response_length"),
        ({"response_length": -1, "loss_mask": None, "rollout_log_probs": None}, "response_length"),
    ],
)
def test_validate_names_the_broken_field(overrides, field):
    with pytest.raises(ValueError, match=rf"^{field}:"):
        make_sample(**overrides).validate()


# --------------------------------------------------------------------------------------------------
# update_from_meta_info
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "finish, status",
    [
        ({"type": "length", "length": 512}, Sample.Status.TRUNCATED),
        ({"type": "abort", "message": "paused"}, Sample.Status.ABORTED),
        ({"type": "stop", "matched": 2}, Sample.Status.COMPLETED),
        ("stop", Sample.Status.COMPLETED),
    ],
)
def test_finish_reason_sets_status(finish, status):
    s = make_sample()
    s.update_from_meta_info({"finish_reason": finish, "prompt_tokens": 3})
    assert s.status is status


def test_an_abort_keeps_the_engines_reason_and_other_endings_add_none():
    s = make_sample()
    s.update_from_meta_info({"finish_reason": {"type": "abort", "message": "engine step failed: " + "x" * 900}})
    assert s.metadata["abort_reason"].startswith("engine step failed") and len(s.metadata["abort_reason"]) == 500
    done = make_sample()
    done.update_from_meta_info({"finish_reason": {"type": "stop", "matched": 2, "message": "ignored"}})
    assert "abort_reason" not in done.metadata


def test_missing_finish_reason_keeps_status():
    s = make_sample(status=Sample.Status.FAILED)
    s.update_from_meta_info({"prompt_tokens": 3})
    assert s.status is Sample.Status.FAILED and s.weight_versions == []


def test_unknown_finish_reason():
    with pytest.raises(ValueError, match="finish_reason"):
        make_sample().update_from_meta_info({"finish_reason": {"type": "eos?"}})


def test_weight_version_keeps_the_oldest_numeric():
    s = make_sample()
    for version in ["10", "9", "12"]:
        s.update_from_meta_info({"finish_reason": {"type": "stop"}, "weight_version": version})
    assert s.weight_versions == ["10", "9", "12"]
    assert s.weight_version == "9"  # compared as integers ("10" < "9" as strings)


def test_weight_version_non_numeric_keeps_the_first():
    s = make_sample()
    s.update_from_meta_info({"weight_version": "ckpt-b"})
    s.update_from_meta_info({"weight_version": "ckpt-a"})
    s.update_from_meta_info({"weight_version": "3"})
    assert s.weight_versions == ["ckpt-b", "ckpt-a", "3"]
    assert s.weight_version == "ckpt-b"


def test_empty_or_missing_weight_version_is_ignored():
    s = make_sample()
    s.update_from_meta_info({"weight_version": ""})
    s.update_from_meta_info({"weight_version": None})
    assert s.weight_versions == [] and s.weight_version is None


def test_weight_version_int_is_stored_as_string():
    s = make_sample()
    s.update_from_meta_info({"weight_version": 7})
    s.update_from_meta_info({"weight_version": 5})
    assert s.weight_versions == ["7", "5"] and s.weight_version == "5"


# --------------------------------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------------------------------


def full_sample():
    return Sample(
        group_index=2,
        index=40,
        prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo 世界"}],
        tokens=[1, 2, 3, 4, 5],
        response="ok",
        response_length=2,
        label={"answer": "ok"},
        reward={"acc": 1.0, "format": -0.5},
        loss_mask=[1, 0],
        rollout_log_probs=[-0.25, 0.0],
        status=Sample.Status.TRUNCATED,
        metadata={"rm_type": "math", "round_number": 1, "tools": [{"name": "exec"}]},
        remove_sample=True,
        generate_function_path="my.module.generate",
        train_metadata={"source": "openclaw"},
        weight_versions=["4", "3"],
        weight_version="3",
        teacher_log_probs=[-0.5, -1.5],
        teacher_topk_log_probs=[[-0.1, -2.5], [-0.7, -0.9]],
        teacher_topk_indices=[[4, 9], [5, 11]],
    )


def test_json_round_trip_of_every_field():
    s = full_sample()
    text = s.to_json()
    back = Sample.from_json(text)
    assert back == s
    assert back.status is Sample.Status.TRUNCATED
    # Every declared field is in the dump, and the status is written as its string value.
    dumped = json.loads(text)
    assert dumped["status"] == "truncated"
    assert set(dumped) == {f for f in Sample.__dataclass_fields__}


def test_round_trip_keeps_unknown_attributes():
    s = full_sample()
    s.tool_call_count = 3
    s.custom_scores = {"a": [1, 2]}
    back = Sample.from_json(s.to_json())
    assert back.tool_call_count == 3 and back.custom_scores == {"a": [1, 2]}
    assert back.to_dict() == s.to_dict()


def test_from_dict_keeps_unknown_keys_as_attributes():
    data = full_sample().to_dict() | {"step_rewards": [0.1, 0.2]}
    back = Sample.from_dict(data)
    assert back.step_rewards == [0.1, 0.2]
    assert back.to_dict() == data


def test_to_dict_converts_tensors():
    s = full_sample()
    s.teacher_log_probs = torch.tensor([-0.5, -1.5])
    s.teacher_topk_indices = torch.tensor([[4, 9], [5, 11]])
    d = s.to_dict()
    assert d["teacher_log_probs"] == [-0.5, -1.5]
    assert d["teacher_topk_indices"] == [[4, 9], [5, 11]]
    json.dumps(d)  # JSON-safe


def test_from_dict_of_an_older_dump_uses_defaults():
    back = Sample.from_dict({"index": 1, "tokens": [1, 2], "response_length": 1, "status": "completed"})
    assert back.status is Sample.Status.COMPLETED
    assert back.weight_version is None and back.teacher_topk_indices is None and back.weight_versions == []


def test_from_dict_does_not_share_state_with_to_dict():
    s = full_sample()
    back = Sample.from_dict(s.to_dict())
    back.metadata["tools"].append({"name": "read"})
    back.teacher_topk_log_probs[0][0] = 0.0
    assert s.metadata["tools"] == [{"name": "exec"}]
    assert s.teacher_topk_log_probs[0][0] == -0.1


# --------------------------------------------------------------------------------------------------
# Rollout output types
# --------------------------------------------------------------------------------------------------


def test_rollout_output_types():
    group = [make_sample(), make_sample(index=18)]
    out = RolloutFnTrainOutput(samples=[group])
    assert out.samples[0][1].index == 18 and out.metrics is None
    ev = RolloutFnEvalOutput(data={"gsm8k": {"rewards": [1.0]}}, metrics={"eval/acc": 1.0})
    assert ev.data["gsm8k"]["rewards"] == [1.0]
    assert DynamicFilterOutput(keep=False, reason="constant group") == DynamicFilterOutput(False, "constant group")
    assert DynamicFilterOutput(keep=True).reason is None
