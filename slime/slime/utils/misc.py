"""Upstream slime's `slime.utils.misc` names, for method folders ported from OpenClaw-RL (PORTING.md):
`load_function` (a dotted path to the object it names) and `SingletonMeta` (one instance per class)."""

from __future__ import annotations

import threading
from typing import Any

from slime.utils.hooks import load_function as _load_hook


def load_function(path: str) -> Any:
    """The object at the dotted path `pkg.module.name` (a clear error naming the path when it does not import)."""
    return _load_hook(path, "load_function")


class SingletonMeta(type):
    """Classes with this metaclass are built once per process; later calls return that instance (arguments
    ignored), as upstream's `GenerateState(args)` is used from every generate function."""

    _instances: dict = {}
    _lock = threading.Lock()

    def __call__(cls, *args, **kwargs):
        with cls._lock:
            if cls not in cls._instances:
                cls._instances[cls] = super().__call__(*args, **kwargs)
            return cls._instances[cls]

    @classmethod
    def clear_all_instances(mcs) -> None:
        with mcs._lock:
            mcs._instances.clear()


__all__ = ["SingletonMeta", "load_function"]
