"""Every GPU launch script (run_*.sh outside the CPU ones) on this CPU machine: `--dry-run` prints the resolved
layout and a torchrun command whose trainer flags our parser accepts; bad layouts fail up front; multi-node env
goes into torchrun; nothing is killed by name."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
METHOD_FOLDERS = ("openclaw-rl", "openclaw-opd", "openclaw-combine", "terminal-rl", "gui-rl", "swe-rl", "toolcall-rl")
# the method entry points pick one of the launch scripts (GPU or CPU): tests/unit/test_entry_points.py
ENTRY_POINTS = {"run_binary_rl.sh", "run_opd_training.sh", "run_combine_training.sh",
                "run_toolcall_agent.sh",  # the tool-call entry point: tests/unit/test_toolcall_scripts.py
                "run_terminal_agent.sh",  # the terminal entry point: tests/unit/test_terminal_scripts.py
                "run_swe_agent.sh",  # the SWE entry point: tests/unit/test_swe_scripts.py
                "run_gui_agent.sh"}  # the GUI entry point: tests/unit/test_gui_scripts.py
GPU_SCRIPTS = sorted(str(p.relative_to(REPO)) for folder in METHOD_FOLDERS for p in (REPO / folder).glob("run_*.sh")
                     if not p.name.startswith("run_cpu_") and p.name not in ENTRY_POINTS)
# the agentic settings' GPU scripts (no conversation method): their own tests at the end of this file
AGENTIC_GPU_SCRIPTS = ("toolcall-rl/run_qwen3_4b_retool.sh", "terminal-rl/run_qwen3_8b_terminal.sh",
                       "swe-rl/run_qwen3_8b_swe.sh",  # their shared body: scripts/agentic_gpu_launch.sh
                       "gui-rl/run_qwen3vl_8b_gui.sh")  # its dry run: tests/unit/test_gui_scripts.py
CONVERSATION_GPU_SCRIPTS = [s for s in GPU_SCRIPTS if s not in AGENTIC_GPU_SCRIPTS]
LAYOUT_VARS = ("NUM_GPUS", "ACTOR_GPUS", "ROLLOUT_GPUS", "PRM_GPUS", "ROLLOUT_TP", "PRM_TP", "TRAIN_TP", "TP",
               "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "DRY_RUN", "CUDA_VISIBLE_DEVICES", "PORT", "HOST",
               "ENV_SERVER_URL", "INSTANCES", "PROMPT_DATA", "SWE_BACKEND", "SWE_IMAGE", "SWE_MAX_CONCURRENT",
               "STEP_JUDGE", "PRM_CKPT", "MAX_PIXELS", "TRAINER_PROCS")

# what each script must select: (conversation method, loss function or None, advantage estimator)
METHODS = {
    "rl": ("rl", None, "grpo"),
    "opd": ("opd", None, "on_policy_distillation"),
    "opd_topk": ("opd_topk", "slime.utils.loss.topk_distillation_loss_function", "grpo"),
    "combine": ("combine", "combine_loss.combine_loss_function", "grpo"),
    "combine_topk": ("combine_topk", "combine_loss.combine_topk_loss_function", "grpo"),
}
# each conversation folder's rollout module (upstream's names), which its scripts name
ROLLOUT_MODULES = {"openclaw-rl": "openclaw_rollout", "openclaw-opd": "openclaw_opd_rollout",
                   "openclaw-combine": "openclaw_combine_rollout"}


def _run(script: str, *argv: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in LAYOUT_VARS}
    # no GPU and no nvidia-smi here; HF_CKPT: the built-in tiny model (a real folder is checked the same way)
    full.update({"HF_CKPT": "tiny", "OPENCLAW_PROXY_API_KEY": "k", "OMP_NUM_THREADS": "1"}, **env)
    return subprocess.run(["bash", script, *argv], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


def _torchrun(done: subprocess.CompletedProcess) -> tuple[list[str], list[str]]:
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    assert words[0] == "torchrun"
    entry = words.index("slime/train_async.py")
    return words[1:entry], words[entry + 1:]


def _method(script: str) -> str:
    name = Path(script).name.removeprefix("run_qwen3_4b_openclaw_").removesuffix(".sh").removesuffix("_lora")
    return name


def test_the_expected_scripts_exist():
    names = {Path(s).name for s in GPU_SCRIPTS}
    for method in METHODS:
        for suffix in ("", "_lora"):
            assert f"run_qwen3_4b_openclaw_{method}{suffix}.sh" in names
    for script in GPU_SCRIPTS:  # every GPU script goes through the layout launcher (directly or via a helper)
        text = (REPO / script).read_text()
        helpers = ("scripts/conversation_gpu_common.sh", "scripts/agentic_gpu_launch.sh", "slime.launch")
        assert any(helper in text for helper in helpers), script
    for script in AGENTIC_GPU_SCRIPTS:
        assert script in GPU_SCRIPTS and "source scripts/agentic_gpu_launch.sh" in (REPO / script).read_text()


@pytest.mark.parametrize("script", CONVERSATION_GPU_SCRIPTS)
def test_dry_run_prints_layout_and_a_command_the_trainer_accepts(script):
    done = _run(script, "--dry-run")
    torchrun, argv = _torchrun(done)
    lora = script.endswith("_lora.sh")
    nproc = "2" if lora else "4"
    assert torchrun == ["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "29500",
                        "--nproc-per-node", nproc]
    out = done.stdout
    if lora:
        assert "rollout-0: node 0 GPUs [2] CUDA_VISIBLE_DEVICES=2 port 15010" in out
        assert "prm-0: node 0 GPUs [3] CUDA_VISIBLE_DEVICES=3 port 25010" in out
    else:
        assert "rollout-0: node 0 GPUs [4,5] CUDA_VISIBLE_DEVICES=4,5 port 15010" in out
        assert "prm-0: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 25010" in out

    args = parse_args(argv, mode="async", world_size=int(nproc))
    assert args.rollout_engine == "sglang" and args.prm_engine == "sglang" and args.device == "cuda"
    assert args.rollout_num_gpus_per_engine == args.prm_num_gpus_per_engine == (1 if lora else 2)
    assert args.tensor_model_parallel_size == 1 and args.train_backend == "fsdp"
    assert args.sglang_reasoning_parser == "qwen3" and args.sglang_context_length == 32768
    assert args.prm_type == "llm" and args.prm_enable and args.rollout_batch_size == 16
    assert args.data_source_path == "slime.conversation.rollout.ConversationDataSource"
    assert args.rollout_function_path == f"{ROLLOUT_MODULES[Path(script).parent.name]}.generate_rollout"
    assert args.use_lora == lora
    name = Path(script).name
    # each script checkpoints to its own folder, named after it
    assert Path(args.save).name == name.removeprefix("run_").removesuffix(".sh").replace("_", "-")
    method, loss, estimator = METHODS[_method(script)]
    assert args.conversation_method == method and args.advantage_estimator == estimator
    assert f"method: {method} (loss {'custom_loss ' + loss if loss else 'policy_loss'}, advantages {estimator}" in out
    if loss is None:
        assert args.loss_type == "policy_loss"
    else:
        assert args.loss_type == "custom_loss" and args.custom_loss_function_path == loss
    if "topk" in name:
        assert args.distill_topk == 50
    if method in ("rl", "combine", "combine_topk"):
        assert args.eps_clip == 0.2 and args.eps_clip_high == 0.28 and args.disable_rewards_normalization
    if method == "opd":
        assert args.eps_clip == args.eps_clip_high == 0.2
    if _method(script) == "opd_topk":
        assert args.lr == 1e-6 and args.disable_compute_advantages_and_returns


def test_dry_run_env_var_is_the_same_as_the_flag():
    script = "openclaw-rl/run_qwen3_4b_openclaw_rl.sh"
    assert _run(script, DRY_RUN="1").stdout == _run(script, "--dry-run").stdout
    # anywhere among the arguments, and never passed on to the trainer
    _, argv = _torchrun(_run(script, "--lr", "3e-6", "--dry-run"))
    assert "--dry-run" not in argv and argv[-2:] == ["--lr", "3e-6"]


def test_two_nodes_of_eight():
    script = "openclaw-combine/run_qwen3_4b_openclaw_combine.sh"
    env = dict(NNODES="2", NODE_RANK="1", MASTER_ADDR="10.0.0.1", MASTER_PORT="29600", ROLLOUT_GPUS="4",
               PRM_GPUS="4")
    done = _run(script, "--dry-run", **env)
    torchrun, argv = _torchrun(done)
    assert torchrun == ["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29600",
                        "--nproc-per-node", "4"]
    lines = done.stdout.splitlines()
    assert "trainer: 8 rank(s) = 2 node(s) x 4, local GPUs [0,1,2,3] (LOCAL_RANK i -> GPU i)" in lines
    assert "  rollout-1: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 15020" in lines
    assert "  prm-1: node 1 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 25020  <- this node" in lines
    args = parse_args(argv, mode="async", world_size=8)
    assert (args.actor_num_nodes, args.rollout_num_gpus, args.prm_num_gpus) == (2, 4, 4)


@pytest.mark.parametrize("script, env, message", [
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(NUM_GPUS="2", ACTOR_GPUS="2", ROLLOUT_GPUS="1", PRM_GPUS="1", ROLLOUT_TP="1"), "exceeds NUM_GPUS=2 x NNODES=1 = 2"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(ACTOR_GPUS="x"), "ACTOR_GPUS must be a non-negative integer, got 'x'"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(ACTOR_GPUS="0"), "ACTOR_GPUS (--actor-num-gpus-per-node) is 0"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(ROLLOUT_GPUS="3"), "ROLLOUT_GPUS=3 is not a multiple of ROLLOUT_TP=2"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(ROLLOUT_TP="16", ROLLOUT_GPUS="16"), "larger than a node (NUM_GPUS=8)"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(NNODES="2", NODE_RANK="2", MASTER_ADDR="10.0.0.1"), "NODE_RANK=2 is out of range for NNODES=2"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(NNODES="2"), "NNODES=2: set MASTER_ADDR"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(PORT="15010"), "port 15010 is also engine rollout-0's"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(OPENCLAW_PROXY_API_KEY=""), "OPENCLAW_PROXY_API_KEY"),
    ("openclaw-opd/run_qwen3_4b_openclaw_opd.sh", dict(HF_CKPT="/nonexistent/qwen3"), "--hf-checkpoint '/nonexistent/qwen3' is neither a folder"),
    ("toolcall-rl/run_qwen3_4b_retool.sh", dict(PRM_GPUS="2"), "PRM_GPUS=2 but PRM=1 is not set"),
    ("toolcall-rl/run_qwen3_4b_retool.sh", dict(PRM="yes"), "PRM must be 1 or 0, got 'yes'"),
    ("toolcall-rl/run_qwen3_4b_retool.sh", dict(TRAIN_TP="x"), "TRAIN_TP must be a non-negative integer, got 'x'"),
    ("toolcall-rl/run_qwen3_4b_retool.sh", dict(ROLLOUT_GPUS="6"), "exceeds NUM_GPUS=8 x NNODES=1 = 8"),
    ("toolcall-rl/run_qwen3_4b_retool.sh", dict(ROLLOUT_GPUS="3"), "ROLLOUT_GPUS=3 is not a multiple of ROLLOUT_TP=2"),
    ("terminal-rl/run_qwen3_8b_terminal.sh", dict(TRAIN_TP="x"), "TRAIN_TP must be a non-negative integer, got 'x'"),
    ("terminal-rl/run_qwen3_8b_terminal.sh", dict(ROLLOUT_GPUS="6"), "exceeds NUM_GPUS=8 x NNODES=1 = 8"),
    ("swe-rl/run_qwen3_8b_swe.sh", dict(TRAIN_TP="x"), "TRAIN_TP must be a non-negative integer, got 'x'"),
    ("swe-rl/run_qwen3_8b_swe.sh", dict(ROLLOUT_GPUS="6"), "exceeds NUM_GPUS=8 x NNODES=1 = 8"),
    ("swe-rl/run_qwen3_8b_swe.sh", dict(SWE_MAX_CONCURRENT="x"), "SWE_MAX_CONCURRENT must be a non-negative integer"),
    ("swe-rl/run_qwen3_8b_swe.sh", dict(SWE_MAX_CONCURRENT="0"), "SWE_MAX_CONCURRENT must be at least 1"),
    ("swe-rl/run_qwen3_8b_swe.sh", dict(SWE_BACKEND="podman"), "--swe-backend: invalid choice: 'podman'"),
    ("gui-rl/run_qwen3vl_8b_gui.sh", dict(ROLLOUT_GPUS="6"), "exceeds NUM_GPUS=8 x NNODES=1 = 8"),
    ("gui-rl/run_qwen3vl_8b_gui.sh", dict(PRM_TP="x"), "PRM_TP must be a non-negative integer, got 'x'"),
    ("gui-rl/run_qwen3vl_8b_gui.sh", dict(STEP_JUDGE="llm"), "STEP_JUDGE=llm needs PRM_CKPT"),
])
def test_impossible_layouts_fail_up_front(script, env, message, tmp_path):
    done = _run(script, "--dry-run", RUN_DIR=str(tmp_path / "run"), **env)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "torchrun" not in done.stdout


def test_scripts_never_kill_by_name():
    helpers = ("scripts/conversation_gpu_common.sh", "scripts/agentic_gpu_launch.sh")
    texts = [(REPO / s).read_text() for s in (*GPU_SCRIPTS, *helpers)]
    for text in texts:
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"\bp?kill(?:all)?\b", code)  # by name, or any kill at all in a launch script


# the conversation methods' CPU scripts (the agentic settings' own: tests/unit/test_toolcall_scripts.py)
CPU_SCRIPTS = sorted(str(p.relative_to(REPO)) for folder in METHOD_FOLDERS if folder.startswith("openclaw-")
                     for p in (REPO / folder).glob("run_cpu_*.sh"))


@pytest.mark.parametrize("script", CPU_SCRIPTS)
def test_cpu_scripts_dry_run_print_their_layout_and_a_valid_command(script):
    done = _run(script, "--dry-run", "--lr", "2e-5")
    assert done.returncode == 0, done.stderr
    layout, method, command = done.stdout.strip().splitlines()[-3:]
    assert layout.startswith("layout: CPU, 1 trainer process")
    words = shlex.split(command)
    assert words[:2] == ["python", "slime/train_async.py"] and "--dry-run" not in words
    args = parse_args(words[2:], mode="async", world_size=1)
    assert args.lr == 2e-5  # extra flags after --dry-run still reach the trainer (and win over the defaults)
    assert method.startswith(f"method: {args.conversation_method} (loss {args.loss_type}")
    folder = Path(script).parent.name
    if folder in ROLLOUT_MODULES:  # the folder's own rollout module, from the folder on the extra path
        assert args.rollout_function_path == f"{ROLLOUT_MODULES[folder]}.generate_rollout"
        assert str(REPO / folder) in args.extra_python_path


def test_cpu_dry_run_rejects_bad_flags_before_starting_anything():
    done = _run(CPU_SCRIPTS[0], "--dry-run", "--rollout-batch-size", "0")
    assert done.returncode != 0 and "--rollout-batch-size must be >= 1" in done.stderr
    assert "python slime/train_async.py" not in done.stdout


# --- tool-call RL (ReTool) on Qwen3-4B: upstream's retool_qwen3_4b_rl.sh layout, and its PRM layout with PRM=1


@pytest.mark.parametrize("prm", [False, True], ids=["grpo", "prm"])
def test_retool_dry_run_prints_the_setting_the_layout_and_a_command_the_trainer_accepts(prm, monkeypatch):
    script = "toolcall-rl/run_qwen3_4b_retool.sh"
    assert script in GPU_SCRIPTS  # so the checks above that cover every GPU script cover it too
    flag = "1" if prm else "0"
    done = _run(script, "--dry-run", "--lr", "2e-6", PRM=flag, DYNAMIC_HISTORY=flag)
    torchrun, argv = _torchrun(done)
    ranks = 2 if prm else 4
    assert torchrun == ["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "29500",
                        "--nproc-per-node", str(ranks)]
    out = done.stdout
    setting = out.splitlines()[0]
    assert setting.startswith("tool-call RL: 32 problems x 8 samples per rollout, at most 16 turns / 16 calls "
                              f"(120 s each), tools {REPO}/toolcall-rl/tools.json, advantages "
                              + ("step_wise, PRM per step (3 votes at temperature 1.0, 2048 tokens each" if prm
                                 else "grpo"))
    assert setting.endswith(", dynamic history") == prm
    if prm:  # 2 trainer (TP2) + 2 policy engines (TP2) + 1 PRM engine (TP2)
        assert "trainer: 2 rank(s) = 1 node(s) x 2, local GPUs [0,1] (LOCAL_RANK i -> GPU i), tensor parallel 2" in out
        assert "  rollout-0: node 0 GPUs [2,3] CUDA_VISIBLE_DEVICES=2,3 port 15010  <- this node" in out
        assert "  rollout-1: node 0 GPUs [4,5] CUDA_VISIBLE_DEVICES=4,5 port 15020  <- this node" in out
        assert "  prm-0: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 25010  <- this node" in out
    else:  # 4 trainer (TP4) + 2 policy engines (TP2), no judge
        assert ("trainer: 4 rank(s) = 1 node(s) x 4, local GPUs [0,1,2,3] (LOCAL_RANK i -> GPU i), tensor parallel 4"
                in out)
        assert "  rollout-0: node 0 GPUs [4,5] CUDA_VISIBLE_DEVICES=4,5 port 15010  <- this node" in out
        assert "  rollout-1: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 15020  <- this node" in out
        assert "judge engines: none on GPUs" in out
    assert "note:" not in out  # every GPU is used
    assert f"no conversation method (loss policy_loss, advantages {'step_wise' if prm else 'grpo'})" in out

    monkeypatch.chdir(REPO)  # as the launcher runs
    args = parse_args(argv, mode="async", world_size=ranks)
    assert "--dry-run" not in argv and argv[-2:] == ["--lr", "2e-6"] and args.lr == 2e-6
    # the folder's own modules, data and tools (a copy of the folder runs its own)
    assert args.extra_python_path == [str(REPO / "toolcall-rl")]
    assert args.custom_generate_function_path == "generate_with_retool.generate"
    assert args.custom_rm_path == "generate_with_retool.reward_func" and args.reward_key == "score"
    assert not args.apply_chat_template  # the loop renders the prompt with the chat template itself
    assert args.tools_config == str(REPO / "toolcall-rl/tools.json")
    assert args.prompt_data == str(REPO / "toolcall-rl/data/train.jsonl")
    assert (args.input_key, args.label_key) == ("prompt", "label") and args.rollout_shuffle
    assert (args.max_turns, args.max_tool_calls, args.tool_timeout) == (16, 16, 120)
    assert (args.num_rollout, args.rollout_batch_size, args.n_samples_per_prompt) == (3000, 32, 8)
    assert args.num_steps_per_rollout == 2 and args.global_batch_size == 128 and args.balance_data
    assert (args.rollout_max_response_len, args.rollout_max_context_len, args.rollout_temperature) == (8192, 16384, 1)
    assert args.use_kl_loss and args.kl_loss_coef == 0.01 and args.kl_loss_type == "k3"
    assert (args.eps_clip, args.eps_clip_high, args.entropy_coef) == (0.2, 0.28, 0.0)
    assert args.use_dynamic_batch_size and args.max_tokens_per_gpu == 16384 and args.save_interval == 20
    assert args.rotary_base == 5e6 and args.sglang_mem_fraction_static == 0.6
    assert args.rollout_engine == "sglang" and args.device == "cuda" and args.train_backend == "fsdp"
    assert (args.rollout_num_gpus, args.rollout_num_gpus_per_engine) == (4, 2)
    assert args.tensor_model_parallel_size == (2 if prm else 4) and args.conversation_method is None
    assert args.advantage_estimator == ("step_wise" if prm else "grpo")
    assert args.prm_enable == prm and args.dynamic_history == prm
    if prm:
        assert (args.prm_num_gpus, args.prm_num_gpus_per_engine, args.prm_engine) == (2, 2, "sglang")
        assert (args.prm_m, args.prm_temperature, args.prm_max_new_tokens, args.prm_step_coef) == (3, 1.0, 2048, 1.0)
        assert args.prm_model_path == "tiny"  # PRM_MODEL_PATH, default HF_CKPT
    assert Path(args.save).name == ("qwen3-4b-retool-prm" if prm else "qwen3-4b-retool")
    assert args.eval_interval == 20 and set(args.eval_datasets) == {"heldout"} and args.eval_reward_key == "acc"


def test_retool_needs_hf_ckpt():
    done = _run("toolcall-rl/run_qwen3_4b_retool.sh", "--dry-run", HF_CKPT="")
    assert done.returncode != 0 and "set HF_CKPT to the ReTool SFT checkpoint of Qwen3-4B" in done.stderr
    assert "torchrun" not in done.stdout


# --- terminal RL on Qwen3-8B: upstream's terminal_qwen3_8b_rl.sh layout


@pytest.mark.parametrize("attach", [False, True], ids=["started", "attached"])
def test_terminal_dry_run_prints_the_setting_the_layout_and_a_command_the_trainer_accepts(attach, monkeypatch):
    script = "terminal-rl/run_qwen3_8b_terminal.sh"
    assert script in GPU_SCRIPTS
    env = {"ENV_SERVER_URL": "http://10.0.0.9:18080"} if attach else {}
    done = _run(script, "--dry-run", "--lr", "2e-6", **env)
    torchrun, argv = _torchrun(done)
    assert torchrun == ["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "29500",
                        "--nproc-per-node", "4"]
    out = done.stdout
    assert out.splitlines()[0] == (
        "terminal RL: 16 tasks x 8 episodes per rollout, at most 10 turns, one sample per turn, tasks "
        f"{REPO}/terminal-rl/tasks, environments: " + ("http://10.0.0.9:18080" if attach else "4 pool server(s) started by the trainer"))
    assert "  rollout-1: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 15020  <- this node" in out
    monkeypatch.chdir(REPO)
    args = parse_args(argv, mode="async", world_size=4)
    assert args.lr == 2e-6 and args.input_key == "task" and Path(args.prompt_data).is_file()
    assert args.extra_python_path == [str(REPO / "terminal-rl")]  # the folder's own modules, data and tasks
    assert args.custom_generate_function_path == "generate.generate"
    assert args.custom_rm_path == "generate.reward_func" and args.dynamic_history
    assert args.terminal_tasks_dir == str(REPO / "terminal-rl/tasks")
    assert (args.max_turns, args.max_parse_errors, args.env_provider) == (10, 3, "terminal")
    assert Path(args.terminal_tasks_dir).is_dir() and args.env_server_url == ("http://10.0.0.9:18080" if attach else None)
    assert (args.num_rollout, args.rollout_batch_size, args.n_samples_per_prompt) == (2000, 16, 8)
    assert (args.rollout_max_response_len, args.rollout_max_context_len) == (8192, 16384)
    assert args.use_kl_loss and args.kl_loss_coef == 0.01 and args.kl_loss_type == "k3"
    assert args.save_interval == 3 and args.rotary_base == 1e6 and args.tensor_model_parallel_size == 4


# --- SWE RL on Qwen3-8B: the terminal script's layout with upstream's SWE values


@pytest.mark.parametrize("docker", [False, True], ids=["bwrap", "docker"])
def test_swe_dry_run_prints_the_setting_the_layout_and_a_command_the_trainer_accepts(docker, tmp_path, monkeypatch):
    script = "swe-rl/run_qwen3_8b_swe.sh"
    assert script in GPU_SCRIPTS
    env = dict(SWE_BACKEND="docker", SWE_IMAGE="swebench") if docker else {}
    done = _run(script, "--dry-run", "--lr", "2e-6", RUN_DIR=str(tmp_path / "run"), **env)
    torchrun, argv = _torchrun(done)
    assert torchrun == ["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "29500",
                        "--nproc-per-node", "4"]
    out = done.stdout
    assert out.splitlines()[0] == (
        "SWE RL: 8 instances x 4 episodes per rollout, at most 20 steps of 4096 tokens in 16384, one sample per step, "
        "2 episode(s) at once; environments: 4 pool server(s) started by the trainer (swe, backend "
        + ("docker, image swebench" if docker else "bwrap") + f", instances {REPO}/swe-rl/data/instances.jsonl)")
    assert ("trainer: 4 rank(s) = 1 node(s) x 4, local GPUs [0,1,2,3] (LOCAL_RANK i -> GPU i), tensor parallel 4"
            in out)
    assert "  rollout-0: node 0 GPUs [4,5] CUDA_VISIBLE_DEVICES=4,5 port 15010  <- this node" in out
    assert "  rollout-1: node 0 GPUs [6,7] CUDA_VISIBLE_DEVICES=6,7 port 15020  <- this node" in out
    assert "judge engines: none on GPUs" in out and "note:" not in out
    monkeypatch.chdir(REPO)
    args = parse_args(argv, mode="async", world_size=4)
    assert "--dry-run" not in argv and argv[-2:] == ["--lr", "2e-6"] and args.lr == 2e-6
    assert args.extra_python_path == [str(REPO / "swe-rl")]  # the folder's own modules and instances
    assert args.custom_generate_function_path == "generate_with_swe_remote.generate"
    assert args.custom_rm_path == "generate_with_swe_remote.reward_func" and args.reward_key == "score"
    assert (args.input_key, args.metadata_key, args.env_provider, args.env_workers) == ("text", "metadata", "swe", 4)
    assert Path(args.swe_instances).samefile(REPO / "swe-rl/data/instances.jsonl")
    assert Path(args.prompt_data) == tmp_path / "run" / "train.jsonl" and Path(args.prompt_data).is_file()
    assert Path(args.run_dir) == tmp_path / "run"
    assert (args.swe_backend, args.swe_image) == (("docker", "swebench") if docker else ("bwrap", None))
    assert args.dynamic_history and args.max_turns == 20 and args.sglang_server_concurrency == 1  # x 2 engines
    assert (args.num_rollout, args.rollout_batch_size, args.n_samples_per_prompt) == (500, 8, 4)
    assert (args.rollout_max_response_len, args.rollout_max_context_len, args.rollout_temperature) == (4096, 16384, 1)
    assert args.advantage_estimator == "grpo" and args.conversation_method is None
    assert args.use_kl_loss and args.kl_loss_coef == 0.01 and args.kl_loss_type == "k3"
    assert (args.eps_clip, args.eps_clip_high, args.entropy_coef) == (0.2, 0.28, 0.0)
    assert args.use_dynamic_batch_size and args.max_tokens_per_gpu == 16384 and args.save_interval == 2
    assert args.rotary_base == 1e6 and args.sglang_mem_fraction_static == 0.6 and args.tensor_model_parallel_size == 4
    assert args.rollout_engine == "sglang" and args.device == "cuda" and args.train_backend == "fsdp"
    assert Path(args.save).name == "qwen3-8b-swe"


def test_swe_episodes_in_flight_and_attached_environments(tmp_path):
    done = _run("swe-rl/run_qwen3_8b_swe.sh", "--dry-run", RUN_DIR=str(tmp_path / "run"), SWE_MAX_CONCURRENT="5",
                ENV_SERVER_URL="http://10.0.0.9:18090")
    _, argv = _torchrun(done)
    # 5 episodes over 2 engines: 3 per engine, 6 in all
    assert argv[argv.index("--sglang-server-concurrency") + 1] == "3"
    assert "6 episode(s) at once; environments: http://10.0.0.9:18090" in done.stdout.splitlines()[0]


def test_swe_needs_hf_ckpt(tmp_path):
    done = _run("swe-rl/run_qwen3_8b_swe.sh", "--dry-run", HF_CKPT="", RUN_DIR=str(tmp_path / "run"))
    assert done.returncode != 0 and "set HF_CKPT to a Qwen3-8B checkpoint" in done.stderr
    assert "torchrun" not in done.stdout
