"""Command-line flags of the trainer, with slime's names, defaults and validation.

`parse_args()` builds the parser, parses and validates. Syntax problems (unknown flag, missing required
flag, bad choice) are reported by argparse as usual (usage + exit 2); problems with the *combination* of
values raise `ArgumentError`, whose message names the flag(s) involved. `validate_args()` can be called by
itself (e.g. by a torchrun rank that knows its data-parallel world size).

Derived values set by validation (beyond filling defaults that depend on other flags):
`global_batch_size`, `ref_model_needed`, `train_iters` (None while `--num-epoch` decides the number of
rollouts; `set_num_rollout_from_dataset` fills it once the dataset size is known), `num_rollout_per_epoch`,
`eval_datasets` (name -> path), `ignored_flags` (accepted-and-ignored flags that were given a value) and
`disable_*` mirrors of the `--disable-*` switches (`disable_rewards_normalization == not rewards_normalization`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

DEFAULT_ROLLOUT_FUNCTION = "slime.rollout.default_rollout.generate_rollout"
DEFAULT_DATA_SOURCE = "slime.rollout.data_source.RolloutDataSource"
CONVERSATION_DATA_SOURCE = "slime.conversation.rollout.ConversationDataSource"
DEFAULT_LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
BUILTIN_MODEL_NAMES = ("tiny", "smollm2")  # see slime.models.registry.resolve_model_path
MEGATRON_UNAVAILABLE = ("--train-backend megatron needs megatron-core, which is not installed: "
                        "pip install 'slime[megatron]' (pins megatron-core==0.16.1), or use --train-backend fsdp")

# Megatron/SGLang knobs that OpenClaw scripts pass and neither backend acts on: accepted so the scripts
# parse. dest -> default (a value different from the default is reported once).
IGNORED_ON_FSDP = {
    "expert_model_parallel_size": 1,
    "expert_tensor_parallel_size": None,
    "attention_dropout": None,  # dropout is always 0 (RL fine-tuning)
    "hidden_dropout": None,
    "attention_softmax_in_fp32": False,  # the megatron backend always computes softmax in fp32
    "attention_backend": None,
    "log_probs_chunk_size": None,
    "balance_data": False,
    "megatron_to_hf_mode": None,  # conversion is always slime.backends.megatron.convert
}
# Flags the megatron backend acts on and the fsdp backend does not (reported as ignored there).
# --tensor-model-parallel-size is real on both backends.
MEGATRON_ONLY = {
    "sequence_parallel": False,
    "recompute_granularity": None,
    "recompute_method": None,
    "recompute_num_layers": None,
    "accumulate_allreduce_grads_in_fp32": False,
    "optimizer_cpu_offload": False,
    "overlap_cpu_optimizer_d2h_h2d": False,
    "use_precision_aware_optimizer": False,
    "transformer_impl": None,
    # MODEL_ARGS: checked against the HF config by the megatron backend
    "num_layers": None, "hidden_size": None, "ffn_hidden_size": None, "num_attention_heads": None,
    "num_query_groups": None, "kv_channels": None, "vocab_size": None, "rotary_base": None, "norm_epsilon": None,
    "qk_layernorm": False, "untie_embeddings_and_output_weights": False,
}


class ArgumentError(ValueError):
    """An invalid combination of flag values; the message names the flag(s)."""


# ------------------------------------------------------------------------------------------------ types

def _count(text: str) -> int:
    """An integer that may be written in float notation (OpenClaw passes `--num-rollout 1e8`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value != int(value):
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(value)


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


# ----------------------------------------------------------------------------------------------- parser

class TrainerArgumentParser(argparse.ArgumentParser):
    """Records which flags were given (`explicit_flags`, a set of dests): a conversation method's settings
    fill only what the user left unset."""

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        namespace, rest = super().parse_known_args(argv, namespace)
        given = set()
        for token in argv:
            if token == "--":
                break
            action = self._option_string_actions.get(token.split("=", 1)[0]) if token.startswith("-") else None
            if action is not None:
                given.add(action.dest)
        namespace.explicit_flags = given
        return namespace, rest


def build_parser() -> argparse.ArgumentParser:
    p = TrainerArgumentParser(
        prog="slime", description="slime trainer flags (fsdp backend)", allow_abbrev=False)
    _add_cluster_flags(p.add_argument_group("cluster / backend"))
    _add_checkpoint_flags(p.add_argument_group("checkpoint / model"))
    _add_engine_flags(p.add_argument_group("inference engines"))
    _add_rollout_flags(p.add_argument_group("rollout / data"))
    _add_eval_flags(p.add_argument_group("evaluation"))
    _add_algorithm_flags(p.add_argument_group("algorithm / loss"))
    _add_optimizer_flags(p.add_argument_group("optimizer"))
    _add_lora_flags(p.add_argument_group("LoRA (fsdp backend)"))
    _add_prm_flags(p.add_argument_group("PRM / judge engines (OpenClaw)"))
    _add_conversation_flags(p.add_argument_group("conversation proxy, method and judges (OpenClaw)"))
    _add_logging_flags(p.add_argument_group("logging"))
    _add_parallel_flags(p.add_argument_group(
        "model parallelism and memory (Megatron flags)",
        "--tensor-model-parallel-size works on both backends; the rest needs --train-backend megatron."))
    add_megatron_model_flags(p.add_argument_group(
        "MODEL_ARGS (megatron backend)",
        "Architecture flags of Megatron-LM/scripts/models/*.sh; the model is built from --hf-checkpoint's config "
        "and these must agree with it."))
    _add_ignored_flags(p.add_argument_group(
        "accepted for compatibility, no effect",
        "Megatron/SGLang knobs used by the OpenClaw scripts that neither backend acts on; parsed and ignored."))
    return p


def _add_cluster_flags(g):
    g.add_argument("--train-backend", choices=["fsdp", "megatron"], default="fsdp")
    g.add_argument("--actor-num-nodes", type=int, default=1, help="nodes running training ranks")
    g.add_argument("--actor-num-gpus-per-node", type=int, default=1,
                   help="training ranks per node (GPUs, or processes on CPU)")
    g.add_argument("--rollout-num-gpus", type=int, default=None,
                   help="GPUs for the policy engines (default: one embedded engine)")
    g.add_argument("--rollout-num-gpus-per-engine", type=int, default=1, help="GPUs per engine")
    g.add_argument("--num-gpus-per-node", type=int, default=8, help="GPUs per node (engine packing)")
    g.add_argument("--colocate", action="store_true",
                   help="engines share the training GPUs (synchronous train.py only)")
    g.add_argument("--fsdp-strategy", choices=["auto", "fsdp", "ddp"], default="auto",
                   help="data-parallel wrapper; auto picks DDP for tiny models, FSDP2 otherwise")
    g.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="training device; auto = cuda when available")
    # engine ports of a GPU job (slime.launch.layout): router on the base port, engine i on base + 10 * (i + 1)
    g.add_argument("--rollout-base-port", type=int, default=15000, help="policy router port; engines above it")
    g.add_argument("--prm-base-port", type=int, default=25000, help="judge router port; judge engines above it")


def _add_checkpoint_flags(g):
    g.add_argument("--hf-checkpoint", required=True,
                   help=f"HF model folder, or a built-in name ({', '.join(BUILTIN_MODEL_NAMES)})")
    g.add_argument("--ref-load", default=None, help="reference model (default: --hf-checkpoint)")
    g.add_argument("--load", default=None, help="resume from this checkpoint directory")
    g.add_argument("--save", default=None, help="checkpoint directory")
    g.add_argument("--save-interval", type=int, default=None, help="save every N rollouts (and at the last)")
    g.add_argument("--seed", type=int, default=1234)


def _add_engine_flags(g):
    import shlex

    g.add_argument("--rollout-engine", choices=["embedded", "sglang", "vllm"], default="embedded",
                   help="what serves the policy: our embedded engine (CPU or one GPU), SGLang servers or vLLM "
                        "servers pinned to the --rollout-num-gpus GPUs; with --rollout-external-engine-addrs, "
                        "which protocol the running engines speak")
    g.add_argument("--prm-engine", choices=["embedded", "sglang", "vllm"], default=None,
                   help="what serves the judge/teacher with --prm-enable (default: --rollout-engine)")
    g.add_argument("--rollout-external-engine-addrs", nargs="+", default=None, metavar="URL",
                   help="attach to running engines (http(s)://host:port) instead of starting the embedded one")
    g.add_argument("--engine-threads", type=int, default=1,
                   help="torch threads of an embedded engine (and of each vLLM-CPU engine)")
    g.add_argument("--vllm-cpu-engines", type=int, default=1,
                   help="--device cpu --rollout-engine vllm: how many vLLM-CPU engines the trainer starts (the "
                        "rollout round-robins over them, as over several vLLM engines on GPUs)")
    g.add_argument("--sglang-mem-fraction-static", type=float, default=None,
                   help="SGLang --mem-fraction-static (weights + KV cache share of GPU memory; vLLM: "
                        "--gpu-memory-utilization)")
    g.add_argument("--sglang-context-length", type=int, default=None,
                   help="SGLang --context-length (vLLM: --max-model-len)")
    g.add_argument("--sglang-reasoning-parser", default=None, help="SGLang/vLLM --reasoning-parser (e.g. qwen3)")
    g.add_argument("--sglang-tool-call-parser", default=None, help="SGLang/vLLM --tool-call-parser (e.g. qwen25)")
    g.add_argument("--sglang-router-policy", default="cache_aware",
                   choices=["cache_aware", "round_robin", "random", "power_of_two"],
                   help="sglang-router --policy in front of several SGLang engines")
    g.add_argument("--sglang-router-port", type=int, default=None,
                   help="fixed port of the policy router (default: the layout's router port)")
    g.add_argument("--sglang-extra-args", type=shlex.split, default=[], metavar="'ARGS'",
                   help="more sglang.launch_server flags as one string; write it with '=' when it is a "
                        "single flag: --sglang-extra-args=--enable-metrics")
    g.add_argument("--vllm-extra-args", type=shlex.split, default=[], metavar="'ARGS'",
                   help="more `vllm serve` flags as one string (--vllm-extra-args=--enforce-eager)")
    g.add_argument("--update-weight-transport", choices=["disk", "distributed"], default="disk",
                   help="disk: write each version to --update-weight-disk-dir, engines reload it (default, any "
                        "engine); distributed: NCCL broadcast to SGLang engines (GPU only)")
    g.add_argument("--update-weight-buffer-size", type=int, default=512 * 1024**2,
                   help="bytes of parameters per NCCL broadcast bucket (distributed transport)")
    g.add_argument("--update-weight-disk-dir", default=None,
                   help="where published weight versions are written (default: <save or run dir>/weights)")
    g.add_argument("--keep-weight-versions", type=int, default=2,
                   help="published weight versions kept on disk")
    g.add_argument("--extra-python-path", nargs="+", action="extend", default=[], metavar="DIR",
                   help="folders put on sys.path before loading --*-path hooks (the CWD is always added)")


def _add_rollout_flags(g):
    g.add_argument("--rollout-function-path", default=DEFAULT_ROLLOUT_FUNCTION)
    g.add_argument("--custom-generate-function-path", default=None)
    g.add_argument("--custom-rm-path", default=None)
    g.add_argument("--dynamic-sampling-filter-path", default=None)
    g.add_argument("--data-source-path", default=DEFAULT_DATA_SOURCE)
    g.add_argument("--custom-reward-post-process-path", default=None)
    g.add_argument("--custom-rollout-log-function-path", default=None)
    g.add_argument("--custom-config-path", default=None, metavar="YAML",
                   help="a YAML whose top-level keys become attributes of args (settings of a method's plugins)")
    g.add_argument("--rollout-sample-filter-path", default=None,
                   help="fn(args, groups): edits the accepted groups in place before training (upstream's hook)")
    g.add_argument("--rollout-all-samples-process-path", default=None,
                   help="fn(args, all_groups, data_source): sees every finished group, kept or filtered out")
    g.add_argument("--group-rm", action="store_true",
                   help="score a group at once (--custom-rm-path gets the list of its samples) after all finish")
    g.add_argument("--partial-rollout", action="store_true",
                   help="groups still generating when a rollout has enough go back to the data source and are "
                        "continued in a later rollout (their tokens so far kept)")
    g.add_argument("--mask-offpolicy-in-partial-rollout", action="store_true",
                   help="with --partial-rollout: the tokens generated by earlier weights get loss mask 0")
    g.add_argument("--buffer-filter-path", default=None,
                   help="picks groups from the data-source buffer (default: first in, first out)")
    g.add_argument("--prompt-data", default=None, help="jsonl/parquet prompts (optionally path@[start:end])")
    g.add_argument("--input-key", default="prompt")
    g.add_argument("--label-key", default="label")
    g.add_argument("--metadata-key", default="metadata")
    g.add_argument("--tool-key", default=None, help="column with the tools passed to the chat template")
    g.add_argument("--apply-chat-template", action="store_true")
    g.add_argument("--apply-chat-template-kwargs", type=_json_object, default={}, metavar="JSON")
    g.add_argument("--rollout-shuffle", action="store_true")
    g.add_argument("--rollout-seed", type=int, default=42)
    g.add_argument("--sglang-server-concurrency", type=int, default=None,
                   help="requests in flight per engine during a rollout (default 64)")
    g.add_argument("--disable-rollout-global-dataset", dest="rollout_global_dataset", action="store_false",
                   help="no prompt dataset: the rollout function supplies the samples")
    g.add_argument("--num-rollout", type=_count, default=None)
    g.add_argument("--num-epoch", type=int, default=None)
    g.add_argument("--rollout-batch-size", type=int, required=True, help="prompt groups per rollout")
    g.add_argument("--n-samples-per-prompt", type=int, default=1)
    g.add_argument("--num-steps-per-rollout", type=int, default=None,
                   help="optimizer steps per rollout (sets --global-batch-size)")
    g.add_argument("--global-batch-size", type=int, default=None, help="samples per optimizer step")
    g.add_argument("--micro-batch-size", type=int, default=1)
    g.add_argument("--use-dynamic-batch-size", action="store_true")
    g.add_argument("--max-tokens-per-gpu", type=int, default=None)
    g.add_argument("--log-probs-max-tokens-per-gpu", type=int, default=None)
    g.add_argument("--rollout-max-response-len", type=int, default=None)
    g.add_argument("--rollout-max-context-len", type=int, default=None)
    g.add_argument("--rollout-max-prompt-len", type=int, default=None)
    g.add_argument("--rollout-temperature", type=float, default=1.0)
    g.add_argument("--rollout-top-p", type=float, default=1.0)
    g.add_argument("--rollout-top-k", type=int, default=-1)
    g.add_argument("--rollout-stop", nargs="+", default=None)
    g.add_argument("--rollout-stop-token-ids", nargs="+", type=int, default=None)
    g.add_argument("--reward-key", default=None, help="key of the scalar inside dict rewards")
    g.add_argument("--over-sampling-batch-size", type=int, default=None)
    g.add_argument("--update-weights-interval", type=int, default=1)


def _add_eval_flags(g):
    g.add_argument("--eval-function-path", default=None, help="default: --rollout-function-path")
    g.add_argument("--eval-interval", type=int, default=None,
                   help="evaluate every N rollouts and after the last one (rank 0, on the published weights; "
                        "samples in <run dir>/eval/), and once before training unless --skip-eval-before-train")
    g.add_argument("--skip-eval-before-train", action="store_true")
    g.add_argument("--eval-prompt-data", nargs="+", default=None, metavar="NAME PATH")
    g.add_argument("--n-samples-per-eval-prompt", type=int, default=1)
    g.add_argument("--eval-temperature", type=float, default=None)
    g.add_argument("--eval-top-p", type=float, default=None)
    g.add_argument("--eval-max-response-len", type=int, default=None)
    g.add_argument("--eval-max-context-len", type=int, default=None)
    g.add_argument("--eval-reward-key", default=None)
    g.add_argument("--eval-input-key", default=None,
                   help="the evaluation data's input column when it differs from --input-key (e.g. an SFT run on "
                        "'prompt' rows evaluated on terminal tasks under 'task')")
    g.add_argument("--eval-label-key", default=None, help="the evaluation data's label column (default --label-key)")


def _add_algorithm_flags(g):
    g.add_argument("--advantage-estimator", default="grpo", help="default: the conversation method's, else grpo", choices=[
        "grpo", "gspo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "on_policy_distillation", "step_wise"])
    g.add_argument("--dynamic-history", action="store_true",
                   help="agent rollouts as one sample per step (a custom generate function returns a list): GRPO "
                        "normalises one reward per trajectory (group_index, index) over the group's trajectories and "
                        "gives it to each of the trajectory's step samples (also done without the flag whenever "
                        "samples share a trajectory, as the terminal and GUI agents' per-turn samples do)")
    g.add_argument("--trajectory-length-normalize", action="store_true",
                   help="--dynamic-history: divide a step sample's advantage by its trajectory's number of steps, so "
                        "long trajectories do not weigh more")
    g.add_argument("--constant-groups", choices=["keep", "drop", "drop-all"], default="keep",
                   help="grpo/gspo/step_wise: drop groups (step_wise: buckets) whose rewards all agree (upstream does, "
                        "silently; when all are, the first is kept); drop-all (grpo/gspo): keep none, so a rollout "
                        "whose groups all agree takes no optimizer step; counted in the rollout metrics either way")
    g.add_argument("--max-turns", type=int, default=None, help="agent rollouts: generation turns per trajectory")
    g.add_argument("--max-parse-errors", type=int, default=None,
                   help="terminal/SWE agents: malformed tool calls per episode before it ends as FAILED (default 3)")
    g.add_argument("--env-server-url", default=None,
                   help="agent rollouts: the environment service (a pool server or router; env ENV_SERVER_URL); "
                        "default: the trainer starts --env-workers pool servers itself")
    g.add_argument("--env-workers", type=int, default=None,
                   help="pool servers the trainer starts when no --env-server-url is given (a router when > 1)")
    g.add_argument("--env-provider", default=None,
                   help="what the started pool servers lease (terminal, swe, command, or module:factory)")
    g.add_argument("--step-judge", default=None,
                   help="agent rollouts: the PRM that scores each step: llm (the PRM engine of --prm-enable / "
                        "--prm-engine-url, \\boxed{±1} votes; the default when one is configured), rules (the "
                        "setting's CPU rule judge) or module.path:factory (factory(args) -> an object with "
                        "async score(problem, history, action, observation, *, step_index, seed))")
    g.add_argument("--step-wise-singleton", choices=["zero", "raw"], default="zero",
                   help="step_wise: a (group, step) bucket with one step has no baseline: 0 (default) or its raw "
                        "target (upstream; mixes raw targets with z-scores)")
    g.add_argument("--step-wise-unjudged", choices=["skip", "outcome"], default="skip",
                   help="step_wise: a step the PRM could not judge (no valid vote): left out of its (group, step) "
                        "bucket with advantage 0 (skip, default), or trained on the outcome alone, what a 0 vote "
                        "gives (outcome; upstream scored a failed vote 0)")
    g.add_argument("--disable-rewards-normalization", dest="rewards_normalization", action="store_false",
                   help="train on the raw rewards: no group baseline (grpo/gspo), no per-bucket z-scores (step_wise)")
    g.add_argument("--disable-grpo-std-normalization", dest="grpo_std_normalization", action="store_false")
    g.add_argument("--normalize-advantages", action="store_true")
    g.add_argument("--gamma", type=float, default=1.0)
    g.add_argument("--kl-coef", type=float, default=0.0, help="KL reward shaping (reinforce_plus_plus*)")
    g.add_argument("--use-kl-loss", action="store_true")
    g.add_argument("--kl-loss-coef", type=float, default=0.0)
    g.add_argument("--kl-loss-type", choices=["k1", "k2", "k3", "low_var_kl"], default="k1")
    g.add_argument("--kl-loss-topk", type=int, default=0,
                   help="K > 0: the KL loss is KL(policy || reference) over the reference's top-K tokens plus a tail "
                        "bin at every response position, so it also holds tokens the policy never sampled; "
                        "0: the --kl-loss-type estimate on the sampled tokens")
    g.add_argument("--use-unbiased-kl", action="store_true")
    g.add_argument("--entropy-coef", type=float, default=0.0)
    g.add_argument("--eps-clip", type=float, default=0.2)
    g.add_argument("--eps-clip-high", type=float, default=None, help="default: --eps-clip")
    g.add_argument("--eps-clip-c", type=float, default=None, help="dual-clip constant (> 1)")
    g.add_argument("--loss-type", choices=["policy_loss", "custom_loss", "sft_loss"], default="policy_loss",
                   help="default: the conversation method's, else policy_loss")
    g.add_argument("--sft-plain-tokens", nargs="+", default=None, metavar="TEXT",
                   help="--loss-type sft_loss: train these added-token strings (e.g. '<tool_call>' '</tool_call>') as "
                        "ordinary text pieces where a response holds them: for a model whose rows of those tokens "
                        "are untrained, as Qwen2.5-Coder-0.5B's (slime/rollout/sft_rollout.py)")
    g.add_argument("--custom-loss-function-path", default=None)
    g.add_argument("--custom-loss-batch-layout", choices=["slime", "upstream"], default="slime",
                   help="the batch a custom loss is written for: this trainer's response-aligned [b, R] fields and "
                        "[b, R, V] logits (default), or upstream's (lists of per-sample tensors, packed [1, T, V] "
                        "logits, unconcat_tokens: a loss ported from an OpenClaw-RL method folder unchanged; "
                        "slime/backends/upstream_batch.py)")
    g.add_argument("--calculate-per-token-loss", action="store_true")
    g.add_argument("--disable-compute-advantages-and-returns", dest="compute_advantages_and_returns",
                   action="store_false")
    g.add_argument("--distill-divergence", choices=["reverse", "forward"], default="reverse",
                   help="top-K distillation losses: reverse KL(student || teacher) (upstream, mode-seeking) or "
                        "forward KL(teacher || student) (mass-covering: pulls up tokens the policy rarely samples)")
    g.add_argument("--distill-head-positions", type=int, default=0,
                   help="top-K distillation losses: N > 0 puts each sample's whole distillation term on its first N "
                        "trained response tokens (where an opening such as \"Sure!\" is decided), weighted as much as "
                        "the whole sample; 0: every token")
    g.add_argument("--distill-divergent-positions", type=int, default=0,
                   help="top-K distillation losses: N > 0 puts each sample's whole distillation term on its N trained "
                        "response tokens where the teacher diverges most from the student (an opening or an ending the "
                        "student never writes), weighted as much as the whole sample; 0: every token. Not with "
                        "--distill-head-positions")
    g.add_argument("--opd-advantage-bound", type=float, default=None,
                   help="clamp the per-token OPD advantage teacher - old to [-B, B] (env OPENCLAW_OPD_ADVANTAGE_BOUND)")
    g.add_argument("--combine-w-rl", type=float, default=None,
                   help="Combine loss: weight of the reward term (env OPENCLAW_COMBINE_W_RL, default 1.0)")
    g.add_argument("--combine-w-opd", type=float, default=None,
                   help="Combine loss: weight of the OPD term (env OPENCLAW_COMBINE_W_OPD, default 1.0)")
    g.add_argument("--use-rollout-logprobs", action="store_true")
    g.add_argument("--use-tis", action="store_true",
                   help="truncated importance sampling: multiply each token's policy-gradient loss by the detached "
                        "weight clamp(exp(old_log_probs - rollout_log_probs), --tis-clip-low, --tis-clip), correcting "
                        "for the gap between the trainer's recomputed log-probs and the engine's; needs rollout "
                        "log-probs on every sample (metrics tis, tis_weight, tis_clipfrac, tis_abs, ois)")
    g.add_argument("--tis-clip", type=float, default=2.0, help="--use-tis: upper bound of the TIS weight")
    g.add_argument("--tis-clip-low", type=float, default=0.0, help="--use-tis: lower bound of the TIS weight (>= 0)")
    g.add_argument("--off-policy-weight", type=float, default=1.0,
                   help="multiplies the whole loss of each off-policy sample (traces another model wrote, ingested "
                        "through /v1/traces: no rollout log-probs, so old log-probs are recomputed and TIS leaves "
                        "them at weight 1): every term it contributes (policy gradient after any whitening, OPD and "
                        "top-K teacher terms, KL, entropy); 0 keeps them out of training")


def _add_optimizer_flags(g):
    g.add_argument("--optimizer", choices=["adam"], default="adam", help="AdamW")
    g.add_argument("--lr", type=float, default=1e-6)
    g.add_argument("--min-lr", type=float, default=0.0)
    g.add_argument("--lr-decay-style", choices=["constant", "linear", "cosine"], default="constant")
    g.add_argument("--lr-warmup-iters", type=int, default=0)
    g.add_argument("--lr-warmup-fraction", type=float, default=None)
    g.add_argument("--lr-decay-iters", type=int, default=None, help="default: train_iters")
    g.add_argument("--weight-decay", type=float, default=0.0)
    g.add_argument("--adam-beta1", type=float, default=0.9)
    g.add_argument("--adam-beta2", type=float, default=0.98)
    g.add_argument("--adam-eps", type=float, default=1e-8)
    g.add_argument("--clip-grad", type=float, default=1.0)
    g.add_argument("--gradient-checkpointing", action="store_true")
    g.add_argument("--bf16", action="store_true")
    g.add_argument("--fp16", action="store_true")


def _add_lora_flags(g):
    g.add_argument("--use-lora", action="store_true")
    g.add_argument("--lora-rank", type=int, default=16)
    g.add_argument("--lora-alpha", type=float, default=32)
    g.add_argument("--lora-dropout", type=float, default=0.0)
    g.add_argument("--lora-target-modules", "--target-modules", dest="lora_target_modules", type=_comma_list,
                   default=_comma_list(DEFAULT_LORA_TARGETS), metavar="NAMES", help="comma-separated module names")
    g.add_argument("--lora-modules-to-save", type=_comma_list, default=None, metavar="NAMES")
    g.add_argument("--lora-top-layers", type=int, default=0, metavar="N",
                   help="adapt only the top N transformer layers (0: every layer). The backward pass then stops at "
                        "the lowest adapted layer: on a CPU a step costs about (1 + 2N/L)/3 of one over all L layers, "
                        "for a smaller update space")


def _add_prm_flags(g):
    g.add_argument("--prm-enable", action="store_true", help="host PRM/judge engines inside the job")
    g.add_argument("--prm-num-gpus", type=int, default=0)
    g.add_argument("--prm-num-gpus-per-engine", type=int, default=1)
    g.add_argument("--prm-model-path", default=None, help="judge model (default: --hf-checkpoint)")
    g.add_argument("--prm-step-coef", type=float, default=1.0)
    g.add_argument("--prm-router-ip", default=None, help="set by the rollout manager")
    g.add_argument("--prm-router-port", type=int, default=None, help="set by the rollout manager")


def _add_conversation_flags(g):
    """The proxy's settings (`slime.conversation.settings`, declared once there), plus what only the trainer
    decides: whether it starts the proxy at all, and where the teacher runs."""
    from slime.conversation.settings import add_trainer_flags

    add_trainer_flags(g)
    g.add_argument("--proxy-url", default=None,
                   help="attach to a proxy started separately (then --conversation-store must name its store: a "
                        "SQLite file on this host, or a postgresql:// URL shared by several hosts)")
    g.add_argument("--rollout-dir", default=None,
                   help="with --data-source-path slime.conversation.rollout_dir.RolloutDirDataSource: train from the "
                        "rollout files `python -m slime.conversation collect` writes there (each sample once)")
    g.add_argument("--trainer-lease-ttl", type=float, default=60.0,
                   help="one trainer claims from a store at a time: it renews a lease every TTL/4 s; a second trainer "
                        "is refused while the lease is live, and takes over once its holder stopped renewing for TTL "
                        "s (at once when the holder's process on the same host is gone)")
    g.add_argument("--self-distillation", action="store_true",
                   help="methods with hints: the current policy is the teacher (default: the frozen judge engine, "
                        "--prm-enable / --prm-engine-url)")


def _add_logging_flags(g):
    g.add_argument("--use-wandb", action="store_true")
    g.add_argument("--wandb-project", default="slime")
    g.add_argument("--wandb-group", default=None)
    g.add_argument("--wandb-mode", choices=["online", "offline", "disabled"], default="online")
    g.add_argument("--wandb-dir", default=None, help="default: <run dir>/wandb")
    g.add_argument("--wandb-key", default=None)
    g.add_argument("--use-tensorboard", action="store_true", default=True,
                   help="accepted; TensorBoard event files are always written")
    g.add_argument("--tb-dir", default=None, help="default: <run dir>/tensorboard")
    g.add_argument("--run-dir", default=None, help="default: runs/<timestamp>")
    g.add_argument("--log-interval", type=int, default=1)
    g.add_argument("--save-debug-rollout-data", default=None,
                   help="write each rollout's samples as JSONL to this path; '{rollout_id}' is filled in")


def _add_parallel_flags(g):
    g.add_argument("--tensor-model-parallel-size", type=int, default=1,
                   help="TP size (fsdp: DTensor tensor parallel; megatron: megatron-core TP)")
    g.add_argument("--pipeline-model-parallel-size", type=int, default=1, help="PP size (megatron backend)")
    g.add_argument("--context-parallel-size", type=int, default=1, help="CP size (megatron backend, GPU only)")
    g.add_argument("--sequence-parallel", action="store_true", help="sequence parallel inside TP regions")
    g.add_argument("--recompute-granularity", choices=["full", "selective"], default=None,
                   help="activation recompute (megatron backend; fsdp: --gradient-checkpointing)")
    g.add_argument("--recompute-method", choices=["uniform", "block"], default=None)
    g.add_argument("--recompute-num-layers", type=int, default=None)
    # megatron backend: optimizer state sharded over data-parallel ranks; always on upstream, switchable here
    g.add_argument("--use-distributed-optimizer", action="store_true", default=True, help="(default)")
    g.add_argument("--disable-distributed-optimizer", dest="use_distributed_optimizer", action="store_false")
    g.add_argument("--optimizer-cpu-offload", action="store_true", help="megatron backend: Adam state and step on CPU")
    g.add_argument("--overlap-cpu-optimizer-d2h-h2d", action="store_true")
    g.add_argument("--use-precision-aware-optimizer", action="store_true")
    g.add_argument("--accumulate-allreduce-grads-in-fp32", action="store_true")
    g.add_argument("--transformer-impl", choices=["transformer_engine", "local"], default=None,
                   help="megatron layer spec (default: transformer_engine when installed, else local)")
    # ranks other than a node's engine starter wait in a collective while engines load (minutes on GPU nodes):
    # the process-group timeout must outlast that, so the default is longer than torch's 10 minutes
    g.add_argument("--distributed-timeout-minutes", type=int, default=60,
                   help="timeout of the trainer's process group collectives")


def add_megatron_model_flags(g):
    for flag in ("--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups",
                 "--kv-channels", "--vocab-size"):
        g.add_argument(flag, type=int, default=None)
    for flag in ("--rotary-base", "--norm-epsilon", "--rotary-percent"):
        g.add_argument(flag, type=float, default=None)
    for flag in ("--swiglu", "--group-query-attention", "--use-rotary-position-embeddings", "--disable-bias-linear",
                 "--qk-layernorm", "--untie-embeddings-and-output-weights"):
        g.add_argument(flag, action="store_true")
    g.add_argument("--add-qkv-bias", action="store_true", help="refused: no supported model has QKV biases")
    g.add_argument("--normalization", choices=["RMSNorm"], default=None)
    g.add_argument("--position-embedding-type", choices=["rope"], default=None)


def _add_ignored_flags(g):
    for flag in ("--expert-model-parallel-size", "--expert-tensor-parallel-size", "--log-probs-chunk-size"):
        g.add_argument(flag, type=int, default=IGNORED_ON_FSDP[_dest(flag)])
    for flag in ("--attention-softmax-in-fp32", "--balance-data"):
        g.add_argument(flag, action="store_true")
    for flag in ("--attention-dropout", "--hidden-dropout"):
        g.add_argument(flag, type=float, default=None)
    for flag in ("--attention-backend", "--megatron-to-hf-mode"):
        g.add_argument(flag, default=None)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def parse_args(argv: list[str] | None = None, *, mode: str = "sync", world_size: int = 1) -> argparse.Namespace:
    """Parse `argv` (default `sys.argv[1:]`) and validate; see `validate_args` for `mode`/`world_size`."""
    return validate_args(parse_trainer_args(argv), mode=mode, world_size=world_size)


def parse_trainer_args(argv: list[str] | None = None) -> argparse.Namespace:
    """`argv` parsed with the flags the run's plugins add (`add_plugin_arguments`) and `--custom-config-path`
    applied; not validated yet (`validate_args`)."""
    parser = build_parser()
    add_plugin_arguments(parser, argv)
    args = parser.parse_args(argv)
    apply_custom_config(args)
    return args


def add_plugin_arguments(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> list[str]:
    """Let every hook module the command line names declare flags of its own, as upstream's
    `add_custom_arguments(parser)`: a module given to any hook flag (`--custom-generate-function-path
    my_method.generate.generate`, ...) that defines `add_custom_arguments` is called once with the parser before
    the command line is parsed. Returns the modules that added flags. A module that does not import is left to the
    hook loader, which names the flag."""
    import importlib

    from slime.utils.hooks import HOOKS, add_method_dirs_to_path, flag_attr

    known, _ = parser.parse_known_args(argv)
    add_method_dirs_to_path(known.extra_python_path or [])
    added = []
    for flag in HOOKS:
        module_name = (getattr(known, flag_attr(flag), None) or "").rpartition(".")[0]
        if not module_name or module_name in added:
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - reported with its flag by load_hooks when the trainer starts
            continue
        declare = getattr(module, "add_custom_arguments", None)
        if not callable(declare):
            continue
        try:
            declare(parser)
        except argparse.ArgumentError as exc:
            _fail(f"{module_name}.add_custom_arguments (the module of {flag}): {exc}")
        added.append(module_name)
    return added


def apply_custom_config(args: argparse.Namespace) -> None:
    """`--custom-config-path FILE.yaml` (upstream's): every top-level key becomes an attribute of `args` (dashes
    read as underscores), settings a plugin reads without a flag of its own; a key that names a flag sets it, as if
    given on the command line, and is validated with the rest."""
    path = getattr(args, "custom_config_path", None)
    if not path:
        return
    import yaml

    file = Path(path).expanduser()
    if not file.is_file():
        _fail(f"--custom-config-path {path!r} does not exist")
    try:
        data = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as exc:
        _fail(f"--custom-config-path {path!r} is not valid YAML: {exc}")
    if not isinstance(data, dict):
        _fail(f"--custom-config-path {path!r} must hold a mapping of names to values, not {type(data).__name__}")
    for key, value in data.items():
        name = str(key).replace("-", "_")
        setattr(args, name, value)
        getattr(args, "explicit_flags", set()).add(name)


# ------------------------------------------------------------------------------------------- validation

MODES = ("sync", "async", "eval")


def validate_args(args: argparse.Namespace, mode: str = "sync", world_size: int = 1) -> argparse.Namespace:
    """Check flag combinations and fill derived values in place; returns `args`.

    `mode`: "sync" (train.py), "async" (train_async.py) or "eval" (eval only).
    `world_size`: data-parallel size of the trainer (the global batch must split evenly across it).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    _check_backend(args, mode)
    _check_positive(args)
    _check_model_paths(args)
    _apply_method(args)
    _derive_batch_sizes(args, world_size)
    _check_data(args)
    _check_engines(args)
    _check_algorithm(args)
    _check_optimizer(args)
    _derive_output_dirs(args)
    _derive_eval(args)
    _derive_prm(args)
    _note_ignored(args)
    # Negated mirrors of the --disable-* switches (the upstream attributes above stay the source of truth).
    args.disable_rewards_normalization = not args.rewards_normalization
    args.disable_grpo_std_normalization = not args.grpo_std_normalization
    args.disable_compute_advantages_and_returns = not args.compute_advantages_and_returns
    args.disable_rollout_global_dataset = not args.rollout_global_dataset
    args.num_rollout_per_epoch = getattr(args, "num_rollout_per_epoch", None)
    derive_train_iters(args)
    return args


def _fail(message: str):
    raise ArgumentError(message)


def _check_backend(args, mode):
    if args.use_lora and args.train_backend != "fsdp":
        _fail(f"--use-lora requires --train-backend fsdp (got --train-backend {args.train_backend})")
    for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"):
        if getattr(args, name) < 1:
            _fail(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.train_backend == "megatron":
        import importlib.util

        if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
            _fail(MEGATRON_UNAVAILABLE)
        if args.add_qkv_bias:
            _fail("--add-qkv-bias: the megatron backend supports Qwen3 and Llama without linear biases")
    else:
        for name in ("pipeline_model_parallel_size", "context_parallel_size"):
            if getattr(args, name) > 1:
                _fail(f"--{name.replace('_', '-')} {getattr(args, name)} needs --train-backend megatron (the fsdp "
                      f"backend shards with FSDP2 and tensor parallel only)")
    if args.recompute_method is not None and args.recompute_granularity != "full":
        _fail("--recompute-method applies to --recompute-granularity full only")
    if args.recompute_granularity == "full" and (args.recompute_method is None or args.recompute_num_layers is None):
        _fail("--recompute-granularity full needs --recompute-method (uniform|block) and --recompute-num-layers")
    if args.colocate and mode == "async":
        _fail("--colocate cannot be used with the asynchronous loop (train_async): engines and trainer would "
              "share GPUs while generating and training at the same time; drop --colocate or use train.py")
    if args.colocate and args.rollout_external_engine_addrs:
        _fail("--colocate and --rollout-external-engine-addrs contradict each other: external engines do not "
              "share the training GPUs")
    if args.bf16 and args.fp16:
        _fail("--bf16 and --fp16 are mutually exclusive")


_POSITIVE = ("actor_num_nodes", "actor_num_gpus_per_node", "rollout_num_gpus_per_engine", "num_gpus_per_node",
             "rollout_batch_size", "n_samples_per_prompt", "num_steps_per_rollout", "global_batch_size",
             "micro_batch_size", "max_tokens_per_gpu", "log_probs_max_tokens_per_gpu", "rollout_max_response_len",
             "rollout_max_context_len", "rollout_max_prompt_len", "over_sampling_batch_size",
             "update_weights_interval", "eval_interval", "n_samples_per_eval_prompt", "eval_max_response_len",
             "eval_max_context_len", "save_interval", "engine_threads", "keep_weight_versions", "log_interval",
             "num_epoch", "prm_num_gpus_per_engine", "distributed_timeout_minutes", "max_parse_errors", "env_workers")
# the conversation settings (--prm-m, --session-idle-ttl, ...) are range-checked by ConversationSettings.check_values
_NON_NEGATIVE = ("num_rollout", "rollout_num_gpus", "prm_num_gpus", "lr_warmup_iters", "lr_decay_iters",
                 "lr", "min_lr", "weight_decay", "clip_grad", "kl_loss_coef", "entropy_coef", "eps_clip",
                 "eps_clip_high", "rollout_temperature", "adam_eps", "distill_head_positions",
                 "distill_divergent_positions")


def _check_positive(args):
    for name in _POSITIVE:
        value = getattr(args, name)
        if value is not None and value < 1:
            _fail(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    for name in _NON_NEGATIVE:
        value = getattr(args, name)
        if value is not None and value < 0:
            _fail(f"--{name.replace('_', '-')} must be >= 0, got {value}")


def _is_model(ref: str) -> bool:
    """A folder, or a name `slime.models.resolve_model_path` builds/converts by itself."""
    from slime.models import registry

    names = set(BUILTIN_MODEL_NAMES) | set(getattr(registry, "_ALIASES", {}))
    return ref.lower() in names or Path(ref).expanduser().is_dir()


def _check_model_paths(args):
    if not _is_model(args.hf_checkpoint):
        _fail(f"--hf-checkpoint {args.hf_checkpoint!r} is neither a folder nor a built-in model name "
              f"({', '.join(BUILTIN_MODEL_NAMES)})")
    if args.ref_load is None:
        args.ref_load = args.hf_checkpoint
    args.ref_model_needed = bool((args.use_kl_loss and args.kl_loss_coef != 0) or args.kl_coef != 0)
    if args.ref_model_needed and not _is_model(args.ref_load):
        _fail(f"--ref-load {args.ref_load!r} does not exist, and a reference model is needed "
              f"(--use-kl-loss with --kl-loss-coef {args.kl_loss_coef}, --kl-coef {args.kl_coef})")
    if args.load is not None and not Path(args.load).expanduser().is_dir():
        _fail(f"--load {args.load!r} is not a directory")
    if args.save_interval is not None and args.save is None:
        _fail("--save-interval needs --save (where to write the checkpoints)")
    for folder in args.extra_python_path:
        if not Path(folder).expanduser().is_dir():
            _fail(f"--extra-python-path {folder!r} is not a directory")


def _derive_batch_sizes(args, world_size):
    samples_per_rollout = args.rollout_batch_size * args.n_samples_per_prompt
    if args.num_steps_per_rollout is not None:
        if samples_per_rollout % args.num_steps_per_rollout:
            _fail(f"--num-steps-per-rollout {args.num_steps_per_rollout} does not divide --rollout-batch-size × "
                  f"--n-samples-per-prompt = {args.rollout_batch_size} × {args.n_samples_per_prompt} = "
                  f"{samples_per_rollout} samples")
        derived = samples_per_rollout // args.num_steps_per_rollout
        if args.global_batch_size is not None and args.global_batch_size != derived:
            _fail(f"--global-batch-size {args.global_batch_size} disagrees with --num-steps-per-rollout "
                  f"{args.num_steps_per_rollout} (which gives {samples_per_rollout} // "
                  f"{args.num_steps_per_rollout} = {derived}); give one of them")
        args.global_batch_size = derived
    elif args.global_batch_size is None:
        args.global_batch_size = samples_per_rollout
    elif samples_per_rollout % args.global_batch_size:
        logger.warning("--global-batch-size %d does not divide the %d samples of a rollout "
                       "(--rollout-batch-size × --n-samples-per-prompt): each rollout is trimmed to a multiple "
                       "of it", args.global_batch_size, samples_per_rollout)
    if args.global_batch_size % world_size:
        _fail(f"--global-batch-size {args.global_batch_size} (derived from --rollout-batch-size, "
              f"--n-samples-per-prompt, --num-steps-per-rollout unless given) is not divisible by the "
              f"data-parallel world size {world_size} (--actor-num-nodes × --actor-num-gpus-per-node)")
    if args.use_dynamic_batch_size:
        if args.max_tokens_per_gpu is None:
            _fail("--use-dynamic-batch-size requires --max-tokens-per-gpu (the token budget per micro-batch)")
    elif (args.global_batch_size // world_size) % args.micro_batch_size:
        _fail(f"--micro-batch-size {args.micro_batch_size} does not divide the per-rank batch "
              f"--global-batch-size {args.global_batch_size} / world size {world_size}")
    if args.log_probs_max_tokens_per_gpu is None:
        args.log_probs_max_tokens_per_gpu = args.max_tokens_per_gpu
    if args.over_sampling_batch_size is None:
        args.over_sampling_batch_size = args.rollout_batch_size
    elif args.over_sampling_batch_size < args.rollout_batch_size:
        _fail(f"--over-sampling-batch-size {args.over_sampling_batch_size} must be >= --rollout-batch-size "
              f"{args.rollout_batch_size}")


def _check_data(args):
    if args.mask_offpolicy_in_partial_rollout and not args.partial_rollout:
        _fail("--mask-offpolicy-in-partial-rollout masks the tokens of groups continued by --partial-rollout: "
              "give --partial-rollout too")
    if args.num_rollout is None and args.num_epoch is None:
        _fail("give --num-rollout (number of rollouts) or --num-epoch (passes over --prompt-data)")
    if args.num_epoch is not None and not args.rollout_global_dataset:
        _fail("--num-epoch needs the global dataset; it cannot be combined with --disable-rollout-global-dataset")
    # The default data source is what reads --prompt-data; custom ones may bring their own data.
    if args.rollout_global_dataset and args.prompt_data is None and args.data_source_path == DEFAULT_DATA_SOURCE:
        _fail("--prompt-data is required while the global dataset is on (the default --data-source-path reads it); "
              "pass --disable-rollout-global-dataset if the rollout function supplies its own samples")
    if args.prompt_data is not None:
        file = args.prompt_data.split("@[", 1)[0]
        if not Path(file).expanduser().is_file():
            _fail(f"--prompt-data file {file!r} does not exist")
    if args.rollout_max_prompt_len is None and args.rollout_max_context_len is not None:
        args.rollout_max_prompt_len = args.rollout_max_context_len - 1
    if (args.rollout_max_context_len is not None and args.rollout_max_response_len is not None
            and args.rollout_max_response_len > args.rollout_max_context_len):
        _fail(f"--rollout-max-response-len {args.rollout_max_response_len} exceeds --rollout-max-context-len "
              f"{args.rollout_max_context_len}")
    if not 0 < args.rollout_top_p <= 1:
        _fail(f"--rollout-top-p must be in (0, 1], got {args.rollout_top_p}")


def _check_engines(args):
    normalized = []
    for url in args.rollout_external_engine_addrs or ():
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            port = None
            parts = None
        if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname or port is None
                or parts.path not in ("", "/") or parts.query or parts.fragment):
            _fail(f"--rollout-external-engine-addrs entry {url!r} must look like http://host:port "
                  f"or https://host:port")
        normalized.append(url.rstrip("/"))
    if args.rollout_external_engine_addrs is not None:
        if len(set(normalized)) != len(normalized):
            _fail(f"--rollout-external-engine-addrs lists an engine twice: {normalized}")
        args.rollout_external_engine_addrs = normalized
    if args.colocate and args.rollout_num_gpus is None:
        args.rollout_num_gpus = args.actor_num_nodes * args.actor_num_gpus_per_node
    if args.rollout_num_gpus is not None and args.rollout_num_gpus % args.rollout_num_gpus_per_engine:
        _fail(f"--rollout-num-gpus {args.rollout_num_gpus} is not a multiple of --rollout-num-gpus-per-engine "
              f"{args.rollout_num_gpus_per_engine}")

    # --- which engines, and what they are asked to do (clear errors before anything starts)
    from slime.engine.known_flags import unknown_flags
    from slime.engine.sglang_server import RESERVED_SGLANG_FLAGS
    from slime.engine.vllm_server import RESERVED_VLLM_FLAGS, VLLM_SCORING_TEMPERATURE

    args.prm_engine = args.prm_engine or args.rollout_engine
    distills = args.conversation_uses_hints
    teacher_engine = args.rollout_engine if getattr(args, "self_distillation", False) else args.prm_engine
    if distills and teacher_engine == "vllm" and (args.rollout_temperature or 1.0) != 1.0:
        _fail(f"{VLLM_SCORING_TEMPERATURE} (the teacher scores at --rollout-temperature {args.rollout_temperature}); "
              "serve the teacher with SGLang or the embedded engine, or use --rollout-temperature 1")
    if args.teacher_demonstrations and not distills:
        _fail(f"--teacher-demonstrations needs a method that uses hints (--conversation-method "
              f"{args.conversation_method} does not)")
    gpu_engine = args.rollout_engine != "embedded"
    # a CPU trainer starts its vLLM-CPU engines itself (scripts/setup_vllm_cpu.sh); SGLang has no CPU build here
    cpu_vllm = args.rollout_engine == "vllm" and args.device == "cpu" and not args.rollout_external_engine_addrs
    if args.vllm_cpu_engines < 1:
        _fail(f"--vllm-cpu-engines must be >= 1, got {args.vllm_cpu_engines}")
    if args.vllm_cpu_engines > 1 and not cpu_vllm:
        _fail("--vllm-cpu-engines starts vLLM-CPU engines: it needs --rollout-engine vllm --device cpu and no "
              "--rollout-external-engine-addrs")
    if gpu_engine and not cpu_vllm and not args.rollout_external_engine_addrs and not args.rollout_num_gpus:
        _fail(f"--rollout-engine {args.rollout_engine} starts its servers on GPUs: set --rollout-num-gpus "
              "(ROLLOUT_GPUS) and --rollout-num-gpus-per-engine, or attach with --rollout-external-engine-addrs"
              + (", or give --device cpu to start vLLM-CPU" if args.rollout_engine == "vllm" else ""))
    if cpu_vllm and args.rollout_num_gpus:
        _fail("--device cpu with --rollout-engine vllm starts vLLM-CPU engines; --rollout-num-gpus places GPU "
              "engines: give one or the other")
    if gpu_engine and args.colocate:
        _fail(f"--colocate with --rollout-engine {args.rollout_engine} is not supported: SGLang would have to "
              "release and resume its GPU memory around every training step; give the engines their own GPUs")
    if args.sglang_mem_fraction_static is not None and not 0 < args.sglang_mem_fraction_static < 1:
        _fail(f"--sglang-mem-fraction-static must be in (0, 1), got {args.sglang_mem_fraction_static}")
    if args.sglang_context_length is not None and args.sglang_context_length < 1:
        _fail(f"--sglang-context-length must be >= 1, got {args.sglang_context_length}")
    if args.sglang_router_port is not None and not 1 <= args.sglang_router_port <= 65535:
        _fail(f"--sglang-router-port {args.sglang_router_port} is not a TCP port")
    if args.update_weight_buffer_size < 1:
        _fail(f"--update-weight-buffer-size must be >= 1 byte, got {args.update_weight_buffer_size}")
    for flag, extra, reserved, package in (("--sglang-extra-args", args.sglang_extra_args, RESERVED_SGLANG_FLAGS,
                                            "sglang"),
                                           ("--vllm-extra-args", args.vllm_extra_args, RESERVED_VLLM_FLAGS, "vllm")):
        clash = sorted({a.split("=", 1)[0] for a in extra} & reserved.keys())
        if clash:
            _fail(f"{flag} sets {', '.join(clash)}, which the trainer sets itself: use "
                  + ", ".join(f"{reserved[c]} for {c}" for c in clash))
        unknown = unknown_flags(package, extra)
        if unknown:
            logger.warning("%s: %s not defined by the %s version these flags were checked against; passing them "
                           "through anyway", flag, ", ".join(unknown), package)
    if args.update_weight_transport == "distributed":
        if args.rollout_engine != "sglang":
            _fail("--update-weight-transport distributed broadcasts over NCCL into SGLang engines: it needs "
                  f"--rollout-engine sglang (got {args.rollout_engine}); use the default disk transport")
        if args.use_lora:
            _fail("--update-weight-transport distributed does not handle LoRA: use the disk transport, which "
                  "publishes the merged weights to SGLang")


def _apply_method(args):
    """Resolve `--conversation-method` through the method registry (a plugin loads from --extra-python-path)
    and set the trainer settings the method needs (its `training`), except those given on the command line.
    Sets `conversation_uses_hints` / `conversation_uses_reward_judge`."""
    method = None
    if args.conversation_method is None and args.data_source_path == CONVERSATION_DATA_SOURCE:
        from slime.conversation.methods import DEFAULT_METHOD

        args.conversation_method = DEFAULT_METHOD
    if args.conversation_method is not None:
        from slime.conversation.methods import canonical_method_name, load_method
        from slime.utils.hooks import add_method_dirs_to_path

        add_method_dirs_to_path(args.extra_python_path)
        try:
            args.conversation_method = canonical_method_name(args.conversation_method)
            method = load_method(args.conversation_method, **args.conversation_method_options)
        except ValueError as exc:
            _fail(f"--conversation-method: {exc}")
    elif args.conversation_method_options:
        _fail("--conversation-method-options needs --conversation-method (a plugin method's factory takes them)")
    args.conversation_uses_hints = bool(method is not None and method.uses_hints)
    args.conversation_uses_reward_judge = bool(method is not None and method.uses_reward_judge)
    training = dict(getattr(method, "training", {}) or {})
    unknown = sorted(k for k in training if not hasattr(args, k))
    if unknown:
        _fail(f"--conversation-method {args.conversation_method} asks for trainer settings that do not exist: "
              f"{unknown}")
    given = getattr(args, "explicit_flags", set())  # recorded by TrainerArgumentParser
    for dest, value in training.items():
        if dest not in given:
            setattr(args, dest, value)
    from slime.conversation.settings import ConversationSettings

    try:
        ConversationSettings.from_trainer_args(args).check_values()
    except ValueError as exc:
        _fail(str(exc))


def method_summary(args) -> str:
    """One line for dry runs: the conversation method, the loss and advantages it chose, its judges."""
    if args.conversation_method is None:
        return f"no conversation method (loss {args.loss_type}, advantages {args.advantage_estimator})"
    loss = args.loss_type + (f" {args.custom_loss_function_path}" if args.custom_loss_function_path else "")
    return (f"method: {args.conversation_method} (loss {loss}, advantages {args.advantage_estimator}, reward "
            f"normalisation {'on' if args.rewards_normalization else 'off'}; reward judge "
            f"{args.prm_type if args.conversation_uses_reward_judge else '-'}, hint judge "
            f"{args.hint_judge_type if args.conversation_uses_hints else '-'})")


def _check_algorithm(args):
    if args.eps_clip_high is None:
        args.eps_clip_high = args.eps_clip
    if args.eps_clip_c is not None and args.eps_clip_c <= 1:
        _fail(f"--eps-clip-c (dual-clip bound) must be > 1, got {args.eps_clip_c}")
    if args.kl_coef != 0 and args.use_kl_loss:
        _fail("--kl-coef (KL reward shaping) and --use-kl-loss (KL loss term) are mutually exclusive")
    if args.distill_head_positions and args.distill_divergent_positions:
        _fail("--distill-head-positions and --distill-divergent-positions each choose where the distillation term "
              "lives: give one")
    if args.kl_loss_topk < 0:
        _fail(f"--kl-loss-topk must be >= 0, got {args.kl_loss_topk}")
    if args.kl_loss_topk and not (args.use_kl_loss and args.kl_loss_coef != 0):
        _fail("--kl-loss-topk sets how the KL loss is computed: it needs --use-kl-loss and a non-zero --kl-loss-coef")
    if args.kl_loss_topk and args.use_unbiased_kl:
        _fail("--use-unbiased-kl reweights the sampled-token KL estimate; --kl-loss-topk computes the KL over the "
              "reference's top-K and has nothing to reweight: use one of them")
    if args.kl_loss_topk and args.train_backend != "fsdp":
        _fail("--kl-loss-topk needs --train-backend fsdp (megatron's vocabulary-parallel logits are not gathered "
              "for a top-K; its KL loss uses --kl-loss-type on the sampled tokens)")
    if args.kl_loss_coef != 0 and not args.use_kl_loss:
        _fail(f"--kl-loss-coef {args.kl_loss_coef} has no effect without --use-kl-loss")
    if args.kl_coef != 0 and not args.advantage_estimator.startswith("reinforce_plus_plus"):
        _fail(f"--kl-coef shapes rewards only for --advantage-estimator reinforce_plus_plus/"
              f"reinforce_plus_plus_baseline (got {args.advantage_estimator}); use --use-kl-loss --kl-loss-coef")
    if args.ref_model_needed:
        _refuse_unread_reference(args)
    if args.use_kl_loss and args.kl_loss_coef == 0:
        logger.info("--use-kl-loss with --kl-loss-coef 0: the KL term is not computed and no reference model "
                    "is loaded")
    if args.advantage_estimator.startswith("reinforce_plus_plus") and not args.normalize_advantages:
        _fail(f"--advantage-estimator {args.advantage_estimator} requires --normalize-advantages")
    if args.loss_type == "custom_loss" and not args.custom_loss_function_path:
        _fail("--loss-type custom_loss requires --custom-loss-function-path")
    if getattr(args, "custom_loss_batch_layout", "slime") != "slime" and args.loss_type != "custom_loss":
        _fail("--custom-loss-batch-layout is only used with --loss-type custom_loss")
    if args.custom_loss_function_path and args.loss_type != "custom_loss":
        _fail(f"--custom-loss-function-path is only used with --loss-type custom_loss (got --loss-type "
              f"{args.loss_type})")
    if args.constant_groups == "drop-all" and args.advantage_estimator not in ("grpo", "gspo"):
        _fail(f"--constant-groups drop-all drops GRPO/GSPO groups (got --advantage-estimator "
              f"{args.advantage_estimator}); step_wise drops constant buckets with --constant-groups drop")
    if args.use_rollout_logprobs and args.use_tis:
        _fail("--use-rollout-logprobs and --use-tis are mutually exclusive (TIS corrects the gap between "
              "rollout and recomputed log-probs)")
    if args.off_policy_weight < 0:
        _fail(f"--off-policy-weight must be >= 0 (a negative weight flips the gradient), got {args.off_policy_weight}")
    if args.use_tis and not args.tis_clip_low < args.tis_clip:
        _fail(f"--tis-clip-low {args.tis_clip_low} must be below --tis-clip {args.tis_clip}")
    if args.use_tis and args.tis_clip_low < 0:
        _fail(f"--tis-clip-low must be >= 0 (a negative weight flips the gradient), got {args.tis_clip_low}")
    if args.sft_plain_tokens and args.loss_type != "sft_loss":
        _fail(f"--sft-plain-tokens changes how SFT rows are tokenised; --loss-type is {args.loss_type}, not sft_loss")
    if args.use_tis and args.loss_type == "sft_loss":
        _fail("--use-tis reweights the policy-gradient loss; --loss-type sft_loss has none")
    if args.use_tis and not args.compute_advantages_and_returns:
        _fail("--use-tis weighs by exp(old_log_probs - rollout_log_probs) and the PPO loss it reweights needs the "
              "recomputed old log-probs: not with --disable-compute-advantages-and-returns")
    if args.n_samples_per_prompt == 1:
        args.grpo_std_normalization = False
        if args.rewards_normalization and args.loss_type != "sft_loss" and args.advantage_estimator in (
                "grpo", "gspo", "reinforce_plus_plus_baseline"):
            logger.warning(
                "--n-samples-per-prompt 1 with --advantage-estimator %s and reward normalisation on: every group "
                "has one sample, so rewards minus the group mean are 0 and all advantages will be zero unless "
                "--disable-rewards-normalization is given", args.advantage_estimator)


def _refuse_unread_reference(args):
    """A KL coefficient whose loss has no KL term (`reads_reference = False`: the SFT loss, the top-K-only
    distillation loss) would load a reference model and score every batch with it for nothing."""
    if args.kl_coef != 0 and args.loss_type == "sft_loss":
        _fail(f"--kl-coef {args.kl_coef} shapes the rewards of the advantage estimator; --loss-type sft_loss computes "
              "no advantages, so the reference model it loads would never be read: drop --kl-coef")
    if not (args.use_kl_loss and args.kl_loss_coef != 0):
        return
    from slime.backends.common import load_loss_function
    from slime.utils.hooks import HookError, add_method_dirs_to_path

    add_method_dirs_to_path(args.extra_python_path)
    try:
        loss = load_loss_function(args)
    except (HookError, ImportError):
        return  # the hook loader names a plugin that does not import when the trainer starts
    if not getattr(loss, "reads_reference", True):
        name = args.custom_loss_function_path if args.loss_type == "custom_loss" else args.loss_type
        _fail(f"--use-kl-loss --kl-loss-coef {args.kl_loss_coef}: the loss {name} has no KL term, so the reference "
              "model this would load is never read; drop --use-kl-loss (or give --kl-loss-coef 0), or use a loss "
              "with a KL term (policy_loss, the Combine losses)")


def _check_optimizer(args):
    if args.min_lr > args.lr:
        _fail(f"--min-lr {args.min_lr} exceeds --lr {args.lr}")
    if args.lr_warmup_fraction is not None:
        if not 0 <= args.lr_warmup_fraction <= 1:
            _fail(f"--lr-warmup-fraction must be in [0, 1], got {args.lr_warmup_fraction}")
        if args.lr_warmup_iters:
            _fail("--lr-warmup-fraction and --lr-warmup-iters are mutually exclusive")
    for name in ("adam_beta1", "adam_beta2"):
        if not 0 <= getattr(args, name) < 1:
            _fail(f"--{name.replace('_', '-')} must be in [0, 1), got {getattr(args, name)}")
    if args.use_lora:
        if not args.lora_target_modules:
            _fail("--lora-target-modules is empty")
        if args.lora_top_layers < 0:
            _fail(f"--lora-top-layers must be >= 0 (0: every layer), got {args.lora_top_layers}")
        if args.lora_rank < 1 or args.lora_alpha <= 0:
            _fail(f"--lora-rank must be >= 1 and --lora-alpha > 0 (got {args.lora_rank}, {args.lora_alpha})")
        if not 0 <= args.lora_dropout < 1:
            _fail(f"--lora-dropout must be in [0, 1), got {args.lora_dropout}")


def _derive_output_dirs(args):
    if args.run_dir is None:
        # Launchers must forward the resolved --run-dir to child processes (ranks would disagree on the time).
        args.run_dir = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
    if args.tb_dir is None:
        args.tb_dir = os.path.join(args.run_dir, "tensorboard")
    if args.wandb_dir is None:
        args.wandb_dir = os.path.join(args.run_dir, "wandb")
    if args.update_weight_disk_dir is None:
        args.update_weight_disk_dir = os.path.join(args.save or args.run_dir, "weights")
    args.use_tensorboard = True


def _derive_eval(args):
    if args.eval_function_path is None:
        args.eval_function_path = args.rollout_function_path
    for name, source in (("eval_temperature", "rollout_temperature"), ("eval_top_p", "rollout_top_p"),
                         ("eval_max_response_len", "rollout_max_response_len"),
                         ("eval_max_context_len", "rollout_max_context_len"), ("eval_reward_key", "reward_key")):
        if getattr(args, name) is None:
            setattr(args, name, getattr(args, source))
    args.eval_datasets = {}
    if args.eval_prompt_data is not None:
        pairs = args.eval_prompt_data
        if len(pairs) % 2:
            _fail(f"--eval-prompt-data takes NAME PATH pairs, got an odd number of values: {pairs}")
        for name, path in zip(pairs[::2], pairs[1::2]):
            if name in args.eval_datasets:
                _fail(f"--eval-prompt-data names {name!r} twice")
            if not Path(path.split("@[", 1)[0]).expanduser().is_file():
                _fail(f"--eval-prompt-data {name}: file {path!r} does not exist")
            args.eval_datasets[name] = path
    if (args.eval_interval is not None and not args.eval_datasets
            and args.eval_function_path == DEFAULT_ROLLOUT_FUNCTION):
        _fail("--eval-interval with the default --eval-function-path needs --eval-prompt-data NAME PATH ...")


def _derive_prm(args):
    if args.step_judge == "llm" and not (args.prm_enable or args.prm_engine_url):
        _fail("--step-judge llm needs a PRM engine: --prm-enable (hosted) or --prm-engine-url URL")
    if args.prm_type is None:
        args.prm_type = "llm" if (args.prm_enable or args.prm_engine_url) else "rules+embedding"
    if args.proxy_url and not args.conversation_store:
        _fail("--proxy-url attaches to a running proxy: also give --conversation-store, the store it writes")
    if not args.prm_enable:
        args.prm_num_gpus = 0
        return
    if args.prm_model_path is None:
        args.prm_model_path = args.hf_checkpoint
    if args.prm_num_gpus % args.prm_num_gpus_per_engine:
        _fail(f"--prm-num-gpus {args.prm_num_gpus} is not a multiple of --prm-num-gpus-per-engine "
              f"{args.prm_num_gpus_per_engine}")


def _note_ignored(args):
    ignored = dict(IGNORED_ON_FSDP)
    if args.train_backend != "megatron":
        ignored.update(MEGATRON_ONLY)
    args.ignored_flags = sorted(f"--{name.replace('_', '-')}" for name, default in ignored.items()
                                if getattr(args, name) != default)
    if args.ignored_flags:
        logger.info("accepted but without effect on the %s backend: %s", args.train_backend,
                    " ".join(args.ignored_flags))


def derive_train_iters(args: argparse.Namespace) -> None:
    """`train_iters = num_rollout × rollout_batch_size × n // global_batch_size` (None until num_rollout is known)."""
    if args.num_rollout is None:
        args.train_iters = None
        return
    args.train_iters = args.num_rollout * args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size
    if args.lr_decay_iters is None:
        args.lr_decay_iters = args.train_iters


def set_num_rollout_from_dataset(args: argparse.Namespace, num_prompts: int) -> None:
    """With `--num-epoch` and no `--num-rollout`: `num_rollout = num_epoch × (num_prompts // rollout_batch_size)`."""
    if args.num_epoch is None:
        return
    per_epoch = num_prompts // args.rollout_batch_size
    if per_epoch == 0:
        _fail(f"--prompt-data holds {num_prompts} prompts, fewer than --rollout-batch-size "
              f"{args.rollout_batch_size}: an epoch has no rollout")
    args.num_rollout_per_epoch = per_epoch
    if args.num_rollout is None:
        args.num_rollout = args.num_epoch * per_epoch
    derive_train_iters(args)
