"""The real projects SWE instances are made from: exact PyPI source distributions, pinned by version and sha256.

Each project is pure Python, permissively licensed, and its sdist ships the project's own test suite, which passes
on this machine's Python with nothing but pytest (measured numbers in ``swe-rl/README.md``). The pin is what makes a
rebuild verifiable: :mod:`.repos` refuses an sdist whose sha256 differs, so the repository (and every base commit
made from it) is the same source on every machine.

Layout facts per project, used by the generator and the evaluation:

* ``mutable`` : the package source files bugs are introduced into (globs, relative to the sdist root), minus
  ``immutable`` (version stubs, compatibility shims, generated tables): only modules the test suite exercises.
* ``test_args``: what pytest is given to run the whole suite (the project's own ``testpaths``).
* ``import_roots``: directories put first on ``sys.path`` so the tests import the checked-out package and never
  a copy installed in the interpreter (``src`` for src-layout projects, else the repository root).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class Project:
    repo: str  # "owner/name" as on GitHub: the instances' `repo` field
    name: str  # the PyPI name
    version: str
    sdist: str  # the file name on PyPI
    sha256: str
    license: str  # SPDX identifier, read from the sdist's LICENSE file
    mutable: tuple[str, ...]
    test_args: tuple[str, ...]
    import_roots: tuple[str, ...] = (".",)
    immutable: tuple[str, ...] = ()
    unreliable: tuple[str, ...] = ()  # node id globs never used (timing-sensitive tests that fail under load)

    def unreliable_test(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, g) for g in self.unreliable)

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def key(self) -> str:
        """`name-version`: the cache folder of this pin."""
        return f"{self.name}-{self.version}"

    @property
    def package(self) -> str:
        """The top-level import name (the folder of the first mutable file, under its import root)."""
        parts = self.mutable[0].split("/")
        return parts[1] if parts[0] == "src" else parts[0]

    @property
    def id_prefix(self) -> str:
        """SWE-bench's instance id prefix, ``owner__name``."""
        return self.repo.replace("/", "__")


PROJECTS: tuple[Project, ...] = (
    Project(
        repo="pytoolz/toolz", name="toolz", version="1.2.0", sdist="toolz-1.2.0.tar.gz",
        sha256="9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490", license="BSD-3-Clause",
        mutable=("toolz/dicttoolz.py", "toolz/functoolz.py", "toolz/itertoolz.py", "toolz/recipes.py"),
        test_args=("toolz",),
    ),
    Project(
        repo="tkem/cachetools", name="cachetools", version="8.0.2", sdist="cachetools-8.0.2.tar.gz",
        sha256="30ac523adfc118b51d2b2e7bad8a0ddb31370dfe2700c7f10ca224f36ccf81e0", license="MIT",
        mutable=("src/cachetools/*.py",), test_args=("tests",), import_roots=("src",),
    ),
    Project(
        repo="jpvanhal/inflection", name="inflection", version="0.5.1", sdist="inflection-0.5.1.tar.gz",
        sha256="1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417", license="MIT",
        mutable=("inflection/__init__.py",), test_args=("test_inflection.py",),
    ),
    Project(
        repo="gweis/isodate", name="isodate", version="0.7.2", sdist="isodate-0.7.2.tar.gz",
        sha256="4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6", license="BSD-3-Clause",
        mutable=("src/isodate/*.py",), immutable=("src/isodate/version.py", "src/isodate/__init__.py"),
        test_args=("tests",), import_roots=("src",),
    ),
    Project(
        repo="mahmoud/boltons", name="boltons", version="26.2.0", sdist="boltons-26.2.0.tar.gz",
        sha256="d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c", license="BSD-3-Clause",
        # the modules with a test file of their own (the others are barely exercised: their mutants break nothing)
        mutable=tuple(f"boltons/{m}.py" for m in (
            "cacheutils", "dictutils", "formatutils", "funcutils", "iterutils", "listutils", "mathutils",
            "queueutils", "setutils", "strutils", "tableutils", "timeutils", "urlutils")),
        test_args=("tests",),
        # socket timeouts of 10 ms and asyncio sleeps: they pass alone, and can fail on a loaded machine
        unreliable=("tests/test_socketutils.py::*", "tests/test_funcutils_fb_py3.py::*"),
    ),
    Project(
        repo="astanin/python-tabulate", name="tabulate", version="0.10.0", sdist="tabulate-0.10.0.tar.gz",
        sha256="e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d", license="MIT",
        mutable=("tabulate/__init__.py",), test_args=("test",),
    ),
)

_BY_REPO = {p.repo: p for p in PROJECTS}
_BY_NAME = {p.name: p for p in PROJECTS}


def get_project(repo_or_name: str) -> Project:
    """The pin for a repo ("pytoolz/toolz") or a PyPI name ("toolz")."""
    project = _BY_REPO.get(repo_or_name) or _BY_NAME.get(repo_or_name)
    if project is None:
        known = ", ".join(sorted(_BY_REPO))
        raise KeyError(f"no pinned project for {repo_or_name!r} (known: {known}); instances of other repositories "
                       "need their own environment (SWE-bench's Docker images)")
    return project


__all__ = ["PROJECTS", "Project", "get_project"]
