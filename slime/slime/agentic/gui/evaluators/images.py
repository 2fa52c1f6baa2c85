"""OSWorld's image metric ``compare_images`` (``desktop_env/evaluators/metrics/vlc.py``), with its semantics.

``compare_images(result, expected, **options)`` is the structural similarity (SSIM) of two images, in [-1, 1] and
1.0 for identical pictures:

    both images are converted to grayscale ("L") and resized with LANCZOS to one common size, the smaller of the
    two (w, h) sizes as Python's ``min`` orders tuples: by width first, height only breaking a tie -- so the result
    can be stretched or squashed, as in OSWorld; then scikit-image's ``structural_similarity`` on the two uint8
    arrays with its defaults (7x7 uniform window, data range 255 from the dtype).

    reference_base_result (None)  a baseline score b (the similarity of the untouched starting image): a result
                                  must beat it by the margin 0.01, and then scores (ssim - b) / (1 - b), else 0

Differences from OSWorld, all on inputs where OSWorld raises instead of scoring:

* a result file that is missing or does not open as an image scores 0 (a failed save is a failed task); a broken
  expected file still raises, since that is the task's fault, not the agent's;
* a common size under 7 pixels on a side (too small for SSIM's window, where scikit-image raises) scores 0;
* unknown options raise ValueError; OSWorld silently ignores them, which would score a comparison not made here.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

IMAGE_OPTIONS = {"reference_base_result": None}

# The margin a result must clear above `reference_base_result` before it earns anything (OSWorld's epsilon).
_BASE_MARGIN = 0.01
# scikit-image's default SSIM window side; an image narrower or shorter than this cannot be scored.
_SSIM_WINDOW = 7


def _open_gray(path: str):
    from PIL import Image

    with Image.open(path) as img:
        return img.convert("L")  # convert() loads the pixels, so the file may be closed afterwards


def _common_size(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    # OSWorld writes min(size1, size2) over (width, height) tuples, which Python orders lexicographically: the
    # narrower image's size wins whole (the wider one's height is never looked at unless the widths tie). That is
    # not the element-wise minimum, and can upscale one dimension; we keep it so scores match OSWorld's.
    return min(a, b)


def _ssim(first, second) -> float | None:
    import numpy as np
    from PIL import Image
    from skimage.metrics import structural_similarity

    size = _common_size(first.size, second.size)
    if min(size) < _SSIM_WINDOW:
        return None
    arrays = [np.array(img.resize(size, Image.Resampling.LANCZOS)) for img in (first, second)]
    return float(structural_similarity(arrays[0], arrays[1]))  # the same call OSWorld makes: all defaults


def _rescale(similarity: float, base: float | None) -> float:
    if base is None:
        return similarity
    if similarity >= base + _BASE_MARGIN:
        return (similarity - base) / (1 - base)
    return 0.0


def compare_images(result: str | None, expected: str | None, **options) -> float:
    unknown = sorted(set(options) - set(IMAGE_OPTIONS))
    if unknown:
        raise ValueError(f"compare_images: options not implemented: {', '.join(unknown)}")
    opt = {**IMAGE_OPTIONS, **options}
    if not result or not expected:
        return 0.0
    try:
        ours = _open_gray(result)
    except Exception as e:  # noqa: BLE001 - a result that is absent or not an image (a broken save) scores 0
        logger.info("compare_images: cannot read result %s: %s", result, e)
        return 0.0
    theirs = _open_gray(expected)
    similarity = _ssim(ours, theirs)
    if similarity is None:
        logger.info("compare_images: %s vs %s: common size below the SSIM window", result, expected)
        return 0.0
    base = opt["reference_base_result"]
    return _rescale(similarity, None if base is None else float(base))


__all__ = ["IMAGE_OPTIONS", "compare_images"]
