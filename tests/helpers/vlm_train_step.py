"""Old log-probs and one optimizer step of the fsdp backend on a vision-language model's rows.

    torchrun --nproc_per_node=N tests/helpers/vlm_train_step.py MODEL ROWS.json OUT STRATEGY [flags...]

ROWS.json holds the global batch (rows as slime.training.train_data.to_rows builds them, images as base64);
every rank takes its round-robin share, as the trainer does. Rank 0 saves the weights after the step to OUT
and writes OUT.json: every row's trainer log-probs (by row position in ROWS.json), the metrics, the strategy.
"""

import json
import sys

import torch


def main():
    model, rows_path, out, strategy, *flags = sys.argv[1:]
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed
    from slime.training.train_data import shard_for_ranks
    from slime.utils.arguments import parse_args

    dist = init_distributed("cpu")
    rows = json.loads(open(rows_path).read())
    for position, row in enumerate(rows):
        row["position"] = position
    args = parse_args(["--hf-checkpoint", model, "--rollout-batch-size", str(len(rows)), "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-2", "--adam-eps", "1e-3",
                       "--fsdp-strategy", strategy, "--rollout-temperature", "1.0",
                       "--disable-rewards-normalization", *flags], world_size=dist.world_size)
    actor = FSDPActor(args, dist, model, AutoTokenizer.from_pretrained(model))
    mine = shard_for_ranks(rows, len(rows), dist.world_size)[dist.rank]
    log_probs = {}
    for row, lp in zip(mine, actor.compute_log_probs(mine)):
        row["old_log_probs"] = [v - 0.3 for v in lp]  # an off-policy gap so the ratio is not 1
        log_probs[row["position"]] = lp
    metrics = actor.train_step(mine, len(rows))
    gathered = [None] * dist.world_size
    torch.distributed.all_gather_object(gathered, log_probs)
    state = actor.full_state_dict()
    if dist.is_main:
        merged = {str(k): v for part in gathered for k, v in part.items()}
        torch.save(state, out)
        with open(out + ".json", "w") as f:
            json.dump({"log_probs": merged, "metrics": metrics, "strategy": actor.strategy}, f)


if __name__ == "__main__":
    from slime.backends.fsdp.parallel import leave_together

    main()
    leave_together()
