"""Method folders hold their method as plain modules that the launchers put on the path (`--extra-python-path
"$HERE"`): two folders on one path must not hold modules of the same name, nor shadow an installed package."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict

from helpers.method_folders import METHOD_FOLDERS


def _modules(folder):
    return sorted(p.stem for p in folder.glob("*.py")) + sorted(p.name for p in folder.iterdir()
                                                                 if (p / "__init__.py").is_file())


def test_no_two_method_folders_hold_a_module_of_the_same_name():
    seen = defaultdict(list)
    for folder in METHOD_FOLDERS:
        for name in _modules(folder):
            seen[name].append(folder.name)
    assert {name: folders for name, folders in seen.items() if len(folders) > 1} == {}


def test_no_method_module_shadows_an_installed_one():
    folders = {str(f) for f in METHOD_FOLDERS}
    shadowing = {}
    for folder in METHOD_FOLDERS:
        for name in _modules(folder):
            if name in sys.stdlib_module_names:
                shadowing[name] = "the standard library"
                continue
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin and not any(spec.origin.startswith(f) for f in folders):
                shadowing[name] = spec.origin
    assert shadowing == {}


def test_the_agentic_settings_flags_are_declared_by_their_folders_not_the_framework():
    """`slime/utils/arguments.py` knows no setting's flags: each folder's loop module declares them
    (`add_custom_arguments`), and the trainer's parser has them when the command line names that module."""
    from slime.utils.arguments import build_parser, parse_args

    framework = {flag for action in build_parser()._actions for flag in action.option_strings}
    owners = {"toolcall-rl": ("generate_with_retool", ["--tools-config", "--max-tool-calls", "--tool-timeout"]),
              "terminal-rl": ("generate", ["--terminal-tasks-dir", "--terminal-backend", "--terminal-image",
                                           "--terminal-tools"]),
              "swe-rl": ("generate_with_swe_remote", ["--swe-instances", "--swe-backend", "--swe-image"]),
              "gui-rl": ("generate_with_gui", ["--gui-observation", "--gui-history", "--gui-tools", "--gui-tasks-dir",
                                               "--gui-apps-dir", "--gui-max-steps"])}
    base = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3",
            "--disable-rollout-global-dataset"]
    for folder, (module, flags) in owners.items():
        assert not framework & set(flags), folder
        parser_flags = vars(parse_args(base + ["--custom-generate-function-path", f"{module}.generate"]))
        assert all(flag[2:].replace("-", "_") in parser_flags for flag in flags), folder


CONVERSATION_METHODS = {"openclaw-rl": ("openclaw_rl_method", {"rl"}),
                        "openclaw-opd": ("openclaw_opd_method", {"opd", "opd_topk"}),
                        "openclaw-combine": ("openclaw_combine_method", {"combine", "combine_topk"})}


def test_each_conversation_method_lives_in_its_folder_and_the_framework_names_no_method_class():
    """The registry maps each name to its folder's module; no method class is defined under `slime/slime/`, and
    Combine's loss is the folder's `combine_loss.py`."""
    from slime.conversation.methods import BUILT_IN_METHODS, load_method

    for folder, (module, names) in CONVERSATION_METHODS.items():
        assert {n for n, (f, m, _) in BUILT_IN_METHODS.items() if f == folder and m == module} == names
        for name in names:
            method = load_method(name)
            assert sys.modules[type(method).__module__].__file__.startswith(str(METHOD_FOLDERS[0].parent / folder))
    framework = METHOD_FOLDERS[0].parent / "slime" / "slime"
    defined = [p for p in framework.rglob("*.py")
               if any(f"class {cls}(" in p.read_text() for _, _, cls in BUILT_IN_METHODS.values())]
    assert defined == []
    combine = load_method("combine")
    assert combine.training["custom_loss_function_path"] == "combine_loss.combine_loss_function"
    assert "def combine_loss_function" not in (framework / "utils" / "loss.py").read_text()


def test_each_conversation_folder_has_its_rollout_function_at_upstreams_module_name():
    import importlib

    from slime.conversation import rollout

    for module in ("openclaw_rollout", "openclaw_opd_rollout", "openclaw_combine_rollout"):
        assert importlib.import_module(module).generate_rollout is rollout.generate_rollout
