"""Conversation methods: what a judged turn becomes.

`base` (the protocol: `Decision`, `TurnSignals`, `Method`), `builtin` (Binary RL, OPD, Combine and their top-K
variants), `registry` (names, aliases, `module:factory` plugins), `evaluator` (runs the judges and the teacher a
method uses). Names are imported on first use: the registry alone must stay cheap (no torch), since launchers
and config tools consult it.
"""

import importlib

_EXPORTS = {
    "ConversationMethod": "base", "Decision": "base", "Method": "base", "TurnSignals": "base",
    "BinaryRL": "builtin", "Combine": "builtin", "CombineTopK": "builtin", "OnPolicyDistillation": "builtin",
    "OnPolicyDistillationTopK": "builtin",
    "Outcome": "evaluator", "TeacherScorer": "evaluator", "TurnEvaluator": "evaluator",
    "BUILT_IN_METHODS": "registry", "DEFAULT_METHOD": "registry", "canonical_method_name": "registry",
    "load_method": "registry", "methods_help": "registry",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
