"""The screenshot policy's pieces: the loop's messages with images, image collection in template order, the pad
widths computed from an image's size (the engine's rule), the policy's request and its check of the engine's ids,
screenshot downscaling, the VLM step judge's messages, the provider options per observation, samples with images and
the engine's weight version."""

from __future__ import annotations

import asyncio
import base64
import io
from types import SimpleNamespace

import numpy as np
import pytest

from generate_with_gui import (
    SCREENSHOT_SYSTEM_PROMPT,
    AgentSettings,
    GuiStep,
    build_messages,
    service_options,
    step_sampling_params,
    vlm_judge_messages,
)
from slime.agentic.gui.observation import downscale_png
from slime.agentic.agent_loop import Turn, turn_sample
from slime.agentic.vision_policy import (
    VisionTurnPolicy,
    image_grid,
    image_part,
    image_size,
    message_images,
)
from slime.models.vision import VisionSpec, preprocess_images
from slime.utils.types import Sample


def _png(width: int, height: int, seed: int = 0) -> str:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def _step(text: str, image: str, error: str = "") -> GuiStep:
    return GuiStep(Turn([1], [2], [0.0], text, "stop"), action_line=text.split("\n")[0], error=error,
                   image_before=image, screen_before="old [1, 1]")


def test_screenshot_messages_show_the_last_screens_in_order():
    old, mid, new, now = _png(8, 8, 1), _png(8, 8, 2), _png(8, 8, 3), _png(8, 8, 4)
    steps = [_step("Action: a", old), _step("Action: b", mid), _step("Action: c", new, error="bad key")]
    settings = AgentSettings(observation="screenshot", history=3)
    messages = build_messages("Do it", steps, {"screenshot_b64": now, "text_view": "ignored"}, settings)
    assert messages[0] == {"role": "system", "content": SCREENSHOT_SYSTEM_PROMPT}
    # the two latest steps as (their screen, their response), then the current screen with the words
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert message_images(messages) == [mid, new, now]
    assert messages[1]["content"] == [image_part(mid)]
    current = messages[-1]["content"]
    assert current[0] == image_part(now) and current[1]["type"] == "text"
    assert "bad key" in current[1]["text"] and "Instruction: Do it" in current[1]["text"]
    assert "Step 3: Action: c" in current[1]["text"]
    assert "ignored" not in str(messages)  # a screenshot policy gets no text view
    with pytest.raises(ValueError, match="screenshot"):
        build_messages("x", [], {"text_view": "only text"}, settings)
    with pytest.raises(ValueError, match="observation"):
        AgentSettings(observation="pixels")


def test_message_images_reads_both_part_kinds_and_refuses_empty_ones():
    a, b = _png(4, 4, 5), _png(4, 4, 6)
    messages = [{"role": "user", "content": "text"},
                {"role": "user", "content": [image_part(a), {"type": "text", "text": "x"},
                                             {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b}"}}]}]
    assert message_images(messages) == [a, f"data:image/png;base64,{b}"]
    assert image_size(f"data:image/png;base64,{b}") == (4, 4)
    with pytest.raises(ValueError, match="no image"):
        message_images([{"role": "user", "content": [{"type": "image"}]}])


@pytest.mark.parametrize("width,height", [(1280, 720), (640, 360), (57, 33), (30, 300), (4000, 3000)])
def test_pad_widths_from_an_image_size_are_the_preprocessing_grid(width, height):
    spec = VisionSpec()
    image = _png(width, height, 7)
    grid = image_grid(*image_size(image), spec)
    from slime.models.vision import image_from_base64

    assert [list(grid)] == preprocess_images([image_from_base64(image)], spec).image_grid_thw.tolist()


class _RecordingEngine:
    """Answers /generate as the engine does for a prompt with images (its ids and two sampled tokens)."""

    def __init__(self, echo_ids=True):
        self.calls, self.echo_ids = [], echo_ids

    async def generate(self, **request):
        self.calls.append(request)
        ids = list(request["input_ids"]) if self.echo_ids else [0]
        return {"text": "Action: x", "meta_info": {"input_ids": ids, "finish_reason": {"type": "stop"}, "weight_version": "3",
                                                  "output_token_logprobs": [[-0.5, 7], [-0.25, 8]]}}


def test_the_policy_sends_widened_ids_with_its_images_and_checks_the_engines_ids():
    from transformers import AutoConfig, AutoTokenizer

    from slime.models.tiny_vlm import build_tiny_vlm

    folder = build_tiny_vlm()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pad = AutoConfig.from_pretrained(folder).image_token_id
    first, second = _png(640, 360, 8), _png(100, 60, 9)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": [image_part(first)]},
                {"role": "assistant", "content": "Action: a"},
                {"role": "user", "content": [image_part(second), {"type": "text", "text": "next?"}]}]
    engine = _RecordingEngine()
    policy = VisionTurnPolicy(engine, tokenizer, {"max_new_tokens": 8}, 4096, folder)
    turn = asyncio.run(policy.generate_turn(messages, []))
    sent = engine.calls[0]
    assert sent["image_data"] == [first, second] and turn.images == [first, second]
    spec = VisionSpec.from_folder(folder)
    widths = [h * w // spec.merge_size**2 for _, h, w in (image_grid(*image_size(i), spec) for i in (first, second))]
    runs, count = [], 0
    for tok in sent["input_ids"] + [None]:
        if tok == pad:
            count += 1
        elif count:
            runs, count = runs + [count], 0
    assert runs == widths and turn.input_ids == sent["input_ids"]
    assert (turn.output_ids, turn.logprobs) == ([7, 8], [-0.5, -0.25])
    sample = turn_sample(Sample(prompt="t", index=0, group_index=0), turn, 0, {}, Sample.Status.COMPLETED, True, None)
    assert sample.multimodal_inputs == {"images": [first, second]}
    assert turn.weight_version == sample.weight_version == "3" and sample.weight_versions == ["3"]  # staleness
    assert sample.tokens == sent["input_ids"] + [7, 8]
    with pytest.raises(RuntimeError, match="other prompt ids"):
        asyncio.run(VisionTurnPolicy(_RecordingEngine(echo_ids=False), tokenizer, {"max_new_tokens": 8}, 4096,
                                     folder).generate_turn(messages, []))
    text_turn = Turn([1], [2], [0.0], "x", "stop")
    assert turn_sample(Sample(prompt="t", index=0, group_index=0), text_turn, 0, {}, Sample.Status.COMPLETED, True,
                       None).multimodal_inputs is None


def test_a_text_model_is_refused_for_screenshots():
    from slime.models.tiny import build_tiny_model

    with pytest.raises(ValueError, match="not a vision-language model"):
        VisionTurnPolicy(_RecordingEngine(), None, {"max_new_tokens": 8}, 4096, build_tiny_model())


def test_downscale_keeps_the_aspect_and_leaves_small_screens_alone():
    big, small = _png(1280, 720, 10), _png(320, 180, 11)
    scaled = downscale_png(big, 230400)
    height, width = image_size(scaled)
    assert width * height <= 230400 and abs(width / height - 1280 / 720) < 0.01 and width >= 630
    assert downscale_png(small, 230400) == small and downscale_png(big, None) == big


def test_the_vlm_judge_sees_the_screens_before_and_after():
    before, after = _png(8, 8, 12), _png(8, 8, 13)
    step = _step("Action: click\n<tool_call>...</tool_call>", before)
    step.image_after = after
    messages = vlm_judge_messages("Save the file", step, 2)
    parts = messages[1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{before}", f"data:image/png;base64,{after}"]
    words = " ".join(p["text"] for p in parts if p["type"] == "text")
    assert "Save the file" in words and "Step index: 2" in words and "Action: click" in words
    assert "\\boxed{1}" in words
    failed = _step("Action: ?", before, error="[TOOL_ERROR] bad")
    parts = vlm_judge_messages("x", failed, 0)[1]["content"]
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == [f"data:image/png;base64,{before}"] * 2
    assert "could not be run" in " ".join(p["text"] for p in parts if p["type"] == "text")


def test_the_pool_servers_send_what_the_loop_and_its_judge_read():
    def options(**kw):
        return service_options(SimpleNamespace(**{"gui_observation": None, "step_judge": None, **kw}))["observation"]

    assert options() == "text" and options(step_judge="rules") == "text"
    assert options(gui_observation="screenshot") == "screenshot"
    assert options(gui_observation="screenshot", step_judge="llm") == "screenshot"
    assert options(gui_observation="screenshot", step_judge="rules") == "both"  # the rule judge diffs the OCR


def test_a_step_stops_at_its_closed_tool_call():
    params = step_sampling_params({"temperature": 1.0, "max_new_tokens": 128, "stop": ["\n\n\n"]})
    assert params["stop"] == ["\n\n\n", "</tool_call>"] and params["no_stop_trim"] is True
    assert params["temperature"] == 1.0 and params["max_new_tokens"] == 128
    assert step_sampling_params(params)["stop"] == params["stop"]  # applied twice: no duplicate
