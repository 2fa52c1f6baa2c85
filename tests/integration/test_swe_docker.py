"""The `swe` provider's Docker backend against a real Docker daemon (the private one of scripts/setup_docker.sh).

A lease is a container with a fresh tree of the instance at its base commit at /testbed (a shipped instance: copied
into slime-terminal-base, owned by an unprivileged uid, no network); the agent fixes the bug with `bash`, `diff` is
its patch, `evaluate` resolves it in a fresh container (never the agent's), a patch that edits the tests does not
count, the diff is the fallback patch. A SWE-bench-style image (the repository baked in at /testbed, root, no pinned
project) is served the same way, evaluated by pytest of the image's own interpreter or by the instance's eval_script
(upstream's rule: resolved when it exits 0); an image without the base commit at /testbed is a 422. A pool server
killed with live leases leaves no container behind once restarted. Afterwards no container of this module is left."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import re
import secrets
import signal

import pytest

from slime.agentic.env_service.client import EnvClient, EnvServiceError
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.providers import LEASE_LABEL
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.swe.docker_backend import DockerSweBackend
from slime.agentic.swe.instances import load_instances, save_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES

from docker_daemon import containers, docker, docker_host  # noqa: F401 (docker_host: the module's fixture)
from swe_pool import bash, episode

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def instance():
    return load_instances(DEFAULT_INSTANCES)[0]


def start_pool(tmp_path, docker_host, instances=None, name="pool"):
    options = {"backend": "docker", "docker_host": docker_host}
    if instances is not None:
        options["instances"] = str(instances)
    return PoolServerProcess(PoolSettings(provider="swe", state_dir=str(tmp_path / name), provider_options=options))


def write_patch(patch: str, path: str = "/tmp/fix.diff") -> str:
    """A bash command that writes `patch` to `path` inside the container (no quoting trouble: base64)."""
    return f"echo {base64.b64encode(patch.encode()).decode()} | base64 -d > {path}"


def test_an_episode_in_a_container_fixes_the_bug_and_a_fresh_container_resolves_it(tmp_path, docker_host, instance):
    source = re.search(r"^diff --git a/(\S+)", instance.patch, re.M).group(1)
    test_file = re.search(r"^diff --git a/(\S+)", instance.test_patch, re.M).group(1)

    async def fix(env, lease_id, reset):
        assert reset["cwd"] == "/testbed" and reset["problem_statement"] == instance.problem_statement
        who = await bash(env, lease_id, "id -u; stat -c %u .; pwd; git status --porcelain | wc -l; git rev-parse HEAD;"
                                        " echo $HOME; hostname")
        net = await bash(env, lease_id, "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\"")
        slow = await bash(env, lease_id, "sleep 30", timeout=1)
        applied = await bash(env, lease_id, write_patch(instance.patch) + " && git apply /tmp/fix.diff && echo ok")
        diff = await env.exec_tool(lease_id, "diff", {})
        await bash(env, lease_id, "rm -rf ./*")  # evaluation never looks at this tree
        return who, net, slow, applied, diff, await env.evaluate(lease_id, patch=diff["patch"])

    async def cheat(env, lease_id, reset):  # the agent edits the tests instead; no submit: the diff is the patch
        await bash(env, lease_id, f"echo 'def test_nothing(): pass' > {test_file}")
        evaluation = await env.evaluate(lease_id)
        with pytest.raises(EnvServiceError) as after:
            await bash(env, lease_id, "ls")
        return evaluation, after.value

    with start_pool(tmp_path, docker_host) as pool:
        who, net, slow, applied, diff, evaluation = episode(pool.url, instance.instance_id, fix)
        cheated, after = episode(pool.url, instance.instance_id, cheat)
    uid, owner, cwd, dirty, head, home, host = who["output"].split("\n")[:7]
    assert who["returncode"] == 0 and int(uid) != 0 and uid == owner and cwd == "/testbed" and host == "sandbox"
    assert (dirty, head, home) == ("0", instance.base_commit, "/tmp")
    assert net["returncode"] != 0
    assert (slow["returncode"], slow["output"], slow["timed_out"]) == (-1, "Command timed out after 1 s", True)
    assert applied["output"].strip() == "ok"
    assert diff["patch"].startswith(f"diff --git a/{source} b/{source}")
    assert evaluation["resolved"] is True and evaluation["score"] == 1.0 and evaluation["patch_source"] == "submitted"
    assert set(evaluation["outcomes"]) == set(instance.tests) and set(evaluation["outcomes"].values()) == {"passed"}
    assert cheated["resolved"] is False and cheated["patch_source"] == "git_diff_fallback"
    assert "test file" in cheated["reason"] and cheated["score"] == -1.0
    assert after.status == 409 and after.code == "EVALUATED"


@pytest.fixture(scope="module")
def baked_image(docker_host, instance):
    """A SWE-bench-style image: slime-terminal-base with the instance's repository at /testbed (root's), made with
    `docker commit` of a container of the shipped-instance path; removed afterwards."""
    name = f"slime-swe-test/baked-{secrets.token_hex(4)}:1"
    box = DockerSweBackend(user="root", docker_host=docker_host).open(instance)
    try:
        docker(docker_host, "commit", box.name, name)
    finally:
        box.close()
    yield name
    docker(docker_host, "rmi", "-f", name, check=False)


def foreign(instance, image, **extra):
    """The instance as a SWE-bench row of a repository this project does not pin, in `image`."""
    return dataclasses.replace(instance, repo="example/toolz-fork", version=None, image_name=image,
                               extra={**instance.extra, **extra})


def test_a_swe_bench_style_image_serves_the_repository_baked_into_it(tmp_path, docker_host, instance, baked_image):
    f2p = " ".join(instance.FAIL_TO_PASS)
    # SWE-Gym's eval_script: apply the tests, run them, exit with their status
    script = (f"set -e\ncd /testbed\n{write_patch(instance.test_patch, '/tmp/t.diff')}\ngit apply /tmp/t.diff\n"
              f"python3 -m pytest -q -p no:cacheprovider {f2p}\n")
    rows = [foreign(instance, baked_image),
            dataclasses.replace(foreign(instance, baked_image, eval_script=script), instance_id="example__script-1"),
            dataclasses.replace(foreign(instance, baked_image), instance_id="example__other-1", base_commit="0" * 40)]
    path = tmp_path / "rows.jsonl"
    save_instances(path, rows)

    async def solve(env, lease_id, reset):
        who = await bash(env, lease_id, "id -u; git rev-parse HEAD")
        await bash(env, lease_id, write_patch(instance.patch) + " && git apply /tmp/fix.diff")
        return who, await env.evaluate(lease_id)

    with start_pool(tmp_path, docker_host, path) as pool:
        who, pytest_run = episode(pool.url, rows[0].instance_id, solve)
        _, scripted = episode(pool.url, rows[1].instance_id, solve)
        with pytest.raises(EnvServiceError) as wrong_commit:
            episode(pool.url, rows[2].instance_id, solve)
    assert who["output"].split() == ["0", instance.base_commit]  # root, as upstream's docker exec
    assert pytest_run["resolved"] is True and set(pytest_run["outcomes"].values()) == {"passed"}
    assert pytest_run["patch_source"] == "git_diff_fallback"
    assert scripted["resolved"] is True and scripted["outcomes"] == {}
    at_base = asyncio.run(DockerSweBackend(docker_host=docker_host).run_instance(rows[1], None, timeout=120))
    assert at_base.resolved is False and "exited with" in at_base.reason  # the script fails without the fix
    assert wrong_commit.value.status == 422 and "base commit" in str(wrong_commit.value)


def test_a_killed_pool_server_leaves_no_container_once_restarted(tmp_path, docker_host, instance):
    async def open_leases(url, n):
        async with EnvClient(url) as env:
            leases = [(await env.allocate(f"{instance.instance_id}#{i}"))["lease_id"] for i in range(n)]
            for lease_id in leases:
                await env.reset(lease_id, {"instance_id": instance.instance_id})
            return leases

    server = start_pool(tmp_path, docker_host).start()
    try:
        leases = asyncio.run(open_leases(server.url, 2))
        assert all(containers(docker_host, f"{LEASE_LABEL}={lease}") for lease in leases)
        os.killpg(server.process.pid, signal.SIGKILL)  # no shutdown: the containers outlive the server
        server.process.wait()
    finally:
        server.stop()
    with start_pool(tmp_path, docker_host):  # the same state directory: the records are reaped at start
        pass
    assert not any(containers(docker_host, f"{LEASE_LABEL}={lease}") for lease in leases)
