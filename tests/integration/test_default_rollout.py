"""The default rollout function against a real engine serving the digit warm-start policy.

Rewards come from the digit task's exact-match plugin (`slime.tasks.digits.reward`), so a group's
rewards are in {0, 1} and vary between its samples at the policy's base accuracy (about 0.2-0.3).
"""

from __future__ import annotations

import asyncio
import math
import statistics

import pytest

from slime.engine.client import EngineClient
from slime.engine.launch import EngineProcess
from slime.rollout.data_source import RolloutDataSource
from slime.rollout.default_rollout import generate_rollout
from slime.tasks import digits
from slime.utils.types import DynamicFilterOutput, RolloutFnEvalOutput, RolloutFnTrainOutput, Sample


@pytest.fixture(scope="module")
def digit_policy():
    return digits.build_digit_policy()


@pytest.fixture(scope="module")
def engine(digit_policy, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with EngineProcess(digit_policy, log_path=log, ready_timeout=120) as server:
        yield server


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    return digits.make_prompts(200, 0, tmp_path_factory.mktemp("data") / "digits.jsonl")


@pytest.fixture(scope="module")
def tokenizer(digit_policy):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(digit_policy)


@pytest.fixture()
def make_args(digit_policy, engine, prompt_file, tmp_path):
    from slime.utils.arguments import parse_args

    def make(*extra: str, batch: int = 4, n: int = 4, **attrs):
        args = parse_args([
            "--hf-checkpoint", str(digit_policy),
            "--prompt-data", str(prompt_file),
            "--apply-chat-template",
            "--rollout-batch-size", str(batch),
            "--n-samples-per-prompt", str(n),
            "--rollout-max-response-len", "4",
            "--rollout-temperature", "1.0",
            "--num-rollout", "1",
            "--custom-rm-path", "slime.tasks.digits.reward",
            "--run-dir", str(tmp_path / "run"),
            *extra,
        ])
        args.engine_urls = [engine.url]
        args.hooks = {}
        for name, value in attrs.items():
            setattr(args, name, value)
        return args

    return make


def flat(groups):
    return [s for g in groups for s in g]


def nonzero_std(args, group):
    rewards = [s.get_reward_value(args) for s in group]
    return DynamicFilterOutput(keep=max(rewards) > min(rewards), reason="zero_std")


def test_rollout_groups_tokens_logprobs_rewards(make_args, engine, tokenizer):
    args = make_args()
    source = RolloutDataSource(args)
    out = generate_rollout(args, 0, source)

    assert isinstance(out, RolloutFnTrainOutput)
    groups = out.samples
    assert len(groups) == 4 and all(len(g) == 4 for g in groups)
    group_indices = [g[0].group_index for g in groups]
    assert group_indices == sorted(group_indices) and len(set(group_indices)) == 4
    for group in groups:
        assert {s.group_index for s in group} == {group[0].group_index}
        assert len({s.prompt for s in group}) == 1 and len({s.label for s in group}) == 1
    assert len({s.index for s in flat(groups)}) == 16

    with EngineClient(engine.url, timeout=120.0) as client:
        for s in flat(groups):
            prompt_ids = tokenizer.encode(s.prompt, add_special_tokens=False)
            n = s.response_length
            assert 1 <= n <= 4
            assert s.tokens[: len(s.tokens) - n] == prompt_ids  # tokens = prompt + response
            assert len(s.tokens) == len(prompt_ids) + n
            assert s.loss_mask == [1] * n
            assert len(s.rollout_log_probs) == n and all(lp <= 0 for lp in s.rollout_log_probs)
            assert s.response == tokenizer.decode(s.tokens[-n:], skip_special_tokens=True)
            assert s.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)
            if s.status == Sample.Status.COMPLETED:
                assert s.tokens[-1] == tokenizer.eos_token_id
            assert s.reward in (0.0, 1.0) and s.reward == digits.score(s.response, s.label)
            assert s.weight_version == "0" and s.weight_versions == ["0"]
            s.validate()
            # the rollout log-probs are the engine's own (rescored at the sampling temperature)
            scored = client.score(prompt_ids, s.tokens[-n:], temperature=1.0)
            assert all(abs(a - b) <= 1e-4 for a, b in zip(s.rollout_log_probs, scored.logprobs)), (
                s.rollout_log_probs, scored.logprobs)

    rewards = [s.reward for s in flat(groups)]
    m = out.metrics
    for key in ("rollout/reward_mean", "rollout/reward_std", "rollout/response_len/mean", "rollout/truncated_ratio",
                "rollout/dynamic_filter/dropped", "perf/rollout_time", "perf/rollout_tokens_per_sec",
                "rollout/sampled_groups"):
        assert key in m, key
    assert m["rollout/reward_mean"] == pytest.approx(statistics.fmean(rewards))
    assert m["rollout/reward_std"] == pytest.approx(statistics.pstdev(rewards))
    assert m["rollout/response_len/mean"] == pytest.approx(statistics.fmean(s.response_length for s in flat(groups)))
    assert m["rollout/dynamic_filter/dropped"] == 0 and m["rollout/sampled_groups"] == 4
    assert m["perf/rollout_time"] > 0 and m["perf/rollout_tokens_per_sec"] > 0
    # the data source moved on: the next rollout gets fresh groups
    assert source.sample_group_index == 4


def test_dynamic_filter_drops_zero_std_groups(make_args):
    args = make_args(batch=2, n=8, hooks={"dynamic_sampling_filter_path": nonzero_std})
    out = generate_rollout(args, 0, RolloutDataSource(args))
    assert len(out.samples) == 2
    for group in out.samples:
        rewards = [s.reward for s in group]
        assert max(rewards) == 1.0 and min(rewards) == 0.0
    m = out.metrics
    dropped = m.get("rollout/dynamic_filter/drop_zero_std", 0)
    assert m["rollout/dynamic_filter/dropped"] == dropped
    # every sampled group is accepted, dropped, finished after the batch was full, or cut short
    assert m["rollout/sampled_groups"] == (2 + dropped + m["rollout/surplus_groups"]
                                           + m["rollout/unfinished_groups"])
    assert m["rollout/reward_mean"] > 0


def test_filter_that_rejects_everything_fails_clearly(make_args):
    args = make_args(batch=1, n=2, hooks={"dynamic_sampling_filter_path": lambda args, group: False},
                     rollout_max_sampled_groups=3)
    with pytest.raises(RuntimeError, match="--dynamic-sampling-filter-path") as info:
        generate_rollout(args, 0, RolloutDataSource(args))
    assert "no group was accepted" in str(info.value) and "'filtered': 3" in str(info.value)


def test_an_engine_that_aborts_every_request_fails_the_rollout_with_its_reason(make_args):
    """An engine whose every step fails answers each request with an abort: the rollout stops after two batches'
    worth of aborted groups with the engine's reason, instead of sampling 16 batches (or, retried, forever)."""
    calls = []

    async def failing_engine(args, sample, sampling_params, evaluation=False):
        calls.append(sample.index)
        sample.update_from_meta_info({"finish_reason": {
            "type": "abort", "message": "RuntimeError: Expected all tensors to be on the same device"}})
        return sample

    args = make_args(batch=2, n=2, hooks={"--custom-generate-function-path": failing_engine})
    with pytest.raises(RuntimeError, match="aborted all of the first 4 groups") as info:
        generate_rollout(args, 0, RolloutDataSource(args))
    assert "Expected all tensors to be on the same device" in str(info.value)
    assert len(calls) <= 2 * 4 + 2 * 2  # what was in flight when the fourth aborted group came back


def test_hooks_by_dotted_path_custom_generate_and_running_loop(make_args):
    calls = []

    async def tagged_generate(args, sample, sampling_params, evaluation=False):
        from slime.rollout.default_rollout import generate

        calls.append(evaluation)
        sample.metadata["custom"] = True
        return await generate(args, sample, sampling_params)

    # no args.hooks entry for the RM: it is imported from --custom-rm-path
    args = make_args(batch=2, n=2, hooks={"--custom-generate-function-path": tagged_generate})

    async def from_inside_a_loop():  # generate_rollout is sync; it must work from a thread running a loop
        return generate_rollout(args, 0, RolloutDataSource(args))

    out = asyncio.run(from_inside_a_loop())
    assert calls == [False] * 4
    assert all(s.metadata["custom"] and s.reward in (0.0, 1.0) for s in flat(out.samples))


def test_partial_rollout_gives_unused_groups_back(make_args):
    args = make_args("--over-sampling-batch-size", "6", batch=2, n=2, partial_rollout=True)
    source = RolloutDataSource(args)
    out = generate_rollout(args, 5, source)
    assert len(out.samples) == 2
    assert source.get_buffer_length() == 4  # 6 pulled, 2 used
    served_next = source.get_samples(4)
    used = {g[0].group_index for g in out.samples}
    assert {g[0].group_index for g in served_next} == set(range(6)) - used
    # the next rollout resumes them: finished samples are not generated again
    done_before = {s.index: s.response for g in served_next for s in g if s.status != Sample.Status.PENDING}
    source.add_samples(served_next)
    args.rollout_batch_size = 4
    args.over_sampling_batch_size = 4
    out2 = generate_rollout(args, 6, source)
    assert {g[0].group_index for g in out2.samples} == set(range(6)) - used
    for s in flat(out2.samples):
        if s.index in done_before:
            assert s.response == done_before[s.index]


def test_round_robin_over_several_engine_urls(make_args, engine):
    args = make_args(batch=2, n=2)
    args.engine_urls = [engine.url, engine.url.replace("127.0.0.1", "localhost")]
    out = generate_rollout(args, 0, RolloutDataSource(args))
    assert len(flat(out.samples)) == 4


def test_eval_rollout(make_args, prompt_file, tmp_path):
    small = tmp_path / "eval.jsonl"
    small.write_text("".join(prompt_file.read_text().splitlines(keepends=True)[:6]))
    args = make_args("--eval-prompt-data", "digits", str(small), "--n-samples-per-eval-prompt", "2",
                     "--eval-temperature", "0.0")
    out = generate_rollout(args, 0, None, evaluation=True)
    assert isinstance(out, RolloutFnEvalOutput)
    data = out.data["digits"]
    assert len(data["rewards"]) == len(data["truncated"]) == len(data["samples"]) == 12
    assert set(data["rewards"]) <= {0.0, 1.0}
    # greedy: both samples of a prompt give the same answer
    samples = data["samples"]
    assert all(samples[i].response == samples[i + 1].response for i in range(0, 12, 2))
    assert out.metrics["eval/digits"] == pytest.approx(statistics.fmean(data["rewards"]))
    assert not math.isnan(out.metrics["eval/digits-truncated_ratio"])
