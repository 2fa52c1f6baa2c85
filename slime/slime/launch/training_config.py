"""A YAML training config (the OpenClaw-RL usage guide's `config/training_config.yaml`) as trainer flags.

    python -m slime.launch.training_config config/training_config.yaml [key=value ...] [--method rl] [--null]

prints the trainer flags the config stands for, one word per line (`--null`: NUL-separated, for the shell).
The entry points (`openclaw-*/run_*_training.sh`, `run_binary_rl.sh`, via `scripts/method_entry.sh`) append
them to the launch script they pick, so a config overrides the script's defaults and flags given on the command
line override the config. Hydra-style overrides follow the path: `training.learning_rate=2e-5`, `+key=value`
(add a key), `++key=value` (add or change), `~key` (delete). `${oc.env:HF_CKPT}` interpolations are resolved.

Every key is listed in `KEYS` (documented in config/README.md); a key that is not, or a value of the wrong
type, is an error naming the key's full dotted path (exit status 2). Keys of the usage guide that have no
counterpart in this framework are refused with the reason (`NOT_APPLICABLE`), never silently ignored.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


# What a key needs of the method (the registry's method objects say what they use; no names are listed here).
@dataclass(frozen=True)
class Needs:
    description: str  # for messages: "methods with hints"
    test: Callable[[Any], bool]


BOTH_SIGNALS = Needs("methods with both a reward and hints (Combine)", lambda m: m.uses_reward_judge and m.uses_hints)
HINTS = Needs("methods with hints (OPD, Combine)", lambda m: m.uses_hints)
TOP_K = Needs("the top-K methods", lambda m: "distill_topk" in m.training)


class ConfigError(ValueError):
    """A config that cannot become trainer flags; the message names the key."""


@dataclass(frozen=True)
class Key:
    paths: tuple[str, ...]  # dotted paths: the documented name first, then accepted aliases
    flag: str | None
    kind: str  # int | float | bool | str | names (a list of names or one comma-separated string)
    meaning: str
    needs: Needs | None = None  # which methods it applies to (None: all)
    to_flags: Callable[[Any], list[str]] | None = None  # default: [flag, value]


def _kl_flags(value) -> list[str]:
    # a non-zero KL coefficient needs the KL loss term switched on; 0 leaves it off (the trainer skips the reference)
    return (["--use-kl-loss"] if value else []) + ["--kl-loss-coef", _word(value)]


KEYS: tuple[Key, ...] = (
    Key(("model.path", "model.checkpoint_path", "model"), "--hf-checkpoint", "str",
        "policy checkpoint: a HF model folder or a built-in name (smollm2, tiny); `model: <path>` is short for "
        "`model.path`; also the KL reference and, on GPUs, the judge's default (it becomes HF_CKPT)"),
    Key(("model.name",), None, "str",
        "with model.path: the model name the API serves (--served-model-name); alone: the checkpoint, as model.path"),
    Key(("training.method",), None, "str",
        "a method of the registry (slime/slime/conversation/methods/registry.py) or an alias of one: the entry "
        "point's method or its top-K variant, which then selects the `_topk` launch script"),
    Key(("training.batch_size", "rollout.batch_size"), "--rollout-batch-size", "int",
        "judged turns per training step (one optimizer step per rollout batch)"),
    Key(("training.learning_rate", "training.lr"), "--lr", "float", "learning rate (AdamW)"),
    Key(("training.lr_decay_style",), "--lr-decay-style", "str", "constant, linear or cosine"),
    Key(("training.warmup_steps",), "--lr-warmup-iters", "int", "linear learning-rate warm-up, in optimizer steps"),
    Key(("training.max_steps",), "--num-rollout", "int",
        "training steps before the run stops (rollout batches; each is one optimizer step in these scripts)"),
    Key(("training.weight_decay",), "--weight-decay", "float", "AdamW weight decay"),
    Key(("training.max_grad_norm", "training.clip_grad"), "--clip-grad", "float", "gradient-norm clipping"),
    Key(("training.seed",), "--seed", "int", "random seed"),
    Key(("training.ppo_clip_ratio",), "--eps-clip", "float",
        "PPO clip range, lower side: ratio >= 1 - eps (the scripts keep the upper side at 0.28)"),
    Key(("training.ppo_clip_ratio_high",), "--eps-clip-high", "float", "PPO clip range, upper side: ratio <= 1 + eps"),
    Key(("training.kl_coef", "training.kl_loss_coef"), "--kl-loss-coef", "float",
        "KL loss to the reference (base) model; non-zero adds --use-kl-loss, 0 turns the term off",
        to_flags=_kl_flags),
    Key(("training.kl_loss_type",), "--kl-loss-type", "str", "KL estimator: k1, k2, k3 or low_var_kl"),
    Key(("training.entropy_coef",), "--entropy-coef", "float", "entropy bonus"),
    Key(("training.binary_weight",), "--combine-w-rl", "float", "Combine: weight of the binary-reward term",
        needs=BOTH_SIGNALS),
    Key(("training.opd_weight",), "--combine-w-opd", "float", "Combine: weight of the OPD (teacher) term",
        needs=BOTH_SIGNALS),
    Key(("training.hint_judge",), "--hint-judge-type", "str",
        "OPD/Combine hint judge: rules, llm or rules+llm (llm runs on the judge model)", needs=HINTS),
    Key(("training.distill_topk",), "--distill-topk", "int", "top-K methods: K teacher log-probs per token",
        needs=TOP_K),
    Key(("training.save_interval", "save_interval"), "--save-interval", "int", "checkpoint every N training steps"),
    Key(("training.checkpoint_dir", "checkpoint_dir"), "--save", "str", "checkpoint folder"),
    Key(("training.resume_from",), "--load", "str", "resume from this checkpoint folder"),
    Key(("training.lora.enabled",), "--use-lora", "bool",
        "train LoRA adapters: on GPUs the entry point runs the `_lora` script (same as --lora / USE_LORA=1)",
        to_flags=lambda value: ["--use-lora"] if value else []),
    Key(("training.lora.rank",), "--lora-rank", "int", "LoRA rank"),
    Key(("training.lora.alpha",), "--lora-alpha", "float", "LoRA alpha (scale alpha / rank)"),
    Key(("training.lora.dropout",), "--lora-dropout", "float", "LoRA dropout, in [0, 1)"),
    Key(("training.lora.target_modules",), "--lora-target-modules", "names",
        "module names that get adapters (a list, or one comma-separated string)"),
    Key(("rollout.temperature",), "--rollout-temperature", "float",
        "sampling temperature of the served policy (the OPD teacher scores at the same temperature)"),
    Key(("rollout.max_response_len", "rollout.max_new_tokens"), "--rollout-max-response-len", "int",
        "most tokens per reply"),
    Key(("rollout.max_context_len",), "--rollout-max-context-len", "int", "most tokens of prompt + reply"),
    Key(("rollout.top_p",), "--rollout-top-p", "float", "nucleus sampling"),
    Key(("rollout.top_k",), "--rollout-top-k", "int", "top-k sampling (-1: off)"),
    Key(("evaluation.judge_model",), "--prm-model-path", "str",
        "judge (PRM) model of the LLM judge; also the OPD teacher (default: the policy checkpoint)"),
    Key(("evaluation.judge_type",), "--prm-type", "str",
        "judge: llm (GPU scripts), rules, embedding, rules+embedding (CPU scripts) or module.path:factory"),
    Key(("evaluation.num_judges",), "--prm-m", "int", "judge votes per turn (majority vote)"),
    Key(("evaluation.majority_voting",), "--prm-m", "bool",
        "true: num_judges votes, majority wins (how the judge always works); false: one vote (--prm-m 1)",
        to_flags=lambda value: [] if value else ["--prm-m", "1"]),
    Key(("evaluation.judge_temperature", "evaluation.temperature"), "--prm-temperature", "float",
        "judge sampling temperature"),
    Key(("evaluation.judge_max_tokens", "evaluation.max_new_tokens"), "--prm-max-new-tokens", "int",
        "most tokens per judge vote"),
    Key(("evaluation.judge_timeout",), "--prm-timeout", "float", "seconds for one turn's whole judgement"),
)

# Keys of the usage guide's example config that this framework has no counterpart for: refused with the reason.
NOT_APPLICABLE = {
    "model.tokenizer_path": "the tokenizer is read from the checkpoint folder (model.path)",
    "training.gradient_accumulation_steps":
        "each rollout batch (training.batch_size) is one optimizer step, split into micro-batches by token "
        "count (--max-tokens-per-gpu); there is no separate accumulation count",
    "training.value_clip_ratio": "GRPO-style advantages use no value model, so there is no value clipping",
    "training.gae_lambda": "GRPO-style advantages use no value model, so there is no GAE",
    "training.teacher_temperature":
        "the teacher scores the student's tokens at the rollout temperature (rollout.temperature), as the OPD "
        "log-prob gap requires",
    "training.hint_extraction_model":
        "hints are extracted by the judge model (evaluation.judge_model) with the hint judge (training.hint_judge)",
    "rollout.num_workers": "the policy engines follow the GPU layout (ROLLOUT_GPUS, ROLLOUT_TP: scripts/README.md)",
    "rollout.parallel_envs": "conversation methods have no environments: every user session is served as it comes",
    "rollout.max_turns": "a conversation has as many turns as its user makes; every main-line turn is a sample",
    "rollout.session_aware": "sessions are always tracked (the X-Session-Id header, or inferred from the request)",
    "evaluation.eval_frequency":
        "conversation training has no held-out set to evaluate on; openclaw-test measures improvement with "
        "simulated users",
}

_BY_PATH = {path: key for key in KEYS for path in key.paths}
SECTIONS = ("model", "training", "training.lora", "rollout", "evaluation")
KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
         "names": "a list of names or a comma-separated string"}


def accepted_keys() -> list[str]:
    return [path for key in KEYS for path in key.paths]


# --- loading ------------------------------------------------------------------------------------------------


def load_config(path: str, overrides: Sequence[str] = ()) -> dict:
    """The YAML file with Hydra-style overrides applied and interpolations resolved, as plain Python values."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = OmegaConf.load(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except Exception as exc:  # YAML syntax
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not OmegaConf.is_dict(config):
        raise ConfigError(f"{path}: the config must be a mapping of sections (model, training, rollout, evaluation)")
    try:
        _apply_overrides(config, overrides)
        return OmegaConf.to_container(config, resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{path}: {exc}".splitlines()[0]) from None


def _apply_overrides(config, overrides: Sequence[str]) -> None:
    """Hydra's override grammar and semantics: `key=value` changes an existing key, `+key=value` adds a new one,
    `++key=value` adds or changes, `~key` deletes."""
    if not overrides:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    missing = object()
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise ConfigError(f"override: {exc}".splitlines()[0]) from None
    for override in parsed:
        key, text = override.key_or_group, override.input_line
        if override.package is not None:
            raise ConfigError(f"override {text!r}: packages (key@package) are not used by training configs")
        if override.is_sweep_override():
            raise ConfigError(f"override {text!r}: sweeps are not supported, give one value")
        present = OmegaConf.select(config, key, default=missing) is not missing
        if override.is_delete():
            if not present:
                raise ConfigError(f"override {text!r}: there is no {key!r} to delete")
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(config, parent) if parent else config
            del node[leaf]
            continue
        if override.is_add() and present:
            raise ConfigError(f"override {text!r}: {key!r} is already set; change it with {key}=..., or ++{key}=...")
        if not override.is_add() and not override.is_force_add() and not present:
            raise ConfigError(f"override {text!r}: the config has no {key!r}; add it with +{key}=...")
        OmegaConf.update(config, key, override.value(), merge=True, force_add=True)


# --- mapping ------------------------------------------------------------------------------------------------


@dataclass
class TrainingPlan:
    method: str | None  # the canonical method the config asks for (None: the config does not say)
    flags: list[str]


def training_flags(config: dict, *, method: str | None = None, source: str = "config") -> TrainingPlan:
    """Map a loaded config onto trainer flags. `method`: the entry point's method; the config's training.method
    must be it or its top-K variant, and keys that only some methods use are checked against it.
    All problems are collected and raised together as one ConfigError."""
    values, errors = _leaves(config)
    for path in values:
        if path in NOT_APPLICABLE:
            errors.append(f"{path!r} (a key of the OpenClaw-RL usage guide) has no counterpart here: "
                          f"{NOT_APPLICABLE[path]}; remove it")
        elif path not in _BY_PATH:
            errors.append(_unknown(path))
    values = {p: v for p, v in values.items() if p in _BY_PATH and v is not None}  # null: not set
    for path, value in values.items():
        problem = _type_problem(_BY_PATH[path], value)
        if problem:
            errors.append(f"{path!r} must be {problem}")
    if errors:
        raise ConfigError(_report(source, errors))

    chosen = _method(values.get("training.method"), method, errors)
    effective = chosen or (canonical_method(method) if method else None)
    flags: list[str] = []
    for key in KEYS:
        given = [(p, values[p]) for p in key.paths if p in values]
        if not given:
            continue
        if len({repr(v) for _, v in given}) > 1:
            errors.append(" and ".join(f"{p!r}" for p, _ in given) + f" set {key.flag} to different values "
                          f"({', '.join(repr(v) for _, v in given)}): keep one")
            continue
        path, value = given[0]
        if key.needs and effective and not key.needs.test(_method_object(effective)):
            errors.append(f"{path!r} applies to {key.needs.description} only, not to {effective}")
            continue
        flags += _flags(key, path, value, values)
    if values.get("evaluation.majority_voting") is False and values.get("evaluation.num_judges", 1) > 1:
        errors.append(f"'evaluation.majority_voting' is false but 'evaluation.num_judges' is "
                      f"{values['evaluation.num_judges']}: a single vote needs num_judges 1 (or drop one of them)")
    if errors:
        raise ConfigError(_report(source, errors))
    return TrainingPlan(chosen, flags)


def _leaves(config: dict, prefix: str = "") -> tuple[dict[str, Any], list[str]]:
    """Dotted path -> value of every setting; sections are walked, an unknown section is reported once."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, value in config.items():
        path = f"{prefix}{name}"
        if path in SECTIONS and not (path == "model" and not isinstance(value, dict)):  # `model: <path>` is a key
            if isinstance(value, dict):
                inner, problems = _leaves(value, path + ".")
                values.update(inner)
                errors += problems
            elif value is not None:  # an empty section is fine
                inside = [p for p in accepted_keys() if p.startswith(path + ".")]
                errors.append(f"{path!r} must be a mapping of keys ({', '.join(inside)}), got {value!r}")
        elif isinstance(value, dict) and path not in _BY_PATH and path not in NOT_APPLICABLE:
            errors.append(_unknown(path, section=True))
        else:
            values[path] = value
    return values, errors


def _unknown(path: str, section: bool = False) -> str:
    names = list(SECTIONS) if section else accepted_keys() + list(NOT_APPLICABLE)
    close = difflib.get_close_matches(path, names, n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {'section' if section else 'key'} {path!r}{hint}"


def _type_problem(key: Key, value) -> str | None:
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str) and value != "",
        "names": (isinstance(value, str) and value != "") or
                 (isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)),
    }[key.kind]
    if ok:
        return None
    flag = f" ({key.flag})" if key.flag else ""
    return f"{KINDS[key.kind]}{flag}, got {value!r} ({type(value).__name__})"


def _method_object(name: str):
    from slime.conversation.methods.registry import load_method

    return load_method(name)


def canonical_method(name: str) -> str:
    from slime.conversation.methods.registry import canonical_method_name  # the registry's names and aliases

    return canonical_method_name(name)


def _method(configured, entry: str | None, errors: list[str]) -> str | None:
    """The canonical method of training.method, checked against the entry point's method family."""
    if configured is None:
        return None
    try:
        chosen = canonical_method(configured)
    except ValueError as exc:
        errors.append(f"'training.method': {exc}")
        return None
    if ":" in chosen:
        errors.append(f"'training.method' {configured!r} is a plugin: the entry points run the built-in methods; "
                      "start a launch script with --conversation-method instead")
        return None
    if entry is not None:
        family = canonical_method(entry)
        if not isinstance(_method_object(chosen), type(_method_object(family))):  # itself or a variant of it
            shown = repr(configured) if configured == chosen else f"{configured!r} ({chosen})"
            errors.append(f"'training.method' is {shown} but this entry point trains {family}: "
                          f"use the entry point of {chosen}'s method folder, or set training.method to {family}")
    return chosen


def _flags(key: Key, path: str, value, values: dict) -> list[str]:
    if path == "model.name":
        has_path = any(p in values for p in _BY_PATH["model.path"].paths)
        return ["--served-model-name" if has_path else "--hf-checkpoint", value]
    if path == "training.method":
        return []
    if key.to_flags is not None:
        return key.to_flags(value)
    return [key.flag, _word(value)]


def _word(value) -> str:
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _report(source: str, errors: list[str]) -> str:
    text = f"{source}: {errors[0]}" if len(errors) == 1 else \
        f"{source}: {len(errors)} problems:\n" + "\n".join(f"  - {e}" for e in errors)
    if any(e.startswith("unknown ") for e in errors):
        text += f"\naccepted keys: {', '.join(accepted_keys())} (config/README.md)"
    return text


# --- command line ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m slime.launch.training_config", allow_abbrev=False,
        description="Print the trainer flags a YAML training config stands for (keys: config/README.md).")
    p.add_argument("config", help="YAML file")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="Hydra-style overrides: key=value, +key=value (new key), ++key=value, ~key (delete)")
    p.add_argument("--method", default=None,
                   help="the entry point's method: training.method must be it or its top-K variant")
    p.add_argument("--print-method", action="store_true",
                   help="print the method to run first (training.method, else --method), then the flags")
    p.add_argument("--null", action="store_true", help="NUL-separated output (for the shell), not one per line")
    args = p.parse_intermixed_args(argv)
    try:
        plan = training_flags(load_config(args.config, args.overrides), method=args.method, source=args.config)
        words = list(plan.flags)
        if args.print_method:
            method = plan.method or (canonical_method(args.method) if args.method else "")
            words.insert(0, method)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.null:
        sys.stdout.write("".join(word + "\0" for word in words))
    else:
        if any("\n" in word for word in words):
            print("error: a value contains a newline: use --null", file=sys.stderr)
            return 2
        sys.stdout.write("".join(word + "\n" for word in words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
