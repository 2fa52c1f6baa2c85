"""Engines on two nodes, simulated on one machine: two torchrun "nodes" (--nnodes 2, one rank each, gloo).

Each node's local rank 0 runs `start_node_engines` for the layout of the README's multi-node example in
miniature (2 nodes x 2 GPUs, one trainer GPU per node; the policy engine on node 0, the judge engine on node 1).
The node rank comes from torchrun's GROUP_RANK, as on real nodes. SGLang cannot run here, so each slot is
served by our embedded engine (a real server on the slot's port, bound where `engine_host` says), started
through the same `make_server` seam the SGLang/vLLM servers use; the gather, the ordering on rank 0 and the
failure handling are the production code. rank 0 then generates from both nodes' engines with the engine key.

This file is also the worker torchrun starts: `python -m torch.distributed.run ... thisfile OUT_DIR`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEY = "node-test-key"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slot_ports() -> tuple[int, int]:
    """Two base ports whose first engine port (base + 10) is free."""
    bases = []
    while len(bases) < 2:
        port = _free_port()
        if port > 1100 and port - 10 not in bases:
            bases.append(port - 10)
    return bases[0], bases[1]


def _run_nodes(tmp_path: Path, config: dict, timeout: int = 300) -> list[dict]:
    (tmp_path / "config.json").write_text(json.dumps(config))
    master_port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SLIME_ENGINE_API_KEY": KEY}
    procs, logs = [], [tmp_path / f"torchrun-node{node}.log" for node in range(2)]
    for node in range(2):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(master_port),
               __file__, str(tmp_path)]
        with open(logs[node], "w") as log:
            procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True))
    try:
        for proc in procs:
            proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("the nodes did not finish:\n" + "\n".join(
            f"--- node {node} ---\n{path.read_text()[-3000:]}" for node, path in enumerate(logs))) from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    outputs = [path.read_text() for path in logs]
    for node, (proc, out) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, f"node {node} failed:\n{out[-4000:]}"
    return [json.loads((tmp_path / f"node{node}.json").read_text()) for node in range(2)]


def test_rank_0_gets_every_nodes_engines(tmp_path, tiny_model_path):
    rollout_base, prm_base = _slot_ports()
    results = _run_nodes(tmp_path, {"model": str(tiny_model_path), "rollout_base": rollout_base,
                                    "prm_base": prm_base, "engine_host": {"0": "127.0.0.1", "1": "127.0.0.1"}})
    node0, node1 = results
    rollout_url, prm_url = f"http://127.0.0.1:{rollout_base + 10}", f"http://127.0.0.1:{prm_base + 10}"
    # each node started only its own slot, pinned to that slot's GPU, on the slot's port
    assert node0["started"] == {"rollout-0": {"url": rollout_url, "visible": "1"}}
    assert node1["started"] == {"prm-0": {"url": prm_url, "visible": "1"}}
    # rank 0 holds both roles with every node's worker; node 1 holds only what it must stop
    assert node0["groups"] == {"rollout": {"workers": [rollout_url], "urls": [rollout_url], "processes": 1},
                               "prm": {"workers": [prm_url], "urls": [prm_url], "processes": 0}}
    assert node1["groups"] == {"prm": {"workers": [prm_url], "urls": [prm_url], "processes": 1}}
    # both engines generated for rank 0 with the key, and refused a request without it
    assert node0["generated"] == {"rollout": 4, "prm": 4} and node0["without_key"] == {"rollout": 401, "prm": 401}
    # after stop(), nothing listens on either port
    assert node0["stopped"] and node1["stopped"]


def test_a_failing_node_stops_the_engines_of_every_node(tmp_path, tiny_model_path):
    rollout_base, prm_base = _slot_ports()
    # node 1's engines would listen beyond loopback with no key: it reports the error instead of starting
    results = _run_nodes(tmp_path, {"model": str(tiny_model_path), "rollout_base": rollout_base,
                                    "prm_base": prm_base, "engine_host": {"0": "127.0.0.1", "1": "10.0.0.7"},
                                    "drop_key_on": 1})
    for result in results:
        assert "starting the engines failed on node 1: refusing to start engines listening on 10.0.0.7" in \
            result["error"]
    assert results[1]["started"] == {}
    assert results[0]["started"] == {"rollout-0": {"url": f"http://127.0.0.1:{rollout_base + 10}", "visible": "1"}}
    assert results[0]["stopped"]  # node 0's engine was started, and stopped again by the failure


# ------------------------------------------------------------------------------------------ torchrun worker

def _listening(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, int(port))) == 0


def _worker(out: Path) -> None:
    import httpx

    from slime.backends.fsdp.parallel import init_distributed, leave_together
    from slime.engine.client import EngineClient
    from slime.engine.launch import EngineProcess
    from slime.launch.layout import layout_from_args, visible_devices
    from slime.training.engines import EnginesFailedOnSomeNode, start_node_engines
    from slime.utils.arguments import parse_args

    config = json.loads((out / "config.json").read_text())
    dist = init_distributed("cpu")
    node = int(os.environ["GROUP_RANK"])
    args = parse_args(["--hf-checkpoint", config["model"], "--prm-model-path", config["model"],
                       "--rollout-batch-size", "4", "--num-rollout", "1", "--disable-rollout-global-dataset",
                       "--rollout-engine", "sglang", "--rollout-num-gpus", "1", "--prm-enable", "--prm-num-gpus", "1",
                       "--actor-num-nodes", "2", "--actor-num-gpus-per-node", "1", "--num-gpus-per-node", "2",
                       "--rollout-base-port", str(config["rollout_base"]), "--prm-base-port", str(config["prm_base"])])
    environ = dict(os.environ)
    environ["MASTER_ADDR"] = "10.0.0.1"  # the layout refuses a loopback master with 2 nodes; the rendezvous is local
    environ["SLIME_ENGINE_HOST"] = config["engine_host"][str(node)]
    if config.get("drop_key_on") == node:
        environ.pop("SLIME_ENGINE_API_KEY")
    layout = layout_from_args(args, environ)
    started = {}
    servers = []

    def embedded_in_the_slot(args, slot, kind, model_path, run_dir, host, parent_visible):
        assert kind == "sglang" and slot.node == node
        server = EngineProcess(model_path, port=slot.port, api_key=environ.get("SLIME_ENGINE_API_KEY"),
                               log_path=run_dir / f"{slot.name}.log", ready_timeout=180)
        server.host = host
        started[slot.name] = {"url": server.url, "visible": visible_devices(slot.gpus, parent_visible)}
        servers.append(server)
        return server

    result = {"node": node, "started": started}
    try:
        engines = start_node_engines(args, out / f"node{node}", dist, config["model"], layout=layout,
                                     environ=environ, make_server=embedded_in_the_slot)
    except EnginesFailedOnSomeNode as exc:
        result["error"] = str(exc)
        result["stopped"] = not any(_listening(s["url"]) for s in started.values())
    else:
        result["groups"] = {role: {"workers": g.worker_urls, "urls": g.urls, "processes": len(g.processes)}
                            for role, g in engines.groups.items()}
        if dist.is_main:
            result["generated"], result["without_key"] = {}, {}
            for role, group in engines.groups.items():
                with EngineClient(group.url, api_key=KEY, timeout=60.0) as client:
                    reply = client.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 4,
                                                                                  "ignore_eos": True})
                result["generated"][role] = len(reply["output_ids"])
                result["without_key"][role] = httpx.post(group.url + "/generate",
                                                         json={"input_ids": [1], "sampling_params": {}}).status_code
        import torch.distributed as torch_dist

        torch_dist.barrier()  # rank 0 is done with node 1's engine before node 1 stops it
        engines.stop()
        result["stopped"] = not any(_listening(s["url"]) for s in started.values())
    (out / f"node{node}.json").write_text(json.dumps(result))
    # as the training loop does, on both paths: a rank that exits with live gloo threads can abort at interpreter
    # exit ("terminate called without an active exception") and leave its peer hanging (seen once in CI)
    leave_together()


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
