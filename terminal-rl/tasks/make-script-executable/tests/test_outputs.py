import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SCRIPT = Path("/app/deploy.sh")


def test_owner_can_execute():
    assert os.stat(SCRIPT).st_mode & 0o100, "deploy.sh is not executable"


def test_shebang_runs_bash():
    first = SCRIPT.read_text().splitlines()[0]
    assert first in ("#!/bin/bash", "#!/usr/bin/env bash", "#!/usr/bin/bash"), first


def test_script_runs_directly():
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d, "deploy.sh")
        shutil.copy2(SCRIPT, copy)  # run a copy so the test does not write into /app
        out = subprocess.run([str(copy)], capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "deployed 3 targets"
        assert Path(d, "release/deploy.txt").read_text() == "deployed to web1\ndeployed to web2\ndeployed to web3\n"


def test_body_unchanged():
    lines = SCRIPT.read_text().splitlines()
    assert lines[0] != "#!/bin/bsh"
    assert lines[1:] == [
        "# Deploys the site: writes a release marker. Uses bash arrays, so it needs bash.",
        "set -eu",
        "targets=(web1 web2 web3)",
        'mkdir -p "$(dirname "$0")/release"',
        'for t in "${targets[@]}"; do',
        '  echo "deployed to $t" >> "$(dirname "$0")/release/deploy.txt"',
        "done",
        'echo "deployed ${#targets[@]} targets"',
    ]
