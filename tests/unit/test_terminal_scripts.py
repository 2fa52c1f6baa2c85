"""The terminal setting's CPU script and entry point (`--dry-run`): the layout line, the setting, a command the
trainer accepts, and which script the entry point picks."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]


def _run(script: str, *argv: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "ENV_SERVER_URL", "FORCE_DEVICE")}
    full.update({"OMP_NUM_THREADS": "1"}, **env)
    return subprocess.run(["bash", script, *argv], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


def test_cpu_script_dry_run_prints_the_setting_and_a_valid_command():
    done = _run("terminal-rl/run_cpu_smollm2_terminal.sh", "--dry-run", "--lr", "3e-6", MAX_STEPS="4")
    assert done.returncode == 0, done.stderr
    layout, setting, command = done.stdout.strip().splitlines()[-3:]
    assert layout.startswith("layout: CPU, 1 trainer process") and "environment service" in layout
    assert setting.startswith("terminal RL: 4 tasks x 4 episodes per rollout, at most 4 turns, one sample per turn; "
                              "environments: 1 pool server(s) started by the trainer (terminal, tasks ")
    words = shlex.split(command)
    args = parse_args(words[2:], mode="async", world_size=1)
    assert args.lr == 3e-6 and args.dynamic_history and args.input_key == "task" and args.max_turns == 4
    assert Path(args.prompt_data).is_file() and Path(args.terminal_tasks_dir).is_dir()
    attached = _run("terminal-rl/run_cpu_smollm2_terminal.sh", "--dry-run", ENV_SERVER_URL="http://127.0.0.1:18080")
    assert "environments: http://127.0.0.1:18080" in attached.stdout


def test_entry_point_picks_the_cpu_or_the_gpu_script_and_says_which():
    cpu = _run("terminal-rl/run_terminal_agent.sh", "--dry-run", FORCE_DEVICE="cpu")
    assert cpu.returncode == 0 and "running the CPU script terminal-rl/run_cpu_smollm2_terminal.sh" in cpu.stderr
    assert "python slime/train_async.py" in cpu.stdout
    gpu = _run("terminal-rl/run_terminal_agent.sh", "--dry-run", FORCE_DEVICE="gpu", HF_CKPT="tiny")
    assert gpu.returncode == 0 and "running the GPU script terminal-rl/run_qwen3_8b_terminal.sh" in gpu.stderr
    assert "torchrun" in gpu.stdout.splitlines()[-1]


def test_sft_warm_start_dry_run_trains_on_the_demonstrations_and_evaluates_through_the_loop():
    done = _run("terminal-rl/run_cpu_smollm2_terminal_sft.sh", "--dry-run", EVAL="1")
    assert done.returncode == 0, done.stderr
    setting, command = done.stdout.strip().splitlines()[-2:]
    assert setting.startswith("SFT warm start: 32 steps of 8 demonstration turns from ") and "evaluated on heldout" in setting
    args = parse_args(shlex.split(command)[2:], mode="sync", world_size=1)
    assert args.loss_type == "sft_loss" and args.rollout_function_path == "slime.rollout.sft_rollout.generate_rollout"
    assert Path(args.prompt_data).name == "sft_demos.jsonl" and Path(args.prompt_data).is_file()
    assert args.custom_generate_function_path == "generate.generate" and args.dynamic_history
    assert args.extra_python_path == [str(REPO / "terminal-rl")]  # the folder's own generate.py


def test_a_copied_folder_with_its_own_tasks_sets_up_with_its_own_code_tasks_data_and_run_directory(tmp_path):
    """What a researcher does: copy the folder, swap its tasks for one of their own, point the data at it."""
    import json
    import shutil

    from slime.agentic.terminal.tasks import load_task

    fork = tmp_path / "my-term"
    shutil.copytree(REPO / "terminal-rl", fork, ignore=shutil.ignore_patterns("__pycache__", "tasks"))
    shutil.copytree(REPO / "terminal-rl" / "tasks" / "count-error-lines", fork / "tasks" / "count-warnings")
    (fork / "data" / "train.jsonl").write_text(json.dumps({"task": {
        "task_name": "count-warnings", "task_path": "count-warnings",
        "instruction": load_task(fork / "tasks" / "count-warnings").instruction}}) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "ENV_SERVER_URL", "FORCE_DEVICE", "RUN_DIR")}
    done = subprocess.run(["bash", str(fork / "run_cpu_smollm2_terminal.sh"), "--dry-run"], cwd=tmp_path,
                          env={**env, "SLIME_ROOT": str(REPO), "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    args = parse_args(shlex.split(done.stdout.strip().splitlines()[-1])[2:], mode="async", world_size=1)
    assert args.extra_python_path == [str(fork)]  # the copy's generate.py, put on every process's path
    assert (args.custom_generate_function_path, args.custom_rm_path) == ("generate.generate", "generate.reward_func")
    assert args.terminal_tasks_dir == str(fork / "tasks") and args.run_dir == "runs/my-term-cpu"
    assert args.prompt_data == str(fork / "data" / "train.jsonl")
    assert args.eval_prompt_data == ["heldout", str(fork / "data" / "heldout.jsonl")]
    row = json.loads(Path(args.prompt_data).read_text())
    assert load_task(Path(args.terminal_tasks_dir) / row["task"]["task_path"]).name == "count-warnings"
