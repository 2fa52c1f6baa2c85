"""What the policy sees of the screen: the screenshot (a PNG of the whole screen; a vision-language policy's
processor resizes it, :func:`slime.models.vision.smart_resize`), and for a text policy the same screen as text
(the OCR view of the VM server's ``/accessibility``, one line per text line with its position in the policy's 0-999
coordinates)."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET


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


__all__ = ["b64", "text_view"]
