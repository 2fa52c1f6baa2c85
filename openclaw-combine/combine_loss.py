"""`--custom-loss-function-path combine_loss.combine_loss_function`: PPO-clipped policy loss with the advantage
`w_rl * reward + w_opd * (teacher - old)` per token (`OPENCLAW_COMBINE_W_RL` / `OPENCLAW_COMBINE_W_OPD` or
`--combine-w-rl` / `--combine-w-opd`). Samples without teacher data have an OPD term of exactly 0."""

from slime.utils.loss import combine_loss_function

__all__ = ["combine_loss_function"]
