# shellcheck shell=bash
# Sourced by run_digits_cpu.sh and run_digits_gpu.sh: the digit task's prompts and the one training recipe both
# run (the tiny warm-started policy, exact-match reward, 32 prompts x 8 samples, 40 rollouts, lr 1e-3, seed 1).
DIGITS_PROMPTS=data/digits_train.jsonl
DIGITS_FLAGS=(
    --hf-checkpoint tiny-digits
    --prompt-data "$DIGITS_PROMPTS" --apply-chat-template
    --custom-rm-path slime.tasks.digits.reward
    --rollout-batch-size 32 --n-samples-per-prompt 8
    --num-rollout 40
    --rollout-max-response-len 4 --rollout-temperature 1.0
    --lr 1e-3
    --seed 1
)

digits_prompts() {  # digits_prompts PYTHON: write the shipped prompt file when it is missing
    [ -f "$DIGITS_PROMPTS" ] || "$1" -m slime.tasks.digits --out "$DIGITS_PROMPTS" --n 2000 --seed 0
}

free_port() {  # free_port PYTHON: a free loopback port for torchrun's rendezvous
    "$1" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
