"""A task's setup (and its evaluator's postconfig) steps, run as OSWorld's SetupController runs them
(``desktop_env/controllers/setup.py``), over the VM server's API.

Step types and what a failure does (as OSWorld; its controller raises for some and only logs for others):

    launch            {command, shell}            a failed launch is logged; the episode goes on
    execute, command  {command, shell, stdout, stderr, until, timeout}
                                                  the exit status is not checked (logged when not 0); placeholders
                                                  {SCREEN_WIDTH}, {SCREEN_HEIGHT}, {SCREEN_WIDTH_HALF},
                                                  {SCREEN_HEIGHT_HALF}, {CLIENT_PASSWORD} are replaced with the
                                                  desktop's values; `stdout`/`stderr` save the output under that
                                                  name in the episode's cache directory (the `cache_file` getter
                                                  reads it); `until` {returncode | stdout | stderr} repeats the
                                                  command until it holds (at most 5 failures, as OSWorld; and at
                                                  most MAX_UNTIL_S, where OSWorld would wait forever)
    sleep             {seconds}                   (at most MAX_SLEEP_S)
    open              {path}                      a failure stops the setup (SetupError)
    activate_window, close_window {window_name, strict, by_class}   a failure is logged
    upload_file       {files: [{local_path | content, path}]}       a failure stops the setup
    download          {files: [{url, path}]}      the file from the local file cache (file_cache.py), uploaded to
                                                  `path`; a file the cache lacks stops the setup, naming it and URL
    wait_window       {window_name, timeout}      ours: until a window of that name shows, else SetupError
    chrome_open_tabs  {urls_to_open}              each URL in a new tab of the browser on Chrome's DevTools port
                                                  (1337, started as google-chrome when none answers; the desktop's
                                                  ``slime-cdp``), the fresh browser's blank tab closed; a browser
                                                  that never answers is logged
    chrome_close_tabs {urls_to_close}             every tab whose URL holds one of these, closed

OSWorld's other step types (``googledrive``, ``login``, ...) load, and a task that has one
is reported as not runnable here with the reason (:data:`NOT_HERE`); any other type is refused when the task loads.
Our own extension ``check: true`` on an execute step makes a non-zero exit status stop the setup.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .file_cache import FileCache, MissingCachedFile
from .vm_client import VMClient, VMError

logger = logging.getLogger(__name__)

MAX_SLEEP_S = 60.0
MAX_UNTIL_FAILURES = 5  # OSWorld gives up an `until` loop after five failed requests
MAX_UNTIL_S = 120.0  # and never on a condition that does not come true: here it is logged and the setup goes on
RUNNABLE_STEPS = ("launch", "execute", "command", "sleep", "open", "activate_window", "close_window", "upload_file",
                  "download", "wait_window", "chrome_open_tabs", "chrome_close_tabs")
# OSWorld's step types this desktop does not run, with the reason a task that uses one is not runnable here
NOT_HERE = {
    "googledrive": "prepares a Google Drive account (network)",
    "login": "logs into a website (network)",
    "update_browse_history": "rewrites Chrome's history database",
    "execute_with_verification": "not implemented here",
    "change_wallpaper": "not implemented here",
    "proxy": "configures a proxy from a proxy pool (network)",
    "tidy_desktop": "not implemented by OSWorld either",
    "act": "not implemented by OSWorld either",
    "replay": "not implemented by OSWorld either",
}
SETUP_TYPES = RUNNABLE_STEPS + tuple(NOT_HERE)
DEFAULT_CLIENT_PASSWORD = "password"  # OSWorld's VM user's password: what {CLIENT_PASSWORD} stands for by default


class SetupError(RuntimeError):
    """A setup step failed in a way that stops the setup (the task cannot start as written)."""


@dataclass(frozen=True)
class DesktopFacts:
    """The values OSWorld's placeholders stand for on this desktop."""

    width: int
    height: int
    client_password: str = DEFAULT_CLIENT_PASSWORD

    def substitute(self, text: str) -> str:
        for key, value in (("{CLIENT_PASSWORD}", self.client_password), ("{SCREEN_WIDTH_HALF}", str(self.width // 2)),
                           ("{SCREEN_HEIGHT_HALF}", str(self.height // 2)), ("{SCREEN_WIDTH}", str(self.width)),
                           ("{SCREEN_HEIGHT}", str(self.height))):
            text = text.replace(key, value)
        return text


class SetupController:
    """Runs a task's steps on one desktop. `task_dir`: where upload_file's local paths are; `file_cache`: the
    downloads (None: a download step fails naming the file); `cache_dir`: the episode's own directory (outputs
    saved by `stdout`/`stderr`, files the getters fetch); `facts`: the placeholders' values."""

    def __init__(self, client: VMClient, *, task_id: str = "", task_dir: Path | None = None,
                 file_cache: FileCache | None = None, cache_dir: Path | None = None, facts: DesktopFacts | None = None):
        self.client, self.task_id, self.task_dir = client, task_id, task_dir
        self.file_cache, self.cache_dir, self.facts = file_cache, cache_dir, facts
        self.warnings: list[str] = []  # what failed and was let go, as OSWorld logs it

    async def setup(self, steps: list[dict]) -> None:
        for i, step in enumerate(steps):
            kind, parameters = step["type"], step.get("parameters", {})
            if kind in NOT_HERE:
                raise SetupError(f"setup step {i} ({kind}) cannot run here: {NOT_HERE[kind]}")
            if kind not in RUNNABLE_STEPS:  # the loader refuses these; a step list made elsewhere may not be checked
                raise SetupError(f"setup step {i}: unknown type {kind!r}")
            try:
                await getattr(self, f"_{kind}")(**parameters)
            except SetupError as e:
                raise SetupError(f"setup step {i} ({kind}) failed: {e}") from None
            except (VMError, OSError, ValueError, KeyError, TypeError) as e:
                raise SetupError(f"setup step {i} ({kind}) failed: {e}") from None

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        logger.warning("gui setup (%s): %s", self.task_id or "task", message)

    async def _facts(self) -> DesktopFacts:
        if self.facts is None:
            width, height = await self.client.screen_size()
            self.facts = DesktopFacts(width, height)
        return self.facts

    async def _launch(self, command, shell: bool = False) -> None:
        if not command:
            raise SetupError("empty command to launch")
        if not shell and isinstance(command, str) and len(command.split()) > 1:
            command = command.split()  # as OSWorld: a string command without a shell is split at spaces
        try:
            await self.client.launch(command, shell=bool(shell))
        except VMError as e:
            self._warn(f"launch {command!r} failed: {e}")

    async def _execute(self, command, shell: bool = False, stdout: str = "", stderr: str = "",
                       until: dict | None = None, timeout: float | None = None, check: bool = False) -> None:
        if not command:
            raise SetupError("empty command to execute")
        facts = await self._facts()
        command = facts.substitute(command) if isinstance(command, str) else [facts.substitute(str(c)) for c in command]
        until, failures = until or {}, 0
        deadline = asyncio.get_running_loop().time() + MAX_UNTIL_S
        while True:
            try:
                result = await self.client.execute(command, shell=bool(shell), timeout=timeout)
            except VMError as e:
                result, failures = None, failures + 1
                self._warn(f"execute {command!r} failed: {e}")
            if result is not None:
                self._save(stdout, result.get("output", ""))
                self._save(stderr, result.get("error", ""))
                if result.get("returncode") not in (0, None):
                    if check:
                        raise SetupError(f"exit {result.get('returncode')}: {(result.get('error') or '')[-500:]}")
                    self._warn(f"execute {command!r} exited {result.get('returncode')}: "
                               f"{(result.get('error') or '')[-300:]}")
            if not until or failures >= MAX_UNTIL_FAILURES or (result is not None and _holds(until, result)):
                return
            if asyncio.get_running_loop().time() > deadline:
                self._warn(f"execute {command!r}: {until} did not hold within {MAX_UNTIL_S:g} s")
                return
            await asyncio.sleep(0.3)

    _command = _execute

    def _save(self, name: str, text: str) -> None:
        if not name:
            return
        if self.cache_dir is None:
            raise SetupError(f"no cache directory to save {name!r} in")
        (self.cache_dir / _plain(name)).write_text(text or "", encoding="utf-8")

    async def _sleep(self, seconds: float = 1) -> None:
        await asyncio.sleep(min(float(seconds), MAX_SLEEP_S))

    async def _open(self, path: str, window_name: str | None = None, timeout_seconds: float = 30) -> None:
        if not path:
            raise SetupError("open: no path")
        await self.client.open_file(path, window_name=window_name, timeout_seconds=float(timeout_seconds))

    async def _activate_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        await self._window(self.client.activate_window, "activate_window", window_name, strict, by_class)

    async def _close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        await self._window(self.client.close_window, "close_window", window_name, strict, by_class)

    async def _window(self, call, what: str, window_name: str, strict: bool, by_class: bool) -> None:
        if not window_name:
            raise SetupError(f"{what}: no window_name")
        try:
            await call(window_name, strict=bool(strict), by_class=bool(by_class))
        except VMError as e:
            self._warn(f"{what} {window_name!r} failed: {e}")

    async def _upload_file(self, files: list[dict]) -> None:
        for f in files:
            if "content" in f:
                data = f["content"].encode("utf-8")
            else:
                local = Path(f["local_path"])
                if self.task_dir is None or local.is_absolute() or ".." in local.parts:
                    raise ValueError(f"local_path {f['local_path']!r} must be relative to the task's folder")
                data = (self.task_dir / local).read_bytes()
            await self.client.upload(f["path"], data)

    async def _download(self, files: list[dict]) -> None:
        for f in files:
            url, path = f.get("url"), f.get("path")
            if not url or not path:
                raise SetupError(f"download: invalid url ({url!r}) or path ({path!r})")
            if self.file_cache is None:
                raise SetupError(f"download of {url} needs a file cache (--cache DIR / file_cache=DIR): this machine "
                                 "does not download")
            cached = self.file_cache.download_path(self.task_id, url, path)
            try:
                data = self.file_cache.read(cached, url)
            except MissingCachedFile as e:
                raise SetupError(str(e)) from None
            await self.client.upload(path, data)

    async def _chrome_open_tabs(self, urls_to_open: list[str]) -> None:
        """Each URL in a new tab of the browser answering on the DevTools port (started as google-chrome when none
        does), the blank tab a fresh browser opens with closed: the tabs are then the URLs, in order."""
        await self._cdp("open", urls_to_open)

    async def _chrome_close_tabs(self, urls_to_close: list[str]) -> None:
        """Close every tab whose URL holds one of these."""
        await self._cdp("close", urls_to_close)

    async def _cdp(self, command: str, urls: list[str]) -> None:
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise SetupError(f"chrome_{command}_tabs needs a list of URLs")
        result = await self.client.execute(["slime-cdp", command, *urls], timeout=90)
        if result.get("returncode") != 0:  # OSWorld logs a browser that does not answer and goes on
            self._warn(f"chrome_{command}_tabs {urls!r} failed: {(result.get('error') or result.get('output'))!r}")

    async def _wait_window(self, window_name: str, timeout: float = 30) -> None:
        await wait_window(self.client, window_name, float(timeout))


def _plain(name: str) -> str:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise SetupError(f"{name!r} is not a plain file name")
    return name


def _holds(until: dict[str, Any], result: dict) -> bool:
    return ("returncode" in until and result.get("returncode") == until["returncode"]
            or "stdout" in until and until["stdout"] in (result.get("output") or "")
            or "stderr" in until and until["stderr"] in (result.get("error") or ""))


async def wait_window(client: VMClient, name: str, timeout: float = 30.0) -> None:
    """Until a visible window whose name holds `name` exists (xdotool on the desktop); SetupError after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await client.execute(["xdotool", "search", "--onlyvisible", "--name", name], timeout=10)
        if result.get("output", "").strip():
            return
        if loop.time() > deadline:
            raise SetupError(f"no window named {name!r} within {timeout:g} s")
        await asyncio.sleep(0.2)


def new_cache_dir(base: str | os.PathLike | None = None) -> Path:
    """A private directory for one episode's saved outputs and fetched files."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="slime-gui-cache-", dir=base))
    os.chmod(path, 0o700)
    return path


__all__ = ["DEFAULT_CLIENT_PASSWORD", "NOT_HERE", "RUNNABLE_STEPS", "SETUP_TYPES", "DesktopFacts", "SetupController",
           "SetupError", "new_cache_dir", "wait_window"]
