"""The conversion CLIs of Megatron-LM/tools, run as subprocesses: HF -> Megatron (per-TP-rank files) -> HF returns
the tiny model's tensors bit for bit at TP 1 and TP 2, and bad input exits with status 2 and a one-line reason
(one case as a process, the others through the scripts' main() in-process). Pure torch (no torch.distributed, no
megatron-core import); five CLI processes in two concurrent batches, about 2 s each on an idle core."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from slime.backends.megatron import convert

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "Megatron-LM" / "tools"
TO_MEGATRON = TOOLS / "convert_hf_to_megatron.py"
TO_HF = TOOLS / "convert_megatron_to_hf.py"
# MODEL_ARGS of the tiny Qwen3 (the flags of Megatron-LM/scripts/models/*.sh with its sizes)
TINY_MODEL_ARGS = ["--swiglu", "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "192",
                   "--num-attention-heads", "4", "--group-query-attention", "--num-query-groups", "2",
                   "--kv-channels", "16", "--disable-bias-linear", "--normalization", "RMSNorm", "--qk-layernorm"]


def _command(script: Path, *argv) -> list[str]:
    return [sys.executable, str(script), *map(str, argv)]


def _load_script(path: Path):
    """The CLI as a module, to call its main(argv) in-process (the error paths, without a subprocess each)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROUND_TRIPS = {1: ["--transformer-impl", "local", *TINY_MODEL_ARGS], 2: []}  # TP size -> extra flags


def _run_all(commands: dict) -> dict[object, subprocess.CompletedProcess]:
    """Run the commands concurrently (each CLI start is mostly `import torch, transformers`)."""
    procs = {key: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
             for key, cmd in commands.items()}
    results = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        results[key] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return results


@pytest.fixture(scope="module")
def round_trips(tmp_path_factory, tiny_model_path):
    """HF -> Megatron at TP 1 and TP 2, then back; plus the way back with a config that does not match.
    Returns (folder, {name: CompletedProcess})."""
    root = tmp_path_factory.mktemp("megatron-cli")
    other = root / "other"  # the tiny model's config with another FFN size
    other.mkdir()
    config = json.loads((Path(tiny_model_path) / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "intermediate_size": 128}))
    runs = _run_all({f"to_megatron{tp}": _command(TO_MEGATRON, "--hf-checkpoint", tiny_model_path, "--save",
                                                  root / f"mcore{tp}", "--tensor-model-parallel-size", tp, *extra)
                     for tp, extra in ROUND_TRIPS.items()})
    runs.update(_run_all({**{f"to_hf{tp}": _command(TO_HF, "--load", root / f"mcore{tp}", "--hf-checkpoint",
                                                    tiny_model_path, "--save", root / f"hf{tp}")
                             for tp in ROUND_TRIPS},
                          # upstream slime's flag names work too
                          "wrong_hf": _command(TO_HF, "--input-dir", root / "mcore2", "--origin-hf-dir", other,
                                               "--output-dir", root / "wrong")}))
    return root, runs


@pytest.mark.parametrize("tp", sorted(ROUND_TRIPS), ids=["tp1-local-names-model-args", "tp2"])
def test_round_trip_is_bit_exact(round_trips, tiny_model_path, tp):
    root, runs = round_trips
    hf_dir, mcore, back = Path(tiny_model_path), root / f"mcore{tp}", root / f"hf{tp}"
    done = runs[f"to_megatron{tp}"]
    assert done.returncode == 0, done.stderr
    assert f"writing TP rank {tp}/{tp}" in done.stderr and "done:" in done.stderr  # progress lines

    metadata = json.loads((mcore / convert.CHECKPOINT_METADATA).read_text())
    original = convert.read_hf_weights(hf_dir)
    assert metadata["tensor_model_parallel_size"] == tp and metadata["dtype"] == "float32"
    assert metadata["layer_spec"] == ("local" if ROUND_TRIPS[tp] else "transformer_engine")
    vocab, hidden = original["model.embed_tokens.weight"].shape
    assert metadata["padded_vocab_size"] == convert.padded_vocab_size(vocab, tp) > vocab
    for rank in range(tp):  # every rank holds its 1/tp of the padded vocabulary and of the fused QKV
        shard = torch.load(mcore / convert.rank_file(rank), weights_only=True)["model"]
        assert shard["embedding.word_embeddings.weight"].shape == (metadata["padded_vocab_size"] // tp, hidden)
        assert "output_layer.weight" not in shard  # tied embeddings
        qkv = shard["decoder.layers.1.self_attention.linear_qkv.weight"]
        assert qkv.shape[0] * tp == original["model.layers.1.self_attn.q_proj.weight"].shape[0] + \
            2 * original["model.layers.1.self_attn.k_proj.weight"].shape[0]

    done = runs[f"to_hf{tp}"]
    assert done.returncode == 0, done.stderr
    assert f"reading TP rank {tp}/{tp}" in done.stderr
    restored = convert.read_hf_weights(back)
    assert restored.keys() == original.keys()
    for name, tensor in original.items():
        assert restored[name].dtype == tensor.dtype and torch.equal(restored[name], tensor), name
    for item in hf_dir.iterdir():  # config, generation config, tokenizer files: copied unchanged
        if item.is_file() and not item.name.endswith(".safetensors"):
            assert (back / item.name).read_bytes() == item.read_bytes(), item.name


def test_bad_input_exits_2_as_a_process(round_trips):
    """The exit status and argparse's one-line reason on stderr, no traceback, nothing written."""
    root, runs = round_trips
    wrong = runs["wrong_hf"]
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr, wrong.stderr
    assert wrong.stderr.strip().splitlines()[-1] == ("convert_megatron_to_hf.py: error: the checkpoint does not match "
                                                     "the HF config: ffn_hidden_size 192 (HF config: 128)")
    assert not (root / "wrong").exists()


def test_bad_input_exits_2_with_a_reason(tmp_path, tiny_model_path, capsys):
    import re

    from transformers import GPT2Config

    gpt2 = tmp_path / "gpt2"
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(gpt2)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "qwen3", ')
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    out = tmp_path / "out"
    cases = [
        (TO_MEGATRON, ["--hf-checkpoint", tmp_path / "nope", "--save", out], "--hf-checkpoint .*nope: no such folder"),
        (TO_MEGATRON, ["--hf-checkpoint", gpt2, "--save", out], "model_type 'gpt2' is not supported"),
        (TO_MEGATRON, ["--hf-checkpoint", tiny_model_path, "--save", out, "--tensor-model-parallel-size", "3"],
         "--tensor-model-parallel-size 3 does not divide num_key_value_heads 2, num_attention_heads 4$"),
        (TO_MEGATRON, ["--hf-checkpoint", tiny_model_path, "--save", out, "--num-layers", "3"],
         r"MODEL_ARGS disagree .*: --num-layers 3 \(HF config: 2\)"),
        (TO_MEGATRON, ["--hf-checkpoint", tiny_model_path, "--save", tmp_path / "full"], r"not empty \(use --force\)"),
        (TO_MEGATRON, ["--hf-checkpoint", tiny_model_path, "--save", out, "--tp", "2"],
         "unrecognized arguments: --tp 2"),
        (TO_MEGATRON, ["--save", out], "the following arguments are required: --hf-checkpoint"),
        (TO_MEGATRON, ["--hf-checkpoint", broken, "--save", out], "cannot read its config.json: "),
        (TO_HF, ["--load", tmp_path / "nope", "--hf-checkpoint", tiny_model_path, "--save", out],
         "--load .*nope: no such folder"),
        (TO_HF, ["--load", gpt2, "--hf-checkpoint", tiny_model_path, "--save", out],
         "holds no slime_megatron_checkpoint.json: not a checkpoint written by convert_hf_to_megatron.py"),
    ]
    modules = {script: _load_script(script) for script in (TO_MEGATRON, TO_HF)}
    for script, argv, reason in cases:
        with pytest.raises(SystemExit) as exited:
            modules[script].main([str(a) for a in argv])
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert exited.value.code == 2, (argv, last)
        assert last.startswith(f"{script.name}: error: ") and re.search(reason, last), (argv, last)
    assert not out.exists()
