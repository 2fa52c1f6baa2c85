"""Hook loading: every call pattern in `slime.utils.hooks.HOOKS` loads, every failure names the flag and the path."""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import textwrap

import pytest

from slime.utils.arguments import build_parser
from slime.utils.hooks import (
    HOOKS,
    HookError,
    HookSpec,
    accepts_keyword,
    add_method_dirs_to_path,
    flag_attr,
    load_function,
    load_hooks,
)

_counter = itertools.count()


@pytest.fixture(autouse=True)
def restore_sys_path(monkeypatch):
    """load_hooks puts folders on sys.path; give every test its own copy so nothing leaks."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture()
def method_dir(tmp_path, monkeypatch):
    """A folder on sys.path; `write(source)` creates a module with a unique name and returns that name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(source: str, name: str | None = None) -> str:
        name = name or f"hookmod_{os.getpid()}_{next(_counter)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    write.dir = tmp_path
    yield write
    for name in written:
        sys.modules.pop(name, None)


DATA_SOURCE = """
class Source:
    def __init__(self, args):
        self.args = args
    def get_samples(self, num_samples):
        return []
    def add_samples(self, samples):
        pass
    def save(self, rollout_id):
        pass
    def load(self, rollout_id=None):
        pass
"""

GOOD = {
    "--rollout-function-path": "def fn(args, rollout_id, data_source, evaluation=False):\n    return []\n",
    "--eval-function-path": "def fn(args, rollout_id, data_buffer, evaluation=False):\n    return {}\n",
    "--custom-generate-function-path": "async def fn(args, sample, sampling_params):\n    return sample\n",
    "--custom-rm-path": "async def fn(args, sample, **kwargs):\n    return 1.0\n",
    "--dynamic-sampling-filter-path": "def fn(args, samples, **kwargs):\n    return True\n",
    "--custom-reward-post-process-path": "def fn(args, samples):\n    return [], []\n",
    "--custom-loss-function-path": "def fn(args, batch, logits, sum_of_sample_mean):\n    return 0, {}\n",
    "--custom-rollout-log-function-path": "def fn(rollout_id, args, samples, rollout_extra_metrics, rollout_time):\n"
                                          "    return False\n",
    "--buffer-filter-path": "def fn(args, rollout_id, buffer, num_samples):\n    return buffer[:num_samples]\n",
    "--rollout-sample-filter-path": "def fn(args, data):\n    pass\n",
    "--rollout-all-samples-process-path": "def fn(args, all_samples, data_source):\n    pass\n",
}


def test_registry_covers_parser_flags():
    dests = {action.dest for action in build_parser()._actions}
    for flag in HOOKS:
        assert flag_attr(flag) in dests, flag


@pytest.mark.parametrize("flag", sorted(GOOD))
def test_each_function_pattern_loads(method_dir, flag):
    module = method_dir(GOOD[flag])
    fn = load_function(f"{module}.fn", flag)
    assert fn.__module__ == module


def test_data_source_class_loads(method_dir):
    module = method_dir(DATA_SOURCE)
    cls = load_function(f"{module}.Source", "--data-source-path")
    assert cls.__name__ == "Source"


def test_data_source_with_static_and_class_methods(method_dir):
    module = method_dir("""
        class Base:
            def __init__(self, args, *rest):
                pass
            def get_samples(self, n):
                return []
            def add_samples(self, samples):
                pass
        class Source(Base):
            @staticmethod
            def save(rollout_id):
                pass
            @classmethod
            def load(cls, rollout_id=None):
                pass
    """)
    assert load_function(f"{module}.Source", "--data-source-path").__name__ == "Source"


def test_generate_with_evaluation_keyword(method_dir):
    module = method_dir("""
        async def with_eval(args, sample, sampling_params, evaluation=False):
            return sample
        async def without_eval(args, sample, sampling_params, **kwargs):
            return sample
    """)
    with_eval = load_function(f"{module}.with_eval", "--custom-generate-function-path")
    without = load_function(f"{module}.without_eval", "--custom-generate-function-path")
    assert accepts_keyword(with_eval, "evaluation") is True
    assert accepts_keyword(without, "evaluation") is False      # **kwargs: upstream does not pass it


def test_async_callable_object_counts_as_coroutine_function(method_dir):
    module = method_dir("""
        class Generate:
            async def __call__(self, args, sample, sampling_params):
                return sample
        generate = Generate()
    """)
    assert load_function(f"{module}.generate", "--custom-generate-function-path")


def test_module_inside_a_package(method_dir):
    pkg = method_dir.dir / "hookpkg_nested"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rollout.py").write_text(GOOD["--rollout-function-path"])
    try:
        assert load_function("hookpkg_nested.rollout.fn", "--rollout-function-path")
    finally:
        sys.modules.pop("hookpkg_nested.rollout", None)
        sys.modules.pop("hookpkg_nested", None)


def test_explicit_spec_and_unknown_flag(method_dir):
    module = method_dir("def two(a, b):\n    pass\nVALUE = 3\n")
    spec = HookSpec(call="fn(a, b)", positional=("a", "b"))
    assert load_function(f"{module}.two", "--my-hook", expected=spec)
    with pytest.raises(HookError, match="--my-hook"):
        load_function(f"{module}.two", "--my-hook", expected=HookSpec(call="fn(a)", positional=("a",)))
    assert load_function(f"{module}.two", "--not-registered")       # no spec: only importable + callable
    with pytest.raises(HookError, match="not callable"):
        load_function(f"{module}.VALUE", "--not-registered")


# ------------------------------------------------------------------------------------------- failures

def expect_error(path, flag, match):
    with pytest.raises(HookError) as err:
        load_function(path, flag)
    message = str(err.value)
    assert flag in message and path in message, message
    assert err.value.flag == flag and err.value.dotted_path == path
    assert re.search(match, message), message
    return message



@pytest.mark.parametrize("path", ["generate_rollout", "", ".fn", "module."])
def test_not_a_dotted_path(path):
    with pytest.raises(HookError, match="not a dotted path"):
        load_function(path, "--rollout-function-path")


def test_module_not_found():
    message = expect_error("no_such_module_xyz.fn", "--rollout-function-path", "module 'no_such_module_xyz' not found")
    assert "--extra-python-path" in message
    assert "expected: fn(args, rollout_id, data_source, evaluation=bool)" in message


def test_module_whose_import_fails(method_dir):
    broken = method_dir("raise RuntimeError('boom at import')\n")
    expect_error(f"{broken}.fn", "--custom-rm-path", "raised RuntimeError: boom at import")
    missing_dep = method_dir("import not_installed_dependency_xyz\n")
    expect_error(f"{missing_dep}.fn", "--custom-rm-path", "importing module .* failed: .*not_installed_dependency_xyz")


def test_attribute_missing_with_suggestion(method_dir):
    module = method_dir("def generate_rollout(args, rollout_id, data_source, evaluation=False):\n    pass\n")
    expect_error(f"{module}.generate_rollot", "--rollout-function-path",
                 "has no attribute 'generate_rollot'; did you mean generate_rollout")


def test_not_callable(method_dir):
    module = method_dir("fn = 42\n")
    expect_error(f"{module}.fn", "--custom-loss-function-path", r"not callable \(int\)")


def test_class_where_a_function_is_expected(method_dir):
    module = method_dir("class fn:\n    def __init__(self, args, samples):\n        pass\n")
    expect_error(f"{module}.fn", "--custom-reward-post-process-path", "expected a function, got a class")


@pytest.mark.parametrize("flag, source", [
    ("--rollout-function-path", "def fn(args, rollout_id, data_source):\n    pass\n"),            # no evaluation=
    ("--rollout-function-path", "def fn(args, rollout_id):\n    pass\n"),
    ("--custom-generate-function-path", "async def fn(args, sample):\n    pass\n"),
    ("--custom-rm-path", "async def fn(sample):\n    pass\n"),
    ("--dynamic-sampling-filter-path", "def fn(args, group, threshold):\n    pass\n"),
    ("--custom-loss-function-path", "def fn(args, batch, logits):\n    pass\n"),
    ("--custom-rollout-log-function-path", "def fn(args, samples):\n    pass\n"),
    ("--buffer-filter-path", "def fn(args, buffer):\n    pass\n"),
])
def test_signature_mismatch(method_dir, flag, source):
    module = method_dir(source)
    message = expect_error(f"{module}.fn", flag, "signature .* cannot take the call")
    assert f"expected: {HOOKS[flag].call}" in message


def test_sync_function_where_the_framework_awaits(method_dir):
    module = method_dir("def fn(args, sample, sampling_params):\n    return sample\n")
    expect_error(f"{module}.fn", "--custom-generate-function-path", r"must be a coroutine function \(async def\)")
    module = method_dir("def fn(args, sample):\n    return 1.0\n")
    expect_error(f"{module}.fn", "--custom-rm-path", "must be a coroutine function")


def test_async_function_where_the_framework_calls_synchronously(method_dir):
    module = method_dir("async def fn(args, rollout_id, data_source, evaluation=False):\n    return []\n")
    expect_error(f"{module}.fn", "--rollout-function-path", "is async def, but the framework calls it synchronously")
    module = method_dir("async def fn(args, group):\n    return True\n")
    expect_error(f"{module}.fn", "--dynamic-sampling-filter-path", "is async def")


def test_data_source_must_be_a_class(method_dir):
    module = method_dir("def Source(args):\n    return None\n")
    expect_error(f"{module}.Source", "--data-source-path", "expected a class, got function")


def test_data_source_constructor_signature(method_dir):
    module = method_dir(DATA_SOURCE.replace("def __init__(self, args)", "def __init__(self, args, extra)"))
    expect_error(f"{module}.Source", "--data-source-path", "constructor .* cannot take the call")


def test_data_source_missing_method(method_dir):
    module = method_dir(DATA_SOURCE.replace("def add_samples", "def add_sample"))
    expect_error(f"{module}.Source", "--data-source-path", r"class has no method add_samples\(\)")


def test_data_source_method_signature(method_dir):
    module = method_dir(DATA_SOURCE.replace("def save(self, rollout_id)", "def save(self)"))
    expect_error(f"{module}.Source", "--data-source-path", r"method save\(self\) cannot take save\(rollout_id\)")


def test_data_source_async_method(method_dir):
    module = method_dir(DATA_SOURCE.replace("def get_samples", "async def get_samples"))
    expect_error(f"{module}.Source", "--data-source-path", r"method get_samples\(\) is async def")


# ------------------------------------------------------------------------------------ load_hooks, path

def hook_args(**paths):
    args = argparse.Namespace(**{flag_attr(flag): None for flag in HOOKS}, extra_python_path=[])
    for name, value in paths.items():
        setattr(args, name, value)
    return args


def test_load_hooks_loads_every_configured_hook(tmp_path):
    folder = tmp_path / "method"
    folder.mkdir()
    name = f"hookmod_all_{os.getpid()}_{next(_counter)}"
    body = DATA_SOURCE + "".join(source.replace("def fn", f"def {flag_attr(flag)}") for flag, source in GOOD.items())
    (folder / f"{name}.py").write_text(body)
    paths = {flag_attr(flag): f"{name}.{flag_attr(flag)}" for flag in GOOD}
    args = hook_args(data_source_path=f"{name}.Source", **paths)
    args.extra_python_path = [str(folder)]
    try:
        hooks = load_hooks(args)
        assert set(hooks) == {flag_attr(flag) for flag in HOOKS}       # keyed like the attributes on args
        assert hooks["data_source_path"].__name__ == "Source"
        assert hooks["custom_rm_path"].__name__ == "custom_rm_path"
        assert load_hooks(args, flags=["--custom-rm-path"]).keys() == {"custom_rm_path"}
    finally:
        sys.modules.pop(name, None)
        if str(folder) in sys.path:
            sys.path.remove(str(folder))


def test_load_hooks_skips_unset_and_names_the_failing_flag(method_dir):
    module = method_dir(GOOD["--rollout-function-path"])
    args = hook_args(rollout_function_path=f"{module}.fn", eval_function_path=f"{module}.fn")
    assert set(load_hooks(args)) == {"rollout_function_path", "eval_function_path"}
    args.custom_rm_path = f"{module}.missing_rm"
    with pytest.raises(HookError, match=r"^--custom-rm-path '.*\.missing_rm': module .* has no attribute"):
        load_hooks(args)


def test_load_hooks_on_parsed_args_with_default_paths_overridden(method_dir):
    module = method_dir(DATA_SOURCE + GOOD["--rollout-function-path"])
    argv = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "2", "--num-rollout", "1",
            "--disable-rollout-global-dataset", "--rollout-function-path", f"{module}.fn",
            "--data-source-path", f"{module}.Source"]
    from slime.utils.arguments import parse_args

    hooks = load_hooks(parse_args(argv))
    assert set(hooks) == {"rollout_function_path", "eval_function_path", "data_source_path"}
    assert hooks["rollout_function_path"] is hooks["eval_function_path"]


def test_add_method_dirs_to_path(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(cwd))])
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    added = add_method_dirs_to_path([first, str(second)])
    assert added == [str(first), str(second), str(cwd)]
    assert sys.path[:2] == [str(first), str(second)] and sys.path[-1] == str(cwd)
    # the processes started from here import the folders too (the CWD is not handed down)
    assert os.environ["PYTHONPATH"] == os.pathsep.join([str(first), str(second), "/elsewhere"])
    assert add_method_dirs_to_path([first]) == []                 # idempotent
    assert os.environ["PYTHONPATH"] == os.pathsep.join([str(first), str(second), "/elsewhere"])


def test_cwd_modules_are_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    name = f"hookmod_cwd_{os.getpid()}_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(GOOD["--custom-loss-function-path"])
    try:
        hooks = load_hooks(hook_args(custom_loss_function_path=f"{name}.fn"))
        assert hooks["custom_loss_function_path"].__module__ == name
    finally:
        sys.modules.pop(name, None)
