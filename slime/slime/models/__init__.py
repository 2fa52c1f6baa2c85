"""Models available with no model hub: tiny random-weight test models, the embedded SmolLM2 default, HF folders."""

from slime.models.registry import resolve_model_path

__all__ = ["resolve_model_path"]
