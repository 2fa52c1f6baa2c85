"""A sandbox backed by a Docker container: the same surface as :class:`slime.agentic.sandbox.Sandbox` (``run``,
``run_python``, ``spawn`` -> :class:`~slime.agentic.sandbox.SandboxProcess`, ``close``, one command at a time, the
timeout, the output caps, the exit status in shell convention: all of it :class:`~slime.agentic.sandbox.SandboxBase`),
so that :class:`~slime.agentic.shell_sessions.ShellSessions` and the terminal workspace run unchanged in a
terminal-bench image. Only what differs is here: how a command gets into the container and how it is killed.

* One container per sandbox, started by :func:`run_argv`: ``docker run -d --network none --memory M --memory-swap M
  --pids-limit P --tmpfs /tmp --user 0 --init --security-opt no-new-privileges --label slime.sandbox=1 -- IMAGE sleep
  infinity`` (``--pull never``: an image that is not there is an error, never a download; the image name is checked
  against Docker's reference grammar first, so nothing else can reach that argv position). Its own processes are
  PID 1 (the init) and the idle ``sleep``, both root whatever the image's USER (no sandbox user can stop the
  container); everything else in it belongs to a command. The work directory (``/app``) is created and given to
  the sandbox user; ``root_dirs`` (``/tests``) are created root-owned 0755.
* The sandbox user is, by default, a uid leased from the bubblewrap sandboxes' :class:`~slime.agentic.sandbox.UidPool`
  (unprivileged, no passwd entry needed, unique on this host); ``user="root"`` runs as the image's root instead, as
  terminal-bench's harness does; any other ``docker exec -u`` value (``1000:1000``, a name the image knows) is
  resolved to its numeric uid:gid inside the container (a user the image does not know is refused), which then
  owns the work directory and the tests' results folder.
* A command is ``docker exec -i -u USER -w DIR -e KEY... CONTAINER bash -c WRAPPER slime-exec KEEP NONCE SOFT HARD
  ARGV`` (:func:`exec_argv`). The environment is :func:`~slime.agentic.sandbox.sandbox_env` with the image's own PATH
  (HOME = the work directory, LANG, SHELL, thread caps, the caller's), handed over as ``-e KEY`` whose values the
  docker CLI takes from its own environment, so no value is on a command line. The wrapper sets the rlimits
  (``ulimit``: CPU, address space, file size, open files, no core files; the process count is the container's
  ``--pids-limit``), prints ``slime:NONCE`` (this call's) to stderr, runs the command, then SIGKILLs every other
  process it may signal (a non-root user: every process of its uid, ``kill -9 -1`` included; root: everything but
  the container's own two), and exits with the command's status (:data:`LIMITS_ERROR` when it could not set the
  limits, which ``run`` raises as SandboxError).
* After every command, and to kill one (its timeout, ``SandboxProcess.kill``, a cancelled run), a second ``docker
  exec`` as root SIGKILLs every process of the container but its own two, until none is left (:func:`kill_argv`),
  whatever its uid, session, environment or state (a zombie whose other threads still run counts as alive); then
  the local docker CLI is killed. So, as in the bubblewrap sandbox,
  nothing a command started outlives it, even a process that killed the wrapper. Killing only the CLI would leave
  the command running in the container.
* A docker failure is not a command result: when the container is gone or stopped, or ``docker exec`` itself
  failed (``Error response from daemon``, ``OCI runtime ...``), ``run`` raises :class:`SandboxError`
  (:class:`ContainerGone` for the first, with the container's state), unless stderr starts with this call's
  ``slime:NONCE`` line: then the command ran and its status and stderr (stripped of that line) are its own.
* Files go in and out with ``docker cp`` (tar on stdin/stdout; nothing is needed in the image):
  :meth:`DockerSandbox.put_archive`, :meth:`DockerSandbox.read_file` (bounded; it says whether it is a regular
  file); the harness's own steps run as root (:meth:`DockerSandbox.root_exec`, optionally after killing every
  process of the container), one at a time (a lock: two sweeps never kill each other).
* ``close`` is ``docker rm -f``. A container outlives a crashed owner (there is no --die-with-parent here): the
  environment service records the container name (``resources``) and :func:`remove_container` removes it when
  the pool server restarts.

The daemon: ``docker_host`` (``unix:///...``), else ``$DOCKER_HOST``, else the private daemon that
``scripts/setup_docker.sh`` starts (its socket under :func:`default_docker_dir`) when that socket exists, else the
docker CLI's default. Every argv is built by a pure function (unit-tested without a daemon); every docker CLI call
of the harness goes through :func:`docker_call`, which maps docker's failures to SandboxError."""

from __future__ import annotations

import collections
import functools
import io
import json
import logging
import os
import re
import resource
import secrets
import shlex
import shutil
import signal
import subprocess
import tarfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from slime.agentic import cgroups, container_disk
from slime.agentic.sandbox import (
    DEFAULT_PATH,
    Command,
    SandboxBase,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    UidPool,
    _live_sandboxes,
    sandbox_env,
    shell_argv,
)

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "slime-terminal-base"  # built by scripts/setup_docker.sh
SANDBOX_LABEL = "slime.sandbox"  # every container made here carries slime.sandbox=1
DOCKER_DIR_ENV = "SLIME_DOCKER_DIR"  # where scripts/setup_docker.sh keeps its daemon (and its socket)
DEFAULT_DOCKER_DIR = os.path.join("~", ".cache", "slime", "docker")  # the script's default (a unit test compares)
# the wrapper's own exit status when it cannot set the limits (sysexits' EX_OSERR): not docker's 125 (docker run
# failed), 126 (cannot invoke) or 127 (not found)
LIMITS_ERROR = 71
_CLI_TIMEOUT_S = 120.0  # docker run / rm / cp: a daemon that takes longer is broken
_MARK_RE = re.compile(r"slime:[0-9a-f]{12}\n")  # the wrapper's first stderr line (see _WRAPPER)
_KILL_TIMEOUT_S = 30.0
# how docker's CLI reports its own failures (exit 1 or 125-127), never a command's
_DOCKER_ERRORS = ("Error response from daemon", "OCI runtime", "Cannot connect to the Docker daemon",
                  "error during connect", "Error: No such container")

# Docker's image reference grammar (distribution/reference), or an image id
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)"
_IMAGE_RE = re.compile(rf"{_DOMAIN}?{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?"
                       r"|sha256:[0-9a-f]{64}")
_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}")  # a container name (docker's rule)
_USER_RE = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,63}(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,63})?")  # user[:group]

# `proc_stat DIR`: the fields of DIR/stat after "(comm) " into the caller's array `f` (f[0] the state, f[1] the
# parent pid, ...); false when the process is gone. Builtins only.
_PROC_STAT = r"""proc_stat() {
    local s
    { read -r s < "$1/stat"; } 2>/dev/null || return 1
    s=${s##*) }
    f=($s)
}
"""
# bash, run inside the container, builtins only (but `sleep` between late rounds, which every image we run has: it
# is the container's idle process). `killall_but PID...`: SIGKILL every process this shell may signal, except itself
# and the pids given, whatever its state, until a full pass finds none alive. A zombie counts as dead only when it has
# one task left: a process whose main thread called exit(2) alone shows state Z while its other threads run on, and
# SIGKILL does kill those. Not root: every process of the uid, whatever its environment or session (`kill -9 -1`
# first: all of them in one call, which a forking loop cannot outrun); root: everything but the pids given (the
# container's init and idle process).
_KILL_ALL = _PROC_STAT + r"""killall_but() {
    local round d p found
    local -a f t
    for ((round = 0; round < 300; round++)); do
        found=
        [ "$EUID" = 0 ] || kill -9 -1 2>/dev/null
        for d in /proc/[0-9]*; do
            p=${d#/proc/}
            case " $$ $* " in *" $p "*) continue ;; esac
            kill -9 "$p" 2>/dev/null || continue
            proc_stat "$d" || continue
            if [ "${f[0]}" = Z ]; then
                t=("$d"/task/[0-9]*)
                ((${#t[@]} > 1)) || continue
            fi
            found=1
        done
        [ -z "$found" ] && return 0
        ((round < 20)) || sleep 0.02 2>/dev/null || :
    done
    return 1
}
"""
# the command's wrapper: `bash -c WRAPPER slime-exec KEEP NONCE SOFT HARD ARGV...` (KEEP: the container's own pids;
# NONCE: this call's, printed to stderr as the line `slime:NONCE` once the limits are set, before the command runs,
# so that a docker or wrapper failure (no such line first) is never confused with what the command wrote; SOFT,
# HARD: `ulimit` arguments)
_WRAPPER = _KILL_ALL + r"""keep=$1 nonce=$2 soft=$3 hard=$4; shift 4
ulimit $soft && ulimit $hard || { echo "slime sandbox: cannot set the limits ($soft; $hard)" >&2; exit 71; }
printf 'slime:%s\n' "$nonce" >&2
"$@"
rc=$?
killall_but $keep
exit $rc
"""
# put before a root script: `bash -c SCRIPT slime-root KEEP ARGS...` kills every process but KEEP, then runs the
# script with ARGS as its $1...
_KILL_FIRST = _KILL_ALL + r"""killall_but $1 || { echo "slime sandbox: processes still alive after SIGKILL" >&2; exit 70; }
shift
"""
# `bash -c PREPARE slime-prepare WORKDIR OWNER INIT ROOT_DIR...`, as root: the work directory (given to OWNER), the
# root-owned directories; prints the idle process's pid (PID 1's child when there is an init, which may still be
# starting) and the image's PATH (docker exec's environment without -e)
_PREPARE = _PROC_STAT + r"""set -e
wd=$1 owner=$2 init=$3
shift 3
mkdir -p "$wd"
[ -z "$owner" ] || chown -R "$owner" "$wd"
for d in "$@"; do rm -rf "$d"; mkdir -p "$d"; chown 0:0 "$d"; chmod 0755 "$d"; done
main=1
for ((try = 0; init && main == 1 && try < 500; try++)); do
    for d in /proc/[0-9]*; do
        proc_stat "$d" || continue
        if [ "${f[1]}" = 1 ]; then main=${d#/proc/}; fi
    done
    [ "$main" != 1 ] || sleep 0.01
done
[ "$init" = 0 ] || [ "$main" != 1 ] || { echo "slime sandbox: the container's idle process did not start" >&2; exit 1; }
printf 'main=%s\npath=%s\n' "$main" "$PATH"
"""
# as the sandbox user: its effective uid:gid (docker exec -u resolved NAME or UID against the image's passwd)
_IDS = r"""while read -r k a b c; do case $k in Uid:) u=$b ;; Gid:) g=$b ;; esac; done < /proc/self/status
echo "$u:$g"
"""


class ContainerGone(SandboxError):
    """The sandbox's container is not there any more, or not running (the message says which, and how it ended).
    `status`: docker's word for the container's state when the daemon told it (``exited``, ``gone``, ...), else
    None."""

    def __init__(self, message: str, status: str | None = None):
        super().__init__(message)
        self.status = status


# ------------------------------------------------------------------------------------------------ checks


def check_image(image: str) -> str:
    """`image` when it is a Docker image reference (``name[:tag][@digest]``, with a registry, or an image id); else
    ValueError. Validated before it becomes an argv element (``-rf`` would be a flag)."""
    if not isinstance(image, str) or not _IMAGE_RE.fullmatch(image):
        raise ValueError(f"not a Docker image reference: {image!r} (e.g. slime-terminal-base, tb__count-error-lines, "
                         "registry:5000/team/image:tag)")
    return image


def task_image(template: str, task: str) -> str:
    """The image of `task`: `template` with ``{task}`` replaced by the task's name, checked (:func:`check_image`)."""
    try:
        image = template.format(task=task)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"image {template!r}: only {{task}} may be named in braces ({type(e).__name__}: {e})") from None
    return check_image(image)


def check_user(user: str) -> str:
    """`user` when it is a ``docker exec -u`` value (``NAME``, ``UID``, ``NAME:GROUP``, ``UID:GID``); else ValueError."""
    return _check(user, _USER_RE, "docker user (NAME, UID, NAME:GROUP or UID:GID)")


def _check(value: str, pattern: re.Pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"not a valid {what}: {value!r}")
    return value


# ------------------------------------------------------------------------------------------------ pure argv


def docker_cli(docker: str = "docker", host: str | None = None) -> list[str]:
    """The docker CLI, pointed at `host` (``unix:///path``, ``tcp://...``) when given."""
    return [docker, *(["-H", host] if host else [])]


# bash `ulimit` letters of the rlimits of SandboxLimits.rlimits() and their units (bash counts address space and file
# size in KiB); RLIMIT_NPROC has none here: it counts a uid's processes machine-wide and is ignored for root, so the
# container's --pids-limit stands in for it
_ULIMIT_FLAGS = {
    resource.RLIMIT_CPU: ("t", 1),
    resource.RLIMIT_AS: ("v", 1024),
    resource.RLIMIT_FSIZE: ("f", 1024),
    resource.RLIMIT_NOFILE: ("n", 1),
    resource.RLIMIT_CORE: ("c", 1),
}
# the container's limits are not this host's: nothing lowers them to the caller's own hard limits
_UNCAPPED = collections.defaultdict(lambda: resource.RLIM_INFINITY)


def ulimit_args(limits: SandboxLimits) -> tuple[str, str]:
    """bash ``ulimit`` arguments for the wrapper, from :meth:`SandboxLimits.rlimits` (as the bwrap sandbox's
    ``prlimit``): soft values first, then the hard ones (a hard limit below the current soft one is refused). CPU
    gets one more second of hard limit (SIGXCPU, then SIGKILL)."""
    def arg(res: int, value: int) -> str:
        letter, unit = _ULIMIT_FLAGS[res]
        return f"-{letter} {max(1, value // unit) if unit > 1 else value}"

    rlimits = {res: value for res, value in limits.rlimits(_UNCAPPED).items() if res in _ULIMIT_FLAGS}
    soft = " ".join(["-S", *(arg(res, s) for res, (s, _) in rlimits.items())])
    hard = " ".join(["-H", *(arg(res, h) for res, (_, h) in rlimits.items())])
    return soft, hard


def run_argv(
    image: str,
    name: str,
    *,
    limits: SandboxLimits,
    labels: Mapping[str, str] | None = None,
    docker: str = "docker",
    host: str | None = None,
    init: bool = True,
    network: str | None = None,
) -> list[str]:
    """``docker run -d``: the container that holds one sandbox, idle (``sleep infinity``) until commands are
    exec'd into it. No network (or `network`: the private one of a task's services, terminal.compose), the
    sandbox's memory budget (no swap on top), a process cap, a CPU quota, a private /tmp capped in bytes and files
    (exec allowed: tests write and run scripts there), no privilege gain through setuid files, a tiny init as PID 1
    (it reaps the orphans commands leave, which would otherwise count against the process cap as zombies). `image`
    and `name` are checked (ValueError), and ``--`` ends the options before the image."""
    _check(name, _NAME_RE, "container name")
    argv = [*docker_cli(docker, host), "run", "-d", "--pull", "never", "--name", name, "--hostname", "sandbox"]
    # the whole-sandbox budgets, as the bwrap sandbox's control group keeps them: memory of all processes together
    # (no swap on top), processes and threads, CPUs; the private /tmp's bytes and files
    memory = limits.memory_budget
    argv += ["--network", _check(network, _NAME_RE, "network name") if network else "none"]
    argv += ["--memory", str(memory), "--memory-swap", str(memory)]
    argv += ["--pids-limit", str(limits.max_processes), "--cpus", f"{limits.cpu_budget:g}"]
    argv += ["--tmpfs", f"/tmp:rw,exec,nosuid,nodev,size={limits.tmp_size_bytes},nr_inodes={limits.tmp_files},mode=1777"]
    # the init and the idle process run as root (uid 0; not "0:0", which `docker cp -a` cannot look up) whatever the
    # image's USER: a sandbox user's `kill -9 -1` (the wrapper's own sweep, or the agent's) cannot reach them, so
    # only a root agent can stop the container
    argv += ["--user", "0", "--security-opt", "no-new-privileges", "--label", f"{SANDBOX_LABEL}=1"]
    for key, value in (labels or {}).items():
        argv += ["--label", f"{key}={value}"]
    if init:
        argv.append("--init")
    return argv + ["--entrypoint", "sleep", "--", check_image(image), "infinity"]


def exec_argv(
    container: str,
    command: Sequence[str],
    *,
    user: str | None,
    workdir: str,
    env_keys: Sequence[str],
    limits: SandboxLimits,
    keep: str = "1",
    nonce: str = "0" * 12,
    docker: str = "docker",
    host: str | None = None,
) -> list[str]:
    """``docker exec -i`` of `command` in the wrapper (limits; the line ``slime:NONCE`` on stderr once they are set,
    before the command runs; afterwards every other process it may signal is killed, but `keep`, the container's
    own pids). The values of `env_keys` come from the docker CLI's own environment (``-e KEY`` without a value).
    Always ``-i``: a command without input reads EOF at once, as from /dev/null."""
    if not command:
        raise ValueError("empty command")
    argv = [*docker_cli(docker, host), "exec", "-i", *(["-u", user] if user else []), "-w", workdir]
    for key in env_keys:
        argv += ["-e", key]
    if not re.fullmatch(r"[0-9a-f]{12}", nonce):
        raise ValueError(f"the nonce must be 12 hex digits, got {nonce!r}")
    return argv + [container, "bash", "-c", _WRAPPER, "slime-exec", keep, nonce, *ulimit_args(limits), *command]


def root_exec_argv(container: str, script: str, args: Sequence[str] = (), *, keep: str | None = None,
                   docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker exec -u 0 CONTAINER bash -c SCRIPT`` (the harness's own steps, never the agent's commands). With
    `keep` (the container's own pids), every other process of the container is SIGKILLed first (exit 70 when some
    survive), whoever's it is."""
    if keep is not None:
        script, args = _KILL_FIRST + script, (keep, *args)
    return [*docker_cli(docker, host), "exec", "-u", "0", container, "bash", "-c", script, "slime-root", *args]


def kill_argv(container: str, keep: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker exec -u 0``: SIGKILL every process of the container but `keep` (PID 1 and the idle process), until
    none is left: whatever a command started, in whichever session, with whatever environment or uid."""
    return root_exec_argv(container, "", keep=keep, docker=docker, host=host)


def prepare_argv(container: str, workdir: str, owner: str | None, root_dirs: Sequence[str] = (), *, init: bool = True,
                 docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker exec -u 0``: create the work directory (given to `owner`, ``uid:gid``, with what the image put
    there) and `root_dirs` (root-owned, mode 0755: the sandbox user may enter but not write); prints ``main=PID``
    (the container's idle process) and ``path=...`` (the image's PATH)."""
    return root_exec_argv(container, _PREPARE, [workdir, owner or "", "1" if init else "0", *root_dirs], docker=docker,
                          host=host)


def user_ids_argv(container: str, user: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker exec -u USER``: prints the numeric ``uid:gid`` docker runs `user` as."""
    return [*docker_cli(docker, host), "exec", "-u", user, container, "bash", "-c", _IDS]


def cp_in_argv(container: str, dest_dir: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker cp -a - CONTAINER:DIR``: a tar on stdin unpacked into DIR (which must exist), owners and modes as
    the tar says (``-a``)."""
    return [*docker_cli(docker, host), "cp", "-a", "-", f"{container}:{dest_dir}"]


def cp_out_argv(container: str, path: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker cp CONTAINER:PATH -``: PATH as a tar on stdout (a symlink as the link itself, not followed)."""
    return [*docker_cli(docker, host), "cp", f"{container}:{path}", "-"]


def rm_argv(container: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker rm -f``: kill everything in the container and remove it."""
    return [*docker_cli(docker, host), "rm", "-f", container]


def ps_argv(label: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker ps -aq --filter label=KEY=VALUE``: the ids of every container (running or not) with that label."""
    return [*docker_cli(docker, host), "ps", "-aq", "--no-trunc", "--filter", f"label={label}"]


def inspect_state_argv(container: str, *, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker inspect``: the container's status, exit code and whether the kernel OOM-killed it."""
    return [*docker_cli(docker, host), "inspect", "--type", "container", "--format",
            "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}", container]


# ------------------------------------------------------------------------------------------------ the CLI


def default_docker_dir() -> str:
    """Where ``scripts/setup_docker.sh`` keeps its daemon: ``$SLIME_DOCKER_DIR``, else ``~/.cache/slime/docker``
    (the script's ``env`` command prints the same; a unit test checks that they agree)."""
    return os.environ.get(DOCKER_DIR_ENV) or os.path.expanduser(DEFAULT_DOCKER_DIR)


def default_docker_host() -> str | None:
    """``$DOCKER_HOST``; else the socket of the private daemon of ``scripts/setup_docker.sh`` when it exists;
    else None (the docker CLI's own default, /var/run/docker.sock)."""
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    sock = os.path.join(default_docker_dir(), "docker.sock")
    return f"unix://{sock}" if os.path.exists(sock) else None


def parse_exports(text: str) -> dict[str, str]:
    """The ``export KEY=VALUE`` lines that ``scripts/setup_docker.sh`` prints on stdout (values shell-quoted), as a
    dict; other lines are ignored."""
    out = {}
    for line in text.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, value = words[1].split("=", 1)
            out[key] = value
    return out


def docker_binary() -> str:
    found = shutil.which("docker")
    if found is None:
        raise SandboxUnavailable("no docker CLI on PATH: run scripts/setup_docker.sh (Debian's docker.io)")
    return found


def docker_error(what: str, rc: int, stderr: str, *, host: str | None = None, image: str | None = None) -> SandboxError:
    """The SandboxError for a docker CLI call that exited `rc` saying `stderr`: SandboxUnavailable when there is no
    daemon or no such image, ContainerGone when the container is not there or not running."""
    message = stderr.strip()[-2000:]
    if "Cannot connect to the Docker daemon" in message or "docker daemon running" in message or "error during connect" in message:
        return SandboxUnavailable(f"no Docker daemon at {host or 'the default socket'}: {message} "
                                  "(start one with scripts/setup_docker.sh)")
    if "No such image" in message:
        return SandboxUnavailable(f"image {image!r} is not on the Docker daemon ({message}); build it "
                                  "(scripts/setup_docker.sh builds slime-terminal-base) or load it first")
    if re.search(r"No such container: |is not running|is restarting|is paused|is marked for removal", message):
        return ContainerGone(f"docker: could not {what}: {message}")
    return SandboxError(f"docker: could not {what} (exit {rc}): {message}")


def docker_call(argv: list[str], *, what: str, input: bytes | None = None, timeout: float = _CLI_TIMEOUT_S,
                host: str | None = None, image: str | None = None) -> bytes:
    """Run one docker CLI command of the harness; its stdout, or the SandboxError of :func:`docker_error` (also
    for a CLI that cannot start or a daemon that does not answer within `timeout`)."""
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"docker: could not {what}: docker did not answer within {timeout:g} s") from None
    except OSError as e:
        raise SandboxUnavailable(f"docker: could not {what}: cannot run {argv[0]}: {e}") from None
    if proc.returncode != 0:
        raise docker_error(what, proc.returncode, proc.stderr.decode("utf-8", "replace"), host=host, image=image)
    return proc.stdout


def info_argv(*, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker info``: the daemon's data root and storage driver, tab-separated."""
    return [*docker_cli(docker, host), "info", "--format", "{{.DockerRootDir}}\t{{.Driver}}"]


@functools.lru_cache(maxsize=None)
def daemon_storage(docker: str, host: str | None) -> tuple[str, str]:
    """(data root, storage driver) of the daemon at `host`, asked once per process and daemon."""
    out = docker_call(info_argv(docker=docker, host=host), what="ask the daemon for its storage", host=host)
    root, _, driver = out.decode("utf-8", "replace").strip().partition("\t")
    return root, driver


_warned_uncapped: set[str | None] = set()


def _uncapped_layer(host: str | None, driver: str) -> None:
    """No cap on a container's writable layer here: refuse, unless the user opted out (then log it once per daemon)."""
    weaker = ("a container can write to the daemon's disk as much as it likes (only its memory, processes, CPU and "
              "/tmp are capped)")
    why = (f"the daemon keeps containers with the {driver or 'unknown'} storage driver, or not on this host; the disk "
           "budget needs its data root here on btrfs with quotas (scripts/setup_docker.sh does that)")
    if not container_disk.opted_out():
        raise SandboxUnavailable(f"docker sandbox: cannot cap the container's disk: {why}. Set "
                                 f"{container_disk.STORAGE_CAP_ENV}=off to start anyway: {weaker}")
    if host not in _warned_uncapped:
        _warned_uncapped.add(host)
        logger.warning("docker sandbox: %s=off (opted in): %s; %s", container_disk.STORAGE_CAP_ENV, why, weaker)


def cap_container_disk(container_id: str, name: str, budget_bytes: int, *, docker: str,
                       host: str | None) -> container_disk.ContainerDisk | None:
    """Cap the writable layer of container `container_id` (called `name` in messages) at `budget_bytes`
    (container_disk); SandboxUnavailable where that cannot be, unless the user opted out (then None)."""
    root, driver = daemon_storage(docker, host)
    try:
        disk = container_disk.attach(root, driver, container_id, budget_bytes)
    except OSError as e:
        raise SandboxUnavailable(f"docker sandbox: cannot cap the disk of container {name} ({e}); are btrfs "
                                 f"quotas on in {root}? (`btrfs quota enable {root}`)") from None
    if disk is None:
        _uncapped_layer(host, driver)
    return disk


def remove_container(name: str, *, docker_host: str | None = None, docker: str | None = None,
                     timeout: float = _CLI_TIMEOUT_S) -> bool:
    """``docker rm -f NAME`` (a crashed owner's container, found in its lease record); True when it was removed (or
    the CLI does not say), False when there was none."""
    try:
        docker_call(rm_argv(name, docker=docker or docker_binary(), host=docker_host), what=f"remove container {name}",
                    host=docker_host, timeout=timeout)
    except ContainerGone:
        return False
    return True


def remove_labelled(label: str, *, docker_host: str | None = None, docker: str | None = None,
                    timeout: float = _CLI_TIMEOUT_S) -> int:
    """``docker rm -f`` every container labelled `label` (``KEY=VALUE``), then remove the networks so labelled (a
    task's compose services' network, terminal.compose); how many containers there were."""
    docker = docker or docker_binary()
    ids = docker_call(ps_argv(label, docker=docker, host=docker_host), what=f"list the containers labelled {label}",
                      host=docker_host, timeout=timeout).decode().split()
    for container in ids:
        remove_container(container, docker_host=docker_host, docker=docker, timeout=timeout)
    networks = docker_call([*docker_cli(docker, docker_host), "network", "ls", "-q", "--filter", f"label={label}"],
                           what=f"list the networks labelled {label}", host=docker_host, timeout=timeout).split()
    if networks:
        docker_call([*docker_cli(docker, docker_host), "network", "rm", *(n.decode() for n in networks)],
                    what=f"remove the networks labelled {label}", host=docker_host, timeout=timeout)
    return len(ids)


def ping_argv(*, docker: str = "docker", host: str | None = None) -> list[str]:
    """``docker version``: answers only when the daemon does (its version)."""
    return [*docker_cli(docker, host), "version", "--format", "{{.Server.Version}}"]


def ping_daemon(docker_host: str | None = None, *, timeout: float = 5.0, docker: str | None = None) -> None:
    """Return when the daemon at `docker_host` answers within `timeout` seconds; else SandboxError (SandboxUnavailable
    when there is none)."""
    docker_call(ping_argv(docker=docker or docker_binary(), host=docker_host), what="reach the Docker daemon",
                timeout=timeout, host=docker_host)


# ------------------------------------------------------------------------------------------------ sandbox


class DockerSandbox(SandboxBase):
    """One container; `run`, `run_python`, `spawn` as the bwrap sandbox (one at a time), `close` removes it.

    `image` must be on the daemon (``--pull never``). `workdir` is the work directory inside (created, given to the
    sandbox user; default ``/app``), `root_dirs` more directories made root-owned and read-only to the sandbox user
    (the terminal workspace's ``/tests``). `user`: None leases an unprivileged uid from `uid_pool`; otherwise a
    ``docker exec -u`` value (``root``, ``1000:1000``, a name the image knows), resolved to ``owner`` (numeric
    uid, gid). `python`: an interpreter inside (``run_python``, the shell host, the tests' ``$PYTHON``). `network`:
    a Docker network to join instead of none (a task's compose services, :class:`slime.agentic.terminal.compose.
    ServiceGroup`, which keeps the host off it)."""

    isolation = "docker"
    _kill_blocks = True  # a docker CLI call: never on the event loop
    disk: container_disk.ContainerDisk | None = None  # the cap of its writable layer (container_disk)

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str = "/app",
        root_dirs: Sequence[str] = (),
        user: str | None = None,
        python: str = "python3",
        labels: Mapping[str, str] | None = None,
        name: str | None = None,
        docker_host: str | None = None,
        uid_pool: UidPool | None = None,
        init: bool = True,
        network: str | None = None,
    ):
        if not os.path.isabs(workdir):
            raise ValueError(f"workdir must be an absolute path inside the container, got {workdir!r}")
        check_image(image)
        if user is not None:
            check_user(user)
        self.name = _check(name, _NAME_RE, "container name") if name is not None else f"slime-{secrets.token_hex(6)}"
        self.docker = docker_binary()
        self.docker_host = docker_host or default_docker_host()
        self.image = image
        self.limits = limits or SandboxLimits()
        self.env = dict(env or {})
        sandbox_env("/", self.env)  # validate early
        self.python = python
        self.inner_path = os.path.normpath(workdir)
        self.path = None  # nothing of it is on this host
        self._lease_uid(uid_pool, user is None)
        self.user = f"{self.uid}:{self.uid}" if self.uid is not None else user
        self.owner: tuple[int, int] = (self.uid, self.uid) if self.uid is not None else (0, 0)  # resolved below
        self.image_path = DEFAULT_PATH  # the image's PATH, read below
        self._keep = "1"  # the container's own pids: its init and idle process (read below)
        self._busy = False
        self._spawned = None
        self._closed = False
        self._nonce = ""
        self._root_lock = threading.Lock()  # one root step at a time: two sweeps must not kill each other
        with self._starting(lambda: remove_container(self.name, docker_host=self.docker_host, docker=self.docker)):
            container_id = self._cli(run_argv(image, self.name, limits=self.limits, labels=labels, docker=self.docker,
                                              host=self.docker_host, init=init, network=network),
                                     what="start the container")
            # Docker's group for it, read on this host (when the daemon's groups are here): budget_exceeded()
            container_id = container_id.decode().strip()
            self.cgroup = cgroups.ContainerCgroup.find(container_id, self.limits.memory_budget, self.limits.max_processes)
            self.disk = self._cap_disk(container_id)
            self.owner = self._resolve_owner()
            uid, gid = self.owner
            out = self._cli(prepare_argv(self.name, self.inner_path, f"{uid}:{gid}" if uid != 0 else None, root_dirs,
                                         init=init, docker=self.docker, host=self.docker_host),
                            what="prepare the container")
            values = dict(line.split("=", 1) for line in out.decode("utf-8", "replace").splitlines() if "=" in line)
            if not values.get("main", "").isdigit():
                raise SandboxError(f"docker sandbox: preparing the container printed {out[-500:]!r}")
            self._keep = "1" if values["main"] == "1" else f"1 {values['main']}"
            self.image_path = values.get("path") or DEFAULT_PATH
        _live_sandboxes.add(self)

    def _cap_disk(self, container_id: str) -> container_disk.ContainerDisk | None:
        """The container's writable layer capped at the disk budget (container_disk), before anything of the
        agent's runs; where that cannot be, SandboxUnavailable unless the user opted out."""
        return cap_container_disk(container_id, self.name, self.limits.disk_budget_bytes, docker=self.docker,
                                  host=self.docker_host)

    def budget_mark(self) -> dict | None:
        mark = super().budget_mark()
        return {} if mark is None and self.disk is not None else mark

    def budget_exceeded(self, since: dict | None = None) -> str:
        """The container's group's counters (SandboxBase), plus its writable layer when it is full now."""
        problems = [super().budget_exceeded(since)]
        if self.disk is not None and (spent := self.disk.usage().spent()):
            problems.append(f"{spent} in its writable layer")
        return "; ".join(p for p in problems if p)

    def _resolve_owner(self) -> tuple[int, int]:
        """The sandbox user's numeric (uid, gid): the leased uid; the numbers of ``UID:GID``; else as docker resolves
        the name (or a lone uid) against the image's passwd and group files (an unknown user: SandboxError)."""
        if self.uid is not None:
            return self.uid, self.uid
        if m := re.fullmatch(r"(\d+):(\d+)", self.user):
            return int(m[1]), int(m[2])
        if self.user in ("root", "0"):
            return 0, 0
        out = self._cli(user_ids_argv(self.name, self.user, docker=self.docker, host=self.docker_host),
                        what=f"run as user {self.user!r} (is it in the image's /etc/passwd?)").decode().strip()
        if not (m := re.fullmatch(r"(\d+):(\d+)", out)):
            raise SandboxError(f"docker sandbox: cannot tell the uid and gid of user {self.user!r} (got {out!r})")
        return int(m[1]), int(m[2])

    def _cli(self, argv: list[str], *, what: str, input: bytes | None = None, timeout: float = _CLI_TIMEOUT_S) -> bytes:
        """:func:`docker_call` for this container; a ContainerGone names the container's state."""
        try:
            return docker_call(argv, what=what, input=input, timeout=timeout, host=self.docker_host, image=self.image)
        except ContainerGone as e:
            raise self._gone(e) from None

    def _gone(self, e: ContainerGone) -> ContainerGone:
        """`e` with the container's state (words and ``status``)."""
        status, words = self._state()
        return ContainerGone(f"docker sandbox {self.name}: {words}: {e}", status)

    def _state(self) -> tuple[str | None, str]:
        """(docker's status word or ``gone``, or None when the daemon did not say; the state in words)."""
        try:
            out = docker_call(inspect_state_argv(self.name, docker=self.docker, host=self.docker_host),
                              what="inspect the container", timeout=_KILL_TIMEOUT_S, host=self.docker_host).decode()
        except SandboxError as e:
            if "No such" in str(e):
                return "gone", "the container is gone"
            return None, f"the container's state is unknown ({e})"
        status, code, oom = (out.split() + ["", "", ""])[:3]
        if status == "running":
            return status, "the container is running"
        return status or None, f"the container is {status} (exit code {code}{', OOM-killed' if oom == 'true' else ''})"

    def state(self) -> str:
        """The container's state in words (for errors): running, exited with a code (OOM-killed), gone."""
        return self._state()[1]

    def stopped_in_episode(self, error: BaseException) -> bool:
        """Whether `error` (from a command or a harness step) says the container stopped on its own while this
        sandbox was open: it is still there but exited (its idle process died: a root agent's ``kill -9 -1``, the
        OOM killer), not removed, not closed by us, and the daemon answered. Then the episode ended the container,
        not the infrastructure: an evaluation scores it (no test passed) instead of raising."""
        return isinstance(error, ContainerGone) and error.status == "exited" and not self._closed

    # -- lifecycle

    def close(self) -> None:
        """Remove the container (and everything running in it) and release the uid. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._kill_live_spawned(self._kill_cli)  # its container goes below; the local docker CLI goes here
            remove_container(self.name, docker_host=self.docker_host, docker=self.docker)
        finally:
            self._release_uid()

    # -- running (SandboxBase's hooks)

    async def _prepare(self, command: Command, *, env, timeout, limits, cwd):
        limits = self._begin(timeout, limits)
        inner_env = sandbox_env(self.inner_path, {**self.env, **(env or {})}, path=self.image_path)
        argv = shell_argv(command, inner_env["PATH"]) if isinstance(command, str) else list(command)
        workdir = os.path.join(self.inner_path, cwd) if cwd else self.inner_path
        self._nonce = secrets.token_hex(6)
        docker_argv = exec_argv(self.name, argv, user=self.user, workdir=workdir, env_keys=sorted(inner_env),
                                limits=limits, keep=self._keep, nonce=self._nonce, docker=self.docker,
                                host=self.docker_host)
        # the docker CLI's environment carries the values of the -e KEYs; of its own it needs only its config
        # folder (HOME is the sandbox's here): it is found by its absolute path, and -H names the daemon
        cli_env = {"DOCKER_CONFIG": os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker"), **inner_env}
        return docker_argv, cli_env, None, limits, None

    def kill_all(self, what: str = "kill every process of the container") -> None:
        """SIGKILL every process of the container but its own two (init, idle), as root, until none is left; raises
        SandboxError (ContainerGone when the container is not there or not running)."""
        with self._root_lock:
            self._cli(kill_argv(self.name, self._keep, docker=self.docker, host=self.docker_host), what=what,
                      timeout=_KILL_TIMEOUT_S)

    def _after_exit(self, pid: int, timed_out: bool) -> None:
        """Whatever the command left (the wrapper kills it too, unless the command killed the wrapper): gone, as in
        the bubblewrap sandbox, whose namespace dies with its command. A container that is gone or stopped raises
        here, so that its docker error never reads as the command's status."""
        if not self._closed:
            self.kill_all("clean up after the command")

    def _check_exit(self, rc: int, stderr: str) -> None:
        """The wrapper could not set the limits, or docker could not run it at all: SandboxError, not a status. Only
        when stderr does not start with this call's ``slime:NONCE`` line: once the wrapper printed it the command
        ran, and whatever follows (``Error response from daemon`` included) is the command's own output."""
        if stderr.startswith(f"slime:{self._nonce}\n"):
            return
        head = stderr.lstrip()
        if rc == LIMITS_ERROR and head.startswith("slime sandbox: cannot set the limits"):
            raise SandboxError(f"docker sandbox {self.name}: {head.splitlines()[0]}")
        if rc in (1, 125, 126, 127) and head.startswith(_DOCKER_ERRORS):
            error = docker_error("run the command", rc, stderr, host=self.docker_host, image=self.image)
            raise self._gone(error) if isinstance(error, ContainerGone) else error

    def _command_stderr(self, stderr: str) -> str:
        """The command's stderr: without the wrapper's ``slime:NONCE`` line."""
        m = _MARK_RE.match(stderr)
        return stderr[m.end():] if m else stderr

    def _kill_tree(self, pid: int, alive: bool = True) -> None:
        """Kill the running command in the container (every process but the container's own), then the local docker
        CLI. Never raises (a failure path calls it): what fails is logged."""
        if not self._closed:
            try:
                self.kill_all("kill the running command")
            except (SandboxError, OSError, subprocess.SubprocessError) as e:
                logger.warning("docker sandbox %s: %s", self.name, e)
        if alive:
            self._kill_cli(pid)

    @staticmethod
    def _kill_cli(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    # -- files (the harness's, as root; sync: call them in a thread from async code)

    def root_exec(self, script: str, *args: str, kill_all: bool = False, timeout: float = _CLI_TIMEOUT_S) -> bytes:
        """``bash -c SCRIPT`` as root in the container (the harness's steps: staging, clearing); its stdout. With
        `kill_all`, every process of the container but its own two is SIGKILLed first."""
        self._check_open()
        with self._root_lock:
            return self._cli(root_exec_argv(self.name, script, args, keep=self._keep if kill_all else None,
                                            docker=self.docker, host=self.docker_host),
                             what="run a setup step", timeout=timeout)

    def run_sealed(self, argv: Sequence[str], *, spec: bytes, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, limits: SandboxLimits | None = None,
                   report_cap: int = 16 << 20, alongside: bool = False) -> dict:
        """The sealed test phase in the container (:mod:`slime.agentic.sealed_supervisor`): `argv` as the sandbox
        user under a root supervisor that holds the report channel; returns the supervisor's result (exit,
        timed_out, overflow, output, report as base64). Every process of the container but its own is SIGKILLed
        afterwards. The image needs ``python3`` (the sandbox's `python`). `alongside`: the tests run while the
        agent's processes (a spawned shell host, the servers it started) still run, as Terminal-Bench runs them;
        else the sandbox must be free."""
        if alongside:
            self._check_open()
        else:
            self._check_free()
        limits = limits or self.limits
        inner_env = sandbox_env(self.inner_path, {**self.env, **(env or {})}, path=self.image_path)
        uid, gid = self.owner
        cfg = {
            "argv": list(argv), "env": inner_env, "uid": uid, "gid": gid, "spec": spec.decode(),
            "cwd": os.path.join(self.inner_path, cwd) if cwd else self.inner_path,
            "rlimits": [[res, soft, hard] for res, (soft, hard) in limits.rlimits().items()
                        if res != resource.RLIMIT_NPROC],  # the process count is the container's --pids-limit
            "timeout": limits.timeout_s, "output_cap": limits.max_output_bytes, "report_cap": report_cap,
        }
        argv_ = [*docker_cli(self.docker, self.docker_host), "exec", "-i", "-u", "0", self.name, self.python, "-c",
                 _supervisor_source()]
        if not alongside:  # alongside: the agent's spawned process holds the flag, and its end clears it
            self._busy = True
        try:
            out = self._cli(argv_, what="run the sealed tests", input=json.dumps(cfg).encode(),
                            timeout=limits.timeout_s + _CLI_TIMEOUT_S)
        finally:
            if not alongside:
                self._busy = False
            if not self._closed:
                self.kill_all("clean up after the tests")
        lines = out.decode("utf-8", "replace").strip().splitlines()
        try:
            return json.loads(lines[-1])
        except (IndexError, ValueError):
            raise SandboxError(f"docker sandbox {self.name}: the sealed test supervisor did not answer "
                               f"(is {self.python!r} in the image?): {out[-500:]!r}") from None

    def put_archive(self, dest_dir: str, data: bytes) -> None:
        """Unpack the tar `data` into `dest_dir` (an existing directory), owners and modes as in the tar."""
        self._check_open()
        self._cli(cp_in_argv(self.name, dest_dir, docker=self.docker, host=self.docker_host),
                  what=f"copy files into {dest_dir}", input=data)

    def read_file(self, path: str, max_bytes: int) -> tuple[bytes, bool] | None:
        """What is at `path` in the container: (its first `max_bytes` + 1 bytes or more, whether it is a regular
        file; nothing is read of anything else: a symlink is not followed), or None when there is nothing. Bounded:
        a larger file's copy is cut off. What to accept is the caller's (for the report: junit.report_of_file)."""
        self._check_open()
        argv = cp_out_argv(self.name, path, docker=self.docker, host=self.docker_host)
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            raise SandboxUnavailable(f"docker: cannot run {argv[0]}: {e}") from None
        try:
            data = proc.stdout.read(max_bytes + (64 << 10))  # the tar's headers and padding on top of the file
            cut = bool(proc.stdout.read(1))
            if cut:
                proc.kill()
            err = proc.stderr.read().decode("utf-8", "replace").strip()
            rc = proc.wait(timeout=_CLI_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        if rc != 0 and not cut:
            if "Could not find the file" in err or "No such container:path" in err:
                return None
            raise docker_error(f"copy {path} out of the container", rc, err, host=self.docker_host, image=self.image)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                member = tar.next()
                if member is None:
                    raise SandboxError(f"docker: copying {path} out of the container gave an empty archive")
                if not member.isreg():
                    return b"", False
                return tar.extractfile(member).read(max_bytes + 1), True
        except tarfile.TarError as e:
            raise SandboxError(f"docker: copying {path} out of the container gave no readable archive: {e}") from None


@functools.lru_cache(maxsize=1)
def _supervisor_source() -> str:
    """The sealed test phase's supervisor (slime.agentic.sealed_supervisor), sent as `python3 -c` (read once)."""
    from slime.agentic import sealed_supervisor

    return Path(sealed_supervisor.__file__).read_text()


def tar_bytes(files: Mapping[str, bytes], *, dirs: Sequence[str] = (), modes: Mapping[str, int] | None = None,
              owners: Mapping[str, tuple[int, int]] | None = None, mtime: float = 0.0) -> bytes:
    """A tar (for :meth:`DockerSandbox.put_archive`) of `dirs` (mode 0755) and `files` (relative path -> content,
    mode 0644), root-owned; `modes` and `owners` ((uid, gid)) override per path. Directories come first, in the
    order given (a parent before its children)."""
    modes, owners = modes or {}, owners or {}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, content in [*((d, None) for d in dirs), *files.items()]:
            info = tarfile.TarInfo(path.strip("/"))
            info.uid, info.gid = owners.get(path, (0, 0))
            info.mtime = mtime
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, modes.get(path, 0o755)
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), modes.get(path, 0o644)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


__all__ = [
    "DEFAULT_DOCKER_DIR",
    "DEFAULT_IMAGE",
    "DOCKER_DIR_ENV",
    "LIMITS_ERROR",
    "SANDBOX_LABEL",
    "ContainerGone",
    "DockerSandbox",
    "check_image",
    "check_user",
    "cp_in_argv",
    "cp_out_argv",
    "default_docker_dir",
    "default_docker_host",
    "docker_binary",
    "docker_call",
    "docker_cli",
    "docker_error",
    "exec_argv",
    "inspect_state_argv",
    "kill_argv",
    "parse_exports",
    "ping_argv",
    "ping_daemon",
    "prepare_argv",
    "ps_argv",
    "remove_container",
    "remove_labelled",
    "cap_container_disk",
    "rm_argv",
    "root_exec_argv",
    "run_argv",
    "tar_bytes",
    "task_image",
    "ulimit_args",
    "user_ids_argv",
]
