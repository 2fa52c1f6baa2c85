"""The SWE setting's CPU script (`--dry-run`): the layout line, the setting, a command the trainer accepts, and the
training rows it writes from the instances; the entry point `run_swe_agent.sh`: which script it picks, and what each
`--benchmark` hands it. (The GPU script's own checks: tests/unit/test_launch_scripts.py.)"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "swe-rl/run_cpu_smollm2_swe.sh"
ENTRY = "swe-rl/run_swe_agent.sh"
UNSET = ("DRY_RUN", "ENV_SERVER_URL", "FORCE_DEVICE", "INSTANCES", "PROMPT_DATA", "SWE_BACKEND", "SWE_IMAGE",
         "SWE_BENCH_LITE", "HF_CKPT", "SAMPLE_UNIT", "SFT_DATA", "EVAL", "EVAL_DATA", "MAX_STEPS", "RUN_DIR")


def _run(*argv: str, script: str = SCRIPT, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in UNSET}
    full.update({"OMP_NUM_THREADS": "1"}, **env)
    return subprocess.run(["bash", script, *argv], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


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
    assert args.custom_generate_function_path == "generate_with_swe_remote.generate"
    shipped = (REPO / "swe-rl" / "data" / "instances.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in Path(args.prompt_data).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(shipped) and Path(args.swe_instances).samefile(REPO / "swe-rl/data/instances.jsonl")
    assert rows[0]["metadata"]["instance"]["instance_id"] == json.loads(shipped[0])["instance_id"]
    attached = _run("--dry-run", RUN_DIR=str(tmp_path / "run"), ENV_SERVER_URL="http://127.0.0.1:18090")
    assert "environments: http://127.0.0.1:18090" in attached.stdout


def _instances_flag(done: subprocess.CompletedProcess) -> tuple[Path, list[str]]:
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    return Path(words[words.index("--swe-instances") + 1]), words


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_entry_point_picks_the_cpu_or_the_gpu_script_and_says_which(device, tmp_path):
    env = dict(FORCE_DEVICE=device, RUN_DIR=str(tmp_path / "run"), HF_CKPT=str(tmp_path))  # any existing folder
    if device == "cpu":
        env.pop("HF_CKPT")
    for argv in ([], ["--benchmark", "local"], ["--benchmark=local"]):
        done = _run(*argv, "--dry-run", script=ENTRY, **env)
        script = "run_cpu_smollm2_swe.sh" if device == "cpu" else "run_qwen3_8b_swe.sh"
        kind = device.upper()
        assert (f"FORCE_DEVICE={device}: running the {kind} script swe-rl/{script} on the shipped instances "
                "(swe-rl/data/instances.jsonl)") in done.stderr
        instances, words = _instances_flag(done)
        assert instances.resolve() == (REPO / "swe-rl/data/instances.jsonl").resolve()
        assert words[0] == ("python" if device == "cpu" else "torchrun") and "--dry-run" not in words
        assert "--swe-image" not in words


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_entry_point_benchmark_path_reaches_the_instances_flag(device, tmp_path):
    mine = tmp_path / "mine.jsonl"
    shutil.copy(REPO / "swe-rl/data/instances.jsonl", mine)
    done = _run("--dry-run", "--benchmark", str(mine), "--lr", "3e-6", script=ENTRY, FORCE_DEVICE=device,
                RUN_DIR=str(tmp_path / "run"), HF_CKPT=str(tmp_path))
    assert f"on the instances of {mine}" in done.stderr
    instances, words = _instances_flag(done)
    assert instances == mine and words[-2:] == ["--lr", "3e-6"]
    rows = (tmp_path / "run" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == len(mine.read_text(encoding="utf-8").splitlines())
    missing = _run("--dry-run", "--benchmark", str(tmp_path / "none.jsonl"), script=ENTRY, FORCE_DEVICE=device)
    assert missing.returncode == 2 and "none.jsonl: no such file" in missing.stderr


def test_entry_point_swe_bench_lite_needs_the_dataset_and_says_how(tmp_path):
    for env, why in ((dict(), "SWE_BENCH_LITE is not set"),
                     (dict(SWE_BENCH_LITE=str(tmp_path / "lite.jsonl")), "is not a file")):
        done = _run("--benchmark", "swe-bench-lite", "--dry-run", script=ENTRY, FORCE_DEVICE="cpu", **env)
        assert done.returncode == 2 and why in done.stderr and not done.stdout
        assert "--benchmark swe-bench-lite needs the dataset file and SWE-bench's Docker images" in done.stderr
        assert "load_dataset('princeton-nlp/SWE-bench_Lite', split='test').to_json(" in done.stderr
        assert "swebench/sweb.eval.x86_64.<instance id with __ replaced by _1776_>:latest" in done.stderr
        assert "docker save" in done.stderr and "docker load" in done.stderr
    lite = tmp_path / "lite.jsonl"  # SWE-bench Lite's rows are SWE-bench's format: the shipped ones stand in
    shutil.copy(REPO / "swe-rl/data/instances.jsonl", lite)
    for device in ("cpu", "gpu"):
        done = _run("--benchmark", "swe-bench-lite", "--dry-run", script=ENTRY, FORCE_DEVICE=device,
                    SWE_BENCH_LITE=str(lite), RUN_DIR=str(tmp_path / "run"), HF_CKPT=str(tmp_path))
        assert "on SWE-bench Lite" in done.stderr
        instances, words = _instances_flag(done)
        assert instances == lite
        assert words[words.index("--swe-backend") + 1] == "docker"
        assert words[words.index("--swe-image") + 1] == "swebench"
        assert "backend docker, image swebench" in done.stdout


@pytest.mark.parametrize("argv", [["--benchmark", "swe-bench-verified"], ["--benchmark=x.json"], ["--benchmark"]])
def test_entry_point_rejects_a_bad_benchmark_with_its_usage(argv):
    done = _run(*argv, script=ENTRY, FORCE_DEVICE="cpu")
    assert done.returncode == 2 and not done.stdout
    assert ("--benchmark must be local, swe-bench-lite or a PATH.jsonl, got '" in done.stderr
            or "--benchmark needs a value" in done.stderr)
    assert "bash swe-rl/run_swe_agent.sh [--benchmark local|swe-bench-lite|PATH.jsonl]" in done.stderr


def test_cpu_script_trains_one_sample_per_trajectory_when_asked(tmp_path):
    done = _run("--dry-run", SAMPLE_UNIT="trajectory", RUN_DIR=str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert "one sample per trajectory" in done.stdout
    args = parse_args(shlex.split(done.stdout.strip().splitlines()[-1])[2:], mode="async", world_size=1)
    assert not args.dynamic_history
    bad = _run("--dry-run", SAMPLE_UNIT="turn", RUN_DIR=str(tmp_path / "run"))
    assert bad.returncode == 2 and "SAMPLE_UNIT must be step or trajectory" in bad.stderr


def test_sft_script_dry_run_trains_demonstration_rows_and_evaluates_through_the_loop(tmp_path):
    demos = tmp_path / "demos.jsonl"
    demos.write_text(json.dumps({"prompt": [{"role": "user", "content": "x"}],
                                 "metadata": {"segments": [{"text": "THOUGHT: y\n\n```bash\nls\n```", "loss": 1}]}})
                     + "\n")
    done = _run("--dry-run", script="swe-rl/run_cpu_smollm2_swe_sft.sh", SFT_DATA=str(demos), EVAL="1",
                MAX_STEPS="3", RUN_DIR=str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    setting, command = done.stdout.strip().splitlines()[-2:]
    assert setting.startswith(f"SFT warm start: 32 steps of 8 demonstration steps from {demos}")
    args = parse_args(shlex.split(command)[2:], mode="sync", world_size=1)
    assert args.loss_type == "sft_loss" and (args.input_key, args.eval_input_key) == ("prompt", "text")
    assert args.custom_generate_function_path == "generate_with_swe_remote.generate" and args.max_turns == 3
    # the evaluation rows default to every instance's training rows, written into the run folder
    rows = (tmp_path / "run" / "train.jsonl").read_text().splitlines()
    assert len(rows) == 47 and json.loads(rows[0])["metadata"]["instance"]["instance_id"]
