"""What the trainer, the screenshot policy and the engine share of slime.models.vision: the base64 reader (missing
padding tolerated, the engine's strict mode refusing junk) and the model's vision constants read in one place."""

from __future__ import annotations

import base64
import binascii
import io

import numpy as np
import pytest

from slime.models.vision import VisionSpec, base64_bytes, vision_constants


def _png(width: int, height: int, seed: int = 0) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _unpadded(raw: bytes) -> str:
    text = base64.b64encode(raw).decode()
    assert text.endswith("=")  # the case under test: a payload whose padding was dropped
    return text.rstrip("=")


def test_base64_bytes_reads_bare_data_urls_and_unpadded_payloads():
    raw = b"\x89PNG-ish bytes"
    padded = base64.b64encode(raw).decode()
    for data in (padded, _unpadded(raw), f"  data:image/png;base64,{_unpadded(raw)}\n"):
        assert base64_bytes(data) == raw
        assert base64_bytes(data, validate=True) == raw
    assert base64_bytes(padded[:4] + "@" + padded[4:]) == raw  # lenient: characters outside the alphabet skipped
    with pytest.raises(binascii.Error):
        base64_bytes(padded[:4] + "@" + padded[4:], validate=True)  # the engine's mode: refused


def test_every_reader_of_a_screenshot_takes_it_unpadded():
    from slime.agentic.gui.observation import downscale_png
    from slime.agentic.vision_policy import image_size
    from slime.models.vision import image_from_base64

    raw = next(r for r in (_png(64, 36, seed) for seed in range(8)) if base64.b64encode(r).endswith(b"="))
    data = _unpadded(raw)
    assert image_size(data) == (36, 64)
    assert image_from_base64(data).size == (64, 36)
    assert base64_bytes(downscale_png(data, 16 * 9)) != raw  # scaled: it was read, not passed through
    assert image_size(downscale_png(data, 16 * 9)) == (9, 16)


def test_vision_constants_of_a_vlm_folder_and_none_for_a_text_model():
    from transformers import AutoConfig

    from slime.models.tiny import build_tiny_model
    from slime.models.tiny_vlm import build_tiny_vlm

    folder = build_tiny_vlm()
    config = AutoConfig.from_pretrained(folder)
    assert vision_constants(folder) == (VisionSpec.from_folder(folder), config.image_token_id)
    assert vision_constants(folder, config) == vision_constants(folder)
    assert vision_constants(build_tiny_model()) is None
