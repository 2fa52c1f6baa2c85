"""slime: the shared trainer and inference framework (our implementation of the slime interface)."""

__version__ = "0.1.0"
