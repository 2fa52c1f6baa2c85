"""A task's docker-compose services: the containers that run beside the agent's, on a network of their own.

    project = load_compose(task)            # None: no compose file, or only the agent's own service
    group = ServiceGroup(project, images, docker_host=host, labels=labels)   # network + service containers, started
    ...                                      # the agent's container joins group.network (DockerSandbox(network=...))
    group.close()

The agent's service is the one Terminal-Bench names `client` (TB 1.x) or Harbor names `main`; failing those the
only service, or the one built from the task's own Dockerfile. It is not started from the compose file: the task's
workspace is its container (built by `task_images`); what the file sets for it in ``environment`` reaches the
agent's commands and the tests. Every other service runs as a container of its image (built from its own build
context with the same base-image stand-ins as the task's, or an image the daemon has), reachable from the agent's
container by the service's name on a private network:

* ``docker network create --internal`` with no address of the host on its bridge
  (``com.docker.network.bridge.inhibit_ipv4``): the containers reach one another, never the host's services or
  the internet (measured: the host's listening ports time out from such a network; with the default bridge address
  they answered);
* a network per workspace, so two episodes' services never meet; containers and network carry the workspace's
  labels (a lease reaper removes them with the agent's container) and are removed by :meth:`ServiceGroup.close`;
* ``depends_on`` orders the starts; a service with a ``healthcheck`` is waited for until Docker reports it healthy
  (or it exits: an error with its log's tail);
* the memory, process, CPU and disk budgets of the agent's sandbox apply to each service container too (the disk
  cap on its writable layer as on the agent's, `container_disk`: the agent could make a service write for it).

Interpolation follows compose's rules (``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
``${VAR:?message}``, ``$$``) over the variables Terminal-Bench's harness sets (``T_BENCH_*``); an unknown variable
is empty, as compose makes it. Keys that decide how a service runs and that this does not reproduce (``volumes``,
``privileged``, ``network_mode``, ``cap_add``, ``devices``, ``pid``, ``ipc``, ``extends``, ...) are refused with
:class:`ComposeError` naming them, rather than run in an environment other than the author's; keys about the
host's side (``ports``, ``container_name``, ``restart``, ``networks``, ``logging``) are ignored, since every service
is reachable by name on the one private network.
"""

from __future__ import annotations

import logging
import re
import secrets
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic.docker_sandbox import SANDBOX_LABEL, cap_container_disk, docker_binary, docker_call, docker_cli
from slime.agentic.sandbox import SandboxError, SandboxLimits

from .tasks import TerminalTask

logger = logging.getLogger(__name__)

AGENT_SERVICE_NAMES = ("client", "main")  # Terminal-Bench 1.x, Harbor
TESTS_DIR = "/tests"
CONTAINER_LOGS = "/logs"
# what Terminal-Bench's harness exports when it brings a task's compose file up (the agent's service's image and
# name are ours: the workspace starts that container itself)
TB_VARIABLES = {
    "T_BENCH_TEST_DIR": TESTS_DIR,
    "T_BENCH_CONTAINER_LOGS_PATH": CONTAINER_LOGS,
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": f"{CONTAINER_LOGS}/agent",
    "ENV_VERIFIER_LOGS_PATH": f"{CONTAINER_LOGS}/verifier",
    "ENV_AGENT_LOGS_PATH": f"{CONTAINER_LOGS}/agent",
}
IGNORED_KEYS = frozenset({"container_name", "ports", "expose", "restart", "networks", "logging", "labels", "tty",
                          "stdin_open", "init", "hostname", "stop_signal", "stop_grace_period", "platform",
                          "pull_policy", "profiles", "deploy", "mem_limit", "cpus", "shm_size"})
SUPPORTED_KEYS = frozenset({"build", "image", "environment", "env_file", "command", "entrypoint", "working_dir",
                            "user", "depends_on", "healthcheck"})
DEFAULT_HEALTH_TIMEOUT_S = 120.0
_VARIABLE = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|"
                       r"([A-Za-z_][A-Za-z0-9_]*))")
_SERVICE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}")


class ComposeError(ValueError):
    """The compose file cannot be run here as its author wrote it; the message names the task, service and key."""


@dataclass(frozen=True)
class HealthCheck:
    test: tuple[str, ...]  # docker's form: ("CMD", ...) or ("CMD-SHELL", "...")
    interval_s: float = 2.0
    timeout_s: float = 10.0
    retries: int = 30
    start_period_s: float = 0.0


@dataclass(frozen=True)
class ComposeService:
    name: str
    image: str | None = None  # the image to run, or the tag `build` produces under (None: ours, task_images)
    build_context: Path | None = None
    dockerfile: Path | None = None
    build_args: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
    entrypoint: tuple[str, ...] | None = None
    working_dir: str | None = None
    user: str | None = None
    depends_on: tuple[str, ...] = ()
    healthcheck: HealthCheck | None = None


@dataclass(frozen=True)
class ComposeProject:
    task: str
    agent_service: str
    agent_environment: dict[str, str]  # what the file sets for the agent's container
    services: tuple[ComposeService, ...]  # the others, in an order that starts every dependency first


def interpolate(text: str, variables: Mapping[str, str], where: str = "") -> str:
    """Compose's variable substitution of one string."""

    def substitute(match: re.Match) -> str:
        escaped, braced, operator, argument, bare = match.groups()
        if escaped:
            return "$"
        name = braced or bare
        value = variables.get(name)
        if operator is None:
            return value or ""
        argument = interpolate(argument or "", variables, where)
        unset_or_empty = value is None or (operator.startswith(":") and value == "")
        if operator.endswith("-"):
            return argument if unset_or_empty else value
        if operator.endswith("?"):
            if unset_or_empty:
                raise ComposeError(f"{where}: variable {name} is required: {argument or 'unset'}")
            return value
        return "" if unset_or_empty else argument  # "+": the alternative when set

    return _VARIABLE.sub(substitute, text)


def _expand(value, variables: Mapping[str, str], where: str):
    if isinstance(value, str):
        return interpolate(value, variables, where)
    if isinstance(value, list):
        return [_expand(v, variables, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, variables, where) for k, v in value.items()}
    return value


def compose_variables(task: TerminalTask) -> dict[str, str]:
    prefix = "".join(c if c.isalnum() else "-" for c in task.name.lower())[:60] or "task"
    return {**TB_VARIABLES, "T_BENCH_TASK_DOCKER_NAME_PREFIX": prefix,
            "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": f"{prefix}-client",
            "T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME": f"{prefix}-client",
            "MAIN_IMAGE_NAME": f"{prefix}-main", "CONTEXT_DIR": str(task.environment_dir or task.path)}


def load_compose(task: TerminalTask) -> ComposeProject | None:
    """The task's compose services beside the agent's (see the module docstring); None when it has no compose file.
    ComposeError when the file does not read or asks for what is not reproduced here."""
    if task.compose_file is None:
        return None
    import yaml

    where = f"task {task.name!r}: {task.compose_file.name}"
    try:
        data = yaml.safe_load(task.compose_file.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise ComposeError(f"{where} does not read: {exc}") from None
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        raise ComposeError(f"{where}: no services")
    variables = compose_variables(task)
    base = task.compose_file.parent
    agent = _agent_service(task, services, base, where)
    agent_data = _expand(services[agent] or {}, variables, f"{where}: service {agent}")
    others = {}
    for name, raw in services.items():
        if name == agent:
            continue
        if not isinstance(name, str) or not _SERVICE_NAME.fullmatch(name):
            raise ComposeError(f"{where}: service name {name!r} is not a valid host name")
        others[name] = _service(name, _expand(raw or {}, variables, f"{where}: service {name}"), base,
                                f"{where}: service {name}")
    for service in others.values():
        unknown = [d for d in service.depends_on if d not in others and d != agent]
        if unknown:
            raise ComposeError(f"{where}: service {service.name} depends on {', '.join(unknown)}, which the file "
                               "does not define")
    return ComposeProject(task.name, agent, _environment(agent_data, base, f"{where}: service {agent}"),
                          tuple(_start_order(others, agent, where)))


def _agent_service(task: TerminalTask, services: dict, base: Path, where: str) -> str:
    for name in AGENT_SERVICE_NAMES:
        if name in services:
            return name
    if len(services) == 1:
        return next(iter(services))
    own = [name for name, spec in services.items()
           if isinstance(spec, dict) and _context(spec.get("build"), base) == (task.environment_dir or task.path)]
    if len(own) == 1:
        return own[0]
    raise ComposeError(f"{where}: which service is the agent's? none is named {' or '.join(AGENT_SERVICE_NAMES)} and "
                       f"{len(own)} of {', '.join(map(str, services))} build the task's Dockerfile")


def _context(build, base: Path) -> Path | None:
    if isinstance(build, str):
        return (base / build).resolve()
    if isinstance(build, dict):
        return (base / str(build.get("context", "."))).resolve()
    return None


def _service(name: str, spec, base: Path, where: str) -> ComposeService:
    if not isinstance(spec, dict):
        raise ComposeError(f"{where}: must be a mapping")
    refused = sorted(k for k in spec if k not in SUPPORTED_KEYS and k not in IGNORED_KEYS)
    if refused:
        raise ComposeError(f"{where}: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not reproduced by "
                           "the Docker backend's services (supported: "
                           f"{', '.join(sorted(SUPPORTED_KEYS))}; ignored: host-side keys such as ports)")
    build = spec.get("build")
    context = dockerfile = None
    build_args: dict[str, str] = {}
    if build is not None:
        context = _context(build, base)
        if context is None:
            raise ComposeError(f"{where}: build must be a path or a mapping")
        if not context.is_dir():
            raise ComposeError(f"{where}: build context {context} is not a folder of the task")
        name_in = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
        dockerfile = (context / str(name_in)).resolve()
        if not dockerfile.is_file():
            raise ComposeError(f"{where}: no {name_in} in its build context")
        if isinstance(build, dict):
            extra = sorted(set(build) - {"context", "dockerfile", "args"})
            if extra:
                raise ComposeError(f"{where}: build {', '.join(extra)} is not supported")
            build_args = _pairs(build.get("args"), f"{where}: build args")
    image = spec.get("image")
    if image is not None and not isinstance(image, str):
        raise ComposeError(f"{where}: image must be a string")
    if build is None and not image:
        raise ComposeError(f"{where}: neither build nor image")
    depends = spec.get("depends_on") or ()
    if isinstance(depends, dict):
        depends = list(depends)
    if not isinstance(depends, (list, tuple)) or not all(isinstance(d, str) for d in depends):
        raise ComposeError(f"{where}: depends_on must list service names")
    return ComposeService(
        name=name, image=image or None, build_context=context, dockerfile=dockerfile, build_args=build_args,
        environment=_environment(spec, base, where), command=_argv(spec.get("command"), f"{where}: command"),
        entrypoint=_argv(spec.get("entrypoint"), f"{where}: entrypoint"),
        working_dir=_optional(spec, "working_dir", where), user=_optional(spec, "user", where),
        depends_on=tuple(depends), healthcheck=_healthcheck(spec.get("healthcheck"), where))


def _optional(spec: dict, key: str, where: str) -> str | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int)):
        raise ComposeError(f"{where}: {key} must be a string")
    return str(value)


def _pairs(value, where: str) -> dict[str, str]:
    """A compose mapping or list of KEY=VALUE (a bare KEY: unset, left out)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in value.items()}
    if isinstance(value, list):
        pairs = {}
        for item in value:
            key, sep, rest = str(item).partition("=")
            if sep:
                pairs[key] = rest
        return pairs
    raise ComposeError(f"{where} must be a mapping or a list of KEY=VALUE")


def _environment(spec: dict, base: Path, where: str) -> dict[str, str]:
    env: dict[str, str] = {}
    files = spec.get("env_file") or []
    for item in [files] if isinstance(files, (str, dict)) else files:
        path = item.get("path") if isinstance(item, dict) else item
        required = item.get("required", True) if isinstance(item, dict) else True
        file = (base / str(path)).resolve()
        if not file.is_file():
            if required:
                raise ComposeError(f"{where}: env_file {path} is not a file of the task")
            continue
        for line in file.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.removeprefix("export ").partition("=")
                env[key.strip()] = value.strip().strip("'\"")
    env.update(_pairs(spec.get("environment"), f"{where}: environment"))
    return env


def _argv(value, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))  # compose splits a string command shell-like, without a shell
        except ValueError as exc:
            raise ComposeError(f"{where}: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v) for v in value)
    raise ComposeError(f"{where} must be a string or a list of strings")


def _duration(value, where: str, default: float) -> float:
    """Compose durations: "1m30s", "10s", "500ms" or a number of seconds."""
    if value is None:
        return default
    if isinstance(value, (int, float)):
        return float(value)
    total, rest = 0.0, str(value).strip()
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", rest):
        total += float(number) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}[unit]
    if not re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|us|h|m|s))+", rest):
        raise ComposeError(f"{where}: {value!r} is not a duration")
    return total


def _healthcheck(spec, where: str) -> HealthCheck | None:
    if spec is None or (isinstance(spec, dict) and spec.get("disable")):
        return None
    if not isinstance(spec, dict) or "test" not in spec:
        raise ComposeError(f"{where}: healthcheck needs a test")
    test = spec["test"]
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test or test[0] not in ("CMD", "CMD-SHELL", "NONE"):
        raise ComposeError(f"{where}: healthcheck test must be a string or a list starting with CMD or CMD-SHELL")
    if test[0] == "NONE":
        return None
    return HealthCheck(tuple(str(t) for t in test), _duration(spec.get("interval"), where, 2.0),
                       _duration(spec.get("timeout"), where, 10.0), int(spec.get("retries", 30)),
                       _duration(spec.get("start_period"), where, 0.0))


def _start_order(services: dict[str, ComposeService], agent: str, where: str) -> list[ComposeService]:
    order: list[ComposeService] = []
    state: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done" or name == agent:
            return
        if state.get(name) == "visiting":
            raise ComposeError(f"{where}: depends_on has a cycle: {' -> '.join((*path, name))}")
        state[name] = "visiting"
        for dependency in services[name].depends_on:
            visit(dependency, (*path, name))
        state[name] = "done"
        order.append(services[name])

    for name in services:
        visit(name, ())
    return order


class ServiceGroup:
    """A workspace's private network and its compose services' containers, started in dependency order (healthy
    ones waited for). `images`: service name -> the image to run (task_images.build_service_images). Close it (or
    use it as a context manager): containers first, then the network."""

    def __init__(self, project: ComposeProject, images: Mapping[str, str], *, docker_host: str | None = None,
                 labels: Mapping[str, str] | None = None, limits: SandboxLimits | None = None,
                 health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S):
        self.project = project
        self.docker = docker_binary()
        self.docker_host = docker_host
        self.labels = {SANDBOX_LABEL: "1", **(labels or {})}
        self.limits = limits or SandboxLimits()
        self.network = f"slime-net-{secrets.token_hex(6)}"
        self.containers: list[str] = []
        self._closed = False
        missing = [s.name for s in project.services if s.name not in images]
        if missing:
            raise ValueError(f"no image for service {', '.join(missing)}")
        try:
            # no IPv4 address of the host on the bridge: the services reach each other, never the host
            self._call("network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true",
                       *self._label_args(), self.network, what="create the services' network")
            for service in project.services:
                self._start(service, images[service.name])
            deadline = time.monotonic() + health_timeout_s
            for service in project.services:
                if service.healthcheck is not None:
                    self._wait_healthy(service, deadline)
        except BaseException:
            self.close()
            raise

    def _label_args(self) -> list[str]:
        return [arg for key, value in self.labels.items() for arg in ("--label", f"{key}={value}")]

    def _call(self, *args: str, what: str, timeout: float = 120.0) -> str:
        return docker_call([*docker_cli(self.docker, self.docker_host), *args], what=what,
                           host=self.docker_host, timeout=timeout).decode("utf-8", "replace").strip()

    def container_name(self, service: ComposeService) -> str:
        return f"{self.network}-{service.name}"

    def _start(self, service: ComposeService, image: str) -> None:
        name = self.container_name(service)
        memory = self.limits.memory_budget
        argv = ["run", "-d", "--pull", "never", "--name", name, "--hostname", service.name,
                "--network", self.network, "--network-alias", service.name,
                "--memory", str(memory), "--memory-swap", str(memory), "--pids-limit", str(self.limits.max_processes),
                "--cpus", f"{self.limits.cpu_budget:g}", "--security-opt", "no-new-privileges", *self._label_args()]
        for key, value in service.environment.items():
            argv += ["-e", f"{key}={value}"]
        if service.working_dir:
            argv += ["-w", service.working_dir]
        if service.user:
            argv += ["--user", service.user]
        command = list(service.command or ())
        if service.entrypoint is not None:
            argv += ["--entrypoint", service.entrypoint[0] if service.entrypoint else ""]
            command = [*service.entrypoint[1:], *command]
        health = service.healthcheck
        if health is not None:
            kind, *test = health.test
            argv += ["--health-cmd", test[0] if kind == "CMD-SHELL" else shlex.join(test),
                     "--health-interval", f"{max(health.interval_s, 0.1):g}s",
                     "--health-timeout", f"{max(health.timeout_s, 0.1):g}s",
                     "--health-retries", str(max(health.retries, 1)),
                     "--health-start-period", f"{health.start_period_s:g}s"]
        self.containers.append(name)
        container_id = self._call(*argv, "--", image, *command,
                                  what=f"start service {service.name} of task {self.project.task}")
        # its writable layer has the agent's disk budget too: the agent could make a service write for it
        cap_container_disk(container_id, name, self.limits.disk_budget_bytes, docker=self.docker,
                           host=self.docker_host)
        logger.info("task %s: service %s started (%s) on %s", self.project.task, service.name, image, self.network)

    def _wait_healthy(self, service: ComposeService, deadline: float) -> None:
        name = self.container_name(service)
        while True:
            state = self._call("inspect", "--format", "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}"
                               "{{end}}", name, what=f"read the health of service {service.name}").split()
            if state[:1] != ["running"]:
                raise SandboxError(f"task {self.project.task}: service {service.name} stopped ({' '.join(state)}) "
                                   f"before it was healthy; its log ends: {self.logs(service)}")
            if state[1:] == ["healthy"]:
                return
            if state[1:] == ["unhealthy"] or time.monotonic() > deadline:
                raise SandboxError(f"task {self.project.task}: service {service.name} is not healthy "
                                   f"({' '.join(state[1:]) or 'no status'}); its log ends: {self.logs(service)}")
            time.sleep(0.5)

    def logs(self, service: ComposeService, chars: int = 1500) -> str:
        proc = subprocess.run([*docker_cli(self.docker, self.docker_host), "logs", "--tail", "40",
                               self.container_name(service)], capture_output=True, text=True, timeout=60, check=False)
        return (proc.stdout + proc.stderr).strip()[-chars:] or "(empty)"

    def close(self) -> None:
        """Remove the service containers, then the network. Idempotent; best effort (a lease reaper removes what
        is left by label)."""
        if self._closed:
            return
        self._closed = True
        for name in reversed(self.containers):
            subprocess.run([*docker_cli(self.docker, self.docker_host), "rm", "-f", "-v", name],
                           capture_output=True, timeout=120, check=False)
        proc = subprocess.run([*docker_cli(self.docker, self.docker_host), "network", "rm", self.network],
                              capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0 and "not found" not in proc.stderr:
            logger.warning("task %s: could not remove network %s: %s", self.project.task, self.network,
                           proc.stderr.strip()[-300:])

    def __enter__(self) -> ServiceGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["AGENT_SERVICE_NAMES", "ComposeError", "ComposeProject", "ComposeService", "HealthCheck", "ServiceGroup",
           "TB_VARIABLES", "compose_variables", "interpolate", "load_compose"]
