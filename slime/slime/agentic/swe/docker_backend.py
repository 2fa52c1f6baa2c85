"""The `swe` provider's Docker backend: one container per episode from the instance's image, as upstream's SWE exec
server runs SWE-bench and SWE-Gym images, behind the same lease contract as the bubblewrap backend.

    python -m slime.agentic.env_service.pool_server --provider swe --provider-option backend=docker \
        [--provider-option image=swebench|swe-gym|auto|TEMPLATE] [--provider-option instances=FILE.jsonl]

Which image (:func:`instance_image`): the instance's own ``image_name`` when it has one (upstream's rule); else by
`image`: ``swebench`` (``swebench/sweb.eval.x86_64.<id with "__" -> "_1776_">:latest``, lower-cased), ``swe-gym``
(``xingyaoww/sweb.eval.x86_64.<id with "__" -> "_s_">:latest``), a template naming ``{instance_id}``, or ``auto``
(the default): ``slime-terminal-base`` (scripts/setup_docker.sh builds it) for the instances of the projects this
repository pins, SWE-bench's names for every other row. Images are never pulled (``--pull never``): a missing one is
a 422 ``SETUP_FAILED`` naming it.

Where the repository comes from: a pinned project's fresh checkout at the base commit is copied into ``/testbed``
(owned by the sandbox user, an unprivileged uid by default); any other image must hold the repository at
``/testbed`` at the instance's base commit (SWE-bench's images do), which reset checks (``git rev-parse HEAD``).
Commands run as root in such images by default (upstream's ``docker exec``), with the image's conda environment
``testbed`` activated when there is one (:data:`CONDA_PREAMBLE`), ``HOME=/tmp`` (nothing of a tool's lands in the
tree) and no network.

* `bash` and `diff` run in the agent's container as the sandbox user; `diff` is upstream's ``git add -A && git diff
  --cached`` against the base commit, bytecode and caches left out.
* `evaluate` never uses the agent's container: a fresh one from the same image, the sealed patch rules of
  :mod:`.patches` first, then ``git apply`` of the patch; an instance with an ``eval_script`` (SWE-Gym's rows,
  upstream's evaluation) runs it and is resolved when it exits 0 (not sealed: the script's exit status is all there
  is); otherwise the ``test_patch`` is applied and exactly FAIL_TO_PASS + PASS_TO_PASS run under pytest reporting
  through the sealed channel (a root supervisor in the container holds it: :mod:`slime.agentic.sealed_report`),
  resolved when every listed test passed and nothing was tampered with (:func:`.evaluate.verdict`). Pinned projects run with the
  harness-first runner of :mod:`.testrun`; other images with ``python -m pytest`` of their environment (plugins
  allowed: SWE-bench's projects need theirs). Test ids that are not pytest node ids (django's, sympy's) need an
  ``eval_script``.
"""

from __future__ import annotations

import asyncio
import collections
import io
import os
import shlex
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from slime.agentic import sealed_report
from slime.agentic.docker_sandbox import DEFAULT_IMAGE, DockerSandbox, check_image, check_user, tar_bytes
from slime.agentic.sandbox import SandboxLimits

from . import repos
from .evaluate import OUTPUT_TAIL_CHARS, SweEvaluation, normalized_patch, verdict
from .instances import SweInstance
from .patches import validate_patch
from .projects import Project, get_project
from .testrun import HARNESS, MISSING, TESTBED, command_env, output_tail, pytest_env, run_sealed_tests, sealed_pytest_argv

SWEBENCH, SWE_GYM, AUTO = "swebench", "swe-gym", "auto"
# SWE-bench's images keep the project's environment in conda's `testbed`; their eval scripts activate it first
CONDA_PREAMBLE = ("if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate testbed >/dev/null 2>&1 "
                  "|| true; fi; ")
# in the evaluation container: the patches, the eval script, the report (not under /tmp: `docker cp` writes to the
# container's own file system, under the tmpfs that the sandbox mounts on /tmp, where no command can see it)
EVAL_DIR = "/slime-eval"
DIFF_EXCLUDES = ("**/__pycache__/**", "**/*.py[cod]", "**/.pytest_cache/**")


def shipped_project(instance: SweInstance) -> Project | None:
    """The pinned project of `instance`, or None when its repository is not one of ours (a SWE-bench row)."""
    try:
        get_project(instance.repo)
    except KeyError:
        return None
    return repos.project_of(instance)  # a pinned project at another version is an error, not a foreign row


def instance_image(instance: SweInstance, image: str = AUTO) -> str:
    """The image an episode of `instance` runs in (module docstring); ValueError for a malformed reference."""
    iid = instance.instance_id
    if instance.image_name:
        name = instance.image_name
    else:
        if image == AUTO:
            image = DEFAULT_IMAGE if shipped_project(instance) else SWEBENCH
        if image == SWEBENCH:
            name = f"swebench/sweb.eval.x86_64.{iid.replace('__', '_1776_')}:latest".lower()
        elif image == SWE_GYM:
            name = f"xingyaoww/sweb.eval.x86_64.{iid.replace('__', '_s_')}:latest".lower()
        else:
            name = image.replace("{instance_id}", iid)
    try:
        return check_image(name)
    except ValueError as e:
        raise ValueError(f"{iid}: {e}") from None


def tree_tar(root: str | os.PathLike) -> bytes:
    """A tar of the contents of `root` (for :meth:`DockerSandbox.put_archive`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for child in sorted(Path(root).iterdir()):
            tar.add(child, arcname=child.name)
    return buf.getvalue()


_TARS: collections.OrderedDict[str, bytes] = collections.OrderedDict()
_TARS_KEPT = 8  # a few repositories' trees (a few MB each): every episode opens two containers of the same one
_TARS_LOCK = threading.Lock()
# one lock per base commit: concurrent episodes of one instance wait for a single checkout instead of each making
# its own (64 episodes starting together made 64 checkouts of the same tree). Kept, not dropped after use: there
# are as many as the dataset has base commits, and dropping one while a thread waits on it reopens the race.
_CHECKOUT_LOCKS: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)


def _cached_tar(base_commit: str) -> bytes | None:
    with _TARS_LOCK:
        if base_commit in _TARS:
            _TARS.move_to_end(base_commit)
            return _TARS[base_commit]
    return None


def repository_tar(instance: SweInstance) -> bytes:
    """The tar of a fresh checkout of `instance` at its base commit, made once per base commit (the tree depends on
    nothing else) and kept for the last few, so the agent's and the evaluation's containers do not check out again."""
    commit = instance.base_commit
    data = _cached_tar(commit)
    if data is not None:
        return data
    with _TARS_LOCK:
        checkout_lock = _CHECKOUT_LOCKS[commit]
    with checkout_lock:
        data = _cached_tar(commit)  # another thread made it while this one waited
        if data is None:
            with tempfile.TemporaryDirectory(prefix="slime-swe-docker-") as tmp:
                data = tree_tar(repos.checkout(instance, Path(tmp) / "testbed"))
            with _TARS_LOCK:
                _TARS[commit] = data
                while len(_TARS) > _TARS_KEPT:
                    _TARS.popitem(last=False)
    return data


def diff_command(base_commit: str) -> str:
    """Upstream's ``git add -A && git diff --cached``, against the base commit (changes the agent committed count),
    without bytecode or caches, and with nothing of the repository's config run (hooks, fsmonitor, external diff)."""
    git = "git -c core.quotePath=false -c core.fsmonitor=false -c core.hooksPath=/dev/null"
    excludes = " ".join(shlex.quote(f":(exclude,glob){p}") for p in DIFF_EXCLUDES)
    return (f"{git} add -A -- . {excludes} && {git} diff --cached --no-color --no-ext-diff --no-renames "
            f"{shlex.quote(base_commit)} --")


@dataclass(frozen=True)
class DockerSweBackend:
    image: str = AUTO
    user: str | None = None  # None: an unprivileged uid for pinned projects, root in other images (upstream's)
    docker_host: str | None = None
    limits: SandboxLimits = SandboxLimits()

    def __post_init__(self):
        if self.image not in (AUTO, SWEBENCH, SWE_GYM):
            check_image(self.image.replace("{instance_id}", "owner__project-1"))  # refused at start, not per episode
        if self.user:
            check_user(self.user)

    def open(self, instance: SweInstance, labels: dict[str, str] | None = None) -> DockerSandbox:
        """A started container of `instance`'s image with its repository at /testbed at the base commit (sync: call
        it in a thread). SandboxError when the image is missing or the repository is not what the instance says."""
        project = shipped_project(instance)
        user = self.user or (None if project is not None else "root")
        box = DockerSandbox(instance_image(instance, self.image), limits=self.limits, env=command_env(project),
                            workdir=TESTBED, user=user, labels=labels, docker_host=self.docker_host)
        try:
            if project is not None:
                box.put_archive(TESTBED, repository_tar(instance))
                # `docker cp` of a tar on stdin leaves its entries root's whatever their owner (docker 20.10)
                box.root_exec('chown -R "$1" "$2"', "%d:%d" % box.owner, TESTBED)
            else:
                head = box.root_exec(f"git -c safe.directory='*' -C {TESTBED} rev-parse HEAD 2>&1 || true")
                head = head.decode("utf-8", "replace").strip()
                if head != instance.base_commit:
                    raise repos.RepoError(f"the image {box.image} has no repository at {TESTBED} at the base commit "
                                          f"{instance.base_commit} (git rev-parse HEAD: {head[-300:]!r})")
        except BaseException:
            box.close()
            raise
        return box

    # ------------------------------------------------------------------------------------------- the episode

    async def diff(self, box: DockerSandbox, instance: SweInstance) -> tuple[str, str | None]:
        """(patch, None) or ("", why it failed) for the agent's container."""
        result = await box.run(f"cd {TESTBED} && {diff_command(instance.base_commit)}")
        if result.exit_code != 0 or result.timed_out or result.stdout_truncated:
            why = "timed out" if result.timed_out else ("the patch exceeds the output cap" if result.stdout_truncated
                                                        else f"exit {result.exit_code}: {result.stderr[-500:]}")
            return "", f"git diff failed ({why})"
        return result.stdout, None

    # ------------------------------------------------------------------------------------------- evaluation

    async def evaluate(self, instance: SweInstance, patch: str, *, timeout: float,
                       labels: dict[str, str] | None = None) -> SweEvaluation:
        """The sealed evaluation in a fresh container (module docstring): refused patches are not resolved."""
        start = time.monotonic()
        project = shipped_project(instance)
        check = validate_patch(patch or "", project.import_roots if project else (".",))
        if not check.ok:
            return SweEvaluation(instance.instance_id, False, f"patch refused: {check.reason}",
                                 {t: MISSING for t in instance.tests}, time.monotonic() - start)
        return await self.run_instance(instance, patch, timeout=timeout, labels=labels)

    async def run_instance(self, instance: SweInstance, patch: str | None = None, *, timeout: float,
                           labels: dict[str, str] | None = None) -> SweEvaluation:
        """A fresh container at base, `patch` (unchecked: the caller's, e.g. the gold patch or none) and the tests
        (the test_patch and the listed tests, or the eval script)."""
        start = time.monotonic()
        project = shipped_project(instance)
        tests = list(instance.tests)
        eval_script = instance.extra.get("eval_script")
        eval_script = eval_script if isinstance(eval_script, str) and eval_script.strip() else None

        def result(resolved: bool, reason: str, outcomes=None, timed_out=False, tail="") -> SweEvaluation:
            return SweEvaluation(instance.instance_id, resolved, reason, dict(outcomes or {}),
                                 time.monotonic() - start, timed_out, tail)

        if not tests and eval_script is None:  # pytest without node ids would run the whole suite
            return result(False, "the instance lists no test")
        box = await asyncio.to_thread(self.open, instance, labels)
        try:
            files = {"slime-eval/patch.diff": normalized_patch(patch or ""), "slime-eval/test.patch": normalized_patch(instance.test_patch)}
            if eval_script is not None:
                files["slime-eval/eval.sh"] = normalized_patch(eval_script)
            await asyncio.to_thread(box.put_archive, "/", tar_bytes(
                {k: v.encode("utf-8", "surrogateescape") for k, v in files.items()},
                dirs=["slime-eval"]))
            await asyncio.to_thread(box.root_exec, 'chown -R "$1" "$2"', "%d:%d" % box.owner, EVAL_DIR)
            steps = [("patch", f"{EVAL_DIR}/patch.diff")] if patch and patch.strip() else []
            if eval_script is None and instance.test_patch.strip():
                steps.append(("test_patch", f"{EVAL_DIR}/test.patch"))
            for name, path in steps:
                applied = await box.run(["bash", "-c", 'cd "$1" && git apply --check --whitespace=nowarn "$2" && '
                                         'git apply --whitespace=nowarn "$2"', "slime-apply", TESTBED, path])
                if applied.exit_code != 0:
                    what = "the patch does not apply" if name == "patch" else \
                        "the test patch does not apply after the patch"
                    problem = (applied.stderr or applied.stdout).strip()[-1000:]
                    return result(False, f"{what}: {problem}", {t: MISSING for t in tests})
            limits = box.limits.with_timeout(timeout)
            if eval_script is not None:  # upstream's: the script applies the tests, runs them, and its status decides
                run = await box.run(["bash", "-c", CONDA_PREAMBLE + 'exec bash "$1"', "slime-eval",
                                     f"{EVAL_DIR}/eval.sh"], limits=limits)
                reason = (f"the eval script timed out after {timeout:g} s" if run.timed_out else
                          "" if run.exit_code == 0 else f"the eval script exited with {run.exit_code}")
                return result(not reason, reason, {}, run.timed_out, output_tail(run, OUTPUT_TAIL_CHARS))
            # the sealed-report plugin, root's (the sandbox user cannot replace it), outside the tree
            plugin = sealed_report.plugin_source().read_bytes()
            await asyncio.to_thread(box.put_archive, "/", tar_bytes(
                {f"{HARNESS.lstrip('/')}/{sealed_report.PLUGIN_FILE}": plugin}, dirs=[HARNESS.lstrip("/")]))
            if project is not None:
                argv, env = sealed_pytest_argv(project, tests, box.python), pytest_env()
            else:
                argv = ["bash", "-c", CONDA_PREAMBLE + 'exec "$(command -v python || command -v python3)" -m pytest "$@"',
                        "slime-pytest", "-p", sealed_report.PLUGIN_MODULE, "-p", "no:cacheprovider", "-q", *tests]
                env = {k: v for k, v in pytest_env().items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
                env["PYTHONPATH"] = HARNESS
            run = await run_sealed_tests(box, argv, tests, env=env, limits=limits)
            reason = verdict(tests, run.outcomes, timed_out=run.timed_out, report_problem=run.report.reason, timeout=timeout)
            return SweEvaluation(instance.instance_id, not reason, reason, run.outcomes, time.monotonic() - start,
                                 run.timed_out, run.output_tail(OUTPUT_TAIL_CHARS), run.tampered)
        finally:
            await asyncio.to_thread(box.close)


__all__ = ["AUTO", "repository_tar", "CONDA_PREAMBLE", "SWEBENCH", "SWE_GYM", "DockerSweBackend", "diff_command", "instance_image",
           "shipped_project", "tree_tar"]
