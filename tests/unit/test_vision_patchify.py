"""Qwen2-VL image preprocessing without torchvision (slime.models.vision): layout, sizes, token counts.

The layout is pinned two ways: by inverting the patchify (and one explicit row-order check), and against
transformers' own PIL-backend processor (Qwen2VLImageProcessorPil imports without torchvision; skipped if
a future transformers drops it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slime.models.vision import (
    VisionSpec,
    expand_image_pads,
    image_token_counts,
    normalized_pixels,
    patchify,
    preprocess_images,
    smart_resize,
    unpatchify,
)

SPEC = VisionSpec()
SIZES = [(28, 28), (50, 70), (10, 1000), (57, 113), (300, 200), (1, 1), (640, 480)]


def _image(h, w, seed=0):
    return (np.random.default_rng(seed).random((h, w, 3)) * 255).astype(np.uint8)


@pytest.fixture(scope="module")
def reference():
    module = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    return module


def test_patchify_inverts_and_repeats_the_image_over_time():
    for h, w in [(28, 28), (56, 84), (112, 56)]:
        pixels = np.random.default_rng(h * w).standard_normal((3, h, w)).astype(np.float32)
        patches, grid = patchify(pixels, SPEC)
        assert grid == (1, h // 14, w // 14)
        assert patches.shape == (h * w // 196, 3 * 2 * 14 * 14)
        np.testing.assert_array_equal(unpatchify(patches, grid, SPEC), pixels)
        both = patches.reshape(-1, 3, 2, 14, 14)
        np.testing.assert_array_equal(both[:, :, 0], both[:, :, 1])  # a still image fills both frames


def test_rows_come_in_merge_blocks():
    # a 56x56 image is 4x4 patches in 2x2 merge blocks: rows 0-3 are block (0,0) = patches (0,0),(0,1),(1,0),(1,1)
    pixels = np.zeros((3, 56, 56), dtype=np.float32)
    for i in range(4):
        for j in range(4):
            pixels[:, i * 14:(i + 1) * 14, j * 14:(j + 1) * 14] = 10 * i + j
    patches, _ = patchify(pixels, SPEC)
    order = [int(row[0]) for row in patches]
    assert order == [0, 1, 10, 11, 2, 3, 12, 13, 20, 21, 30, 31, 22, 23, 32, 33]


def test_patchify_refuses_sides_off_the_grid():
    with pytest.raises(ValueError):
        patchify(np.zeros((3, 28, 30), dtype=np.float32), SPEC)


def test_sizes_and_token_counts():
    for h, w in SIZES:
        inputs = preprocess_images([_image(h, w)], SPEC)
        rh, rw = smart_resize(h, w, 28, SPEC.min_pixels, SPEC.max_pixels)
        assert rh % 28 == 0 and rw % 28 == 0 and SPEC.min_pixels <= rh * rw <= SPEC.max_pixels
        assert inputs.image_grid_thw.tolist() == [[1, rh // 14, rw // 14]]
        assert inputs.pixel_values.shape == (rh * rw // 196, 1176)
        assert inputs.pixel_values.dtype == np.float32
        assert image_token_counts(inputs.image_grid_thw) == [rh * rw // 28 // 28]
    # an image already on the grid is not resized: unpatchify gives back its normalized pixels
    img = _image(56, 84)
    inputs = preprocess_images([img], SPEC)
    restored = unpatchify(inputs.pixel_values, inputs.image_grid_thw[0], SPEC)
    mean, std = np.array(SPEC.image_mean)[:, None, None], np.array(SPEC.image_std)[:, None, None]
    np.testing.assert_allclose(restored, (img.transpose(2, 0, 1) / 255 - mean) / std, atol=1e-5)


def test_images_concatenate_in_order():
    a, b = _image(56, 56, 1), _image(112, 56, 2)
    both = preprocess_images([a, b], SPEC)
    assert both.image_grid_thw.tolist() == [[1, 4, 4], [1, 8, 4]]
    np.testing.assert_array_equal(both.pixel_values[:16], preprocess_images([a]).pixel_values)
    np.testing.assert_array_equal(both.pixel_values[16:], preprocess_images([b]).pixel_values)


def test_png_bytes_and_grey_images_are_read_as_rgb():
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(_image(40, 60)[:, :, 0]).save(buf, format="PNG")
    assert normalized_pixels(buf.getvalue(), SPEC).shape[0] == 3


def test_expand_image_pads():
    pad = 99
    grids = [[1, 4, 6], [1, 2, 2]]
    ids = [1, 7, pad, 8, 2, 7, pad, 8]
    out = expand_image_pads(ids, grids, pad)
    assert out == [1, 7] + [pad] * 6 + [8, 2, 7, pad, 8]
    with pytest.raises(ValueError):
        expand_image_pads(ids, grids[:1], pad)
    with pytest.raises(ValueError):  # expanding twice is a mismatch, not a silent double expansion
        expand_image_pads(out, grids, pad)


def test_spec_round_trips_through_preprocessor_config(tmp_path):
    spec = VisionSpec(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 64)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(spec.to_preprocessor_config()))
    assert VisionSpec.from_folder(tmp_path) == spec


def test_smart_resize_matches_transformers(reference):
    for h in range(1, 700, 13):
        for w in range(1, 700, 17):
            try:
                expected = reference.smart_resize(h, w)
            except ValueError:
                expected = None
            try:
                got = smart_resize(h, w)
            except ValueError:
                got = None
            assert got == expected, (h, w)
    assert smart_resize(1080, 1920, 28, 56 * 56, 28 * 28 * 1280) == reference.smart_resize(1080, 1920)


def test_preprocessing_matches_transformers(reference):
    from PIL import Image

    processor = reference.Qwen2VLImageProcessorPil()
    for h, w in SIZES:
        img = _image(h, w, seed=h + w)
        expected = processor(images=[Image.fromarray(img)], return_tensors="np")
        ours = preprocess_images([img], SPEC)
        np.testing.assert_array_equal(ours.image_grid_thw, expected["image_grid_thw"])
        np.testing.assert_allclose(ours.pixel_values, expected["pixel_values"], atol=1e-5, rtol=0)
    # several images in one call, and a non-default pixel budget
    imgs = [_image(90, 60, 3), _image(200, 400, 4)]
    small = VisionSpec(min_pixels=28 * 28 * 2, max_pixels=28 * 28 * 20)
    expected = reference.Qwen2VLImageProcessorPil(min_pixels=small.min_pixels, max_pixels=small.max_pixels)(
        images=[Image.fromarray(i) for i in imgs], return_tensors="np")
    ours = preprocess_images(imgs, small)
    np.testing.assert_array_equal(ours.image_grid_thw, expected["image_grid_thw"])
    np.testing.assert_allclose(ours.pixel_values, expected["pixel_values"], atol=1e-5, rtol=0)
