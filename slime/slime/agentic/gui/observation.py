"""What the policy sees of the screen: the screenshot (a PNG of the whole screen; a vision-language policy's
processor resizes it, :func:`slime.models.vision.smart_resize`), and for a text policy the same screen as text
(the OCR view of the VM server's ``/accessibility``, one line per text line with its position in the policy's 0-999
coordinates)."""

from __future__ import annotations

import base64
import io
import math
import re
import xml.etree.ElementTree as ET

from slime.models.vision import base64_bytes


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def downscale_png(image_b64: str, max_pixels: int | None) -> str:
    """The screenshot (base64 PNG) scaled down, aspect kept, to at most `max_pixels` pixels; as is when it fits or
    `max_pixels` is None. The policy's coordinates are relative (0-999), so a smaller screenshot clicks the same
    places; what it saves is image tokens (a 1280x720 screen is 1196 Qwen2.5-VL tokens, 640x360 is 299)."""
    if not max_pixels:
        return image_b64
    from PIL import Image

    with Image.open(io.BytesIO(base64_bytes(image_b64))) as img:
        if img.width * img.height <= max_pixels:
            return image_b64
        scale = math.sqrt(max_pixels / (img.width * img.height))
        size = (max(1, int(img.width * scale)), max(1, int(img.height * scale)))
        small = img.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="PNG")
    return b64(out.getvalue())


# One text-view line: the words, then where they are. The words come first because a policy finds the line by
# the element's name and copies what follows the match: measured on the 0.5B model after SFT on lines written
# `[x, y] text`, 9 of 16 greedy misses named the right element and clicked another line's coordinates. (OSWorld's
# linearized accessibility tree also puts the name before the position.)
_VIEW_LINE = re.compile(r"^(.*) \[(\d+), (\d+)\]$")


def view_line(text: str, x: int, y: int) -> str:
    return f"{text} [{x}, {y}]"


def parse_view_line(line: str) -> tuple[str, int, int] | None:
    """(text, x, y) of one text-view line, None for a line that is not one."""
    m = _VIEW_LINE.match(line)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def text_view(accessibility_xml: str, screen: tuple[int, int], max_lines: int = 200) -> str:
    """The OCR view as lines ``text [x, y]`` (the centre of each text line, in 0-999 relative coordinates, which is
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
    return "\n".join(view_line(text, cx, cy) for cy, cx, text in lines[:max_lines])


__all__ = ["b64", "downscale_png", "parse_view_line", "text_view", "view_line"]
