"""`python -m slime.launch [launcher options] ENTRY [trainer flags]`: validate the layout, print it, start torchrun.

The layout is derived from the trainer flags themselves (`--actor-num-nodes`, `--actor-num-gpus-per-node`,
`--num-gpus-per-node`, `--rollout-num-gpus[-per-engine]`, `--prm-num-gpus[-per-engine]`, ...), so the plan that is
printed is the one the trainer will compute again with `layout_from_args`. The trainer flags are parsed *and*
validated here, before anything starts: a typo fails in a second instead of after torchrun has started eight
ranks. `--dry-run` stops after printing; otherwise this process becomes torchrun (exec), so signals reach it
directly and nothing is left behind to kill.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from slime.launch.layout import (
    DEFAULT_MASTER_PORT,
    Layout,
    LayoutError,
    check_port_free_of_layout,
    layout_from_args,
)

ENTRY_MODES = {"train.py": "sync", "train_async.py": "async"}


def build_launcher_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="python -m slime.launch", allow_abbrev=False,
        description="Resolve and print the GPU layout of a training job, then start it under torchrun. "
                    "Launcher options come before ENTRY; everything after ENTRY goes to the trainer.")
    p.add_argument("--dry-run", action="store_true", help="print the layout and the command, start nothing")
    p.add_argument("--nnodes", type=int, default=_int_env("NNODES"),
                   help="env NNODES; must equal the trainer's --actor-num-nodes when given")
    p.add_argument("--node-rank", type=int, default=_int_env("NODE_RANK", 0), help="env NODE_RANK (default 0)")
    p.add_argument("--master-addr", default=env("MASTER_ADDR", "127.0.0.1"),
                   help="env MASTER_ADDR: address of node 0, reachable from every node")
    p.add_argument("--master-port", type=int, default=_int_env("MASTER_PORT", DEFAULT_MASTER_PORT),
                   help=f"env MASTER_PORT (default {DEFAULT_MASTER_PORT})")
    p.add_argument("entry", help="trainer entry point: slime/train.py or slime/train_async.py")
    p.add_argument("trainer_args", nargs=argparse.REMAINDER, help="trainer flags")
    return p


def _int_env(name: str, default: int | None = None) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"error: {name} must be an integer, got {value!r}") from None


def resolve(launcher: argparse.Namespace):
    """Parse and validate the trainer flags and resolve the layout; exits 2 with a clear message otherwise."""
    from slime.utils.arguments import ArgumentError, parse_trainer_args, validate_args

    mode = ENTRY_MODES.get(Path(launcher.entry).name)
    if mode is None:
        _fail(f"ENTRY must be one of {', '.join(ENTRY_MODES)} (a path), got {launcher.entry!r}")
    try:
        args = parse_trainer_args(launcher.trainer_args)  # argparse reports syntax errors (exit 2)
    except ArgumentError as exc:  # --custom-config-path, a plugin's flags
        _fail(str(exc))
    if launcher.nnodes is not None and launcher.nnodes != args.actor_num_nodes:
        _fail(f"NNODES={launcher.nnodes} but the trainer flags say --actor-num-nodes {args.actor_num_nodes}: "
              "every node runs trainer ranks, so the two must agree")
    environ = {"NODE_RANK": str(launcher.node_rank), "MASTER_ADDR": launcher.master_addr,
               "MASTER_PORT": str(launcher.master_port)}
    try:
        layout = layout_from_args(args, environ)
        if layout.node_rank == 0 and not args.proxy_url:  # the proxy runs beside rank 0
            check_port_free_of_layout(layout, args.proxy_port, "the conversation proxy (PORT, --proxy-port)")
        validate_args(args, mode=mode, world_size=layout.trainer_world_size)
    except (LayoutError, ArgumentError) as exc:
        _fail(str(exc))
    return args, layout


def torchrun_command(layout: Layout, entry: str, trainer_args: list[str]) -> list[str]:
    return ["torchrun", *layout.torchrun_args(), entry, *trainer_args]


def check_gpus_present(layout: Layout, parent_visible: str | None) -> str | None:
    """A problem with the GPUs this machine shows (None when fine or when there is no nvidia-smi to ask)."""
    if parent_visible is not None and parent_visible.strip():
        have = len([d for d in parent_visible.split(",") if d.strip()])
        source = f"CUDA_VISIBLE_DEVICES={parent_visible}"
    elif shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            return f"nvidia-smi -L failed: {done.stderr.strip() or done.stdout.strip()}"
        have = sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))
        source = "nvidia-smi"
    else:
        return None
    if have < layout.gpus_per_node:
        return f"NUM_GPUS={layout.gpus_per_node} (--num-gpus-per-node) but {source} shows {have} GPU(s) on this node"
    return None


def plan_text(layout: Layout, args, command: list[str], parent_visible: str | None) -> str:
    from slime.utils.arguments import method_summary

    flags = (f"--actor-num-nodes {args.actor_num_nodes} --actor-num-gpus-per-node {args.actor_num_gpus_per_node} "
             f"--num-gpus-per-node {args.num_gpus_per_node} --rollout-num-gpus {args.rollout_num_gpus} "
             f"--rollout-num-gpus-per-engine {args.rollout_num_gpus_per_engine} --prm-num-gpus {args.prm_num_gpus} "
             f"--prm-num-gpus-per-engine {args.prm_num_gpus_per_engine} --train-backend {args.train_backend} "
             f"--tensor-model-parallel-size {args.tensor_model_parallel_size} --rollout-engine {args.rollout_engine} "
             f"--prm-engine {args.prm_engine}")
    return "\n".join([
        layout.describe(parent_visible),
        f"layout flags: {flags}",
        method_summary(args),
        f"process (node {layout.node_rank}): CUDA_VISIBLE_DEVICES={layout.trainer_visible_devices(parent_visible)} "
        f"torchrun with {len(layout.trainer_gpus)} rank(s); the same command runs on every node with its NODE_RANK",
        shlex.join(command),
    ])


def main(argv: list[str] | None = None) -> int:
    launcher = build_launcher_parser().parse_args(argv)
    args, layout = resolve(launcher)
    parent_visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    command = torchrun_command(layout, launcher.entry, launcher.trainer_args)
    try:
        text = plan_text(layout, args, command, parent_visible)
    except LayoutError as exc:
        _fail(str(exc))
    problem = check_gpus_present(layout, parent_visible)
    if launcher.dry_run:
        if problem:
            print(f"warning: {problem}", file=sys.stderr)
        print(text, flush=True)
        return 0
    if problem:
        _fail(problem)
    print(text, flush=True)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=layout.trainer_visible_devices(parent_visible))
    os.execvpe(command[0], command, env)  # become torchrun: Ctrl-C and kill reach it, nothing to clean up


def _fail(message: str):
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
