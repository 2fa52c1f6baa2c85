"""`--custom-loss-function-path topk_distillation_loss.topk_distillation_loss_function`: reverse KL to the
teacher's top-K tokens plus a tail bin (one log-softmax and a gather; see `slime.utils.distill`)."""

from slime.utils.loss import topk_distillation_loss_function

__all__ = ["topk_distillation_loss_function"]
