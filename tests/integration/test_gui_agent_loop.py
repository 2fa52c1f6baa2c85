"""The GUI agent loop against a real pool server of the `gui` provider: a scripted agent that reads the screen's
text view solves a task through the loop (one sample per step, rule-judge scores by step index, +1); an agent that
only waits is cut off after its steps and scores -1 (not an explicit failure); on an infeasible task, saying it
cannot be done scores +1 and running out of steps does not (upstream counted that as a FAIL)."""

from __future__ import annotations

import asyncio


from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate_with_gui import (
    AgentSettings,
    GuiRuleJudge,
    ScriptedGuiPolicy,
    StepJudging,
    episode_samples,
    reward_func,
    run_episode,
)
from slime.agentic.gui.scripted import load_solution
from slime.agentic.gui.tasks import find_task, load_tasks
from slime.utils.types import Sample

from helpers.gui_env import requires_desktop

pytestmark = requires_desktop()


def test_episodes_through_the_loop(tmp_path):
    task = find_task("notes/append-line")
    infeasible = next(t for t in load_tasks() if t.infeasible and "chromium" not in str(t.config))

    async def go(url):
        async with EnvClient(url) as env:
            judging = StepJudging(GuiRuleJudge())
            solved = await run_episode(ScriptedGuiPolicy(load_solution(task)), env, task.key, AgentSettings(),
                                       on_step=judging.on_step)
            waited = await run_episode(ScriptedGuiPolicy([{"action": "wait", "time": 0.1}] * 2), env, task.key,
                                       AgentSettings(max_steps=2))
            said = await run_episode(ScriptedGuiPolicy([{"action": "terminate", "status": "failure"}]), env,
                                     infeasible.key, AgentSettings())
            ran_out = await run_episode(ScriptedGuiPolicy([{"action": "wait", "time": 0.1}] * 2), env,
                                        infeasible.key, AgentSettings(max_steps=2))
            return solved, await judging.scores(), waited, said, ran_out

    with PoolServerProcess(PoolSettings(provider="gui", state_dir=str(tmp_path / "pool"))) as pool:
        solved, scores, waited, said, ran_out = asyncio.run(go(pool.url))
    assert (solved.status, solved.stop_reason, solved.reward) == ("completed", "done", 1.0)
    assert len(scores) == len(solved.steps) and scores[-1] == 1.0 and 1.0 in scores[:-1]
    samples = episode_samples(solved, Sample(prompt=task.key, index=0, group_index=0), scores)
    assert [s.metadata["step_wise"]["step_indices"] for s in samples] == [[k] for k in range(len(solved.steps))]
    assert all(s.tokens[-s.response_length:] == list(step.turn.output_ids) for s, step in zip(samples, solved.steps))
    rewards = asyncio.run(reward_func(None, samples))
    assert {r["score"] for r in rewards} == {1.0}
    assert (waited.status, waited.stop_reason, waited.reward) == ("truncated", "max_steps", -1.0)
    assert said.reward == 1.0 and said.stop_reason == "agent_failure"
    assert ran_out.status == "truncated" and ran_out.reward == -1.0
