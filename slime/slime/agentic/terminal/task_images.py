"""A task's Docker image, built from its own Dockerfile and build context, as its author built it.

    image = build_task_image(task, docker_host=host)      # "slime-task/<name>:<content hash>", built once

No image registry is reachable from these machines, so the base images Terminal-Bench's Dockerfiles name cannot be
pulled. The machine's own Debian image (`slime-terminal-base`, scripts/setup_docker.sh: bookworm with python3,
pytest, git, tmux) stands in for the common ones, under the name the Dockerfile uses (`docker tag`), only where
the daemon does not have that name already:

    ghcr.io/laude-institute/t-bench/*   Terminal-Bench's base images (Ubuntu 24.04, Python 3.13 variants)
    ubuntu:*  debian:*                  the distributions (apt-get works: package names mostly agree)
    python:*                            Debian's python3 (3.11) stands in; pip is whatever the Dockerfile installs

When the daemon also has the Ubuntu 24.04 stand-in (`scripts/setup_docker.sh ubuntu`: Python 3.12 with pip and
`python`, pip allowed into the system as in python:3.12), it stands in for Ubuntu 24.04 and Python 3.12 bases
instead (`UBUNTU_BASES`): Harbor's verifiers' `uvx --python 3.12` then finds its interpreter offline.

Any other base is refused with the list (`ImageBuildError`), rather than built on something it is not: load that
image into the daemon yourself (`docker load`) and it is used as is. On top of the author's image goes the offline
kit (`offline_kit`: uv, pytest's pinned wheels and a curl shim for uv's installer), so the task's own run-tests.sh
bootstraps its test runner without network. The build runs with the host's network
(`--network host`: apt and pip reach the registries this machine reaches); the episode's containers have none.
Images are tagged by a hash of the Dockerfile, every file of the build context and the stand-in's image id, so an
unchanged task is built once per daemon and a changed one again.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from slime.agentic.docker_sandbox import DEFAULT_IMAGE, SandboxUnavailable, docker_binary, docker_cli

from . import offline_kit
from .compose import ComposeError, ComposeProject, load_compose
from .dockerfile import DockerfileError, parse_dockerfile
from .tasks import TerminalTask

logger = logging.getLogger(__name__)

STAND_IN_BASES = ("ghcr.io/laude-institute/t-bench/*", "ubuntu:*", "ubuntu", "debian:*", "debian", "python:*")
# bases the Ubuntu 24.04 stand-in (Python 3.12; `scripts/setup_docker.sh ubuntu`) is closer to, when the daemon has it
UBUNTU_STAND_IN = "slime-standin-ubuntu-24.04"
UBUNTU_BASES = ("ghcr.io/laude-institute/t-bench/ubuntu-24-04*", "ubuntu:24.04", "ubuntu:noble", "ubuntu:latest",
                "ubuntu", "python:3.12", "python:3.12-*", "python:3.12.*")
DEFAULT_BUILD_TIMEOUT_S = 1200.0
IMAGE_PREFIX = "slime-task"


class ImageBuildError(RuntimeError):
    """The task's image cannot be built here; the message says why (and, for a build that failed, its log's tail)."""


@dataclass(frozen=True)
class TaskImage:
    tag: str
    built: bool  # False: an image of the same content was already on the daemon
    seconds: float
    stand_ins: tuple[str, ...] = ()  # base images the local one stood in for
    workdir: str = "/app"  # the image's WORKDIR: where the agent's commands run (/app when it sets none)
    services: tuple[tuple[str, str], ...] = ()  # compose services beside the agent's: (name, image)


def base_images(dockerfile: Path) -> list[str]:
    """The images the Dockerfile's FROM lines name (stage names of a multi-stage build excluded)."""
    try:
        instructions = parse_dockerfile(dockerfile.read_text(encoding="utf-8"))
    except DockerfileError as exc:
        raise ImageBuildError(f"{dockerfile}: {exc}") from None
    stages, bases = set(), []
    for ins in instructions:
        if ins.keyword != "FROM":
            continue
        words = ins.value.split()
        if not words:
            raise ImageBuildError(f"{dockerfile} line {ins.line}: FROM names no image")
        if words[0].lower() not in stages and words[0] not in bases:
            bases.append(words[0])
        if len(words) >= 3 and words[1].upper() == "AS":
            stages.add(words[2].lower())
    if not bases:
        raise ImageBuildError(f"{dockerfile}: no FROM line")
    return bases


def stands_in_for(base: str) -> bool:
    return any(fnmatch.fnmatchcase(base, pattern) for pattern in STAND_IN_BASES)


def stand_in_is_ubuntu(base: str) -> bool:
    """The Ubuntu 24.04 stand-in (Python 3.12) fits `base` better than the Debian one (Python 3.11)."""
    return any(fnmatch.fnmatchcase(base, pattern) for pattern in UBUNTU_BASES)


def context_digest(dockerfile: Path, context: Path, salt: str = "") -> str:
    """sha256 over the Dockerfile and every file of the build context (paths and bytes, in path order)."""
    digest = hashlib.sha256(salt.encode() + b"\0" + dockerfile.read_bytes() + b"\0")
    for dirpath, dirnames, filenames in os.walk(context):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            digest.update(os.fsencode(os.path.relpath(path, context)) + b"\0")
            if path.is_file():
                digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def _docker(host: str | None, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([*docker_cli(docker_binary(), host), *args], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ImageBuildError(f"docker {args[0]} did not finish within {timeout:g} s") from None


def _image_id(host: str | None, image: str) -> str | None:
    proc = _docker(host, "image", "inspect", "--format", "{{.Id}}", image)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _repository(task: TerminalTask) -> str:
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in task.name.lower())[:100].strip("._-") or "task"
    return f"{IMAGE_PREFIX}/{name}"


def image_tag(task: TerminalTask, salt: str) -> str:
    return f"{_repository(task)}:{context_digest(task.dockerfile, task.environment_dir, salt)[:16]}"


def build_task_image(task: TerminalTask, *, docker_host: str | None = None, base_image: str = DEFAULT_IMAGE,
                     timeout: float | None = None) -> TaskImage:
    """The task's image on the daemon at `docker_host`, built from its Dockerfile unless an image of the same content
    is there already. ImageBuildError says why when it cannot be built (an unknown base, a failed step: the log's
    tail); SandboxUnavailable when there is no daemon."""
    if task.dockerfile is None or task.environment_dir is None:
        raise ImageBuildError(f"task {task.name!r} has no Dockerfile to build")
    start = time.monotonic()
    try:
        project = load_compose(task)
    except ComposeError as exc:
        raise ImageBuildError(str(exc)) from None
    bases, missing = _stand_ins(docker_host, task.dockerfile, f"task {task.name!r}", base_image)
    # what the stand-ins and the offline kit are is part of what gets built: a new one means a new build
    salt = "\0".join(f"{b}={_image_id(docker_host, b)}" for b in bases)
    salt += f"\0kit={offline_kit.kit_key()}"
    tag = image_tag(task, salt)
    services = build_service_images(task, project, docker_host=docker_host, base_image=base_image)
    if _image_id(docker_host, tag) is not None:
        return TaskImage(tag, False, time.monotonic() - start, tuple(missing), _workdir(docker_host, tag), services)
    limit = timeout or float(task.resources.get("build_timeout_sec") or DEFAULT_BUILD_TIMEOUT_S)
    authors = tag.replace(f"{IMAGE_PREFIX}/", f"{IMAGE_PREFIX}-authors/", 1)  # the image as the task's author built it
    _build(docker_host, task, "docker build", limit, "--network", "host", "--label", f"slime.task={task.name}",
           "-t", authors, "-f", str(task.dockerfile), str(task.environment_dir))
    # then the offline test runners on top (offline_kit): the task's own run-tests.sh bootstraps pytest without network
    kit = offline_kit.build_kit()
    with tempfile.TemporaryDirectory() as scratch:
        dockerfile = Path(scratch) / "Dockerfile"
        dockerfile.write_text(offline_kit.dockerfile_with_kit(authors))
        _build(docker_host, task, "adding the offline test runners", 600.0, "--label", f"slime.task={task.name}",
               "-t", tag, "-f", str(dockerfile), str(kit))
    _docker(docker_host, "rmi", authors)  # only the tag: the layers stay under `tag`
    return TaskImage(tag, True, time.monotonic() - start, tuple(missing), _workdir(docker_host, tag), services)


def _stand_ins(docker_host: str | None, dockerfile: Path, owner: str, base_image: str) -> tuple[list[str], list[str]]:
    """The Dockerfile's base images, and those of them the daemon lacked and that a stand-in was tagged as (an
    unknown one: ImageBuildError; no stand-in image: SandboxUnavailable)."""
    if _image_id(docker_host, base_image) is None:
        raise SandboxUnavailable(f"the stand-in base image {base_image!r} is not on the daemon "
                                 "(scripts/setup_docker.sh builds it)")
    bases = base_images(dockerfile)
    missing = [b for b in bases if _image_id(docker_host, b) is None]
    for base in missing:
        _tag_stand_in(docker_host, base, owner, base_image)
    return bases, missing


def _tag_stand_in(docker_host: str | None, image: str, owner: str, base_image: str) -> None:
    if not stands_in_for(image):
        raise ImageBuildError(f"{owner}: base image {image} cannot be pulled here and has no local stand-in "
                              f"(stand-ins exist for {', '.join(STAND_IN_BASES)}); load it into the daemon "
                              "(docker load) to build this task")
    ubuntu = _image_id(docker_host, UBUNTU_STAND_IN) is not None
    stand_in = UBUNTU_STAND_IN if ubuntu and stand_in_is_ubuntu(image) else base_image
    tagged = _docker(docker_host, "tag", stand_in, image)
    if tagged.returncode != 0:
        raise ImageBuildError(f"docker tag {stand_in} {image}: {tagged.stderr.strip()[-500:]}")
    logger.info("%s: %s stands in for %s", owner, stand_in, image)


def build_service_images(task: TerminalTask, project: ComposeProject | None, *, docker_host: str | None = None,
                         base_image: str = DEFAULT_IMAGE) -> tuple[tuple[str, str], ...]:
    """(service name, image) for each compose service beside the agent's (compose.load_compose): built from its own
    build context (the same stand-ins, no offline kit: the tests run in the agent's container), or the image it
    names when the daemon has it (or a stand-in exists for it)."""
    images = []
    for service in project.services if project is not None else ():
        owner = f"task {task.name!r}: service {service.name}"
        if service.build_context is None:
            if _image_id(docker_host, service.image) is None:
                _tag_stand_in(docker_host, service.image, owner, base_image)
            images.append((service.name, service.image))
            continue
        bases, _ = _stand_ins(docker_host, service.dockerfile, owner, base_image)
        salt = "\0".join(f"{b}={_image_id(docker_host, b)}" for b in bases)
        salt += "\0" + "\0".join(f"{k}={v}" for k, v in sorted(service.build_args.items()))
        digest = context_digest(service.dockerfile, service.build_context, salt)[:16]
        tag = f"{_repository(task)}-{service.name.lower()}:{digest}"
        if _image_id(docker_host, tag) is None:
            build_args = [arg for k, v in service.build_args.items() for arg in ("--build-arg", f"{k}={v}")]
            limit = float(task.resources.get("build_timeout_sec") or DEFAULT_BUILD_TIMEOUT_S)
            _build(docker_host, task, f"docker build of service {service.name}", limit, "--network", "host",
                   "--label", f"slime.task={task.name}", *build_args, "-t", tag, "-f", str(service.dockerfile),
                   str(service.build_context))
        images.append((service.name, tag))
    return tuple(images)


def _build(host: str | None, task: TerminalTask, what: str, timeout: float, *args: str) -> None:
    proc = _docker(host, "build", *args, timeout=timeout)
    if proc.returncode != 0:
        log = (proc.stdout + proc.stderr).strip()[-3000:]
        # the line that says why (docker's last, e.g. "COPY failed: file not found in build context ...") first
        why = next((line.strip() for line in reversed(proc.stderr.strip().splitlines()) if line.strip()), "")
        raise ImageBuildError(f"task {task.name!r}: {what} failed (exit {proc.returncode}): {why[:300]}\n{log}")


def _workdir(host: str | None, tag: str) -> str:
    proc = _docker(host, "image", "inspect", "--format", "{{.Config.WorkingDir}}", tag)
    workdir = proc.stdout.strip() if proc.returncode == 0 else ""
    return workdir if workdir.startswith("/") and workdir != "/" else "/app"


__all__ = ["DEFAULT_BUILD_TIMEOUT_S", "ImageBuildError", "STAND_IN_BASES", "TaskImage", "UBUNTU_BASES",
           "UBUNTU_STAND_IN", "base_images", "build_service_images", "build_task_image", "context_digest", "image_tag",
           "stand_in_is_ubuntu",
           "stands_in_for"]
