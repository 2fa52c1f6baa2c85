"""One trainer process for a check against an engine (tests of a model architecture): reads rows (prompt+response
tokens with the engine's log-probabilities), builds the fsdp actor as a plain process (a group of one), and writes
JSON: the trainer's log-probabilities of the rows, then, after one PPO step (advantages +1), the new ones; with
EXPORT, the trained weights exported there for the engine to load.

    python tests/helpers/trainer_check.py MODEL ROWS.json OUT.json [EXPORT_DIR] [-- trainer flags]

Its own process, so the process group, its rendezvous port and the environment it sets leave with it."""

import json
import sys
from pathlib import Path


def main():
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    positional = argv[:argv.index("--")] if "--" in argv else argv
    model, rows_path, out_path, *export = positional
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed, leave_together
    from slime.utils.arguments import parse_args

    rows = json.loads(open(rows_path).read())
    dist = init_distributed("cpu")
    args = parse_args(["--hf-checkpoint", model, "--rollout-batch-size", str(len(rows)), "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-2", "--disable-rewards-normalization", *flags],
                      world_size=dist.world_size)
    actor = FSDPActor(args, dist, model, AutoTokenizer.from_pretrained(model))
    before = actor.compute_log_probs(rows)
    for row, lp in zip(rows, before):
        row["old_log_probs"] = lp
        row["advantages"] = [1.0] * row["response_length"]
    frozen = {k: v.clone() for k, v in actor.hf_model.state_dict().items() if "lora_" not in k}
    metrics = actor.train_step(rows, len(rows))
    after = actor.compute_log_probs(rows)
    now = actor.hf_model.state_dict()
    changed = sorted(k for k, v in frozen.items() if not (now[k] == v).all())
    adapted = sorted({int(k.split(".layers.")[1].split(".")[0]) for k in now if "lora_" in k and ".layers." in k})
    if export:
        actor.export_hf(Path(export[0]))
    with open(out_path, "w") as f:
        json.dump({"before": before, "after": after, "grad_norm": metrics["train/grad_norm"],
                   "changed_base_tensors": changed, "lora_layers": adapted}, f)
    leave_together()


if __name__ == "__main__":
    main()
