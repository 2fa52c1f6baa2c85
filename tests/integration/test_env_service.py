"""The environment service over real HTTP: pool servers and the router as real processes on loopback, leases
holding real bubblewrap sandboxes (the `command` provider)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx
import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient, EnvServiceError
from slime.agentic.env_service.launch import EnvService, PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def settings(tmp_path, **overrides) -> PoolSettings:
    return PoolSettings(state_dir=str(tmp_path / "state"), **overrides)


def run(coro):
    return asyncio.run(coro)


def lease_dirs(state_dir: str) -> list[str]:
    root = os.path.join(state_dir, "leases")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def test_lease_lifecycle_reset_exec_evaluate_close(tmp_path):
    with PoolServerProcess(settings(tmp_path)) as pool:
        async def episode():
            async with EnvClient(pool.url) as env:
                lease = (await env.allocate("count-lines"))["lease_id"]
                reply = await env.reset(lease, {"instruction": "count the lines of data.txt",
                                                "setup_command": "printf 'a\\nb\\nc\\n' > data.txt",
                                                "evaluate_command": "test \"$(cat answer.txt)\" = 3"})
                assert "count the lines of data.txt" in reply["user_msg"]
                assert reply["tool_schemas"][0]["function"]["name"] == "run_command"
                before = await env.evaluate(lease)
                first = await env.exec_tool(lease, "run_command", {"command": "wc -l < data.txt > answer.txt; pwd"})
                second = await env.exec_tool(lease, "run_command", {"command": "cat answer.txt; id -u"})
                after = await env.evaluate(lease)
                unknown = await env.exec_tool(lease, "rm_rf", {})
                status = await env.status()
                found = await env.close(lease)
                again = await env.close(lease)
                return before, first, second, after, unknown, status, found, again

        before, first, second, after, unknown, status, found, again = run(episode())
        assert before["score"] == 0.0 and after["score"] == 1.0
        assert first["observation"].splitlines() == ["/work", "[exit code 0]"]  # the work directory is /work
        out = second["observation"].splitlines()
        assert out[0] == "3" and out[1] != "0"  # state persists between calls; not root inside
        assert unknown["observation"] == "[TOOL_ERROR] unknown tool: rm_rf"
        assert status["pool"]["total_active_runs"] == 1 and status["pool"]["tasks"] == {"count-lines": {"active_runs": 1}}
        assert found is True and again is False  # closing twice is not an error
        deadline = time.monotonic() + 10
        while lease_dirs(pool.settings.state_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lease_dirs(pool.settings.state_dir) == []


def test_capacity_answers_429_with_a_reason_and_allocate_is_idempotent(tmp_path):
    with PoolServerProcess(settings(tmp_path, max_tasks=1, max_runs_per_task=2)) as pool:
        async def scenario():
            async with EnvClient(pool.url, allocate_retries=0) as env:
                a = await env.allocate("task-a", request_id="r1")
                a_again = await env.allocate("task-a", request_id="r1")
                b = await env.allocate("task-a", request_id="r2")
                errors = []
                for key in ("task-a", "task-b"):
                    with pytest.raises(EnvServiceError) as e:
                        await env.allocate(key)
                    errors.append((e.value.status, e.value.code, e.value.message))
                await env.close(b["lease_id"])
                c = await env.allocate("task-a")
                return a, a_again, b, c, errors

        a, a_again, b, c, errors = run(scenario())
        assert a_again == {**a, "reused": True} and a["reused"] is False
        assert b["lease_id"] != a["lease_id"] and c["lease_id"] not in (a["lease_id"], b["lease_id"])
        assert errors[0][:2] == (429, "RUN_SLOTS_EXHAUSTED") and "2 run slots" in errors[0][2]
        assert errors[1][:2] == (429, "TASK_SLOTS_EXHAUSTED") and "1 task slots" in errors[1][2]


def test_allocate_waits_out_back_pressure_until_a_slot_frees(tmp_path):
    with PoolServerProcess(settings(tmp_path, max_tasks=1, max_runs_per_task=1)) as pool:
        async def scenario():
            async with EnvClient(pool.url, allocate_backoff_s=0.2) as env:
                first = (await env.allocate("t"))["lease_id"]

                async def release_later():
                    await asyncio.sleep(0.7)
                    await env.close(first)

                closer = asyncio.create_task(release_later())
                second = await env.allocate("t")
                await closer
                return second, env.counters["back_pressure"]

        second, throttled = run(scenario())
        assert second["reused"] is False and throttled >= 2


def test_idle_leases_are_reaped_with_their_directories(tmp_path):
    with PoolServerProcess(settings(tmp_path, idle_ttl_s=2.0, reap_interval_s=0.2)) as pool:
        async def scenario():
            async with EnvClient(pool.url) as env:
                idle = (await env.allocate("t"))["lease_id"]
                await env.reset(idle, {"setup_command": "echo x > file"})
                kept = (await env.allocate("t"))["lease_id"]
                for _ in range(14):  # heartbeats keep a lease alive past the TTL
                    await asyncio.sleep(0.25)
                    await env.heartbeat(kept)
                with pytest.raises(EnvServiceError) as e:
                    await env.heartbeat(idle)
                status = await env.status()
                return idle, kept, e.value, status

        idle, kept, error, status = run(scenario())
        assert (error.status, error.code) == (404, "UNKNOWN_LEASE")
        assert status["pool"]["total_active_runs"] == 1 and status["pool"]["counters"]["reaped_idle"] == 1
        assert idle not in lease_dirs(pool.settings.state_dir)


def recorded_uids(state_dir: str) -> dict[str, int]:
    import json
    import sqlite3

    with sqlite3.connect(os.path.join(state_dir, "leases.db")) as db:
        return {lease_id: json.loads(resources).get("uid")
                for lease_id, resources in db.execute("SELECT lease_id, resources FROM leases")}


def test_a_killed_pool_server_leaves_nothing_after_restart(tmp_path):
    """SIGKILL during a running command: the sandbox dies with the server (bubblewrap --die-with-parent); the
    restarted server closes the recorded leases and removes their directories."""
    s = settings(tmp_path)
    pool = PoolServerProcess(s).start()
    try:
        async def kill_mid_command():
            async with EnvClient(pool.url, retries=0) as env:
                leases = [(await env.allocate("t"))["lease_id"] for _ in range(2)]
                for lease in leases:
                    await env.reset(lease, {"setup_command": "echo data > file"})
                uid = recorded_uids(s.state_dir)[leases[0]]
                # a command that is still running when the server dies, with a background child of its own
                call = asyncio.create_task(env.exec_tool(leases[0], "run_command",
                                                         {"command": "sleep 300 & sleep 300", "timeout": 200}))
                deadline = time.monotonic() + 20
                while len(sb.uid_processes([uid])) < 2 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                running = sb.uid_processes([uid])
                os.killpg(pool.process.pid, signal.SIGKILL)
                with pytest.raises(EnvServiceError):  # the answer never comes
                    await call
                return leases, running

        leases, running = run(kill_mid_command())
        pool.process.wait()
    finally:
        pool.stop()
    assert len(running) >= 2  # the command and its background child were running in the sandbox
    uids = recorded_uids(s.state_dir)
    assert sorted(uids) == sorted(leases) and sorted(lease_dirs(s.state_dir)) == sorted(leases)
    deadline = time.monotonic() + 10
    while sb.uid_processes(uids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sb.uid_processes(uids.values()) == []  # no sandboxed process outlived its server
    with PoolServerProcess(s) as restarted:
        status = httpx.get(restarted.url + "/status").json()["pool"]
        heartbeat = httpx.post(restarted.url + "/heartbeat", json={"lease_id": leases[0]})
        assert lease_dirs(s.state_dir) == []
    assert status["counters"]["reaped_at_start"] == 2 and status["total_active_runs"] == 0
    assert heartbeat.status_code == 404 and heartbeat.json()["code"] == "UNKNOWN_LEASE"


def test_bad_input_gets_a_clear_4xx_or_a_bounded_result_and_the_server_keeps_serving(tmp_path):
    with PoolServerProcess(settings(tmp_path, max_body_bytes=64 * 1024)) as pool:
        url = pool.url
        with httpx.Client(timeout=60) as http:
            bad_json = http.post(url + "/allocate", content=b"{not json", headers={"content-type": "application/json"})
            not_object = http.post(url + "/allocate", json=[1, 2])
            no_key = http.post(url + "/allocate", json={})
            unknown = http.post(url + "/exec_tool", json={"lease_id": "run-0000", "tool_call": {"name": "x"}})
            lease = http.post(url + "/allocate", json={"task_key": "t"}).json()["lease_id"]
            not_reset = http.post(url + "/exec_tool", json={"lease_id": lease,
                                                            "tool_call": {"name": "run_command", "arguments": {}}})
            bad_call = http.post(url + "/exec_tool", json={"lease_id": lease, "tool_call": "ls"})
            huge = http.post(url + "/exec_tool", json={"lease_id": lease, "tool_call": {
                "name": "run_command", "arguments": {"command": "echo " + "x" * 100_000}}})
            assert http.post(url + "/reset", json={"lease_id": lease}).status_code == 200

            def tool(arguments):
                return http.post(url + "/exec_tool", json={"lease_id": lease, "tool_call": {
                    "name": "run_command", "arguments": arguments}}).json()

            never_ends = tool({"command": "while true; do :; done", "timeout": 1})
            binary = tool({"command": "head -c 3000 /dev/urandom; printf '\\377\\376 end'"})
            flood = tool({"command": "yes hello | head -c 5000000"})
            bad_timeout = tool({"command": "true", "timeout": "soon"})
            empty = tool({"command": "  "})
            still = tool({"command": "echo alive"})
        for reply, status, code in ((bad_json, 400, "BAD_JSON"), (not_object, 400, "BAD_JSON"),
                                    (no_key, 400, "BAD_REQUEST"), (unknown, 404, "UNKNOWN_LEASE"),
                                    (not_reset, 409, "NOT_RESET"), (bad_call, 400, "BAD_REQUEST"),
                                    (huge, 413, "TOO_LARGE")):
            assert (reply.status_code, reply.json()["code"]) == (status, code), reply.text
            assert reply.json()["ok"] is False and reply.json()["error"]
        assert never_ends["timed_out"] is True and never_ends["observation"].endswith("[timed out (killed)]")
        assert binary["exit_code"] == 0 and binary["observation"].endswith(" end\n[exit code 0]")
        assert "\ufffd" in binary["observation"]  # invalid UTF-8 is replaced, not an error
        assert len(flood["observation"]) < 200_000 and flood["exit_code"] == 0
        assert bad_timeout["observation"].startswith("[TOOL_ERROR] run_command: timeout must be a number")
        assert empty["observation"].startswith("[TOOL_ERROR] run_command: 'command' must be a non-empty string")
        assert still["observation"] == "alive\n[exit code 0]"


def test_api_key_is_required_beyond_loopback_and_checked_on_every_path_but_liveness(tmp_path):
    with pytest.raises(ValueError, match="beyond loopback"):
        PoolSettings(host="0.0.0.0")
    with PoolServerProcess(settings(tmp_path, api_key="s3cret")) as pool:
        assert httpx.get(pool.url + "/healthz").status_code == 200
        denied = httpx.post(pool.url + "/allocate", json={"task_key": "t"})
        assert denied.status_code == 401 and denied.json()["ok"] is False
        assert "s3cret" not in " ".join(pool.command())  # the key travels in the environment only

        async def allowed():
            async with EnvClient(pool.url, api_key="s3cret") as env:
                return await env.allocate("t")

        assert run(allowed())["lease_id"].startswith("run-")


def test_router_spreads_leases_and_forwards_calls(tmp_path):
    with EnvService(settings(tmp_path), workers=2) as service:
        async def scenario():
            async with EnvClient(service.url) as env:
                leases = [(await env.allocate(f"task-{i % 3}"))["lease_id"] for i in range(6)]
                repeat = await env.allocate("task-9", request_id="same")
                repeat_again = await env.allocate("task-9", request_id="same")
                await env.reset(leases[0], {"setup_command": "echo routed > f"})
                out = await env.exec_tool(leases[0], "run_command", {"command": "cat f"})
                status = await env.status()
                with pytest.raises(EnvServiceError) as unknown:
                    await env.heartbeat("w7:run-0")
                closed = [await env.close(lease) for lease in leases]
                await env.close(repeat["lease_id"])
                burst = [r["lease_id"] for r in await asyncio.gather(*(env.allocate(f"b{i}") for i in range(8)))]
                return leases, repeat, repeat_again, out, status, unknown.value, closed, burst

        leases, repeat, repeat_again, out, status, unknown, closed, burst = run(scenario())
        # concurrent allocates all read the same /status: the router counts what it is sending each server
        assert sorted(lease.split(":")[0] for lease in burst) == ["w0"] * 4 + ["w1"] * 4
        workers = [lease.split(":")[0] for lease in leases]
        assert sorted(workers) == ["w0"] * 3 + ["w1"] * 3  # least-loaded: an even spread
        assert repeat_again == {**repeat, "reused": True}
        assert out["observation"] == "routed\n[exit code 0]"
        assert status["router"]["total_active_runs"] == 7
        assert [w["pool"]["total_active_runs"] for w in status["router"]["workers"]] in ([3, 4], [4, 3])
        assert (unknown.status, unknown.code) == (404, "UNKNOWN_LEASE")
        assert closed == [True] * 6


def test_router_answers_502_for_a_dead_pool_server_and_allocates_on_the_others(tmp_path):
    with EnvService(settings(tmp_path), workers=2) as service:
        async def scenario():
            async with EnvClient(service.url, retries=1, backoff_s=0.05) as env:
                leases = [(await env.allocate(f"t{i}"))["lease_id"] for i in range(2)]
                dead = next(lease for lease in leases if lease.startswith("w1:"))
                service.pools[1].stop()
                with pytest.raises(EnvServiceError) as e:
                    await env.exec_tool(dead, "run_command", {"command": "true"})
                fresh = [(await env.allocate(f"t{i}"))["lease_id"] for i in range(3)]
                return e.value, fresh

        error, fresh = run(scenario())
        assert (error.status, error.code) == (502, "WORKER_UNREACHABLE")
        assert all(lease.startswith("w0:") for lease in fresh)


def test_a_second_server_on_the_same_state_directory_is_refused_and_the_first_keeps_its_leases(tmp_path):
    s = settings(tmp_path)
    with PoolServerProcess(s) as first:
        lease = httpx.post(first.url + "/allocate", json={"task_key": "t"}).json()["lease_id"]
        assert httpx.post(first.url + "/reset", json={"lease_id": lease}).status_code == 200
        second = PoolServerProcess(s, log_path=tmp_path / "second.log", ready_timeout=30)
        with pytest.raises(RuntimeError, match="exited with code"):
            second.start()
        assert "another pool server is using the state directory" in (tmp_path / "second.log").read_text()
        assert httpx.post(first.url + "/heartbeat", json={"lease_id": lease}).status_code == 200
        assert lease_dirs(s.state_dir) == [lease]


def test_a_call_over_the_pools_time_limit_answers_504_and_the_lease_stays_usable(tmp_path):
    with PoolServerProcess(settings(tmp_path, exec_timeout_s=1.0)) as pool:
        async def scenario():
            async with EnvClient(pool.url) as env:
                lease = (await env.allocate("t"))["lease_id"]
                await env.reset(lease)
                with pytest.raises(EnvServiceError) as e:
                    await env.exec_tool(lease, "run_command", {"command": "sleep 5", "timeout": 10})
                after = await env.exec_tool(lease, "run_command", {"command": "echo fine"})
                return e.value, after

        error, after = run(scenario())
        assert (error.status, error.code) == (504, "TIMEOUT") and "1 s" in error.message
        assert after["observation"] == "fine\n[exit code 0]"


def test_a_lease_kept_alive_while_its_policy_thinks_outlives_the_idle_ttl(tmp_path):
    # an agent loop waits on its policy between calls (a 0.5B model's step on two CPU cores took minutes): keep_alive
    # heartbeats meanwhile, so the pool's idle reaper leaves the lease alone; the same wait without it loses the lease
    with PoolServerProcess(settings(tmp_path, idle_ttl_s=1.5, reap_interval_s=0.2)) as pool:
        async def scenario():
            async with EnvClient(pool.url) as env:
                kept = (await env.allocate("t"))["lease_id"]
                await env.reset(kept, {"setup_command": "echo x > file"})
                lost = (await env.allocate("t"))["lease_id"]
                await env.reset(lost, {"setup_command": "echo x > file"})
                async with env.keep_alive(kept, every_s=0.3):
                    await asyncio.sleep(3.0)  # twice the TTL
                reply = await env.exec_tool(kept, "run_command", {"command": "cat file"})
                with pytest.raises(EnvServiceError) as e:
                    await env.exec_tool(lost, "run_command", {"command": "cat file"})
                return reply, e.value

        reply, error = run(scenario())
        assert reply["observation"].splitlines()[0] == "x"
        assert (error.status, error.code) == (404, "UNKNOWN_LEASE")
