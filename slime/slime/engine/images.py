"""Images in engine requests (Qwen2.5-VL architecture): decoding, preprocessing, pad expansion, model inputs.

A request's images arrive as base64 strings or `data:` URLs (SGLang's `image_data`, OpenAI's `image_url`
content parts), in the order of the image placeholders of its prompt. They are decoded, preprocessed
(slime.models.vision: the Qwen2-VL processor's output) and each prompt's `<|image_pad|>` is widened to its
image's token count, so the prompt ids the engine runs, and returns, are the ones a trainer scores.

The scheduler turns an image prompt into model inputs once, when it admits it (:func:`prompt_inputs`): the
token embeddings with the vision tower's features scattered over the pads (so prefill chunks may cut
anywhere, also inside an image) and the M-RoPE positions of the whole prompt plus its `rope_delta` (the
continuation's positions are `tokens so far + rope_delta` on all three rows; see slime.models.vlm).
"""

from __future__ import annotations

import binascii
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from slime.engine.protocol import APIError
from slime.models.vision import (
    ImageInputs,
    base64_bytes,
    expand_image_pads,
    image_token_counts,
    is_vision_config,
    preprocess_images,
    vision_constants,
)

# An image's decoded bytes and its pixel count are bounded before any work on it (a decompression bomb
# would otherwise exhaust memory); preprocessing then resizes to the model's max_pixels anyway.
MAX_IMAGE_BYTES = 32 * 1024 * 1024
MAX_IMAGE_PIXELS = 64 * 1024 * 1024


def is_vision_model(model) -> bool:
    """A model with a vision tower and M-RoPE positions (Qwen2-VL / Qwen2.5-VL architecture)."""
    return is_vision_config(model.config)


@dataclass
class PromptImages(ImageInputs):
    """The images of one prompt, preprocessed (the model's inputs), with what the prefix cache keys them by."""

    digests: list[bytes] = field(default_factory=list)  # one content hash per image

    @property
    def grid_list(self) -> list[list[int]]:
        return self.image_grid_thw.tolist()


class VisionSupport:
    """What the engine of a vision-language model needs to take images: the preprocessing constants and ids."""

    def __init__(self, model, model_path: str | Path):
        constants = vision_constants(model_path, model.config)
        if constants is None:
            raise ValueError(f"{model_path} is not a vision-language model (no vision_config / image_token_id)")
        self.spec, self.image_pad_id = constants

    def preprocess(self, images: list, param: str, wheres: list[str] | None = None) -> PromptImages:
        """Decode (base64 / data URL strings) and preprocess one prompt's images; 400 on bad data, naming
        the image's field (`wheres[i]`, or `param[i]`)."""
        wheres = wheres or [f"{param}[{i}]" for i in range(len(images))]
        decoded = [decode_image(image, where) for image, where in zip(images, wheres)]
        try:
            inputs: ImageInputs = preprocess_images(decoded, self.spec)
        except ValueError as exc:  # e.g. an aspect ratio over 200
            raise APIError(400, f"{param}: {exc}", param=param) from None
        digests = []
        offset = 0
        for t, h, w in inputs.image_grid_thw.tolist():
            rows = inputs.pixel_values[offset: offset + t * h * w]
            offset += t * h * w
            digest = hashlib.sha256(np.asarray([t, h, w], dtype=np.int64).tobytes())
            digest.update(np.ascontiguousarray(rows).tobytes())
            digests.append(digest.digest())
        return PromptImages(inputs.pixel_values, inputs.image_grid_thw, digests)

    def token_counts(self, images: PromptImages) -> list[int]:
        return image_token_counts(images.image_grid_thw, self.spec.merge_size)

    def expand(self, ids: list[int], images: PromptImages, param: str) -> list[int]:
        """A rendered prompt (one `<|image_pad|>` per image) with each pad widened to its image's tokens.

        A prompt whose pads are already expanded (as many as the images take) is returned as is."""
        found = sum(1 for t in ids if t == self.image_pad_id)
        total = sum(self.token_counts(images))
        if found == total and found != len(images.digests):
            return list(ids)
        try:
            return expand_image_pads(ids, images.image_grid_thw, self.image_pad_id, self.spec.merge_size)
        except ValueError as exc:
            raise APIError(400, f"{param}: {exc}", param=param) from None

    def check_expanded(self, ids: list[int], images: PromptImages, param: str) -> None:
        """input_ids must carry each image's pads already expanded, as the engine returns them."""
        found = sum(1 for t in ids if t == self.image_pad_id)
        counts = self.token_counts(images)
        if found != sum(counts):
            raise APIError(
                400,
                f"{param} has {found} image pad tokens (id {self.image_pad_id}) but its {len(counts)} image(s) take "
                f"{sum(counts)} ({', '.join(map(str, counts))}): input_ids must have each image's placeholder "
                "expanded to its token count (send `text` to have the engine expand it)",
                param=param,
            )

    def prefix_key(self, ids: list[int], images: PromptImages) -> list[int]:
        """The prompt ids with image k's pads replaced by a negative id derived from its contents.

        Two images of the same size have identical pad ids but different KV: the prefix cache keys on this,
        so a cached prefix is reused only when its images are the same pictures. Real ids are >= 0."""
        sentinels = [-1 - int.from_bytes(d[:7], "big") for d in images.digests]
        counts = self.token_counts(images)
        key, image, left = [], 0, counts[0] if counts else 0
        for tok in ids:
            if tok == self.image_pad_id and image < len(counts):
                key.append(sentinels[image])
                left -= 1
                if left == 0:
                    image += 1
                    left = counts[image] if image < len(counts) else 0
            else:
                key.append(tok)
        return key


def decode_image(data, where: str):
    """A PIL RGB image from a base64 string or a `data:image/...;base64,` URL; a 400 naming `where` otherwise."""
    from PIL import Image, UnidentifiedImageError

    if not isinstance(data, str):
        raise APIError(400, f"{where} must be a string (base64 image data or a data URL); got {type(data).__name__}",
                       param=where)
    payload = data.strip()
    if payload.startswith("data:"):
        header, sep, payload = payload.partition(",")
        if not sep or not header.endswith(";base64"):
            raise APIError(400, f"{where}: a data URL must look like 'data:image/png;base64,<data>'", param=where)
    elif payload.startswith(("http://", "https://", "file:")) or (len(payload) < 512 and Path(payload).suffix
                                                                   and Path(payload).is_file()):
        raise APIError(400, f"{where}: this engine takes images inline only (base64 or a data: URL), not URLs or "
                            "paths", param=where)
    if not payload:
        raise APIError(400, f"{where}: empty image data", param=where)
    if len(payload) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise APIError(400, f"{where}: image data over {MAX_IMAGE_BYTES} bytes", param=where)
    try:
        raw = base64_bytes(payload, validate=True)
    except (binascii.Error, ValueError):
        raise APIError(400, f"{where}: image data is not valid base64", param=where) from None
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if image.width * image.height > MAX_IMAGE_PIXELS:
                raise APIError(400, f"{where}: {image.width}x{image.height} pixels is over the limit "
                                    f"({MAX_IMAGE_PIXELS})", param=where)
            image.load()
            return image.convert("RGB")
    except APIError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise APIError(400, f"{where}: cannot decode the image ({type(exc).__name__}: {exc})", param=where) from None


@torch.inference_mode()
def prompt_inputs(model, prompt_ids: list[int], images: PromptImages) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(input embeddings (1, L, H) with the image features in place, M-RoPE positions (3, 1, L), rope_delta).

    The same embeddings a full forward builds (token embeddings, the vision tower's features scattered
    over the pads in order), computed once per request so that prefill chunks can pass slices of them."""
    from slime.models import vlm

    inner = vlm._inner(model)
    ids = torch.tensor([prompt_ids], device=model.device)
    embeds = inner.get_input_embeddings()(ids)
    pixel_values = torch.as_tensor(images.pixel_values, dtype=torch.float32).to(model.device, model.dtype)
    grid = torch.as_tensor(images.image_grid_thw, dtype=torch.long).to(model.device)
    features = inner.get_image_features(pixel_values, grid, return_dict=True).pooler_output
    features = torch.cat(list(features), dim=0).to(embeds.device, embeds.dtype)
    mask = (ids == model.config.image_token_id).unsqueeze(-1).expand_as(embeds)
    if int(mask[..., 0].sum()) != features.shape[0]:
        raise ValueError(f"{int(mask[..., 0].sum())} image pads for {features.shape[0]} image features")
    embeds = embeds.masked_scatter(mask, features)
    positions, deltas = vlm.mrope_positions(model, ids, grid)
    return embeds, positions, int(deltas[0])
