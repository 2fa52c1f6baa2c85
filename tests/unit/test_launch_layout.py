"""GPU layouts (slime.launch): exact devices, ranks and ports for 1 x 8 and 2 x 8 GPUs, rejection of layouts that
cannot run, and the launcher's dry run (prints the plan, starts nothing) and real run (execs torchrun, pinned)."""

from __future__ import annotations

import os
import shlex
import stat

import pytest

from slime.launch import EngineSlot, LayoutError, layout_from_args, resolve_layout, visible_devices
from slime.launch import cli
from slime.utils.arguments import build_parser

EIGHT = dict(num_gpus_per_node=8, actor_gpus_per_node=4, rollout_gpus=2, rollout_gpus_per_engine=2, prm_gpus=2,
             prm_gpus_per_engine=2)


def test_one_node_of_eight():
    layout = resolve_layout(**EIGHT)
    assert (layout.nnodes, layout.node_rank, layout.gpus_per_node) == (1, 0, 8)
    assert layout.trainer_gpus == (0, 1, 2, 3) and layout.trainer_world_size == 4
    assert layout.engines == (EngineSlot("rollout", 0, 0, (4, 5), 15010), EngineSlot("prm", 0, 0, (6, 7), 25010))
    assert (layout.rollout_router_port, layout.prm_router_port) == (15000, 25000)
    assert layout.torchrun_args() == ["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1",
                                      "--master-port", "29500", "--nproc-per-node", "4"]
    assert layout.trainer_visible_devices() == "0,1,2,3,4,5,6,7"
    assert "note:" not in layout.describe()  # every GPU is used


def test_two_nodes_of_eight():
    layout = resolve_layout(num_gpus_per_node=8, actor_gpus_per_node=4, nnodes=2, node_rank=1, rollout_gpus=4,
                            rollout_gpus_per_engine=2, prm_gpus=4, prm_gpus_per_engine=1, master_addr="10.0.0.1",
                            master_port=29600)
    assert layout.trainer_gpus == (0, 1, 2, 3) and layout.trainer_world_size == 8
    # policy engines fill node 0's free GPUs first, the judge engines node 1's
    assert layout.rollout_engines == (EngineSlot("rollout", 0, 0, (4, 5), 15010),
                                      EngineSlot("rollout", 1, 0, (6, 7), 15020))
    assert layout.prm_engines == tuple(EngineSlot("prm", i, 1, (4 + i,), 25010 + 10 * i) for i in range(4))
    assert layout.engines_on_node(0) == layout.rollout_engines
    assert layout.engines_on_node(1) == layout.prm_engines
    assert layout.torchrun_args() == ["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                                      "--master-port", "29600", "--nproc-per-node", "4"]
    plan = layout.describe()
    assert "prm-3: node 1 GPUs [7] CUDA_VISIBLE_DEVICES=7 port 25040  <- this node" in plan
    assert "rollout-1: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 15020\n" in plan


def test_every_node_runs_trainer_ranks():
    # nodes are uniform under torchrun: 2 nodes x (4 trainer + 4 engine GPUs), no engine-only nodes
    with pytest.raises(LayoutError, match="exceeds NUM_GPUS=8 x NNODES=2 = 16"):
        resolve_layout(num_gpus_per_node=8, actor_gpus_per_node=8, nnodes=2, rollout_gpus=8, master_addr="n0")


def test_lora_layout_and_colocate():
    lora = resolve_layout(num_gpus_per_node=4, actor_gpus_per_node=2, rollout_gpus=1, prm_gpus=1)
    assert lora.engines == (EngineSlot("rollout", 0, 0, (2,), 15010), EngineSlot("prm", 0, 0, (3,), 25010))
    shared = resolve_layout(num_gpus_per_node=4, actor_gpus_per_node=2, rollout_gpus=2, prm_gpus=2, colocate=True)
    assert [e.gpus for e in shared.rollout_engines] == [(0,), (1,)]  # on the trainer GPUs
    assert [e.gpus for e in shared.prm_engines] == [(2,), (3,)]
    sparse = resolve_layout(num_gpus_per_node=8, actor_gpus_per_node=2, rollout_gpus=2)
    assert "note: node 0 leaves 4 GPU(s) idle" in sparse.describe()
    assert "judge engines: none on GPUs" in sparse.describe()


def test_devices_follow_the_parent_visible_list():
    layout = resolve_layout(**EIGHT)
    parent = "8,9,10,11,12,13,14,15"
    assert layout.trainer_visible_devices(parent) == parent
    assert visible_devices(layout.prm_engines[0].gpus, parent) == "14,15"
    # the engine starter runs inside the trainer, under the trainer's list: it must resolve the same devices
    trainer_env = layout.trainer_visible_devices(parent)
    for engine in layout.engines:
        assert visible_devices(engine.gpus, trainer_env) == visible_devices(engine.gpus, parent)
    with pytest.raises(LayoutError, match="lists 4 device"):
        layout.trainer_visible_devices("0,1,2,3")


@pytest.mark.parametrize("overrides, message", [
    (dict(actor_gpus_per_node=4, rollout_gpus=4, prm_gpus=2),
     "needs 4 trainer + 6 policy + judge engine GPUs = 10, which exceeds NUM_GPUS=8 x NNODES=1 = 8"),
    (dict(actor_gpus_per_node=0), "ACTOR_GPUS (--actor-num-gpus-per-node) is 0"),
    (dict(actor_gpus_per_node=9, rollout_gpus=0, prm_gpus=0), "ACTOR_GPUS=9 trainer GPUs per node exceeds NUM_GPUS=8"),
    (dict(rollout_gpus=3), "ROLLOUT_GPUS=3 is not a multiple of ROLLOUT_TP=2"),
    (dict(prm_gpus=2, prm_gpus_per_engine=16), "judge engine of 16 GPUs (PRM_TP) is larger than a node (NUM_GPUS=8)"),
    (dict(node_rank=1), "NODE_RANK=1 is out of range for NNODES=1"),
    (dict(nnodes=2, master_addr="127.0.0.1"), "NNODES=2: set MASTER_ADDR"),
    (dict(num_gpus_per_node=0), "NUM_GPUS (--num-gpus-per-node) must be an integer >= 1, got 0"),
    (dict(rollout_gpus=-2), "ROLLOUT_GPUS (--rollout-num-gpus) must be an integer >= 0"),
    (dict(train_tp=3), "TRAIN_TP=3 (--tensor-model-parallel-size) does not divide ACTOR_GPUS=4"),
    (dict(master_port=15010), "port 15010 is used by both MASTER_PORT and engine rollout-0"),
    (dict(prm_base_port=15000), "port 15000 is used by both the policy router and the judge router"),
    (dict(master_port=70000), "MASTER_PORT=70000 is not a TCP port"),
    (dict(colocate=True, rollout_gpus=6, prm_gpus=0), "ROLLOUT_GPUS=6 exceeds the 4 trainer GPUs"),
])
def test_impossible_layouts_are_rejected(overrides, message):
    with pytest.raises(LayoutError) as err:
        resolve_layout(**{**EIGHT, **overrides})
    assert message in str(err.value)


def test_an_engine_never_spans_nodes():
    # 2 nodes x 8, trainer 5 per node: 3 free GPUs per node cannot hold TP2 engines back to back
    with pytest.raises(LayoutError, match=r"policy engine 1 \(2 GPUs, ROLLOUT_TP\) would span nodes 0 and 1"):
        resolve_layout(num_gpus_per_node=8, actor_gpus_per_node=5, nnodes=2, rollout_gpus=4,
                       rollout_gpus_per_engine=2, master_addr="n0")


def _args(*extra):
    return build_parser().parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", *extra])


def test_layout_from_trainer_flags_and_torchrun_env():
    args = _args("--actor-num-nodes", "2", "--actor-num-gpus-per-node", "4", "--num-gpus-per-node", "8",
                 "--rollout-num-gpus", "4", "--rollout-num-gpus-per-engine", "2", "--prm-enable", "--prm-num-gpus",
                 "4", "--prm-num-gpus-per-engine", "4", "--prm-base-port", "26000")
    # a torchrun worker: GROUP_RANK is its node rank (wins over NODE_RANK)
    layout = layout_from_args(args, {"GROUP_RANK": "1", "NODE_RANK": "0", "MASTER_ADDR": "10.0.0.1",
                                     "MASTER_PORT": "29700"})
    assert (layout.node_rank, layout.master_addr, layout.master_port) == (1, "10.0.0.1", 29700)
    assert layout.prm_engines == (EngineSlot("prm", 0, 1, (4, 5, 6, 7), 26010),)
    assert [e.gpus for e in layout.rollout_engines] == [(4, 5), (6, 7)]
    # without --prm-enable the judge GPUs are not reserved, like the trainer's own validation
    no_prm = layout_from_args(_args("--num-gpus-per-node", "2", "--rollout-num-gpus", "1", "--prm-num-gpus", "4"), {})
    assert no_prm.prm_engines == () and no_prm.rollout_engines[0].gpus == (1,)


# ------------------------------------------------------------------------------------------------ launcher

TRAINER = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "8", "--num-rollout", "2", "--prompt-data",
           "pytest.ini", "--device", "cuda", "--actor-num-gpus-per-node", "4", "--num-gpus-per-node", "8",
           "--rollout-num-gpus", "2", "--rollout-num-gpus-per-engine", "2", "--prm-enable", "--prm-num-gpus", "2",
           "--prm-num-gpus-per-engine", "2"]


@pytest.fixture
def no_exec(monkeypatch):
    calls = []
    monkeypatch.setattr(os, "execvpe", lambda *a: calls.append(a))
    for name in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    return calls


def test_dry_run_prints_the_plan_and_starts_nothing(no_exec, capsys):
    assert cli.main(["--dry-run", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                     "slime/train_async.py", *TRAINER, "--actor-num-nodes", "2"]) == 0
    assert no_exec == []
    out = capsys.readouterr().out.splitlines()
    assert shlex.split(out[-1]) == ["torchrun", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                                    "--master-port", "29500", "--nproc-per-node", "4", "slime/train_async.py",
                                    *TRAINER, "--actor-num-nodes", "2"]
    # 2 + 2 engine GPUs fill node 0's free GPUs; node 1 only trains
    assert "  rollout-0: node 0 GPUs [4,5] CUDA_VISIBLE_DEVICES=4,5 port 15010" in out
    assert "  prm-0: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 25010" in out
    assert "note: node 1 leaves 4 GPU(s) idle" in out


def test_run_execs_torchrun_with_the_trainer_devices(no_exec, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7,8,9")
    cli.main(["slime/train_async.py", *TRAINER])
    [(program, command, env)] = no_exec
    assert program == "torchrun" and command[:12] == ["torchrun", "--nnodes", "1", "--node-rank", "0",
                                                      "--master-addr", "127.0.0.1", "--master-port", "29500",
                                                      "--nproc-per-node", "4", "slime/train_async.py"]
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"  # this job's 8 GPUs, not the 10 the box shows


@pytest.mark.parametrize("argv, message", [
    (["--nnodes", "2", "slime/train_async.py", *TRAINER], "NNODES=2 but the trainer flags say --actor-num-nodes 1"),
    (["slime/train_async.py", *TRAINER, "--prm-num-gpus", "4"], "exceeds NUM_GPUS=8"),
    (["slime/train_async.py", *TRAINER, "--colocate"], "--colocate cannot be used with the asynchronous loop"),
    (["slime/train_async.py", *TRAINER, "--proxy-port", "25000"], "proxy (PORT, --proxy-port) port 25000"),
    (["slime/eval.py", *TRAINER], "ENTRY must be one of train.py, train_async.py"),
])
def test_launcher_rejects_up_front(no_exec, capsys, argv, message):
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 2 and message in capsys.readouterr().err and no_exec == []


def test_too_few_gpus_on_the_machine(no_exec, capsys, tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: a)'\necho 'GPU 1: NVIDIA H100 (UUID: b)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit):
        cli.main(["slime/train_async.py", *TRAINER])
    assert "NUM_GPUS=8 (--num-gpus-per-node) but nvidia-smi shows 2 GPU(s)" in capsys.readouterr().err
    assert no_exec == []
    assert cli.main(["--dry-run", "slime/train_async.py", *TRAINER]) == 0  # a dry run only warns
    assert "warning: NUM_GPUS=8" in capsys.readouterr().err
