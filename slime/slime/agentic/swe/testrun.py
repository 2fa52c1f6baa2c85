"""Run pytest on a repository tree inside the bubblewrap sandbox and read the outcome of each test.

Used by the generator (whole suites, on mutants) and by the sealed evaluation (exactly the listed tests). The same
recipe as the terminal tasks' evaluation (:mod:`slime.agentic.terminal.workspace`): the project's interpreter (bound
read-only into the sandbox) runs pytest as an unprivileged uid with no network, ``--junitxml`` writes the report
into a directory outside the tree, and :mod:`slime.agentic.terminal.junit` reads it.

Why pytest is started the way it is (``python -P -B -s -c RUNNER``):

* ``-P`` keeps the working directory off ``sys.path`` and the runner imports pytest *before* the tree's import
  roots are put first: a ``pytest.py``, ``unittest.py`` or ``sitecustomize.py`` in the tree cannot replace the
  harness (a patch could add one).
* the import roots (``src`` or the tree itself, from the project's pin) come before site-packages, so the checked
  out package is tested, never a copy installed in the interpreter (tabulate is installed in this venv).
* ``PYTHONHASHSEED=0``, ``TZ=UTC`` and ``HOME=/tmp``: failure messages (sets, dicts of strings) and dates print the
  same on every run, so generated problem statements are reproducible.
* ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and ``-p no:cacheprovider``: only pytest itself (no plugin of the venv, no
  ``.pytest_cache`` in the tree); ``PYTHONDONTWRITEBYTECODE=1``: no ``__pycache__`` in the tree either.
* ``-o junit_family=xunit1``: the report also names each test's file and line (the generator needs them).

The sealed evaluation (:meth:`TreeRunner.run_sealed`, :func:`run_sealed_tests`; also the Docker backend's) does not
read a report file: the runner imports the sealed-report plugin (:mod:`slime.agentic.sealed_pytest`, from a
root-owned directory bound at ``/slime-harness``) before the tree's import roots go on ``sys.path`` and hands it to
pytest, which reports through a channel only the host holds (:mod:`slime.agentic.sealed_report`): the listed tests
are the expected ids, two canaries run with them, and tampering scores the patch as not resolved.

Test ids are pytest node ids (``tests/test_x.py::TestY::test_z[p]``), SWE-bench's convention; :func:`junit_id` maps
one to the id the JUnit report gives it (``tests.test_x.TestY::test_z[p]``).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic import fs_tree, sealed_report
from slime.agentic.sandbox import Sandbox, SandboxLimits, SandboxResult, UidPool
from slime.agentic.terminal.junit import JUnitReport, read_junit_file

from .projects import Project

TESTBED = "/testbed"  # where the tree is inside the sandbox (SWE-bench's path)
RESULTS = "/results"
HARNESS = "/slime-harness"  # root-owned, read-only to the sandbox user: the sealed-report plugin
JUNIT_FILE = "junit.xml"
DEFAULT_TIMEOUT_S = 300.0
MISSING = "missing"  # the outcome of a requested test the report does not mention
_RUNNER = ("import json, sys\nimport pytest\nsys.path[:0] = json.loads(sys.argv[1])\n"
           "raise SystemExit(pytest.main(sys.argv[2:]))\n")
# the plugin is imported (and takes the report channel) before the tree's roots are on sys.path
_SEALED_RUNNER = (f"import json, sys\nimport pytest\nsys.path.insert(0, sys.argv[1])\n"
                  f"import {sealed_report.PLUGIN_MODULE} as plugin\ndel sys.path[0]\n"
                  "sys.path[:0] = json.loads(sys.argv[2])\n"
                  "raise SystemExit(pytest.main(sys.argv[3:], plugins=[plugin]))\n")


def pytest_env() -> dict[str, str]:
    return {
        "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONNOUSERSITE": "1", "HOME": "/tmp", "TZ": "UTC", "COLUMNS": "120",
    }


def command_env(project: Project | None) -> dict[str, str]:
    """The environment of an agent's commands on a tree at /testbed: HOME=/tmp (nothing of a tool's lands in the
    tree), no bytecode, no pager; for a pinned project, PYTHONPATH = its import roots under /testbed (the package
    imports from the tree, as the editable install of a SWE-bench image does)."""
    env = {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "GIT_PAGER": "cat", "PAGER": "cat"}
    if project is not None:
        env["PYTHONPATH"] = ":".join(os.path.normpath(os.path.join(TESTBED, r)) for r in project.import_roots)
    return env


def output_tail(result: SandboxResult | None, limit: int = 4000) -> str:
    """The end of a run's output: stdout, then stderr after a marker."""
    if result is None:
        return ""
    text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
    return text[-limit:]


def junit_id(nodeid: str) -> str:
    """pytest node id -> the JUnit report's ``classname::name`` (``a/b.py::C::t[x]`` -> ``a.b.C::t[x]``)."""
    head, bracket, params = nodeid.partition("[")
    parts = head.split("::")
    path = parts[0]
    if path.endswith(".py"):
        path = path[:-3]
    classname = ".".join([path.replace("/", "."), *parts[1:-1]])
    return f"{classname}::{parts[-1]}{bracket}{params}" if len(parts) > 1 else head + bracket + params


@dataclass
class PytestRun:
    report: JUnitReport
    result: SandboxResult | None
    duration_s: float
    xml: bytes = b""  # the report's bytes (the generator reads the xunit1 details from them)
    outcomes: dict[str, str] = field(default_factory=dict)  # requested node id -> outcome (MISSING if absent)
    sealed: sealed_report.SealedRun | None = None  # a sealed run: what the host observed (no `result`)
    tampered: bool = False

    @property
    def timed_out(self) -> bool:
        if self.sealed is not None:
            return self.sealed.timed_out
        return bool(self.result and self.result.timed_out)

    def output_tail(self, limit: int = 4000) -> str:
        if self.sealed is not None:
            return self.sealed.output[-limit:]
        return output_tail(self.result, limit)


def pytest_argv(project: Project, args: Sequence[str], python: str, *, results_dir: str = RESULTS) -> list[str]:
    roots = [os.path.normpath(os.path.join(TESTBED, r)) for r in project.import_roots]
    return [python, "-P", "-B", "-s", "-c", _RUNNER, json.dumps(roots), "-p", "no:cacheprovider",
            "-o", "junit_family=xunit1", f"--junitxml={results_dir}/{JUNIT_FILE}", "-q", *args]


def sealed_pytest_argv(project: Project | None, tests: Sequence[str], python: str, *, harness: str = HARNESS) -> list[str]:
    """The harness-first runner with the sealed-report plugin (`project` pinned: its import roots first); exactly
    `tests` run."""
    roots = [os.path.normpath(os.path.join(TESTBED, r)) for r in (project.import_roots if project else ())]
    return [python, "-P", "-B", "-s", "-c", _SEALED_RUNNER, harness, json.dumps(roots), "-p", "no:cacheprovider",
            "-q", *tests]


def stage_harness(directory: str | os.PathLike) -> Path:
    """`directory` (created, root-owned 0755) holding the sealed-report plugin (0644): bound at :data:`HARNESS`."""
    path = Path(directory)
    path.mkdir(mode=0o755, exist_ok=True)
    os.chmod(path, 0o755)
    target = path / sealed_report.PLUGIN_FILE
    target.write_bytes(sealed_report.plugin_source().read_bytes())
    os.chmod(target, 0o644)
    return path


async def run_sealed_tests(box, argv: Sequence[str], tests: Sequence[str], *, env: dict[str, str],
                           limits: SandboxLimits | None = None) -> PytestRun:
    """`argv` (a sealed runner of exactly `tests`) in `box` with a report channel; the verdict of
    :func:`slime.agentic.sealed_report.judge` with `tests` as the expected ids. Outcomes of `tests` are filled in
    (MISSING for all when the run does not count)."""
    spec = sealed_report.ReportSpec.new("run")
    run = await sealed_report.run_sealed(box, argv, spec=spec, env=env, limits=limits)
    verdict = sealed_report.judge(run.report, spec, expected=tests, exit_code=run.exit_code, timed_out=run.timed_out,
                                  overflow=run.overflow)
    got = verdict.outcomes()
    return PytestRun(verdict.junit(), None, run.duration_s, outcomes={t: got.get(t, MISSING) for t in tests},
                     sealed=run, tampered=verdict.tampered)


class TreeRunner:
    """A sandbox over one tree (bound at /testbed) that runs pytest as often as asked; ``close()`` gives the tree
    back to its owner. The generator keeps one per project and swaps files between runs."""

    def __init__(self, tree: str | os.PathLike, project: Project, *, limits: SandboxLimits | None = None,
                 uid_pool: UidPool | None = None):
        self.project = project
        self.results = Path(tempfile.mkdtemp(prefix="slime-swe-results-"))
        try:
            harness = stage_harness(self.results / "harness")  # root's: a bind the sandbox user cannot write
            (self.results / "report").mkdir()
            self.box = Sandbox(os.fspath(tree), limits=limits, uid_pool=uid_pool, mount_at=TESTBED,
                               rw_binds=[(str(self.results / "report"), RESULTS), (str(harness), HARNESS)])
        except BaseException:
            fs_tree.remove_tree(self.results)
            raise
        if self.box.uid is not None:
            os.chown(self.results / "report", self.box.uid, self.box.uid)

    async def run(self, args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT_S,
                  requested: Sequence[str] = ()) -> PytestRun:
        """pytest with `args` (node ids or paths); outcomes of `requested` node ids are filled in."""
        report_path = self.results / "report" / JUNIT_FILE
        if report_path.exists() or report_path.is_symlink():
            report_path.unlink()
        argv = pytest_argv(self.project, args, self.box.python)
        limits = self.box.limits.with_timeout(timeout)
        start = time.monotonic()
        result = await self.box.run(argv, env=pytest_env(), limits=limits)
        report, xml = read_junit_file(report_path)  # written by sandboxed code: read once, no symlink, capped
        run = PytestRun(report, result, time.monotonic() - start, xml if not report.reason else b"")
        if requested:
            got = report.outcomes()
            run.outcomes = {t: got.get(junit_id(t), MISSING) for t in requested}
        return run

    async def run_sealed(self, tests: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT_S) -> PytestRun:
        """Exactly `tests`, sealed (module docstring): the evaluation's run."""
        limits = self.box.limits.with_timeout(timeout)
        argv = sealed_pytest_argv(self.project, tests, self.box.python)
        return await run_sealed_tests(self.box, argv, tests, env=pytest_env(), limits=limits)

    def close(self) -> None:
        try:
            self.box.close()
        finally:
            fs_tree.remove_tree(self.results)

    def __enter__(self) -> TreeRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["HARNESS", "MISSING", "TESTBED", "PytestRun", "TreeRunner", "command_env", "junit_id", "output_tail",
           "pytest_argv", "pytest_env", "run_sealed_tests", "sealed_pytest_argv", "stage_harness"]
