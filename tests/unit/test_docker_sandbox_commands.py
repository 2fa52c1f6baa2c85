"""The Docker sandbox's command construction (no daemon needed): the docker argv of each step, the limits, the
image and user checks, the tar that stages files (with the same modes as the host's /tests), where the daemon is
found (the same folder as scripts/setup_docker.sh's), docker's errors, how the trainer's flags reach the terminal
provider, the provider's reap and the pool's handling of a failed one, the check's per-task images, a blocking kill
kept off the event loop. The in-container wrapper and kill sweep are bash: they run here on the host too, only ever
as a sandbox uid leased for the test (as that uid `kill -9 -1` reaches nothing else)."""

from __future__ import annotations

import dataclasses

import asyncio
import io
import itertools
import os
import shutil
import subprocess
import tarfile
import time
from argparse import Namespace
from pathlib import Path

import pytest
from slime.agentic import docker_sandbox as ds
from slime.agentic import sandbox as sb
from slime.agentic.env_service.leases import LeaseStore
from slime.agentic.env_service.pool import LeasePool
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.sandbox import SandboxError, SandboxLimits
from slime.agentic.terminal import check as check_mod
from slime.agentic.env_service import providers as providers_mod
from generate import service_options
from slime.agentic.terminal.provider import TerminalProvider
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_task
from slime.agentic.terminal.tests_dir import (
    ContainerTestsDir,
    HostTestsDir,
    staged_files,
)

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(cpu_seconds=30, memory_bytes=1 << 30, max_processes=48, file_size_bytes=8 << 20,
                       open_files=128, tmp_size_bytes=64 << 20)


def test_run_argv_isolates_the_container_and_never_pulls():
    argv = ds.run_argv("img:1", "slime-abc", limits=LIMITS, labels={"slime.lease": "run-1"}, docker="/usr/bin/docker",
                       host="unix:///s.sock")
    assert argv[:4] == ["/usr/bin/docker", "-H", "unix:///s.sock", "run"]
    joined = " ".join(argv)
    for piece in ("-d", "--pull never", "--name slime-abc", "--network none", f"--memory {1 << 30}",
                  f"--memory-swap {1 << 30}", "--pids-limit 48", "--cpus 1", "--user 0 --security-opt no-new-privileges",
                  "--label slime.sandbox=1", "--label slime.lease=run-1", "--init"):
        assert piece in joined, piece
    tmpfs = argv[argv.index("--tmpfs") + 1]
    assert tmpfs == f"/tmp:rw,exec,nosuid,nodev,size={64 << 20},nr_inodes=20000,mode=1777"
    # the whole-sandbox budgets when given apart from the per-process limits
    budgets = dataclasses.replace(LIMITS, memory_budget_bytes=512 << 20, cpu_budget=0.5, tmp_files=300)
    joined = " ".join(ds.run_argv("img", "n", limits=budgets))
    assert f"--memory {512 << 20} --memory-swap {512 << 20}" in joined and "--cpus 0.5" in joined
    assert "nr_inodes=300," in joined
    assert argv[-5:] == ["--entrypoint", "sleep", "--", "img:1", "infinity"]  # options end before the image
    assert "-H" not in ds.run_argv("img", "n", limits=LIMITS)
    assert "--init" not in ds.run_argv("img", "n", limits=LIMITS, init=False)


@pytest.mark.parametrize("image", ["-rf", "--privileged", "img name", "Upper", "img:", "a//b", "", "tb__-x", "img:-t"])
def test_an_image_that_is_not_a_reference_never_reaches_the_argv(image):
    with pytest.raises(ValueError, match="not a Docker image reference"):
        ds.run_argv(image, "n", limits=LIMITS)


@pytest.mark.parametrize("image", ["slime-terminal-base", "tb__count-error-lines", "python:3.12-slim", "ubuntu",
                                   "registry.example.com:5000/team/img:v1.2", "library/debian@sha256:" + "a" * 64,
                                   "sha256:" + "0" * 64, "a.b_c/d"])
def test_image_references_are_accepted(image):
    assert ds.check_image(image) == image


def test_task_image_names_the_task_and_checks_the_result():
    assert ds.task_image("tb__{task}", "count-error-lines") == "tb__count-error-lines"
    assert ds.task_image("slime-terminal-base", "x") == "slime-terminal-base"
    with pytest.raises(ValueError, match="not a Docker image reference"):
        ds.task_image("{task}", "-rf")  # a task folder named like a flag
    with pytest.raises(ValueError, match="only {task}"):
        ds.task_image("img-{other}", "x")
    with pytest.raises(ValueError, match="not a Docker image reference"):
        TerminalProvider(backend="docker", image="-rf")
    with pytest.raises(ValueError, match="not a valid docker user"):
        TerminalProvider(backend="docker", docker_user="-u0")
    for user in ("root", "0", "1000:1000", "nobody", "www-data:www-data"):
        assert ds.check_user(user) == user
    for name in ("-x", "a b", "a:b:c", ""):
        with pytest.raises(ValueError):
            ds.check_user(name)


def test_exec_argv_passes_environment_by_name_and_wraps_the_command():
    argv = ds.exec_argv("slime-abc", ["python3", "-c", "print(1)"], user="20001:20001", workdir="/app/src",
                        env_keys=["PATH", "HOME", "SECRET_TOKEN"], limits=LIMITS, keep="1 7", docker="docker")
    assert argv[:3] == ["docker", "exec", "-i"]
    assert argv[argv.index("-u") + 1] == "20001:20001" and argv[argv.index("-w") + 1] == "/app/src"
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert env == ["PATH", "HOME", "SECRET_TOKEN"]  # names only: values stay off the command line
    at = argv.index("slime-abc")
    assert argv[at + 1:at + 3] == ["bash", "-c"] and argv[at + 3] == ds._WRAPPER and argv[at + 4] == "slime-exec"
    assert argv[at + 5] == "1 7" and argv[at + 6] == "0" * 12 and argv[at + 7:at + 9] == list(ds.ulimit_args(LIMITS))
    assert argv[at + 9:] == ["python3", "-c", "print(1)"]
    with pytest.raises(ValueError):
        ds.exec_argv("c", ["true"], user=None, workdir="/", env_keys=[], limits=LIMITS, nonce="-x")
    assert "-u" not in ds.exec_argv("c", ["true"], user=None, workdir="/", env_keys=[], limits=LIMITS)
    with pytest.raises(ValueError):
        ds.exec_argv("c", [], user=None, workdir="/", env_keys=[], limits=LIMITS)


def test_ulimit_args_set_soft_then_hard_values_in_bash_units():
    soft, hard = ds.ulimit_args(LIMITS)
    assert soft == f"-S -t 30 -v {(1 << 30) // 1024} -f {(8 << 20) // 1024} -n 128 -c 0"
    assert hard == f"-H -t 31 -v {(1 << 30) // 1024} -f {(8 << 20) // 1024} -n 128 -c 0"
    assert f"exit {ds.LIMITS_ERROR};" in ds._WRAPPER and ds.LIMITS_ERROR not in (125, 126, 127)


def test_the_other_steps_argv():
    h = {"docker": "d", "host": "tcp://x:1"}
    assert ds.kill_argv("c", "1 7", **h) == ["d", "-H", "tcp://x:1", "exec", "-u", "0", "c", "bash", "-c",
                                             ds._KILL_FIRST, "slime-root", "1 7"]
    prep = ds.prepare_argv("c", "/app", "7:7", ["/tests"], docker="d")
    assert prep[:5] == ["d", "exec", "-u", "0", "c"] and prep[-5:] == ["slime-root", "/app", "7:7", "1", "/tests"]
    assert ds.prepare_argv("c", "/app", None, init=False)[-3:] == ["/app", "", "0"]  # root: nothing chowned
    assert ds.root_exec_argv("c", "echo $1", ["a"], docker="d") == ["d", "exec", "-u", "0", "c", "bash", "-c", "echo $1",
                                                                    "slime-root", "a"]
    killing = ds.root_exec_argv("c", "echo $1", ["a"], keep="1 7", docker="d")
    assert killing[-4:] == [ds._KILL_FIRST + "echo $1", "slime-root", "1 7", "a"]
    assert ds.user_ids_argv("c", "nobody", docker="d") == ["d", "exec", "-u", "nobody", "c", "bash", "-c", ds._IDS]
    assert ds.cp_in_argv("c", "/tests", docker="d") == ["d", "cp", "-a", "-", "c:/tests"]
    assert ds.cp_out_argv("c", "/tests/r.xml", docker="d") == ["d", "cp", "c:/tests/r.xml", "-"]
    assert ds.rm_argv("c", docker="d") == ["d", "rm", "-f", "c"]
    assert ds.ps_argv("slime.lease=run-1", docker="d") == ["d", "ps", "-aq", "--no-trunc", "--filter",
                                                          "label=slime.lease=run-1"]
    assert ds.inspect_state_argv("c", docker="d")[:4] == ["d", "inspect", "--type", "container"]


def test_tar_bytes_sets_owners_modes_and_puts_directories_first():
    data = ds.tar_bytes({"t/test_a.py": b"x = 1\n", "run-tests.sh": b"#!/bin/bash\n"}, dirs=["t", ".results"],
                        modes={"run-tests.sh": 0o755, ".results": 0o700}, owners={".results": (20001, 20001)},
                        mtime=1000.0)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert list(members) == ["t", ".results", "t/test_a.py", "run-tests.sh"]
        assert members["t"].isdir() and members["t"].mode == 0o755 and members["t"].uid == 0
        assert (members[".results"].mode, members[".results"].uid, members[".results"].gid) == (0o700, 20001, 20001)
        assert members["run-tests.sh"].mode == 0o755 and members["t/test_a.py"].mode == 0o644
        assert tar.extractfile("t/test_a.py").read() == b"x = 1\n" and members["t/test_a.py"].mtime == 1000


class _FakeBox:
    """What ContainerTestsDir uses of a DockerSandbox, recording instead of running docker."""

    owner = (1000, 1001)

    def __init__(self):
        self.scripts, self.archives = [], []

    def root_exec(self, script, *args, kill_all=False):
        self.scripts.append((script, args, kill_all))

    def put_archive(self, dest, data):
        self.archives.append((dest, data))


def test_both_places_of_tests_stage_the_same_files_with_the_same_modes(tmp_path):
    src = tmp_path / "src"
    (src / "tests" / "data").mkdir(parents=True)
    (src / "tests" / "test_outputs.py").write_text("def test_x(): pass\n")
    (src / "tests" / "data" / "helper.sh").write_text("echo hi\n")
    os.chmod(src / "tests" / "data" / "helper.sh", 0o775)
    (src / "tests" / "__pycache__").mkdir()
    (src / "tests" / "__pycache__" / "x.pyc").write_bytes(b"")
    (src / "run-tests.sh").write_text("#!/bin/bash\n")
    os.chmod(src / "run-tests.sh", 0o775)
    (src / "setup.sh").write_text("true\n")
    os.chmod(src / "setup.sh", 0o600)
    files, dirs = {"run-tests.sh": src / "run-tests.sh", "setup.sh": src / "setup.sh"}, {".": src / "tests"}
    subdirs, staged = staged_files(files, dirs)
    assert subdirs == ["data"] and {rel: mode for rel, (_, mode) in staged.items()} == {
        "test_outputs.py": 0o644, "data/helper.sh": 0o755, "run-tests.sh": 0o755, "setup.sh": 0o644}

    host = tmp_path / "host"
    host.mkdir()
    HostTestsDir(host, 4242).stage(files, dirs)
    on_host = {}
    for dirpath, dirnames, filenames in os.walk(host):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            on_host[os.path.relpath(path, host)] = (st.st_mode & 0o7777, st.st_uid)
    box = _FakeBox()
    ContainerTestsDir(box, "/tests").stage(files, dirs, scratch=True)
    (dest, data), = box.archives
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        in_tar = {m.name: (m.mode, m.uid) for m in tar.getmembers()}
    # nothing of /tests is the sandbox user's: the results leave through the sealed channel, not a file
    assert dest == "/tests" and on_host == in_tar
    assert all(uid == 0 for _, uid in in_tar.values())
    (script, args, kill_all), = box.scripts  # cleared before staging: every process killed, /tmp emptied
    assert kill_all and "rm -rf /tmp/* /dev/shm/*" in script
    assert args == ("/tests",)
    out = tmp_path / "clear"
    (out / "old").mkdir(parents=True)
    from slime.agentic.terminal import tests_dir as tests_dir_mod

    subprocess.run(["bash", "-c", tests_dir_mod._CLEAR, "slime-root", str(out)], check=True)
    assert os.listdir(out) == [] and oct(os.stat(out).st_mode & 0o7777) == "0o755"


def test_default_docker_host(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2376")
    assert ds.default_docker_host() == "tcp://10.0.0.1:2376"
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setenv(ds.DOCKER_DIR_ENV, str(tmp_path))
    assert ds.default_docker_host() is None  # no private daemon: the CLI's own default
    (tmp_path / "docker.sock").touch()
    assert ds.default_docker_host() == f"unix://{tmp_path}/docker.sock"


@pytest.mark.parametrize("docker_dir", [None, "/srv/slime docker"])
def test_the_setup_script_and_the_sandbox_agree_on_where_the_daemon_lives(tmp_path, monkeypatch, docker_dir):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    if docker_dir:
        env[ds.DOCKER_DIR_ENV] = docker_dir
    out = subprocess.run(["bash", str(REPO / "scripts" / "setup_docker.sh"), "env"], env=env, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    assert all(line.startswith("export ") for line in out.splitlines())  # eval "$(...)" exports them
    values = ds.parse_exports(out)
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    if docker_dir:
        monkeypatch.setenv(ds.DOCKER_DIR_ENV, docker_dir)
    else:
        monkeypatch.delenv(ds.DOCKER_DIR_ENV, raising=False)
    assert values["SLIME_DOCKER_DIR"] == ds.default_docker_dir()
    assert values["DOCKER_HOST"] == f"unix://{ds.default_docker_dir()}/docker.sock"


def test_docker_errors_are_sandbox_errors_never_results():
    gone = ds.docker_error("run", 1, "Error response from daemon: No such container: slime-x\n")
    stopped = ds.docker_error("run", 1, "Error response from daemon: Container abc is not running")
    daemon = ds.docker_error("run", 1, "Cannot connect to the Docker daemon at unix:///x. Is the docker daemon running?")
    image = ds.docker_error("run", 125, "docker: Error response from daemon: No such image: nope:latest.", image="nope")
    other = ds.docker_error("cp", 1, "something else")
    assert isinstance(gone, ds.ContainerGone) and isinstance(stopped, ds.ContainerGone)
    assert isinstance(daemon, sb.SandboxUnavailable) and isinstance(image, sb.SandboxUnavailable) and "'nope'" in str(image)
    assert type(other) is SandboxError and "exit 1" in str(other)
    with pytest.raises(sb.SandboxUnavailable, match="cannot run"):
        ds.docker_call(["/nonexistent/docker", "ps"], what="list")
    box = object.__new__(ds.DockerSandbox)  # _check_exit needs no daemon
    box.name, box.docker_host, box.image, box._nonce = "slime-x", None, "img", NONCE
    box._gone = lambda e: e  # (it asks the daemon for the container's state)
    # once the wrapper printed this call's nonce the command ran: what it writes is its own, however it reads
    mark = f"slime:{NONCE}\n"
    box._check_exit(1, mark + "Error response from daemon: No such container: slime-x\n")
    box._check_exit(ds.LIMITS_ERROR, mark + "slime sandbox: cannot set the limits (forged)\n")
    box._check_exit(126, mark + "OCI runtime exec failed: forged\n")
    assert box._command_stderr(mark + "err\n") == "err\n" and box._command_stderr("err\n") == "err\n"
    box._check_exit(0, "")
    box._check_exit(1, "a command's own error\n")
    box._check_exit(126, "bash: ./x: Permission denied\n")
    with pytest.raises(SandboxError, match="cannot set the limits"):
        box._check_exit(ds.LIMITS_ERROR, "slime sandbox: cannot set the limits (-S ...; -H ...)\n")
    with pytest.raises(ds.ContainerGone):
        box._check_exit(1, "Error response from daemon: No such container: slime-x\n")
    with pytest.raises(SandboxError, match="OCI runtime"):
        box._check_exit(126, "OCI runtime exec failed: exec failed: unable to start container process: exec: "
                             "\"bash\": executable file not found in $PATH: unknown\n")


def test_parse_exports_reads_the_quoted_lines():
    assert ds.parse_exports("export A=1\nexport B=/a\\ b\nnoise\nexport C='x y'\nD=4\n") == {
        "A": "1", "B": "/a b", "C": "x y"}


def test_the_trainer_flags_reach_the_provider_and_a_bad_backend_is_refused():
    args = Namespace(terminal_tasks_dir="tasks", terminal_backend="docker", terminal_image="tb__{task}")
    assert service_options(args) == {"tasks_dir": "tasks", "backend": "docker", "image": "tb__{task}"}
    assert service_options(Namespace(terminal_tasks_dir=None, terminal_backend=None)) == {}
    with pytest.raises(ValueError, match="backend must be one of bwrap, docker"):
        TerminalProvider(backend="podman")


# ---------------------------------------------------------------------------------------------- reap


def test_reap_does_every_step_even_when_one_fails_and_then_raises(monkeypatch):
    calls = []

    def remove_container(name, docker_host=None, timeout=None):
        calls.append(("rm", name, docker_host))
        assert timeout == providers_mod.REAP_TIMEOUT_S
        raise SandboxError("No such image")

    def remove_labelled(label, docker_host=None, timeout=None):
        calls.append(("labelled", label, docker_host))
        return 0

    monkeypatch.setattr(providers_mod, "ping_daemon", lambda host, timeout: calls.append(("ping", host)))
    monkeypatch.setattr(providers_mod, "remove_container", remove_container)
    monkeypatch.setattr(providers_mod, "remove_labelled", remove_labelled)
    monkeypatch.setattr(providers_mod, "reap_sandbox_uid", lambda resources: calls.append(("uid", resources.get("uid"))))
    bwrap_server = TerminalProvider()  # a server restarted with another backend still reaps a recorded container
    with pytest.raises(RuntimeError, match="remove container slime-1"):
        bwrap_server.reap({"container": "slime-1", "docker_host": "unix:///d.sock", "uid": 20005, "lease_id": "run-1"})
    assert calls == [("ping", "unix:///d.sock"), ("rm", "slime-1", "unix:///d.sock"),
                     ("labelled", "slime.lease=run-1", "unix:///d.sock"), ("uid", 20005)]
    calls.clear()
    bwrap_server.reap({"uid": 20006, "lease_id": "run-2"})  # a bwrap record: no docker call at all
    assert calls == [("uid", 20006)]
    calls.clear()
    TerminalProvider(backend="docker").reap({"lease_id": "run-3"})  # a docker reset cut short before its record
    assert calls == [("ping", None), ("labelled", "slime.lease=run-3", None), ("uid", None)]


class _Provider:
    """A provider whose reap fails for one lease (a daemon that is down) and works for the others."""

    name = "fake"

    def __init__(self, failing: set[str]):
        self.failing, self.reaped = failing, []

    def reap(self, resources: dict) -> None:
        if resources["lease_id"] in self.failing:
            raise RuntimeError("docker daemon down")
        self.reaped.append(resources["lease_id"])


def test_a_lease_whose_reap_failed_stays_open_and_is_reaped_by_a_later_start(tmp_path):
    settings = PoolSettings(state_dir=str(tmp_path / "state"))

    async def start_and_stop(provider) -> tuple[LeasePool, list[str]]:
        pool = LeasePool(settings, provider)
        await pool.start()
        still_open = [r.lease_id for r in pool.store.open_records()]
        await pool.shutdown()
        return pool, still_open

    first = LeasePool(settings, _Provider(set()))
    for lease in ("run-a", "run-b"):
        first.store.opened(lease, "t", None)
        first.store.set_resources(lease, {"container": f"c-{lease}"})
    first.store.close()
    down = _Provider({"run-a"})
    pool, still_open = asyncio.run(start_and_stop(down))
    assert down.reaped == ["run-b"] and pool.counters["reaped_at_start"] == 1 and pool.counters["reap_errors"] == 1
    assert still_open == ["run-a"]  # kept open for the next start
    up = _Provider(set())
    pool, still_open = asyncio.run(start_and_stop(up))
    assert up.reaped == ["run-a"] and still_open == [] and pool.counters["reap_errors"] == 0


def _start_and_stop(settings, provider) -> tuple[LeasePool, list, float]:
    async def go():
        pool = LeasePool(settings, provider)
        t = time.monotonic()
        await pool.start()
        took = time.monotonic() - t
        records = pool.store.open_records()
        await pool.shutdown()
        return pool, records, took

    return asyncio.run(go())


def test_a_lease_whose_reap_keeps_failing_is_closed_after_max_attempts(tmp_path, caplog):
    from slime.agentic.env_service import pool as pool_mod

    settings = PoolSettings(state_dir=str(tmp_path / "state"))
    first = LeasePool(settings, _Provider(set()))
    first.store.opened("run-a", "t", None)
    first.store.set_resources("run-a", {"container": "c-a"})
    first.store.close()
    for attempt in range(1, pool_mod.MAX_REAP_ATTEMPTS):
        pool, records, _ = _start_and_stop(settings, _Provider({"run-a"}))
        assert [(r.lease_id, r.reap_attempts) for r in records] == [("run-a", attempt)]
    with caplog.at_level("ERROR", logger="slime.agentic.env_service.pool"):
        pool, records, _ = _start_and_stop(settings, _Provider({"run-a"}))
    assert records == [] and pool.counters["reap_abandoned"] == 1 and "failed 5 times" in caplog.text
    store = LeaseStore(settings.state_dir + "/leases.db")
    try:
        closed = store.get("run-a")
    finally:
        store.close()
    assert closed.closed is not None and closed.close_reason.startswith("reap failed 5 times")


def test_a_lease_store_written_before_reap_attempts_existed_still_opens(tmp_path):
    import sqlite3

    path = str(tmp_path / "leases.db")
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE leases (lease_id TEXT PRIMARY KEY, task_key TEXT NOT NULL, request_id TEXT, "
                     "created REAL NOT NULL, closed REAL, close_reason TEXT, resources TEXT NOT NULL DEFAULT '{}');")
    db.execute("INSERT INTO leases (lease_id, task_key, created) VALUES ('run-old', 't', 1.0)")
    db.commit()
    db.close()
    store = LeaseStore(path)
    try:
        assert [(r.lease_id, r.reap_attempts) for r in store.open_records()] == [("run-old", 0)]
        assert store.reap_failed("run-old") == 1 and store.get("run-old").reap_attempts == 1
    finally:
        store.close()


@pytest.mark.parametrize("daemon", ["hung", "absent"])
def test_a_pool_whose_docker_daemon_hangs_or_is_gone_still_starts_quickly(tmp_path, monkeypatch, daemon):
    """Each daemon is probed once per start with a short timeout; its records are skipped (kept open, no attempt
    counted), so a hung daemon costs one probe, not two 120 s calls per record, before /healthz answers."""
    import socket

    if shutil.which("docker") is None:
        pytest.skip("no docker CLI")
    monkeypatch.setattr(providers_mod, "REAP_TIMEOUT_S", 1.5)
    sock_path = str(tmp_path / "d.sock")
    listener = None
    if daemon == "hung":  # accepts connections (the kernel's backlog) and never answers
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(sock_path)
        listener.listen(64)
    try:
        settings = PoolSettings(state_dir=str(tmp_path / "state"))
        first = LeasePool(settings, _Provider(set()))
        for i in range(4):
            first.store.opened(f"run-{i}", "t", None)
            first.store.set_resources(f"run-{i}", {"container": f"c-{i}", "docker_host": f"unix://{sock_path}"})
        first.store.close()
        pool, records, took = _start_and_stop(settings, TerminalProvider(backend="docker"))
    finally:
        if listener is not None:
            listener.close()
    assert took < 5, took  # one probe of 1.5 s at most, not one per record
    assert [(r.lease_id, r.reap_attempts) for r in records] == [(f"run-{i}", 0) for i in range(4)]
    assert pool.counters["reap_errors"] == 4 and pool.counters["reaped_at_start"] == 0


# ---------------------------------------------------------------------------------------------- check


def test_the_check_runs_per_task_images_in_one_pool_of_workspaces(monkeypatch):
    tasks = [load_task(DEFAULT_TASKS_DIR / name) for name in ("count-error-lines", "csv-column-sums", "word-frequency")]
    seen, running, peak = [], [0], [0]

    async def fake_evaluate(task, *, solve, **kwargs):
        seen.append((task.name, solve, kwargs["docker"]["image"], kwargs["docker"]["user"]))
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.05)
        running[0] -= 1
        raise RuntimeError("not run here")

    monkeypatch.setattr(check_mod, "evaluate_solution", fake_evaluate)
    checks = asyncio.run(check_mod.check_tasks(tasks, 4, docker={"image": "tb__{task}", "user": "root"}))
    assert sorted(seen) == sorted((t.name, solve, f"tb__{t.name}", "root") for t in tasks for solve in (True, False))
    assert peak[0] == 4  # 6 workspaces of 3 images, 4 at a time (not one image after another)
    assert all(c.error == "RuntimeError: not run here" for c in checks)
    bad = asyncio.run(check_mod.check_tasks(tasks[:1], 1, docker={"image": "{task}-{x}"}))
    assert "only {task}" in bad[0].error  # reported per task, not raised


# ---------------------------------------------------------------------------------------------- a blocking kill


class _SlowKillBox(sb.SandboxBase):
    """A backend whose kill blocks for `delay` (as a docker CLI call does) and then raises OSError: the command is a
    local process (no isolation needed to test the event loop)."""

    isolation = "test"
    _kill_blocks = True

    def __init__(self, delay: float):
        self.limits, self.uid, self.inner_path, self.delay = SandboxLimits(), None, "/", delay
        self._closed, self._busy, self.killed = False, False, []

    async def _prepare(self, command, *, env, timeout, limits, cwd):
        return list(command), {"PATH": os.environ["PATH"]}, "/", self._begin(timeout, limits), None

    def _kill_tree(self, pid, alive=True):
        time.sleep(self.delay)
        os.kill(pid, 9)
        self.killed.append(pid)
        raise OSError("the docker CLI vanished")

    def _after_exit(self, pid, timed_out):
        pass

    def close(self):
        self._closed = True


def test_a_slow_kill_on_cancellation_runs_off_the_event_loop():
    async def go():
        box = _SlowKillBox(delay=0.6)
        run = asyncio.create_task(box.run(["sleep", "30"]))
        await asyncio.sleep(0.3)
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        tick = asyncio.create_task(ticker())
        t = time.monotonic()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        took = time.monotonic() - t
        tick.cancel()
        return box, took, ticks

    box, took, ticks = asyncio.run(go())
    assert len(box.killed) == 1 and took >= 0.5  # the kill ran (and its OSError did not replace the cancellation)
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) > 10 and max(gaps) < 0.3, gaps  # the loop went on meanwhile


def test_a_slow_kill_of_a_cancelled_spawned_process_runs_off_the_event_loop():
    async def go():
        box = _SlowKillBox(delay=0.6)
        proc = await box.spawn(["sleep", "30"])
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.1)
        proc._supervisor.cancel()
        with pytest.raises(asyncio.CancelledError):
            await proc._supervisor
        tick.cancel()
        return box, ticks

    box, ticks = asyncio.run(go())
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(box.killed) == 1 and max(gaps) < 0.3, gaps


# ---------------------------------------------------------------------------------------------- the bash parts


@pytest.fixture
def sandbox_uid():
    """A uid leased for this test: the wrapper and the sweep run as it, so `kill -9 -1` reaches only them."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run the sweep as a sandbox uid")
    pool = sb.default_uid_pool()
    uid = pool.acquire()
    try:
        assert uid >= 1000
        yield uid
    finally:
        sb._kill_uid_processes(uid)  # whatever a failed test left, before the uid goes back
        pool.release(uid)


NONCE = "0123456789ab"


def as_uid(uid: int, argv: list[str]) -> list[str]:
    assert uid != 0
    return [*sb.setpriv_argv(uid, uid, shutil.which("setpriv")), *argv]


def wrapped(uid: int, command: str, limits: SandboxLimits = LIMITS, timeout: float = 30) -> subprocess.CompletedProcess:
    """The wrapper as `docker exec` runs it, here on the host as the sandbox uid."""
    return subprocess.run(as_uid(uid, ["bash", "-c", ds._WRAPPER, "slime-exec", "1", NONCE, *ds.ulimit_args(limits),
                                       "bash", "-c", command]),
                          env={"PATH": os.environ["PATH"]}, cwd="/", capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_the_wrapper_sets_limits_keeps_the_status_and_kills_everything_the_command_left(sandbox_uid):
    r = wrapped(sandbox_uid, "ulimit -St; ulimit -Ht; ulimit -n; ulimit -c; sleep 300 & setsid sleep 301 & "
                             "env -i setsid bash -c 'exec -a innocent sleep 302' & echo out; exit 7")
    assert r.returncode == 7 and r.stdout.split() == ["30", "31", "128", "0", "out"], (r.stdout, r.stderr)
    assert r.stderr.startswith(f"slime:{NONCE}\n")  # before anything of the command's
    assert sb.uid_processes([sandbox_uid]) == []  # in its own session, without any environment: gone all the same


def test_the_wrapper_refuses_to_run_without_its_limits(sandbox_uid):
    # a hard limit above what the caller may raise it to (we are not allowed to raise hard limits) fails loudly
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no finite hard open-files limit to exceed here")
    r = wrapped(sandbox_uid, "echo ran", SandboxLimits(open_files=hard + 1000))
    assert r.returncode == ds.LIMITS_ERROR and "cannot set the limits" in r.stderr and "ran" not in r.stdout
    assert "slime:" not in r.stderr.replace("slime sandbox", "")  # no nonce: the command never ran


def test_the_kill_sweep_ends_a_running_command_with_everything_it_started(sandbox_uid):
    proc = subprocess.Popen(as_uid(sandbox_uid, ["bash", "-c", ds._WRAPPER, "slime-exec", "1", NONCE, *ds.ulimit_args(LIMITS),
                                                 "bash", "-c", "sleep 300 & setsid sleep 301 & env -i sleep 303 & sleep 302"]),
                            env={"PATH": os.environ["PATH"]}, cwd="/", stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while len(sb.uid_processes([sandbox_uid])) < 6 and time.monotonic() < deadline:  # wrapper, bash, 4 sleeps
            time.sleep(0.02)
        assert len(sb.uid_processes([sandbox_uid])) == 6
        # kill_argv's script, as the uid (as root it would sweep everything but the pids it keeps: only in a container)
        kill = subprocess.run(as_uid(sandbox_uid, ["bash", "-c", ds._KILL_FIRST, "slime-root", "1"]),
                              env={"PATH": os.environ["PATH"]}, cwd="/", capture_output=True, text=True, timeout=30,
                              check=False)
        assert kill.returncode == 0, kill.stderr
        assert proc.wait(timeout=10) == -9
        assert sb.uid_processes([sandbox_uid]) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_sweep_leaves_the_pids_it_keeps(sandbox_uid):
    keep = subprocess.Popen(as_uid(sandbox_uid, ["sleep", "300"]), cwd="/")
    other = subprocess.Popen(as_uid(sandbox_uid, ["sleep", "301"]), cwd="/")
    try:
        time.sleep(0.2)
        # not root: `kill -9 -1` takes every process of the uid, kept or not; the keep list is for root's sweep,
        # which must spare the container's init and idle process
        script = ds._KILL_ALL + 'killall_but "$@"; echo rc=$?'
        r = subprocess.run(as_uid(sandbox_uid, ["bash", "-c", script.replace('[ "$EUID" = 0 ] ||', 'false &&'),
                                                "x", str(keep.pid)]),
                           cwd="/", capture_output=True, text=True, timeout=30, check=False)
        assert r.stdout.strip() == "rc=0"
        assert other.wait(timeout=10) == -9 and keep.poll() is None
    finally:
        for p in (keep, other):
            p.kill()
            p.wait()


def test_a_kill_left_running_by_a_second_cancellation_keeps_the_sandbox_busy():
    """Cancelled twice, the run returns while its kill goes on in its thread: the sandbox stays busy until that
    thread ends (no next command or staging overlaps it), and the next run waits for it."""
    class _SweepGoesOn(_SlowKillBox):  # the command dies at once, the sweep (a docker exec) takes its time
        def _kill_tree(self, pid, alive=True):
            os.kill(pid, 9)
            time.sleep(self.delay)
            self.killed.append(pid)

    async def go():
        box = _SweepGoesOn(delay=1.5)
        run = asyncio.create_task(box.run(["sleep", "30"]))
        await asyncio.sleep(0.3)
        run.cancel()
        await asyncio.sleep(0.1)
        run.cancel()  # the second cancellation: the wait for the kill ends, the kill does not
        with pytest.raises(asyncio.CancelledError):
            await run
        busy_meanwhile = box._busy
        with pytest.raises(SandboxError, match="already running"):
            box._check_free()
        t = time.monotonic()
        again = await box.run(["echo", "next"])  # waits for the kill thread first
        return box, busy_meanwhile, time.monotonic() - t, again

    box, busy_meanwhile, waited, again = asyncio.run(go())
    assert not busy_meanwhile and len(box.killed) == 1 and waited >= 0.2 and again.stdout == "next\n"


def test_root_steps_of_a_docker_sandbox_never_overlap():
    """Two root sweeps (a cancelled command's cleanup, the evaluation's clear) run one after the other."""
    import threading

    box = object.__new__(ds.DockerSandbox)
    box.name, box.docker, box.docker_host, box._keep, box._closed = "c", "docker", None, "1", False
    box._root_lock = threading.Lock()
    active, peak = [0], [0]

    def cli(argv, *, what, input=None, timeout=None):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        active[0] -= 1
        return b""

    box._cli = cli
    threads = [threading.Thread(target=box.kill_all), threading.Thread(target=box.root_exec, args=("true",),
                                                                          kwargs={"kill_all": True}),
               threading.Thread(target=box.kill_all)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1


def test_info_argv_asks_for_the_data_root_and_the_driver():
    assert ds.info_argv(host="unix:///d.sock") == ["docker", "-H", "unix:///d.sock", "info", "--format",
                                                   "{{.DockerRootDir}}\t{{.Driver}}"]


def test_a_daemon_that_cannot_cap_the_writable_layer_is_refused_unless_the_user_opts_out(monkeypatch, caplog):
    """Issue 37: no disk budget for a container (overlay2 without xfs quotas, a remote daemon) refuses to start, and
    says how to opt into the weaker guarantee; opted out, it is logged once per daemon."""
    from slime.agentic import container_disk

    monkeypatch.delenv(container_disk.STORAGE_CAP_ENV, raising=False)
    assert container_disk.attach("/var/lib/docker", "overlay2", "c" * 64, 1 << 30) is None
    assert container_disk.attach(None, "btrfs", "c" * 64, 1 << 30) is None
    with pytest.raises(ds.SandboxUnavailable, match=f"overlay2 storage driver.*{container_disk.STORAGE_CAP_ENV}=off"):
        ds._uncapped_layer("unix:///x.sock", "overlay2")
    monkeypatch.setenv(container_disk.STORAGE_CAP_ENV, "off")
    ds._warned_uncapped.discard("unix:///y.sock")
    with caplog.at_level("WARNING"):
        ds._uncapped_layer("unix:///y.sock", "overlay2")
        ds._uncapped_layer("unix:///y.sock", "overlay2")
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "opted in" in caplog.records[0].message and "as much as it likes" in caplog.records[0].message


def test_the_writable_layer_is_found_through_the_daemons_layer_database(tmp_path):
    from slime.agentic import container_disk

    cid = "a" * 64
    mounts = tmp_path / "image" / "btrfs" / "layerdb" / "mounts" / cid
    mounts.mkdir(parents=True)
    assert container_disk.layer_path(str(tmp_path), cid) is None  # no mount id yet
    (mounts / "mount-id").write_text("b" * 64)
    assert container_disk.layer_path(str(tmp_path), cid) is None  # no such subvolume here
    (tmp_path / "btrfs" / "subvolumes" / ("b" * 64)).mkdir(parents=True)
    assert container_disk.layer_path(str(tmp_path), cid) == str(tmp_path / "btrfs" / "subvolumes" / ("b" * 64))
    assert container_disk.layer_path(str(tmp_path), "d" * 64) is None
