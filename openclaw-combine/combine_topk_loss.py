"""`--custom-loss-function-path combine_topk_loss.combine_topk_loss_function`: the PPO policy loss on
`w_rl * reward` plus `w_opd *` the top-K reverse KL to the hinted teacher (`--distill-topk K`). Samples without
teacher data get only the RL term."""

from slime.utils.loss import combine_topk_loss_function

__all__ = ["combine_topk_loss_function"]
