"""The GUI setting's scripts (`--dry-run`): the screenshot CPU script under torchrun, the Qwen3-VL GPU script's layout
and flags (with and without the VLM step judge), and which script the entry point picks for a device and a model."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
ENTRY = "gui-rl/run_gui_agent.sh"
CLEAN = ("DRY_RUN", "ENV_SERVER_URL", "FORCE_DEVICE", "HF_CKPT", "TRAINER_PROCS", "STEP_JUDGE", "PRM_CKPT", "MAX_PIXELS",
         "NUM_GPUS", "ACTOR_GPUS", "ROLLOUT_GPUS", "PRM_GPUS", "ROLLOUT_TP", "PRM_TP", "TRAIN_TP", "CUDA_VISIBLE_DEVICES")


def _run(script: str, *argv: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in CLEAN}
    full.update({"OMP_NUM_THREADS": "1"}, **env)
    return subprocess.run(["bash", script, *argv], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


def test_the_screenshot_cpu_script_runs_two_torchrun_ranks(tmp_path):
    done = _run("gui-rl/run_cpu_tiny_vlm_gui.sh", "--dry-run", "--lr", "3e-6", RUN_DIR=str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    layout, setting, command = done.stdout.strip().splitlines()[-3:]
    assert layout.startswith("layout: CPU, 2 trainer processes (torchrun ranks")
    assert setting.startswith("GUI RL (screenshots, tiny-vlm): 2 tasks x 2 episodes per rollout, at most 4 steps, one "
                              "sample per step with its screenshots (at most 230400 pixels each); environments: 1 pool")
    words = shlex.split(command)
    assert words[:4] == ["torchrun", "--nproc_per_node=2", "--master_port", "PORT"]
    args = parse_args(words[5:], mode="async", world_size=2)
    assert args.hf_checkpoint == "tiny-vlm" and args.gui_observation == "screenshot" and args.lr == 3e-6
    assert args.gui_screenshot_max_pixels == 230400 and args.dynamic_history and args.env_provider == "gui"
    single = _run("gui-rl/run_cpu_tiny_vlm_gui.sh", "--dry-run", RUN_DIR=str(tmp_path / "run"), TRAINER_PROCS="1")
    assert shlex.split(single.stdout.strip().splitlines()[-1])[:2] == ["python", "slime/train_async.py"]
    bad = _run("gui-rl/run_cpu_tiny_vlm_gui.sh", "--dry-run", RUN_DIR=str(tmp_path / "run"), TRAINER_PROCS="two")
    assert bad.returncode == 2 and "TRAINER_PROCS must be a positive integer" in bad.stderr


def _torchrun_argv(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    assert words[0] == "torchrun"
    return words[words.index("slime/train_async.py") + 1:]


@pytest.mark.parametrize("judge", [False, True], ids=["outcome", "vlm-prm"])
def test_the_gpu_script_layout_and_flags(judge, tmp_path, monkeypatch):
    env = dict(STEP_JUDGE="llm", PRM_CKPT=str(tmp_path)) if judge else {}
    done = _run("gui-rl/run_qwen3vl_8b_gui.sh", "--dry-run", HF_CKPT=str(tmp_path), RUN_DIR=str(tmp_path / "run"),
                **env)
    argv = _torchrun_argv(done)
    out = done.stdout
    assert out.splitlines()[0].startswith("GUI RL (screenshots): 4 tasks x 8 episodes per rollout, at most 30 steps of "
                                          "512 tokens, one sample per step with its screenshots; environments: 4 pool")
    assert "trainer: 4 rank(s) = 1 node(s) x 4, local GPUs [0,1,2,3]" in out
    engines = 3 if judge else 4
    assert f"policy engines: {engines} x 1 GPU(s)" in out
    assert ("prm-0: node 0 GPUs [7] CUDA_VISIBLE_DEVICES=7" in out) == judge
    monkeypatch.chdir(REPO)
    args = parse_args(argv, mode="async", world_size=4)
    assert args.gui_observation == "screenshot" and args.gui_screenshot_max_pixels is None
    assert args.custom_generate_function_path == "generate_with_gui.generate" and args.env_provider == "gui"
    assert args.extra_python_path == [str(REPO / "gui-rl")] and args.gui_apps_dir == str(REPO / "gui-rl" / "apps")
    assert args.dynamic_history and args.max_turns == 30 and args.rollout_max_response_len == 512
    assert (args.num_rollout, args.rollout_batch_size, args.n_samples_per_prompt) == (1000, 4, 8)
    assert args.tensor_model_parallel_size == 1 and args.rollout_num_gpus_per_engine == 1
    assert args.rotary_base == 5e6 and args.sglang_mem_fraction_static == 0.85 and args.rollout_engine == "sglang"
    assert args.eval_temperature == 0 and args.eval_reward_key == "acc"
    rows = [json.loads(line) for line in Path(args.prompt_data).read_text().splitlines()]
    assert len(rows) == 31 and all("/" in r["prompt"] for r in rows)
    if judge:
        assert args.step_judge == "llm" and args.advantage_estimator == "step_wise" and args.prm_enable
        assert (args.prm_num_gpus, args.prm_m, args.prm_model_path) == (1, 1, str(tmp_path))
    else:
        assert args.step_judge is None and args.advantage_estimator == "grpo" and not args.prm_enable


@pytest.mark.parametrize("model, script, words", [
    (None, "run_cpu_smollm2_gui_text.sh", "with smollm2 (a text model: the OCR text view)"),
    ("tiny", "run_cpu_smollm2_gui_text.sh", "with tiny (a text model: the OCR text view)"),
    ("tiny-vlm", "run_cpu_tiny_vlm_gui.sh", "with tiny-vlm (a vision-language model: screenshots)"),
])
def test_entry_point_picks_the_cpu_script_by_the_model(model, script, words, tmp_path):
    argv = ["--model", model] if model else []
    done = _run(ENTRY, *argv, "--dry-run", FORCE_DEVICE="cpu", RUN_DIR=str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert f"FORCE_DEVICE=cpu: running the CPU script gui-rl/{script} {words}" in done.stderr
    command = shlex.split(done.stdout.strip().splitlines()[-1])
    assert command[command.index("--hf-checkpoint") + 1] == (model or "smollm2")


def test_entry_point_reads_a_model_folder_and_needs_a_model_on_a_gpu(tmp_path):
    folder = tmp_path / "vlm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"vision_config": {"depth": 2}, "image_token_id": 5}))
    done = _run(ENTRY, f"--model={folder}", "--dry-run", FORCE_DEVICE="cpu", RUN_DIR=str(tmp_path / "run"))
    assert "running the CPU script gui-rl/run_cpu_tiny_vlm_gui.sh" in done.stderr
    empty = _run(ENTRY, "--model", str(tmp_path / "run"), "--dry-run", FORCE_DEVICE="cpu")
    assert empty.returncode == 2 and "holds no config.json" in empty.stderr
    gpu = _run(ENTRY, "--dry-run", FORCE_DEVICE="gpu")
    assert gpu.returncode == 2 and "the GPU script needs the model" in gpu.stderr
    gpu = _run(ENTRY, "--model", str(folder), "--dry-run", FORCE_DEVICE="gpu", RUN_DIR=str(tmp_path / "run"))
    assert f"running the GPU script gui-rl/run_qwen3vl_8b_gui.sh with {folder} (screenshots)" in gpu.stderr
    assert _torchrun_argv(gpu)[:2] == ["--hf-checkpoint", str(folder)]


def test_a_copied_folder_with_its_own_apps_sets_up_with_its_own_code_tasks_and_apps(tmp_path, monkeypatch):
    """What a researcher does: copy the folder and change one of its apps; the copy's script, its loop and the
    desktops its pool servers start use the copy's code, tasks and apps (setup only: no desktop starts)."""
    import importlib.util
    import shutil
    import sys

    from slime.agentic.env_service.providers import LeaseContext
    from slime.agentic.gui.provider import GuiProvider

    fork = tmp_path / "my-gui"
    shutil.copytree(REPO / "gui-rl", fork, ignore=shutil.ignore_patterns("__pycache__"))
    notes = fork / "apps" / "notes.py"
    notes.write_text(notes.read_text() + "\n# the fork's own notes app\n")
    env = {k: v for k, v in os.environ.items() if k not in CLEAN and k != "RUN_DIR"}
    done = subprocess.run(["bash", str(fork / "run_cpu_smollm2_gui_text.sh"), "--dry-run"], cwd=tmp_path,
                          env={**env, "SLIME_ROOT": str(REPO), "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    args = parse_args(shlex.split(done.stdout.strip().splitlines()[-1])[2:], mode="async", world_size=1)
    assert args.extra_python_path == [str(fork)] and args.run_dir == "runs/my-gui-text-cpu"
    assert args.custom_generate_function_path == "generate_with_gui.generate"
    assert (args.gui_tasks_dir, args.gui_apps_dir) == (str(fork / "tasks"), str(fork / "apps"))
    # the copy's loop hands both to the pool servers, whose desktops mount the copy's apps
    spec = importlib.util.spec_from_file_location("my_gui_generate", fork / "generate_with_gui.py")
    loop = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "my_gui_generate", loop)  # its dataclasses look their module up
    spec.loader.exec_module(loop)
    options = loop.service_options(args)
    assert (options["tasks_dir"], options["apps_dir"]) == (str(fork / "tasks"), str(fork / "apps"))
    provider = GuiProvider(**options)
    desktop = provider.new_desktop(LeaseContext("lease-1", "notes/x", str(tmp_path / "lease")))
    assert Path(desktop.apps_dir) == fork / "apps" and provider.tasks_dir == fork / "tasks"
    with pytest.raises(ValueError, match="apps_dir"):
        GuiProvider(apps_dir=str(tmp_path / "missing"))
