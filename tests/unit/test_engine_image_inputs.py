"""Request-side image handling of the engine (slime.engine.images, chat_parsing, generate_api) without a server."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from slime.engine.chat_parsing import ChatInputError, normalize_messages, normalize_messages_with_images
from slime.engine.generate_api import _images_per_prompt
from slime.engine.images import PromptImages, VisionSupport, decode_image
from slime.engine.protocol import APIError
from slime.models.vision import VisionSpec

PAD = 7


def _png(h=28, w=56, value=0) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((h, w, 3), value, dtype=np.uint8)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


class _Support(VisionSupport):
    def __init__(self):  # no model: the default spec and a made-up pad id
        self.spec, self.image_pad_id = VisionSpec(), PAD


def test_decode_image_accepts_base64_and_data_urls():
    raw = _png()
    assert decode_image(raw, "x").size == (56, 28)
    assert decode_image("data:image/png;base64," + raw, "x").mode == "RGB"
    assert decode_image(raw.rstrip("="), "x").size == (56, 28)  # missing padding is tolerated


@pytest.mark.parametrize("data, message", [
    ("@@@", "not valid base64"),
    (base64.b64encode(b"plain text").decode(), "cannot decode the image"),
    ("data:image/png,abc", "data URL must look like"),
    ("https://example.com/x.png", "inline only"),
    ("", "empty image data"),
    (5, "must be a string"),
])
def test_decode_image_errors_name_the_field(data, message):
    with pytest.raises(APIError) as excinfo:
        decode_image(data, "image_data[2]")
    assert excinfo.value.status == 400 and excinfo.value.param == "image_data[2]"
    assert message in excinfo.value.message


def test_expand_check_and_prefix_key():
    support = _Support()
    images = support.preprocess([_png(56, 56, 10), _png(56, 112, 200)], "image_data")
    assert images.grid_list == [[1, 4, 4], [1, 4, 8]] and support.token_counts(images) == [4, 8]
    ids = support.expand([1, PAD, 2, PAD, 3], images, "image_data")
    assert ids == [1] + [PAD] * 4 + [2] + [PAD] * 8 + [3]
    assert support.expand(ids, images, "image_data") == ids  # already expanded: kept
    support.check_expanded(ids, images, "input_ids")
    with pytest.raises(APIError, match="expanded"):
        support.check_expanded([1, PAD, 2, PAD, 3], images, "input_ids")
    with pytest.raises(APIError, match="1 image placeholders for 2 images"):
        support.expand([1, PAD, 2], images, "image_data")
    key = support.prefix_key(ids, images)
    assert [k >= 0 for k in key] == [t != PAD for t in ids]
    assert len(set(key[1:5])) == 1 and key[1] != key[6]  # one value per image, distinct images differ
    # the same picture keys the same; another picture of the same size does not
    again = support.preprocess([_png(56, 56, 10), _png(56, 112, 200)], "image_data")
    other = support.preprocess([_png(56, 56, 11), _png(56, 112, 200)], "image_data")
    assert support.prefix_key(ids, again) == key
    assert support.prefix_key(ids, other)[1] != key[1] and support.prefix_key(ids, other)[6] == key[6]
    assert isinstance(images, PromptImages) and len(images.digests) == 2


def test_normalize_messages_with_images_keeps_image_parts_in_order():
    url_a, url_b = "data:image/png;base64,AAA", "data:image/png;base64,BBB"
    messages = [{"role": "developer", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                                             {"type": "image_url", "image_url": {"url": url_a}},
                                             {"type": "text", "text": "c"},
                                             {"type": "image_url", "image_url": {"url": url_b}}]},
                {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}]
    out, images = normalize_messages_with_images(messages)
    assert out[0] == {"role": "system", "content": "sys"}
    assert out[1]["content"] == [{"type": "text", "text": "a\nb"}, {"type": "image"}, {"type": "text", "text": "c"},
                                 {"type": "image"}]
    assert out[2]["content"] == "x\ny"  # no images: the text-only normalization
    assert images == [(url_a, "messages[1].content[2].image_url.url"), (url_b, "messages[1].content[4].image_url.url")]
    # text-only models still refuse image parts
    with pytest.raises(ChatInputError, match="not supported"):
        normalize_messages(messages)


def test_image_data_per_prompt():
    assert _images_per_prompt(None, 2, True) == [None, None]
    assert _images_per_prompt("a", 1, False) == [["a"]]
    assert _images_per_prompt(["a", "b"], 1, False) == [["a", "b"]]
    assert _images_per_prompt([["a", "b"]], 1, False) == [["a", "b"]]
    assert _images_per_prompt([], 1, False) == [None]
    assert _images_per_prompt([["a"], None, "b", []], 4, True) == [["a"], None, ["b"], None]
    with pytest.raises(APIError, match="one entry per prompt"):
        _images_per_prompt(["a"], 2, True)
    with pytest.raises(APIError, match="image_data\\[1\\]"):
        _images_per_prompt(["a", 3], 2, True)
