"""The `megatron` training backend (megatron-core). `convert` needs only torch; `model` and `actor` import
megatron-core, an optional extra (`pip install 'slime[megatron]'`)."""
