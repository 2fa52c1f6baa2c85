"""Tiny random-weight Qwen3 causal LMs with a locally trained byte-level BPE tokenizer.

Tests need a real transformers model and a real tokenizer with a chat template, but no hub and no
minutes of start-up. The tokenizer is trained on the Python standard library's source files (always on
disk, English docstrings plus code), so it encodes ordinary text into sensible sub-words; the model has
random weights. Both are cached under `cache_dir()/tiny/<key>` so a test session builds each size once.
"""

from __future__ import annotations

import hashlib
import json
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

from slime.models.chat_template import CHATML_TOOLS_TEMPLATE
from slime.utils.paths import atomic_directory, cache_dir

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Single tokens that are ordinary text when decoded (as in Qwen3): skip_special_tokens must not erase
# the tags the tool-call and reasoning parsers look for.
TAG_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
# Bump when the recipe changes so stale caches are not reused.
_RECIPE_VERSION = 2


@dataclass(frozen=True)
class TinySpec:
    vocab_size: int = 4096
    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    max_position_embeddings: int = 2048
    seed: int = 0
    architecture: str = "qwen3"  # or "qwen2": Qwen2.5's (q/k/v biases, an untied output layer, rope theta 1e6)

    def key(self) -> str:
        fields = asdict(self)
        if fields["architecture"] == "qwen3":  # the key of every Qwen3 model cached before Qwen2 was added
            del fields["architecture"]
        blob = json.dumps({**fields, "recipe": _RECIPE_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _corpus_files(limit: int = 200) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if p.stat().st_size > 2000)
    return [str(p) for p in files[:limit]]


def build_tokenizer(out_dir: Path, vocab_size: int):
    """Train a byte-level BPE tokenizer and save it as a transformers fast tokenizer with a chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(_corpus_files(), trainer)
    tok.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAG_TOKENS])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    hf.chat_template = CHATML_TOOLS_TEMPLATE
    hf.save_pretrained(out_dir)
    return hf


QWEN2_SPEC = TinySpec(architecture="qwen2")


def build_tiny_model(spec: TinySpec = TinySpec(), out_dir: Path | None = None) -> Path:
    """Return a folder holding a tiny Qwen3 (or, by `spec.architecture`, Qwen2) model + tokenizer, building it if it
    is not cached yet."""
    final = Path(out_dir) if out_dir else cache_dir() / "tiny" / spec.key()
    if (final / "config.json").exists():
        return final
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if spec.architecture not in ("qwen3", "qwen2"):
        raise ValueError(f"tiny model architecture must be qwen3 or qwen2, got {spec.architecture!r}")
    with atomic_directory(final) as tmp:
        tok = build_tokenizer(tmp, spec.vocab_size)
        common = dict(
            vocab_size=len(tok),
            hidden_size=spec.hidden_size,
            intermediate_size=spec.intermediate_size,
            num_hidden_layers=spec.num_hidden_layers,
            num_attention_heads=spec.num_attention_heads,
            num_key_value_heads=spec.num_key_value_heads,
            max_position_embeddings=spec.max_position_embeddings,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        )
        torch.manual_seed(spec.seed)
        if spec.architecture == "qwen2":
            if spec.head_dim * spec.num_attention_heads != spec.hidden_size:
                raise ValueError("a Qwen2 model's head_dim is hidden_size / num_attention_heads")
            # Qwen2.5-Coder-0.5B's settings that change the computation: q/k/v biases (always on in Qwen2), an
            # untied output layer, rope theta 1e6, no sliding window
            config = Qwen2Config(**common, tie_word_embeddings=False, rope_theta=1_000_000.0, use_sliding_window=False)
            model = Qwen2ForCausalLM(config)
            with torch.no_grad():  # random biases: zero-initialised ones would leave the bias path untested
                for layer in model.model.layers:
                    for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                        proj.bias.normal_(0.0, 0.5)
                model.lm_head.weight.mul_(8.0)
        else:
            model = Qwen3ForCausalLM(Qwen3Config(**common, head_dim=spec.head_dim, tie_word_embeddings=True))
        # Random init of a tiny model gives near-uniform logits; scaling the embeddings up makes the
        # distribution peaked enough that sampling and top-k/top-p behave like a trained model's would.
        with torch.no_grad():
            model.model.embed_tokens.weight.mul_(8.0)
        model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        model.save_pretrained(tmp)
    return final
