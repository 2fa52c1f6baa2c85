"""A custom loss written the way OpenClaw-RL's method folders write theirs (its `combine_loss.py` shape: upstream's
imports, per-sample lists, `unconcat_tokens`, `get_log_probs_and_entropy` on packed logits, `sum_of_sample_mean`
over the concatenated tokens), written here from those interfaces for the port tests: PPO's clipped policy
gradient with advantages `w_rl * GRPO + w_opd * (teacher - old)` and an optional KL term."""

import torch

from slime.backends.megatron_utils.loss import get_log_probs_and_entropy
from slime.utils.ppo_utils import compute_approx_kl, compute_policy_loss


def combined_policy_loss(args, batch, logits, sum_of_sample_mean):
    old_log_probs = torch.cat(batch["rollout_log_probs"] if args.use_rollout_logprobs else batch["log_probs"])
    _, out = get_log_probs_and_entropy(logits, args=args, unconcat_tokens=batch["unconcat_tokens"],
                                       total_lengths=batch["total_lengths"],
                                       response_lengths=batch["response_lengths"], with_entropy=True,
                                       max_seq_lens=batch.get("max_seq_lens"))
    log_probs = torch.cat(out["log_probs"])
    advantages = torch.cat(batch["advantages"])
    if batch.get("teacher_log_probs") is not None:
        teacher = torch.cat(batch["teacher_log_probs"])
        advantages = advantages + (teacher - old_log_probs)
    pg_losses, clipfrac = compute_policy_loss(old_log_probs - log_probs, advantages, args.eps_clip,
                                              args.eps_clip_high)
    loss = sum_of_sample_mean(pg_losses)
    metrics = {"pg_loss": loss.detach(), "pg_clipfrac": sum_of_sample_mean(clipfrac).detach(),
               "entropy_loss": sum_of_sample_mean(torch.cat(out["entropy"])).detach(),
               "upstream_layout_samples": torch.tensor(float(len(batch["unconcat_tokens"])))}
    if args.use_kl_loss:
        kl = sum_of_sample_mean(compute_approx_kl(log_probs, torch.cat(batch["ref_log_probs"]),
                                                  kl_loss_type=args.kl_loss_type))
        loss = loss + args.kl_loss_coef * kl
        metrics["kl_loss"] = kl.detach()
    return loss, metrics
