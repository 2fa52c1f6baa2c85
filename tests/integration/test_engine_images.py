"""Images through the embedded engine (a real engine process serving the tiny Qwen2.5-VL of slime.models.tiny_vlm).

Every log-prob the engine reports for an image request must equal a full forward of the same ids and image
(slime.models.vlm.target_log_probs: what a trainer computes), whether the request came through /generate
(SGLang's `image_data`, with `text` or with already expanded `input_ids`) or /v1/chat/completions (OpenAI
`image_url` parts), alone or batched beside other image or text rows, from scratch or from the prefix cache.
The engine runs with 8-token prefill chunks so that chunk cuts fall inside images.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import torch

from slime.engine.launch import EngineProcess
from slime.models import vlm
from slime.models.tiny_vlm import IMAGE_PLACEHOLDER, build_tiny_vlm
from slime.models.vision import VisionSpec, preprocess_images

ATOL = 1e-4
PROMPT = f"Screen: {IMAGE_PLACEHOLDER} Where is the OK button? Answer with its coordinates please."


def _picture(h: int, w: int, flip: bool = False) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x * y) % 256], axis=-1).astype(np.uint8)
    return img[::-1, ::-1].copy() if flip else img


def _b64(img: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


IMG_A = _picture(112, 168)
IMG_B = np.random.default_rng(0).integers(0, 256, (112, 168, 3), dtype=np.uint8)  # A's size: A's pad ids
IMG_C = _picture(60, 90)  # another size: another token count and rope_delta


@pytest.fixture(scope="module")
def vlm_folder():
    return build_tiny_vlm()


@pytest.fixture(scope="module")
def server(vlm_folder, tmp_path_factory):
    log = tmp_path_factory.mktemp("vlm_engine") / "engine.log"
    with EngineProcess(vlm_folder, "--chunked-prefill-size", "8", log_path=log, ready_timeout=180) as proc:
        yield proc


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=180.0) as client:
        yield client


@pytest.fixture(scope="module")
def reference(vlm_folder):
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    model = AutoModelForImageTextToText.from_pretrained(vlm_folder, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(vlm_folder), VisionSpec.from_folder(vlm_folder)


def generate(http, **body) -> dict | list:
    response = http.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def full_forward(reference, ids: list[int], output_ids: list[int], images: list[np.ndarray] | None,
                 temperature: float = 1.0) -> list[float]:
    model, _, spec = reference
    pixels = grid = None
    if images:
        inputs = preprocess_images(images, spec)
        pixels, grid = inputs.pixel_values, inputs.image_grid_thw
    with torch.no_grad():
        return vlm.target_log_probs(model, ids + output_ids, len(ids), pixels, grid, temperature).tolist()


def engine_log_probs(out: dict) -> list[float]:
    return [entry[0] for entry in out["meta_info"]["output_token_logprobs"]]


def assert_matches_forward(reference, out: dict, images, temperature: float = 1.0):
    ids = out["meta_info"]["input_ids"]
    expected = full_forward(reference, ids, out["output_ids"], images, temperature)
    np.testing.assert_allclose(engine_log_probs(out), expected, atol=ATOL, rtol=0)


def image_request(image, max_new_tokens=8, **extra) -> dict:
    body = {"text": PROMPT, "image_data": [_b64(image)], "return_logprob": True,
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}}
    body.update(extra)
    return body


def test_generate_with_text_and_image_matches_a_full_forward(http, reference):
    model, tok, spec = reference
    out = generate(http, **image_request(IMG_A))
    meta = out["meta_info"]
    assert meta["image_grid_thw"] == [[1, 8, 12]]
    ids = meta["input_ids"]
    assert ids.count(model.config.image_token_id) == 8 * 12 // 4  # expanded: one pad per merged 2x2 block
    assert meta["prompt_tokens"] == len(ids) and len(out["output_ids"]) == 8
    assert_matches_forward(reference, out, [IMG_A])
    # the same with sampling at temperature 1 (log-probs of the sampled tokens, unscaled)
    sampled = generate(http, **image_request(IMG_A, sampling_params={"max_new_tokens": 8, "temperature": 1.0,
                                                                       "seed": 7, "ignore_eos": True}))
    assert_matches_forward(reference, sampled, [IMG_A])
    # prompt log-probs (logprob_start_len) over the image and the text after it
    scored = generate(http, **image_request(IMG_A, max_new_tokens=1, logprob_start_len=1))
    inputs = preprocess_images([IMG_A], spec)
    with torch.no_grad():
        prompt_lp = vlm.target_log_probs(model, ids, 1, inputs.pixel_values, inputs.image_grid_thw).tolist()
    np.testing.assert_allclose([e[0] for e in scored["meta_info"]["input_token_logprobs"]], prompt_lp,
                               atol=ATOL, rtol=0)
    # text prompts on the same engine carry no image fields
    text = generate(http, text="Where is the OK button?", return_logprob=True,
                    sampling_params={"max_new_tokens": 4, "temperature": 0.0})
    assert "image_grid_thw" not in text["meta_info"] and "input_ids" not in text["meta_info"]
    ids = tok.encode("Where is the OK button?")
    np.testing.assert_allclose(engine_log_probs(text), full_forward(reference, ids, text["output_ids"], None),
                               atol=ATOL, rtol=0)


def test_generate_with_expanded_input_ids_and_data_url(http, reference):
    first = generate(http, **image_request(IMG_A))
    ids = first["meta_info"]["input_ids"]
    again = generate(http, input_ids=ids, image_data="data:image/png;base64," + _b64(IMG_A), return_logprob=True,
                     sampling_params={"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True})
    assert again["output_ids"] == first["output_ids"]
    assert again["meta_info"]["input_ids"] == ids
    np.testing.assert_allclose(engine_log_probs(again), engine_log_probs(first), atol=ATOL, rtol=0)


def test_a_different_image_gives_different_log_probs(http, reference):
    a = generate(http, **image_request(IMG_A))
    b = generate(http, **image_request(IMG_B))
    assert a["meta_info"]["input_ids"] == b["meta_info"]["input_ids"]  # same size: same pad ids
    assert_matches_forward(reference, b, [IMG_B])
    # score B's tokens under image A too: the image, not only the sampled tokens, moves the log-probs
    under_a = full_forward(reference, b["meta_info"]["input_ids"], b["output_ids"], [IMG_A])
    # (a random tiny model reacts weakly to pixels; the engine's own error is ~1e-6)
    assert max(abs(x - y) for x, y in zip(engine_log_probs(b), under_a)) > 5 * ATOL  # ~9e-4 here


def test_a_batch_of_different_images_and_text_matches_single_requests(http, reference):
    model, tok, _ = reference
    single_a = generate(http, **image_request(IMG_A))
    single_c = generate(http, **image_request(IMG_C, text=f"{IMAGE_PLACEHOLDER} What is this?"))
    text_prompt = "A text-only prompt, longer than the others so that the rows are padded differently."
    sp = {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True}
    single_text = generate(http, text=text_prompt, return_logprob=True, sampling_params=sp)
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        prompts = [PROMPT, f"{IMAGE_PLACEHOLDER} What is this?", text_prompt]
        images = [[_b64(IMG_A)], [_b64(IMG_C)], None]
        outs = generate(http, text=[prompts[i] for i in order], image_data=[images[i] for i in order],
                        return_logprob=True, sampling_params=sp)
        singles = [single_a, single_c, single_text]
        for out, i in zip(outs, order):
            assert out["output_ids"] == singles[i]["output_ids"], f"order {order}, prompt {i}"
            np.testing.assert_allclose(engine_log_probs(out), engine_log_probs(singles[i]), atol=ATOL, rtol=0)
    batched = generate(http, text=[PROMPT, f"{IMAGE_PLACEHOLDER} What is this?"],
                       image_data=[[_b64(IMG_A)], [_b64(IMG_C)]], return_logprob=True, sampling_params=sp)
    assert_matches_forward(reference, batched[0], [IMG_A])
    assert_matches_forward(reference, batched[1], [IMG_C])


def _streamed(http, body: dict, started: threading.Event) -> tuple[dict, float]:
    """A streamed /generate: sets `started` once its first tokens arrive; returns its last event and when it came."""
    last = None
    with http.stream("POST", "/generate", json={**body, "stream": True}) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                last = json.loads(line[len("data: "):])
                if last.get("output_ids"):
                    started.set()
    return last, time.monotonic()


def test_image_and_text_requests_joining_a_running_batch(http, reference):
    """An image row joins while a text row decodes, and a text row joins while an image row decodes: the second
    request is sent once the first has streamed tokens, and ends before it (it joined the batch mid-decode)."""
    long_sp = {"max_new_tokens": 256, "temperature": 0.0, "ignore_eos": True}
    text_body = {"text": "Tell me a long story about buttons.", "return_logprob": True, "sampling_params": long_sp}
    image_long = image_request(IMG_C, max_new_tokens=256, text=f"{IMAGE_PLACEHOLDER} Describe it.")
    alone = {"text": generate(http, **text_body), "image": generate(http, **image_long),
             "short_image": generate(http, **image_request(IMG_A)),
             "short_text": generate(http, text="Short one.", return_logprob=True,
                                    sampling_params={"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True})}
    with ThreadPoolExecutor(1) as pool:
        for first, second in (("text", "short_image"), ("image", "short_text")):
            body_first = text_body if first == "text" else image_long
            body_second = image_request(IMG_A) if second == "short_image" else \
                {"text": "Short one.", "return_logprob": True,
                 "sampling_params": {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True}}
            started = threading.Event()
            running = pool.submit(_streamed, http, body_first, started)
            assert started.wait(120), "the first request streamed no token"
            joined = generate(http, **body_second)
            joined_at = time.monotonic()
            done, done_at = running.result()
            assert joined_at < done_at, "the second request did not run beside the first"
            for name, out in ((first, done), (second, joined)):
                assert out["output_ids"] == alone[name]["output_ids"], name
                np.testing.assert_allclose(engine_log_probs(out), engine_log_probs(alone[name]), atol=ATOL, rtol=0)
    assert_matches_forward(reference, alone["image"], [IMG_C])


def test_chat_completions_with_an_image_url_part(http, reference):
    model, tok, spec = reference
    messages = [{"role": "system", "content": "You look at screens."},
                {"role": "user", "content": [{"type": "text", "text": "Screen:"},
                                             {"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                                                 + _b64(IMG_A)}},
                                             {"type": "text", "text": "Where is OK?"}]}]
    response = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 6, "temperature": 0,
                                                       "logprobs": True, "return_token_ids": True})
    assert response.status_code == 200, response.text
    body = response.json()
    ids, output = body["prompt_token_ids"], body["choices"][0]["token_ids"]
    assert body["image_grid_thw"] == [[1, 8, 12]]
    # the model's chat template, one placeholder per image part, expanded
    rendered = tok.apply_chat_template([messages[0], {"role": "user", "content": [
        {"type": "text", "text": "Screen:"}, {"type": "image"}, {"type": "text", "text": "Where is OK?"}]}],
        tokenize=False, add_generation_prompt=True)
    assert f"Screen:{IMAGE_PLACEHOLDER}Where is OK?" in rendered
    from slime.models.vision import expand_image_pads
    expected_ids = expand_image_pads(tok.encode(rendered, add_special_tokens=False),
                                     preprocess_images([IMG_A], spec).image_grid_thw, model.config.image_token_id)
    assert ids == expected_ids
    logprobs = [entry["logprob"] for entry in body["choices"][0]["logprobs"]["content"]]
    np.testing.assert_allclose(logprobs, full_forward(reference, ids, output, [IMG_A]), atol=ATOL, rtol=0)
    # the same prompt through /generate gives the same tokens
    same = generate(http, input_ids=ids, image_data=[_b64(IMG_A)], return_logprob=True,
                    sampling_params={"max_new_tokens": 6, "temperature": 0.0})
    assert same["output_ids"] == output
    # streaming carries the ids and grids in its first chunk
    with http.stream("POST", "/v1/chat/completions", json={"messages": messages, "max_tokens": 3, "stream": True,
                                                           "return_token_ids": True}) as stream:
        first = next(line for line in stream.iter_lines() if line.startswith("data: "))
    assert '"image_grid_thw": [[1, 8, 12]]' in first and '"prompt_token_ids"' in first


def test_prefix_cache_keys_on_image_contents(http, reference):
    # a flushed cache, then turn 1, then turn 2 extending turn 1 with the same image: the prefix is reused
    assert http.post("/flush_cache").status_code == 200
    turn1 = generate(http, **image_request(IMG_A))
    ids1 = turn1["meta_info"]["input_ids"]
    extension = ids1 + turn1["output_ids"] + reference[1].encode(" And the Cancel button?")
    turn2 = generate(http, input_ids=extension, image_data=[_b64(IMG_A)], return_logprob=True,
                     sampling_params={"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True})
    assert turn2["meta_info"]["cached_tokens"] >= len(ids1)
    assert_matches_forward(reference, turn2, [IMG_A])
    # the same ids with a different picture of the same size must not reuse KV past the image's first pad
    other = generate(http, input_ids=extension, image_data=[_b64(IMG_B)], return_logprob=True,
                     sampling_params={"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True})
    first_pad = ids1.index(reference[0].config.image_token_id)
    assert other["meta_info"]["cached_tokens"] <= first_pad
    assert_matches_forward(reference, other, [IMG_B])


def _error(response, status=400) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    return error


def test_malformed_image_data_is_a_clear_400(http):
    sp = {"max_new_tokens": 2}
    error = _error(http.post("/generate", json={"text": PROMPT, "image_data": ["not base64 !!"], "sampling_params": sp}))
    assert error["param"] == "image_data[0]" and "base64" in error["message"]
    not_an_image = base64.b64encode(b"hello, I am not a picture").decode()
    error = _error(http.post("/generate", json={"text": PROMPT, "image_data": [not_an_image], "sampling_params": sp}))
    assert error["param"] == "image_data[0]" and "cannot decode the image" in error["message"]
    error = _error(http.post("/generate", json={"text": PROMPT, "image_data": ["https://example.com/a.png"]}))
    assert "inline only" in error["message"]
    error = _error(http.post("/generate", json={"text": PROMPT, "image_data": [12]}))
    assert "must be a string" in error["message"]
    # placeholders and images disagree
    error = _error(http.post("/generate", json={"text": "no placeholder here", "image_data": [_b64(IMG_A)]}))
    assert "0 image placeholders for 1 images" in error["message"]
    # input_ids must come expanded
    error = _error(http.post("/generate", json={"input_ids": [1, 2, 4102, 4105, 4103, 5],
                                                "image_data": [_b64(IMG_A)]}))
    assert error["param"] == "input_ids" and "expanded" in error["message"]
    # a batch needs one entry per prompt
    error = _error(http.post("/generate", json={"text": [PROMPT, PROMPT], "image_data": [_b64(IMG_A)]}))
    assert error["param"] == "image_data" and "one entry per prompt" in error["message"]
    # chat: the bad part is named
    bad = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url",
           "image_url": {"url": "data:image/png;base64,AAAA"}}]}], "max_tokens": 2}
    error = _error(http.post("/v1/chat/completions", json=bad))
    assert error["param"] == "messages[0].content[1].image_url.url" and "cannot decode" in error["message"]
    # the engine still serves
    assert generate(http, **image_request(IMG_C, max_new_tokens=2))["output_ids"]


def test_a_text_model_refuses_images(engine_server):
    with httpx.Client(base_url=engine_server.url, timeout=120.0) as client:
        error = _error(client.post("/generate", json={"text": "hi", "image_data": [_b64(IMG_C)]}))
        assert error["param"] == "image_data" and "text only" in error["message"]
        chat = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
            "url": "data:image/png;base64," + _b64(IMG_C)}}]}], "max_tokens": 2}
        error = _error(client.post("/v1/chat/completions", json=chat))
        assert "not supported" in error["message"]
