"""The tiny Qwen2.5-VL (slime.models.tiny_vlm) and its forward passes (slime.models.vlm): the folder loads with
transformers' own classes, the chat template renders images and tools, cached generation agrees with a full
forward, images and M-RoPE positions matter, a left-padded batch decodes like single rows, gradients reach the
vision tower."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from slime.models import vlm
from slime.models.tiny_vlm import IMAGE_PLACEHOLDER, build_tiny_vlm
from slime.models.vision import VisionSpec, expand_image_pads, preprocess_images

TOOLS = [{"type": "function", "function": {"name": "click", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def vlm_folder():
    return build_tiny_vlm()


@pytest.fixture(scope="module")
def loaded(vlm_folder):
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    model = AutoModelForImageTextToText.from_pretrained(vlm_folder, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(vlm_folder), VisionSpec.from_folder(vlm_folder)


def _gradient(h, w, flip=False):
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) % 256], axis=-1).astype(np.uint8)
    return img[::-1, ::-1].copy() if flip else img


def _prompt(tok, model, spec, images, text="Where is the button?"):
    """Rendered, tokenized, pads expanded: what an engine builds from a chat request with images."""
    content = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}} for _ in images]
    messages = [{"role": "user", "content": content + [{"type": "text", "text": text}]}]
    ids = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tok.encode(ids, add_special_tokens=False)
    inputs = preprocess_images(images, spec)
    return expand_image_pads(ids, inputs.image_grid_thw, model.config.image_token_id, spec.merge_size), inputs


def test_folder_loads_with_transformers_classes(vlm_folder, loaded):
    from transformers import AutoImageProcessor, Qwen2_5_VLForConditionalGeneration

    model, tok, spec = loaded
    assert type(model) is Qwen2_5_VLForConditionalGeneration
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    # the folder's preprocessor config loads transformers' PIL processor, which agrees with ours
    processor = AutoImageProcessor.from_pretrained(vlm_folder)
    img = _gradient(70, 130)
    expected = processor(images=[img], return_tensors="np")
    ours = preprocess_images([img], spec)
    np.testing.assert_array_equal(ours.image_grid_thw, expected["image_grid_thw"])
    np.testing.assert_allclose(ours.pixel_values, expected["pixel_values"], atol=1e-5, rtol=0)


def test_chat_template_renders_images_and_tools(loaded):
    model, tok, _ = loaded
    messages = [
        {"role": "system", "content": "You operate a computer."},
        {"role": "user", "content": [{"type": "text", "text": "Screen: "}, {"type": "image"},
                                     {"type": "text", "text": " click OK"}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "click", "arguments": {"x": 3}}}]},
        {"role": "tool", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]
    text = tok.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert f"<|im_start|>user\nScreen: {IMAGE_PLACEHOLDER} click OK<|im_end|>" in text
    assert '<tools>\n{"type": "function", "function": {"name": "click"' in text
    assert '<tool_call>\n{"name": "click", "arguments": {"x": 3}}\n</tool_call>' in text
    assert "<tool_response>\ndone\n</tool_response>" in text and "<|im_start|>user\nthanks<|im_end|>" in text
    assert text.count("<|image_pad|>") == 1 and text.endswith("<|im_start|>assistant\n")
    # each vision token is one special id, which decoding with skip_special_tokens drops
    ids = tok.encode(IMAGE_PLACEHOLDER, add_special_tokens=False)
    assert ids == [model.config.vision_start_token_id, model.config.image_token_id, model.config.vision_end_token_id]
    assert tok.decode(ids, skip_special_tokens=True) == ""


def test_generate_log_probs_match_a_full_forward(loaded):
    model, tok, spec = loaded
    ids, inputs = _prompt(tok, model, spec, [_gradient(60, 90), _gradient(40, 40, flip=True)])
    assert ids.count(model.config.image_token_id) == sum(int(t * h * w) // 4 for t, h, w in inputs.image_grid_thw)
    for temperature in (0.0, 1.0):
        gen = vlm.generate(model, ids, inputs.pixel_values, inputs.image_grid_thw, max_new_tokens=8,
                           temperature=temperature, generator=torch.Generator().manual_seed(3))
        assert len(gen.tokens) == 8 and gen.rope_delta < 0  # images shorten the position range
        with torch.no_grad():
            full = vlm.target_log_probs(model, ids + gen.tokens, len(ids), inputs.pixel_values,
                                        inputs.image_grid_thw, temperature=temperature)
        torch.testing.assert_close(torch.tensor(gen.log_probs), full, atol=1e-5, rtol=0)
    # transformers' own generate (given mm_token_type_ids, without which it uses 1D positions) agrees
    greedy = vlm.generate(model, ids, inputs.pixel_values, inputs.image_grid_thw, max_new_tokens=8)
    input_ids = torch.tensor([ids])
    hf = model.generate(input_ids=input_ids, pixel_values=torch.from_numpy(inputs.pixel_values),
                        image_grid_thw=torch.from_numpy(inputs.image_grid_thw),
                        mm_token_type_ids=(input_ids == model.config.image_token_id).int(),
                        max_new_tokens=8, do_sample=False, eos_token_id=None, output_logits=True,
                        return_dict_in_generate=True)
    assert hf.sequences[0, len(ids):].tolist() == greedy.tokens
    hf_log_probs = [float(torch.log_softmax(step[0].float(), -1)[t]) for step, t in zip(hf.logits, greedy.tokens)]
    torch.testing.assert_close(torch.tensor(hf_log_probs), torch.tensor(greedy.log_probs), atol=1e-5, rtol=0)


def test_image_and_positions_change_the_output(loaded):
    model, tok, spec = loaded
    ids, inputs = _prompt(tok, model, spec, [_gradient(112, 168)])
    _, other = _prompt(tok, model, spec, [_gradient(112, 168, flip=True)])
    target = ids + tok.encode(" the OK button", add_special_tokens=False)
    with torch.no_grad():
        base = vlm.target_log_probs(model, target, len(ids), inputs.pixel_values, inputs.image_grid_thw)
        swapped = vlm.target_log_probs(model, target, len(ids), other.pixel_values, other.image_grid_thw)
        # the model's default for pixel inputs without mm_token_type_ids: 1D positions (not Qwen's M-RoPE)
        flat = model(input_ids=torch.tensor([target]), pixel_values=torch.from_numpy(inputs.pixel_values),
                     image_grid_thw=torch.from_numpy(inputs.image_grid_thw)).logits[0, len(ids) - 1:-1]
        flat = torch.log_softmax(flat, -1).gather(-1, torch.tensor(target[len(ids):])[:, None]).squeeze(-1)
    assert (base - swapped).abs().max() > 1e-3
    assert (base - flat).abs().max() > 1e-3


def test_left_padded_batch_prefills_and_decodes_like_single_rows(loaded):
    """The position rule the engine follows, on the model itself: rows of a left-padded batch carry their own images
    and rope_delta, and a row's next position is (its real token count + its rope_delta), whatever the padding (the
    engine's own batches: tests/integration/test_engine_images.py)."""
    from transformers import DynamicCache

    model, tok, spec = loaded
    rows = [_prompt(tok, model, spec, [_gradient(56, 56)], "a"),
            _prompt(tok, model, spec, [_gradient(84, 140), _gradient(30, 60)], "a longer question here")]
    singles = [vlm.generate(model, ids, inp.pixel_values, inp.image_grid_thw, max_new_tokens=2) for ids, inp in rows]
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((2, width), tok.pad_token_id)
    mask = torch.zeros((2, width), dtype=torch.long)
    for b, (ids, _) in enumerate(rows):
        input_ids[b, width - len(ids):] = torch.tensor(ids)
        mask[b, width - len(ids):] = 1
    pixel_values = torch.from_numpy(np.concatenate([inp.pixel_values for _, inp in rows]))
    grids = torch.from_numpy(np.concatenate([inp.image_grid_thw for _, inp in rows]))
    positions, deltas = vlm.mrope_positions(model, input_ids, grids, mask)
    assert deltas.tolist() == [s.rope_delta for s in singles]
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                    pixel_values=pixel_values, image_grid_thw=grids, logits_to_keep=1)
        first = torch.log_softmax(out.logits[:, -1], -1)
        tokens = torch.tensor([[s.tokens[0]] for s in singles])
        mask = torch.cat([mask, torch.ones((2, 1), dtype=torch.long)], dim=1)
        lengths = [len(ids) for ids, _ in rows]
        out = model(input_ids=tokens, attention_mask=mask, position_ids=vlm.decode_positions(lengths, deltas),
                    cache=cache, use_cache=True)
        second = torch.log_softmax(out.logits[:, -1], -1)
    for b, single in enumerate(singles):
        assert int(first[b].argmax()) == single.tokens[0] and int(second[b].argmax()) == single.tokens[1]
        torch.testing.assert_close(torch.stack([first[b, single.tokens[0]], second[b, single.tokens[1]]]),
                                   torch.tensor(single.log_probs), atol=1e-5, rtol=0)


def test_gradients_reach_the_vision_tower(loaded):
    model, tok, spec = loaded
    ids, inputs = _prompt(tok, model, spec, [_gradient(56, 56)])
    target = ids + tok.encode(" yes", add_special_tokens=False)
    model.zero_grad()
    loss = -vlm.target_log_probs(model, target, len(ids), inputs.pixel_values, inputs.image_grid_thw).sum()
    loss.backward()
    visual = model.model.visual
    for param in (visual.patch_embed.proj.weight, visual.blocks[0].attn.qkv.weight, visual.merger.mlp[0].weight):
        assert param.grad is not None and param.grad.abs().sum() > 0
    model.zero_grad()


def test_chunked_prefill_split_between_images(loaded):
    """The model itself under chunked prefill, the reference for the engine's: a chunk given the slice of the whole
    prompt's M-RoPE positions (and here the pixel rows of the images whose pads it holds, cut between images) matches
    a full forward. The engine passes embedding slices instead and may cut inside an image
    (tests/integration/test_engine_images.py, 8-token chunks)."""
    from transformers import DynamicCache

    from slime.models.vision import image_token_counts

    model, tok, spec = loaded
    ids, inputs = _prompt(tok, model, spec, [_gradient(56, 56), _gradient(84, 56)], "words between and after")
    positions, _ = vlm.mrope_positions(model, ids, inputs.image_grid_thw)
    first_pads = [i for i, t in enumerate(ids) if t == model.config.image_token_id]
    cut = first_pads[image_token_counts(inputs.image_grid_thw)[0] - 1] + 2  # just after image 0's <|vision_end|>
    rows = int(np.prod(inputs.image_grid_thw[0]))  # pixel rows of image 0
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        for (start, end), pixels, grids in [((0, cut), inputs.pixel_values[:rows], inputs.image_grid_thw[:1]),
                                            ((cut, len(ids)), inputs.pixel_values[rows:], inputs.image_grid_thw[1:])]:
            out = model(input_ids=torch.tensor([ids[start:end]]), position_ids=positions[:, :, start:end], cache=cache,
                        use_cache=True, pixel_values=torch.from_numpy(pixels), image_grid_thw=torch.from_numpy(grids))
        full = vlm.forward_logits(model, ids, inputs.pixel_values, inputs.image_grid_thw)
    torch.testing.assert_close(out.logits[0, -1], full[0, -1], atol=1e-5, rtol=0)
