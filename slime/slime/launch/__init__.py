"""Job layout and launcher: which GPUs and ports each trainer rank and engine gets, on one node or many.

`python -m slime.launch [--dry-run] slime/train_async.py <trainer flags>` validates the layout from the
trainer flags (plus NNODES / NODE_RANK / MASTER_ADDR / MASTER_PORT), prints it, and starts torchrun.
"""

from slime.launch.layout import (
    EngineSlot,
    Layout,
    LayoutError,
    layout_from_args,
    resolve_layout,
    visible_devices,
)

__all__ = ["EngineSlot", "Layout", "LayoutError", "layout_from_args", "resolve_layout", "visible_devices"]
