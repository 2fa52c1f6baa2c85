"""The GUI step judge of a screenshot policy against a real engine serving a vision-language model (the tiny random
Qwen2.5-VL): its chat request carries the two screenshots as image parts (in memory, no file), the engine takes them
(no failed call: an engine that could not would answer 400), and every vote comes back to be parsed; random weights
write no `\\boxed{}`, so each vote is invalid and the step is unjudged (None), not scored."""

from __future__ import annotations

import asyncio
import base64
import io

import numpy as np

from generate_with_gui import GuiStep, GuiVLMJudge, vlm_judge_messages
from slime.agentic.prm import StepJudge
from slime.agentic.agent_loop import Turn
from slime.engine.client import AsyncEngineClient
from slime.engine.launch import EngineProcess
from slime.models.tiny_vlm import build_tiny_vlm


def _png(seed: int) -> str:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (90, 160, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_the_vlm_judge_sends_both_screenshots_to_a_real_engine(tmp_path):
    step = GuiStep(Turn([1], [2], [0.0], 'Action: click Save\n<tool_call>{"name": "computer_use"}</tool_call>', "stop"),
                   action_line="Action: click Save", image_before=_png(0), image_after=_png(1))

    async def go(url):
        client = AsyncEngineClient(url)
        try:
            judge = StepJudge(client, m=2, max_new_tokens=6)
            score = await GuiVLMJudge(judge).score_step(step, instruction="Save the notes", step_index=0, seed=3)
            # the same request as a plain chat call, to see what the engine made of it
            body = {"messages": vlm_judge_messages("Save the notes", step, 0), "max_tokens": 4,
                    "return_token_ids": True}
            reply = await client.chat(body)
            return score, judge.stats, reply
        finally:
            await client.aclose()

    with EngineProcess(build_tiny_vlm(), log_path=tmp_path / "engine.log", ready_timeout=180) as engine:
        score, stats, reply = asyncio.run(go(engine.url))
    assert stats["failed_calls"] == 0 and stats["votes"] == 2
    assert stats["invalid_votes"] == 2 and score is None and stats["unjudged_steps"] == 1
    assert len(reply["image_grid_thw"]) == 2  # both screenshots reached the model
