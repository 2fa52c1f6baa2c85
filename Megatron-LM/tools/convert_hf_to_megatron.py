#!/usr/bin/env python
"""HF checkpoint -> megatron-core checkpoint split for tensor parallelism (dense Qwen3 and Llama).

    python Megatron-LM/tools/convert_hf_to_megatron.py --hf-checkpoint /models/Qwen3-4B \\
        --save /ckpt/Qwen3-4B_mcore_tp2 --tensor-model-parallel-size 2 [${MODEL_ARGS[@]}]

Writes SAVE/latest_checkpointed_iteration.txt ("release"), SAVE/release/mp_rank_{RR}/model_optim_rng.pt (each TP
rank's state dict under "model", megatron-core names) and SAVE/slime_megatron_checkpoint.json (TP size, names,
dtype, model facts); see Megatron-LM/README.md. Dtypes are kept; the vocabulary is zero-padded to a multiple of
--make-vocab-size-divisible-by x TP, as megatron-core does. MODEL_ARGS flags (Megatron-LM/scripts/models/*.sh)
are optional; when given they must agree with the HF config. The conversion itself is
slime.backends.megatron.convert; this script only reads, checks and writes. Exit status 2: bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tools' shared module, however this file is loaded
from conversion_cli import progress as _progress  # noqa: E402
from conversion_cli import check_save_folder, read_hf_config, resolve_hf_checkpoint  # noqa: E402

PROG = Path(__file__).name


def progress(message: str) -> None:
    _progress(PROG, message)


def build_parser() -> argparse.ArgumentParser:
    from slime.utils.arguments import add_megatron_model_flags

    p = argparse.ArgumentParser(prog=PROG, allow_abbrev=False,
                                usage="%(prog)s --hf-checkpoint DIR --save DIR [--tensor-model-parallel-size N] "
                                      "[options] [MODEL_ARGS ...]",
                                description="Convert an HF checkpoint (Qwen3 / Llama, safetensors) to per-TP-rank "
                                            "megatron-core state dicts.")
    p.add_argument("--hf-checkpoint", required=True, metavar="DIR",
                   help="HF model folder (config.json + *.safetensors), or a built-in name such as 'tiny'")
    p.add_argument("--save", required=True, metavar="DIR", help="output folder (created; must be empty unless --force)")
    p.add_argument("--tensor-model-parallel-size", type=int, default=1, metavar="N", help="TP size (default 1)")
    p.add_argument("--make-vocab-size-divisible-by", type=int, default=128, metavar="N",
                   help="pad the vocabulary to a multiple of N x TP (megatron-core's default 128)")
    p.add_argument("--transformer-impl", choices=["transformer_engine", "local"], default="transformer_engine",
                   help="tensor names of this layer spec (default transformer_engine: norms folded into "
                        "linear_qkv / linear_fc1; local: input_layernorm / pre_mlp_layernorm)")
    p.add_argument("-f", "--force", action="store_true", help="write into a --save folder that is not empty")
    add_megatron_model_flags(p.add_argument_group(
        "MODEL_ARGS (optional)", "flags of Megatron-LM/scripts/models/*.sh, checked against the HF config"))
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tensor_model_parallel_size < 1:
        parser.error(f"--tensor-model-parallel-size must be >= 1, got {args.tensor_model_parallel_size}")
    if args.add_qkv_bias:
        parser.error("--add-qkv-bias: the megatron backend supports Qwen3 and Llama without linear biases")
    if args.make_vocab_size_divisible_by < 1:
        parser.error(f"--make-vocab-size-divisible-by must be >= 1, got {args.make_vocab_size_divisible_by}")
    save = Path(args.save)
    check_save_folder(parser, save, args.force)

    from slime.backends.megatron import convert
    from slime.backends.megatron.model import check_model_args, rope_theta

    hf_dir = resolve_hf_checkpoint(parser, args.hf_checkpoint)
    tp = args.tensor_model_parallel_size
    config = read_hf_config(parser, hf_dir)
    try:
        layout = convert.ModelLayout.from_hf_config(config)
        rope_theta(config)  # scaled RoPE variants: the backend's GPTModel cannot run them
        check_model_args(args, config)
        padded = convert.padded_vocab_size(layout.vocab_size, tp, args.make_vocab_size_divisible_by)
        convert.check_tp_size(layout, tp, padded)
        progress(f"{hf_dir}: {layout.model_type}, {layout.num_layers} layers, hidden {layout.hidden_size}, "
                 f"{layout.num_heads} heads / {layout.num_kv_heads} query groups, vocab {layout.vocab_size} -> "
                 f"{padded}, {'tied' if layout.tied_embeddings else 'untied'} embeddings; TP {tp}")
        hf = convert.read_hf_weights(hf_dir, progress)
        progress(f"converting {len(hf)} HF tensors to megatron-core names")
        mc = convert.hf_to_megatron(hf, layout, padded_vocab=padded)
        del hf
        metadata = convert.save_megatron_checkpoint(
            save, mc, layout, tp, vocab_divisor=args.make_vocab_size_divisible_by, layer_spec=args.transformer_impl,
            source=str(hf_dir), progress=progress)
    except convert.ConversionError as exc:
        parser.error(str(exc))
    progress(f"done: {metadata['num_tensors']} tensors x {tp} TP rank(s), dtype {metadata['dtype']} -> {save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
