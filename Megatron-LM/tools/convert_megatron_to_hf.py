#!/usr/bin/env python
"""megatron-core checkpoint written by convert_hf_to_megatron.py -> HF checkpoint (the way back).

    python Megatron-LM/tools/convert_megatron_to_hf.py --load /ckpt/Qwen3-4B_mcore_tp2 \\
        --hf-checkpoint /models/Qwen3-4B --save /models/Qwen3-4B_roundtrip

Reads every TP rank's state dict (any TP size: the metadata JSON says which), merges the shards, converts the names
back and drops the vocabulary padding (slime.backends.megatron.convert). Writes SAVE/model*.safetensors (sharded at
5 GB, with an index, like save_pretrained) in the checkpoint's dtype, plus every non-weight file of --hf-checkpoint
(config.json, generation config, tokenizer, chat template). --hf-checkpoint must be the model the checkpoint was
converted from (its config is checked against the checkpoint's metadata). Upstream slime's names --input-dir,
--origin-hf-dir, --output-dir are accepted as aliases. Exit status 2: bad input.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tools' shared module, however this file is loaded
from conversion_cli import progress as _progress  # noqa: E402
from conversion_cli import check_save_folder, read_hf_config, resolve_hf_checkpoint  # noqa: E402

PROG = Path(__file__).name
# files of the HF folder that hold weights (rewritten here), everything else is copied as is
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def progress(message: str) -> None:
    _progress(PROG, message)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, allow_abbrev=False,
                                description="Convert a checkpoint written by convert_hf_to_megatron.py back to an "
                                            "HF folder.")
    p.add_argument("--load", "--input-dir", dest="load", required=True, metavar="DIR",
                   help="checkpoint folder written by convert_hf_to_megatron.py")
    p.add_argument("--hf-checkpoint", "--origin-hf-dir", dest="hf_checkpoint", required=True, metavar="DIR",
                   help="the HF model folder it was converted from (config, tokenizer), or a built-in name")
    p.add_argument("--save", "--output-dir", dest="save", required=True, metavar="DIR",
                   help="output HF folder (created; must be empty unless --force)")
    p.add_argument("-f", "--force", action="store_true", help="write into a --save folder that is not empty")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    load, save = Path(args.load), Path(args.save)
    if not load.is_dir():
        parser.error(f"--load {load}: no such folder")
    check_save_folder(parser, save, args.force)

    from slime.backends.megatron import convert

    hf_dir = resolve_hf_checkpoint(parser, args.hf_checkpoint)
    if hf_dir.resolve() == save.resolve():
        parser.error("--save must differ from --hf-checkpoint")
    try:
        metadata = convert.read_checkpoint_metadata(load)  # before any heavy work: is this our format at all?
    except convert.ConversionError as exc:
        parser.error(str(exc))
    config = read_hf_config(parser, hf_dir)
    try:
        layout = convert.ModelLayout.from_hf_config(config)
        convert.check_checkpoint_layout(metadata, layout)
        progress(f"{load}: TP {metadata['tensor_model_parallel_size']}, {metadata['layer_spec']} names, "
                 f"dtype {metadata['dtype']}, {layout.model_type} with {layout.num_layers} layers")
        mc, _ = convert.load_megatron_checkpoint(load, progress)
        progress(f"converting {len(mc)} megatron-core tensors to HF names")
        hf = convert.with_own_storage(convert.megatron_to_hf(mc, layout))  # the hub's sharded save needs it
        del mc
    except convert.ConversionError as exc:
        parser.error(str(exc))

    from huggingface_hub import save_torch_state_dict

    save.mkdir(parents=True, exist_ok=True)
    for stale in [*save.glob("*.safetensors"), *(save / name for name in WEIGHT_INDEXES)]:
        stale.unlink(missing_ok=True)  # --force: weights of an earlier run must not mix with these
    copied = []
    for item in sorted(hf_dir.iterdir()):
        if item.is_file() and not item.name.startswith(".") and not item.name.endswith(WEIGHT_SUFFIXES) \
                and item.name not in WEIGHT_INDEXES:
            shutil.copy2(item, save / item.name)
            copied.append(item.name)
    progress(f"copied from --hf-checkpoint: {', '.join(copied)}")
    progress(f"writing {len(hf)} tensors to {save}")
    save_torch_state_dict(hf, save, max_shard_size="5GB", metadata={"format": "pt"})
    for written in save.glob("*.safetensors"):
        written.chmod(0o644)  # written through a private temporary file (0600): make it readable like the rest
    progress(f"done -> {save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
