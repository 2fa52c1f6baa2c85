"""Loading models for serving, and building the replacement model for a weight update."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from slime.models.vision import is_vision_config

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


class WeightUpdateError(ValueError):
    """The given folder cannot replace the served weights (missing, wrong shape, not a model)."""


def has_vision_config(path: str | Path) -> bool:
    """Whether a model folder is a vision-language model (its config has a vision tower)."""
    config = Path(path) / "config.json"
    try:
        return config.exists() and is_vision_config(json.loads(config.read_text()))
    except (OSError, ValueError):
        return False


def load_model(path: str | Path, dtype: str = "float32", device: str = "cpu"):
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    # AutoModelForCausalLM refuses a Qwen2.5-VL config; the image-text class loads the vision tower too
    auto = AutoModelForImageTextToText if has_vision_config(path) else AutoModelForCausalLM
    model = auto.from_pretrained(str(path), dtype=DTYPES[dtype])
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    return model


def is_lora_adapter(path: Path) -> bool:
    return (path / "adapter_config.json").exists()


def load_update(path: str | Path, base_path: str | Path, current_model, dtype: str, device: str):
    """Build the model a weight update asks for, without touching the one being served.

    A full-weight folder is loaded as is. A LoRA adapter folder (PEFT format) is applied to a fresh copy
    of the *base* model and merged, so successive adapter versions never stack on each other.
    """
    path = Path(path)
    if not path.is_dir():
        raise WeightUpdateError(f"model_path {str(path)!r} is not a folder")
    if not is_lora_adapter(path) and not (path / "config.json").exists():
        raise WeightUpdateError(f"{path} holds neither config.json (full weights) nor adapter_config.json (LoRA)")
    try:
        model = _load_adapter_merged(path, base_path, dtype, device) if is_lora_adapter(path) else \
            load_model(path, dtype, device)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:  # missing files, shape mismatches
        raise WeightUpdateError(f"{path}: cannot load: {exc}") from exc
    _check_compatible(current_model, model, path)
    return model


def _load_adapter_merged(path: Path, base_path: str | Path, dtype: str, device: str):
    from peft import PeftModel

    base = load_model(base_path, dtype, device)
    adapter_base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if adapter_base and Path(adapter_base).is_dir() and Path(adapter_base).resolve() != Path(base_path).resolve():
        log.warning("adapter %s was trained on %s but is applied to %s", path, adapter_base, base_path)
    model = PeftModel.from_pretrained(base, str(path)).merge_and_unload()
    model.eval()
    model.requires_grad_(False)
    return model


def _check_compatible(current, new, path: Path):
    """The tokenizer and the serving code stay the same across updates, so the shapes must too."""
    from slime.engine.images import is_vision_model

    if is_vision_model(current) != is_vision_model(new):
        kind = "a vision-language" if is_vision_model(current) else "a text-only"
        raise WeightUpdateError(f"{path}: the served model is {kind} model and this one is not")
    old_cfg, new_cfg = current.config.get_text_config(), new.config.get_text_config()
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
        a, b = getattr(old_cfg, key, None), getattr(new_cfg, key, None)
        if a != b:
            raise WeightUpdateError(f"{path}: {key} is {b}, the served model has {a}")
