"""Run one optimizer step of the fsdp backend on a fixed global batch; rank 0 saves the resulting weights.

    torchrun --nproc_per_node=N tests/helpers/one_train_step.py OUT STRATEGY [--use-lora]

Every rank takes its round-robin share of the same 8 rows, as the trainer does, so single-process,
DDP and FSDP2 runs must end with the same weights.
"""

import json
import random
import sys

import torch


def main():
    out, strategy, *flags = sys.argv[1:]
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed
    from slime.training.train_data import shard_for_ranks
    from slime.utils.arguments import parse_args

    dist = init_distributed("cpu")
    args = parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "8", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-2",
                       # Adam divides by |g| + eps: with a tiny eps, gradients near zero turn float noise from
                       # a different reduction order into full-size updates; a larger eps compares the math
                       "--adam-eps", "1e-3", "--fsdp-strategy", strategy,
                       "--use-dynamic-batch-size", "--max-tokens-per-gpu", "60", "--rollout-temperature", "0.8",
                       "--disable-rewards-normalization", *flags], world_size=dist.world_size)
    from slime.models import resolve_model_path

    path = str(resolve_model_path("tiny"))
    actor = FSDPActor(args, dist, path, AutoTokenizer.from_pretrained(path))
    rng = random.Random(0)
    rows = []
    for i in range(8):
        prompt, response = rng.randint(4, 12), rng.randint(2, 9)
        rows.append({"tokens": [rng.randrange(4000) for _ in range(prompt + response)], "response_length": response,
                     "loss_mask": [1] * response, "advantages": [rng.uniform(-1, 1)] * response,
                     "rollout_log_probs": None})
    mine = shard_for_ranks(rows, 8, dist.world_size)[dist.rank]
    for row, lp in zip(mine, actor.compute_log_probs(mine)):
        row["old_log_probs"] = [v - 0.3 for v in lp]  # an off-policy gap (ratio 1.35) so clipping matters
    metrics = actor.train_step(mine, 8)
    state = actor.full_state_dict()
    if dist.is_main:
        torch.save(state, out)
        with open(out + ".json", "w") as f:
            json.dump({"metrics": metrics, "strategy": actor.strategy}, f)


if __name__ == "__main__":
    from slime.backends.fsdp.parallel import leave_together

    main()
    leave_together()
