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

    def key(self) -> str:
        blob = json.dumps({**asdict(self), "recipe": _RECIPE_VERSION}, sort_keys=True)
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


def build_tiny_model(spec: TinySpec = TinySpec(), out_dir: Path | None = None) -> Path:
    """Return a folder holding a tiny Qwen3 model + tokenizer, building it if it is not cached yet."""
    final = Path(out_dir) if out_dir else cache_dir() / "tiny" / spec.key()
    if (final / "config.json").exists():
        return final
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    with atomic_directory(final) as tmp:
        tok = build_tokenizer(tmp, spec.vocab_size)
        config = Qwen3Config(
            vocab_size=len(tok),
            hidden_size=spec.hidden_size,
            intermediate_size=spec.intermediate_size,
            num_hidden_layers=spec.num_hidden_layers,
            num_attention_heads=spec.num_attention_heads,
            num_key_value_heads=spec.num_key_value_heads,
            head_dim=spec.head_dim,
            max_position_embeddings=spec.max_position_embeddings,
            tie_word_embeddings=True,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        )
        torch.manual_seed(spec.seed)
        model = Qwen3ForCausalLM(config)
        # Random init of a tiny model gives near-uniform logits; scaling the embeddings up makes the
        # distribution peaked enough that sampling and top-k/top-p behave like a trained model's would.
        with torch.no_grad():
            model.model.embed_tokens.weight.mul_(8.0)
        model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        model.save_pretrained(tmp)
    return final
