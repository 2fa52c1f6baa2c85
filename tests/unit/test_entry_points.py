"""The method entry points (openclaw-rl/run_binary_rl.sh, openclaw-opd/run_opd_training.sh,
openclaw-combine/run_combine_training.sh, all through scripts/method_entry.sh): GPU or CPU script, LoRA or not,
a YAML config appended as trainer flags, the reason printed on stderr.

The choice itself is checked fast against stub launch scripts (a copy of the entry point and the helper next to
scripts that print their arguments); the real scripts' `--dry-run` then shows the whole command parses with the
trainer's own parser, on the CPU path and, with a fake `nvidia-smi` first on PATH, on the GPU path."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slime.utils.arguments import parse_args

REPO = Path(__file__).resolve().parents[2]
ENTRIES = {"rl": "openclaw-rl/run_binary_rl.sh", "opd": "openclaw-opd/run_opd_training.sh",
           "combine": "openclaw-combine/run_combine_training.sh"}
CLEARED = ("FORCE_DEVICE", "USE_LORA", "LORA_RANK", "LORA_ALPHA", "LORA_DROPOUT", "HF_CKPT", "CUDA_VISIBLE_DEVICES",
           "DRY_RUN", "NUM_GPUS", "ACTOR_GPUS", "ROLLOUT_GPUS", "PRM_GPUS", "ROLLOUT_TP", "PRM_TP", "TRAIN_TP", "TP",
           "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "PORT", "HOST", "LR", "HINT_JUDGE")


def _path_without_nvidia_smi() -> str:
    dirs = [str(Path(sys.executable).parent)]  # python of this venv for the config module
    dirs += [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvidia-smi").exists()]
    return os.pathsep.join(dirs)


@pytest.fixture
def fake_bin(tmp_path):
    """A folder to put first on PATH with an `nvidia-smi` of the test's choosing."""
    def make(script: str = 'echo "GPU 0: fake (UUID: GPU-0)"') -> str:
        folder = tmp_path / "bin"
        folder.mkdir(exist_ok=True)
        tool = folder / "nvidia-smi"
        tool.write_text(f"#!/bin/sh\n{script}\n")
        tool.chmod(0o755)
        return str(folder)
    return make


def _env(gpu_bin: str | None = None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["PATH"] = (gpu_bin + os.pathsep if gpu_bin else "") + _path_without_nvidia_smi()
    env.update(OMP_NUM_THREADS="1", OPENCLAW_PROXY_API_KEY="k", **extra)
    return env


# --- the choice, against stub launch scripts -------------------------------------------------------------------


@pytest.fixture
def stub_repo(tmp_path):
    """The helper and the three entry points in a tree whose launch scripts print their name, HF_CKPT and args."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts/method_entry.sh", root / "scripts")
    for entry in ENTRIES.values():
        folder = root / Path(entry).parent
        folder.mkdir()
        shutil.copy(REPO / entry, folder)
        for script in (REPO / Path(entry).parent).glob("run_*.sh"):
            if script.name != Path(entry).name:
                (folder / script.name).write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$(basename "$0")" '
                                                  '"HF_CKPT=${HF_CKPT:-}" "$@"\n')
    return root


def _stub(stub_repo, method: str, *argv: str, gpu_bin: str | None = None, **env) -> tuple[int, list[str], str]:
    done = subprocess.run(["bash", ENTRIES[method], *argv], cwd=stub_repo, env=_env(gpu_bin, **env),
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.splitlines(), done.stderr


@pytest.mark.parametrize("method", sorted(ENTRIES))
def test_no_gpu_runs_the_cpu_script_and_says_why(stub_repo, method):
    rc, out, err = _stub(stub_repo, method, "--dry-run", "--lr", "2e-5")
    script = f"run_cpu_smollm2_openclaw_{method}.sh"
    assert rc == 0, err
    name = Path(ENTRIES[method]).name
    assert err == f"{name}: no GPU visible (nvidia-smi not found): running the CPU script " \
                  f"{Path(ENTRIES[method]).parent}/{script}\n"
    assert out == [script, "HF_CKPT=", "--dry-run", "--lr", "2e-5"]


@pytest.mark.parametrize("method", sorted(ENTRIES))
def test_a_visible_gpu_runs_the_gpu_script(stub_repo, fake_bin, method):
    rc, out, err = _stub(stub_repo, method, "--rollout-batch-size", "4", "--dry-run", gpu_bin=fake_bin())
    assert rc == 0, err
    assert f"1 GPU(s) visible (nvidia-smi -L): running the GPU script " in err
    # arguments pass through in their order (the GPU scripts take --dry-run anywhere)
    assert out == [f"run_qwen3_4b_openclaw_{method}.sh", "HF_CKPT=", "--rollout-batch-size", "4", "--dry-run"]


@pytest.mark.parametrize("how", [("--lora",), ("USE_LORA", "1"), ("USE_LORA", "true")])
def test_lora_picks_the_lora_gpu_script(stub_repo, fake_bin, how):
    argv, env = (how, {}) if how[0] == "--lora" else ((), {how[0]: how[1]})
    rc, out, err = _stub(stub_repo, "opd", *argv, gpu_bin=fake_bin(), LORA_RANK="8", LORA_ALPHA="16",
                         LORA_DROPOUT="0.05", **env)
    assert rc == 0, err
    assert out == ["run_qwen3_4b_openclaw_opd_lora.sh", "HF_CKPT=", "--lora-rank", "8", "--lora-alpha", "16",
                   "--lora-dropout", "0.05"]
    assert f"(LoRA: {'--lora' if not env else 'USE_LORA=' + how[1]})" in err


def test_lora_on_cpu_adds_use_lora(stub_repo):
    rc, out, err = _stub(stub_repo, "rl", "--lora", "--seed", "3", LORA_RANK="4")
    assert rc == 0, err
    assert out == ["run_cpu_smollm2_openclaw_rl.sh", "HF_CKPT=", "--use-lora", "--lora-rank", "4", "--seed", "3"]
    assert "running the CPU script openclaw-rl/run_cpu_smollm2_openclaw_rl.sh with --use-lora (--lora)" in err


def test_lora_variables_without_lora_are_reported_and_ignored(stub_repo):
    rc, out, err = _stub(stub_repo, "rl", LORA_RANK="4")
    assert rc == 0 and out == ["run_cpu_smollm2_openclaw_rl.sh", "HF_CKPT="]
    assert "LORA_RANK is set but LoRA is not selected (--lora or USE_LORA=1): ignored" in err


@pytest.mark.parametrize("tool, env, reason", [
    ('echo "GPU 0: fake"', {"CUDA_VISIBLE_DEVICES": ""}, "no GPU visible (CUDA_VISIBLE_DEVICES='' hides them)"),
    ('echo "GPU 0: fake"', {"CUDA_VISIBLE_DEVICES": "-1"}, "no GPU visible (CUDA_VISIBLE_DEVICES='-1' hides them)"),
    ("exit 9", {}, "no GPU visible (nvidia-smi -L failed)"),
    ('echo "No devices found."', {}, "no GPU visible (nvidia-smi -L lists none)"),
    ('echo "GPU 0: fake"', {"FORCE_DEVICE": "cpu"}, "FORCE_DEVICE=cpu"),
])
def test_when_the_cpu_script_runs_anyway(stub_repo, fake_bin, tool, env, reason):
    rc, out, err = _stub(stub_repo, "combine", gpu_bin=fake_bin(tool), **env)
    assert rc == 0 and out[0] == "run_cpu_smollm2_openclaw_combine.sh", err
    assert err.startswith(f"run_combine_training.sh: {reason}: running the CPU script")


def test_visible_devices_and_force_gpu(stub_repo, fake_bin):
    two = fake_bin('echo "GPU 0: a"; echo "GPU 1: b"')
    rc, out, err = _stub(stub_repo, "rl", gpu_bin=two, CUDA_VISIBLE_DEVICES="1")
    assert out[0] == "run_qwen3_4b_openclaw_rl.sh" and "2 GPU(s) visible (nvidia-smi -L), CUDA_VISIBLE_DEVICES=1" in err
    rc, out, err = _stub(stub_repo, "rl", FORCE_DEVICE="gpu")
    assert out[0] == "run_qwen3_4b_openclaw_rl.sh" and err.startswith("run_binary_rl.sh: FORCE_DEVICE=gpu: running")


@pytest.mark.parametrize("env, message", [
    ({"FORCE_DEVICE": "tpu"}, "FORCE_DEVICE must be cpu or gpu, got 'tpu'"),
    ({"USE_LORA": "maybe"}, "USE_LORA must be 1 or 0, got 'maybe'"),
])
def test_bad_switches_exit_2(stub_repo, env, message):
    rc, out, err = _stub(stub_repo, "rl", **env)
    assert rc == 2 and message in err and out == []


def _config(tmp_path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_config_flags_go_between_the_script_defaults_and_the_command_line(stub_repo, fake_bin, tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    config = _config(tmp_path, f"model: {ckpt}\ntraining:\n  method: combine_topk\n  learning_rate: 1e-6\n"
                               "  lora:\n    enabled: true\n")
    rc, out, err = _stub(stub_repo, "combine", "--lr", "3e-6", "--config", config, "training.learning_rate=2e-6",
                         "+training.distill_topk=20", "--dry-run", gpu_bin=fake_bin(), HF_CKPT="/elsewhere",
                         LORA_RANK="8")
    assert rc == 0, err
    # the config's top-K method and LoRA choose the script; its model becomes HF_CKPT (the GPU scripts read it)
    assert out == ["run_qwen3_4b_openclaw_combine_topk_lora.sh", f"HF_CKPT={ckpt}",
                   "--hf-checkpoint", str(ckpt), "--lr", "2e-06", "--distill-topk", "20", "--use-lora",
                   "--lora-rank", "8", "--lr", "3e-6", "--dry-run"]
    assert f"the config's model {ckpt} replaces HF_CKPT=/elsewhere" in err
    assert f"(LoRA: training.lora.enabled in {config}), trainer flags from {config} appended" in err


def test_a_bad_config_stops_before_any_script(stub_repo, tmp_path):
    rc, out, err = _stub(stub_repo, "rl", "--config", _config(tmp_path, "training:\n  method: opd\n"))
    assert rc == 2 and out == []
    assert "'training.method' is 'opd' but this entry point trains rl: use the entry point of opd's method folder" in err
    rc, out, err = _stub(stub_repo, "rl", "--config")
    assert rc == 2 and "--config needs a YAML file" in err


def test_help(stub_repo):
    rc, out, err = _stub(stub_repo, "opd", "--help")
    assert rc == 0 and out[0].startswith("On-policy distillation") and any("--config FILE" in line for line in out)


# --- the real launch scripts' dry runs ------------------------------------------------------------------------


def _run(entry: str, *argv: str, gpu_bin: str | None = None, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", entry, *argv], cwd=REPO, env=_env(gpu_bin, **env), capture_output=True, text=True,
                          timeout=120)


def _cpu_args(done: subprocess.CompletedProcess):
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    assert words[:2] == ["python", "slime/train_async.py"]
    return parse_args(words[2:], mode="async", world_size=1)


def _gpu_args(done: subprocess.CompletedProcess, nproc: int):
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    assert words[0] == "torchrun" and words[words.index("--nproc-per-node") + 1] == str(nproc)
    return parse_args(words[words.index("slime/train_async.py") + 1:], mode="async", world_size=nproc)


@pytest.mark.parametrize("method", sorted(ENTRIES))
def test_cpu_dry_run(method):
    done = _run(ENTRIES[method], "--dry-run")
    folder = Path(ENTRIES[method]).parent
    assert f"no GPU visible (nvidia-smi not found): running the CPU script {folder}/run_cpu_smollm2_openclaw_{method}.sh" \
        in done.stderr
    assert done.stdout.strip().splitlines()[-3].startswith("layout: CPU, 1 trainer process")
    args = _cpu_args(done)
    assert args.conversation_method == method and args.hf_checkpoint == "smollm2" and not args.use_lora


@pytest.mark.parametrize("method, lora", [("rl", ()), ("opd", ("USE_LORA", "1")), ("combine", ("--lora",))])
def test_gpu_dry_run_with_a_fake_nvidia_smi(method, lora, fake_bin, tmp_path):
    argv, env = (lora, {}) if lora[:1] == ("--lora",) else ((), dict([lora]) if lora else {})
    done = _run(ENTRIES[method], "--dry-run", *argv, gpu_bin=fake_bin(), HF_CKPT=str(tmp_path), **env)
    script = f"run_qwen3_4b_openclaw_{method}{'_lora' if lora else ''}.sh"
    assert f"1 GPU(s) visible (nvidia-smi -L): running the GPU script {Path(ENTRIES[method]).parent}/{script}" \
        in done.stderr
    assert "nvidia-smi shows 1 GPU(s)" in done.stderr  # the launcher only warns under --dry-run
    args = _gpu_args(done, 2 if lora else 4)
    assert args.conversation_method == method and args.use_lora == bool(lora) and args.hf_checkpoint == str(tmp_path)


def test_cpu_config_values_reach_the_trainer():
    done = _run(ENTRIES["combine"], "--config", "config/training_config_cpu.yaml", "training.learning_rate=3e-5",
                "--dry-run", "--rollout-batch-size", "4")
    assert "trainer flags from config/training_config_cpu.yaml appended" in done.stderr
    assert "--lr 3e-05" in done.stdout.splitlines()[-1]
    args = _cpu_args(done)
    assert args.lr == 3e-5 and args.rollout_batch_size == 4  # the override; the command line over the config
    assert (args.kl_loss_coef, args.use_kl_loss, args.combine_w_rl, args.combine_w_opd) == (0.05, True, 1.0, 1.0)
    assert (args.prm_type, args.prm_m, args.hint_judge_type, args.rollout_max_response_len) == \
        ("rules+embedding", 3, "rules", 512)


def test_gpu_config_values_reach_the_trainer(fake_bin, tmp_path):
    done = _run(ENTRIES["combine"], "--dry-run", "--config", "config/training_config.yaml", "rollout.temperature=0.7",
                gpu_bin=fake_bin(), HF_CKPT=str(tmp_path))
    args = _gpu_args(done, 4)
    assert args.hf_checkpoint == args.ref_load == args.prm_model_path == str(tmp_path)
    assert (args.served_model_name, args.lr, args.rollout_batch_size, args.rollout_temperature) == \
        ("qwen3-4b", 1e-5, 16, 0.7)
    assert (args.prm_type, args.prm_m, args.prm_max_new_tokens, args.prm_timeout) == ("llm", 3, 4096, 300)
    assert (args.eps_clip, args.eps_clip_high, args.kl_loss_coef, args.use_kl_loss) == (0.2, 0.28, 0.0, False)
