"""The shipped SWE instances (swe-rl/data/instances.jsonl): their shape, the check of every one of them (gold
resolves, empty does not, FAIL_TO_PASS fail and PASS_TO_PASS pass at base; about 40 s for the 47 on 2 cores), and
that the generator gives the same rows again."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.swe.check import DEFAULT_INSTANCES, check_instances
from swe_instances_builder import generate
from slime.agentic.swe.instances import dumps_instance, load_instances
from slime.agentic.swe.patches import is_test_path, patch_paths, validate_patch
from slime.agentic.swe.projects import PROJECTS, get_project

_CAP = sb.detect_capability("bwrap")
needs_sandbox = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


@pytest.fixture(scope="module")
def instances():
    return load_instances(DEFAULT_INSTANCES)


def test_shipped_set_shape(instances):
    assert len(instances) >= 40
    per_repo = Counter(i.repo for i in instances)
    assert set(per_repo) == {p.repo for p in PROJECTS}
    assert max(per_repo.values()) <= 0.4 * len(instances)
    for inst in instances:
        project = get_project(inst.repo)
        assert inst.version == project.version
        assert 1 <= len(inst.FAIL_TO_PASS) <= 10 and len(inst.PASS_TO_PASS) <= 20
        assert not set(inst.FAIL_TO_PASS) & set(inst.PASS_TO_PASS)
        assert validate_patch(inst.patch, project.import_roots).ok  # the gold fix passes the sealed rules
        assert all(is_test_path(p) for p in patch_paths(inst.test_patch)[0])
        assert inst.instance_id.startswith(project.id_prefix + "-")
        # the statement is written from the behaviour: no changed line of the fix appears in it
        changed = [line[1:].strip() for line in inst.patch.splitlines()
                   if line[:1] in "+-" and not line.startswith(("+++", "---")) and len(line[1:].strip()) > 12]
        assert not any(c in inst.problem_statement for c in changed), inst.instance_id
        assert project.name in inst.problem_statement and "```" in inst.problem_statement


@needs_sandbox
def test_check_every_shipped_instance(instances):
    results = asyncio.run(check_instances(instances, concurrency=2))
    assert all(c.ok for c in results), "\n".join(c.line() for c in results if not c.ok)


@needs_sandbox
def test_generation_gives_the_shipped_rows_again(instances):
    """The same seed gives the same bytes: the first two inflection instances, regenerated."""
    project = get_project("inflection")
    shipped = [i for i in instances if i.repo == project.repo][:2]
    made, _ = asyncio.run(generate(0, [project], per_project=2))
    assert [dumps_instance(i) for i in made] == [dumps_instance(i) for i in shipped]
