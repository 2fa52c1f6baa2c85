"""Qwen2-VL / Qwen2.5-VL image preprocessing in numpy + PIL (no torchvision).

transformers' default Qwen2-VL image processor needs torchvision, which does not import beside our torch,
so the engine and the trainer turn images into model inputs here. The output is the processor's, to the
layout: `pixel_values` is `(num_patches, C * temporal_patch_size * patch_size * patch_size)` with the
patches of each `merge_size x merge_size` block next to each other (the vision tower's patch merger folds
each block of rows into one language-model token), and `image_grid_thw` is `[[1, h_patches, w_patches]]`
per image. A still image fills both temporal slots of a patch (Qwen's patch embedding is a 3D
convolution over `temporal_patch_size` frames). Each image takes `t*h*w / merge_size**2` `<|image_pad|>`
tokens in the prompt: the chat template writes one and :func:`expand_image_pads` widens it.

tests/unit/test_vision_patchify.py checks all of it against transformers' PIL-backend processor
(`Qwen2VLImageProcessorPil`, which imports without torchvision) and by inverting the patchify.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections import OrderedDict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

# The CLIP (OpenAI) statistics that Qwen2-VL and Qwen2.5-VL normalize with.
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class VisionSpec:
    """The preprocessing constants of a Qwen2.5-VL checkpoint (its preprocessor_config.json)."""

    patch_size: int = 14
    temporal_patch_size: int = 2
    merge_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 1280
    image_mean: tuple[float, ...] = OPENAI_CLIP_MEAN
    image_std: tuple[float, ...] = OPENAI_CLIP_STD

    @property
    def factor(self) -> int:
        """Resized sides are multiples of this: one merged token covers factor x factor pixels."""
        return self.patch_size * self.merge_size

    def to_preprocessor_config(self) -> dict:
        """The keys transformers' Qwen2-VL image processors read (so AutoImageProcessor loads the folder too)."""
        return {
            "image_processor_type": "Qwen2VLImageProcessor",
            "processor_class": "Qwen2_5_VLProcessor",
            "do_convert_rgb": True, "do_resize": True, "do_rescale": True, "do_normalize": True,
            "resample": 3,  # PIL bicubic
            "rescale_factor": 1 / 255,
            "image_mean": list(self.image_mean), "image_std": list(self.image_std),
            "patch_size": self.patch_size, "temporal_patch_size": self.temporal_patch_size,
            "merge_size": self.merge_size, "min_pixels": self.min_pixels, "max_pixels": self.max_pixels,
            "size": {"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels},
        }

    @classmethod
    def from_folder(cls, folder: str | Path) -> "VisionSpec":
        """Read a model folder's preprocessor_config.json (defaults for keys it lacks)."""
        raw = json.loads((Path(folder) / "preprocessor_config.json").read_text())
        size = raw.get("size") or {}
        raw.setdefault("min_pixels", size.get("shortest_edge", cls.min_pixels))
        raw.setdefault("max_pixels", size.get("longest_edge", cls.max_pixels))
        known = {f.name for f in fields(cls)}
        values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in raw.items() if k in known}
        return cls(**values)


@dataclass
class ImageInputs:
    """What the model's forward takes for the images of one prompt (concatenated in prompt order)."""

    pixel_values: np.ndarray  # float32 (num_patches, C * T * P * P)
    image_grid_thw: np.ndarray  # int64 (num_images, 3)


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 28 * 28 * 1280) -> tuple[int, int]:
    """(height, width) as Qwen2-VL's processor resizes: multiples of `factor`, area within [min_pixels,
    max_pixels], aspect ratio nearly kept (the GUI observations use it too, with Qwen3-VL's factor 32; the token
    count must match what a GPU engine's processor computes, also for very thin images)."""
    if min(height, width) < 1:
        raise ValueError(f"an image of {width}x{height} pixels cannot be resized")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio over 200: {width}x{height}")
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def load_image(image) -> "Image.Image":
    """A PIL RGB image from a PIL image, PNG/JPEG bytes, a path or an HWC uint8 array."""
    from PIL import Image

    if isinstance(image, Image.Image):
        pass
    elif isinstance(image, (bytes, bytearray)):
        image = Image.open(io.BytesIO(image))
    elif isinstance(image, (str, Path)):
        image = Image.open(image)
    elif isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    else:
        raise TypeError(f"cannot read an image from {type(image).__name__}")
    return image if image.mode == "RGB" else image.convert("RGB")


def normalized_pixels(image, spec: VisionSpec = VisionSpec()) -> np.ndarray:
    """The image resized (PIL bicubic) to its smart_resize size, rescaled to [0, 1] and normalized: float32 CHW."""
    from PIL import Image

    image = load_image(image)
    h, w = smart_resize(image.height, image.width, spec.factor, spec.min_pixels, spec.max_pixels)
    if (w, h) != image.size:
        image = image.resize((w, h), Image.Resampling.BICUBIC)
    pixels = np.asarray(image, dtype=np.float32).transpose(2, 0, 1) * np.float32(1 / 255)
    mean = np.asarray(spec.image_mean, dtype=np.float32)[:, None, None]
    std = np.asarray(spec.image_std, dtype=np.float32)[:, None, None]
    return (pixels - mean) / std


def patchify(pixels: np.ndarray, spec: VisionSpec = VisionSpec()) -> tuple[np.ndarray, tuple[int, int, int]]:
    """CHW pixels (sides multiples of spec.factor) -> (patches (h*w, C*T*P*P), grid (1, h, w)).

    Row order: merge blocks in raster order, and inside a block its merge_size x merge_size patches in raster
    order. Each row is (C, T, P, P) flattened, the image repeated over T."""
    c, height, width = pixels.shape
    p, m, t = spec.patch_size, spec.merge_size, spec.temporal_patch_size
    if height % (p * m) or width % (p * m):
        raise ValueError(f"sides {height}x{width} are not multiples of {p * m}")
    gh, gw = height // p, width // p
    x = pixels.reshape(c, gh // m, m, p, gw // m, m, p)
    x = x.transpose(1, 4, 2, 5, 0, 3, 6)  # (block row, block col, row in block, col in block, C, P, P)
    x = np.broadcast_to(x[:, :, :, :, :, None], (*x.shape[:5], t, p, p))
    return np.ascontiguousarray(x.reshape(gh * gw, c * t * p * p)), (1, gh, gw)


def unpatchify(patches: np.ndarray, grid_thw: Sequence[int], spec: VisionSpec = VisionSpec(),
               channels: int = 3) -> np.ndarray:
    """The inverse of :func:`patchify` for one image: CHW pixels from its rows (temporal slot 0)."""
    _, gh, gw = (int(v) for v in grid_thw)
    p, m, t = spec.patch_size, spec.merge_size, spec.temporal_patch_size
    x = np.asarray(patches).reshape(gh // m, gw // m, m, m, channels, t, p, p)[:, :, :, :, :, 0]
    return x.transpose(4, 0, 2, 5, 1, 3, 6).reshape(channels, gh * p, gw * p)


def preprocess_images(images: Sequence, spec: VisionSpec = VisionSpec()) -> ImageInputs:
    """Model inputs for the images of one prompt, in the order their placeholders appear."""
    if not images:
        raise ValueError("no images to preprocess")
    return _concatenated([patchify(normalized_pixels(image, spec), spec) for image in images])


def _concatenated(patched: Sequence[tuple[np.ndarray, tuple[int, int, int]]]) -> ImageInputs:
    """One prompt's inputs from its images' (patches, grid) in prompt order."""
    return ImageInputs(np.concatenate([patches for patches, _ in patched], axis=0),
                       np.asarray([grid for _, grid in patched], dtype=np.int64))


def image_token_counts(image_grid_thw, merge_size: int = 2) -> list[int]:
    """How many `<|image_pad|>` tokens each image takes: one per merge_size x merge_size block of patches."""
    return [int(t) * int(h) * int(w) // merge_size**2 for t, h, w in np.asarray(image_grid_thw).tolist()]


def expand_image_pads(token_ids: Sequence[int], image_grid_thw, image_pad_id: int, merge_size: int = 2) -> list[int]:
    """Widen the k-th `<|image_pad|>` of a rendered prompt to image k's token count.

    Raises ValueError when the prompt's placeholders and the images disagree in number: a silent mismatch
    would put one image's features on another's tokens (or fail deep inside the model)."""
    counts = image_token_counts(image_grid_thw, merge_size)
    found = sum(1 for tok in token_ids if tok == image_pad_id)
    if found != len(counts):
        raise ValueError(f"the prompt has {found} image placeholders for {len(counts)} images "
                         "(expand each rendered prompt once)")
    out: list[int] = []
    images = iter(counts)
    for tok in token_ids:
        out.extend([tok] * next(images) if tok == image_pad_id else [tok])
    return out


def is_vision_config(config) -> bool:
    """A model config with a vision tower and M-RoPE image tokens (Qwen2-VL / Qwen2.5-VL architecture): a transformers
    config object or a config.json dict. The engine, its weight loader and the trainer all decide by this."""
    get = config.get if isinstance(config, dict) else (lambda key: getattr(config, key, None))
    return get("vision_config") is not None and get("image_token_id") is not None


def spec_for_model(folder: str | Path | None, config) -> VisionSpec:
    """The preprocessing constants of a model: its folder's preprocessor_config.json, else its vision config."""
    if folder is not None and (Path(folder) / "preprocessor_config.json").exists():
        return VisionSpec.from_folder(folder)
    vision = config.vision_config
    return VisionSpec(patch_size=getattr(vision, "patch_size", 14),
                      temporal_patch_size=getattr(vision, "temporal_patch_size", 2),
                      merge_size=getattr(vision, "spatial_merge_size", 2))


def vision_constants(folder: str | Path, config=None) -> tuple[VisionSpec, int] | None:
    """(preprocessing constants, image pad token id) of a model folder, None for a text-only model. `config` is the
    model's transformers config when the caller has it loaded (else it is read from the folder). The trainer, the
    screenshot policy and the engine read both here, so that they widen an image's pads to the same count."""
    if config is None:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(folder))
    if not is_vision_config(config):
        return None
    return spec_for_model(folder, config), int(config.image_token_id)


def base64_bytes(data: str, *, validate: bool = False) -> bytes:
    """The bytes of base64 data or of a `data:...;base64,` URL's payload. Missing `=` padding is added: clients
    and some encoders drop it, and the engine takes such images, so every reader of a sample's images must too.
    `validate` refuses characters outside the base64 alphabet (binascii.Error) instead of skipping them."""
    import base64

    payload = data.strip()
    if payload.startswith("data:"):
        payload = payload.partition(",")[2]
    return base64.b64decode(payload + "=" * (-len(payload) % 4), validate=validate)


def image_from_base64(data: str) -> "Image.Image":
    """A PIL RGB image from base64 data or a `data:image/...;base64,` URL (what a sample keeps of its images; the
    engine's validating decoder, slime.engine.images.decode_image, reads the same strings to the same pixels)."""
    return load_image(base64_bytes(data))


class _PreprocessedImages:
    """The preprocessed inputs of recent images, by a digest of their bytes and the spec (least recently used
    dropped first). A GUI episode shows each screenshot in up to `history` consecutive step prompts, so one screen
    recurs in up to 3 samples; without this each recurrence is resized and patchified again. (A row keeps its
    inputs across the passes of a step, `FSDPActor._attach_images`: the recurrence is across rows.) Consecutive
    rows of an episode share their screens, so a few entries are enough, and few they must be: one is large (a
    1280x720 screenshot is ~4800 patches x 1176 float32 values, ~22 MB; 8 of them ~180 MB)."""

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self.entries: OrderedDict[tuple[bytes, VisionSpec], tuple[np.ndarray, tuple[int, int, int]]] = OrderedDict()

    def get(self, data: str, spec: VisionSpec) -> tuple[np.ndarray, tuple[int, int, int]]:
        raw = base64_bytes(data)
        key = (hashlib.sha1(raw).digest(), spec)
        hit = self.entries.get(key)
        if hit is not None:
            self.entries.move_to_end(key)
            return hit
        patches, grid = patchify(normalized_pixels(raw, spec), spec)
        patches.flags.writeable = False  # shared by every sample that shows this image
        self.entries[key] = (patches, grid)
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)
        return patches, grid


_preprocessed = _PreprocessedImages()


def sample_image_inputs(multimodal_inputs: dict | None, multimodal_train_inputs: dict | None,
                        spec: VisionSpec) -> ImageInputs | None:
    """The model inputs of a sample's images: its preprocessed `multimodal_train_inputs` when it has them, else
    its base64 `multimodal_inputs["images"]` preprocessed as the engine did (each distinct image once, see
    :class:`_PreprocessedImages`); None for a text sample."""
    if multimodal_train_inputs and multimodal_train_inputs.get("pixel_values") is not None:
        return ImageInputs(np.asarray(multimodal_train_inputs["pixel_values"], dtype=np.float32),
                           np.asarray(multimodal_train_inputs["image_grid_thw"], dtype=np.int64).reshape(-1, 3))
    images = (multimodal_inputs or {}).get("images")
    if not images:
        return None
    return _concatenated([_preprocessed.get(image, spec) if isinstance(image, str)
                          else patchify(normalized_pixels(image, spec), spec) for image in images])
