"""Conversation methods by name: the built-ins, and plugins as `module.path:factory`.

    load_method("combine")                        # a built-in
    load_method("my_method:build", margin=0.5)     # build(margin=0.5) from a method folder on sys.path

This is the one place the method names are written: the trainer's flag, the proxy and the launch scripts
accept whatever this registry resolves.
"""

from __future__ import annotations

from slime.conversation.methods.base import check_method
from slime.utils.plugins import import_factory
from slime.conversation.methods.builtin import BinaryRL, Combine, CombineTopK, OnPolicyDistillation, \
    OnPolicyDistillationTopK

BUILT_IN_METHODS = {cls.name: cls for cls in (BinaryRL, OnPolicyDistillation, OnPolicyDistillationTopK, Combine,
                                              CombineTopK)}
# the names the OpenClaw-RL usage guide and its configs use for the same methods
ALIASES = {"binary_rl": "rl", "binary": "rl", "on_policy_distillation": "opd", "combined": "combine"}
DEFAULT_METHOD = BinaryRL.name


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
        return BUILT_IN_METHODS[name]()
    factory = import_factory(name, "method", "is its folder on --extra-python-path?")
    try:
        method = factory(**options)
    except TypeError as exc:
        raise ValueError(f"plugin method {ref!r}: bad options {sorted(options)}: {exc}") from None
    return check_method(method, ref)
