"""What the policy sees of the screen: the screenshot resized as Qwen's processors do (:func:`smart_resize`), and for
a text policy, the same screen as text (the OCR view of the VM server's ``/accessibility``, one line per text line
with its position in the policy's 0-999 coordinates)."""

from __future__ import annotations

import base64
import io
import re
import xml.etree.ElementTree as ET

# Qwen3-VL's processor (upstream's): 32-pixel patches x 2 merge... factor 32; Qwen2.5-VL's: 28
DEFAULT_FACTOR = 32
MIN_PIXELS = 4 * 32 * 32
MAX_PIXELS = 16 * 16 * 4 * 12800  # upstream's max_pixels (about 13.1 million)


def smart_resize(height: int, width: int, factor: int = DEFAULT_FACTOR, min_pixels: int = MIN_PIXELS,
                 max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(height, width) as Qwen's processors resize (:func:`slime.models.vision.smart_resize`), with the GUI's
    defaults: 1920x1080 -> 1920x1088 with factor 32."""
    from slime.models.vision import smart_resize as qwen_smart_resize

    return qwen_smart_resize(height, width, factor, min_pixels, max_pixels)


def resized_png(png: bytes, *, factor: int = DEFAULT_FACTOR, min_pixels: int = MIN_PIXELS,
                max_pixels: int = MAX_PIXELS) -> bytes:
    """The screenshot at its smart_resize size (PNG); the same bytes when no resize is needed."""
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    h, w = smart_resize(image.height, image.width, factor, min_pixels, max_pixels)
    if (w, h) == image.size:
        return png
    buf = io.BytesIO()
    image.convert("RGB").resize((w, h), Image.Resampling.BICUBIC).save(buf, format="PNG")
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def text_view(accessibility_xml: str, screen: tuple[int, int], max_lines: int = 200) -> str:
    """The OCR view as lines ``[x, y] text`` (the centre of each text line, in 0-999 relative coordinates, which is
    what the policy clicks with), top to bottom; empty when nothing was read."""
    if not accessibility_xml.strip():
        return ""
    try:
        root = ET.fromstring(accessibility_xml)
    except ET.ParseError:
        return ""
    width, height = screen
    lines = []
    for node in root.iter():
        name = (node.get("name") or "").strip()
        if not name or node.get("x") is None:
            continue
        try:
            x, y, w, h = (float(node.get(k)) for k in ("x", "y", "w", "h"))
        except (TypeError, ValueError):
            continue
        cx = round((x + w / 2) * 999 / max(1, width))
        cy = round((y + h / 2) * 999 / max(1, height))
        lines.append((cy, cx, re.sub(r"\s+", " ", name)))
    lines.sort()
    return "\n".join(f"[{cx}, {cy}] {text}" for cy, cx, text in lines[:max_lines])


__all__ = ["DEFAULT_FACTOR", "MAX_PIXELS", "MIN_PIXELS", "b64", "resized_png", "smart_resize", "text_view"]
