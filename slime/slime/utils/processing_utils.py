"""Upstream slime's `slime.utils.processing_utils`, for ported method folders: the tokenizer and (for a
vision-language checkpoint) the processor of `--hf-checkpoint`, and images as the engine takes them."""

from __future__ import annotations

import base64
import io
from typing import Any


def load_tokenizer(name_or_path: str, **_: Any):
    """The checkpoint's tokenizer (built-in names like `tiny` or `smollm2` included), loaded once per process."""
    from slime.rollout.data_source import load_tokenizer as load

    return load(name_or_path)


def load_processor(name_or_path: str, **kwargs: Any):
    """The checkpoint's multimodal processor, or None for a text-only model (as upstream answers)."""
    from slime.models import resolve_model_path

    try:
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(str(resolve_model_path(name_or_path)), **kwargs)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # a text model's "processor" is its tokenizer: upstream's callers test `if processor:` for images
    return processor if hasattr(processor, "image_processor") else None


def encode_image_for_rollout_engine(image) -> str:
    """A PIL image as the base64 PNG the engine's `image_data` takes."""
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


__all__ = ["encode_image_for_rollout_engine", "load_processor", "load_tokenizer"]
