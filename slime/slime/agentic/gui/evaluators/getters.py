"""OSWorld's result and expected-value getters, by name (``desktop_env/evaluators/getters``), over the VM server's
API. A getter takes the episode (:class:`EvalEnv`) and its config from the task and returns what the metric reads:

    vm_file            {path, dest, multi, gives}   the desktop's file copied to the episode's cache directory as
                                                    `dest`: its local path (None when the desktop has no such file)
    vm_command_line    {command, shell}             the command's stdout on the desktop
    vm_command_error   {command, shell}             its stderr
    rule               {rules}                      the rules, as written
    cloud_file         {path: url, dest, multi, gives}   the expected file from the user's file cache
                                                    (file_cache.py: ``<cache>/<task id>/<dest>``), never downloaded
    cache_file         {path}                       a file a setup step saved in the episode's cache directory
    vlc_config         {dest}                       VLC's preferences (``~/.config/vlc/vlcrc``) as `dest`: its
                                                    local path, None when VLC has not written it
    gimp_config_file   {file_name, dest}            a file of GIMP 2.10's profile (``~/.config/GIMP/2.10/``), the
                                                    same way

`multi`: `path` and `dest` are lists; `gives` picks which of them reach the metric (one: the path, several: a list).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..desktop import HOME  # the desktop's home (OSWorld's VMs: the same path)
from ..file_cache import FileCache
from ..vm_client import VMClient


class EvaluationError(RuntimeError):
    """A getter cannot give the value the metric needs (a file the cache lacks, a malformed config)."""


@dataclass
class EvalEnv:
    """What the getters see of an episode: the desktop, the episode's own cache directory, the user's file cache."""

    client: VMClient
    cache_dir: Path
    task_id: str = ""
    file_cache: FileCache | None = None


def _plain(name: Any, what: str) -> str:
    name = str(name)
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise EvaluationError(f"{what} {name!r} is not a plain file name")
    return name


def _pairs(config: dict) -> tuple[list, list, set[int]]:
    if config.get("multi", False):
        paths, dests = list(config["path"]), list(config["dest"])
    else:
        paths, dests = [config["path"]], [config.get("dest") or Path(str(config["path"])).name]
    return paths, dests, set(config.get("gives", [0]))


def _given(values: list):
    return values[0] if len(values) == 1 else values


async def get_vm_file(env: EvalEnv, config: dict):
    paths, dests, gives = _pairs(config)
    out = []
    for i, (path, dest) in enumerate(zip(paths, dests)):
        local = env.cache_dir / _plain(dest, "vm_file dest")
        data = await env.client.get_file(str(path))
        if data is not None:
            local.write_bytes(data)
        if i in gives:
            out.append(str(local) if data is not None else None)
    return _given(out)


async def get_vm_command_line(env: EvalEnv, config: dict):
    result = await env.client.execute(config["command"], shell=bool(config.get("shell", False)),
                                      timeout=config.get("timeout"))
    return result.get("output")


async def get_vm_command_error(env: EvalEnv, config: dict):
    result = await env.client.execute(config["command"], shell=bool(config.get("shell", False)),
                                      timeout=config.get("timeout"))
    return result.get("error")


async def get_rule(env: EvalEnv, config: dict):
    return config["rules"]


async def get_cloud_file(env: EvalEnv, config: dict):
    urls, dests, gives = _pairs(config)
    if env.file_cache is None:
        raise EvaluationError(f"cloud_file {dests[0]} ({urls[0]}) needs a file cache (--cache DIR / file_cache=DIR): "
                              "this machine does not download")
    out = []
    for i, (url, dest) in enumerate(zip(urls, dests)):
        cached = env.file_cache.cloud_path(env.task_id, _plain(dest, "cloud_file dest"))
        if not cached.is_file():
            raise EvaluationError(f"the file cache has no {cached} (it stands for {url})")
        if i in gives:
            out.append(str(cached))
    return _given(out)


async def get_cache_file(env: EvalEnv, config: dict):
    path = env.cache_dir / _plain(config["path"], "cache_file path")
    if not path.is_file():
        raise EvaluationError(f"cache_file {config['path']!r}: no setup step saved it")
    return str(path)


async def get_vlc_config(env: EvalEnv, config: dict):
    return await get_vm_file(env, {"path": f"{HOME}/.config/vlc/vlcrc", "dest": config.get("dest", "vlcrc")})


async def get_gimp_config_file(env: EvalEnv, config: dict):
    name = _plain(config["file_name"], "gimp_config_file file_name")
    return await get_vm_file(env, {"path": f"{HOME}/.config/GIMP/2.10/{name}", "dest": config.get("dest", name)})


GETTERS: dict[str, Callable[[EvalEnv, dict], Awaitable[Any]]] = {
    "vm_file": get_vm_file, "vm_command_line": get_vm_command_line, "vm_command_error": get_vm_command_error,
    "rule": get_rule, "cloud_file": get_cloud_file, "cache_file": get_cache_file, "vlc_config": get_vlc_config,
    "gimp_config_file": get_gimp_config_file}

__all__ = ["GETTERS", "EvalEnv", "EvaluationError", "get_cache_file", "get_cloud_file", "get_gimp_config_file",
           "get_rule", "get_vlc_config", "get_vm_command_error", "get_vm_command_line", "get_vm_file"]
