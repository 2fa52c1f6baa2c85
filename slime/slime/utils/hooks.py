"""Extension points given as dotted import paths (`--rollout-function-path pkg.module.fn`, ...).

`load_hooks(args)` imports every configured hook once at start-up and checks that it can be called the
way the framework will call it (the call patterns in `HOOKS`), so that a typo or a wrong signature fails before any
engine starts instead of in the middle of the first rollout. Every failure raises `HookError`, whose
message names the flag, the dotted path and what is wrong.

Method folders are found through `sys.path`: upstream slime relies on `PYTHONPATH`; here the current
directory and every `--extra-python-path` folder are added as well (`add_method_dirs_to_path`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable


class HookError(ValueError):
    """A hook given on the command line cannot be loaded or cannot take the framework's call."""

    def __init__(self, flag: str, dotted_path: str, problem: str, spec: HookSpec | None = None):
        self.flag, self.dotted_path, self.problem = flag, dotted_path, problem
        expected = f" (expected: {spec.call})" if spec is not None else ""
        super().__init__(f"{flag} {dotted_path!r}: {problem}{expected}")


@dataclass(frozen=True)
class HookSpec:
    """How the framework calls a hook.

    `positional` names the positional arguments passed, `keywords` the keyword arguments always passed,
    `optional_keywords` those passed only when the signature names them (as upstream does for
    `evaluation=`). `awaited`: True = the framework awaits the call (must be `async def`), False = plain
    call (must not be `async def`). A class hook (`is_class`) is instantiated with `positional` and must
    have `methods`: name -> positional arguments of the call.
    """

    call: str
    positional: tuple[str, ...]
    keywords: tuple[str, ...] = ()
    optional_keywords: tuple[str, ...] = ()
    awaited: bool = False
    is_class: bool = False
    methods: tuple[tuple[str, tuple[str, ...]], ...] = ()


_ROLLOUT = HookSpec(call="fn(args, rollout_id, data_source, evaluation=bool)",
                    positional=("args", "rollout_id", "data_source"), keywords=("evaluation",))

# flag -> call pattern. The attribute on `args` is the flag without dashes, dashes -> underscores.
HOOKS: dict[str, HookSpec] = {
    "--rollout-function-path": _ROLLOUT,
    "--eval-function-path": _ROLLOUT,
    "--custom-generate-function-path": HookSpec(
        call="await fn(args, sample, sampling_params[, evaluation=bool])",
        positional=("args", "sample", "sampling_params"), optional_keywords=("evaluation",), awaited=True),
    "--custom-rm-path": HookSpec(call="await fn(args, sample_or_samples)",
                                 positional=("args", "sample_or_samples"), awaited=True),
    "--dynamic-sampling-filter-path": HookSpec(call="fn(args, group)", positional=("args", "group")),
    "--custom-reward-post-process-path": HookSpec(call="fn(args, samples) -> (raw_rewards, rewards)",
                                                  positional=("args", "samples")),
    "--custom-loss-function-path": HookSpec(call="fn(args, batch, logits, sum_of_sample_mean) -> (loss, metrics)",
                                            positional=("args", "batch", "logits", "sum_of_sample_mean")),
    "--custom-rollout-log-function-path": HookSpec(
        call="fn(rollout_id, args, samples, rollout_extra_metrics, rollout_time) -> bool",
        positional=("rollout_id", "args", "samples", "rollout_extra_metrics", "rollout_time")),
    "--rollout-sample-filter-path": HookSpec(call="fn(args, groups)", positional=("args", "groups")),
    "--rollout-all-samples-process-path": HookSpec(call="fn(args, all_groups, data_source)",
                                                   positional=("args", "all_groups", "data_source")),
    "--buffer-filter-path": HookSpec(call="fn(args, None, buffer, num_samples) -> list[list[Sample]]",
                                     positional=("args", "rollout_id", "buffer", "num_samples")),
    "--data-source-path": HookSpec(
        call="cls(args) with get_samples(num_samples), add_samples(samples), save(rollout_id), load(rollout_id)",
        positional=("args",), is_class=True,
        methods=(("get_samples", ("num_samples",)), ("add_samples", ("samples",)),
                 ("save", ("rollout_id",)), ("load", ("rollout_id",)))),
}


def flag_attr(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


# ---------------------------------------------------------------------------------------------- sys.path

def add_method_dirs_to_path(paths: Iterable[str | os.PathLike] = ()) -> list[str]:
    """Put the given folders first on `sys.path` (in order) and the CWD last; returns what was added.

    The CWD goes last so a stray file in it cannot shadow an installed package; explicit folders go
    first, like `PYTHONPATH` entries.
    """
    added = []
    folders = [os.path.abspath(os.fspath(p)) for p in paths]
    for folder in reversed(folders):
        if folder not in sys.path:
            sys.path.insert(0, folder)
            added.insert(0, folder)
    # every process started from here on (pool servers, desktops, the proxy, helper workers) imports the folders'
    # modules too: a method folder's plugin named in a child's flags resolves there as it does here
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    missing = [f for f in folders if f not in inherited]
    if missing:
        os.environ["PYTHONPATH"] = os.pathsep.join(missing + inherited)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
        added.append(cwd)
    if added:
        importlib.invalidate_caches()
    return added


# -------------------------------------------------------------------------------------------- importing

def _import_attribute(dotted_path: str, flag: str, spec: HookSpec | None) -> Any:
    module_name, _, attr = dotted_path.rpartition(".")
    if not module_name or not attr:
        raise HookError(flag, dotted_path, "not a dotted path of the form 'package.module.attribute'", spec)
    importlib.invalidate_caches()  # method folders may have been written after the last import
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise HookError(flag, dotted_path, f"module {module_name!r} not found (put its folder on PYTHONPATH "
                                               f"or pass it with --extra-python-path)", spec) from exc
        raise HookError(flag, dotted_path, f"importing module {module_name!r} failed: {exc}", spec) from exc
    except Exception as exc:  # the module exists but raises while being imported
        raise HookError(flag, dotted_path, f"importing module {module_name!r} raised "
                                           f"{type(exc).__name__}: {exc}", spec) from exc
    if not hasattr(module, attr):
        close = difflib.get_close_matches(attr, [n for n in dir(module) if not n.startswith("_")], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise HookError(flag, dotted_path, f"module {module_name!r} has no attribute {attr!r}{hint}", spec)
    return getattr(module, attr)


def _describe(obj: Any) -> str:
    try:
        return f"{getattr(obj, '__qualname__', type(obj).__name__)}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return repr(obj)


def _can_bind(fn: Any, positional: tuple[str, ...], keywords: Iterable[str]) -> str | None:
    """None if `fn(*positional, **keywords)` binds, else the reason. Unintrospectable callables pass."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*positional, **{name: None for name in keywords})
    except TypeError as exc:
        return str(exc)
    return None


def accepts_keyword(fn: Any, name: str) -> bool:
    """Whether the signature names `name` (upstream passes `evaluation=` only then; **kwargs do not count)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _check_function(fn: Any, flag: str, dotted_path: str, spec: HookSpec) -> None:
    if inspect.isclass(fn) or not callable(fn):
        what = "a class" if inspect.isclass(fn) else f"not callable ({type(fn).__name__})"
        raise HookError(flag, dotted_path, f"expected a function, got {what}", spec)
    keywords = list(spec.keywords) + [k for k in spec.optional_keywords if accepts_keyword(fn, k)]
    problem = _can_bind(fn, spec.positional, keywords)
    if problem:
        raise HookError(flag, dotted_path, f"signature {_describe(fn)} cannot take the call: {problem}", spec)
    if spec.awaited and not _is_async(fn):
        raise HookError(flag, dotted_path, "must be a coroutine function (async def): the framework awaits it", spec)
    if not spec.awaited and _is_async(fn):
        raise HookError(flag, dotted_path, "is async def, but the framework calls it synchronously and would get "
                                           "an un-awaited coroutine; make it a plain def", spec)


def _check_class(cls: Any, flag: str, dotted_path: str, spec: HookSpec) -> None:
    if not inspect.isclass(cls):
        raise HookError(flag, dotted_path, f"expected a class, got {type(cls).__name__}", spec)
    problem = _can_bind(cls, spec.positional, spec.keywords)
    if problem:
        raise HookError(flag, dotted_path, f"constructor {_describe(cls)} cannot take the call: {problem}", spec)
    for name, positional in spec.methods:
        method = getattr(cls, name, None)
        if method is None or not callable(method):
            raise HookError(flag, dotted_path, f"class has no method {name}()", spec)
        static = inspect.getattr_static(cls, name)
        bound = isinstance(static, (staticmethod, classmethod))  # no `self` to pass
        call = positional if bound else ("self",) + positional
        problem = _can_bind(method, call, ())
        if problem:
            raise HookError(flag, dotted_path, f"method {name}{inspect.signature(method)} cannot take "
                                               f"{name}({', '.join(positional)}): {problem}", spec)
        if _is_async(method):
            raise HookError(flag, dotted_path, f"method {name}() is async def; the framework calls it "
                                               f"synchronously", spec)


def load_function(dotted_path: str, flag: str, expected: HookSpec | None = None) -> Any:
    """Import `pkg.module.attr` and check it against `expected` (default: `HOOKS[flag]`, if any)."""
    spec = expected if expected is not None else HOOKS.get(flag)
    obj = _import_attribute(dotted_path, flag, spec)
    if spec is None:
        if not callable(obj):
            raise HookError(flag, dotted_path, f"not callable ({type(obj).__name__})")
    elif spec.is_class:
        _check_class(obj, flag, dotted_path, spec)
    else:
        _check_function(obj, flag, dotted_path, spec)
    return obj


def load_hooks(args: Any, flags: Iterable[str] | None = None) -> dict[str, Any]:
    """Load every hook configured on `args` (all of `HOOKS`, or just `flags`).

    Returns attribute name -> loaded object, e.g. `{"rollout_function_path": fn, "data_source_path": cls}`
    (the keys are `flag_attr(flag)`, the same names as on `args`). Flags left unset (None) are skipped.
    The CWD and `args.extra_python_path` are put on `sys.path` first.
    """
    add_method_dirs_to_path(getattr(args, "extra_python_path", None) or ())
    loaded = {}
    for flag in flags if flags is not None else HOOKS:
        dotted_path = getattr(args, flag_attr(flag), None)
        if dotted_path:
            loaded[flag_attr(flag)] = load_function(dotted_path, flag)
    return loaded
