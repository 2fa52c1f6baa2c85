"""Conversation methods by name: the three method folders' methods, and plugins as `module.path:factory`.

    load_method("combine")                        # openclaw-combine/openclaw_combine_method.py: Combine
    load_method("my_method:build", margin=0.5)     # build(margin=0.5) from a method folder on sys.path

This is the one place the method names are written: the trainer's flag, the proxy and the launch scripts
accept whatever this registry resolves. Each name lives in its method folder (the folder is the method); the
registry imports its module from the first folder on the Python path that has one (a fork on
`--extra-python-path` runs its own copy), and otherwise from the folder in this checkout (`$SLIME_ROOT`, else the
checkout the `slime` package was installed from), which it then also puts on the path of the processes started
from here (the trainer ranks load the method's loss from the same folder).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from slime.conversation.methods.base import check_method
from slime.utils.plugins import import_factory

# name -> (method folder, module in it, class); the module names are unique across the method folders
BUILT_IN_METHODS = {
    "rl": ("openclaw-rl", "openclaw_rl_method", "BinaryRL"),
    "opd": ("openclaw-opd", "openclaw_opd_method", "OnPolicyDistillation"),
    "opd_topk": ("openclaw-opd", "openclaw_opd_method", "OnPolicyDistillationTopK"),
    "combine": ("openclaw-combine", "openclaw_combine_method", "Combine"),
    "combine_topk": ("openclaw-combine", "openclaw_combine_method", "CombineTopK"),
}
# the names the OpenClaw-RL usage guide and its configs use for the same methods
ALIASES = {"binary_rl": "rl", "binary": "rl", "on_policy_distillation": "opd", "combined": "combine"}
DEFAULT_METHOD = "rl"


def checkout_root() -> Path:
    """Where the method folders are: `$SLIME_ROOT`, else the checkout this `slime` package lives in."""
    root = os.environ.get("SLIME_ROOT")
    return Path(root).resolve() if root else Path(__file__).resolve().parents[4]


def _add_folder_last(folder: Path) -> None:
    """After everything already on the path (a fork's folder wins), here and in every child process."""
    entry = str(folder)
    if entry not in sys.path:
        sys.path.append(entry)
        importlib.invalidate_caches()
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if entry not in inherited:
        os.environ["PYTHONPATH"] = os.pathsep.join(inherited + [entry])


def import_method_module(folder: str, module: str):
    """`module` from the Python path, else from `folder` of the checkout; a clear error when neither has it. The
    folder it came from goes on the path of child processes too, so the trainer ranks and the proxy load the same
    copy (and the loss it names, from the same folder)."""
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        path = checkout_root() / folder
        if not (path / f"{module}.py").is_file():
            raise ValueError(f"{module}.py not found on the Python path nor in {path} (the {folder}/ method folder): "
                             "set SLIME_ROOT to the checkout, or put a folder that has it on --extra-python-path")
        _add_folder_last(path)
        loaded = importlib.import_module(module)
    if getattr(loaded, "__file__", None):
        _add_folder_last(Path(loaded.__file__).resolve().parent)
    return loaded


def built_in_class(name: str):
    """The class a built-in name resolves to (from the folder that provides it)."""
    folder, module, cls = BUILT_IN_METHODS[name]
    return getattr(import_method_module(folder, module), cls)


def is_plugin(ref: str) -> bool:
    return ":" in ref


def canonical_method_name(ref: str) -> str:
    """The registry name of a built-in (aliases and '-' spellings accepted), or a plugin reference unchanged."""
    ref = (ref or "").strip()
    if is_plugin(ref):
        return ref
    key = ref.lower().replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in BUILT_IN_METHODS:
        raise ValueError(f"unknown conversation method {ref!r}; expected {methods_help()}")
    return key


def methods_help() -> str:
    return (", ".join(BUILT_IN_METHODS) + f" (aliases: {', '.join(f'{a}={n}' for a, n in ALIASES.items())}), "
            "or a plugin 'module.path:factory' from a method folder")


def load_method(ref: str, **options):
    """A method instance: a built-in by name, or `factory(**options)` of a plugin."""
    name = canonical_method_name(ref)
    if not is_plugin(name):
        if options:
            raise ValueError(f"built-in method {name!r} takes no options (got {sorted(options)})")
        return built_in_class(name)()
    factory = import_factory(name, "method", "is its folder on --extra-python-path?")
    try:
        method = factory(**options)
    except TypeError as exc:
        raise ValueError(f"plugin method {ref!r}: bad options {sorted(options)}: {exc}") from None
    return check_method(method, ref)
