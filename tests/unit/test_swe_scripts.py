"""The SWE setting's CPU script (`--dry-run`): the layout line, the setting, a command the trainer accepts, and the
training rows it writes from the instances."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "swe-rl/run_cpu_smollm2_swe.sh"


def _run(*argv: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "ENV_SERVER_URL", "FORCE_DEVICE")}
    full.update({"OMP_NUM_THREADS": "1"}, **env)
    return subprocess.run(["bash", SCRIPT, *argv], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


def test_cpu_script_dry_run_writes_the_training_rows_and_prints_a_valid_command(tmp_path):
    done = _run("--dry-run", "--lr", "3e-6", MAX_STEPS="5", RUN_DIR=str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    layout, setting, command = done.stdout.strip().splitlines()[-3:]
    assert layout.startswith("layout: CPU, 1 trainer process") and "environment service" in layout
    assert setting.startswith("SWE RL: 2 instances x 4 episodes per rollout, at most 5 steps, one sample per step; "
                              "environments: 1 pool server(s) started by the trainer (swe, instances ")
    args = parse_args(shlex.split(command)[2:], mode="async", world_size=1)
    assert args.lr == 3e-6 and args.dynamic_history and args.max_turns == 5 and args.env_provider == "swe"
    assert (args.input_key, args.metadata_key) == ("text", "metadata")
    assert args.custom_generate_function_path == "slime.agentic.swe.agent.generate"
    shipped = (REPO / "swe-rl" / "data" / "instances.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in Path(args.prompt_data).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(shipped) and Path(args.swe_instances).samefile(REPO / "swe-rl/data/instances.jsonl")
    assert rows[0]["metadata"]["instance"]["instance_id"] == json.loads(shipped[0])["instance_id"]
    attached = _run("--dry-run", RUN_DIR=str(tmp_path / "run"), ENV_SERVER_URL="http://127.0.0.1:18090")
    assert "environments: http://127.0.0.1:18090" in attached.stdout
