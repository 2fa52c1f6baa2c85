"""The private Docker daemon the Docker tests share (imported by them): `docker_host`, a module fixture that starts it
with scripts/setup_docker.sh (installing Debian's docker.io and building the `slime-terminal-base` image when they are
missing; the image's root filesystem is cached under ~/.cache/slime/docker) and stops it again by its PID when it
started it, and asserts that the module left no container behind. Skipped only where Docker cannot run on this
machine: not root, or the script exits 2 (its status for "cannot install or start Docker here"), with its reason;
any other failure of the script fails the module."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from slime.agentic.docker_sandbox import SANDBOX_LABEL, docker_cli, parse_exports

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup_docker.sh"


def docker(host: str, *args: str, check: bool = True) -> str:
    proc = subprocess.run([*docker_cli("docker", host), *args], capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def containers(host: str, label: str = f"{SANDBOX_LABEL}=1") -> set[str]:
    return set(docker(host, "ps", "-aq", "--no-trunc", "--filter", f"label={label}").split())


@pytest.fixture(scope="module")
def docker_host():
    """The private daemon (started here unless it already ran), DOCKER_HOST set for this module and the pool
    servers it starts; at the end: no new container left, and the daemon stopped by PID if this module started it."""
    if os.geteuid() != 0:
        pytest.skip("Docker cannot run on this machine: a private dockerd needs root")
    start = time.monotonic()
    proc = subprocess.run(["bash", str(SETUP), "start"], capture_output=True, text=True, timeout=1100, check=False)
    values = parse_exports(proc.stdout)
    started = values.get("DOCKERD_STARTED") == "1"
    pid = int(values["DOCKERD_PID"]) if values.get("DOCKERD_PID", "").isdigit() else None
    try:
        if proc.returncode == 2:  # the script's status for "Docker cannot be installed or started here", only
            pytest.skip(f"Docker cannot run on this machine: {proc.stderr.strip()[-1500:]}")
        if proc.returncode != 0:
            pytest.fail(f"scripts/setup_docker.sh start exited {proc.returncode}:\n{proc.stderr.strip()[-3000:]}")
        host = values["DOCKER_HOST"]
        print(f"\nsetup_docker.sh start: {time.monotonic() - start:.1f}s (daemon {'started' if started else 'running'})")
        before = containers(host)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DOCKER_HOST", host)
            yield host
        left = containers(host) - before
        assert not left, f"containers left behind: {left}"
    finally:
        if started:
            subprocess.run(["bash", str(SETUP), "stop"], capture_output=True, timeout=120, check=False)
            assert pid is not None
            deadline = time.monotonic() + 30
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not os.path.exists(f"/proc/{pid}"), f"dockerd {pid} is still running"
