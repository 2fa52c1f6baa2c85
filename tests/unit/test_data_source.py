"""RolloutDataSource: groups and indices, epochs, shuffling, the buffer, save/load, prompt filtering."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from slime.rollout.data_source import RolloutDataSource, RolloutDataSourceWithBuffer
from slime.utils.types import Sample


def write_prompts(path, prompts, labels=None, metadata=None):
    with open(path, "w") as f:
        for i, prompt in enumerate(prompts):
            row = {"prompt": prompt, "label": labels[i] if labels else f"label-{i}"}
            if metadata is not None:
                row["metadata"] = metadata[i]
            f.write(json.dumps(row) + "\n")
    return str(path)


def make_args(prompt_data, **overrides):
    args = dict(
        prompt_data=prompt_data,
        input_key="prompt",
        label_key="label",
        metadata_key="metadata",
        apply_chat_template=False,
        apply_chat_template_kwargs={},
        rollout_shuffle=False,
        rollout_seed=42,
        n_samples_per_prompt=3,
        rollout_max_prompt_len=None,
        rollout_global_dataset=True,
        hf_checkpoint=None,
        save=None,
        load=None,
    )
    args.update(overrides)
    return SimpleNamespace(**args)


@pytest.fixture()
def five_prompts(tmp_path):
    return write_prompts(tmp_path / "p.jsonl", [f"prompt {i}" for i in range(5)],
                         metadata=[{"k": i} for i in range(5)])


def prompts_of(groups):
    return [group[0].prompt for group in groups]


def dicts(groups):
    return [[s.to_dict() for s in g] for g in groups]


def test_groups_share_group_index_and_get_unique_indices(five_prompts):
    source = RolloutDataSource(make_args(five_prompts))
    assert len(source) == 5 and len(source.dataset) == 5
    groups = source.get_samples(4)
    assert len(groups) == 4
    assert [len(g) for g in groups] == [3, 3, 3, 3]
    assert [{s.group_index for s in g} for g in groups] == [{0}, {1}, {2}, {3}]
    assert [s.index for g in groups for s in g] == list(range(12))
    assert prompts_of(groups) == ["prompt 0", "prompt 1", "prompt 2", "prompt 3"]
    first = groups[1][0]
    assert first.label == "label-1" and first.metadata == {"k": 1}
    assert first.status == Sample.Status.PENDING and first.tokens == [] and first.reward is None
    # deep copies: nothing is shared between the samples of a group or with the dataset
    groups[1][0].metadata["k"] = 99
    assert groups[1][1].metadata == {"k": 1} and source.dataset[1].metadata == {"k": 1}
    # the next call continues the counters
    more = source.get_samples(1)
    assert more[0][0].group_index == 4 and [s.index for s in more[0]] == [12, 13, 14]


def test_wraps_around_epochs(five_prompts):
    source = RolloutDataSource(make_args(five_prompts, n_samples_per_prompt=1))
    seen = []
    for _ in range(4):
        seen += prompts_of(source.get_samples(3))
    assert seen == [f"prompt {i % 5}" for i in range(12)]
    assert source.epoch_id == 2 and source.sample_offset == 2
    assert source.sample_group_index == 12 and source.sample_index == 12


def test_shuffle_is_a_seeded_permutation_per_epoch(five_prompts, tmp_path):
    path = write_prompts(tmp_path / "many.jsonl", [f"prompt {i}" for i in range(50)])

    def epochs(seed, n_epochs=3):
        source = RolloutDataSource(make_args(path, n_samples_per_prompt=1, rollout_shuffle=True, rollout_seed=seed))
        return [prompts_of(source.get_samples(50)) for _ in range(n_epochs)]

    a, b = epochs(7), epochs(7)
    assert a == b  # deterministic
    for epoch in a:
        assert sorted(epoch) == sorted(f"prompt {i}" for i in range(50))  # each epoch is a permutation
    assert a[0] != a[1] != a[2]  # seed + epoch: a fresh order every epoch
    assert a[0] != [f"prompt {i}" for i in range(50)]
    assert epochs(8)[0] != a[0]
    # epoch e with seed s is epoch e-1 with seed s+1 (the order is a function of rollout_seed + epoch)
    assert epochs(8, 2)[0] == a[1]


@pytest.mark.parametrize("shuffle", [False, True])
def test_save_load_resumes_the_exact_next_batch(tmp_path, shuffle):
    path = write_prompts(tmp_path / "p.jsonl", [f"prompt {i}" for i in range(7)])
    args = make_args(path, rollout_shuffle=shuffle, n_samples_per_prompt=2)
    original = RolloutDataSource(args)
    original.get_samples(5)
    original.get_samples(4)  # crosses into epoch 1
    given_back = original.get_samples(2)
    given_back[0][0].tokens = [1, 2, 3]
    given_back[0][0].response_length = 1
    given_back[0][0].metadata["start_rollout_id"] = 3
    original.add_samples(given_back[:1])
    state_file = original.save(tmp_path / "state" / "ds.json")
    assert json.loads(state_file.read_text())["epoch_id"] == 1
    expected = [original.get_samples(3), original.get_samples(6)]

    resumed = RolloutDataSource(args)
    assert resumed.load(state_file) is True
    got = [resumed.get_samples(3), resumed.get_samples(6)]
    assert dicts(got[0]) == dicts(expected[0]) and dicts(got[1]) == dicts(expected[1])
    assert got[0][0][0].tokens == [1, 2, 3]  # the buffered group came back first, intact

    # in-memory round trip too
    third = RolloutDataSource(args)
    third.load_state_dict(json.loads(json.dumps(resumed.state_dict())))
    assert dicts(third.get_samples(4)) == dicts(resumed.get_samples(4))


def test_save_and_load_by_rollout_id(five_prompts, tmp_path):
    args = make_args(five_prompts, save=str(tmp_path / "ckpt"), load=str(tmp_path / "ckpt"))
    source = RolloutDataSource(args)
    source.get_samples(2)
    path = source.save(3)
    assert path == tmp_path / "ckpt" / "rollout" / "global_dataset_state_dict_3.json"
    expected = source.get_samples(2)
    fresh = RolloutDataSource(args)
    assert fresh.load(99) is False  # nothing saved for that rollout: start from the beginning
    assert fresh.load(3) is True
    assert dicts(fresh.get_samples(2)) == dicts(expected)
    # load(None) resumes the rollout before --start-rollout-id
    args.start_rollout_id = 4
    again = RolloutDataSource(args)
    assert again.load() is True and again.sample_group_index == 2


def test_buffer_is_served_first(five_prompts):
    source = RolloutDataSourceWithBuffer(make_args(five_prompts, n_samples_per_prompt=2))
    first = source.get_samples(2)
    source.add_samples([first[1]])
    assert source.get_buffer_length() == 1
    groups = source.get_samples(2)
    assert groups[0] is first[1]
    assert groups[1][0].group_index == 2 and groups[1][0].prompt == "prompt 2"
    assert source.get_buffer_length() == 0
    with pytest.raises(ValueError, match="n_samples_per_prompt=2"):
        source.add_samples([first[0][:1]])


def test_buffer_filter_hook(five_prompts):
    taken = []

    def pop_last(args, rollout_id, buffer, num_samples):
        taken.append(num_samples)
        return [buffer.pop()]

    source = RolloutDataSource(make_args(five_prompts, n_samples_per_prompt=1,
                                         hooks={"buffer_filter_path": pop_last}))
    a, b = source.get_samples(2)
    source.add_samples([a, b])
    assert source.get_samples(1)[0] is b and taken == [1]


def test_no_global_dataset_gives_empty_samples(five_prompts):
    source = RolloutDataSource(make_args(five_prompts, rollout_global_dataset=False, n_samples_per_prompt=2))
    groups = source.get_samples(2)
    assert len(source) == 0
    assert [[(s.group_index, s.index, s.prompt) for s in g] for g in groups] == [
        [(0, 0, ""), (0, 1, "")], [(1, 2, ""), (1, 3, "")]]


def test_row_slice(five_prompts):
    source = RolloutDataSource(make_args(five_prompts + "@[1:3]", n_samples_per_prompt=1))
    assert prompts_of(source.get_samples(3)) == ["prompt 1", "prompt 2", "prompt 1"]


def test_bad_rows_are_reported(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        RolloutDataSource(make_args(str(path)))
    path.write_text('{"question": "no prompt key"}\n')
    with pytest.raises(KeyError, match="input key 'prompt'"):
        RolloutDataSource(make_args(str(path)))


def test_chat_template_and_prompt_length_filter(tmp_path, tiny_model_path, caplog):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    short = [{"role": "user", "content": "hi"}]
    long = [{"role": "user", "content": "a much longer question " * 20}]
    path = write_prompts(tmp_path / "chat.jsonl", [short, long, "plain string prompt"])
    rendered = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
                for m in (short, long, [{"role": "user", "content": "plain string prompt"}])]
    lengths = [len(tokenizer.encode(t, add_special_tokens=False)) for t in rendered]
    assert lengths[0] < lengths[2] < lengths[1]

    # no filter: every prompt is templated, string prompts as one user message
    source = RolloutDataSource(make_args(path, apply_chat_template=True, hf_checkpoint=str(tiny_model_path)))
    assert [s.prompt for s in source.dataset.samples] == rendered
    assert rendered[0].endswith("<|im_start|>assistant\n")

    # the filter drops prompts longer than rollout_max_prompt_len tokens, counts and logs them
    with caplog.at_level(logging.WARNING, logger="slime.rollout.data_source"):
        source = RolloutDataSource(make_args(path, apply_chat_template=True, hf_checkpoint=str(tiny_model_path),
                                             rollout_max_prompt_len=lengths[2]))
    assert [s.prompt for s in source.dataset.samples] == [rendered[0], rendered[2]]
    assert source.dataset.num_filtered == 1
    assert "filtered out 1 of 3 prompts" in caplog.text

    # without the template, message prompts are measured templated (as generate will send them) and
    # string prompts as they are
    source = RolloutDataSource(make_args(path, hf_checkpoint=str(tiny_model_path), rollout_max_prompt_len=lengths[0]))
    assert [s.prompt for s in source.dataset.samples] == [short, "plain string prompt"]

    # everything filtered out is an error, not an empty dataset
    with pytest.raises(ValueError, match="no usable prompts"):
        RolloutDataSource(make_args(path, hf_checkpoint=str(tiny_model_path), rollout_max_prompt_len=1))
