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
