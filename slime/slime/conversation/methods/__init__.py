"""Conversation methods: what a judged turn becomes.

`base` (the protocol: `Decision`, `TurnSignals`, `Method`), `registry` (names, aliases, `module:factory` plugins;
the methods themselves live in their folders: `openclaw-rl/openclaw_rl_method.py`, `openclaw-opd/openclaw_opd_method.py`,
`openclaw-combine/openclaw_combine_method.py`), `evaluator` (runs the judges and the teacher a method uses). Names are imported on first use: the registry alone must stay cheap (no torch), since launchers
and config tools consult it.
"""

import importlib

_EXPORTS = {
    "ConversationMethod": "base", "Decision": "base", "Method": "base", "TurnSignals": "base",
    "Outcome": "evaluator", "TeacherScorer": "evaluator", "TurnEvaluator": "evaluator",
    "BUILT_IN_METHODS": "registry", "DEFAULT_METHOD": "registry", "canonical_method_name": "registry",
    "load_method": "registry", "methods_help": "registry", "built_in_class": "registry",
    "checkout_root": "registry",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
