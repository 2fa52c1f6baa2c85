"""A conversation method's name resolves to its folder's module: from the Python path first (a fork on
`--extra-python-path` runs its own copy), else from the checkout's folder, which then goes on the path of the
processes started from there (the trainer ranks load Combine's loss from the same folder). Each case runs in a
fresh interpreter, since the test process already has every method folder on its path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import json, os, sys
    from slime.utils.arguments import parse_args
    from slime.utils.misc import load_function
    argv = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "2", "--num-rollout", "1",
            "--disable-rollout-global-dataset", "--conversation-method", sys.argv[1], *sys.argv[2:]]
    try:
        args = parse_args(argv)
    except BaseException as exc:  # ArgumentError is a SystemExit-like error with the message
        print(json.dumps({"error": str(exc)}))
        raise SystemExit(0)
    from slime.conversation.methods import load_method
    method = load_method(args.conversation_method)
    loss = load_function(args.custom_loss_function_path) if args.custom_loss_function_path else None
    print(json.dumps({"method_file": sys.modules[type(method).__module__].__file__,
                      "loss_file": sys.modules[loss.__module__].__file__ if loss else None,
                      "pythonpath": os.environ.get("PYTHONPATH", "").split(os.pathsep)}))
""")


def _probe(method: str, *flags: str, env: dict | None = None) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLIME_ROOT")}
    result = subprocess.run([sys.executable, "-c", PROBE, method, *flags], capture_output=True, text=True,
                            timeout=120, cwd="/", env={**clean, "OMP_NUM_THREADS": "1", **(env or {})})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_name_resolves_to_the_checkout_folder_and_its_children_inherit_it():
    got = _probe("combine")
    folder = str(REPO / "openclaw-combine")
    assert got["method_file"] == os.path.join(folder, "openclaw_combine_method.py")
    assert got["loss_file"] == os.path.join(folder, "combine_loss.py")
    assert folder in got["pythonpath"]  # the trainer ranks and the proxy find the same folder
    assert _probe("binary_rl")["method_file"] == str(REPO / "openclaw-rl" / "openclaw_rl_method.py")


def test_a_fork_on_the_extra_python_path_runs_its_own_copy(tmp_path):
    fork = tmp_path / "my-combine"
    shutil.copytree(REPO / "openclaw-combine", fork, ignore=shutil.ignore_patterns("__pycache__"))
    got = _probe("combine", "--extra-python-path", str(fork))
    assert got["method_file"] == str(fork / "openclaw_combine_method.py")
    assert got["loss_file"] == str(fork / "combine_loss.py")
    assert str(REPO / "openclaw-combine") not in got["pythonpath"]


def test_a_missing_method_folder_is_a_clear_error(tmp_path):
    got = _probe("opd", env={"SLIME_ROOT": str(tmp_path)})
    assert "openclaw_opd_method.py not found" in got["error"] and "openclaw-opd" in got["error"]
