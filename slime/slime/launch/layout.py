"""Where every process of a job runs: trainer ranks, policy engines and judge (PRM) engines on the GPUs of N nodes.

Pure: plain numbers in, a frozen `Layout` out (or a `LayoutError` that says what to change). Nothing here
touches a GPU, so layouts are checked, printed and tested on any machine.

Convention (upstream slime's sorted placement bundles, adapted to torchrun):

* GPUs are ordered (node, local GPU id). Node n holds global GPUs ``n*G .. n*G+G-1`` (G = GPUs per node).
* Trainer ranks come first on every node that runs them: nodes ``0 .. actor_num_nodes-1``, local GPUs
  ``0 .. actor_num_gpus_per_node-1``. torchrun starts the same number of ranks on each of those nodes, and
  LOCAL_RANK i trains on local GPU i.
* The remaining GPUs, in (node, GPU) order, are the engine pool: policy engines first, then judge engines,
  each engine a run of consecutive GPUs on one node (SGLang tensor parallel does not span nodes here).
  With ``colocate`` the policy engines take the trainer GPUs instead (synchronous loop only).

Ports: the policy router listens on ``rollout_base_port`` and policy engine i on
``rollout_base_port + PORT_STRIDE * (i + 1)``; the judge router and engines likewise from ``prm_base_port``.
The stride leaves room for the ports an engine derives from its own (NCCL / distributed init).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PORT_STRIDE = 10
DEFAULT_MASTER_PORT = 29500
DEFAULT_ROLLOUT_BASE_PORT = 15000
DEFAULT_PRM_BASE_PORT = 25000
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class LayoutError(ValueError):
    """A layout that cannot run; the message names the setting to change (env var and trainer flag)."""


@dataclass(frozen=True)
class EngineSlot:
    role: str  # "rollout" | "prm"
    index: int  # within its role
    node: int
    gpus: tuple[int, ...]  # local GPU ids on `node`
    port: int

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass(frozen=True)
class Layout:
    nnodes: int  # nodes of the job (all run trainer ranks)
    node_rank: int  # the node this layout was resolved on
    gpus_per_node: int
    trainer_gpus: tuple[int, ...]  # local GPU ids of the trainer ranks, the same on every node
    engines: tuple[EngineSlot, ...]
    master_addr: str
    master_port: int
    rollout_router_port: int
    prm_router_port: int
    colocate: bool = False
    train_tp: int = 1

    # ------------------------------------------------------------------------------------------ queries

    @property
    def trainer_world_size(self) -> int:
        return self.nnodes * len(self.trainer_gpus)

    @property
    def rollout_engines(self) -> tuple[EngineSlot, ...]:
        return tuple(e for e in self.engines if e.role == "rollout")

    @property
    def prm_engines(self) -> tuple[EngineSlot, ...]:
        return tuple(e for e in self.engines if e.role == "prm")

    def engines_on_node(self, node: int) -> tuple[EngineSlot, ...]:
        """The engines that the local rank 0 of `node` starts."""
        return tuple(e for e in self.engines if e.node == node)

    def node_gpus_used(self, node: int) -> tuple[int, ...]:
        used = set(self.trainer_gpus)
        for engine in self.engines_on_node(node):
            used.update(engine.gpus)
        return tuple(sorted(used))

    def port_owners(self) -> list[tuple[int, str]]:
        """Every port the job listens on, with who owns it (torchrun's rendezvous, routers, engines)."""
        owners = [(self.master_port, "MASTER_PORT")]
        if self.rollout_engines:
            owners.append((self.rollout_router_port, "the policy router"))
        if self.prm_engines:
            owners.append((self.prm_router_port, "the judge router"))
        return owners + [(engine.port, f"engine {engine.name}") for engine in self.engines]

    # ------------------------------------------------------------------------------------- processes

    def trainer_visible_devices(self, parent_visible: str | None = None) -> str:
        """CUDA_VISIBLE_DEVICES of the trainer processes: every GPU this node uses, trainer ones first.

        The trainer keeps the engine GPUs visible on purpose: its local rank 0 starts this node's engines and
        must be able to name their devices; each rank pins itself with ``torch.cuda.set_device(LOCAL_RANK)``
        (the trainer GPUs are the first ones), so no rank allocates on an engine GPU.
        """
        return visible_devices(range(self.gpus_per_node), parent_visible)

    def torchrun_args(self) -> list[str]:
        """torchrun's rendezvous flags for this node (the static master rendezvous, same on every node)."""
        return ["--nnodes", str(self.nnodes), "--node-rank", str(self.node_rank),
                "--master-addr", self.master_addr, "--master-port", str(self.master_port),
                "--nproc-per-node", str(len(self.trainer_gpus))]

    def describe(self, parent_visible: str | None = None) -> str:
        """The human-readable plan: nodes, trainer ranks, engines with devices and ports."""
        trainer_ids = ",".join(map(str, self.trainer_gpus))
        lines = [
            f"layout: {self.nnodes} node(s) x {self.gpus_per_node} GPU(s); this is node {self.node_rank}; "
            f"master {self.master_addr}:{self.master_port}",
            f"trainer: {self.trainer_world_size} rank(s) = {self.nnodes} node(s) x {len(self.trainer_gpus)}, "
            f"local GPUs [{trainer_ids}] (LOCAL_RANK i -> GPU i)"
            + (f", tensor parallel {self.train_tp} x data parallel {self.trainer_world_size // self.train_tp}"
               if self.train_tp > 1 else ""),
            f"trainer CUDA_VISIBLE_DEVICES={self.trainer_visible_devices(parent_visible)} "
            "(engine GPUs stay visible to local rank 0, which starts them)",
        ]
        for role, router_port, group in (("policy", self.rollout_router_port, self.rollout_engines),
                                          ("judge", self.prm_router_port, self.prm_engines)):
            if not group:
                lines.append(f"{role} engines: none on GPUs")
                continue
            lines.append(f"{role} engines: {len(group)} x {len(group[0].gpus)} GPU(s), router port {router_port}")
            for engine in group:
                mark = "  <- this node" if engine.node == self.node_rank else ""
                lines.append(f"  {engine.name}: node {engine.node} GPUs "
                             f"[{','.join(map(str, engine.gpus))}] CUDA_VISIBLE_DEVICES="
                             f"{visible_devices(engine.gpus, parent_visible)} port {engine.port}{mark}")
        for node in range(self.nnodes):
            idle = self.gpus_per_node - len(self.node_gpus_used(node))
            if idle:
                lines.append(f"note: node {node} leaves {idle} GPU(s) idle")
        return "\n".join(lines)


def visible_devices(local_gpus, parent_visible: str | None = None) -> str:
    """CUDA_VISIBLE_DEVICES for a process using `local_gpus` (indices into this node's GPU list).

    When the launcher itself runs under a CUDA_VISIBLE_DEVICES (e.g. "4,5,6,7" on a shared box), local GPU i
    is the i-th entry of that list, so the child gets the parent's real ids, not 0..n-1 again.
    """
    local_gpus = list(local_gpus)
    if parent_visible is None or not parent_visible.strip():
        return ",".join(map(str, local_gpus))
    parent = [item.strip() for item in parent_visible.split(",") if item.strip()]
    missing = [gpu for gpu in local_gpus if gpu >= len(parent)]
    if missing:
        raise LayoutError(f"CUDA_VISIBLE_DEVICES={parent_visible} lists {len(parent)} device(s), but the layout uses "
                          f"local GPU(s) {missing}: lower NUM_GPUS (--num-gpus-per-node) or widen "
                          "CUDA_VISIBLE_DEVICES")
    return ",".join(parent[gpu] for gpu in local_gpus)


# ----------------------------------------------------------------------------------------------- resolve

def resolve_layout(*, num_gpus_per_node: int, actor_gpus_per_node: int, nnodes: int = 1, node_rank: int = 0,
                   rollout_gpus: int = 0, rollout_gpus_per_engine: int = 1, prm_gpus: int = 0,
                   prm_gpus_per_engine: int = 1, master_addr: str = "127.0.0.1",
                   master_port: int = DEFAULT_MASTER_PORT, rollout_base_port: int = DEFAULT_ROLLOUT_BASE_PORT,
                   prm_base_port: int = DEFAULT_PRM_BASE_PORT, rollout_router_port: int | None = None,
                   colocate: bool = False, train_tp: int = 1) -> Layout:
    """Place trainer ranks and engines, or raise `LayoutError` saying what cannot work.

    Counts follow the trainer flags: `actor_gpus_per_node` per node (ACTOR_GPUS, --actor-num-gpus-per-node),
    `rollout_gpus` and `prm_gpus` in total over all nodes (ROLLOUT_GPUS / --rollout-num-gpus, PRM_GPUS /
    --prm-num-gpus), `num_gpus_per_node` per node (NUM_GPUS, --num-gpus-per-node). `rollout_router_port`
    moves the policy router off `rollout_base_port` (--sglang-router-port).
    """
    _check_counts(num_gpus_per_node=num_gpus_per_node, actor_gpus_per_node=actor_gpus_per_node, nnodes=nnodes,
                  node_rank=node_rank, rollout_gpus=rollout_gpus, rollout_gpus_per_engine=rollout_gpus_per_engine,
                  prm_gpus=prm_gpus, prm_gpus_per_engine=prm_gpus_per_engine, colocate=colocate, train_tp=train_tp)
    _check_master(nnodes, node_rank, master_addr, master_port)

    trainer_gpus = tuple(range(actor_gpus_per_node))
    trainer_slots = [(node, gpu) for node in range(nnodes) for gpu in trainer_gpus]
    free = [(node, gpu) for node in range(nnodes) for gpu in range(actor_gpus_per_node, num_gpus_per_node)]
    needed = rollout_gpus * (not colocate) + prm_gpus
    if needed > len(free):
        dedicated = "judge" if colocate else "policy + judge"
        raise LayoutError(
            f"the layout needs {nnodes * actor_gpus_per_node} trainer + {needed} {dedicated} engine GPUs = "
            f"{nnodes * actor_gpus_per_node + needed}, which exceeds NUM_GPUS={num_gpus_per_node} x "
            f"NNODES={nnodes} = {num_gpus_per_node * nnodes} (ACTOR_GPUS={actor_gpus_per_node} per node, "
            f"ROLLOUT_GPUS={rollout_gpus} and PRM_GPUS={prm_gpus} in total)")

    rollout_pool = trainer_slots if colocate else free
    rollout = _carve("rollout", rollout_pool, rollout_gpus, rollout_gpus_per_engine, rollout_base_port)
    rest = free if colocate else free[rollout_gpus:]
    prm = _carve("prm", rest, prm_gpus, prm_gpus_per_engine, prm_base_port)
    layout = Layout(nnodes=nnodes, node_rank=node_rank, gpus_per_node=num_gpus_per_node, trainer_gpus=trainer_gpus,
                    engines=rollout + prm, master_addr=master_addr, master_port=master_port,
                    rollout_router_port=rollout_base_port if rollout_router_port is None else rollout_router_port,
                    prm_router_port=prm_base_port, colocate=colocate,
                    train_tp=train_tp)
    _check_ports(layout)
    return layout


def _check_counts(*, num_gpus_per_node, actor_gpus_per_node, nnodes, node_rank, rollout_gpus,
                  rollout_gpus_per_engine, prm_gpus, prm_gpus_per_engine, colocate, train_tp):
    for value, name in ((num_gpus_per_node, "NUM_GPUS (--num-gpus-per-node)"), (nnodes, "NNODES (--actor-num-nodes)"),
                        (rollout_gpus_per_engine, "ROLLOUT_TP (--rollout-num-gpus-per-engine)"),
                        (prm_gpus_per_engine, "PRM_TP (--prm-num-gpus-per-engine)"),
                        (train_tp, "TRAIN_TP (--tensor-model-parallel-size)")):
        if not isinstance(value, int) or value < 1:
            raise LayoutError(f"{name} must be an integer >= 1, got {value!r}")
    for value, name in ((rollout_gpus, "ROLLOUT_GPUS (--rollout-num-gpus)"), (prm_gpus, "PRM_GPUS (--prm-num-gpus)"),
                        (node_rank, "NODE_RANK"), (actor_gpus_per_node, "ACTOR_GPUS (--actor-num-gpus-per-node)")):
        if not isinstance(value, int) or value < 0:
            raise LayoutError(f"{name} must be an integer >= 0, got {value!r}")
    if actor_gpus_per_node == 0:
        raise LayoutError("ACTOR_GPUS (--actor-num-gpus-per-node) is 0: the trainer needs at least one GPU per node")
    if actor_gpus_per_node > num_gpus_per_node:
        raise LayoutError(f"ACTOR_GPUS={actor_gpus_per_node} trainer GPUs per node exceeds NUM_GPUS={num_gpus_per_node} "
                          "(--actor-num-gpus-per-node > --num-gpus-per-node)")
    if node_rank >= nnodes:
        raise LayoutError(f"NODE_RANK={node_rank} is out of range for NNODES={nnodes} (node ranks are 0..{nnodes - 1})")
    if actor_gpus_per_node % train_tp:
        raise LayoutError(f"TRAIN_TP={train_tp} (--tensor-model-parallel-size) does not divide ACTOR_GPUS="
                          f"{actor_gpus_per_node} trainer GPUs per node (tensor-parallel groups stay inside a node)")
    for role, total, per_engine, env in (("policy", rollout_gpus, rollout_gpus_per_engine, "ROLLOUT"),
                                         ("judge", prm_gpus, prm_gpus_per_engine, "PRM")):
        if per_engine > num_gpus_per_node:
            raise LayoutError(f"a {role} engine of {per_engine} GPUs ({env}_TP) is larger than a node "
                              f"(NUM_GPUS={num_gpus_per_node}); engines do not span nodes")
        if total % per_engine:
            raise LayoutError(f"{env}_GPUS={total} is not a multiple of {env}_TP={per_engine} GPUs per {role} engine")
    if colocate and rollout_gpus > nnodes * actor_gpus_per_node:
        raise LayoutError(f"with --colocate the policy engines share the trainer GPUs: ROLLOUT_GPUS={rollout_gpus} "
                          f"exceeds the {nnodes * actor_gpus_per_node} trainer GPUs")


def _check_master(nnodes, node_rank, master_addr, master_port):
    if not master_addr:
        raise LayoutError("MASTER_ADDR is empty")
    if nnodes > 1 and master_addr in LOOPBACK:
        raise LayoutError(f"NNODES={nnodes}: set MASTER_ADDR to the address of node 0 that the other nodes can reach "
                          f"(got {master_addr!r}); every node must use the same MASTER_ADDR and MASTER_PORT")
    if not 1 <= master_port <= 65535:
        raise LayoutError(f"MASTER_PORT={master_port} is not a TCP port")


def _carve(role, pool, total, per_engine, base_port) -> tuple[EngineSlot, ...]:
    """Cut the first `total` GPUs of `pool` into engines of `per_engine` consecutive GPUs on one node each."""
    env, kind = ("ROLLOUT", "policy") if role == "rollout" else ("PRM", "judge")
    slots = []
    for index in range(total // per_engine):
        chunk = pool[index * per_engine:(index + 1) * per_engine]
        nodes = sorted({node for node, _ in chunk})
        if len(nodes) > 1:
            raise LayoutError(
                f"{kind} engine {index} ({per_engine} GPUs, {env}_TP) would span nodes {nodes[0]} and {nodes[-1]} "
                f"(GPUs {chunk}): an engine must fit in the free GPUs of one node; change {env}_TP or the GPU "
                "counts so that each node's free GPUs are a multiple of the engine size")
        slots.append(EngineSlot(role=role, index=index, node=nodes[0], gpus=tuple(gpu for _, gpu in chunk),
                                port=base_port + PORT_STRIDE * (index + 1)))
    return tuple(slots)


def _check_ports(layout: Layout):
    owners: dict[int, str] = {}
    for port, owner in layout.port_owners():
        if not 1 <= port <= 65535:
            raise LayoutError(f"{owner} port {port} is not a TCP port (check the base ports)")
        if port in owners:
            raise LayoutError(f"port {port} is used by both {owners[port]} and {owner}: move a base port "
                              "(--rollout-base-port / --prm-base-port) or MASTER_PORT")
        owners[port] = owner


def check_port_free_of_layout(layout: Layout, port: int, owner: str):
    """Raise if `port` (e.g. the conversation proxy's) is one the layout hands to a router, engine or torchrun."""
    taken = dict(layout.port_owners())
    if port in taken:
        raise LayoutError(f"{owner} port {port} is also {taken[port]}'s: change one of them")


# ------------------------------------------------------------------------------------------ from trainer flags

def layout_from_args(args, environ=None) -> Layout:
    """The layout of a job from its parsed trainer flags; node rank and master address come from torchrun's env.

    torchrun gives every worker GROUP_RANK (its node rank), MASTER_ADDR and MASTER_PORT; NODE_RANK is read
    when GROUP_RANK is absent (the launcher, before torchrun starts).
    """
    environ = os.environ if environ is None else environ
    node_rank = int(environ.get("GROUP_RANK", environ.get("NODE_RANK", "0")))
    prm_gpus = args.prm_num_gpus if getattr(args, "prm_enable", False) else 0
    return resolve_layout(
        num_gpus_per_node=args.num_gpus_per_node, actor_gpus_per_node=args.actor_num_gpus_per_node,
        nnodes=args.actor_num_nodes, node_rank=node_rank,
        rollout_gpus=args.rollout_num_gpus or 0, rollout_gpus_per_engine=args.rollout_num_gpus_per_engine,
        prm_gpus=prm_gpus or 0, prm_gpus_per_engine=args.prm_num_gpus_per_engine,
        master_addr=environ.get("MASTER_ADDR", "127.0.0.1"),
        master_port=int(environ.get("MASTER_PORT", DEFAULT_MASTER_PORT)),
        rollout_base_port=getattr(args, "rollout_base_port", DEFAULT_ROLLOUT_BASE_PORT),
        prm_base_port=getattr(args, "prm_base_port", DEFAULT_PRM_BASE_PORT),
        rollout_router_port=getattr(args, "sglang_router_port", None),
        colocate=bool(getattr(args, "colocate", False)),
        train_tp=getattr(args, "tensor_model_parallel_size", 1) or 1)
