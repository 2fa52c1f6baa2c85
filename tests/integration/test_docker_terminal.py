"""The terminal environment's Docker backend against a real Docker daemon: a private one that
scripts/setup_docker.sh starts (installing Debian's docker.io and building the `slime-terminal-base` image when they
are missing; the image's root filesystem is cached under ~/.cache/slime/docker, so only the first run takes minutes)
and that this module stops again by its PID when it started it.

A command runs in a container and returns its output and status; a timed-out command dies inside the container (not
just the docker client), with what it started; nothing a command started outlives it, however it hid (an escapee
that would forge the tests' report is gone before they run, as the image's user and as root); the tests read nothing
the agent left in /tmp or /dev/shm; two shipped tasks run end to end in containers through the same code as in the
bubblewrap sandbox (solution.sh passes, doing nothing fails), also as a non-root user of the image, with /tests
hidden from the agent; a container that is gone is a SandboxError, never a command's status; tmux shell sessions
work in a container; the terminal provider serves a whole episode through a pool server, and a pool server killed
with live leases leaves no container behind once restarted. Afterwards no container of this module is left.

Skipped only where Docker cannot run on this machine: not root, or scripts/setup_docker.sh exits 2 (its status for
"cannot install or start Docker here"), with the script's reason; any other failure of the script fails the module."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import statistics
import time
from pathlib import Path

import httpx
import pytest
from slime.agentic import sandbox as sb
from slime.agentic.docker_sandbox import ContainerGone, DockerSandbox
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.sandbox import SandboxError
from slime.agentic.shell_sessions import ShellSessions
from slime.agentic.terminal import load_task
from generate import AgentSettings, run_episode
from slime.agentic.agent_loop import ScriptedTurnPolicy
from slime.agentic.terminal.check import check_tasks
from slime.agentic.terminal.provider import LEASE_LABEL, TerminalProvider
from slime.agentic.terminal.scripted import idle_turns, solution_turns
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR
from slime.agentic.terminal.workspace import TaskWorkspace

from docker_daemon import containers, docker, docker_host  # noqa: F401 (docker_host: the module's fixture)

# the first run installs docker.io and builds the image (2-4 minutes) inside the first test's fixture
pytestmark = pytest.mark.timeout(1200)

TASKS = ("count-error-lines", "git-tag-release")


def processes(host: str, name: str, uid: int) -> list[str]:
    """The live processes of the sandbox uid in the container (ps as root there, outside the sandbox's runs)."""
    out = docker(host, "exec", "-u", "0", name, "ps", "-o", "pid=,stat=,args=", "-u", str(uid), check=False)
    return [line for line in out.splitlines() if line.split()[1][0] != "Z"]


def strangers(host: str, box: DockerSandbox) -> list[str]:
    """Every live process of the container but its own two (the init and the idle process) and this ps (a zombie
    counts when other threads of it still run: its main thread exited alone)."""
    out = docker(host, "exec", "-u", "0", box.name, "ps", "-eo", "pid=,stat=,nlwp=,args=", check=False)
    own = box._keep.split()
    return [line.strip() for line in out.splitlines()
            if line.split()[0] not in own and (line.split()[1][0] != "Z" or int(line.split()[2]) > 1)
            and not line.split(None, 3)[3].startswith("ps -eo")]


# ---------------------------------------------------------------------------------------------- the sandbox


def test_a_command_runs_in_the_container_and_returns_output_and_status(docker_host):
    async def go():
        t = time.monotonic()
        box = await asyncio.to_thread(DockerSandbox, docker_host=docker_host)
        created = time.monotonic() - t
        try:
            r = await box.run("echo out; echo err >&2; id -u; pwd; echo $HOME; exit 3")
            argv = await box.run(["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "c"])
            fed = await box.run("tr a-z A-Z", input="piped in\n")
            py = await box.run_python("import pytest, socket; print(pytest.__version__)\n"
                                      "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
                                      "except OSError as e:\n    print('no network', type(e).__name__)")
            fenced = await box.run("ls /sys/class/net; touch /etc/x; touch /x; echo rc=$?")
            times = []
            for _ in range(10):
                t0 = time.monotonic()
                await box.run("true")
                times.append(time.monotonic() - t0)
            return box.uid, created, r, argv, fed, py, fenced, times
        finally:
            t = time.monotonic()
            await box.aclose()
            print(f"docker sandbox: create {created:.2f}s, close {time.monotonic() - t:.2f}s")

    uid, _, r, argv, fed, py, fenced, times = asyncio.run(go())
    assert (r.exit_code, r.stdout.split(), r.stderr) == (3, ["out", str(uid), "/app", "/app"], "err\n")
    assert r.isolation == "docker" and r.uid == uid and not r.timed_out and 20000 <= uid
    assert argv.stdout == "['a b', 'c']\n" and fed.stdout == "PIPED IN\n"
    assert py.ok and "no network" in py.stdout, (py.stdout, py.stderr)
    assert fenced.stdout.split()[0] == "lo" and "rc=1" in fenced.stdout and "Permission denied" in fenced.stderr
    print(f"docker sandbox: `true` p50 {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")


def test_a_command_that_prints_dockers_errors_gets_its_status_not_a_sandbox_error(docker_host):
    """The wrapper prints this call's nonce to stderr before the command runs: a command that writes what docker
    or the wrapper would say on failure gets its own status back; it cannot fake an infrastructure error."""
    with DockerSandbox(docker_host=docker_host) as box:
        daemon = box.run_sync("echo 'Error response from daemon: No such container: x' >&2; exit 1")
        limits = box.run_sync("echo 'slime sandbox: cannot set the limits (x)' >&2; exit 71")
        oci = box.run_sync("echo 'OCI runtime exec failed: x' >&2; exit 126")
    assert (daemon.exit_code, daemon.stderr) == (1, "Error response from daemon: No such container: x\n"), daemon
    assert (limits.exit_code, limits.stderr) == (71, "slime sandbox: cannot set the limits (x)\n"), limits
    assert (oci.exit_code, oci.stderr) == (126, "OCI runtime exec failed: x\n"), oci


def test_files_read_out_of_a_container_are_bounded_and_checked_as_the_hosts_report(docker_host):
    from slime.agentic.terminal.junit import MAX_REPORT_BYTES, report_of_file

    with DockerSandbox(docker_host=docker_host) as box:
        box.root_exec(f"echo '<testsuite><testcase name=\"a\"/></testsuite>' > /srv/r.xml; ln -s /etc/passwd /srv/l.xml;"
                      f" mkdir /srv/d.xml; head -c {MAX_REPORT_BYTES + 100000} /dev/zero > /srv/big.xml")
        found = {name: box.read_file(f"/srv/{name}", MAX_REPORT_BYTES)
                 for name in ("r.xml", "l.xml", "d.xml", "big.xml", "none.xml")}
    assert found["r.xml"][1] and report_of_file("r.xml", found["r.xml"][0]).all_passed
    assert found["l.xml"] == (b"", False) and found["d.xml"] == (b"", False) and found["none.xml"] is None
    assert found["big.xml"][1] and len(found["big.xml"][0]) == MAX_REPORT_BYTES + 1
    assert "too large" in report_of_file("big.xml", found["big.xml"][0]).reason
    assert "not a regular file" in report_of_file("l.xml", b"", regular=found["l.xml"][1]).reason


def test_a_timed_out_command_is_killed_inside_the_container(docker_host):
    async def go():
        async with DockerSandbox(docker_host=docker_host) as box:
            t = time.monotonic()
            slow = await box.run("sleep 300 & setsid sleep 301 & echo started; sleep 302", timeout=1.5)
            elapsed = time.monotonic() - t
            after_timeout = processes(docker_host, box.name, box.uid)
            left = await box.run("sleep 303 & setsid sleep 304 & echo bye")
            after_exit = processes(docker_host, box.name, box.uid)
            proc = await box.spawn(["bash", "-c", "sleep 305 & read line; echo got $line; sleep 306"])
            proc.stdin.write(b"x\n")
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), 10)
            await proc.kill()
            after_kill = processes(docker_host, box.name, box.uid)
            again = await box.run("echo free")
            return slow, elapsed, after_timeout, left, after_exit, line, proc, after_kill, again

    slow, elapsed, after_timeout, left, after_exit, line, proc, after_kill, again = asyncio.run(go())
    assert slow.timed_out and slow.exit_code == 137 and slow.signal == signal.SIGKILL and slow.stdout == "started\n"
    assert elapsed < 10
    assert after_timeout == [], after_timeout  # not only the docker client: nothing of it runs in the container
    assert left.ok and left.stdout == "bye\n" and after_exit == [], after_exit
    assert line == b"got x\n" and proc.killed and proc.returncode == -9 and after_kill == [], after_kill
    assert again.stdout == "free\n"


# an agent's process that hides from everything but a kill by uid (no environment, its own session, a harmless
# name) and, once the tests' results folder exists, writes a report of one passing test into it until it is killed
FORGED = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="1">'
          '<testcase classname="test_outputs" name="test_forged" time="0.01"/></testsuite></testsuites>')
ESCAPEE = f"""printf %s {shlex.quote(FORGED)} > /app/.forged.xml
cat > /app/.escapee.sh <<'EOF'
touch /app/.escapee-ran
for i in $(seq 6000); do cp /app/.forged.xml /tests/.results/junit.xml 2>/dev/null; sleep 0.01; done
EOF
env -i setsid nohup bash -c 'exec -a innocent bash /app/.escapee.sh' >/dev/null 2>&1 &
sleep 0.5  # until it has left this command's environment behind
echo started"""


@pytest.mark.parametrize("user", [None, "root"])
def test_an_escaped_process_is_gone_before_the_tests_and_cannot_forge_their_report(docker_host, tmp_path, user):
    """The reviewer's case: a process that left the command's session and environment behind used to survive
    every later command and the evaluation, and score an untouched task 1/1. Now every process but the
    container's own dies after each command (and again before anything is staged), as in bubblewrap."""
    task = load_task(DEFAULT_TASKS_DIR / "count-error-lines")
    with TaskWorkspace.create_sync(task, base_dir=tmp_path, docker={"docker_host": docker_host, "user": user}) as ws:
        r = ws.run_sync(ESCAPEE)
        left = strangers(docker_host, ws.sandbox)
        ran = ws.run_sync("ls .escapee-ran").ok
        outcome = ws.run_tests_sync()
    assert r.ok and r.stdout == "started\n" and ran, r
    assert left == [], left  # killed with the command that started it
    assert (outcome.passed, outcome.total, outcome.reward) == (0, 3, -1.0), outcome.as_dict()


# the second review's escapee: its main thread calls exit(2) alone (SYS_exit, not exit_group), so /proc shows it as a
# zombie (state Z) while its other thread runs on, copying the forged report; a sweep that skipped zombies missed it
ZOMBIE_ESCAPEE = f"""printf %s {shlex.quote(FORGED)} > /app/.forged.xml
cat > /app/.zombie.py <<'EOF'
import ctypes, os, shutil, threading, time
def forge():
    open('/app/.escapee-ran', 'w').close()
    for _ in range(6000):
        try:
            shutil.copy('/app/.forged.xml', '/tests/.results/junit.xml')
        except OSError:
            pass
        time.sleep(0.01)
threading.Thread(target=forge).start()
time.sleep(0.2)
ctypes.CDLL(None).syscall({{'x86_64': 60, 'aarch64': 93}}[os.uname().machine], 0)
EOF
env -i setsid nohup python3 /app/.zombie.py >/dev/null 2>&1 &
sleep 1
echo started"""


@pytest.mark.parametrize("user", [None, "root"])
def test_an_escapee_whose_main_thread_exited_is_killed_and_cannot_forge_the_report(docker_host, tmp_path, user):
    task = load_task(DEFAULT_TASKS_DIR / "count-error-lines")
    with TaskWorkspace.create_sync(task, base_dir=tmp_path, docker={"docker_host": docker_host, "user": user}) as ws:
        r = ws.run_sync(ZOMBIE_ESCAPEE)
        left = strangers(docker_host, ws.sandbox)
        ran = ws.run_sync("ls .escapee-ran").ok
        outcome = ws.run_tests_sync()
    assert r.ok and r.stdout == "started\n" and ran, r
    assert left == [], left
    assert (outcome.passed, outcome.total, outcome.reward) == (0, 3, -1.0), outcome.as_dict()


def test_an_escapee_started_in_a_shell_session_does_not_reach_the_evaluation(docker_host, tmp_path):
    """The provider's order: the agent's shell sessions, closed, then the tests."""
    task = load_task(DEFAULT_TASKS_DIR / "count-error-lines")

    async def go():
        ws = await TaskWorkspace.create(task, base_dir=tmp_path, docker={"docker_host": docker_host})
        try:
            async with ShellSessions(ws.sandbox) as shell:
                out = await shell.call_tool("shell_exec", {"id": "main", "command": ESCAPEE})
                out += await shell.call_tool("shell_exec", {"id": "main", "command": "ls .escapee-ran"})
            left = await asyncio.to_thread(strangers, docker_host, ws.sandbox)
            return out, left, await ws.run_tests()
        finally:
            await ws.aclose()

    out, left, outcome = asyncio.run(go())
    assert "started" in out and ".escapee-ran" in out and left == [], (out, left)
    assert (outcome.passed, outcome.total, outcome.reward) == (0, 3, -1.0), outcome.as_dict()


def scratch_task(root: Path) -> Path:
    """A task whose tests pass only when their HOME (/tmp) and /dev/shm hold nothing of the agent's."""
    folder = root / "clean-scratch"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text("instruction: Do nothing.\nmax_test_timeout_sec: 60\n")
    shutil.copy(DEFAULT_TASKS_DIR / "count-error-lines" / "run-tests.sh", folder / "run-tests.sh")
    (folder / "tests" / "test_outputs.py").write_text(
        "import os, subprocess\n\n"
        "def test_home_holds_nothing_of_the_agent():\n"
        "    assert os.environ['HOME'] == '/tmp' and 'planted' not in os.listdir('/tmp')\n\n"
        "def test_git_reads_no_config_of_the_agent():\n"
        "    out = subprocess.run(['git', 'config', '--global', 'user.name'], capture_output=True, text=True)\n"
        "    assert out.stdout == ''\n\n"
        "def test_no_shared_memory_of_the_agent():\n"
        "    assert not os.path.exists('/dev/shm/planted')\n")
    return folder


def test_the_tests_read_nothing_the_agent_left_in_tmp(docker_host, tmp_path):
    task = load_task(scratch_task(tmp_path / "tasks"))
    plant = "printf '[user]\\n\\tname = planted\\n' > /tmp/.gitconfig; touch /tmp/planted /dev/shm/planted; HOME=/tmp git config --global user.name"
    outcomes = {}
    for backend, docker in (("docker", {"docker_host": docker_host}), ("bwrap", None)):
        if backend == "bwrap" and not sb.detect_capability("bwrap").available:
            continue
        with TaskWorkspace.create_sync(task, base_dir=tmp_path, docker=docker) as ws:
            r = ws.run_sync(plant)
            outcomes[backend] = ws.run_tests_sync()
        assert r.stdout == "planted\n", (backend, r)  # git does read such a file
    for backend, outcome in outcomes.items():
        assert (outcome.passed, outcome.total) == (3, 3), (backend, outcome.as_dict(), outcome.output_tail)


def test_a_non_root_user_of_the_image_owns_app_and_the_results(docker_host, tmp_path):
    tasks = [load_task(DEFAULT_TASKS_DIR / "count-error-lines")]
    checks = asyncio.run(check_tasks(tasks, concurrency=2, base_dir=tmp_path,
                                     docker={"docker_host": docker_host, "user": "nobody"}))
    c = checks[0]
    assert not c.error, c.error
    assert (c.solved.passed, c.solved.total, c.unsolved.passed) == (3, 3, 0), (c.solved.as_dict(), c.unsolved.as_dict())
    with DockerSandbox(docker_host=docker_host, user="1000:1000") as box:
        r = box.run_sync("id -u; id -g; stat -c %u:%g /app; touch /app/x && echo wrote")
        assert box.owner == (1000, 1000) and box.uid is None
    assert r.stdout.split() == ["1000", "1000", "1000:1000", "wrote"], r
    with pytest.raises(SandboxError, match="no-such-user"):  # refused clearly, and nothing is left of it
        DockerSandbox(docker_host=docker_host, user="no-such-user")


def test_a_container_that_is_gone_is_a_sandbox_error_not_a_status(docker_host, tmp_path):
    with DockerSandbox(docker_host=docker_host) as box:
        docker(docker_host, "rm", "-f", box.name)
        with pytest.raises(ContainerGone, match="gone"):
            box.run_sync("echo hi")
    with DockerSandbox(docker_host=docker_host) as box:
        docker(docker_host, "kill", box.name)
        with pytest.raises(ContainerGone, match="exited"):
            box.run_sync("echo hi")
    task = load_task(DEFAULT_TASKS_DIR / "count-error-lines")
    with TaskWorkspace.create_sync(task, base_dir=tmp_path, docker={"docker_host": docker_host}) as ws:
        docker(docker_host, "rm", "-f", ws.sandbox.name)
        with pytest.raises(SandboxError):  # an evaluation raises: never reward -1 for a lost container
            ws.run_tests_sync()


def test_a_sandbox_user_that_is_the_images_user_cannot_stop_the_container(docker_host):
    """The idle process runs as root (``--user 0:0``), not as the image's USER: a sandbox user equal to it killing
    everything it may signal (``kill -9 -1``, also the wrapper's own sweep) leaves the container running."""
    image = "slime-test-user-nobody"
    base = docker(docker_host, "create", "slime-terminal-base", "true").strip()
    try:
        docker(docker_host, "commit", "--change", "USER nobody", base, image)
    finally:
        docker(docker_host, "rm", "-f", base, check=False)
    try:
        with DockerSandbox(image, docker_host=docker_host, user="nobody") as box:
            killed = box.run_sync("kill -9 -1; echo unreachable")
            alive = box.run_sync("id -un; echo alive")
            assert box.owner == (65534, 65534)
    finally:
        docker(docker_host, "rmi", "-f", image, check=False)
    assert killed.exit_code == 137, killed
    assert alive.stdout.split() == ["nobody", "alive"], alive


def test_a_root_agent_that_stops_its_container_scores_minus_one_instead_of_raising(docker_host, tmp_path):
    """A root agent may kill the container's idle process (then the init exits): its later commands raise
    ContainerGone and its tools answer errors, but the provider's evaluation scores the episode (no test passed,
    reward -1) rather than failing the sample as an infrastructure error; a container removed under the harness
    still raises (test_a_container_that_is_gone_is_a_sandbox_error_not_a_status)."""
    from slime.agentic.env_service.providers import LeaseContext

    provider = TerminalProvider(backend="docker", docker_user="root", docker_host=docker_host)
    call = {"name": "shell_exec", "arguments": {"id": "main", "command": "kill -9 -1"}}

    async def go():
        env, _ = await provider.reset(LeaseContext("run-stop", "count-error-lines", str(tmp_path)),
                                      {"task_meta": {"task_name": "count-error-lines"}})
        try:
            out = [(await provider.exec_tool(env, call))["observation"]]
            # the tools go on answering (observations, never exceptions), so the episode reaches its evaluation
            again = {**call, "arguments": {"id": "main", "command": "echo x"}}
            out.append((await provider.exec_tool(env, again))["observation"])
            with pytest.raises(ContainerGone, match="exited"):
                await env.workspace.run("echo hi")
            return out, await provider.evaluate(env, {})
        finally:
            await provider.close(env)

    out, result = asyncio.run(go())
    assert all(isinstance(o, str) for o in out), out
    assert (result["score"], result["passed"], result["total"], result["reward"]) == (0.0, 0, 0, -1.0), result
    assert "stopped during the episode" in result["reason"], result


# ---------------------------------------------------------------------------------------------- tasks


def test_two_shipped_tasks_run_end_to_end_in_containers(docker_host, tmp_path):
    """The check of test_terminal_tasks_solvable (check_tasks: a fresh workspace + solution.sh, and one where
    nothing was done), in containers; the bubblewrap run of the same tasks beside it for the timings."""
    tasks = [load_task(DEFAULT_TASKS_DIR / name) for name in TASKS]
    start = time.monotonic()
    checks = asyncio.run(check_tasks(tasks, concurrency=2, base_dir=tmp_path, docker={"docker_host": docker_host}))
    docker_wall = time.monotonic() - start
    for c in checks:
        print("docker", c.line())
        assert not c.error, c.error
        assert c.solved.success and c.solved.reward == 1.0, (c.solved.as_dict(), c.solved.output_tail)
        assert c.unsolved.reason == "" and c.unsolved.passed == 0 and c.unsolved.reward == -1.0, c.unsolved.as_dict()
    if sb.detect_capability("bwrap").available:
        start = time.monotonic()
        bwrap = asyncio.run(check_tasks(tasks, concurrency=2, base_dir=tmp_path))
        bwrap_wall = time.monotonic() - start
        for c in bwrap:
            print("bwrap ", c.line())
        print(f"4 workspaces, 2 at a time: docker {docker_wall:.1f}s wall, bwrap {bwrap_wall:.1f}s wall")
    assert os.listdir(tmp_path) == []


def test_tests_are_hidden_and_planted_files_discarded_in_a_container(docker_host, tmp_path):
    task = load_task(DEFAULT_TASKS_DIR / "count-error-lines")
    with TaskWorkspace.create_sync(task, base_dir=tmp_path, docker={"docker_host": docker_host}) as ws:
        r = ws.run_sync("ls -A /tests | wc -l; touch /tests/conftest.py; echo rc=$?; ls app.log")
        assert r.stdout.split() == ["0", "rc=1", "app.log"] and "Permission denied" in r.stderr, r
        assert ws.app_host is None and ws.tests_host is None
        # planted where the agent could not write (as root, from outside): discarded before the evaluation
        ws.sandbox.root_exec("printf 'import pytest\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_runtest_call(item):"
                             "\\n    pytest.skip(\"hijacked\")\\n' > /tests/conftest.py")
        outcome = ws.run_tests_sync()
        assert (outcome.passed, outcome.total, outcome.reward, outcome.reason) == (0, 3, -1.0, ""), outcome.as_dict()
        assert ws.run_sync("ls -A /tests | wc -l").stdout == "0\n"  # emptied after the evaluation
        assert ws.run_solution_sync().ok and ws.run_tests_sync().reward == 1.0
        name = ws.sandbox.name
    assert name not in docker(docker_host, "ps", "-a", "--format", "{{.Names}}").split()


# ---------------------------------------------------------------------------------------------- shell sessions


def test_shell_sessions_work_in_a_container(docker_host):
    async def go():
        async with DockerSandbox(docker_host=docker_host) as box:
            t = time.monotonic()
            async with ShellSessions(box) as shell:
                started = time.monotonic() - t
                outs = [await shell.call_tool("shell_exec", {"id": "a", "command": c})
                        for c in ("cd /tmp && export X=7 && f() { echo fn; }", "pwd; echo $X; f")]
                other = await shell.call_tool("shell_exec", {"id": "b", "command": "pwd; tmux -V"})
                wrote = await shell.call_tool("shell_write_content_to_file", {"content": "hi\n", "file_path": "notes/x.txt"})
                cat = await shell.call_tool("shell_exec", {"id": "b", "command": "cat notes/x.txt"})
                bg = await shell.call_tool("shell_exec", {"id": "b", "command": "sleep 300 &", "block": True})
                prompt = await shell.call_tool("shell_exec", {"id": "c", "command": "read -p 'name? ' n; echo hello $n",
                                                              "block": False})
                answer = await shell.call_tool("shell_write_to_process", {"id": "c", "command": "docker"})
                times = []
                for _ in range(10):
                    t0 = time.monotonic()
                    await shell.exec("a", "echo hi")
                    times.append(time.monotonic() - t0)
                running = processes(docker_host, box.name, box.uid)
            after = processes(docker_host, box.name, box.uid)
            again = await box.run("echo free")
            return started, outs, other, wrote, cat, bg, prompt, answer, times, running, after, again

    started, outs, other, wrote, cat, _, prompt, answer, times, running, after, again = asyncio.run(go())
    assert outs[1].split() == ["/tmp", "7", "fn"]
    assert other.startswith("/app\ntmux ") and wrote == "Wrote 3 bytes to /app/notes/x.txt." and cat == "hi"
    assert "Started in session 'c'" in prompt and "hello docker" in answer, answer
    assert any("tmux" in p for p in running) and any("sleep 300" in p for p in running)
    assert after == [], after  # the tmux server, its shells and their background jobs died with the sessions
    assert again.stdout == "free\n"
    print(f"shell sessions in docker: host start {started:.2f}s, `echo` p50 {statistics.median(times) * 1000:.1f} ms")


# ---------------------------------------------------------------------------------------------- the service


def test_the_provider_serves_episodes_and_a_restarted_pool_server_leaves_no_container(docker_host, tmp_path):
    settings = PoolSettings(provider="terminal", state_dir=str(tmp_path / "pool"),
                            provider_options={"backend": "docker", "docker_host": docker_host})
    task = load_task(DEFAULT_TASKS_DIR / "count-error-lines")
    task_meta = {"task_name": task.name, "task_path": task.name, "instruction": task.instruction}
    pool = PoolServerProcess(settings).start()
    try:
        async def episodes_then_crash():
            async with EnvClient(pool.url, retries=0) as env:
                solved, idle = await asyncio.gather(
                    run_episode(ScriptedTurnPolicy(solution_turns(task)), env, f"{task.name}:{task.name}", task_meta,
                                AgentSettings()),
                    run_episode(ScriptedTurnPolicy(idle_turns()), env, f"{task.name}:{task.name}", task_meta,
                                AgentSettings()))
                leases = [(await env.allocate(f"k{i}"))["lease_id"] for i in range(2)]
                for lease in leases:
                    await env.reset(lease, task_meta)
                await env.exec_tool(leases[0], "shell_exec", {"id": "a", "command": "sleep 300 &"})
                return solved, idle, leases

        solved, idle, leases = asyncio.run(episodes_then_crash())
        live = {lease: containers(docker_host, f"{LEASE_LABEL}={lease}") for lease in leases}
        os.killpg(pool.process.pid, signal.SIGKILL)  # no shutdown: the containers outlive the server
        pool.process.wait()
    finally:
        pool.stop()
    assert solved.status == "completed" and solved.reward == 1.0, solved.evaluation
    assert idle.reward == -1.0 and idle.evaluation["passed"] == 0
    assert all(len(ids) == 1 for ids in live.values()), live
    assert all(containers(docker_host, f"{LEASE_LABEL}={lease}") for lease in leases)  # still there after the crash
    with PoolServerProcess(settings) as restarted:
        status = httpx.get(restarted.url + "/status").json()["pool"]
    assert status["counters"]["reaped_at_start"] == 2
    assert not any(containers(docker_host, f"{LEASE_LABEL}={lease}") for lease in leases)


def test_reap_removes_a_container_that_a_cut_short_reset_never_recorded(docker_host):
    box = DockerSandbox(docker_host=docker_host, labels={LEASE_LABEL: "run-cutshort"})
    try:
        provider = TerminalProvider(backend="docker", docker_host=docker_host)
        provider.reap({"lease_id": "run-cutshort"})  # the record has the lease id and nothing else
        assert not containers(docker_host, f"{LEASE_LABEL}=run-cutshort")
        provider.reap({"lease_id": "run-cutshort", "container": box.name})  # already gone: nothing to do
    finally:
        box.close()


def test_a_container_keeps_the_same_whole_sandbox_budgets(docker_host):
    """Issue 37: memory spread over many processes, a process flood and a file flood of /tmp, each held by the
    container's own limits (--memory, --pids-limit, /tmp's nr_inodes) and reported as the bwrap sandbox reports them
    (Docker's group, read on this host)."""
    limits = sb.SandboxLimits(memory_budget_bytes=256 << 20, max_processes=40, tmp_files=300, cpu_budget=0.5)
    hog = "python3 -c 'import time; b = bytearray(60 << 20); b[::4096] = bytes(len(b[::4096])); time.sleep(3)'"

    async def go():
        box = await asyncio.to_thread(DockerSandbox, docker_host=docker_host, limits=limits)
        try:
            assert box.cgroup is not None, "Docker's group of the container is not on this host"
            memory = await box.run(f"for i in $(seq 8); do {hog} & done; wait", timeout=60)
            flood = await box.run("for i in $(seq 200); do sleep 1 & done; wait", timeout=60)
            files = await box.run("cd /tmp && for i in $(seq 1000); do : > t$i || break; done; echo made $i")
            return memory, flood, files, box.budget_exceeded()
        finally:
            await box.aclose()

    memory, flood, files, overall = asyncio.run(go())
    assert "went over its memory budget (256 MiB" in memory.budget_exceeded, memory
    assert "reached its process budget (40 processes" in flood.budget_exceeded, flood
    assert int(files.stdout.split()[-1]) <= 300 and "No space left on device" in files.stderr
    assert "memory budget" in overall and "process budget" in overall


def test_a_containers_writable_layer_has_a_disk_budget(docker_host):
    """Issue 37: what a container writes outside /tmp (its writable layer, here a btrfs subvolume of the private
    daemon's data root) is capped at the disk budget, in bytes and so in files, and reported as the bwrap sandbox
    reports a full disk; the image the layer shares does not count."""
    limits = sb.SandboxLimits(disk_budget_bytes=16 << 20)  # the smallest allowed: the file flood takes longer the larger it is
    flood = ("python3 -c \"\nimport os\nfor i in range(1000000):\n    try: open(f'/root/f{i}', 'w').close()\n"
             "    except OSError as e: print('made', i, e.strerror); break\"")

    async def go():
        box = await asyncio.to_thread(DockerSandbox, docker_host=docker_host, limits=limits, user="root")
        try:
            assert box.disk is not None, "the container's writable layer is not capped"
            fresh = box.disk.usage()
            big = await box.run("head -c 200M /dev/zero > /root/big; echo rc=$?; stat -c %s /root/big")
            files = await box.run(f"rm /root/big && sync && {flood}", timeout=120)
            return fresh, big, files, box.budget_exceeded()
        finally:
            await box.aclose()

    fresh, big, files, overall = asyncio.run(go())
    assert fresh.bytes_total == 16 << 20 and fresh.bytes_used < 1 << 20  # the image's ~300 MB are not the layer's
    assert "rc=1" in big.stdout and int(big.stdout.split()[-1]) <= 16 << 20 and "quota exceeded" in big.stderr
    assert "filled its disk budget (16 MiB) in its writable layer" in big.budget_exceeded, big
    made = int(files.stdout.split()[1])
    assert 5_000 < made < 100_000 and "quota exceeded" in files.stdout, files  # files cost bytes: bounded
    assert "writable layer" in files.budget_exceeded and "writable layer" in overall
