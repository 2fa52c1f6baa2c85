"""SWE demonstrations through a real pool server (real trees, sandboxes and the sealed evaluation): the scripted
engineer's episode resolves the instance, every step ran (no format error), its test step is seen by the host as a
test run, and one SFT row per step holds the loop's messages up to that step. The edit script fails loudly when the
code it replaces is not there exactly once (here: the same edit again)."""

from __future__ import annotations

import asyncio

from slime.agentic.env_service.client import EnvClient
from generate_with_swe_remote import AgentSettings, ScriptedSwePolicy, run_episode
from swe_demonstrations import base_tree, demonstrate, demonstration_responses
from slime.agentic.swe.instances import load_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES

from swe_pool import pool, requires_bwrap  # noqa: F401 (fixtures)

pytestmark = requires_bwrap
IDS = ["pytoolz__toolz-1", "jpvanhal__inflection-3"]  # the first needs two lookups (the bug is in a helper)


def test_the_scripted_engineer_resolves_instances_and_each_step_becomes_a_row(pool):
    instances = load_instances(DEFAULT_INSTANCES, IDS)

    async def go():
        async with EnvClient(pool.url) as env:
            return await demonstrate(env, instances)

    rows, failed = asyncio.run(go())
    assert failed == []
    per = {i: [r for r in rows if r["metadata"]["instance_id"] == i] for i in IDS}
    assert [len(per[i]) for i in IDS] == [6, 5]
    for i in IDS:
        first, last = per[i][0], per[i][-1]
        assert [m["role"] for m in first["prompt"]] == ["system", "user"]
        assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in last["metadata"]["segments"][0]["text"]
        # the observation before the submit step is the real test run's tail
        assert "passed" in last["prompt"][-1]["content"]


def test_an_edit_whose_code_is_gone_fails_loudly(pool):
    (inst,) = load_instances(DEFAULT_INSTANCES, IDS[:1])
    responses = demonstration_responses(inst, *base_tree(inst))
    # the edit twice: the second finds nothing to replace and fails; the episode still submits the first fix
    doubled = responses[:4] + [responses[3]] + responses[4:]

    async def go():
        async with EnvClient(pool.url) as env:
            return await run_episode(ScriptedSwePolicy(doubled), env, inst.instance_id, AgentSettings(max_steps=10))

    episode = asyncio.run(go())
    edits = [s for s in episode.steps if s.command and s.command.startswith("python3 - <<'EOF'")]
    assert [s.returncode for s in edits] == [0, 1] and "not there exactly once" in edits[1].output
    assert episode.resolved and any(s.tests_ran for s in episode.steps)
