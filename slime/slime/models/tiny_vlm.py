"""A tiny random-weight Qwen2.5-VL (vision tower + M-RoPE language model) for tests of the vision path.

No vision-language model ships in any package we can install, and the hub is unreachable, so tests build
one from a config: the real Qwen2_5_VLForConditionalGeneration architecture (window-attention vision tower,
patch merger, 3D rotary positions) at a size that runs forward, backward and generate in well under a
second on a CPU. The tokenizer is the text tiny model's (slime.models.tiny.build_tokenizer) plus Qwen2.5-VL's
vision tokens, with a chat template that renders image content parts the way Qwen's does. The folder
(config.json, weights, tokenizer, preprocessor_config.json) is cached under `cache_dir()/tiny_vlm/<key>`
and loads with `Qwen2_5_VLForConditionalGeneration.from_pretrained(folder)`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from slime.models import tiny as tiny_text
from slime.models.chat_template import CHATML_TOOLS_TEMPLATE
from slime.models.tiny import build_tokenizer
from slime.models.vision import VisionSpec
from slime.utils.paths import atomic_directory, cache_dir

# Qwen2.5-VL's vision tokens. One `<|image_pad|>` per image in the rendered prompt; the processing step
# widens it to the image's token count (slime.models.vision.expand_image_pads).
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD, VISION_PAD = (
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|vision_pad|>")
VISION_TOKENS = [VISION_START, VISION_END, VISION_PAD, IMAGE_PAD, VIDEO_PAD]
IMAGE_PLACEHOLDER = VISION_START + IMAGE_PAD + VISION_END

# Renders a message's content whether it is a string or a list of OpenAI/HF content parts: text parts as
# their text, image parts ("image" or "image_url", whatever carries the pixels) as one placeholder.
_RENDER_CONTENT_MACRO = (
    "{%- macro render_content(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is iterable and content is not mapping -%}"
    "{%- for part in content -%}"
    "{%- if part['type'] in ['image', 'image_url'] -%}{{- '" + IMAGE_PLACEHOLDER + "' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
)


def vision_chat_template() -> str:
    """The text ChatML-with-tools template with every message content passed through render_content.

    Derived from CHATML_TOOLS_TEMPLATE rather than copied, so tool rendering stays one definition."""
    body = CHATML_TOOLS_TEMPLATE
    replaced = body.replace("messages[0]['content']", "render_content(messages[0]['content'])")
    replaced = replaced.replace("message['content']", "render_content(message['content'])")
    if replaced.count("render_content(") < 3:  # the text template changed shape: fail loudly, not render raw lists
        raise RuntimeError("CHATML_TOOLS_TEMPLATE no longer reads message['content']; update vision_chat_template")
    return _RENDER_CONTENT_MACRO + replaced


# Bump when the recipe changes so stale caches are not reused.
_RECIPE_VERSION = 1


@dataclass(frozen=True)
class TinyVLMSpec:
    vocab_size: int = 4096
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    # M-RoPE splits each head's rotary half (head_dim / 2 = 8 frequencies) into temporal/height/width parts
    mrope_section: tuple[int, int, int] = (2, 3, 3)
    vision_depth: int = 2
    vision_hidden_size: int = 32
    vision_intermediate_size: int = 64
    vision_num_heads: int = 2
    max_position_embeddings: int = 4096
    seed: int = 0

    def key(self) -> str:
        # the text tokenizer's recipe and the template are inputs too: a change there must not reuse a stale folder
        blob = json.dumps({**asdict(self), "recipe": _RECIPE_VERSION, "text_recipe": tiny_text._RECIPE_VERSION,
                           "template": vision_chat_template()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build_vlm_tokenizer(out_dir: Path, vocab_size: int):
    """The tiny text tokenizer plus Qwen2.5-VL's vision tokens and the vision chat template, saved in out_dir."""
    from tokenizers import AddedToken

    tok = build_tokenizer(out_dir, vocab_size)
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS], special_tokens=True)
    tok.chat_template = vision_chat_template()
    tok.save_pretrained(out_dir)
    return tok


def build_tiny_vlm(spec: TinyVLMSpec = TinyVLMSpec(), out_dir: Path | None = None) -> Path:
    """Return a folder holding a tiny Qwen2.5-VL model + tokenizer + preprocessor config (built once, cached)."""
    final = Path(out_dir) if out_dir else cache_dir() / "tiny_vlm" / spec.key()
    if (final / "config.json").exists():
        return final
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    vision = VisionSpec()
    with atomic_directory(final) as tmp:
        tok = build_vlm_tokenizer(tmp, spec.vocab_size)
        ids = {t: tok.convert_tokens_to_ids(t) for t in VISION_TOKENS}
        head_dim = spec.hidden_size // spec.num_attention_heads
        if 2 * sum(spec.mrope_section) != head_dim:
            raise ValueError(f"mrope_section {spec.mrope_section} must sum to head_dim / 2 = {head_dim // 2}")
        config = Qwen2_5_VLConfig(
            text_config=dict(
                vocab_size=len(tok),
                hidden_size=spec.hidden_size,
                intermediate_size=spec.intermediate_size,
                num_hidden_layers=spec.num_hidden_layers,
                num_attention_heads=spec.num_attention_heads,
                num_key_value_heads=spec.num_key_value_heads,
                max_position_embeddings=spec.max_position_embeddings,
                # Qwen's 1e6 base barely turns a 16-dim head over a few positions; 1e4 lets tests see
                # that M-RoPE positions (not plain 1D ones) reach the attention
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                 "mrope_section": list(spec.mrope_section)},
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
                bos_token_id=None,
                tie_word_embeddings=True,
            ),
            vision_config=dict(
                depth=spec.vision_depth,
                hidden_size=spec.vision_hidden_size,
                intermediate_size=spec.vision_intermediate_size,
                num_heads=spec.vision_num_heads,
                out_hidden_size=spec.hidden_size,
                patch_size=vision.patch_size,
                temporal_patch_size=vision.temporal_patch_size,
                spatial_merge_size=vision.merge_size,
                # window attention in every block but the last (Qwen2.5-VL mixes both kinds)
                fullatt_block_indexes=[spec.vision_depth - 1],
            ),
            image_token_id=ids[IMAGE_PAD],
            video_token_id=ids[VIDEO_PAD],
            vision_start_token_id=ids[VISION_START],
            vision_end_token_id=ids[VISION_END],
            tie_word_embeddings=True,
        )
        torch.manual_seed(spec.seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
        # As in tiny.py: near-uniform logits from a random init make sampling degenerate; larger embeddings
        # give a peaked distribution (the merger's image features come out at about the same scale).
        with torch.no_grad():
            model.model.language_model.embed_tokens.weight.mul_(8.0)
        model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        model.save_pretrained(tmp)
        (tmp / "preprocessor_config.json").write_text(json.dumps(vision.to_preprocessor_config(), indent=2) + "\n")
    return final
