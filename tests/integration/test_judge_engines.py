"""Which judge/teacher engine the conversation data source uses with --prm-enable, and who stops it.

embedded (default): its own frozen EngineProcess, stopped on close (unchanged). sglang/vllm: the group the
trainer started on every node (`args.judge_engines`, stopped by the trainer, not here), else this node's
engines from `start_judge_engines`, stopped on close.
"""

from __future__ import annotations

import importlib.util
import socket
from types import SimpleNamespace

import httpx
import pytest

from helpers.recording_server import RecordingServer
from slime.conversation.rollout import ConversationDataSource
from slime.training.engines import EngineGroup


def _args(tmp_path, **overrides):
    base = dict(run_dir=str(tmp_path), conversation_store=str(tmp_path / "conv.db"), proxy_url="http://127.0.0.1:9",
                prm_engine_url=None, prm_enable=True, prm_engine="embedded", engine_threads=1, device="cpu",
                engine_urls=["http://127.0.0.1:9"])
    base.update(overrides)
    return SimpleNamespace(**base)


def test_embedded_judge_is_its_own_engine_and_stops_on_close(tmp_path, tiny_model_path):
    source = ConversationDataSource(_args(tmp_path, prm_model_path=str(tiny_model_path)))
    url = source._judge_engine_url(tmp_path)
    assert httpx.get(url + "/health", timeout=10).status_code == 200
    assert source._judge_engine_url(tmp_path) == url  # one engine for judge and teacher
    assert (tmp_path / "judge_engine.log").exists()
    process = source.judge_engine.process
    source.close()
    assert process.poll() is not None


def test_gpu_judges_started_by_the_trainer_are_used_and_left_to_it(tmp_path):
    with RecordingServer({}) as router, RecordingServer({}) as worker:
        group = EngineGroup("sglang", [], [worker.url], None)
        group.urls = [router.url]  # as rank 0 sets it after starting the judge router
        source = ConversationDataSource(_args(tmp_path, prm_engine="sglang", judge_engines=group))
        assert source._judge_engine_url(tmp_path) == router.url  # generation goes through the router
        assert source.judge_engine is None  # nothing of its own to stop
        source.close()
        assert group.urls == [router.url]  # the trainer's group is untouched; the trainer stops it
    assert router.requests == [] and worker.requests == []


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="sglang is installed: it would start")
def test_without_a_trainer_this_nodes_sglang_judges_are_started(tmp_path, monkeypatch):
    """No GPU and no SGLang here: the SGLang server on the PRM slot is launched and its failure reported."""
    from slime.utils.arguments import parse_args

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        prm_base = s.getsockname()[1] - 10
    args = parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--rollout-engine", "sglang", "--rollout-num-gpus", "1",
                       "--prm-enable", "--prm-num-gpus", "2", "--prm-num-gpus-per-engine", "2",
                       "--actor-num-gpus-per-node", "1", "--num-gpus-per-node", "4", "--prm-base-port", str(prm_base)])
    args.run_dir, args.conversation_store, args.proxy_url = str(tmp_path), str(tmp_path / "conv.db"), "http://x:9"
    source = ConversationDataSource(args)
    with pytest.raises(RuntimeError, match=r"sglang exited with code \d+ before serving; see .*prm-0\.log"):
        source._judge_engine_url(tmp_path)
    log = (tmp_path / "prm-0.log").read_text()
    assert "sglang.launch_server" in log  # SGLang was what ran on the PRM slot (and found no sglang here)
    source.close()
