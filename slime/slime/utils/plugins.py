"""Plugins named on the command line as `module.path:factory`: judges, hint judges and conversation methods."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def import_factory(spec: str, what: str, hint: str = "") -> Callable:
    """The callable `factory` of `module.path:factory` (or `module.path.factory`). A ValueError names `what` and
    adds `hint` (e.g. the built-in kinds) when the module does not import."""
    module_name, _, attribute = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"plugin {what} {spec!r} must look like 'module.path:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"plugin {what} {spec!r}: cannot import module {module_name!r} ({exc})"
                         + (f"; {hint}" if hint else "")) from exc
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ValueError(f"plugin {what} {spec!r}: {module_name} has no callable {attribute!r}")
    return factory
