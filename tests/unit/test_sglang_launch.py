"""SGLang / sglang-router / vLLM launch commands: built from our flags, using only flags those servers define.

The flag lists are committed (slime/slime/engine/known_flags/*.txt, extracted from the pinned wheels' source);
`test_committed_list_matches_installed_*` re-extracts them from the installed package when there is one.
"""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from slime.engine.known_flags import extract_flags, known_flags, pinned_version, unknown_flags
from slime.engine.router import RouterConfig, SGLangRouter, router_command, workers_ready
from slime.engine.sglang_server import SGLangServer, SGLangServerConfig, sglang_config_from_args, sglang_server_command
from slime.engine.vllm_server import (VLLM_CPU_LAUNCHER, VLLMServer, VLLMServerConfig, vllm_config_from_args,
                                      vllm_cpu_python, vllm_server_command)
from slime.utils.arguments import ArgumentError, parse_args

BASE = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3",
        "--disable-rollout-global-dataset"]
GPU = ["--rollout-engine", "sglang", "--rollout-num-gpus", "4", "--rollout-num-gpus-per-engine", "2",
       "--sglang-mem-fraction-static", "0.8", "--sglang-context-length", "32768",
       "--sglang-reasoning-parser", "qwen3", "--sglang-tool-call-parser", "qwen25", "--fp16",
       "--served-model-name", "qwen3-4b", "--sglang-extra-args", "--enable-metrics --chunked-prefill-size 4096"]


def flags_of(cmd: list[str]) -> list[str]:
    return [arg.split("=", 1)[0] for arg in cmd if arg.startswith("--")]


def value_of(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_sglang_command_from_trainer_flags(monkeypatch):
    monkeypatch.setenv("SLIME_ENGINE_API_KEY", "k3y")
    args = parse_args(BASE + GPU)
    cmd = sglang_server_command(sglang_config_from_args(args, model_path="/models/qwen3-4b", port=15010, tp_size=2,
                                                        seed_offset=1), python="py")
    assert cmd[:3] == ["py", "-m", "sglang.launch_server"]
    expected = {"--model-path": "/models/qwen3-4b", "--host": "127.0.0.1", "--port": "15010", "--tp-size": "2",
                "--mem-fraction-static": "0.8", "--context-length": "32768", "--reasoning-parser": "qwen3",
                "--tool-call-parser": "qwen25", "--api-key": "k3y", "--served-model-name": "qwen3-4b",
                "--random-seed": str(args.seed + 1), "--dtype": "float16", "--chunked-prefill-size": "4096"}
    assert {flag: value_of(cmd, flag) for flag in expected} == expected
    assert "--enable-metrics" in cmd
    assert unknown_flags("sglang", cmd) == []


def test_sglang_command_leaves_unset_options_to_sglang():
    cmd = sglang_server_command(SGLangServerConfig(model_path="m", port=1))
    assert flags_of(cmd) == ["--model-path", "--host", "--port", "--tp-size"]


def test_router_command_uses_only_router_flags():
    cmd = router_command(RouterConfig(worker_urls=("http://127.0.0.1:15010", "http://127.0.0.1:15020"), port=15000,
                                      policy="round_robin", api_key="k"), python="py")
    assert cmd[:3] == ["py", "-m", "sglang_router.launch_router"]
    i = cmd.index("--worker-urls")
    assert cmd[i + 1:i + 3] == ["http://127.0.0.1:15010", "http://127.0.0.1:15020"]
    assert value_of(cmd, "--policy") == "round_robin" and value_of(cmd, "--port") == "15000"
    assert unknown_flags("sglang-router", cmd) == []


def test_router_rejects_bad_configs():
    with pytest.raises(ValueError, match="at least one worker"):
        RouterConfig(worker_urls=(), port=1)
    with pytest.raises(ValueError, match="policy"):
        RouterConfig(worker_urls=("http://a:1",), port=1, policy="fastest")


def test_vllm_command_maps_our_flags_to_vllm_names():
    args = parse_args(BASE + GPU + ["--vllm-extra-args=--enforce-eager"])
    cmd = vllm_server_command(vllm_config_from_args(args, model_path="/m", port=15010, tp_size=2), python="py")
    assert cmd[:5] == ["py", "-m", "vllm.entrypoints.cli.main", "serve", "/m"]
    expected = {"--tensor-parallel-size": "2", "--gpu-memory-utilization": "0.8", "--max-model-len": "32768",
                "--reasoning-parser": "qwen3", "--tool-call-parser": "qwen25", "--logprobs-mode": "processed_logprobs",
                "--dtype": "float16", "--port": "15010"}
    assert {flag: value_of(cmd, flag) for flag in expected} == expected
    assert "--enable-auto-tool-choice" in cmd and "--enforce-eager" in cmd
    assert unknown_flags("vllm", cmd) == []


def test_vllm_on_cpu_runs_the_cpu_virtualenv_through_the_launcher(tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    config = VLLMServerConfig(model_path="/m", port=15030, max_model_len=2048, device="cpu")
    with pytest.raises(RuntimeError, match="setup_vllm_cpu.sh"):
        vllm_cpu_python({"VLLM_CPU_HOME_DIR": str(tmp_path)})
    python.parent.mkdir(parents=True)
    python.touch()
    assert vllm_cpu_python({"VLLM_CPU_HOME_DIR": str(tmp_path)}) == str(python)
    cmd = vllm_server_command(config, python=str(python))
    assert cmd[:4] == [str(python), str(VLLM_CPU_LAUNCHER), "serve", "/m"] and VLLM_CPU_LAUNCHER.is_file()
    assert "--enforce-eager" in cmd and value_of(cmd, "--dtype") == "float32"
    assert unknown_flags("vllm", cmd) == []  # the pinned 0.33's flag names (0.32 served with them here)
    env = VLLMServer(config, visible_devices="").environment()
    assert env["OMP_NUM_THREADS"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "CUDA_VISIBLE_DEVICES" not in env
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind" and env["VLLM_SERVER_DEV_MODE"] == "1"
    with pytest.raises(ValueError, match="device"):
        VLLMServerConfig(model_path="/m", port=1, device="tpu")


def test_unknown_flags_are_reported():
    assert unknown_flags("sglang", ["--tp-size", "2", "--no-such-flag=1", "--mem-fraction"]) == [
        "--no-such-flag", "--mem-fraction"]


def test_servers_pin_their_gpus_and_keep_the_command():
    server = SGLangServer(SGLangServerConfig(model_path="m", port=15010, tp_size=2), visible_devices="2,3")
    env = server.environment()
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and "OMP_NUM_THREADS" not in env
    assert server.url == "http://127.0.0.1:15010" and server.command()[2] == "sglang.launch_server"
    vllm = VLLMServer(VLLMServerConfig(model_path="m", port=15020), visible_devices="5")
    assert vllm.environment()["CUDA_VISIBLE_DEVICES"] == "5"
    assert vllm.environment()["VLLM_SERVER_DEV_MODE"] == "1"
    router = SGLangRouter(RouterConfig(worker_urls=("http://127.0.0.1:15010",), port=15000))
    assert router.url == "http://127.0.0.1:15000" and router.command()[0] == sys.executable
    assert SGLangRouter(RouterConfig(worker_urls=("http://w:1",), port=15000), python="/venv/py").command()[0] == \
        "/venv/py"


def test_a_router_is_ready_once_it_lists_every_worker_healthy():
    """Router 0.3 answers /health before it has registered its workers (requests then get 503)."""
    workers = ("http://127.0.0.1:1", "http://127.0.0.1:2")
    listing = {"workers": [{"url": "http://127.0.0.1:1", "is_healthy": True},
                           {"url": "http://127.0.0.1:2/", "is_healthy": True}]}
    assert workers_ready(listing, workers)
    assert not workers_ready({"workers": []}, workers) and not workers_ready({}, workers)
    listing["workers"][1]["is_healthy"] = False
    assert not workers_ready(listing, workers)


# --- trainer flag validation ----------------------------------------------------------------------------------

def test_engine_flag_defaults_keep_the_embedded_engine():
    args = parse_args(BASE)
    assert (args.rollout_engine, args.prm_engine, args.update_weight_transport) == ("embedded", "embedded", "disk")
    assert args.sglang_extra_args == [] and args.sglang_router_policy == "cache_aware"


@pytest.mark.parametrize("extra, match", [
    (["--rollout-engine", "sglang"], "set --rollout-num-gpus"),
    (GPU + ["--colocate"], "--colocate with --rollout-engine sglang"),
    (GPU[:6] + ["--sglang-mem-fraction-static", "1.2"], r"mem-fraction-static must be in \(0, 1\)"),
    (GPU[:6] + ["--sglang-context-length", "0"], "--sglang-context-length must be >= 1"),
    (GPU[:6] + ["--sglang-extra-args", "--port 1 --tp-size 2"], "--sglang-extra-args sets --port, --tp-size"),
    (GPU[:6] + ["--vllm-extra-args=--max-model-len=4"], "--vllm-extra-args sets --max-model-len"),
    (["--update-weight-transport", "distributed"], "needs --rollout-engine sglang"),
    (GPU[:6] + ["--update-weight-transport", "distributed", "--use-lora"], "does not handle LoRA"),
    (["--conversation-method", "opd", "--prm-engine", "vllm", "--rollout-temperature", "0.7"],
     "only at temperature 1.0"),
    (GPU[:6] + ["--sglang-router-port", "70000"], "is not a TCP port"),
    (["--rollout-engine", "vllm"], "or give --device cpu to start vLLM-CPU"),
    (["--rollout-engine", "sglang", "--device", "cpu"], "set --rollout-num-gpus"),
    (["--rollout-engine", "vllm", "--device", "cpu", "--rollout-num-gpus", "1"], "give one or the other"),
    (["--rollout-engine", "vllm", "--device", "cpu", "--vllm-cpu-engines", "0"], "must be >= 1"),
    (["--vllm-cpu-engines", "2"], "needs --rollout-engine vllm --device cpu"),
    (["--rollout-engine", "vllm", "--device", "cpu", "--vllm-cpu-engines", "2", "--rollout-external-engine-addrs",
      "http://h:8000"], "no --rollout-external-engine-addrs"),
])
def test_engine_flag_errors(extra, match):
    with pytest.raises(ArgumentError, match=match):
        parse_args(BASE + extra)


def test_unknown_extra_flag_warns(caplog):
    parse_args(BASE + GPU[:6] + ["--sglang-extra-args=--made-up-flag"])
    assert "--made-up-flag not defined by the sglang version" in caplog.text


def test_a_cpu_trainer_starts_its_own_vllm_cpu_engine_not_a_gpu_one():
    from slime.engine.vllm_server import vllm_cpu_config_from_args
    from slime.training.engines import gpu_engine_roles, runs_on_cpu

    args = parse_args(BASE + ["--rollout-engine", "vllm", "--device", "cpu", "--engine-threads", "2",
                              "--rollout-max-context-len", "1024", "--vllm-extra-args=--max-num-seqs 8"])
    assert runs_on_cpu(args, "vllm") and gpu_engine_roles(args) == {}
    config = vllm_cpu_config_from_args(args, model_path="/m", port=15040)
    assert (config.device, config.cpu_threads, config.max_model_len, config.tensor_parallel_size) == ("cpu", 2, 1024, 1)
    assert config.extra_args == ("--max-num-seqs", "8") and config.gpu_memory_utilization is None
    attached = parse_args(BASE + ["--rollout-engine", "vllm", "--device", "cpu",
                                  "--rollout-external-engine-addrs", "http://h:8000"])
    assert not runs_on_cpu(attached, "vllm")
    two = parse_args(BASE + ["--rollout-engine", "vllm", "--device", "cpu", "--vllm-cpu-engines", "2"])
    assert two.vllm_cpu_engines == 2 and vllm_cpu_config_from_args(two, model_path="/m", port=1, seed_offset=1).seed \
        == two.seed + 1


def test_vllm_policy_with_external_engines_is_accepted():
    args = parse_args(BASE + ["--rollout-engine", "vllm", "--rollout-external-engine-addrs", "http://h:8000"])
    assert args.rollout_engine == "vllm" and args.prm_engine == "vllm"


# --- the committed lists against the packages -----------------------------------------------------------------

@pytest.mark.parametrize("package", ["sglang", "sglang-router", "vllm"])
def test_committed_list_matches_installed_package(package):
    """Re-extract the flags of an installed package (never imported); skipped where it is not installed."""
    try:
        installed = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed (the committed list is used)")
    found = extract_flags(package)
    if installed == pinned_version(package):
        assert found == set(known_flags(package))
    else:  # another version: at least every flag we emit must still exist
        ours = {"sglang": ["--model-path", "--tp-size", "--mem-fraction-static", "--context-length",
                           "--reasoning-parser", "--tool-call-parser", "--api-key", "--served-model-name",
                           "--random-seed", "--dtype", "--host", "--port"],
                "sglang-router": ["--worker-urls", "--policy", "--host", "--port", "--log-level",
                                  "--request-timeout-secs", "--api-key"],
                "vllm": ["--tensor-parallel-size", "--gpu-memory-utilization", "--max-model-len", "--logprobs-mode",
                         "--reasoning-parser", "--tool-call-parser", "--enable-auto-tool-choice", "--seed"]}[package]
        assert set(ours) <= found, f"{package} {installed} lacks {sorted(set(ours) - found)}"


def test_extraction_reads_both_flag_styles(tmp_path):
    """The extractor finds literal add_argument flags and SGLang's annotated namespace fields (no_cli skipped)."""
    (tmp_path / "sglang/srt/arg_groups/fields").mkdir(parents=True)
    (tmp_path / "sglang/srt/server_args.py").write_text(
        'def add(parser):\n    parser.add_argument("--config", type=str)\n    parser.add_argument("-x")\n')
    (tmp_path / "sglang/srt/arg_groups/fields/model.py").write_text(
        "class Model:\n    _NS_PATH = 'model'\n    model_path: A[str, 'the model'] = None\n"
        "    tp_size: A[int, Arg(help='tp', cli_name='--tensor-parallel-size', aliases=['--tp-size'])] = 1\n"
        "    hidden: A[bool, Arg(no_cli=True)] = False\n    plain: int = 0\n"
        "class NotANamespace:\n    other: A[str, 'x'] = None\n")
    assert extract_flags("sglang", tmp_path) == {"--config", "--model-path", "--tensor-parallel-size", "--tp-size"}
