"""Build a judge from its configured name: a built-in kind, a "+"-joined cascade, or a plugin factory.

    build_judge("llm", engine_url="http://127.0.0.1:30000", m=3)
    build_judge("rules+embedding", threshold=0.4)      # options go to the judges that accept them
    build_judge("my_pkg.judges:make_judge", foo=1)      # plugin: make_judge(**options) -> Judge
    build_hint_judge("rules+llm", engine_url=...)       # hint judges (OPD): rules first, then the LLM
"""

from __future__ import annotations

import inspect

from slime.conversation.judges.base import Judge
from slime.utils.plugins import import_factory

__all__ = ["BUILTIN_KINDS", "HINT_KINDS", "build_hint_judge", "build_judge"]


BUILTIN_KINDS = ("llm", "rules", "embedding")


def _judge_class(kind: str) -> type:
    # Imported on demand: the embedding judge pulls in sentence-transformers, the LLM judge httpx.
    if kind == "llm":
        from slime.conversation.judges.llm import LLMJudge

        return LLMJudge
    if kind == "rules":
        from slime.conversation.judges.rules import RulesJudge

        return RulesJudge
    from slime.conversation.judges.embedding import EmbeddingJudge

    return EmbeddingJudge


def _build_builtin(kind: str, options: dict) -> Judge:
    if kind == "llm" and not options.get("engine_url"):
        raise ValueError("judge kind 'llm' needs engine_url (the judge engine's base URL)")
    try:
        return _judge_class(kind)(**options)
    except TypeError as exc:  # an option this judge does not take: say so in configuration terms
        raise ValueError(f"bad options for judge kind {kind!r}: {exc}") from None


def build_judge(kind: str, **options) -> Judge:
    kind = (kind or "").strip()
    if "+" in kind:
        return _build_cascade(kind, options)
    if kind in BUILTIN_KINDS:
        return _build_builtin(kind, options)
    if ":" in kind or "." in kind:
        return _build_plugin(kind, options)
    raise ValueError(f"unknown judge kind {kind!r}; expected one of {_kinds_help()}")


def _kinds_help() -> str:
    return (", ".join(sorted(BUILTIN_KINDS)) + ", a '+'-joined cascade of them (e.g. rules+embedding), "
            "or a plugin 'module.path:factory'")


def _build_cascade(kind: str, options: dict) -> Judge:
    from slime.conversation.judges.cascade import CascadeJudge

    return CascadeJudge([build_judge(part, **part_options)
                         for part, part_options in _cascade_parts(kind, options, BUILTIN_KINDS, _judge_class, "judge")])


def _cascade_parts(kind: str, options: dict, kinds, class_of, what: str) -> list[tuple[str, dict]]:
    """The parts of a `a+b` cascade, each with the options its constructor names (an option nobody takes
    is a typo, not a no-op)."""
    parts = [part.strip() for part in kind.split("+")]
    unknown = [part for part in parts if part not in kinds]
    if unknown or len(parts) < 2:
        raise ValueError(f"bad {what} cascade {kind!r}: parts {unknown or parts} are not built-in kinds "
                         f"({', '.join(sorted(kinds))})")
    accepted = {part: set(inspect.signature(class_of(part)).parameters) for part in parts}
    unused = set(options) - set().union(*accepted.values())
    if unused:
        raise ValueError(f"options {sorted(unused)} are accepted by no {what} of cascade {kind!r}")
    return [(part, {k: v for k, v in options.items() if k in accepted[part]}) for part in parts]


def _build_plugin(spec: str, options: dict, *, method: str = "judge", what: str = "judge",
                  kinds_help=None) -> Judge:
    """`module:factory(**options)`, checked to have async `method`(turn) and aclose() and a name string."""
    kinds_help = kinds_help or _kinds_help
    factory = import_factory(spec, what, f"built-in kinds are {kinds_help()}")
    judge = factory(**options)
    missing = [name for name in (method, "aclose") if not callable(getattr(judge, name, None))]
    if missing:
        raise ValueError(f"plugin {what} {spec!r} returned {type(judge).__name__}, which has no "
                         f"{' or '.join(missing)} method; a {what} needs async {method}(turn) and aclose()")
    for name in (method, "aclose"):
        if not inspect.iscoroutinefunction(getattr(judge, name)):
            raise ValueError(f"plugin {what} {spec!r}: {name}() must be async")
    if not isinstance(getattr(judge, "name", None), str):
        raise ValueError(f"plugin {what} {spec!r} returned {type(judge).__name__} without a 'name' string")
    return judge


# ---------------------------------------------------------------------------------------------------
# Hint judges (OPD / Combine): the same shapes, speaking the HintJudge protocol of `hints`
# ---------------------------------------------------------------------------------------------------

HINT_KINDS = ("llm", "rules")


def _hint_judge_class(kind: str) -> type:
    if kind == "llm":
        from slime.conversation.judges.hint_llm import LLMHintJudge

        return LLMHintJudge
    from slime.conversation.judges.hint_rules import RulesHintJudge

    return RulesHintJudge


def _hint_kinds_help() -> str:
    return (", ".join(sorted(HINT_KINDS)) + ", a '+'-joined cascade of them (e.g. rules+llm), "
            "or a plugin 'module.path:factory'")


def build_hint_judge(kind: str, **options):
    """A hint judge: `llm`, `rules`, a cascade such as `rules+llm` (the first accepted hint wins), or a
    plugin `module.path:factory` whose factory(**options) returns an object with async hint(turn) and
    aclose() and a `name`."""
    kind = (kind or "").strip()
    if "+" in kind:
        from slime.conversation.judges.hints import CascadeHintJudge

        return CascadeHintJudge([build_hint_judge(part, **part_options) for part, part_options
                                 in _cascade_parts(kind, options, HINT_KINDS, _hint_judge_class, "hint judge")])
    if kind in HINT_KINDS:
        if kind == "llm" and not options.get("engine_url"):
            raise ValueError("hint judge kind 'llm' needs engine_url (the judge engine's base URL)")
        try:
            return _hint_judge_class(kind)(**options)
        except TypeError as exc:
            raise ValueError(f"bad options for hint judge kind {kind!r}: {exc}") from None
    if ":" in kind or "." in kind:
        return _build_plugin(kind, options, method="hint", what="hint judge", kinds_help=_hint_kinds_help)
    raise ValueError(f"unknown hint judge kind {kind!r}; expected one of {_hint_kinds_help()}")
