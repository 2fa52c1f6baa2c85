"""Upstream slime's import paths and call shapes that ported OpenClaw-RL method folders use (PORTING.md)."""

from __future__ import annotations

import asyncio
from argparse import Namespace

import pytest
import torch
from helpers.recording_server import RecordingServer

from slime.rollout.base_types import RolloutFnEvalOutput, RolloutFnTrainOutput
from slime.rollout.sglang_rollout import GenerateState, generate_rollout
from slime.training.engines import EngineGroup, set_router_addresses
from slime.utils.async_utils import run
from slime.utils.hooks import HookError
from slime.utils.http_utils import post
from slime.utils.misc import SingletonMeta, load_function
from slime.utils.types import Sample


def test_upstream_import_paths_name_this_projects_objects():
    from slime.rollout import default_rollout
    from slime.utils import types

    assert RolloutFnTrainOutput is types.RolloutFnTrainOutput and RolloutFnEvalOutput is types.RolloutFnEvalOutput
    assert generate_rollout is default_rollout.generate_rollout
    assert load_function("slime.tasks.digits.reward") is __import__("slime.tasks.digits", fromlist=["x"]).reward
    with pytest.raises(HookError, match="no attribute 'rewrad'"):
        load_function("slime.tasks.digits.rewrad")


def test_generate_state_is_one_per_process_with_a_semaphore_per_event_loop():
    SingletonMeta.clear_all_instances()
    args = Namespace(hf_checkpoint="tiny", sglang_server_concurrency=3, engine_urls=["http://e:1", "http://e:2"],
                     rollout_temperature=0.5, rollout_max_response_len=7)
    try:
        state = GenerateState(args)
        assert GenerateState(Namespace()) is state and state.processor is None  # a text model has no processor
        assert state.tokenizer.encode("hi") and state.sampling_params["max_new_tokens"] == 7
        assert state.sampling_params["temperature"] == 0.5 and state.concurrency == 6

        async def hold():
            async with state.semaphore:
                return state.semaphore

        first, second = run(hold()), run(hold())  # two rollouts, two loops: no "bound to a different loop"
        assert first is not second and first._value == 6
    finally:
        SingletonMeta.clear_all_instances()


def test_post_sends_json_and_raises_on_http_errors():
    with RecordingServer({"/generate": lambda body: (200, {"text": body["input_ids"][::-1]}),
                          "/bad": (400, {"detail": "no"})}) as server:
        assert run(post(server.url + "/generate", {"input_ids": [1, 2]})) == {"text": [2, 1]}
        assert run(post(server.url + "/generate", json={"input_ids": [3]})) == {"text": [3]}
        with pytest.raises(RuntimeError, match="HTTP 400"):
            run(post(server.url + "/bad", {}))


def test_update_from_meta_info_takes_upstreams_args_first_shape_and_counts_the_prefix_cache():
    sample = Sample()
    sample.update_from_meta_info(Namespace(), {"finish_reason": {"type": "stop"}, "weight_version": "4",
                                               "cached_tokens": 3, "prompt_tokens": 8})
    sample.update_from_meta_info({"finish_reason": {"type": "length"}, "prompt_tokens": 2})
    assert sample.status == Sample.Status.TRUNCATED and sample.weight_version == "4"
    assert (sample.prefix_cache_info.cached_tokens, sample.prefix_cache_info.total_prompt_tokens) == (3, 10)
    sample.session_id, sample.non_generation_time, sample.rollout_id = "s", 1.5, 7
    back = Sample.from_dict(sample.to_dict())
    assert back.prefix_cache_info == sample.prefix_cache_info and (back.session_id, back.rollout_id) == ("s", 7)


def test_the_router_address_is_set_from_the_engines():
    args = Namespace()
    set_router_addresses(args, EngineGroup("embedded", [], ["http://127.0.0.1:4000", "http://127.0.0.1:4001"], None),
                         EngineGroup("sglang", [], ["http://10.0.0.2:5000"], None))
    assert (args.sglang_router_ip, args.sglang_router_port) == ("127.0.0.1", 4000)
    assert (args.prm_router_ip, args.prm_router_port) == ("10.0.0.2", 5000)


def test_upstreams_rollout_flags_are_accepted_with_their_meaning():
    from slime.utils.arguments import ArgumentError, parse_args

    base = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3",
            "--disable-rollout-global-dataset"]
    args = parse_args(base + ["--group-rm", "--partial-rollout", "--mask-offpolicy-in-partial-rollout",
                              "--rollout-sample-filter-path", "slime.rollout.filter_hub.check_reward_nonzero_std"])
    # the names the default rollout reads (slime/rollout/default_rollout.py)
    assert args.group_rm and args.partial_rollout and args.mask_offpolicy_in_partial_rollout
    assert args.rollout_sample_filter_path.endswith("check_reward_nonzero_std")
    with pytest.raises(ArgumentError, match="give --partial-rollout too"):
        parse_args(base + ["--mask-offpolicy-in-partial-rollout"])


PLUGIN = '''
def add_custom_arguments(parser):
    parser.add_argument("--my-bonus", type=float, default=0.5)
    return parser


async def reward(args, sample):
    return args.my_bonus
'''


def test_a_plugin_declares_its_own_flags_and_reads_a_custom_config(tmp_path):
    from slime.utils.arguments import ArgumentError, parse_args

    folder = tmp_path / "my-method"
    folder.mkdir()
    (folder / "my_plugin_rm.py").write_text(PLUGIN)
    base = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3",
            "--disable-rollout-global-dataset", "--extra-python-path", str(folder),
            "--custom-rm-path", "my_plugin_rm.reward"]
    assert parse_args(base).my_bonus == 0.5
    assert parse_args(base + ["--my-bonus", "2"]).my_bonus == 2.0
    config = tmp_path / "custom.yaml"
    config.write_text("judge-prompt: be strict\nmy_bonus: 3\nlr: 0.5\n")
    args = parse_args(base + ["--custom-config-path", str(config)])
    assert (args.judge_prompt, args.my_bonus, args.lr) == ("be strict", 3, 0.5)
    with pytest.raises(SystemExit):  # without the plugin the flag is unknown
        parse_args(base[:-2] + ["--my-bonus", "2"])
    config.write_text("- a list\n")
    with pytest.raises(ArgumentError, match="must hold a mapping"):
        parse_args(base + ["--custom-config-path", str(config)])
    with pytest.raises(ArgumentError, match="does not exist"):
        parse_args(base + ["--custom-config-path", str(tmp_path / "missing.yaml")])


def _loss_batch(seed: int):
    """A response-aligned loss batch as the trainer builds it: 3 rows, ragged responses, padding masked."""
    g = torch.Generator().manual_seed(seed)
    lengths, width, vocab = [4, 2, 3], 4, 11
    mask = torch.zeros(3, width)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    batch = {"loss_mask": mask, "tokens": torch.randint(0, vocab, (3, width), generator=g),
             "advantages": torch.randn(3, 1, generator=g).expand(3, width) * mask,
             "old_log_probs": -torch.rand(3, width, generator=g) * mask,
             "ref_log_probs": -torch.rand(3, width, generator=g) * mask,
             "response_lengths": lengths, "total_lengths": [n + 5 for n in lengths]}
    return batch, torch.randn(3, width, vocab, generator=g)


@pytest.mark.parametrize("per_token", [False, True], ids=["sample-mean", "per-token"])
def test_a_loss_in_upstreams_batch_layout_equals_the_built_in_one(per_token):
    """The same PPO loss, upstream's way through `--custom-loss-batch-layout upstream` and this trainer's built-in
    policy loss: equal loss, equal gradients on the logits (padding and masks included)."""
    from types import SimpleNamespace

    from helpers.upstream_loss import combined_policy_loss

    from slime.backends.fsdp.batching import reducer
    from slime.backends.upstream_batch import upstream_layout
    from slime.utils.loss import policy_loss_function

    args = SimpleNamespace(eps_clip=0.2, eps_clip_high=0.28, eps_clip_c=None, use_rollout_logprobs=False,
                           use_kl_loss=True, kl_loss_coef=0.01, kl_loss_type="low_var_kl", use_unbiased_kl=False,
                           entropy_coef=0.0, advantage_estimator="grpo", use_tis=False, rollout_temperature=1.0)
    results = []
    for loss_fn in (upstream_layout(combined_policy_loss), policy_loss_function):
        batch, logits = _loss_batch(3)
        logits.requires_grad_(True)
        loss, metrics = loss_fn(args, batch, logits, reducer(batch, per_token))
        loss.backward()
        results.append((loss.detach(), logits.grad, metrics))
    (up_loss, up_grad, up_metrics), (loss, grad, metrics) = results
    assert torch.allclose(up_loss, loss, atol=1e-6) and torch.allclose(up_grad, grad, atol=1e-6)
    assert float(up_metrics["upstream_layout_samples"]) == 3
    assert torch.allclose(up_metrics["kl_loss"], torch.as_tensor(metrics["kl_loss"]), atol=1e-6)
