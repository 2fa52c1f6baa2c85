"""Synchronous RL training: generate a rollout, train on it, publish weights, repeat.

    torchrun --nproc_per_node=2 slime/train.py --hf-checkpoint tiny --prompt-data data.jsonl ...
"""

from slime.backends.fsdp.parallel import exit_worker
from slime.training.loop import main

if __name__ == "__main__":
    exit_worker(main("sync"))
