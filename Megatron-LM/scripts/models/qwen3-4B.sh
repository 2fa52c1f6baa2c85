# Qwen3-4B (Qwen/Qwen3-4B config.json): Megatron architecture flags for --train-backend megatron.
# Source it and splice "${MODEL_ARGS[@]}" into the training command. The model itself is built from
# --hf-checkpoint's config.json; slime checks these flags against it and stops on any disagreement.
# Qwen3-*-2507 checkpoints use RoPE base 5e6: set MODEL_ARGS_ROTARY_BASE=5000000 before sourcing.
MODEL_ARGS=(
   --swiglu
   --num-layers 36
   --hidden-size 2560
   --ffn-hidden-size 9728
   --num-attention-heads 32
   --group-query-attention
   --num-query-groups 8
   --kv-channels 128
   --use-rotary-position-embeddings
   --rotary-base "${MODEL_ARGS_ROTARY_BASE:-1000000}"
   --disable-bias-linear
   --normalization RMSNorm
   --norm-epsilon 1e-6
   --qk-layernorm
   --vocab-size 151936
)
