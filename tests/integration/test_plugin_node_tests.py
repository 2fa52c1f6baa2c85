"""The OpenClaw plugin's own Node tests (`extensions/rl-training-headers`: `npm test` = the TypeScript build, then
`node --test` over the header logic for main turns, tool follow-ups, compaction, heartbeat, session end and failing
open) as part of the default test run, in a copy of the plugin's folder (the checkout stays clean). Node 24 from
`scripts/setup_openclaw.sh` when installed, else the `node` on PATH; npm fetches the two build dependencies
(typescript, @types/node) from its cache or the registry. Skipped, saying why, without node and npm."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "extensions" / "rl-training-headers"
SOURCES = ("package.json", "package-lock.json", "tsconfig.json", "openclaw.plugin.json", "src", "test")


def _node_path() -> str | None:
    """A PATH whose node and npm run the plugin's build: OpenClaw's Node 24 first when it is installed."""
    from e2e.openclaw_harness import find_openclaw

    found = find_openclaw()
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if found is not None:
        path = f"{found[1]}{os.pathsep}{path}"
    if shutil.which("node", path=path) is None or shutil.which("npm", path=path) is None:
        return None
    return path


def test_the_plugins_node_tests_pass(tmp_path):
    path = _node_path()
    if path is None:
        pytest.skip("no node and npm on PATH (bash scripts/setup_openclaw.sh installs Node 24)")
    work = tmp_path / "rl-training-headers"
    work.mkdir()
    for name in SOURCES:
        source = PLUGIN / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    env = {**os.environ, "PATH": path, "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false"}
    install = subprocess.run(["npm", "ci", "--prefer-offline", "--ignore-scripts", "--loglevel=error"], cwd=work,
                             env=env, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    done = subprocess.run(["npm", "test"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    # node's test runner summary (`ℹ tests 13` from the spec reporter, `# tests 13` from TAP): every test passed
    summary = {line.split()[1]: int(line.split()[2]) for line in out.splitlines()
               if line.startswith(("# ", "ℹ ")) and len(line.split()) == 3 and line.split()[2].isdigit()}
    assert summary.get("tests", 0) >= 13 and summary.get("pass") == summary["tests"], out[-2000:]
    assert summary.get("fail") == 0 and summary.get("skipped", 0) == 0
