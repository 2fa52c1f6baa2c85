"""What the trainer, the screenshot policy and the engine share of slime.models.vision: the base64 reader (missing
padding tolerated, the engine's strict mode refusing junk), the model's vision constants read in one place, and a
sample's image inputs preprocessed once per distinct image (a GUI screenshot recurs in up to 3 step samples)."""

from __future__ import annotations

import base64
import binascii
import io

import numpy as np
import pytest

from slime.models import vision
from slime.models.vision import VisionSpec, base64_bytes, preprocess_images, sample_image_inputs, vision_constants


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


def test_a_samples_images_are_preprocessed_once_per_distinct_image(monkeypatch):
    spec = VisionSpec()
    calls = []
    real = vision.normalized_pixels
    monkeypatch.setattr(vision, "normalized_pixels", lambda image, s=spec: calls.append(1) or real(image, s))
    monkeypatch.setattr(vision, "_preprocessed", vision._PreprocessedImages(max_entries=2))
    first, second, third = (_png(84, 56, seed) for seed in (1, 2, 3))
    b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
    expected = preprocess_images([first, second, third], spec)
    calls.clear()

    one = sample_image_inputs({"images": [b64(first), b64(second)]}, None, spec)
    assert len(calls) == 2
    # the next step's sample shows the same two screens (one as a data URL) and a new one: only that is preprocessed
    two = sample_image_inputs({"images": [f"data:image/png;base64,{b64(first)}", b64(second), b64(third)]}, None, spec)
    assert len(calls) == 3
    np.testing.assert_array_equal(two.pixel_values, expected.pixel_values)
    np.testing.assert_array_equal(two.image_grid_thw, expected.image_grid_thw)
    np.testing.assert_array_equal(one.pixel_values, expected.pixel_values[: len(one.pixel_values)])
    two.pixel_values[:] = 0  # a sample's inputs are its own: the cached patches are not changed through them
    again = sample_image_inputs({"images": [b64(second), b64(third)]}, None, spec)
    assert len(calls) == 3
    np.testing.assert_array_equal(again.pixel_values, expected.pixel_values[len(one.pixel_values) // 2:])
    # bounded (2 entries here): the least recently used image was dropped and is preprocessed again
    sample_image_inputs({"images": [b64(first)]}, None, spec)
    assert len(calls) == 4
    # another spec is another preprocessing
    sample_image_inputs({"images": [b64(first)]}, None, VisionSpec(max_pixels=28 * 28 * 4))
    assert len(calls) == 5
