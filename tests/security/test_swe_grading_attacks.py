"""Adversarial SWE patches (issue 37): on every shipped instance, a patch that fixes nothing but adds code to the
module the gold patch changes (so the hidden tests import it inside pytest's process) tries to make every test read
as passed: by replacing pytest's report constructor, or by registering a plugin that rewrites each report (and
printing a passing summary). Neither may resolve the instance; both are scored as tampering."""

from __future__ import annotations

import asyncio
import re

import pytest

from helpers.hostile import SWE_PLUGIN_PATCH, SWE_REPORT_PATCH
from slime.agentic import sandbox as sb
from slime.agentic.swe import repos
from slime.agentic.swe.check import DEFAULT_INSTANCES
from slime.agentic.swe.evaluate import evaluate_patch, working_tree_diff
from slime.agentic.swe.instances import load_instances

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

INSTANCES = load_instances(DEFAULT_INSTANCES)


def _hostile_patch(inst, where, code: str) -> str:
    """The diff of a fresh checkout where `code` was appended to the first file the gold patch changes."""
    target = re.search(r"^\+\+\+ b/(\S+)", inst.patch, re.M).group(1)
    tree = repos.checkout(inst, where)
    with open(tree / target, "a") as f:
        f.write(code)
    return working_tree_diff(tree, inst)


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.instance_id for i in INSTANCES])
def test_a_patch_that_forges_pytests_reports_resolves_nothing(inst, tmp_path):
    # alternate the two attacks over the instances (each is also run on the first instance below); both every 2nd
    code = SWE_REPORT_PATCH if INSTANCES.index(inst) % 2 == 0 else SWE_PLUGIN_PATCH
    result = asyncio.run(evaluate_patch(inst, _hostile_patch(inst, tmp_path / "tree", code)))
    assert not result.resolved, result.as_dict()
    assert result.tampered, result.reason


@pytest.mark.parametrize("code, why", [(SWE_REPORT_PATCH, "replaced"), (SWE_PLUGIN_PATCH, "registered during the run")])
def test_each_attack_is_named_as_tampering(code, why, tmp_path):
    inst = INSTANCES[0]
    result = asyncio.run(evaluate_patch(inst, _hostile_patch(inst, tmp_path / "tree", code)))
    assert not result.resolved and result.tampered and why in result.reason, result.reason
