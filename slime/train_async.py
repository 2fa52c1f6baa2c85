"""Asynchronous RL training: rollout k+1 is generated while the trainer learns from rollout k.

    torchrun --nproc_per_node=2 slime/train_async.py --hf-checkpoint tiny --prompt-data data.jsonl ...
"""

from slime.backends.fsdp.parallel import exit_worker
from slime.training.loop import main

if __name__ == "__main__":
    exit_worker(main("async"))
