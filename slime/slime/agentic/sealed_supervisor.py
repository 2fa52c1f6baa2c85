"""The sealed test phase's supervisor inside a Docker container: the container's side of
:func:`slime.agentic.sealed_report.run_sealed`, where no descriptor can be handed in from the host.

It runs as root (``docker exec -u 0 ... python3 -c SOURCE``), so no process of the sandbox user can signal, trace or
read it. From the JSON on its stdin (argv, environment, working directory, user, rlimits, timeout and the spec the
plugin reads) it creates the socket pair the pytest plugin reports through and a pipe for the command's output,
starts the command in a session of its own as the sandbox user (groups dropped, rlimits set, ``$SLIME_SEALED_FD``
naming the inherited end), reads both until the command ended (plus a short grace for the last records), SIGKILLs
the command's session when the timeout passes, and prints one JSON line: the exit status (shell convention: 128+N
for a signal), whether it timed out, the output's tail and the report (base64). Only this process writes to its
stdout, the docker exec stream; the command's output goes through the pipe.

Standard library only: it runs under the image's python3.
"""

import base64
import json
import os
import resource
import select
import signal
import socket
import sys
import time

GRACE_S = 2.0


def _start(cfg, inside, out_w):
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    fd = inside.fileno()
    os.set_inheritable(fd, True)
    for res, soft, hard in cfg["rlimits"]:
        resource.setrlimit(res, (soft, hard))
    os.setgroups([])
    os.setgid(cfg["gid"])
    os.setuid(cfg["uid"])
    os.chdir(cfg["cwd"])
    env = dict(cfg["env"])
    env["SLIME_SEALED_FD"] = str(fd)
    os.execvpe(cfg["argv"][0], cfg["argv"], env)


def main():
    cfg = json.loads(sys.stdin.buffer.read())
    host, inside = socket.socketpair()
    host.sendall(cfg["spec"].encode())
    host.shutdown(socket.SHUT_WR)
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _start(cfg, inside, out_w)
        except BaseException as e:  # noqa: BLE001 - anything: report it as the command's output
            os.write(2, ("slime sealed supervisor: cannot start the tests: %s\n" % e).encode())
        os._exit(127)
    os.close(out_w)
    inside.close()
    out, report = bytearray(), bytearray()
    out_cap, report_cap = int(cfg["output_cap"]), int(cfg["report_cap"])
    overflow = False
    readers = {out_r: out, host.fileno(): report}
    deadline = time.monotonic() + float(cfg["timeout"])
    status, timed_out, grace_end = None, False, None
    while True:
        now = time.monotonic()
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status, grace_end = st, now + GRACE_S
            elif now > deadline:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                status, grace_end = os.waitpid(pid, 0)[1], now + GRACE_S
        if status is not None and (not readers or time.monotonic() > grace_end):
            break
        ready, _, _ = select.select(list(readers), [], [], 0.05)
        for fd in ready:
            try:
                data = os.read(fd, 1 << 16)
            except ConnectionResetError:  # a writer that went away resetting the channel: its end, as EOF would be
                data = b""
            if not data:
                del readers[fd]
                continue
            buf = readers[fd]
            if buf is report:
                if len(report) + len(data) > report_cap:
                    overflow = True
                else:
                    report += data
            else:
                out += data
                if len(out) > 2 * out_cap:
                    del out[:-out_cap]
    code = os.waitstatus_to_exitcode(status)
    sys.stdout.write(json.dumps({
        "exit": code if code >= 0 else 128 - code, "timed_out": timed_out, "overflow": overflow,
        "output": bytes(out[-out_cap:]).decode("utf-8", "replace"), "report": base64.b64encode(bytes(report)).decode(),
    }) + "\n")


if __name__ == "__main__":
    main()
