"""The `swe` provider behind a real pool server on loopback: a lease is a fresh tree of the instance at its base
commit in a bubblewrap sandbox (an unprivileged uid that owns the tree, no network); `bash` returns upstream's
`{returncode, output}` (stderr joined, head/tail cut, -1 on timeout); `diff` is the tree's patch; `evaluate` runs the
sealed evaluation in a fresh tree (never the agent's), with the diff as the fallback patch; close leaves nothing."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient, EnvServiceError

REPO = Path(__file__).resolve().parents[2]
from swe_pool import bash, episode, instance, pool, requires_bwrap  # noqa: F401 (fixtures)

pytestmark = requires_bwrap


def lease(pool, instance, body):
    return episode(pool.url, instance.instance_id, body)


def test_a_lease_is_a_clean_tree_at_base_owned_by_an_unprivileged_uid_without_network(pool, instance):
    async def body(env, lease_id, reset):
        assert reset["problem_statement"] == instance.problem_statement and reset["cwd"] == "/testbed"
        assert [t["function"]["name"] for t in reset["tool_schemas"]] == ["bash", "diff"]
        who = await bash(env, lease_id, "id -u; stat -c %u .; pwd; git status --porcelain | wc -l; git rev-parse HEAD;"
                                        " git log --oneline | wc -l; echo $PYTHONDONTWRITEBYTECODE $HOME")
        net = await bash(env, lease_id, "python -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\"")
        outside = await bash(env, lease_id, f"ls {REPO / 'slime'}")
        return who, net, outside

    who, net, outside = lease(pool, instance, body)
    uid, owner, cwd, dirty, head, commits, env_line = who["output"].split("\n")[:7]
    assert who["returncode"] == 0 and int(uid) != 0 and uid == owner and cwd == "/testbed"
    assert (dirty, head, commits, env_line) == ("0", instance.base_commit, "1", "1 /tmp")  # git accepts the tree
    assert net["returncode"] != 0 and ("OSError" in net["output"] or "unreachable" in net["output"])
    # only the interpreter is bound in: the host's files (this repository's source) are not there
    assert outside["returncode"] != 0 and "No such file or directory" in outside["output"]


def test_bash_joins_stderr_cuts_long_outputs_and_times_out(pool, instance):
    async def body(env, lease_id, reset):
        return (await bash(env, lease_id, "echo out; echo err >&2; echo again; exit 3"),
                await bash(env, lease_id, "python -c \"print('x' * 300000)\""),
                await bash(env, lease_id, "sleep 30", timeout=1),
                await bash(env, lease_id, "pwd", cwd="src"),
                await bash(env, lease_id, "pwd", cwd="../.."),
                await env.exec_tool(lease_id, "nope", {}))

    joined, long, slow, inside, escape, unknown = lease(pool, instance, body)
    assert (joined["returncode"], joined["output"]) == (3, "out\nerr\nagain\n")
    assert 128 * 1024 < len(long["output"]) < 140 * 1024 and "output truncated" in long["output"]
    assert (slow["returncode"], slow["output"], slow["timed_out"]) == (-1, "Command timed out after 1 s", True)
    assert inside["output"].strip().startswith("/testbed/src") or inside["returncode"] == 1
    assert escape["returncode"] == -1 and "outside /testbed" in escape["output"]
    assert unknown["output"].startswith("[TOOL_ERROR] unknown tool")


def test_diff_is_the_trees_patch_and_the_fallback_of_evaluate(pool, instance):
    source = re.search(r"^diff --git a/(\S+)", instance.patch, re.M).group(1)

    async def body(env, lease_id, reset):
        await bash(env, lease_id, f"echo '# a note' >> {source} && git add -A && git commit -qm wip")
        diff = await env.exec_tool(lease_id, "diff", {})
        evaluation = await env.evaluate(lease_id)
        with pytest.raises(EnvServiceError) as after:
            await bash(env, lease_id, "ls")
        return diff, evaluation, after.value

    diff, evaluation, after = lease(pool, instance, body)
    # committed changes still count: the diff is against the base commit, read through a git directory of ours
    assert diff["patch"].startswith(f"diff --git a/{source} b/{source}") and "+# a note" in diff["patch"]
    assert evaluation["patch_source"] == "git_diff_fallback" and evaluation["resolved"] is False
    assert evaluation["score"] == -1.0 and evaluation["reason"] and set(evaluation["outcomes"]) == set(instance.tests)
    assert after.status == 409 and after.code == "EVALUATED"


def test_evaluate_uses_a_fresh_tree_not_the_agents(pool, instance):
    async def body(env, lease_id, reset):
        await bash(env, lease_id, "rm -rf ./* && echo gone > README")  # the agent's tree is wrecked
        return await env.evaluate(lease_id, patch=instance.patch)

    evaluation = lease(pool, instance, body)
    assert evaluation["resolved"] is True and evaluation["score"] == 1.0 and evaluation["patch_source"] == "submitted"
    assert set(evaluation["outcomes"].values()) == {"passed"}


def test_nothing_is_left_after_close(pool, instance):
    async def go():
        async with EnvClient(pool.url) as env:
            lease_id = (await env.allocate(instance.instance_id))["lease_id"]
            await env.reset(lease_id, {"instance_id": instance.instance_id})
            uid = int((await bash(env, lease_id, "id -u; (sleep 100 &) ; true"))["output"].split()[0])
            await env.close(lease_id)
            with pytest.raises(EnvServiceError) as unknown:
                await env.reset("nope", {"instance_id": "x"})
            lease2 = (await env.allocate("x"))["lease_id"]
            with pytest.raises(EnvServiceError) as missing:
                await env.reset(lease2, {"instance_id": "no__such-1"})
            await env.close(lease2)
            return uid, await env.status(), unknown.value, missing.value

    uid, status, unknown, missing = asyncio.run(go())
    assert status["pool"]["total_active_runs"] == 0
    assert os.listdir(pool.state_dir / "leases") == [] if (pool.state_dir / "leases").exists() else True
    assert sb.uid_processes([uid]) == []
    assert unknown.status == 404 and missing.status == 404 and missing.code == "UNKNOWN_INSTANCE"
