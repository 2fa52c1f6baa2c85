"""Desktops a GUI lease drives, behind one interface (a :class:`~.vm_client.VMClient` once started):

* :class:`LocalDesktop`: the local provider. One bubblewrap sandbox per desktop (an unprivileged uid of its own, no
  network, a private /tmp) holding its own Xvfb display, the apps and the VM server (:mod:`.vm_server`), which the
  host reaches on a unix socket it made itself, in a directory of its own that is never bound into the sandbox (the
  server inherits the listening descriptor), so no agent can swap the socket for a link to another service of the
  host. The scratch home (``/home/user``
  inside) is a fresh directory per desktop: a reset is a new desktop, so nothing of an episode survives into the
  next. Closing it kills every process the sandbox's uid started (Xvfb, browsers, apps) and removes the home.
* :class:`OSWorldVM`: an OSWorld VM on a cluster, reached at ``http://<ip>:5000``; its lifecycle (create, revert to
  snapshot) is the cloud provider's and not run here: it only attaches to a VM that is up.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic import fs_tree
from slime.agentic import sandbox as sb

from .vm_client import VMClient, VMError

HERE = Path(__file__).resolve().parent
APPS_DIR = HERE.parents[3] / "gui-rl" / "apps"  # the shipped apps
INNER_APPS = "/opt/slime-gui/apps"
INNER_SERVER = "/opt/slime-gui/vm_server.py"
# the desktop's own commands, first on its PATH: `sudo` (checks the password, runs as the desktop's user),
# `google-chrome` (chromium with CHROMIUM's flags) and `slime-cdp` (the DevTools endpoint for the Chrome getters)
INNER_BIN = "/opt/slime-gui/bin"
HOME = "/home/user"
# Chrome's DevTools port on OSWorld's image (its Chrome setup steps and getters use it: bin/slime-cdp), on the
# desktop's own loopback
CDP_PORT = 1337
# what /setup/open_file runs per suffix (argv prefix; the path is appended)
CHROMIUM = ["chromium", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-features=Translate", "--test-type", f"--user-data-dir={HOME}/.config/chromium",
            "--window-position=0,0", f"--remote-debugging-port={CDP_PORT}"]
# OSWorld's VM opens files with xdg-open: its office files in LibreOffice, which picks Calc, Writer or Impress by
# the file (installed by `scripts/setup_gui.sh --osworld-apps`; without it opening one fails and says so), and a PDF
# in LibreOffice Draw (no PDF viewer is installed; the window is named after the file as evince's is)
LIBREOFFICE = ["libreoffice", "--norestore"]
OFFICE_SUFFIXES = (".xlsx", ".xls", ".ods", ".csv", ".docx", ".doc", ".odt", ".rtf", ".pptx", ".ppt", ".odp", ".pdf")
DEFAULT_OPENERS = {".html": CHROMIUM, ".htm": CHROMIUM,
                   ".txt": ["python", f"{INNER_APPS}/notes.py"], ".md": ["python", f"{INNER_APPS}/notes.py"],
                   **{suffix: LIBREOFFICE for suffix in OFFICE_SUFFIXES}, ".mp4": ["vlc"], ".mp3": ["vlc"]}
# GSettings keep their values in a key file in the desktop's home: without a D-Bus session and dconf, the default
# backend takes a `gsettings set` (exit status 0) and forgets it, so a task's settings could never be read back.
# The XDG directories are named because the sandbox's uid has no passwd entry: LibreOffice looks its home up there
# and, finding none, tries to make its profile in /libreoffice ("User installation could not be completed").
# PYTHONSAFEPATH: `python -c` and `python script.py` do not put the working directory (the home, which the agent
# can write) first on the module path, so a planted `json.py` or `pyautogui.py` cannot answer for the evaluator's
# and the postconfig's `python -c` commands.
DESKTOP_ENV = {"XDG_SESSION_TYPE": "x11", "DISPLAY": ":0", "GSETTINGS_BACKEND": "keyfile", "PYTHONSAFEPATH": "1",
               "XDG_CONFIG_HOME": f"{HOME}/.config", "XDG_CACHE_HOME": f"{HOME}/.cache",
               "XDG_DATA_HOME": f"{HOME}/.local/share"}


def desktop_limits(lifetime_s: float = 6 * 3600.0) -> sb.SandboxLimits:
    """Limits for a desktop: a browser needs a large address space (its allocators reserve far more than they use)
    and many threads; the lifetime bounds the whole lease. What the desktop's processes really use together is held
    by the sandbox's group: 3 GiB of memory (chromium with a few tabs uses about 1 GiB) and 2 CPUs."""
    return sb.SandboxLimits(timeout_s=lifetime_s, cpu_seconds=int(lifetime_s), memory_bytes=1 << 40,
                            max_processes=2048, open_files=8192, tmp_size_bytes=1 << 30,
                            file_size_bytes=1 << 30, memory_budget_bytes=3 << 30, cpu_budget=2.0)


@dataclass
class LocalDesktop:
    base_dir: str | None = None
    width: int = 1280
    height: int = 720
    apps_dir: str | os.PathLike = APPS_DIR
    openers: dict = field(default_factory=lambda: dict(DEFAULT_OPENERS))
    window_manager: str | None = None
    terminal_shortcut: bool = False  # Ctrl+Alt+T opens a terminal (OSWorld's image does; it gives the agent a shell)
    client_password: str = "password"  # what the desktop's sudo accepts (OSWorld's {CLIENT_PASSWORD})
    limits: sb.SandboxLimits = field(default_factory=desktop_limits)
    start_timeout_s: float = 30.0

    def __post_init__(self):
        self.box: sb.Sandbox | None = None
        self.proc: sb.SandboxProcess | None = None
        self.client: VMClient | None = None
        self.socket_dir: str | None = None

    @property
    def home(self) -> Path | None:
        """The scratch home on this host (``/home/user`` inside)."""
        return Path(self.box.path) if self.box is not None else None

    async def start(self) -> LocalDesktop:
        # the host makes the listening socket, in a directory of its own (root's, 0700, never bound into the sandbox),
        # and hands the server its descriptor: nothing of the sandbox can replace the path the host connects through
        # (a short host path: a unix socket's path is limited to 107 bytes, and lease directories are deep)
        self.socket_dir = tempfile.mkdtemp(prefix="sgui-", dir="/tmp")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(os.path.join(self.socket_dir, "vm.sock"))
            listener.listen(64)
            binds = [(str(HERE / "vm_server.py"), INNER_SERVER), (str(HERE / "bin"), INNER_BIN)]
            if self.apps_dir and Path(self.apps_dir).is_dir():
                binds.append((str(Path(self.apps_dir).resolve()), INNER_APPS))
            self.box = await asyncio.to_thread(
                sb.Sandbox, None, limits=self.limits, base_dir=self.base_dir, mount_at=HOME, ro_binds=binds,
                env={"SLIME_GUI_OPENERS": json.dumps(self.openers), **DESKTOP_ENV,
                     "PATH": f"{INNER_BIN}:{sb.sandbox_env('/')['PATH']}", "SLIME_GUI_CHROMIUM": json.dumps(CHROMIUM),
                     "SLIME_GUI_SUDO_PASSWORD": self.client_password})
            argv = [self.box.python, "-u", INNER_SERVER, "--listen-fd", str(listener.fileno()),
                    "--width", str(self.width), "--height", str(self.height)]
            if self.window_manager:
                argv += ["--window-manager", self.window_manager]
            if self.terminal_shortcut:
                argv.append("--terminal-shortcut")
            self.proc = await self.box.spawn(argv, pass_fds=(listener.fileno(),))
            listener.close()
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), self.start_timeout_s)
            except asyncio.TimeoutError:
                line = b""
            if line.strip() != b"ready":
                await self.proc.kill()
                raise VMError(f"the desktop did not start: {line[-500:]!r} {self.proc.stderr_text()[-2000:]}")
            self.client = VMClient(uds=os.path.join(self.socket_dir, "vm.sock"))
            return self
        except BaseException:
            listener.close()
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
        if self.proc is not None:
            try:
                await self.proc.kill()
            except Exception:  # already gone
                pass
            self.proc = None
        if self.box is not None:
            await self.box.aclose()
        if self.socket_dir:
            await asyncio.to_thread(fs_tree.remove_tree, self.socket_dir)
            self.socket_dir = None

    def resources(self) -> dict:
        return {"uid": self.box.uid if self.box else None, "path": str(self.home) if self.box else None,
                "socket_dir": self.socket_dir}


@dataclass
class OSWorldVM:
    """An OSWorld VM that is up, at `url` (``http://<ip>:5000``). Written to OSWorld's documented VM server API; not
    run here (no VM image on these machines). Creating and reverting VMs is the cloud provider's job (upstream:
    Volcengine's RunInstances / DeleteInstance), outside this class."""

    url: str

    def __post_init__(self):
        self.client: VMClient | None = None

    async def start(self) -> OSWorldVM:
        self.client = VMClient(self.url)
        await self.client.screen_size()  # fails fast when nothing answers
        return self

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    def resources(self) -> dict:
        return {"url": self.url}


__all__ = ["APPS_DIR", "CHROMIUM", "DEFAULT_OPENERS", "HOME", "INNER_APPS", "LocalDesktop", "OSWorldVM",
           "desktop_limits"]
