"""The environment service's `swe` provider: upstream's SWE exec server (create / exec / diff / evaluate / destroy)
on the pool server's lease contract, in the bubblewrap sandbox (the default) or a Docker container per episode.

    python -m slime.agentic.env_service.pool_server --provider swe \
        --provider-option instances=swe-rl/data/instances.jsonl [--provider-option backend=docker \
        --provider-option image=auto|swebench|swe-gym|TEMPLATE --provider-option docker_user=... \
        --provider-option docker_host=unix:///...]

Backend `docker` (:mod:`.docker_backend`): the same tools and replies from a container of the instance's image
(SWE-bench's images for SWE-bench rows), evaluation in a fresh container; what follows describes the default.

* `reset` (`task_meta = {"instance_id": ...}`; else the lease's task key is the id): a fresh git working tree of the
  instance at its base commit (:func:`.repos.checkout`) in the lease's work directory, owned by the sandbox's
  unprivileged uid (git inside refuses a tree of another owner: "dubious ownership"), bound at ``/testbed`` in a
  bubblewrap sandbox with no network. Commands see ``HOME=/tmp`` (nothing of the shell's lands in the tree),
  ``PYTHONDONTWRITEBYTECODE=1`` and ``PYTHONPATH`` = the project's import roots (the package imports from the tree,
  as the editable install of a SWE-bench image does). The reply carries the problem statement and the tool schemas.
* tool `bash` (upstream's ``/container/exec``): ``bash -lc COMMAND`` in ``/testbed`` (or `cwd` inside it) with a
  timeout (default 180 s); the reply is ``{returncode, output}`` with output = stdout and stderr interleaved as a
  terminal shows them, head and tail kept when it is long; on timeout ``returncode -1`` and ``"Command timed out
  after N s"`` (the whole process tree is killed: upstream's ``docker exec`` left it running).
* tool `diff` (upstream's ``/container/diff``): ``git add -A && git diff --cached`` of the tree against the base
  commit, computed with a git directory of ours (:func:`.evaluate.working_tree_diff`: nothing in the agent's
  ``.git`` runs, and changes the agent committed still count).
* `evaluate` (``{"patch": ...}``): the sealed evaluation (:func:`.evaluate.evaluate_patch`) in a FRESH tree, never
  the agent's; without a patch, the tree's diff is evaluated (upstream's diff fallback). Reward +1 resolved, -1
  otherwise, with the per-test outcomes and the reason. After `evaluate` the lease takes no more tool calls (409
  ``EVALUATED``); reset it to start over.
* `close` ends the sandbox (the pool then removes the work directory); `resources`/`reap`: the sandbox uid, as the
  terminal provider.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic import sandbox as sb
from slime.agentic import sandbox_disk
from slime.agentic.env_service.providers import (
    HARNESS_TOKEN_KEY,
    LEASE_LABEL,
    LeaseContext,
    LeaseReaper,
    ProviderError,
    budget_reply,
    harness_call,
    new_harness_token,
)

from . import repos
from .docker_backend import AUTO, CONDA_PREAMBLE, DockerSweBackend
from .evaluate import evaluate_patch, run_instance, working_tree_diff
from .instances import SHIPPED_INSTANCES, InstanceFormatError, SweInstance, load_instances
from .testrun import TESTBED, command_env

DEFAULT_INSTANCES = SHIPPED_INSTANCES
INSTANCES_ENV = "SWE_INSTANCES"
DEFAULT_EXEC_TIMEOUT_S = 180.0  # upstream's exec timeout
DEFAULT_MAX_OUTPUT_BYTES = 128 * 1024  # above the agent's 10,000-character elision, so the agent's rule decides

BASH_SCHEMA = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command with `bash -lc` in the repository (/testbed); returns its return code and its "
                       "output (stdout and stderr together).",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "the command line"},
                "timeout": {"type": "number", "description": "seconds before it is killed (default 180)"},
                "cwd": {"type": "string", "description": "a directory inside /testbed to run it in"},
            },
            "required": ["command"],
        },
    },
}
DIFF_SCHEMA = {
    "type": "function",
    "function": {"name": "diff", "parameters": {"type": "object", "properties": {}},
                 "description": "The repository's changes as a patch (git add -A && git diff --cached)."},
}


def timeout_message(seconds: float) -> str:
    return f"Command timed out after {seconds:g} s"


BACKENDS = ("bwrap", "docker")


@dataclass
class SweEnv:
    instance: SweInstance
    tree: Path | None  # on this host (bwrap); None in a container
    box: sb.SandboxBase
    lease_id: str = ""
    preamble: str = ""  # put before every command (docker: the image's conda environment)
    evaluated: bool = False
    harness_token: str = field(default_factory=new_harness_token)
    progress: dict = field(default_factory=dict)  # sha256 of a diff -> share of the listed tests it passes
    over_budget: str = ""  # the whole-sandbox budget the episode went over (it is then over: not resolved)
    disk: sandbox_disk.CappedDirectory | None = None  # the tree's own filesystem (bwrap with budgets)


class SweProvider:
    name = "swe"

    def __init__(self, instances: str | os.PathLike | None = None, exec_timeout_s: float = DEFAULT_EXEC_TIMEOUT_S,
                 max_timeout_s: float = 280.0, eval_timeout_s: float = 300.0,
                 max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES, memory_bytes: int = 4 << 30,
                 max_processes: int = 256, backend: str = "bwrap", image: str = AUTO,
                 docker_user: str | None = None, docker_host: str | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"swe provider: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        path = Path(instances or os.environ.get(INSTANCES_ENV) or DEFAULT_INSTANCES)
        try:
            loaded = load_instances(path)
        except (OSError, InstanceFormatError) as e:
            raise ValueError(f"swe provider: cannot load instances from {path}: {e}") from None
        self.instances_path = path
        self.instances = {i.instance_id: i for i in loaded}
        self.exec_timeout_s = float(exec_timeout_s)
        self.max_timeout_s = float(max_timeout_s)
        self.eval_timeout_s = float(eval_timeout_s)
        if not 0 < self.exec_timeout_s <= self.max_timeout_s:
            raise ValueError(f"swe provider: exec_timeout_s must be in (0, max_timeout_s={self.max_timeout_s:g}]")
        # upstream's containers: --pids-limit 256 --memory 4g; plus no network, a uid of our own, an output cap
        self.limits = sb.SandboxLimits(max_output_bytes=int(max_output_bytes), memory_bytes=int(memory_bytes),
                                       max_processes=int(max_processes))
        self.backend = backend
        self.docker = DockerSweBackend(image or AUTO, docker_user or None, docker_host or None, self.limits) \
            if backend == "docker" else None
        self._reaper = LeaseReaper("swe", docker=self.docker is not None, docker_host=docker_host or None)

    # ------------------------------------------------------------------------------------------- lease life

    def instance_for(self, lease: LeaseContext, task_meta) -> SweInstance:
        if not isinstance(task_meta, dict):
            raise ProviderError(400, "task_meta must be an object with instance_id")
        instance_id = task_meta.get("instance_id") or lease.task_key
        if not isinstance(instance_id, str) or instance_id not in self.instances:
            raise ProviderError(404, f"no instance {instance_id!r} in {self.instances_path}", code="UNKNOWN_INSTANCE")
        return self.instances[instance_id]

    async def reset(self, lease: LeaseContext, request: dict) -> tuple[SweEnv, dict]:
        instance = self.instance_for(lease, request.get("task_meta") or {})
        if self.docker is not None:
            try:
                box = await asyncio.to_thread(self.docker.open, instance, {LEASE_LABEL: lease.lease_id})
            except (ValueError, repos.RepoError, sb.SandboxError) as e:  # no such image, not the base commit
                raise ProviderError(422, f"{instance.instance_id}: {e}", code="SETUP_FAILED") from None
            env = SweEnv(instance, None, box, lease.lease_id, CONDA_PREAMBLE)
        else:
            tree = Path(lease.workdir) / "testbed"
            disk = await asyncio.to_thread(sb.capped_work_directory, tree, self.limits)
            try:
                await asyncio.to_thread(repos.checkout, instance, tree)
                # the sandbox chowns the tree to its uid (git in the sandbox then owns its repository) and back at close
                box = await asyncio.to_thread(sb.Sandbox, tree, limits=self.limits, mount_at=TESTBED,
                                              env=command_env(repos.project_of(instance)))
            except BaseException as e:
                if disk is not None:
                    await asyncio.to_thread(disk.close)
                if isinstance(e, repos.RepoError):
                    raise ProviderError(422, f"{instance.instance_id}: {e}", code="SETUP_FAILED") from None
                raise
            env = SweEnv(instance, tree, box, lease.lease_id, disk=disk)
        return env, {"instance_id": instance.instance_id, "repo": instance.repo,
                     "problem_statement": instance.problem_statement, "user_msg": instance.problem_statement,
                     "cwd": TESTBED, "tool_schemas": [BASH_SCHEMA, DIFF_SCHEMA], HARNESS_TOKEN_KEY: env.harness_token}

    async def close(self, env: SweEnv) -> None:
        try:
            await env.box.aclose()
        finally:
            if env.disk is not None:
                await asyncio.to_thread(env.disk.close)

    def resources(self, env: SweEnv) -> dict:
        if env.tree is None:
            return {"uid": env.box.uid, "container": env.box.name, "docker_host": env.box.docker_host,
                    "instance_id": env.instance.instance_id}
        return {"uid": env.box.uid, "path": str(env.tree), "instance_id": env.instance.instance_id}

    def reap(self, resources: dict) -> None:
        """After a crash: the recorded container and the lease's labelled ones (docker), the uid's processes."""
        self._reaper(resources)

    async def tree_diff(self, env: SweEnv) -> tuple[str, str | None]:
        """(the agent's changes as a patch, None) or ("", why the diff failed)."""
        if env.tree is None:
            return await self.docker.diff(env.box, env.instance)
        return await asyncio.to_thread(working_tree_diff, env.tree, env.instance), None

    # ------------------------------------------------------------------------------------------- tools

    async def exec_tool(self, env: SweEnv, tool_call: dict) -> dict:
        if env.evaluated:
            raise ProviderError(409, "this lease was evaluated: reset it to start a new episode", code="EVALUATED")
        name, arguments = tool_call.get("name"), tool_call.get("arguments") or {}
        if not isinstance(arguments, dict):
            return _tool_error(f"{name}: arguments must be an object")
        if name == "bash":
            return await self.bash(env, arguments)
        if name == "diff":
            patch, problem = await self.tree_diff(env)
            if problem:
                return _tool_error(f"diff: {problem}")
            reply = {"observation": patch, "patch": patch, "returncode": 0}
            if arguments.get("progress") and harness_call(arguments, env.harness_token):
                reply["progress"] = await self.progress(env, patch)
            return reply
        return _tool_error(f"unknown tool: {name} (tools: bash, diff)")

    async def progress(self, env: SweEnv, patch: str) -> float:
        """The share of the instance's listed tests that pass with `patch` (the harness's look at the state, for the
        rule step judge): the sealed evaluation in a fresh tree or container, once per distinct patch. The empty
        patch is the base tree (its PASS_TO_PASS tests pass); a refused or tampered patch passes nothing."""
        key = hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest()
        if key not in env.progress:
            tests = list(env.instance.tests)
            if env.tree is None:
                run = self.docker.run_instance if not patch.strip() else self.docker.evaluate
                result = await run(env.instance, patch if patch.strip() else None, timeout=self.eval_timeout_s,
                                   labels={LEASE_LABEL: env.lease_id})
            elif not patch.strip():
                result = await run_instance(env.instance, None, timeout=self.eval_timeout_s,
                                            base_dir=str(Path(env.tree).parent))
            else:
                result = await evaluate_patch(env.instance, patch, timeout=self.eval_timeout_s,
                                              base_dir=str(Path(env.tree).parent))
            passed = 0 if result.tampered else len(result.passed(tests))
            env.progress[key] = passed / len(tests) if tests else 0.0
        return env.progress[key]

    def _timeout(self, value) -> float | None:
        if value is None:
            return self.exec_timeout_s
        try:
            timeout = float(value)
        except (TypeError, ValueError):
            return None
        return timeout if 0 < timeout <= self.max_timeout_s else None

    async def bash(self, env: SweEnv, arguments: dict) -> dict:
        if env.over_budget:
            return {**budget_reply("", env.over_budget), "returncode": -1, "output": "", "timed_out": False}
        reply = await self._bash(env, arguments)
        if str(reply.get("observation", "")).startswith("[TOOL_ERROR]"):
            return reply  # refused before anything ran
        env.over_budget = env.box.budget_exceeded()
        if env.over_budget:
            return {**reply, **budget_reply(reply.get("observation", ""), env.over_budget)}
        return reply

    async def _bash(self, env: SweEnv, arguments: dict) -> dict:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return _tool_error("bash: 'command' must be a non-empty string")
        timeout = self._timeout(arguments.get("timeout"))
        if timeout is None:
            return _tool_error(f"bash: timeout must be a number in (0, {self.max_timeout_s:g}]")
        cwd = arguments.get("cwd")
        if cwd is not None:
            inner = os.path.normpath(os.path.join(TESTBED, str(cwd)))
            if inner != TESTBED and not inner.startswith(TESTBED + "/"):
                return _tool_error(f"bash: cwd {cwd!r} is outside {TESTBED}")
            cwd = inner
        limits = self.limits.with_timeout(timeout)
        # stderr joins stdout in the order written (upstream's output is stdout+stderr as a terminal shows it);
        # the same line as the command, so bash's line numbers in error messages stay the command's own
        result = await env.box.run(f"exec 2>&1; {env.preamble}cd {shlex.quote(cwd or TESTBED)} || exit 1; {command}",
                                   limits=limits)
        if result.timed_out:
            output = timeout_message(timeout)
            return {"observation": output, "returncode": -1, "output": output, "timed_out": True}
        output = result.stdout + result.stderr  # stderr: only what bash wrote before the redirection took effect
        if result.stdout_truncated:
            output += f"\n[output truncated: {result.stdout_bytes} bytes in all, head and tail kept]"
        return {"observation": output, "returncode": result.exit_code, "output": output, "timed_out": False}

    # ------------------------------------------------------------------------------------------- evaluation

    async def evaluate(self, env: SweEnv, request: dict) -> dict:
        patch = request.get("patch")
        if patch is not None and not isinstance(patch, str):  # a bad request leaves the lease usable
            raise ProviderError(400, "patch must be a string (a unified git diff) or absent")
        env.evaluated = True
        env.over_budget = env.over_budget or env.box.budget_exceeded()
        if env.over_budget:  # the episode ended there: nothing is evaluated, it resolves nothing
            return {"score": -1.0, "resolved": False, "patch_source": "none", "patch_chars": 0,
                    "reason": f"the sandbox {env.over_budget}", "instance_id": env.instance.instance_id,
                    "outcomes": {}, "output_tail": "", "budget_exceeded": env.over_budget, "tampered": False}
        source = "submitted"
        if patch is None:
            (patch, problem), source = await self.tree_diff(env), "git_diff_fallback"
            if problem:  # no patch to evaluate: say why rather than "not resolved" alone
                return {"score": -1.0, "resolved": False, "patch_source": source, "patch_chars": 0,
                        "reason": f"the fallback diff failed: {problem}", "instance_id": env.instance.instance_id,
                        "outcomes": {}, "output_tail": ""}
        timeouts = request.get("task_timeouts") or {}
        limit = timeouts.get("eval") if isinstance(timeouts, dict) else None
        timeout = float(limit) if isinstance(limit, (int, float)) and limit > 0 else self.eval_timeout_s
        if env.tree is None:  # a fresh container of the same image, never the agent's (which ends here: upstream's)
            await env.box.aclose()
            result = await self.docker.evaluate(env.instance, patch, timeout=timeout,
                                                labels={LEASE_LABEL: env.lease_id})
        else:
            result = await evaluate_patch(env.instance, patch, timeout=timeout, base_dir=str(Path(env.tree).parent))
        return {"score": 1.0 if result.resolved else -1.0, "patch_source": source, "patch_chars": len(patch),
                "output_tail": result.output_tail, **result.as_dict()}


def _tool_error(message: str) -> dict:
    text = f"[TOOL_ERROR] {message}"
    return {"observation": text, "returncode": -1, "output": text, "timed_out": False}
