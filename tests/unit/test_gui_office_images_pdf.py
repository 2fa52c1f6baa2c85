"""OSWorld's compare_images (SSIM) and compare_pdfs (text ratio) on files drawn here: PIL images and matplotlib
PDFs, written to tmp_path."""

from __future__ import annotations

import pytest

pytest.importorskip("skimage")
pytest.importorskip("pypdf")

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402
from rapidfuzz import fuzz  # noqa: E402

from slime.agentic.gui.evaluators.images import IMAGE_OPTIONS, _common_size, compare_images  # noqa: E402
from slime.agentic.gui.evaluators.pdf import compare_pdfs  # noqa: E402


# ---------------------------------------------------------------------------------------------------------- images


def scene(size=(160, 120), *, marker=True, colour=(200, 40, 40)) -> Image.Image:
    """A picture with structure (gradient, shapes, lines): SSIM of flat images says little."""
    w, h = size
    ramp = np.tile(np.linspace(0, 255, w, dtype=np.uint8), (h, 1))
    img = Image.fromarray(np.stack([ramp, ramp[:, ::-1], np.full_like(ramp, 90)], axis=-1), "RGB")
    draw = ImageDraw.Draw(img)
    draw.rectangle([w // 8, h // 6, w // 2, h // 2], fill=colour)
    draw.ellipse([w // 2, h // 2, w - w // 8, h - h // 8], fill=(20, 20, 220))
    for x in range(0, w, max(1, w // 10)):
        draw.line([x, 0, x, h], fill=(255, 255, 255), width=1)
    if marker:
        draw.rectangle([w - w // 4, h // 10, w - w // 10, h // 3], fill=(0, 0, 0))
    return img


def save(img: Image.Image, path) -> str:
    img.save(path)
    return str(path)


def noise(size=(160, 120), seed=0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8), "RGB")


def ssim_at(a: str, b: str, size) -> float:
    """The SSIM of two files resized to `size`, by hand, to pin which common size compare_images picks."""
    from skimage.metrics import structural_similarity

    arrays = [np.array(Image.open(p).convert("L").resize(size, Image.Resampling.LANCZOS)) for p in (a, b)]
    return float(structural_similarity(*arrays))


def test_identical_images_score_one(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    b = save(scene(), tmp_path / "b.png")
    assert compare_images(a, b) == pytest.approx(1.0)
    assert isinstance(compare_images(a, b), float)


def test_colour_is_dropped_before_comparing(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    gray = save(scene().convert("L"), tmp_path / "gray.png")
    assert compare_images(a, gray) == pytest.approx(1.0)


def test_a_different_image_scores_well_below(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    other = save(noise(), tmp_path / "noise.png")
    assert compare_images(other, a) < 0.3
    small_change = save(scene(marker=False), tmp_path / "nomarker.png")
    assert 0.3 < compare_images(small_change, a) < 0.99


def test_same_content_at_another_size_still_scores_high(tmp_path):
    big = save(scene((320, 240)), tmp_path / "big.png")
    small = save(scene((320, 240)).resize((160, 120), Image.Resampling.LANCZOS), tmp_path / "small.png")
    assert compare_images(big, small) > 0.9
    assert compare_images(small, big) == pytest.approx(compare_images(big, small))


def test_common_size_is_the_lexicographic_min_as_in_osworld(tmp_path):
    # narrower wins whole, even when it is the taller one: (100, 300), not the element-wise (100, 150)
    assert _common_size((100, 300), (200, 150)) == (100, 300)
    assert _common_size((200, 150), (100, 300)) == (100, 300)
    assert _common_size((100, 300), (100, 150)) == (100, 150)
    # end to end: column stripes, 100x30 and 200x3. The lexicographic min is (100, 30): the flat 3-row image is
    # stretched to 30 rows and matches; the element-wise (100, 3) would be under SSIM's 7-pixel window (score 0).
    columns = (np.arange(200) // 10 % 2 * 200 + 30).astype(np.uint8)
    a = save(Image.fromarray(np.tile(columns, (30, 1))).resize((100, 30), Image.Resampling.LANCZOS), tmp_path / "a.png")
    b = save(Image.fromarray(np.tile(columns, (3, 1))), tmp_path / "b.png")
    assert compare_images(a, b) == pytest.approx(ssim_at(a, b, (100, 30)))
    assert compare_images(a, b) > 0.9
    assert compare_images(b, a) == pytest.approx(compare_images(a, b))


def test_reference_base_result_rescales_above_the_margin(tmp_path):
    assert IMAGE_OPTIONS == {"reference_base_result": None}
    a = save(scene(), tmp_path / "a.png")
    b = save(scene(marker=False), tmp_path / "b.png")
    raw = compare_images(b, a)
    assert 0.3 < raw < 0.99
    base = raw - 0.2
    assert compare_images(b, a, reference_base_result=base) == pytest.approx((raw - base) / (1 - base))
    assert compare_images(b, a, reference_base_result=0.25) == pytest.approx((raw - 0.25) / 0.75)
    assert compare_images(a, a, reference_base_result=0.5) == pytest.approx(1.0)
    assert compare_images(b, a, reference_base_result=None) == pytest.approx(raw)


def test_reference_base_result_below_the_margin_scores_zero(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    b = save(scene(marker=False), tmp_path / "b.png")
    raw = compare_images(b, a)
    assert compare_images(b, a, reference_base_result=raw - 0.005) == 0.0  # better than base, not by 0.01
    assert compare_images(b, a, reference_base_result=raw) == 0.0
    assert compare_images(b, a, reference_base_result=raw + 0.1) == 0.0
    assert compare_images(b, a, reference_base_result=raw - 0.011) > 0.0


def test_missing_or_unreadable_result_scores_zero(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    broken = tmp_path / "broken.png"
    broken.write_text("not an image")
    assert compare_images(None, a) == 0.0
    assert compare_images("", a) == 0.0
    assert compare_images(str(tmp_path / "missing.png"), a) == 0.0
    assert compare_images(str(broken), a) == 0.0
    assert compare_images(a, None) == 0.0


def test_a_missing_expected_file_is_the_tasks_fault_and_raises(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    with pytest.raises(FileNotFoundError):
        compare_images(a, str(tmp_path / "missing.png"))


def test_too_small_for_the_ssim_window_scores_zero(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    tiny = save(scene().resize((5, 40)), tmp_path / "tiny.png")
    assert compare_images(tiny, a) == 0.0


def test_unknown_option_raises(tmp_path):
    a = save(scene(), tmp_path / "a.png")
    with pytest.raises(ValueError, match="threshold"):
        compare_images(a, a, threshold=0.9)
    with pytest.raises(ValueError, match="threshold"):
        compare_images(None, a, threshold=0.9)  # even where the score would be 0 anyway


# ------------------------------------------------------------------------------------------------------------- pdf

ALPHA = "Quarterly report: revenue grew 12 percent"
BETA = "Minutes of the board meeting held on Monday"


def pdf(path, *pages: str) -> str:
    """One PDF page per argument, each line of an argument a separate text object (matplotlib, no new deps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as out:
        for page in pages:
            fig = plt.figure(figsize=(6, 4))
            for i, line in enumerate(page.split("\n")):
                fig.text(0.05, 0.9 - 0.1 * i, line)
            out.savefig(fig)
            plt.close(fig)
    return str(path)


def test_identical_text_scores_one(tmp_path):
    assert compare_pdfs(pdf(tmp_path / "a.pdf", ALPHA), pdf(tmp_path / "b.pdf", ALPHA)) == pytest.approx(1.0)


def test_different_text_scores_the_ratio(tmp_path):
    edited = ALPHA.replace("12", "15").replace("revenue", "profit")
    score = compare_pdfs(pdf(tmp_path / "a.pdf", edited), pdf(tmp_path / "b.pdf", ALPHA))
    assert score == pytest.approx(fuzz.ratio(edited, ALPHA) / 100)
    assert 0.5 < score < 1.0
    assert compare_pdfs(pdf(tmp_path / "c.pdf", BETA), pdf(tmp_path / "d.pdf", ALPHA)) < 0.5


def test_pages_are_read_in_order_and_kept_apart(tmp_path):
    two_pages = pdf(tmp_path / "two.pdf", ALPHA, BETA)
    one_page = pdf(tmp_path / "one.pdf", f"{ALPHA}\n{BETA}")
    assert compare_pdfs(two_pages, one_page) == pytest.approx(1.0)
    swapped = pdf(tmp_path / "swapped.pdf", BETA, ALPHA)
    assert compare_pdfs(swapped, two_pages) < 0.9


def test_lists_are_averaged_over_the_expected_files(tmp_path):
    exp = [pdf(tmp_path / "e1.pdf", ALPHA), pdf(tmp_path / "e2.pdf", BETA)]
    res = [pdf(tmp_path / "r1.pdf", ALPHA), pdf(tmp_path / "r2.pdf", ALPHA)]
    assert compare_pdfs(res, exp) == pytest.approx((1.0 + fuzz.ratio(ALPHA, BETA) / 100) / 2)
    assert compare_pdfs(res[:1], exp) == pytest.approx(0.5)  # an expected file without a result adds 0


def test_an_unreadable_pair_adds_zero_to_the_average(tmp_path):
    exp = [pdf(tmp_path / "e1.pdf", ALPHA), pdf(tmp_path / "e2.pdf", BETA)]
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    assert compare_pdfs([str(broken), pdf(tmp_path / "r2.pdf", BETA)], exp) == pytest.approx(0.5)
    assert compare_pdfs([str(tmp_path / "missing.pdf"), pdf(tmp_path / "r3.pdf", BETA)], exp) == pytest.approx(0.5)
    assert compare_pdfs([None, pdf(tmp_path / "r4.pdf", BETA)], exp) == pytest.approx(0.5)
    assert compare_pdfs(str(broken), exp[0]) == 0.0
    assert compare_pdfs(exp[0], str(tmp_path / "missing.pdf")) == 0.0  # as OSWorld: either side failing adds 0


def test_none_or_misshapen_result_scores_zero(tmp_path):
    exp = pdf(tmp_path / "e.pdf", ALPHA)
    assert compare_pdfs(None, exp) == 0.0
    assert compare_pdfs(None, [exp]) == 0.0
    assert compare_pdfs(exp, [exp]) == 0.0  # one path against a list: OSWorld's pairs never read
    with pytest.raises(ValueError):
        compare_pdfs([exp], [])
