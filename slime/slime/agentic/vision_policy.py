"""A turn policy for a vision-language model (Qwen2.5-VL architecture): messages carry screenshots as image parts.

An image part is ``{"type": "image", "image": <base64 PNG/JPEG>}`` (what Qwen's chat templates render as one
``<|vision_start|><|image_pad|><|vision_end|>``). The policy renders the messages with the model's template, widens
each image's pad to the image's token count (computed from its size with the model's preprocessing constants:
``smart_resize`` then one token per merged patch block, the engine's own rule) and sends the ids with the images as
``image_data``. So the prompt ids it records are token for token the ones the engine ran (the engine checks the
widths and returns its ids; a mismatch is an error) and the trainer scores them with the same images
(``Sample.multimodal_inputs``). Counting tokens this way also makes the context fitting exact: an image costs what
it costs, not one token.
"""

from __future__ import annotations

import io
from functools import lru_cache
from pathlib import Path

from slime.agentic.agent_loop import EngineTurnPolicy
from slime.models.chat_template import render_prompt_ids
from slime.models.vision import VisionSpec, base64_bytes, expand_image_pads, smart_resize, vision_constants

IMAGE_PART_TYPES = ("image", "image_url")


def image_part(image_b64: str) -> dict:
    """A message content part holding one image (base64 PNG/JPEG, no data: prefix)."""
    return {"type": "image", "image": image_b64}


def _part_image(part: dict) -> str | None:
    if part.get("type") == "image":
        return part.get("image")
    if part.get("type") == "image_url":
        url = part.get("image_url")
        return url.get("url") if isinstance(url, dict) else url
    return None


def message_images(messages: list[dict]) -> list[str]:
    """Every image of the messages, in the order a chat template renders their pads."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES:
                    image = _part_image(part)
                    if not isinstance(image, str) or not image:
                        raise ValueError("an image part carries no image (base64 string or data: URL)")
                    out.append(image)
    return out


def image_size(image: str) -> tuple[int, int]:
    """(height, width) of a base64 image or data: URL, read from its header (PIL does not decode the pixels)."""
    from PIL import Image

    with Image.open(io.BytesIO(base64_bytes(image))) as img:
        return img.height, img.width


def image_grid(height: int, width: int, spec: VisionSpec) -> tuple[int, int, int]:
    """The (t, h, w) patch grid the model's preprocessing gives an image of this size (slime.models.vision)."""
    h, w = smart_resize(height, width, spec.factor, spec.min_pixels, spec.max_pixels)
    return 1, h // spec.patch_size, w // spec.patch_size


@lru_cache(maxsize=8)
def policy_vision_constants(model_path: str) -> tuple[VisionSpec, int]:
    """(preprocessing constants, image pad id) of the policy's model folder; a text model is refused. Cached: the
    rollout makes a policy per episode, and each would read the model's config again."""
    constants = vision_constants(model_path)
    if constants is None:
        raise ValueError(f"{model_path} is not a vision-language model (no vision_config / image_token_id): "
                         "screenshot observations need one (e.g. Qwen2.5-VL); a text model takes text observations")
    return constants


class VisionTurnPolicy(EngineTurnPolicy):
    """:class:`EngineTurnPolicy` for messages with image parts (module docstring)."""

    def __init__(self, client, tokenizer, sampling_params: dict, max_context_tokens: int, model_path: str | Path):
        super().__init__(client, tokenizer, sampling_params, max_context_tokens)
        self.spec, self.image_pad_id = policy_vision_constants(str(model_path))
        self._grids: dict[str, tuple[int, int, int]] = {}  # an episode re-renders its screenshots every step

    def grid_of(self, image: str) -> tuple[int, int, int]:
        grid = self._grids.get(image)
        if grid is None:
            grid = self._grids[image] = image_grid(*image_size(image), self.spec)
        return grid

    def render(self, messages: list[dict], tools: list[dict]) -> list[int]:
        ids = render_prompt_ids(self.tokenizer, messages, tools)
        images = message_images(messages)
        if not images:
            return ids
        return expand_image_pads(ids, [self.grid_of(i) for i in images], self.image_pad_id, self.spec.merge_size)

    def images_of(self, messages: list[dict]) -> list[str]:
        return message_images(messages)


__all__ = ["VisionTurnPolicy", "image_grid", "image_part", "image_size", "message_images", "policy_vision_constants"]
