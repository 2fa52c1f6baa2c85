"""A GGUF file to a plain HF folder (safetensors + tokenizer + chat template), once, with progress.

transformers reads GGUF directly, dequantising to float32; doing that on every start costs ~30 s for SmolLM2 and ~65 s
for Qwen2.5-Coder-0.5B, so the embedded models are converted once into the user cache and later loads are a plain
``from_pretrained`` of a folder. The folder keeps float32 weights: the CPU engine and trainer compute in float32, and
a bf16 copy would be converted back on every load.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from slime.utils.paths import atomic_directory


class Ticker:
    """Prints an elapsed-time line every few seconds while a long, silent step runs."""

    def __init__(self, label: str, every: float = 5.0):
        self.label, self.every = label, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        start = time.monotonic()
        while not self._stop.wait(self.every):
            print(f"  ... {self.label}: {time.monotonic() - start:.0f} s elapsed", file=sys.stderr, flush=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def convert_gguf(source: Path, final: Path, what: str, expect: str) -> Path:
    """Convert the GGUF file `source` into the HF folder `final` (atomically: a folder appears whole or not at all);
    `what` names the model and `expect` says how long it takes, in the progress lines."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    print(f"Converting {what} once: {source.name} -> {final}", file=sys.stderr, flush=True)
    print(f"  ({expect}; later starts load the converted folder in a few seconds)", file=sys.stderr)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    with atomic_directory(final) as tmp:
        with Ticker("step 1/3, rebuilding the tokenizer from GGUF metadata"):
            tok = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        print("  step 1/3 done: tokenizer", file=sys.stderr, flush=True)
        with Ticker("step 2/3, dequantising the weights to float32"):
            model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
        print("  step 2/3 done: weights", file=sys.stderr, flush=True)
        # A GGUF-loaded model remembers its quantizer and refuses to serialise; the weights are plain
        # float32 tensors by now, so drop the marker.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with Ticker("step 3/3, writing safetensors"):
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        print(f"  step 3/3 done: saved in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return final
