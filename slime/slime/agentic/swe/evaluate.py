"""The sealed evaluation of a patch: does it resolve the instance?

Never in the agent's working tree: a fresh tree of the instance at its base commit (:func:`.repos.checkout`) in a
new temporary directory, then

1. the patch is checked before anything is applied (:func:`.patches.validate_patch`: git diff format, no test
   file, no test configuration, no path outside the repository, no symbolic link, no binary hunk), then
   ``git apply --check``; a patch that fails either is *not resolved*, with the reason;
2. ``git apply`` of the patch, then of the instance's ``test_patch`` (the hidden tests come back only now);
3. exactly ``FAIL_TO_PASS + PASS_TO_PASS`` run with pytest in the bubblewrap sandbox (an unprivileged uid, no
   network, the project's interpreter, a wall-clock timeout; :mod:`.testrun`), reporting through the sealed channel
   (:mod:`slime.agentic.sealed_report`: the listed tests are the expected ids, two canaries run with them, the exit
   status must agree with the report);
4. resolved only when every listed test passed: a failed, erroring, skipped or missing (not in the report) test is
   not a pass, a timed-out run resolves nothing, and a tampered run (``tampered``) is not resolved.

The result (:class:`SweEvaluation`) holds the per-test outcomes, the reason when not resolved, and the wall time.

Limits (as in SWE-bench, whose tests also run beside the candidate code): the tests import the patched package, so
code of the patch runs inside the test process. What a patch can *name* is sealed (the rules above); what its code
does when imported is watched, not prevented: flipping outcomes wholesale flips a canary, replacing pytest's
reporting functions or registering a reporting plugin is seen at the end of the run (all scored as tampering), but
code that singles out the canaries in memory could still pass the other tests (sealed_report's docstring).

:func:`working_tree_diff` gives an agent's changes as a patch (``git add -A`` + ``git diff --cached`` against the
base commit), computed with a fresh git directory of the caller's, so nothing in the agent's ``.git`` (hooks,
config, filters, fsmonitor) runs as the caller.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic import fs_tree
from slime.agentic.sandbox import SandboxLimits, UidPool, capped_work_directory

from . import repos
from .instances import SweInstance
from .patches import validate_patch
from .testrun import DEFAULT_TIMEOUT_S, MISSING, TreeRunner

OUTPUT_TAIL_CHARS = 4000


@dataclass(frozen=True)
class SweEvaluation:
    instance_id: str
    resolved: bool
    reason: str = ""  # why not resolved (empty when resolved)
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed/failed/error/skipped/missing
    duration_s: float = 0.0
    timed_out: bool = False
    output_tail: str = ""
    tampered: bool = False  # the sealed report shows tampering (reason says how)

    def passed(self, tests) -> list[str]:
        return [t for t in tests if self.outcomes.get(t) == "passed"]

    def as_dict(self) -> dict:
        return {"instance_id": self.instance_id, "resolved": self.resolved, "reason": self.reason,
                "outcomes": dict(self.outcomes), "duration_s": round(self.duration_s, 3), "timed_out": self.timed_out,
                "tampered": self.tampered}


def normalized_patch(patch: str) -> str:
    """`patch` ending with a newline (git apply needs one; a patch typed by an agent may lack it)."""
    return patch if patch.endswith("\n") else patch + "\n"


def _apply(tree: Path, patch: str, *, check_only: bool = False) -> str | None:
    """git apply (or --check) in `tree`; None on success, else git's message."""
    args = ["apply", "--whitespace=nowarn"] + (["--check"] if check_only else []) + ["-"]
    proc = repos.git(*args, cwd=tree, input=normalized_patch(patch), check=False)
    if proc.returncode == 0:
        return None
    return proc.stderr.decode(errors="replace").strip()[-1000:] or f"git apply exited with {proc.returncode}"


async def run_instance(instance: SweInstance, patch: str | None = None, *, apply_test_patch: bool = True,
                       timeout: float = DEFAULT_TIMEOUT_S, limits: SandboxLimits | None = None,
                       uid_pool: UidPool | None = None, base_dir: str | os.PathLike | None = None) -> SweEvaluation:
    """A fresh tree at base, `patch` (unchecked: the caller's, e.g. the gold patch or none) and the test_patch
    applied, then the listed tests. :func:`evaluate_patch` is the sealed entry point for untrusted patches."""
    project = repos.project_of(instance)
    start = time.monotonic()
    tests = list(instance.tests)
    if not tests:  # pytest without node ids would run the whole suite: nothing listed, nothing to resolve
        return SweEvaluation(instance.instance_id, False, "the instance lists no test", {}, time.monotonic() - start)
    work = Path(tempfile.mkdtemp(prefix="slime-swe-eval-", dir=base_dir))
    disk = None
    try:
        # the tests may write: the tree is a filesystem of its own with the sandbox's disk budget
        disk = await asyncio.to_thread(capped_work_directory, work / "testbed", limits)
        tree = await asyncio.to_thread(repos.checkout, instance, work / "testbed")
        steps = ([("patch", patch)] if patch and patch.strip() else []) + \
                ([("test_patch", instance.test_patch)] if apply_test_patch and instance.test_patch.strip() else [])
        for name, text in steps:
            problem = await asyncio.to_thread(_apply, tree, text, check_only=True)
            if problem is None:
                problem = await asyncio.to_thread(_apply, tree, text)
            if problem is not None:
                what = "the patch does not apply" if name == "patch" else "the test patch does not apply after the patch"
                return SweEvaluation(instance.instance_id, False, f"{what}: {problem}",
                                     {t: MISSING for t in tests}, time.monotonic() - start)
        runner = await asyncio.to_thread(TreeRunner, tree, project, limits=limits, uid_pool=uid_pool)
        try:
            run = await runner.run_sealed(tests, timeout=timeout)
        finally:
            await asyncio.to_thread(runner.close)
    finally:
        if disk is not None:
            await asyncio.to_thread(disk.close)
        await asyncio.to_thread(fs_tree.remove_tree, work)
    reason = verdict(tests, run.outcomes, timed_out=run.timed_out, report_problem=run.report.reason, timeout=timeout)
    return SweEvaluation(instance.instance_id, not reason, reason, run.outcomes, time.monotonic() - start,
                         run.timed_out, run.output_tail(OUTPUT_TAIL_CHARS), run.tampered)


def verdict(tests, outcomes: dict[str, str], *, timed_out: bool, report_problem: str, timeout: float) -> str:
    """Why the listed `tests` do not resolve the instance, or "" when they do: every one passed (a failed,
    erroring, skipped or missing test is not a pass), the run did not time out, and the report was readable."""
    not_passed = [t for t in tests if outcomes.get(t) != "passed"]
    if timed_out:
        return f"the tests timed out after {timeout:g} s"
    if report_problem:
        return f"no test results: {report_problem}"
    if not_passed:
        shown = ", ".join(f"{t} ({outcomes.get(t, MISSING)})" for t in not_passed[:3])
        return f"{len(not_passed)} of {len(tests)} listed tests did not pass: {shown}" + (" ..." if len(not_passed) > 3 else "")
    return ""


async def evaluate_patch(instance: SweInstance, patch: str, **kwargs) -> SweEvaluation:
    """The sealed evaluation (module docstring): refused patches are not resolved, with the reason; the others are
    applied to a fresh tree with the test_patch and the listed tests decide. `kwargs`: :func:`run_instance`'s."""
    start = time.monotonic()
    check = validate_patch(patch or "", repos.project_of(instance).import_roots)
    if not check.ok:
        return SweEvaluation(instance.instance_id, False, f"patch refused: {check.reason}",
                             {t: MISSING for t in instance.tests}, time.monotonic() - start)
    return await run_instance(instance, patch, **kwargs)


def working_tree_diff(tree: str | os.PathLike, instance: SweInstance) -> str:
    """The agent's changes in `tree` against the instance's base commit, as upstream's ``git add -A && git diff
    --cached`` gives them, but read through a fresh git directory of ours (the tree's own ``.git`` is never used:
    its config could name commands git would run). Bytecode and pytest caches are left out."""
    store = repos.ensure_base_commit(instance)
    with tempfile.TemporaryDirectory(prefix="slime-swe-diff-") as tmp:
        git_dir = Path(tmp) / "git"
        repos.git("init", "-q", "--bare", str(git_dir))
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "exclude").write_text("".join(f"{p}\n" for p in repos.EXCLUDES))
        repos.git("fetch", "-q", "--no-tags", "--no-write-fetch-head", str(store),
                  repos.instance_ref(instance.base_commit), git_dir=git_dir)
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        work = ["--work-tree", os.fspath(tree)]
        repos.git(*work, "read-tree", instance.base_commit, git_dir=git_dir, env=env)
        repos.git(*work, "add", "-A", ".", git_dir=git_dir, env=env, cwd=tree)
        out = repos.git("-c", "core.quotePath=false", *work, "diff", "--cached", "--no-color", "--no-renames", "--no-ext-diff", instance.base_commit,
                        git_dir=git_dir, env=env, cwd=tree).stdout
    return out.decode("utf-8", "surrogateescape")


__all__ = ["SweEvaluation", "evaluate_patch", "normalized_patch", "run_instance", "verdict",
           "working_tree_diff"]
