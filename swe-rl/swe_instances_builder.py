"""Make SWE-bench instances from real projects, offline: one realistic bug each, found by the project's own tests.

    python swe-rl/swe_instances_builder.py --out swe-rl/data/instances.jsonl --seed 0
    python swe-rl/swe_instances_builder.py --out /tmp/toolz.jsonl --projects toolz --per-project 3 -v

For every pinned project (:mod:`.projects`), in the store's upstream tree (:mod:`.repos`):

1. the whole test suite runs three times on the unchanged code; the candidates are the tests that passed in most
   runs, are not among the project's ``unreliable`` (timing-sensitive) tests, and whose ids are stable (not
   parametrized over a set, ids that never changed between runs);
2. every mutation site of the project's source (:mod:`.mutations`) is listed; the seed shuffles each operator's
   sites and the operators are taken in turn, so the bugs spread over operators and over the code (one bug per
   function first; a second one only once every function had its chance, ``MAX_PER_FUNCTION``);
3. for each mutant the whole suite runs in the sandbox (:mod:`.testrun`). A mutant is kept when it breaks between
   1 and ``--max-broken`` (10) candidate tests, collects the same tests (no import or collection error), does not
   time out, and a second run breaks exactly the same tests; the broken tests are FAIL_TO_PASS;
4. the test functions of FAIL_TO_PASS are hidden from the base commit (:mod:`.hidden_tests`; the ``test_patch`` puts
   them back, as the tests of a SWE-bench fix come with its pull request). The visible suite must still pass on
   the buggy base (the bug is invisible to the tests the agent can see);
5. PASS_TO_PASS: up to ``--pass-to-pass`` (20) visible tests that pass on the base, from the FAIL_TO_PASS tests'
   own files first, sampled with the seed;
6. the gold ``patch`` (undoes the mutation) and the ``test_patch`` are git diffs between the base tree and the
   upstream tree; the base commit is a root commit of the base tree (same hash on every machine);
7. the problem statement is written from the failing behaviour (:mod:`.statements`);
8. the instance is checked as ``python -m slime.agentic.swe.check`` would (:mod:`slime.agentic.swe.evaluate`): the gold patch
   resolves it, and at base (with the test_patch) every FAIL_TO_PASS test fails and every PASS_TO_PASS test
   passes. One that does not is dropped.

The same seed gives byte-identical JSONL: every choice comes from ``random.Random`` seeded with the seed and a
name, the candidates are listed in a fixed order, and the tests run with a fixed hash seed and time zone. Only the
summary on stderr holds times.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import fnmatch
import logging
import os
import random
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from swe_hidden_tests import remove_functions
from swe_mutations import OPERATORS, Mutation, apply_mutation, find_mutations
from swe_statements import Failure, Symptom, analyse, rank, write_statement

from slime.agentic.swe import repos
from slime.agentic.swe.evaluate import run_instance
from slime.agentic.swe.instances import SHIPPED_INSTANCES, SweInstance, save_instances
from slime.agentic.swe.patches import is_test_path
from slime.agentic.swe.projects import PROJECTS, Project, get_project
from slime.agentic.swe.testrun import TreeRunner, junit_id

from slime.agentic import fs_tree

logger = logging.getLogger(__name__)

DEFAULT_OUT = SHIPPED_INSTANCES
DEFAULT_PER_PROJECT = 8
DEFAULT_MAX_ATTEMPTS = 200
DEFAULT_MAX_BROKEN = 10
DEFAULT_PASS_TO_PASS = 20
BASELINE_RUNS = 3
MAX_PER_FUNCTION = 2  # a second bug in a function only once every function had its chance


@dataclass(frozen=True)
class CaseDetail:
    """What the xunit1 JUnit report says about one test case beyond its outcome (testrun's reports carry it)."""

    junit_id: str
    file: str  # the file that defines the test function (for an inherited method: the base class's file)
    line: int  # a 1-based line of its definition
    name: str  # the test's name with parameters
    text: str  # the failure/error text (traceback)
    message: str


def case_details(xml: bytes) -> dict[str, CaseDetail]:
    """junit id -> CaseDetail, from the report of a trusted run (the generator's own)."""
    out = {}
    for case in ET.fromstring(xml).iter("testcase"):
        classname, name = case.get("classname") or "", case.get("name") or ""
        jid = f"{classname}::{name}" if classname else name
        problem = case.find("error") if case.find("error") is not None else case.find("failure")
        line = case.get("line")
        out[jid] = CaseDetail(jid, case.get("file") or "", int(line) + 1 if line and line.isdigit() else 0, name,
                              (problem.text or "") if problem is not None else "",
                              (problem.get("message") or "") if problem is not None else "")
    return out


def nodeid_of(jid: str, files: set[str]) -> str | None:
    """A JUnit id back to the pytest node id, given the tree's files (the module is the longest dotted prefix of
    the classname that is a file)."""
    head, bracket, params = jid.partition("[")
    classname, _, name = head.rpartition("::")
    name += bracket + params
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if path in files:
            nodeid = "::".join([path, *parts[cut:], name])
            return nodeid if junit_id(nodeid) == jid else None
    return None


def base_name(test_name: str) -> str:
    return test_name.split("[", 1)[0]


def function_key(jid: str) -> str:
    """A test's id without its parameters: all cases of one test function (or method) share it."""
    return jid.split("[", 1)[0]


def _is_set_expr(node: ast.AST) -> bool:
    return isinstance(node, (ast.Set, ast.SetComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset"))


def set_parametrized(source: str) -> set[str]:
    """Test functions of a module parametrized over a set (a literal, a comprehension, ``set()``, or a module-level
    name bound to one): pytest numbers their cases in the set's iteration order, which for values like ``None``
    (hashed by address) changes from process to process, so their ids cannot name a case."""
    tree = ast.parse(source)
    set_names = {t.id for node in tree.body if isinstance(node, ast.Assign) and _is_set_expr(node.value)
                 for t in node.targets if isinstance(t, ast.Name)}
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize" and len(dec.args) >= 2:
                values = dec.args[1]
                if _is_set_expr(values) or (isinstance(values, ast.Name) and values.id in set_names):
                    out.add(node.name)
    return out


@dataclass
class Baseline:
    all_ids: set[str]  # every test id seen on the unchanged code
    stable: list[str]  # ids that passed on every run, of functions whose ids never changed, sorted
    unstable_functions: set[str]  # function keys whose case ids differ between runs (e.g. parametrized over a set)
    suite_s: float

    def known(self, jid: str) -> bool:
        return jid in self.all_ids or function_key(jid) in self.unstable_functions


class ProjectGenerator:
    def __init__(self, project: Project, seed: int, *, per_project: int, max_attempts: int, max_broken: int,
                 pass_to_pass: int, verify: bool = True):
        self.project, self.seed = project, seed
        self.per_project, self.max_attempts, self.max_broken = per_project, max_attempts, max_broken
        self.pass_to_pass, self.verify = pass_to_pass, verify
        self.repo = repos.upstream_repo(project)
        self.upstream = repos.upstream_commit(project)
        self.upstream_tree = repos.tree_of(self.repo, self.upstream)
        self.files = set(repos.list_files(self.repo, self.upstream))
        self.stats = defaultdict(int)

    # -- steps

    async def _suite(self, runner: TreeRunner, timeout: float):
        # --showlocals: the failures come with the test's variables (the problem statement reads them); -vvv after
        # the runner's -q is verbosity 2, at which pytest prints them in full
        return await runner.run([*self.project.test_args, "--showlocals", "-vvv"], timeout=timeout)

    async def baseline(self, runner: TreeRunner) -> Baseline:
        """The suite BASELINE_RUNS times on the unchanged code. A test is a candidate when it passed in most runs (one
        failure under load does not change the set, so the output stays the same), is not one of the project's
        ``unreliable`` tests, and its function's case ids were the same every time: ids built from the order of a set
        that holds ``None`` (whose hash is its address) differ from run to run, and such an id could not name the
        same test elsewhere."""
        runs, times = [], []
        for _ in range(BASELINE_RUNS):
            start = time.monotonic()
            run = await self._suite(runner, 600)
            times.append(time.monotonic() - start)
            if run.report.reason:
                raise RuntimeError(f"{self.project.key}: the test suite does not run: {run.report.reason}\n"
                                   f"{run.output_tail(2000)}")
            runs.append(run.report.outcomes())
        ids_per_function: dict[str, list[set[str]]] = defaultdict(lambda: [set() for _ in runs])
        for i, outcomes in enumerate(runs):
            for j in outcomes:
                ids_per_function[function_key(j)][i].add(j)
        unstable = {f for f, sets in ids_per_function.items() if any(s != sets[0] for s in sets)}
        # the same ids in a few runs can be luck: functions parametrized over a set are unstable whatever they showed
        by_file: dict[str, set[str]] = {}
        for f in ids_per_function:
            nodeid = nodeid_of(f, self.files)
            if nodeid is None:
                continue
            path = nodeid.split("::", 1)[0]
            if path not in by_file:
                by_file[path] = set_parametrized(repos.read_file(self.repo, self.upstream, path).decode("utf-8"))
            if nodeid.split("::")[-1] in by_file[path]:
                unstable.add(f)
        all_ids = set().union(*runs)
        stable = sorted(j for j in all_ids if function_key(j) not in unstable
                        and 2 * sum(r.get(j) == "passed" for r in runs) > len(runs)
                        and nodeid_of(j, self.files) and not self.project.unreliable_test(nodeid_of(j, self.files)))
        return Baseline(all_ids, stable, unstable, min(times))

    def candidates(self) -> list[tuple[str, Mutation]]:
        rng = random.Random(f"{self.seed}:{self.project.key}:order")
        groups: dict[str, list[tuple[str, Mutation]]] = {op: [] for op in OPERATORS}
        for path in self.mutable_files():
            source = repos.read_file(self.repo, self.upstream, path).decode("utf-8")
            for m in find_mutations(source):
                groups[m.operator].append((path, m))
        order = list(OPERATORS)
        rng.shuffle(order)
        for op in order:
            rng.shuffle(groups[op])
        out = []
        while any(groups.values()):
            for op in order:
                if groups[op]:
                    out.append(groups[op].pop(0))
        return out

    def mutable_files(self) -> list[str]:
        return sorted(f for f in self.files
                      if any(fnmatch.fnmatch(f, g) for g in self.project.mutable)
                      and not any(fnmatch.fnmatch(f, g) for g in self.project.immutable)
                      and not is_test_path(f))

    # -- one mutant

    async def try_mutant(self, runner: TreeRunner, work: Path, base: Baseline, path: str, mutation: Mutation,
                         index: int) -> SweInstance | None:
        pristine = repos.read_file(self.repo, self.upstream, path).decode("utf-8")
        mutated = apply_mutation(pristine, mutation)
        timeout = max(20.0, 6 * base.suite_s)  # a mutant that loops forever costs this much
        run = await self._with_files(runner, work, {path: mutated}, timeout)
        if run.timed_out or run.report.reason:
            self.stats["timeout_or_no_report"] += 1
            return None
        outcomes = run.report.outcomes()
        if any(j not in outcomes for j in base.stable) or any(not base.known(j) for j in outcomes):
            self.stats["collection_changed"] += 1  # an import or collection error, or tests that appear or vanish
            return None
        broken = [j for j in base.stable if outcomes[j] != "passed"]
        if not broken:
            self.stats["no_test_broken"] += 1
            return None
        if len(broken) > self.max_broken:
            self.stats["too_many_broken"] += 1
            return None
        # again: the same tests must break (a bug in code that draws random numbers, like RRCache's default
        # choice, breaks a different set each run; a test failing once under load would differ too)
        again = await self._with_files(runner, work, {path: mutated}, timeout)
        if again.timed_out or again.report.reason or \
                [j for j in base.stable if again.report.outcomes().get(j) != "passed"] != broken:
            self.stats["not_reproducible"] += 1
            return None
        details = case_details(run.xml)
        targets: dict[str, set[tuple[str, int]]] = defaultdict(set)
        for j in broken:
            d = details[j]
            if not d.file or not is_test_path(d.file) or d.file not in self.files:
                self.stats["unhideable_test"] += 1  # a doctest, or a test defined outside the test files
                return None
            targets[d.file].add((base_name(d.name), d.line))
        hidden_files = {}
        try:
            for file, funcs in sorted(targets.items()):
                source = repos.read_file(self.repo, self.upstream, file).decode("utf-8")
                hidden_files[file] = remove_functions(source, sorted(funcs))
        except ValueError:
            self.stats["unhideable_test"] += 1
            return None
        # the visible suite on the buggy base: nothing fails that passed upstream, the hidden tests are gone (a failure
        # is given one more run: a test can fail once on a loaded machine)
        for _ in range(2):
            at_base = await self._with_files(runner, work, {path: mutated, **hidden_files}, timeout)
            base_outcomes = at_base.report.outcomes()
            visible_ok = not (at_base.timed_out or at_base.report.reason
                              or not all(base.known(j) for j in base_outcomes)
                              or any(base_outcomes.get(j, "passed") != "passed" for j in base.stable)
                              or any(j in base_outcomes for j in broken))
            if visible_ok:
                break
        if not visible_ok:
            self.stats["visible_suite_breaks"] += 1
            return None
        return self.make_instance(index, path, mutation, mutated, hidden_files, broken, base_outcomes, base, details)

    async def _with_files(self, runner: TreeRunner, work: Path, files: dict[str, str], timeout: float):
        originals = {p: (work / p).read_bytes() for p in files}
        try:
            for p, text in files.items():
                (work / p).write_text(text, encoding="utf-8")
            return await self._suite(runner, timeout)
        finally:
            for p, data in originals.items():
                (work / p).write_bytes(data)

    def make_instance(self, index: int, path: str, mutation: Mutation, mutated: str, hidden_files: dict[str, str],
                      broken: list[str], base_outcomes: dict[str, str], base: Baseline,
                      details: dict[str, CaseDetail]) -> SweInstance:
        project = self.project
        instance_id = f"{project.id_prefix}-{index}"
        changes = {path: mutated.encode("utf-8"), **{f: t.encode("utf-8") for f, t in hidden_files.items()}}
        base_tree = repos.tree_with(self.repo, self.upstream_tree, changes)
        base_commit = repos.commit_tree(self.repo, base_tree, repos.base_message(project))
        patch = repos.diff_trees(self.repo, base_tree, self.upstream_tree, [path])
        test_patch = repos.diff_trees(self.repo, base_tree, self.upstream_tree, sorted(hidden_files))
        fail_to_pass = sorted(nodeid_of(j, self.files) for j in broken)
        # PASS_TO_PASS: visible tests passing on the base, from the FAIL_TO_PASS files first
        rng = random.Random(f"{self.seed}:{instance_id}:p2p")
        f2p_files = {t.split("::", 1)[0] for t in fail_to_pass}
        visible = sorted(nodeid_of(j, self.files) for j in base.stable if base_outcomes.get(j) == "passed")
        near = [t for t in visible if t.split("::", 1)[0] in f2p_files]
        far = [t for t in visible if t.split("::", 1)[0] not in f2p_files]
        picked = rng.sample(near, min(len(near), self.pass_to_pass))
        picked += rng.sample(far, min(len(far), self.pass_to_pass - len(picked)))
        pass_to_pass = sorted(picked)
        statement = self.statement(instance_id, broken, details, fail_to_pass)
        extra = {
            "source": {"pypi": project.requirement, "sdist_sha256": project.sha256, "license": project.license,
                       "upstream_commit": self.upstream},
            "mutation": {"operator": mutation.operator, "file": path, "line": mutation.line,
                         "function": mutation.function, "description": mutation.description},
            "generator": {"module": "swe-rl/swe_instances_builder.py", "seed": self.seed},
        }
        return SweInstance(instance_id=instance_id, repo=project.repo, base_commit=base_commit,
                           problem_statement=statement, FAIL_TO_PASS=tuple(fail_to_pass),
                           PASS_TO_PASS=tuple(pass_to_pass), test_patch=test_patch, patch=patch,
                           version=project.version, hints_text="", extra=extra)

    def statement(self, instance_id: str, broken: list[str], details: dict[str, CaseDetail], f2p: list[str]) -> str:
        """The issue text from the failing test that reads best (:func:`.statements.rank`; ties: the first id)."""
        symptoms = []
        for j in sorted(broken):
            d = details[j]
            source = repos.read_file(self.repo, self.upstream, d.file).decode("utf-8")
            failure = Failure(test_source=source, function=base_name(d.name), def_line=d.line, message=d.message,
                              text=d.text, test_file=d.file, package=self.project.package,
                              self_attrs=self.class_attributes(nodeid_of(j, self.files)))
            try:
                symptoms.append(analyse(failure))
            except (SyntaxError, ValueError) as e:  # an unusual test: another one may read better
                logger.debug("%s: cannot analyse %s: %s", instance_id, j, e)
        if not symptoms:
            d = details[sorted(broken)[0]]
            symptoms = [Symptom("other", "", None, error=(d.message or d.name).splitlines()[0])]
        best = min(enumerate(symptoms), key=lambda p: (rank(p[1]), p[0]))[1]
        rng = random.Random(f"{self.seed}:{instance_id}:statement")
        return write_statement(best, self.project.name, self.project.version, rng, more=len(f2p) > 1)

    def class_attributes(self, nodeid: str | None) -> dict[str, str]:
        """A unittest class's simple attributes (``Cache = RRCache``), from the file and class of the node id: a
        test method inherited from a mixin reads ``self.Cache``, a user writes ``RRCache``."""
        parts = (nodeid or "").split("::")
        if len(parts) < 3:
            return {}
        source = repos.read_file(self.repo, self.upstream, parts[0]).decode("utf-8")
        for node in ast.parse(source).body:
            if isinstance(node, ast.ClassDef) and node.name == parts[1]:
                return {s.targets[0].id: ast.get_source_segment(source, s.value) for s in node.body
                        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)}
        return {}

    async def verify_instance(self, instance: SweInstance) -> str:
        """'' when the instance checks out (gold resolves; at base F2P fail, P2P pass), else the problem."""
        gold = await run_instance(instance, instance.patch)
        if not gold.resolved:
            return f"the gold patch does not resolve it: {gold.reason}"
        bare = await run_instance(instance, None)
        if any(bare.outcomes.get(t) == "passed" for t in instance.FAIL_TO_PASS):
            return "a FAIL_TO_PASS test passes at base"
        if any(bare.outcomes.get(t) != "passed" for t in instance.PASS_TO_PASS):
            return "a PASS_TO_PASS test does not pass at base"
        return ""

    def schedule(self):
        """(index, (path, mutation), per-function limit) in the order mutants are tried: every candidate with at most
        one bug per function first, then the candidates left over with a second bug per function allowed (projects
        with few functions, like inflection, would run out otherwise)."""
        candidates = self.candidates()
        for limit in range(1, MAX_PER_FUNCTION + 1):
            for i, candidate in enumerate(candidates):
                yield i, candidate, limit

    async def run(self) -> list[SweInstance]:
        project = self.project
        work = Path(tempfile.mkdtemp(prefix=f"slime-swe-gen-{project.key}-"))
        kept: list[SweInstance] = []
        try:
            repos.export_tree(self.repo, self.upstream, work)
            runner = TreeRunner(work, project)
            try:
                base = await self.baseline(runner)
                logger.info("%s: %d tests, %d pass reliably; suite %.1f s", project.key, len(base.all_ids),
                            len(base.stable), base.suite_s)
                used: dict[tuple[str, str], int] = defaultdict(int)
                tried: set[int] = set()
                for i, (path, mutation), limit in self.schedule():
                    if len(kept) >= self.per_project or len(tried) >= self.max_attempts:
                        break
                    if i in tried or used[(path, mutation.function)] >= limit:
                        continue
                    tried.add(i)
                    instance = await self.try_mutant(runner, work, base, path, mutation, len(kept) + 1)
                    if instance is None:
                        continue
                    if self.verify:
                        problem = await self.verify_instance(instance)
                        if problem:
                            self.stats["failed_check"] += 1
                            logger.info("%s: dropped %s (%s)", project.key, mutation.description, problem)
                            continue
                    repos.git("update-ref", repos.instance_ref(instance.base_commit), instance.base_commit,
                              git_dir=self.repo)
                    used[(path, mutation.function)] += 1
                    kept.append(instance)
                    logger.info("%s: kept %s: %s in %s (%s), %d FAIL_TO_PASS", project.key, instance.instance_id,
                                mutation.operator, mutation.function, path, len(instance.FAIL_TO_PASS))
                self.stats["attempts"] = len(tried)
            finally:
                runner.close()
        finally:
            fs_tree.remove_tree(work)
        return kept


async def generate(seed: int = 0, projects: list[Project] | None = None, *, per_project: int = DEFAULT_PER_PROJECT,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS, max_broken: int = DEFAULT_MAX_BROKEN,
                   pass_to_pass: int = DEFAULT_PASS_TO_PASS, verify: bool = True) -> tuple[list[SweInstance], dict]:
    """Instances of every project (in the pins' order) and a summary {project: {kept, attempts, seconds, ...}}."""
    out: list[SweInstance] = []
    summary = {}
    for project in projects or list(PROJECTS):
        start = time.monotonic()
        gen = ProjectGenerator(project, seed, per_project=per_project, max_attempts=max_attempts,
                               max_broken=max_broken, pass_to_pass=pass_to_pass, verify=verify)
        kept = await gen.run()
        out += kept
        summary[project.name] = {"kept": len(kept), **dict(gen.stats), "seconds": round(time.monotonic() - start, 1)}
    return out, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSONL to write (default {DEFAULT_OUT})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projects", default="", help="comma-separated PyPI names (default: every pinned project)")
    parser.add_argument("--per-project", type=int, default=DEFAULT_PER_PROJECT)
    parser.add_argument("--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS, help="mutants tried per project")
    parser.add_argument("--max-broken", type=int, default=DEFAULT_MAX_BROKEN)
    parser.add_argument("--pass-to-pass", type=int, default=DEFAULT_PASS_TO_PASS)
    parser.add_argument("--no-verify", action="store_true", help="skip the final check of each instance")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s",
                        stream=sys.stderr)
    projects = [get_project(n.strip()) for n in args.projects.split(",") if n.strip()] or None
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    start = time.monotonic()
    instances, summary = asyncio.run(generate(args.seed, projects, per_project=args.per_project,
                                              max_attempts=args.max_attempts, max_broken=args.max_broken,
                                              pass_to_pass=args.pass_to_pass, verify=not args.no_verify))
    save_instances(args.out, instances)
    total = time.monotonic() - start
    for name, s in summary.items():
        print(f"{name:12s} {s}", file=sys.stderr)
    print(f"wrote {len(instances)} instances to {args.out} in {total:.0f} s (seed {args.seed})", file=sys.stderr)
    return 0 if instances else 1


if __name__ == "__main__":
    sys.exit(main())
