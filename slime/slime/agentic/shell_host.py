"""The shell host: a small program that runs *inside* a sandbox (``Sandbox.spawn``) and drives persistent shells
there through tmux, for :mod:`slime.agentic.shell_sessions` (which talks to it and treats every byte it sends
as untrusted).

Standard library only, no import from this package: its source is handed to the sandboxed interpreter with
``python -u -c`` (the repository is not mounted inside). One JSON object per line on stdin (a request), one per
line on stdout (its reply, ASCII-only JSON); requests are handled one at a time.

How a session works:

* one tmux server on a socket in a private state directory (``/tmp/.shellhost-*``, mode 0700), started with
  ``-f /dev/null`` and ``exit-empty off``; every tmux client command runs here, inside the sandbox;
* a session is ``tmux new-session -d -s sN -x W -y H -c WORKDIR bash --rcfile RC -i``. The rc file sets an empty
  prompt made only of an invisible marker (an OSC sequence with a per-host nonce, the number of the last
  command typed and ``$?``), and sets ``PAGER=cat``;
* everything the pane's programs write reaches the host raw through ``pipe-pane`` into a FIFO (read
  continuously, also between requests, so tmux never buffers without bound), kept bounded (head and tail);
* a command is written to a file and typed as `` __shellhost_seq=N; . FILE`` (sourced: ``cd``, variables and
  functions persist; heredocs, quotes, tabs and comments need no escaping; its stdin is still the terminal).
  The first marker that reports number N tells that it finished and with which exit status (markers of lines
  typed before it, e.g. a terminal's answer to a query hidden in binary output, report an older number); the
  echoed line is dropped from the output. ``C-e C-u`` before it clears whatever sat on the input line;
* output is rendered for a reader: escape sequences removed, ``\\r`` overwrites (progress bars), backspaces
  applied, invalid UTF-8 replaced.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MARKER_OSC = b"\x1b]7770;"
ECHO_HOLD_MAX = 16 * 1024  # bytes held while looking for the echo of the typed command line
CONTROL_KEYS = {"^C": "C-c", "^D": "C-d", "^Z": "C-z", "^\\": "C-\\", "\x03": "C-c", "\x04": "C-d", "\x1a": "C-z", "\x1c": "C-\\"}

# --------------------------------------------------------------------------------------------- rendering

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor moves, modes)
    # OSC (titles) ended by BEL or ST, and DCS/SOS/PM/APC strings ended by ST; bounded and within a line, so an
    # unterminated one (random bytes) loses only its introducer below, not the text after it
    r"|\x1b\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)"
    r"|\x1b[PX^_][^\x1b\n]{0,512}\x1b\\"
    r"|\x1b[ -/]*[0-~]"  # other escapes (charset selection, keypad modes, ...)
    r"|\x1b$"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _overwrite(line: str) -> str:
    """A line with carriage returns as a terminal shows it: each segment overwrites from the line's start."""
    shown = ""
    for segment in line.split("\r"):
        shown = segment + shown[len(segment) :]
    return shown


def _backspaces(line: str) -> str:
    out: list[str] = []
    for ch in line:
        if ch == "\b":
            if out:
                out.pop()
        else:
            out.append(ch)
    return "".join(out)


def render(data: bytes) -> str:
    """Raw terminal output as text: invalid UTF-8 replaced, escape sequences removed, CRLF as LF, a carriage
    return overwrites the line (progress bars show their last state), backspaces erase, other control
    characters (but tabs) dropped."""
    text = _ESCAPES.sub("", data.decode("utf-8", "replace"))
    lines = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if "\r" in line:
            line = _overwrite(line)
        if "\b" in line:
            line = _backspaces(line)
        lines.append(_CONTROLS.sub("", line))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- buffers


class Unread:
    """Output not read yet: the first `limit - limit // 2` and the last `limit // 2` bytes, the rest counted."""

    def __init__(self, limit: int):
        self.limit = max(2, int(limit))
        self.head_limit = self.limit - self.limit // 2
        self.tail_limit = self.limit // 2
        self.clear()

    def clear(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit + 65536:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def omitted(self) -> int:
        return max(0, self.total - len(self.head) - min(len(self.tail), self.tail_limit))

    def take_raw(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced, nothing else changed), a marker where bytes were
        dropped; empties the buffer."""
        omitted, total = self.omitted, self.total
        if omitted:
            tail = bytes(self.tail[len(self.tail) - self.tail_limit :])
            text = (
                bytes(self.head).decode("utf-8", "replace")
                + f"\n[... {omitted} bytes truncated ({total} in all) ...]\n"
                + tail.decode("utf-8", "replace")
            )
        else:
            text = (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        self.clear()
        return text

    def take(self) -> tuple[str, int, int]:
        """(rendered text, bytes omitted in the middle, bytes in all) and empty the buffer."""
        omitted, total = self.omitted, self.total
        tail = bytes(self.tail[len(self.tail) - self.tail_limit :]) if omitted else bytes(self.tail)
        if omitted:
            text = render(bytes(self.head)) + f"\n[... {omitted} bytes of output omitted ...]\n" + render(tail)
        else:
            text = render(bytes(self.head) + tail)
        self.clear()
        return text, omitted, total


def _marker_start_hold(data: bytes, prefix: bytes) -> int:
    """Where a marker that may continue in the next chunk starts at the end of `data` (len(data) if none)."""
    cut = data.rfind(b"\x1b", max(0, len(data) - len(prefix) - 16))
    if cut < 0:
        return len(data)
    rest = data[cut:]
    if prefix.startswith(rest) or (rest.startswith(prefix) and b"\x07" not in rest):
        return cut
    return len(data)


class Stream:
    """The raw byte stream of one pane: prompt markers taken out (they end a command, with its exit status), the
    echo of the typed command line dropped, everything else into `unread`."""

    def __init__(self, nonce: str, limit: int):
        self.prefix = MARKER_OSC + nonce.encode() + b";"
        self.unread = Unread(limit)
        self.pending = b""  # a marker cut at a chunk boundary
        self.echo_token: bytes | None = None  # set while the echo of a typed command is expected
        self.echo_hold = b""
        self.prompts = 0  # markers seen
        self.last_seq = 0  # the command number the last prompt reported (0: none of ours yet)
        self.last_status: int | None = None
        self.waiting_seq = -1  # the command whose prompt ends it

    def expect_echo(self, token: bytes) -> None:
        self._flush_hold()
        self.echo_token = token

    def _flush_hold(self) -> None:
        if self.echo_hold:
            self.unread.feed(self.echo_hold)
        self.echo_hold = b""
        self.echo_token = None

    def _emit(self, data: bytes) -> None:
        if self.echo_token is None:
            self.unread.feed(data)
            return
        self.echo_hold += data
        at = self.echo_hold.find(self.echo_token)
        if at >= 0:
            end = self.echo_hold.find(b"\n", at)
            if end < 0:
                return  # the rest of the echoed line is still to come
            start = self.echo_hold.rfind(b"\n", 0, at) + 1
            before, after = self.echo_hold[:start], self.echo_hold[end + 1 :]
            self.echo_hold, self.echo_token = b"", None
            self.unread.feed(before)
            self.unread.feed(after)
        elif len(self.echo_hold) > ECHO_HOLD_MAX:
            self._flush_hold()

    def feed(self, chunk: bytes) -> None:
        data = self.pending + chunk
        self.pending = b""
        while data:
            at = data.find(self.prefix)
            if at < 0:
                keep = _marker_start_hold(data, self.prefix)
                self._emit(data[:keep])
                self.pending = data[keep:]
                return
            end = data.find(b"\x07", at + len(self.prefix))
            if end < 0:
                self._emit(data[:at])
                self.pending = data[at:]
                if len(self.pending) > len(self.prefix) + 16:  # not a marker after all
                    self._emit(self.pending)
                    self.pending = b""
                return
            self._emit(data[:at])
            value = data[at + len(self.prefix) : end]
            data = data[end + 1 :]
            seq, _, status = value.partition(b";")
            if len(value) <= 40 and seq.isdigit() and status.isdigit():
                self.prompts += 1
                self.last_seq, self.last_status = int(seq), int(status)
                if self.last_seq == self.waiting_seq:
                    self._flush_hold()  # the command ran: nothing before this prompt is still to be echoed
            else:
                self._emit(self.prefix + value + b"\x07")

    def finish(self) -> None:
        """End of stream: whatever is held is output."""
        if self.pending:
            self._emit(self.pending)
            self.pending = b""
        self._flush_hold()


# --------------------------------------------------------------------------------------------- the host


class HostError(Exception):
    pass


class Session:
    def __init__(self, name: str, fd: int, stream: Stream, pane_pid: int):
        self.name = name
        self.fd = fd
        self.stream = stream
        self.pane_pid = pane_pid
        self.connected = False  # pipe-pane's writer has opened the FIFO (before, a read returns EOF)
        self.alive = True
        self.busy = False  # a command was typed and its prompt marker has not come yet
        self.seq = 0
        self.cmd_file: str | None = None
        self.finished_status: int | None = None  # status of a command that finished since the last read
        self.finished_unreported = False


class Host:
    def __init__(self, config: dict):
        self.workdir = config["workdir"]
        self.nonce = config["nonce"]
        self.width = int(config.get("width", 160))
        self.height = int(config.get("height", 48))
        self.limit = int(config.get("max_output_bytes", 16000))
        self.command_cpu_seconds = int(config.get("command_cpu_seconds", 0))
        self.tmux = config.get("tmux") or shutil.which("tmux") or "tmux"
        self.bash = config.get("bash") or shutil.which("bash") or "bash"
        # a directory of our own (private /tmp in the bwrap sandbox; the caller makes one in the rlimits mode)
        self.state = config.get("state_dir") or tempfile.mkdtemp(prefix=".shellhost-", dir="/tmp")
        os.chmod(self.state, 0o700)
        self.socket = os.path.join(self.state, "tmux.sock")
        self.rcfile = os.path.join(self.state, "bashrc")
        self.sessions: dict[str, Session] = {}
        self.selector = selectors.DefaultSelector()
        self._write_rc()

    # -- tmux

    def _tmux(self, *args: str, timeout: float = 10.0, check: bool = True) -> str:
        try:
            r = subprocess.run(
                [self.tmux, "-S", self.socket, "-f", "/dev/null", *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HostError(f"tmux {args[0]} did not answer within {timeout:.0f} s") from None
        if check and r.returncode != 0:
            raise HostError(f"tmux {args[0]} failed: {r.stderr.decode('utf-8', 'replace').strip()[:500]}")
        return r.stdout.decode("utf-8", "replace")

    def _write_rc(self) -> None:
        # The marker is the prompt itself: readline prints it once it has taken the terminal over (echo off), so
        # keys typed after it are echoed once, by readline. (A marker printed earlier, e.g. by PROMPT_COMMAND,
        # lets keys arrive while the terminal still echoes them itself, and the typed line then shows twice.)
        lines = [
            "PS1='\\[\\e]7770;" + self.nonce + ";${__shellhost_seq:-0};$?\\a\\]'",
            "PS2=''",
            "PROMPT_COMMAND=",
            "HISTCONTROL=ignorespace",
            "export PAGER=cat GIT_PAGER=cat MANPAGER=cat SYSTEMD_PAGER=",
            "bind 'set enable-bracketed-paste off' 2>/dev/null",
        ]
        lines.append(f"cd {shlex.quote(self.workdir)} 2>/dev/null")
        with open(self.rcfile, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self) -> None:
        self._tmux("start-server", ";", "set-option", "-g", "exit-empty", "off", ";", "set-option", "-g", "history-limit", "2000")

    # -- streams

    def _read(self, session: Session) -> None:
        if not session.alive:
            return
        try:
            chunk = os.read(session.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            session.connected = True
            session.stream.feed(chunk)
            self._note_prompts(session)
        elif session.connected:
            self._closed(session)

    def _note_prompts(self, session: Session) -> None:
        # Only the prompt after *our* command ends it: prompts of lines typed before it (e.g. a terminal's answer
        # to a query that a binary dump contained) carry an older number.
        if session.busy and session.stream.last_seq == session.seq:
            session.busy = False
            session.finished_status = session.stream.last_status
            session.finished_unreported = True
            self._drop_cmd_file(session)

    def _closed(self, session: Session) -> None:
        session.stream.finish()
        session.alive = False
        session.busy = False
        try:
            self.selector.unregister(session.fd)
        except (KeyError, ValueError):
            pass
        os.close(session.fd)
        self._drop_cmd_file(session)

    def _drop_cmd_file(self, session: Session) -> None:
        if session.cmd_file:
            try:
                os.unlink(session.cmd_file)
            except OSError:
                pass
            session.cmd_file = None

    def pump(self, timeout: float, until=None, idle: float | None = None) -> None:
        """Read every pane's output for up to `timeout` seconds; stop early when `until()` is true or, with
        `idle`, when nothing came for that long."""
        deadline = time.monotonic() + max(0.0, timeout)
        last = time.monotonic()
        while True:
            if until is not None and until():
                return
            now = time.monotonic()
            if now >= deadline or (idle is not None and now - last >= idle):
                return
            wait = deadline - now
            if idle is not None:
                wait = min(wait, idle - (now - last))
            if not self.selector.get_map():
                time.sleep(max(0.0, min(wait, 0.05)))
                continue
            for key, _ in self.selector.select(max(0.0, wait)):
                self._read(key.data)
                last = time.monotonic()

    def drain(self) -> None:
        """Whatever is already there, without waiting."""
        for _ in range(64):
            ready = self.selector.select(0) if self.selector.get_map() else []
            if not ready:
                return
            for key, _ in ready:
                self._read(key.data)

    # -- requests

    def _session(self, name: str) -> Session:
        s = self.sessions.get(name)
        if s is None:
            raise HostError(f"no session {name!r}")
        return s

    def op_new(self, req: dict) -> dict:
        name = req["session"]
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise HostError(f"bad session name {name!r}")
        if name in self.sessions and self.sessions[name].alive:
            raise HostError(f"session {name!r} exists")
        self.sessions.pop(name, None)
        fifo = os.path.join(self.state, f"{name}.out")
        try:
            os.unlink(fifo)
        except FileNotFoundError:
            pass
        os.mkfifo(fifo, 0o600)
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            out = self._tmux(
                "new-session", "-d", "-P", "-F", "#{pane_pid}", "-s", name,
                "-x", str(int(req.get("width") or self.width)), "-y", str(int(req.get("height") or self.height)),
                "-c", self.workdir, self.bash, "--rcfile", self.rcfile, "-i",
                ";", "pipe-pane", "-o", "-t", name, "exec cat > " + shlex.quote(fifo),
            )
            pane_pid = int(out.strip().splitlines()[0]) if out.strip() else 0
        except BaseException:
            os.close(fd)
            raise
        session = Session(name, fd, Stream(self.nonce, self.limit), pane_pid)
        self.sessions[name] = session
        # The first prompt's marker says the shell is ready. Until pipe-pane's writer opens the FIFO a read
        # gives EOF at once, so poll it until then, and select on it after.
        timeout = float(req.get("timeout", 10.0))
        begun = time.monotonic()
        nudged = False
        while session.stream.prompts == 0:
            if not session.connected:
                self._read(session)
                if session.connected:
                    self.selector.register(fd, selectors.EVENT_READ, session)
                else:
                    time.sleep(0.005)
            else:
                self.pump(0.05, until=lambda: session.stream.prompts > 0 or not session.alive)
            if not session.alive:
                del self.sessions[name]
                raise HostError("the shell exited at once")
            waited = time.monotonic() - begun
            if waited > timeout:
                self._kill_session(session)
                del self.sessions[name]
                raise HostError(f"the shell did not show a prompt within {timeout:.0f} s")
            if not nudged and waited > 1.0:  # its first prompt came before the pipe was open: ask for another
                self._tmux("send-keys", "-t", name, "Enter", check=False)
                nudged = True
        session.stream.unread.clear()
        return {"pane_pid": pane_pid}

    def _type(self, session: Session, text: str, enter: bool = True) -> None:
        # tmux reads an argument that ends in ";" as the end of its own command (and turns a final "\;" into ";"),
        # and one that starts with "-" as a flag: "--" ends the flags, a final ";" goes as "\;"; Enter is its
        # own call, never chained with ";"
        if text:
            literal = text[:-1] + "\\;" if text.endswith(";") else text
            self._tmux("send-keys", "-t", session.name, "-l", "--", literal)
        if enter:
            self._tmux("send-keys", "-t", session.name, "Enter")

    def _status(self, session: Session) -> dict:
        alive = session.alive
        return {"alive": alive, "busy": session.busy, "exit_status": session.stream.last_status if not session.busy else None}

    def _take(self, session: Session) -> dict:
        """New output since the last read, and the state; a session whose shell exited is forgotten once this
        has been reported."""
        if session.alive:
            self.drain()
        text, omitted, total = session.stream.unread.take()
        if not session.alive:
            self.sessions.pop(session.name, None)
        finished = session.finished_unreported
        session.finished_unreported = False
        return {
            "output": text,
            "omitted_bytes": omitted,
            "total_bytes": total,
            "finished": finished,
            "finished_status": session.finished_status if finished else None,
            **self._status(session),
        }

    def op_exec(self, req: dict) -> dict:
        session = self._session(req["session"])
        if not session.alive:  # it exited since the last call: report that (and its last output), run nothing
            return {"not_run": True, **self._take(session)}
        self.drain()
        if session.busy:
            raise HostError("busy")
        session.seq += 1
        self._drop_cmd_file(session)
        path = os.path.join(self.state, f"{session.name}.c{session.seq}")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(req["command"] + "\n")
        session.cmd_file = path
        # the number is set on the typed line (always valid syntax), so the prompt after it reports it even when
        # the file does not parse, and the file's line numbers are the command's own
        typed = f" __shellhost_seq={session.seq}; . {shlex.quote(path)}"
        session.stream.expect_echo(typed.encode())
        session.stream.waiting_seq = session.seq
        session.busy = True
        session.finished_unreported = False
        # C-e C-u first: whatever sits on the input line (e.g. a terminal's answer to a query that some binary
        # output contained) is discarded instead of being glued before the command
        self._tmux("send-keys", "-t", session.name, "C-e", "C-u", ";", "send-keys", "-t", session.name, "-l", typed, ";",
                   "send-keys", "-t", session.name, "Enter")
        if not req.get("block", True):
            self.pump(0.0)
            return {"started": True, **self._status(session)}
        self.pump(float(req.get("timeout", 20.0)), until=lambda: not session.busy or not session.alive)
        return self._take(session)

    def op_view(self, req: dict) -> dict:
        session = self._session(req["session"])
        self.pump(float(req.get("settle", 0.05)), idle=0.02)
        reply = self._take(session)
        if session.alive and reply["output"].strip() == "":
            # a full-screen program (an editor, a pager) draws with escapes: show its screen instead
            screen = self._tmux("display-message", "-p", "-t", session.name, "#{alternate_on}", check=False).strip()
            if screen == "1":
                reply["screen"] = self._tmux("capture-pane", "-p", "-J", "-t", session.name, check=False)
        return reply

    def op_write(self, req: dict) -> dict:
        session = self._session(req["session"])
        if not session.alive:
            return {"key": None, **self._take(session)}
        self.drain()
        text = req["text"]
        key = CONTROL_KEYS.get(text.strip()) if text.strip() else None
        if key is not None:
            self._tmux("send-keys", "-t", session.name, key)
        else:
            self._type(session, text, enter=bool(req.get("enter", True)))
        self.pump(float(req.get("max_wait", 5.0)), until=lambda: not session.busy or not session.alive, idle=float(req.get("idle", 0.5)))
        return {"key": key, **self._take(session)}

    def _kill_session(self, session: Session) -> None:
        self._tmux("kill-session", "-t", session.name, check=False)
        if session.pane_pid > 1:
            for pid in _session_members(session.pane_pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if session.alive:
            self.pump(0.5, until=lambda: not session.alive)
            if session.alive:
                self._closed(session)

    def op_kill(self, req: dict) -> dict:
        session = self._session(req["session"])
        self._kill_session(session)
        return self._take(session)

    def op_write_file(self, req: dict) -> dict:
        """Write `content` to `path` (relative to the work directory, or absolute inside it), creating parent
        directories. Refused when the path, or what its existing parts resolve to (symlinks), leaves the work
        directory; the sandbox confines the write anyway (this process sees only the sandbox)."""
        path = req["path"]
        wd = os.path.normpath(self.workdir)
        root = os.path.realpath(wd)

        def inside(p: str, top: str) -> bool:
            return p == top or p.startswith(top.rstrip("/") + "/")

        target = os.path.normpath(os.path.join(wd, path))
        if not inside(target, wd) or target == wd:
            raise HostError(f"{path} is outside the work directory {self.workdir}")
        existing = os.path.dirname(target)
        while not os.path.lexists(existing) and existing != wd:  # the nearest part that exists (a link counts)
            existing = os.path.dirname(existing)
        if not inside(os.path.realpath(existing), root):
            raise HostError(f"{path}: {existing} resolves to {os.path.realpath(existing)}, outside the work directory {self.workdir}")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        real = os.path.join(os.path.realpath(os.path.dirname(target)), os.path.basename(target))
        if os.path.islink(real):
            real = os.path.realpath(real)
        if not inside(real, root):
            raise HostError(f"{path} resolves to {real}, outside the work directory {self.workdir}")
        data = req["content"].encode("utf-8", "surrogatepass")
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return {"path": real, "bytes": len(data)}

    def op_run(self, req: dict) -> dict:
        """A command outside the tmux sessions, in the same namespace (e.g. tests while the agent's servers
        still run): bounded output, killed at the timeout."""
        argv = req["argv"] if req.get("argv") else ["bash", "-lc", req["command"]]
        limit = int(req.get("max_output_bytes", self.limit))
        proc = subprocess.Popen(
            argv, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        captures = {proc.stdout.fileno(): Unread(limit), proc.stderr.fileno(): Unread(limit)}
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        for fd in captures:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, None)
        deadline = time.monotonic() + float(req.get("timeout", 60.0))
        timed_out = False
        try:
            while captures and any(self.selector.get_map().get(fd) for fd in captures):
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in self.selector.select(min(left, 1.0)):
                    if key.data is not None:
                        self._read(key.data)
                        continue
                    try:
                        chunk = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if chunk:
                        captures[key.fd].feed(chunk)
                    else:
                        self.selector.unregister(key.fd)
        finally:
            for fd in captures:
                if self.selector.get_map().get(fd):
                    self.selector.unregister(fd)
            if timed_out or proc.poll() is None:
                for pid in [proc.pid, *_session_members(proc.pid)]:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            status = proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        out, err = captures[out_fd], captures[err_fd]
        return {
            "exit_status": status,
            "timed_out": timed_out,
            "stdout": out.take_raw(),
            "stderr": err.take_raw(),
        }

    def op_list(self, req: dict) -> dict:
        self.drain()
        return {"sessions": {name: self._status(s) for name, s in self.sessions.items()}}

    def shutdown(self) -> None:
        self._tmux("kill-server", check=False)
        for s in list(self.sessions.values()):
            if s.alive:
                self._closed(s)
        shutil.rmtree(self.state, ignore_errors=True)


def _session_members(sid: int) -> list[int]:
    """Processes whose session id is `sid` (this sandbox's /proc), but not `sid` itself."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == sid:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 3 and fields[3] == str(sid).encode():
            out.append(int(entry))
    return out


OPS = {
    "new": Host.op_new,
    "exec": Host.op_exec,
    "view": Host.op_view,
    "write": Host.op_write,
    "kill": Host.op_kill,
    "write_file": Host.op_write_file,
    "run": Host.op_run,
    "list": Host.op_list,
}


def _send(obj: dict) -> None:
    view = memoryview((json.dumps(obj, ensure_ascii=True) + "\n").encode())
    while view:
        view = view[os.write(1, view) :]


def handle(host: Host, line: bytes) -> str | None:
    rid = None
    try:
        req = json.loads(line)
        if not isinstance(req, dict):
            raise HostError("a request must be a JSON object")
        rid = req.get("id")
        if req.get("op") == "shutdown":
            _send({"id": rid, "ok": True})
            return "shutdown"
        handler = OPS.get(req.get("op"))
        if handler is None:
            raise HostError(f"unknown op {req.get('op')!r}")
        _send({"id": rid, "ok": True, **handler(host, req)})
    except HostError as e:
        _send({"id": rid, "ok": False, "error": str(e)})
    except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as e:
        _send({"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"})
    return None


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    host = Host(config)
    try:
        host.start()
    except HostError as e:
        _send({"id": 0, "ok": False, "error": str(e)})
        return 1
    _send({"id": 0, "ok": True, "hello": "shell-host", "pid": os.getpid(), "state": host.state})
    os.set_blocking(0, False)
    host.selector.register(0, selectors.EVENT_READ, "stdin")
    buf = b""
    try:
        while True:
            for key, _ in host.selector.select(None):
                if key.data != "stdin":
                    host._read(key.data)
                    continue
                try:
                    chunk = os.read(0, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    return 0
                buf += chunk
                if b"\n" not in buf:
                    continue
                host.selector.unregister(0)  # while requests run, the streams are pumped without stdin
                try:
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if line.strip() and handle(host, line) == "shutdown":
                            return 0
                finally:
                    host.selector.register(0, selectors.EVENT_READ, "stdin")
    finally:
        host.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
