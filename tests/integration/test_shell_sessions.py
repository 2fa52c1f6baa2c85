"""Persistent shell sessions with real tmux in a real bubblewrap sandbox (slime.agentic.shell_sessions), and the
sandbox's long-lived process API they stand on (Sandbox.spawn).

Each test asserts a concrete outcome: state that persists across calls, independent sessions, background commands
and their output, input to a waiting program, the block timeout and an interrupt, head/tail truncation, binary
output, file writes confined to the work directory (symlinks included), no process of the sandbox uid left after
close, a host killed or misbehaving (garbage, silence, a flood, death) giving a clear error and never a hang, and
the per-call latency. Skipped with the reason where this host has no bwrap sandbox or no tmux."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import time
from pathlib import Path

import pytest
from slime.agentic import sandbox as sb
from slime.agentic.sandbox import Sandbox, SandboxError, uid_processes
from slime.agentic.shell_sessions import ShellSessions

_CAP = sb.detect_capability("bwrap")
pytestmark = [
    pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def arun(coro):
    return asyncio.run(coro)


def assert_no_processes(*uids):
    left = uid_processes(uids)
    assert left == [], f"processes of sandbox uids survived: {left}"


async def with_shell(base_dir, body, *, mount_at="/app", **kwargs):
    """A sandbox and its sessions around `body(box, shell)`; afterwards nothing of the uid runs and the sandbox
    takes commands again."""
    async with Sandbox(base_dir=base_dir, mount_at=mount_at) as box:
        shell = ShellSessions(box, **kwargs)
        try:
            await shell.start()
            result = await body(box, shell)
        finally:
            await shell.aclose()
        assert_no_processes(box.uid)
        r = await box.run("echo free")
        assert r.stdout == "free\n", r
        return result


async def call(shell, name, **arguments):
    return await shell.call_tool(name, arguments)


# ---------------------------------------------------------------------------------------------- spawn

ECHO_UPPER = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"


def test_spawn_gives_pipes_holds_the_sandbox_and_dies_on_kill(base_dir):
    async def body():
        async with Sandbox(base_dir=base_dir) as box:
            proc = await box.spawn([sb.sys.executable, "-u", "-c", ECHO_UPPER])
            proc.stdin.write(b"hello\n")
            await proc.stdin.drain()
            assert await asyncio.wait_for(proc.stdout.readline(), 10) == b"HELLO\n"
            with pytest.raises(SandboxError, match="already running"):
                await box.run("true")
            with pytest.raises(SandboxError, match="already running"):
                await box.spawn("sleep 1")
            assert proc.alive and uid_processes([box.uid])
            await proc.kill()
            assert not proc.alive and proc.finished and proc.returncode == -9
            assert_no_processes(box.uid)
            assert (await box.run("echo again")).stdout == "again\n"

    arun(body())


def test_a_crashed_spawned_process_frees_the_sandbox_and_leaves_nothing(base_dir):
    async def body():
        async with Sandbox(base_dir=base_dir) as box:
            proc = await box.spawn("sleep 1000 & (setsid sleep 1000 &); echo bye >&2; exit 3")
            assert await asyncio.wait_for(proc.wait(), 10) == 3
            assert proc.stderr_text() == "bye\n" and not proc.timed_out
            assert_no_processes(box.uid)
            assert (await box.run("echo free")).stdout == "free\n"

    arun(body())


def test_a_spawned_process_is_killed_at_the_end_of_its_lifetime(base_dir):
    async def body():
        async with Sandbox(base_dir=base_dir) as box:
            start = time.monotonic()
            proc = await box.spawn("sleep 1000 & sleep 1000", timeout=1)
            await asyncio.wait_for(proc.wait(), 10)
            assert proc.timed_out and proc.returncode == -9 and time.monotonic() - start < 5
            assert_no_processes(box.uid)

    arun(body())


def test_closing_the_sandbox_kills_its_spawned_process(base_dir):
    async def body():
        box = Sandbox(base_dir=base_dir)
        proc = await box.spawn("sleep 1000 & sleep 1000")
        uid = box.uid
        await box.aclose()
        assert_no_processes(uid)
        await asyncio.wait_for(proc.wait(), 10)
        assert not os.path.exists(box.path)

    arun(body())


def test_a_spawned_process_does_not_outlive_its_event_loop(base_dir):
    box = Sandbox(base_dir=base_dir)
    try:

        async def forget_it():
            await box.spawn("sleep 1000 & sleep 1000")
            for _ in range(100):  # until the shell and both sleeps run
                if len(uid_processes([box.uid])) >= 3:
                    break
                await asyncio.sleep(0.05)

        arun(forget_it())  # asyncio.run cancels the supervisor at the end: it kills the sandbox
        assert_no_processes(box.uid)
        assert box.run_sync("echo free").stdout == "free\n"
    finally:
        box.close()


# ---------------------------------------------------------------------------------------------- sessions


def test_state_persists_across_calls_and_sessions_are_independent(base_dir):
    async def body(box, shell):
        assert await call(shell, "shell_exec", id="a", command="pwd") == "/app"
        await call(shell, "shell_exec", id="a", command="mkdir -p src && cd src && export EXPORTED=1 && PLAIN=2")
        await call(shell, "shell_exec", id="a", command="greet() { echo \"hi $1\"; }")
        assert await call(shell, "shell_exec", id="a", command="pwd; echo $EXPORTED $PLAIN; greet bob") == "/app/src\n1 2\nhi bob"
        # a second session starts in the work dir and sees none of it
        out = await call(shell, "shell_exec", id="b", command="pwd; echo ${EXPORTED:-unset} ${PLAIN:-unset}; type greet 2>&1 | head -1")
        assert out == "/app\nunset unset\nbash: type: greet: not found"
        await call(shell, "shell_exec", id="b", command="cd /tmp")
        assert await call(shell, "shell_exec", id="a", command="pwd") == "/app/src"
        assert sorted(shell.sessions) == ["a", "b"]
        # files are shared (one work directory); the exit status of a failing command is reported
        assert await call(shell, "shell_exec", id="b", command="ls /app") == "src"
        assert await call(shell, "shell_exec", id="a", command="false") == "Command finished with no output (exit status 1)."
        assert await call(shell, "shell_exec", id="a", command="true") == "Command finished with no output."
        # quotes, tabs, heredocs and comments reach bash as written
        cmd = "cat <<'EOF'\n\t'single' \"double\" $HOME # kept\nEOF\n# a comment"
        assert await call(shell, "shell_exec", id="a", command=cmd) == "\t'single' \"double\" $HOME # kept"

    arun(with_shell(base_dir, body))


def test_non_blocking_command_and_view(base_dir):
    async def body(box, shell):
        out = await call(shell, "shell_exec", id="bg", command="for i in 1 2 3; do echo tick $i; sleep 0.4; done", block=False)
        assert out.startswith("Started in session 'bg'")
        await asyncio.sleep(0.3)
        first = await call(shell, "shell_view", id="bg")
        assert first.startswith("tick 1") and first.endswith("[The command in session 'bg' is still running.]")
        await asyncio.sleep(1.5)
        rest = await call(shell, "shell_view", id="bg")
        assert rest.endswith("tick 3\n[The command finished with exit status 0.]")
        assert "tick 1" not in rest  # only what is new
        assert await call(shell, "shell_view", id="bg") == "[No new output]\n[Session 'bg' is idle: no command is running.]"
        assert (await call(shell, "shell_view", id="nope")).startswith("[TOOL_ERROR] shell_view: no session 'nope'")

    arun(with_shell(base_dir, body))


def test_write_to_a_process_waiting_for_input(base_dir):
    async def body(box, shell):
        out = await call(shell, "shell_exec", id="a", command="read -p 'name? ' N; echo \"hello $N\"", timeout=1)
        assert out.startswith("name? \n[The command is still running after 1 s")
        out = await call(shell, "shell_write_to_process", id="a", command="bob")
        assert out == "bob\nhello bob\n[The command finished with exit status 0.]"
        # a Python REPL started in the background, driven line by line
        await call(shell, "shell_exec", id="py", command="python3 -q", block=False)
        await asyncio.sleep(0.5)
        assert "42" in await call(shell, "shell_write_to_process", id="py", command="print(6 * 7)")
        assert (await call(shell, "shell_write_to_process", id="py", command="exit()")).endswith("[The command finished with exit status 0.]")
        # nothing is running now: input is refused (it would run as a command)
        out = await call(shell, "shell_write_to_process", id="py", command="ls")
        assert out.startswith("[TOOL_ERROR] shell_write_to_process: no command is running in session 'py'")

    arun(with_shell(base_dir, body))


def test_a_command_that_never_ends_hits_the_block_timeout_and_the_session_recovers(base_dir):
    async def body(box, shell):
        start = time.monotonic()
        out = await call(shell, "shell_exec", id="a", command="echo started; sleep 1000")
        took = time.monotonic() - start
        assert out.startswith("started\n[The command is still running after 1 s; it goes on in session 'a'.")
        assert "'^C'" in out and 1.0 <= took < 4.0
        busy = await call(shell, "shell_exec", id="a", command="echo next")
        assert busy.startswith("[TOOL_ERROR] shell_exec: session 'a' is still running a command.")
        assert (await call(shell, "shell_exec", id="other", command="echo meanwhile")) == "meanwhile"
        interrupted = await call(shell, "shell_write_to_process", id="a", command="^C")
        assert interrupted.endswith("[The command finished with exit status 130.]")
        assert await call(shell, "shell_exec", id="a", command="echo next") == "next"
        # a per-call timeout, capped at max_block_timeout
        start = time.monotonic()
        out = await call(shell, "shell_exec", id="a", command="sleep 1000", timeout=10_000)
        assert "still running after 2 s" in out and time.monotonic() - start < 5
        await shell.interrupt("a")
        # shell_kill_process stops a session; the id then starts a fresh one
        await call(shell, "shell_exec", id="a", command="cd /tmp; sleep 1000", block=False)
        assert (await call(shell, "shell_kill_process", id="a")).endswith("Session 'a' stopped.")
        assert await call(shell, "shell_exec", id="a", command="pwd") == "/app"

    arun(with_shell(base_dir, body, block_timeout=1.0, max_block_timeout=2.0))


def test_huge_output_is_cut_at_head_and_tail(base_dir):
    async def body(box, shell):
        out = await call(shell, "shell_exec", id="a", command="seq 1 200000")
        assert len(out) <= 2000 + 100
        head, _, tail = out.partition("bytes of output omitted ...]")
        assert head.startswith("1\n2\n3\n") and tail.endswith("199999\n200000")
        omitted = int(head.rsplit("[... ", 1)[1])
        # counted in the terminal's bytes (it ends lines with CR LF)
        assert omitted == len("".join(f"{i}\r\n" for i in range(1, 200001)).encode()) - 2000
        assert await call(shell, "shell_exec", id="a", command="echo ok") == "ok"

    arun(with_shell(base_dir, body, max_output_chars=2000))


def test_binary_output_is_replaced_not_crashing_and_the_terminal_keeps_working(base_dir):
    async def body(box, shell):
        # seeded, so a failure can be replayed byte for byte
        binary = "python3 -c 'import random, sys; random.seed(7); sys.stdout.buffer.write(random.randbytes(300000))'"
        out = await call(shell, "shell_exec", id="a", command=binary + "; printf '\\n\\xff\\xfe\\x00end\\n'")
        assert "\ufffd" in out and out.endswith("end") and len(out) <= 5000 + 100
        # binary dumps contain terminal queries whose answers land on the input line: the next command still runs
        for i in range(3):
            assert await call(shell, "shell_exec", id="a", command=f"echo still ok {i}") == f"still ok {i}"

    arun(with_shell(base_dir, body, max_output_chars=5000))


def test_write_file_is_confined_to_the_work_dir(base_dir, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")

    async def body(box, shell):
        assert await call(shell, "shell_write_content_to_file", file_path="src/app.py", content="print('hi')\n") == "Wrote 12 bytes to /app/src/app.py."
        assert (await call(shell, "shell_write_content_to_file", file_path="/app/deep/er/x.txt", content="ü\n")).startswith("Wrote 3 bytes")
        assert await call(shell, "shell_exec", id="a", command="python3 src/app.py; cat deep/er/x.txt") == "hi\nü"
        assert (Path(box.path) / "src" / "app.py").read_text() == "print('hi')\n"
        for path in ("../x", "/etc/x", "/tmp/x", str(outside), "src/../../x"):
            out = await call(shell, "shell_write_content_to_file", file_path=path, content="x")
            assert out.startswith("[TOOL_ERROR] shell_write_content_to_file: file_path") and "outside" in out, out
        # symlinks made by the agent that point out of the work dir: refused, and the host file is untouched
        await call(shell, "shell_exec", id="a", command=f"ln -s /etc/passwd pw; ln -s / root; ln -s {outside} host; ln -s {tmp_path} hostdir")
        for path in ("pw", "root/tmp/x", "host", "hostdir/outside.txt", "hostdir/new.txt"):
            out = await call(shell, "shell_write_content_to_file", file_path=path, content="pwned")
            assert out.startswith("[TOOL_ERROR] shell_write_content_to_file:") and "outside the work directory" in out, out
        # the write happens inside the sandbox: even a link the checks let through could only reach the sandbox's view
        assert outside.read_text() == "untouched" and not (tmp_path / "new.txt").exists()
        assert await call(shell, "shell_exec", id="a", command="cat /etc/passwd | head -1") == "root:x:0:0:root:/root:/bin/bash"

    arun(with_shell(base_dir, body))


def test_closing_leaves_no_process_and_the_sandbox_runs_commands_again(base_dir):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="sleep 1000 & (setsid sleep 1000 &); nohup sleep 1000 >/dev/null 2>&1 &")
        await call(shell, "shell_exec", id="b", command="sleep 1000", block=False)
        await call(shell, "shell_exec", id="a", command="echo kept > kept.txt")
        assert len(uid_processes([box.uid])) >= 8  # host, tmux, 2 shells, 2 pipes, 4 sleeps
        return box.path

    path = arun(with_shell(base_dir, body, mount_at=None))  # with_shell asserts no process is left and runs again
    assert not os.path.exists(path)


def test_the_shell_exiting_closes_the_session(base_dir):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="cd /tmp")
        out = await call(shell, "shell_exec", id="a", command="exit 4")
        assert out.endswith("[The shell of session 'a' exited; the session is closed. shell_exec with this id starts a fresh one.]")
        assert shell.sessions == []
        assert await call(shell, "shell_exec", id="a", command="pwd") == "/app"

    arun(with_shell(base_dir, body))


def test_a_host_killed_by_the_agent_is_restarted_until_the_cap(base_dir):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="echo before > f.txt")
        out = await call(shell, "shell_exec", id="a", command="kill -9 -1")
        assert out.startswith("[TOOL_ERROR] shell_exec: the shell environment died during the call")
        out = await call(shell, "shell_exec", id="a", command="cat f.txt")
        assert out == "[The shell environment was restarted; earlier sessions ('a') and their processes are gone.]\nbefore"
        out = await call(shell, "shell_exec", id="a", command="kill -9 -1")
        assert "died" in out
        out = await call(shell, "shell_exec", id="a", command="echo x")
        assert out.startswith("[TOOL_ERROR] shell_exec: the shell environment died 2 times; it is not restarted again")
        assert shell.restarts == 1

    arun(with_shell(base_dir, body, max_restarts=1))


@pytest.mark.parametrize(
    "program, expected",
    [
        ("print('not json at all')", "malformed reply to 'start' (not JSON"),
        ("print('[1, 2]')", "malformed reply to 'start' (not a reply to request 0)"),
        ("import time; time.sleep(1000)", "did not answer 'start' within 1 s"),
        ("import sys; sys.stdout.write('x' * 5_000_000); sys.stdout.flush()", "longer than"),
        ("import os; os._exit(7)", "exit status 7"),
    ],
)
def test_a_misbehaving_host_gives_a_clear_error_and_never_a_hang(base_dir, program, expected):
    async def body():
        async with Sandbox(base_dir=base_dir) as box:
            shell = ShellSessions(box, host_program=program, start_timeout=1.0, max_output_chars=1000)
            start = time.monotonic()
            out = await call(shell, "shell_exec", id="a", command="echo hi")
            assert out.startswith("[TOOL_ERROR] shell_exec: ") and expected in out, out
            assert time.monotonic() - start < 8
            await shell.aclose()
            assert_no_processes(box.uid)
            assert (await box.run("echo free")).stdout == "free\n"

    arun(body())


def test_a_host_that_answers_garbage_later_is_stopped(base_dir):
    # introduces itself, then answers the first request with a reply for another id, then with nothing
    program = (
        "import json, sys\n"
        "print(json.dumps({'id': 0, 'ok': True, 'hello': 'shell-host'}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'id': 999, 'ok': True}), flush=True)\n"
    )

    async def body():
        async with Sandbox(base_dir=base_dir) as box:
            async with ShellSessions(box, host_program=program, max_restarts=0) as shell:
                out = await call(shell, "shell_exec", id="a", command="echo hi")
                assert out == "[TOOL_ERROR] shell_exec: the shell host sent a malformed reply to 'new' (not a reply to request 1)"
                assert (await call(shell, "shell_exec", id="a", command="echo hi")).startswith("[TOOL_ERROR] shell_exec: the shell environment died 1 times")
            assert_no_processes(box.uid)

    arun(body())


def test_run_shares_the_namespace_with_the_sessions(base_dir):
    server = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 8765)); s.listen(); print('listening', flush=True); s.accept()[0].sendall(b'pong')"
    client = "import socket; s = socket.create_connection(('127.0.0.1', 8765), timeout=5); print(s.recv(10).decode())"

    async def body(box, shell):
        await call(shell, "shell_exec", id="srv", command=f"python3 -c \"{server}\"", block=False)
        for _ in range(50):
            if "listening" in await call(shell, "shell_view", id="srv"):
                break
            await asyncio.sleep(0.1)
        r = await shell.run(["python3", "-c", client], timeout=10)
        assert (r.exit_code, r.stdout) == (0, "pong\n"), r
        r = await shell.run("echo out; echo err >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
        start = time.monotonic()
        r = await shell.run("sleep 1000", timeout=1)
        assert r.timed_out and r.exit_code == 137 and time.monotonic() - start < 4

    arun(with_shell(base_dir, body))


def test_a_full_screen_program_is_shown_as_its_screen(base_dir):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="seq 1 500 > long.txt")
        await call(shell, "shell_exec", id="v", command="less long.txt", block=False)
        await asyncio.sleep(0.5)
        await call(shell, "shell_view", id="v")  # what less drew, as a stream
        out = await call(shell, "shell_view", id="v")  # nothing new: the screen as it stands
        assert out.startswith("[No new output; a full-screen program shows:]\n1\n2\n3\n")
        assert (await call(shell, "shell_write_to_process", id="v", command="q")).endswith("[The command finished with exit status 0.]")

    arun(with_shell(base_dir, body))


def test_the_weaker_rlimits_mode_also_runs_sessions(base_dir):
    async def body():
        async with Sandbox(base_dir=base_dir, isolation="rlimits") as box:
            async with ShellSessions(box, python="/usr/bin/python3") as shell:
                await call(shell, "shell_exec", id="a", command="cd sub 2>/dev/null || mkdir sub && cd sub; X=5")
                assert await call(shell, "shell_exec", id="a", command="basename $PWD; echo $X; id -u") == f"sub\n5\n{box.uid}"
                state = shell._state_dir
                assert state and os.stat(state).st_uid == box.uid
            assert not os.path.exists(state)
            assert_no_processes(box.uid)

    arun(body())


def test_latency_of_a_blocking_echo(base_dir, capsys):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="true")
        times = []
        for i in range(30):
            start = time.perf_counter()
            assert await call(shell, "shell_exec", id="a", command=f"echo {i}") == str(i)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        await call(shell, "shell_exec", id="fresh", command="true")
        first = time.perf_counter() - start
        return statistics.median(times), max(times), first

    p50, worst, first = arun(with_shell(base_dir, body))
    with capsys.disabled():
        print(f"\nshell_exec latency (blocking echo): p50 {p50 * 1000:.1f} ms, max {worst * 1000:.1f} ms; first call of a new session {first * 1000:.1f} ms")
    assert p50 < 0.5


def test_a_cancelled_call_and_a_close_during_a_call_do_not_hang(base_dir):
    async def body(box, shell):
        task = asyncio.ensure_future(call(shell, "shell_exec", id="a", command="sleep 0.5; echo late"))
        await asyncio.sleep(0.2)
        task.cancel()  # its reply comes later and is skipped by the next call
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await call(shell, "shell_exec", id="b", command="echo next") == "next"
        out = await call(shell, "shell_view", id="a")
        assert out == "late\n[The command finished with exit status 0.]" or out.startswith("[No new output]"), out
        # closing while a blocking call waits: the call ends with an error at once, nothing is left
        task = asyncio.ensure_future(call(shell, "shell_exec", id="a", command="sleep 1000", timeout=60))
        await asyncio.sleep(0.3)
        start = time.monotonic()
        await shell.aclose()
        out = await asyncio.wait_for(task, 5)
        assert out.startswith("[TOOL_ERROR] shell_exec:") and time.monotonic() - start < 5, out
        assert_no_processes(box.uid)

    arun(with_shell(base_dir, body))


def test_a_shell_that_exited_between_calls_is_replaced_on_the_next_command(base_dir):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="cd /tmp; sleep 0.3; echo bye; exit", block=False)
        await asyncio.sleep(1.0)
        out = await call(shell, "shell_exec", id="a", command="pwd")
        assert out == "bye\n[The shell of session 'a' had exited; a fresh one runs this command.]\n/app", out
        await call(shell, "shell_exec", id="b", command="sleep 0.3; exit", block=False)
        await asyncio.sleep(1.0)
        assert (await call(shell, "shell_view", id="b")).endswith("[The shell of session 'b' exited; the session is closed. shell_exec with this id starts a fresh one.]")
        assert shell.sessions == ["a"]

    arun(with_shell(base_dir, body))


def test_typed_input_keeps_a_final_semicolon_and_a_leading_dash(base_dir):
    """tmux reads an argument ending in ";" as its own separator and one starting with "-" as a flag."""
    async def body(box, shell):
        for text in ("SELECT 1;", "-5", "a\\;", ";"):
            out = await call(shell, "shell_exec", id="a", command="IFS= read -r L; printf 'got[%s]\\n' \"$L\"", timeout=1)
            assert "[The command is still running after 1 s" in out
            out = await call(shell, "shell_write_to_process", id="a", command=text)
            assert f"got[{text}]" in out, (text, out)

    arun(with_shell(base_dir, body))


def test_a_host_that_died_between_calls_is_restarted_before_the_next_command(base_dir):
    async def body(box, shell):
        await call(shell, "shell_exec", id="a", command="echo before > f.txt")
        await call(shell, "shell_exec", id="a", command="(sleep 0.3; kill -9 -1) > /dev/null 2>&1 &")
        deadline = time.monotonic() + 10
        while shell.host is not None and shell.host.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        out = await call(shell, "shell_exec", id="a", command="cat f.txt")
        assert out == "[The shell environment was restarted; earlier sessions ('a') and their processes are gone.]\nbefore"

    arun(with_shell(base_dir, body))
