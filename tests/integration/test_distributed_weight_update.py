"""The distributed weight-update path (SGLang's NCCL route), run over gloo on CPU with stand-in engines.

Two stand-in engines (tests/helpers/fake_sglang_weight_receiver.py) join the trainer's group exactly as SGLang
does and receive every tensor by broadcast. This checks the request bodies, their order, rank offsets, bucketing,
the version/flush on the last bucket only, and that the bytes arrive intact. Real NCCL and real SGLang engines
are not exercised: the GPU path is unverified here.
"""

from __future__ import annotations

import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import torch

from slime.training.weight_sync import GROUP_NAME, DistributedWeightPublisher, bucket_by_size

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "fake_sglang_weight_receiver.py"


def start_receiver(out: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(HELPER), str(out)], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_bucket_by_size_keeps_order_and_limits():
    tensors = [(f"t{i}", torch.zeros(n, dtype=torch.float32)) for i, n in enumerate([4, 4, 10, 1, 1])]
    buckets = [[name for name, _ in b] for b in bucket_by_size(tensors, max_bytes=32)]
    assert buckets == [["t0", "t1"], ["t2"], ["t3", "t4"]]  # t2 (40 bytes) is larger than a bucket: alone


def test_weights_reach_every_engine_over_the_group(tmp_path):
    procs = [start_receiver(tmp_path / f"engine{i}.pt") for i in range(2)]
    try:
        weights = {"model.embed_tokens.weight": torch.randn(5, 3),
                   "model.layers.0.mlp.up_proj.weight": torch.randn(4, 3).to(torch.bfloat16),
                   "lm_head.weight": torch.randn(5, 3)}
        publisher = DistributedWeightPublisher(Namespace(update_weight_buffer_size=64), [url for _, url in procs],
                                               engine_tp_sizes=[1, 1], is_main=True, start_version=6,
                                               backend="gloo", device="cpu")
        publisher.send(list(weights.items()), version=7)
        publisher.close()
        for proc, _ in procs:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
    for i in range(2):
        got = torch.load(tmp_path / f"engine{i}.pt")
        paths = [path for path, _ in got["requests"]]
        # connect once, one update per bucket (64-byte buckets: 60 + 24 bytes do not fit together), then destroy
        assert paths == ["/init_weights_update_group", "/update_weights_from_distributed",
                         "/update_weights_from_distributed", "/update_weights_from_distributed",
                         "/destroy_weights_update_group"]
        init = got["requests"][0][1]
        assert (init["rank_offset"], init["world_size"], init["group_name"], init["backend"]) == (1 + i, 3,
                                                                                                  GROUP_NAME, "gloo")
        updates = [body for path, body in got["requests"] if path == "/update_weights_from_distributed"]
        assert [u["names"] for u in updates] == [[name] for name in weights]
        assert [u["dtypes"] for u in updates] == [["float32"], ["bfloat16"], ["float32"]]
        assert [u["flush_cache"] for u in updates] == [False, False, True]
        assert [u.get("weight_version") for u in updates] == [None, None, "7"]
        for name, tensor in weights.items():
            assert torch.equal(got["received"][name], tensor)
