"""Trainer flags: defaults, derived values and every validation rule (the error names the flag)."""

from __future__ import annotations

import logging
import re

import pytest

from slime.utils.arguments import (
    DEFAULT_DATA_SOURCE,
    DEFAULT_ROLLOUT_FUNCTION,
    MEGATRON_UNAVAILABLE,
    ArgumentError,
    build_parser,
    parse_args,
    set_num_rollout_from_dataset,
    validate_args,
)

BASE = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3",
        "--disable-rollout-global-dataset"]


def parse(*extra, base=BASE, **kw):
    return parse_args([*base, *map(str, extra)], **kw)


def fails(*extra, match, base=BASE, **kw):
    with pytest.raises(ArgumentError, match=match):
        parse(*extra, base=base, **kw)


@pytest.fixture()
def prompts(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "hi", "label": "x"}\n' * 10)
    return path


# ------------------------------------------------------------------------------------------- defaults

def test_defaults():
    a = parse()
    expected = dict(
        train_backend="fsdp", actor_num_nodes=1, actor_num_gpus_per_node=1, rollout_num_gpus=None,
        rollout_num_gpus_per_engine=1, colocate=False, fsdp_strategy="auto", device="auto",
        ref_load="tiny", load=None, save=None, save_interval=None, seed=1234,
        rollout_external_engine_addrs=None, engine_threads=1, keep_weight_versions=2, extra_python_path=[],
        rollout_function_path=DEFAULT_ROLLOUT_FUNCTION, data_source_path=DEFAULT_DATA_SOURCE,
        custom_generate_function_path=None, custom_rm_path=None, dynamic_sampling_filter_path=None,
        custom_loss_function_path=None, custom_reward_post_process_path=None,
        eval_function_path=DEFAULT_ROLLOUT_FUNCTION,
        input_key="prompt", label_key="label", metadata_key="metadata", apply_chat_template=False,
        apply_chat_template_kwargs={}, rollout_shuffle=False, rollout_seed=42, rollout_global_dataset=False,
        n_samples_per_prompt=1, micro_batch_size=1, use_dynamic_batch_size=False, max_tokens_per_gpu=None,
        rollout_temperature=1.0, rollout_top_p=1.0, rollout_top_k=-1, rollout_stop=None,
        rollout_stop_token_ids=None, reward_key=None, over_sampling_batch_size=4, update_weights_interval=1,
        eval_interval=None, n_samples_per_eval_prompt=1, eval_temperature=1.0, eval_top_p=1.0,
        advantage_estimator="grpo", rewards_normalization=True, normalize_advantages=False, gamma=1.0,
        kl_coef=0.0, use_kl_loss=False, kl_loss_coef=0.0, kl_loss_type="k1", use_unbiased_kl=False,
        entropy_coef=0.0, eps_clip=0.2, eps_clip_high=0.2, eps_clip_c=None, loss_type="policy_loss",
        calculate_per_token_loss=False, compute_advantages_and_returns=True, distill_topk=None,
        distill_divergence="reverse",
        use_rollout_logprobs=False, use_tis=False, tis_clip=2.0, tis_clip_low=0.0,
        optimizer="adam", lr=1e-6, min_lr=0.0, lr_decay_style="constant", lr_warmup_iters=0,
        lr_warmup_fraction=None, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.98, adam_eps=1e-8,
        clip_grad=1.0, gradient_checkpointing=False, bf16=False, fp16=False,
        use_lora=False, lora_rank=16, lora_alpha=32, lora_dropout=0.0,
        lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        lora_modules_to_save=None, use_wandb=False, wandb_project="slime", wandb_group=None,
        wandb_mode="online", wandb_key=None, use_tensorboard=True, log_interval=1,
        prm_enable=False, prm_num_gpus=0, prm_model_path=None, ref_model_needed=False, ignored_flags=[],
        eval_datasets={}, num_rollout_per_epoch=None, tool_key=None, buffer_filter_path=None,
        custom_rollout_log_function_path=None,
    )
    for name, value in expected.items():
        assert getattr(a, name) == value, name


def test_global_dataset_is_on_by_default(prompts):
    a = parse("--prompt-data", prompts, base=["--hf-checkpoint", "tiny", "--rollout-batch-size", "2",
                                              "--num-rollout", "1"])
    assert a.rollout_global_dataset is True


def test_disable_switches_have_negated_mirrors():
    a = parse("--n-samples-per-prompt", 2)
    assert (a.disable_rewards_normalization, a.disable_grpo_std_normalization,
            a.disable_compute_advantages_and_returns, a.disable_rollout_global_dataset) == (False, False, False, True)
    a = parse("--n-samples-per-prompt", 2, "--disable-rewards-normalization", "--disable-grpo-std-normalization",
              "--disable-compute-advantages-and-returns")
    assert a.disable_rewards_normalization and a.disable_grpo_std_normalization
    assert a.disable_compute_advantages_and_returns and not a.compute_advantages_and_returns
    assert parse("--n-samples-per-prompt", 1).disable_grpo_std_normalization is True   # forced off for n=1


def test_grpo_std_normalization_default_on_with_several_samples():
    assert parse("--n-samples-per-prompt", 2).grpo_std_normalization is True
    assert parse("--n-samples-per-prompt", 2, "--disable-grpo-std-normalization").grpo_std_normalization is False


def test_dashes_become_underscores_for_every_flag():
    for action in build_parser()._actions:
        for option in action.option_strings:
            if (option.startswith("--") and option not in ("--help", "--target-modules")
                    and not option.startswith("--disable-")):
                assert action.dest == option[2:].replace("-", "_"), option


# ------------------------------------------------------------------------------------ syntax (argparse)

@pytest.mark.parametrize("argv", [
    ["--rollout-batch-size", "4", "--num-rollout", "1"],                        # --hf-checkpoint missing
    ["--hf-checkpoint", "tiny", "--num-rollout", "1"],                           # --rollout-batch-size missing
    [*BASE, "--no-such-flag"],
    [*BASE, "--train-backend", "deepspeed"],
    [*BASE, "--num-rollout", "1.5"],
    [*BASE, "--apply-chat-template-kwargs", "{not json"],
    [*BASE, "--apply-chat-template-kwargs", "[1, 2]"],
    [*BASE, "--advantage-estimator", "ppo"],
    [*BASE, "--rollout-batch", "4"],                                             # no abbreviations
])
def test_syntax_errors_exit(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_value_parsing():
    a = parse("--num-rollout", "1e8", "--apply-chat-template-kwargs", '{"enable_thinking": false}',
              "--rollout-stop", "</s>", "END", "--rollout-stop-token-ids", "1", "2",
              "--lora-modules-to-save", "lm_head, embed_tokens")
    assert a.num_rollout == 100_000_000
    assert a.apply_chat_template_kwargs == {"enable_thinking": False}
    assert a.rollout_stop == ["</s>", "END"] and a.rollout_stop_token_ids == [1, 2]
    assert a.lora_modules_to_save == ["lm_head", "embed_tokens"]


def test_argument_error_is_value_error():
    assert issubclass(ArgumentError, ValueError)


def test_validate_args_rejects_unknown_mode_and_world_size():
    a = build_parser().parse_args(BASE)
    with pytest.raises(ValueError, match="mode"):
        validate_args(a, mode="turbo")
    with pytest.raises(ValueError, match="world_size"):
        validate_args(a, world_size=0)


def test_validate_args_callable_separately_and_idempotent():
    a = build_parser().parse_args([*BASE, "--num-steps-per-rollout", "2"])
    assert validate_args(a) is a and a.global_batch_size == 2
    validate_args(a)
    assert a.global_batch_size == 2 and a.train_iters == 6


# ----------------------------------------------------------------------------------- backend / cluster

def test_megatron_backend_needs_megatron_core(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("megatron") else real_find_spec(name, *a))
    with pytest.raises(ArgumentError) as err:
        parse("--train-backend", "megatron")
    assert str(err.value) == MEGATRON_UNAVAILABLE
    assert "pip install 'slime[megatron]'" in MEGATRON_UNAVAILABLE


def test_megatron_parallel_flags():
    pytest.importorskip("megatron.core")
    a = parse("--train-backend", "megatron", "--tensor-model-parallel-size", 2, "--pipeline-model-parallel-size", 2,
              "--sequence-parallel", "--recompute-granularity", "full", "--recompute-method", "uniform",
              "--recompute-num-layers", 1, "--optimizer-cpu-offload", "--num-layers", 36, "--rotary-base", 1e6)
    assert (a.tensor_model_parallel_size, a.pipeline_model_parallel_size) == (2, 2) and a.use_distributed_optimizer
    assert a.ignored_flags == []   # all of these act on the megatron backend
    fails("--pipeline-model-parallel-size", 2, match="--pipeline-model-parallel-size 2 needs --train-backend megatron")
    fails("--context-parallel-size", 2, match="--context-parallel-size 2 needs --train-backend megatron")
    fails("--tensor-model-parallel-size", 0, match="--tensor-model-parallel-size must be >= 1")
    fails("--recompute-method", "uniform", match="--recompute-granularity full only")
    fails("--recompute-granularity", "full", match="--recompute-num-layers")


def test_lora_requires_fsdp():
    fails("--use-lora", "--train-backend", "megatron", match="--use-lora requires --train-backend fsdp")


def test_colocate_is_an_error_in_async_mode_only():
    fails("--colocate", match="--colocate", mode="async")
    a = parse("--colocate", "--actor-num-gpus-per-node", "2", mode="sync")
    assert a.colocate and a.rollout_num_gpus == 2
    assert parse("--colocate", mode="eval").colocate


def test_colocate_contradicts_external_engines():
    fails("--colocate", "--rollout-external-engine-addrs", "http://127.0.0.1:30000",
          match="--colocate and --rollout-external-engine-addrs")


def test_bf16_and_fp16_are_exclusive():
    fails("--bf16", "--fp16", match="--bf16 and --fp16")
    assert parse("--bf16").bf16


@pytest.mark.parametrize("flag", ["--rollout-batch-size", "--n-samples-per-prompt", "--micro-batch-size",
                                  "--update-weights-interval", "--engine-threads", "--keep-weight-versions",
                                  "--actor-num-gpus-per-node", "--num-steps-per-rollout", "--global-batch-size"])
def test_counts_must_be_positive(flag):
    fails(flag, 0, match=f"{flag} must be >= 1")


@pytest.mark.parametrize("flag", ["--num-rollout", "--lr", "--clip-grad", "--rollout-num-gpus"])
def test_quantities_must_not_be_negative(flag):
    fails(flag, -1, match=f"{flag} must be >= 0")


def test_rollout_gpus_multiple_of_gpus_per_engine():
    fails("--rollout-num-gpus", 3, "--rollout-num-gpus-per-engine", 2,
          match="--rollout-num-gpus 3 is not a multiple of --rollout-num-gpus-per-engine 2")
    assert parse("--rollout-num-gpus", 4, "--rollout-num-gpus-per-engine", 2).rollout_num_gpus == 4


# -------------------------------------------------------------------------------------- model / ckpt

def test_hf_checkpoint_must_be_a_folder_or_builtin(tmp_path):
    fails(base=["--hf-checkpoint", str(tmp_path / "missing"), "--rollout-batch-size", "1", "--num-rollout", "1",
                "--disable-rollout-global-dataset"], match="--hf-checkpoint")
    a = parse(base=["--hf-checkpoint", str(tmp_path), "--rollout-batch-size", "1", "--num-rollout", "1",
                    "--disable-rollout-global-dataset"])
    assert a.ref_load == str(tmp_path)
    assert parse(base=["--hf-checkpoint", "smollm2", *BASE[2:]]).hf_checkpoint == "smollm2"


def test_ref_load_must_exist_only_when_a_reference_model_is_needed(tmp_path):
    missing = str(tmp_path / "nope")
    fails("--ref-load", missing, "--use-kl-loss", "--kl-loss-coef", "0.01", match="--ref-load")
    assert parse("--ref-load", missing, "--use-kl-loss", "--kl-loss-coef", "0").ref_load == missing
    assert parse("--ref-load", str(tmp_path)).ref_load == str(tmp_path)


def test_load_must_be_a_directory(tmp_path):
    fails("--load", tmp_path / "missing", match="--load")
    assert parse("--load", tmp_path).load == str(tmp_path)


def test_save_interval_needs_save(tmp_path):
    fails("--save-interval", 2, match="--save-interval needs --save")
    assert parse("--save-interval", 2, "--save", tmp_path / "ckpt").save_interval == 2


def test_extra_python_path_must_exist(tmp_path):
    fails("--extra-python-path", tmp_path / "missing", match="--extra-python-path")
    a = parse("--extra-python-path", tmp_path, "--extra-python-path", tmp_path / ".")
    assert len(a.extra_python_path) == 2


# ------------------------------------------------------------------------------------------- batches

def test_global_batch_defaults_to_all_samples_of_a_rollout():
    a = parse("--n-samples-per-prompt", 8)
    assert a.global_batch_size == 32


def test_global_batch_from_num_steps_per_rollout():
    a = parse("--n-samples-per-prompt", 8, "--num-steps-per-rollout", 4)
    assert a.global_batch_size == 8
    assert parse("--n-samples-per-prompt", 8, "--num-steps-per-rollout", 4,
                 "--global-batch-size", 8).global_batch_size == 8


def test_num_steps_per_rollout_disagreeing_with_global_batch():
    fails("--n-samples-per-prompt", 8, "--num-steps-per-rollout", 4, "--global-batch-size", 16,
          match="--global-batch-size 16 disagrees with --num-steps-per-rollout 4")


def test_num_steps_per_rollout_must_divide_samples():
    fails("--n-samples-per-prompt", 2, "--num-steps-per-rollout", 3,
          match=r"--num-steps-per-rollout 3 does not divide --rollout-batch-size × --n-samples-per-prompt")


def test_global_batch_divisible_by_world_size():
    fails("--n-samples-per-prompt", 3, match=r"--global-batch-size 12 .* world size 8", world_size=8)
    with pytest.raises(ArgumentError, match="--actor-num-nodes × --actor-num-gpus-per-node"):
        parse("--global-batch-size", 6, world_size=4)
    assert parse("--n-samples-per-prompt", 2, world_size=4).global_batch_size == 8


def test_global_batch_not_dividing_a_rollout_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="slime.utils.arguments"):
        parse("--global-batch-size", 3)
    assert "--global-batch-size 3 does not divide" in caplog.text


def test_micro_batch_must_divide_the_per_rank_batch():
    fails("--micro-batch-size", 3, match="--micro-batch-size 3")
    assert parse("--micro-batch-size", 2, world_size=2).micro_batch_size == 2
    a = parse("--micro-batch-size", 3, "--use-dynamic-batch-size", "--max-tokens-per-gpu", 512)
    assert a.micro_batch_size == 3


def test_dynamic_batch_size_requires_max_tokens():
    fails("--use-dynamic-batch-size", match="--use-dynamic-batch-size requires --max-tokens-per-gpu")
    a = parse("--use-dynamic-batch-size", "--max-tokens-per-gpu", 4096)
    assert a.log_probs_max_tokens_per_gpu == 4096
    a = parse("--max-tokens-per-gpu", 4096, "--log-probs-max-tokens-per-gpu", 8192)
    assert a.log_probs_max_tokens_per_gpu == 8192


def test_over_sampling_batch_size():
    assert parse().over_sampling_batch_size == 4
    assert parse("--over-sampling-batch-size", 8).over_sampling_batch_size == 8
    fails("--over-sampling-batch-size", 2, match="--over-sampling-batch-size 2 must be >= --rollout-batch-size 4")


# ---------------------------------------------------------------------------------- rollout count, data

def test_num_rollout_or_num_epoch_required(prompts):
    fails(base=["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--disable-rollout-global-dataset"],
          match="--num-rollout .* --num-epoch")


def test_num_epoch_needs_the_global_dataset():
    fails("--num-epoch", 1, match="--num-epoch needs the global dataset.*--disable-rollout-global-dataset")


def test_prompt_data_required_with_global_dataset_and_default_data_source(prompts, tmp_path):
    on = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "1"]
    fails(base=on, match="--prompt-data is required")
    fails("--prompt-data", tmp_path / "missing.jsonl", base=on, match="--prompt-data file")
    assert parse("--prompt-data", prompts, base=on).prompt_data == str(prompts)
    assert parse("--prompt-data", f"{prompts}@[0:5]", base=on).prompt_data.endswith("@[0:5]")
    # a custom data source brings its own data
    assert parse("--data-source-path", "my_source.Source", base=on).prompt_data is None


def test_max_prompt_len_defaults_to_context_minus_one():
    assert parse().rollout_max_prompt_len is None
    a = parse("--rollout-max-context-len", 2048)
    assert a.rollout_max_prompt_len == 2047 and a.eval_max_context_len == 2048
    assert parse("--rollout-max-context-len", 2048, "--rollout-max-prompt-len", 100).rollout_max_prompt_len == 100


def test_response_len_within_context():
    fails("--rollout-max-context-len", 100, "--rollout-max-response-len", 200,
          match="--rollout-max-response-len 200 exceeds --rollout-max-context-len 100")


def test_top_p_range():
    fails("--rollout-top-p", 0, match="--rollout-top-p")
    fails("--rollout-top-p", 1.5, match="--rollout-top-p")


def test_train_iters_as_upstream():
    a = parse("--n-samples-per-prompt", 8, "--num-steps-per-rollout", 2, "--num-rollout", 10)
    assert a.train_iters == 10 * 4 * 8 // 16 == 20
    assert a.lr_decay_iters == 20
    assert parse("--lr-decay-iters", 7).lr_decay_iters == 7


def test_num_epoch_fills_num_rollout_once_the_dataset_is_known(prompts):
    a = parse("--num-epoch", 2, "--prompt-data", prompts,
              base=["--hf-checkpoint", "tiny", "--rollout-batch-size", "3"])
    assert a.num_rollout is None and a.train_iters is None and a.lr_decay_iters is None
    set_num_rollout_from_dataset(a, 10)
    assert (a.num_rollout_per_epoch, a.num_rollout, a.train_iters, a.lr_decay_iters) == (3, 6, 6, 6)
    with pytest.raises(ArgumentError, match="--rollout-batch-size 3"):
        set_num_rollout_from_dataset(a, 2)


# ------------------------------------------------------------------------------------------ engines

def test_external_engine_addrs_are_normalised():
    a = parse("--rollout-external-engine-addrs", "http://127.0.0.1:30000/", "https://gpu-node-3:8443")
    assert a.rollout_external_engine_addrs == ["http://127.0.0.1:30000", "https://gpu-node-3:8443"]


@pytest.mark.parametrize("url", ["127.0.0.1:30000", "ftp://host:21", "http://host", "http://host:port",
                                 "http://host:30000/generate", "http://:30000", "http://host:30000?x=1"])
def test_external_engine_addrs_must_look_like_urls(url):
    fails("--rollout-external-engine-addrs", url, match="--rollout-external-engine-addrs entry")


def test_external_engine_addrs_no_duplicates():
    fails("--rollout-external-engine-addrs", "http://a:1", "http://a:1/", match="--rollout-external-engine-addrs lists")


def test_output_dirs(tmp_path):
    a = parse()
    assert re.fullmatch(r"runs/\d{8}-\d{6}", a.run_dir)
    assert a.tb_dir == f"{a.run_dir}/tensorboard" and a.wandb_dir == f"{a.run_dir}/wandb"
    assert a.update_weight_disk_dir == f"{a.run_dir}/weights"
    a = parse("--save", tmp_path / "ckpt", "--run-dir", tmp_path / "run")
    assert a.update_weight_disk_dir == f"{tmp_path}/ckpt/weights"
    assert a.tb_dir == f"{tmp_path}/run/tensorboard"
    assert parse("--update-weight-disk-dir", tmp_path / "w").update_weight_disk_dir == str(tmp_path / "w")


def test_tensorboard_is_always_on():
    assert parse().use_tensorboard is True
    assert parse("--use-tensorboard").use_tensorboard is True


# ---------------------------------------------------------------------------------------- algorithm

def test_eps_clip_high_defaults_to_eps_clip():
    assert parse("--eps-clip", 0.3).eps_clip_high == 0.3
    a = parse("--eps-clip", 0.2, "--eps-clip-high", 0.28)
    assert (a.eps_clip, a.eps_clip_high) == (0.2, 0.28)


def test_eps_clip_c_must_exceed_one():
    fails("--eps-clip-c", 1.0, match="--eps-clip-c")
    fails("--eps-clip-c", 0.5, match="--eps-clip-c")
    assert parse("--eps-clip-c", 3).eps_clip_c == 3


def test_kl_coef_and_kl_loss_are_exclusive():
    fails("--advantage-estimator", "reinforce_plus_plus", "--normalize-advantages", "--kl-coef", 0.1,
          "--use-kl-loss", match="--kl-coef .* and --use-kl-loss")


def test_kl_loss_coef_needs_use_kl_loss():
    fails("--kl-loss-coef", 0.01, match="--kl-loss-coef 0.01 has no effect without --use-kl-loss")


def test_distill_head_positions_default_to_every_token_and_refuse_a_negative_count():
    assert parse().distill_head_positions == 0
    assert parse("--distill-head-positions", 4).distill_head_positions == 4
    fails("--distill-head-positions", -1, match="--distill-head-positions must be >= 0")


def test_distill_divergent_positions_default_off_refuse_a_negative_count_and_a_head_beside_them():
    assert parse().distill_divergent_positions == 0
    assert parse("--distill-divergent-positions", 4).distill_divergent_positions == 4
    fails("--distill-divergent-positions", -1, match="--distill-divergent-positions must be >= 0")
    fails("--distill-divergent-positions", 4, "--distill-head-positions", 4, match="give one")


def test_kl_loss_topk_needs_a_kl_loss_and_the_fsdp_backend():
    args = parse("--use-kl-loss", "--kl-loss-coef", 0.05, "--kl-loss-topk", 20)
    assert args.kl_loss_topk == 20 and args.ref_model_needed
    assert parse().kl_loss_topk == 0  # default: the sampled-token estimate
    fails("--kl-loss-topk", 20, match="--kl-loss-topk .* needs --use-kl-loss and a non-zero --kl-loss-coef")
    fails("--use-kl-loss", "--kl-loss-topk", 20, match="non-zero --kl-loss-coef")
    fails("--use-kl-loss", "--kl-loss-coef", 0.05, "--kl-loss-topk", -1, match="--kl-loss-topk must be >= 0")
    fails("--use-kl-loss", "--kl-loss-coef", 0.05, "--kl-loss-topk", 20, "--use-unbiased-kl",
          match="--use-unbiased-kl reweights the sampled-token KL")
    fails("--use-kl-loss", "--kl-loss-coef", 0.05, "--kl-loss-topk", 20, "--train-backend", "megatron",
          match="--kl-loss-topk needs --train-backend fsdp|megatron-core")


def test_kl_coef_only_for_reinforce_plus_plus():
    fails("--kl-coef", 0.1, match="--kl-coef shapes rewards only")


def test_reinforce_plus_plus_requires_normalize_advantages():
    fails("--advantage-estimator", "reinforce_plus_plus_baseline",
          match="--advantage-estimator reinforce_plus_plus_baseline requires --normalize-advantages")


@pytest.mark.parametrize("flags, needed", [
    ([], False),
    (["--use-kl-loss"], False),                                   # OpenClaw: coefficient 0 -> no ref model
    (["--use-kl-loss", "--kl-loss-coef", "0.0"], False),
    (["--use-kl-loss", "--kl-loss-coef", "0.01"], True),
    (["--advantage-estimator", "reinforce_plus_plus", "--normalize-advantages", "--kl-coef", "0.05"], True),
])
def test_ref_model_needed(flags, needed):
    assert parse(*flags).ref_model_needed is needed


def test_kl_loss_with_zero_coefficient_is_logged(caplog):
    with caplog.at_level(logging.INFO, logger="slime.utils.arguments"):
        parse("--use-kl-loss")
    assert "not computed" in caplog.text


def test_custom_loss_needs_its_function_and_vice_versa():
    fails("--loss-type", "custom_loss", match="--loss-type custom_loss requires --custom-loss-function-path")
    fails("--custom-loss-function-path", "m.loss", match="--custom-loss-function-path is only used with --loss-type")
    a = parse("--loss-type", "custom_loss", "--custom-loss-function-path", "m.loss")
    assert a.custom_loss_function_path == "m.loss"


def test_rollout_logprobs_and_tis_are_exclusive():
    fails("--use-rollout-logprobs", "--use-tis", match="--use-rollout-logprobs and --use-tis")


def test_tis_clip_bounds():
    fails("--use-tis", "--tis-clip", 1.0, "--tis-clip-low", 1.0, match="--tis-clip-low")
    assert parse("--use-tis", "--tis-clip-low", 0.5).tis_clip == 2.0


def test_tis_clip_low_is_not_negative():
    fails("--use-tis", "--tis-clip-low", -0.5, match="--tis-clip-low must be >= 0")
    assert parse("--tis-clip-low", -0.5).tis_clip_low == -0.5  # inert without --use-tis


def test_tis_needs_a_policy_loss_with_recomputed_old_log_probs():
    fails("--use-tis", "--loss-type", "sft_loss", match="--use-tis reweights the policy-gradient loss")
    fails("--use-tis", "--disable-compute-advantages-and-returns",
          match="--use-tis .* not with --disable-compute-advantages-and-returns")


def test_tis_flags_say_what_they_do():
    helps = {a.dest: a.help or "" for a in build_parser()._actions}
    assert "clamp(exp(old_log_probs - rollout_log_probs), --tis-clip-low, --tis-clip)" in helps["use_tis"]
    assert "upper bound" in helps["tis_clip"] and "lower bound" in helps["tis_clip_low"]


def test_one_sample_per_prompt_turns_std_off_and_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="slime.utils.arguments"):
        a = parse("--n-samples-per-prompt", 1)
    assert a.grpo_std_normalization is False
    assert "advantages will be zero unless --disable-rewards-normalization" in caplog.text


def test_one_sample_per_prompt_without_normalisation_is_quiet(caplog):
    with caplog.at_level(logging.WARNING, logger="slime.utils.arguments"):
        a = parse("--n-samples-per-prompt", 1, "--disable-rewards-normalization")
    assert a.grpo_std_normalization is False and a.rewards_normalization is False
    assert "advantages will be zero" not in caplog.text


def test_openclaw_flags_parse():
    a = parse("--advantage-estimator", "on_policy_distillation", "--loss-type", "custom_loss",
              "--custom-loss-function-path", "topk_distillation_loss.topk_distillation_loss_function",
              "--distill-topk", 16, "--disable-compute-advantages-and-returns", "--use-kl-loss",
              "--kl-loss-coef", "0.0", "--kl-loss-type", "low_var_kl", "--eps-clip-high", 0.28,
              "--disable-rewards-normalization", "--calculate-per-token-loss")
    assert a.distill_topk == 16 and a.compute_advantages_and_returns is False and a.ref_model_needed is False


def test_teacher_demonstrations_need_a_hinted_teacher():
    assert parse("--conversation-method", "combine", "--teacher-demonstrations", 1).teacher_demonstrations == 1
    assert parse().teacher_demonstrations == 0
    fails("--teacher-demonstrations", 1, match="needs a method that uses hints")
    fails("--conversation-method", "rl", "--teacher-demonstrations", 1, match="method rl does not")
    fails("--conversation-method", "opd", "--teacher-demonstrations", -1, match=">= 0")
    assert parse("--conversation-method", "opd", "--teacher-demonstrations", 1,
                 "--teacher-demonstration-candidates", 4).teacher_demonstration_candidates == 4
    fails("--conversation-method", "opd", "--teacher-demonstrations", 2, "--teacher-demonstration-candidates", 1,
          match="fewer than")
    assert parse("--conversation-method", "opd", "--teacher-demonstrations", 1,
                 "--teacher-demonstration-tokens", 16).teacher_demonstration_tokens == 16
    assert parse().teacher_demonstration_tokens is None
    fails("--conversation-method", "opd", "--teacher-demonstrations", 1, "--teacher-demonstration-tokens", 0,
          match="demonstration-tokens")


def test_distill_divergence_is_reverse_or_forward():
    assert parse("--distill-divergence", "forward").distill_divergence == "forward"
    with pytest.raises(SystemExit):
        parse("--distill-divergence", "js")


# ---------------------------------------------------------------------------------------- optimizer

def test_min_lr_not_above_lr():
    fails("--lr", 1e-6, "--min-lr", 1e-5, match="--min-lr")


def test_warmup_fraction():
    fails("--lr-warmup-fraction", 1.5, match="--lr-warmup-fraction must be in")
    fails("--lr-warmup-fraction", 0.1, "--lr-warmup-iters", 5,
          match="--lr-warmup-fraction and --lr-warmup-iters are mutually exclusive")
    assert parse("--lr-warmup-fraction", 0.1, "--lr-decay-style", "cosine").lr_warmup_fraction == 0.1


def test_adam_betas_range():
    fails("--adam-beta2", 1.0, match="--adam-beta2")


# --------------------------------------------------------------------------------------------- LoRA

def test_lora_flags_and_alias():
    a = parse("--use-lora", "--lora-rank", 8, "--lora-alpha", 16, "--target-modules", "q_proj, v_proj")
    assert (a.lora_rank, a.lora_alpha, a.lora_target_modules) == (8, 16, ["q_proj", "v_proj"])
    assert parse("--lora-target-modules", "all-linear").lora_target_modules == ["all-linear"]


def test_lora_validation():
    fails("--use-lora", "--lora-target-modules", ",", match="--lora-target-modules is empty")
    fails("--use-lora", "--lora-dropout", 1.0, match="--lora-dropout")
    fails("--use-lora", "--lora-rank", 0, match="--lora-rank")
    fails("--use-lora", "--lora-top-layers", -1, match="--lora-top-layers")
    assert parse("--use-lora", "--lora-top-layers", 8).lora_top_layers == 8


# --------------------------------------------------------------------------------------------- eval

def test_eval_defaults_follow_rollout():
    a = parse("--rollout-temperature", 0.6, "--rollout-top-p", 0.9, "--rollout-max-response-len", 256,
              "--reward-key", "score")
    assert (a.eval_temperature, a.eval_top_p, a.eval_max_response_len, a.eval_reward_key) == (0.6, 0.9, 256, "score")
    a = parse("--eval-temperature", 0.0, "--eval-reward-key", "acc", "--reward-key", "score")
    assert (a.eval_temperature, a.eval_reward_key) == (0.0, "acc")


def test_eval_prompt_data_pairs(prompts, tmp_path):
    a = parse("--eval-interval", 5, "--eval-prompt-data", "aime", prompts, "gsm8k", f"{prompts}@[0:3]")
    assert a.eval_datasets == {"aime": str(prompts), "gsm8k": f"{prompts}@[0:3]"}
    fails("--eval-prompt-data", "aime", match="--eval-prompt-data takes NAME PATH pairs")
    fails("--eval-prompt-data", "a", prompts, "a", prompts, match="--eval-prompt-data names 'a' twice")
    fails("--eval-prompt-data", "a", tmp_path / "missing", match="--eval-prompt-data a: file")


def test_eval_interval_needs_data_unless_custom_eval_function():
    fails("--eval-interval", 5, match="--eval-interval .* --eval-prompt-data")
    assert parse("--eval-interval", 5, "--eval-function-path", "m.evaluate").eval_interval == 5
    assert parse("--rollout-function-path", "m.rollout").eval_function_path == "m.rollout"


# ---------------------------------------------------------------------------------------------- PRM

def test_prm_defaults():
    assert parse("--prm-num-gpus", 4).prm_num_gpus == 0            # no engines without --prm-enable
    a = parse("--prm-enable", "--prm-num-gpus", 2, "--prm-m", 3)
    assert (a.prm_num_gpus, a.prm_model_path, a.prm_m) == (2, "tiny", 3)
    fails("--prm-enable", "--prm-num-gpus", 3, "--prm-num-gpus-per-engine", 2, match="--prm-num-gpus 3")


# ------------------------------------------------------------------------------- accepted and ignored

def test_megatron_knobs_are_accepted_and_reported(caplog):
    with caplog.at_level(logging.INFO, logger="slime.utils.arguments"):
        a = parse("--tensor-model-parallel-size", 2, "--sequence-parallel", "--pipeline-model-parallel-size", 1,
                  "--context-parallel-size", 1, "--recompute-granularity", "full", "--recompute-method", "uniform",
                  "--recompute-num-layers", 1, "--attention-dropout", 0.0, "--hidden-dropout", 0.0,
                  "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32", "--attention-backend",
                  "flash", "--log-probs-chunk-size", 1024, "--balance-data", "--megatron-to-hf-mode", "bridge",
                  "--rotary-base", 5000000, "--expert-model-parallel-size", 1, "--optimizer-cpu-offload")
    assert a.tensor_model_parallel_size == 2 and a.recompute_granularity == "full"
    assert "--sequence-parallel" in a.ignored_flags and "--balance-data" in a.ignored_flags
    assert "--rotary-base" in a.ignored_flags and "--optimizer-cpu-offload" in a.ignored_flags  # megatron-only
    assert "--tensor-model-parallel-size" not in a.ignored_flags   # real on the fsdp backend too (DTensor TP)
    assert "--pipeline-model-parallel-size" not in a.ignored_flags   # default value: nothing to report
    assert "without effect on the fsdp backend" in caplog.text


def test_constant_groups_drop_all_is_for_grpo_and_gspo_groups():
    assert parse("--constant-groups", "drop-all").constant_groups == "drop-all"
    assert parse("--constant-groups", "drop-all", "--advantage-estimator", "gspo").constant_groups == "drop-all"
    fails("--constant-groups", "drop-all", "--advantage-estimator", "step_wise", match="drop-all drops GRPO/GSPO")
