"""The SWE agent's loop against a real pool server (the `swe` provider: real trees, real sandboxes, the sealed
evaluation) with scripted responses: the gold patch applied through the bash loop and submitted resolves the
instance; applied but not submitted, the diff fallback still resolves it; doing nothing gives an empty patch (-1);
a submitted patch that also edits the tests is not resolved; a format error step keeps its own PRM score."""

from __future__ import annotations

import asyncio
import re

import pytest

from slime.agentic.env_service.client import EnvClient
import swe_templates as templates
from generate_with_swe_remote import AgentSettings, ScriptedSwePolicy, bash_response, run_episode
from swe_prm import StepJudging, SweRuleJudge

from swe_pool import instance, pool, requires_bwrap  # noqa: F401 (fixtures)

pytestmark = requires_bwrap


def apply(patch: str) -> str:
    return f"git apply <<'GOLD_PATCH'\n{patch}GOLD_PATCH"


def episode(pool, instance, responses, settings=AgentSettings(max_steps=6), judge=None):
    async def go():
        judging = StepJudging(judge) if judge else None
        async with EnvClient(pool.url) as env:
            result = await run_episode(ScriptedSwePolicy(responses), env, instance.instance_id, settings,
                                       on_step=judging.on_step if judging else None)
            scores = await judging.scores(len(result.turns)) if judging else None
            return result, scores, await env.status()
    return asyncio.run(go())


def test_the_gold_patch_through_the_bash_loop_resolves_the_instance(pool, instance):
    result, _, status = episode(pool, instance, [
        bash_response("git status --short && ls", "First I look around."),
        bash_response(apply(instance.patch), "Apply the fix."),
        bash_response(templates.SUBMIT_COMMAND, "Submit.")])
    assert (result.status, result.exit_status, result.patch_source) == ("completed", "submitted", "submitted")
    assert result.patch == instance.patch  # the submit command's output, the sentinel stripped
    assert result.resolved and result.reward == 1.0 and result.evaluation["patch_source"] == "submitted"
    assert set(result.evaluation["outcomes"]) == set(instance.tests)
    assert result.messages[3]["content"].startswith("<returncode>0</returncode>\n<output>\n")
    assert result.messages[3]["content"].endswith("REMINDER: You have 5 turns left to complete the task.")
    assert status["pool"]["total_active_runs"] == 0


def test_an_unsubmitted_fix_is_found_by_the_diff_fallback(pool, instance):
    result, _, _ = episode(pool, instance, [bash_response(apply(instance.patch))] + [bash_response("true")] * 3,
                           AgentSettings(max_steps=3))
    assert (result.status, result.exit_status, result.patch_source) == ("truncated", "max_steps", "git_diff_fallback")
    assert result.patch == instance.patch and result.resolved


def test_doing_nothing_gives_an_empty_patch_and_minus_one(pool, instance):
    result, _, _ = episode(pool, instance, ["I do not know.", bash_response("ls")], AgentSettings(max_steps=2))
    assert result.patch_source == "none" and result.patch == "" and result.reward == -1.0
    assert result.evaluation["resolved"] is False and "no patch" in result.evaluation["reason"]
    assert result.format_errors == 1


def test_a_patch_that_edits_the_tests_is_not_resolved(pool, instance):
    test_file = re.search(r"^diff --git a/(\S+)", instance.test_patch, re.M).group(1)
    result, _, _ = episode(pool, instance, [
        bash_response(apply(instance.patch)),
        bash_response(f"echo 'def test_extra():\n    pass' >> {test_file}"),
        bash_response(templates.SUBMIT_COMMAND)])
    assert result.patch_source == "submitted" and f"a/{test_file}" in result.patch
    assert not result.resolved and result.reward == -1.0 and "patch refused" in result.evaluation["reason"]


def test_a_format_error_step_keeps_its_own_prm_score(pool, instance):
    source = re.search(r"^diff --git a/(\S+)", instance.patch, re.M).group(1)
    result, scores, _ = episode(pool, instance, [
        "Let me think first.",  # no bash block
        bash_response(f"cat {source} | head -5"),
        bash_response(apply(instance.patch)),
        bash_response(templates.SUBMIT_COMMAND)], AgentSettings(max_steps=6, track_diff=True), SweRuleJudge())
    assert [s.format_error for s in result.steps] == [True, False, False, False]
    assert [s.diff_changed for s in result.steps] == [None, False, True, None]
    # 0: format error; 1: reads a file the fix is in but changes nothing; 2: the edit; 3: submit (outcome)
    # (the applied patch names the function the issue names, so the edit is relevant)
    assert scores == [-1.0, -1.0, 1.0, None]
    assert result.resolved


def test_the_rule_judge_reads_the_hosts_sealed_share_of_the_hidden_tests(pool, instance):
    # read, fix, print a fake passing summary, undo, redo: the share of FAIL_TO_PASS + PASS_TO_PASS on the host's
    # sealed evaluation of each diff decides, not what the commands printed
    source = instance.patch.split("+++ b/", 1)[1].split("\n", 1)[0]
    undo = f"git checkout -- {source}"
    result, scores, _ = episode(pool, instance, [
        bash_response(f"cat {source} | head -5"),
        bash_response(apply(instance.patch)),
        bash_response("echo '=== 99 passed in 0.01s ==='"),
        bash_response(undo),
        bash_response(apply(instance.patch)),
        bash_response(templates.SUBMIT_COMMAND)],
        AgentSettings(max_steps=8, track_diff=True, track_progress=True), SweRuleJudge())
    base = len(instance.PASS_TO_PASS) / len(instance.tests)
    assert [s.progress for s in result.steps[:5]] == pytest.approx([base, 1.0, 1.0, base, 1.0])
    # 0: a look, no new state (-1); 1: the fix raised the share (+1); 2: printed success, nothing ran (-1);
    # 3: undone, the share fell (-1); 4: redone (+1); 5: submit (the outcome)
    assert scores == [-1.0, 1.0, -1.0, -1.0, 1.0, None]
    assert result.resolved
