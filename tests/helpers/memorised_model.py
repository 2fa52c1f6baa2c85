"""A tiny model that memorises fixed answers to fixed chat prompts (a deterministic "judge" for tests).

The random tiny model cannot answer a judge prompt in `\\boxed{}`; this fine-tunes it, on CPU in seconds, until
every answer token has probability >= 0.995 (so sampling at 0.6 repeats it), and caches the result under
cache_dir()/tiny/<name>-<key>, keyed on the recipe and the examples.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

EOS = "<|im_end|>"
RECIPE = {"version": 1, "steps": 500, "lr": 3e-3, "seed": 0, "check_every": 10, "target_prob": 0.995}


def build_memorised_model(name: str, examples: list[tuple[list[dict], str]]) -> Path:
    """`examples`: (chat messages, answer text ending with EOS) pairs; returns the cached model folder."""
    from slime.models.tiny import build_tiny_model
    from slime.utils.paths import atomic_directory, cache_dir

    base = build_tiny_model()
    key = hashlib.sha256(json.dumps({"recipe": RECIPE, "base": base.name, "examples": examples},
                                    sort_keys=True).encode()).hexdigest()[:12]
    final = cache_dir() / "tiny" / f"{name}-{key}"
    if not (final / "config.json").exists():
        with atomic_directory(final) as tmp:
            _memorise(base, examples, tmp)
    return final


def _memorise(base: Path, examples, out: Path) -> None:
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from slime.engine.chat_parsing import normalize_messages

    torch.manual_seed(RECIPE["seed"])
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).train()
    rows = []
    for messages, target in examples:  # rendered as the engine's /v1/chat/completions renders them
        text = tokenizer.apply_chat_template(normalize_messages(messages), add_generation_prompt=True, tokenize=False)
        rows.append((tokenizer.encode(text, add_special_tokens=False),
                     tokenizer.encode(target, add_special_tokens=False)))
    width = max(len(p) + len(a) for p, a in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (prompt, answer) in enumerate(rows):  # right padding keeps positions 0..n-1, as in the engine
        input_ids[i, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
        attention[i, : len(prompt) + len(answer)] = 1
        labels[i, len(prompt): len(prompt) + len(answer)] = torch.tensor(answer)
    shifted = labels[:, 1:]
    mask = shifted != -100
    floor = torch.log(torch.tensor(RECIPE["target_prob"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=RECIPE["lr"], weight_decay=0.0)
    for step in range(1, RECIPE["steps"] + 1):
        logprobs = torch.log_softmax(model(input_ids=input_ids, attention_mask=attention).logits[:, :-1].float(), -1)
        target_lp = logprobs.gather(-1, shifted.clamp(min=0).unsqueeze(-1)).squeeze(-1)[mask]
        # memorised when every answer token has probability >= target_prob: sampling at 0.6 then repeats it
        if step % RECIPE["check_every"] == 0 and bool((target_lp >= floor).all()):
            break
        optimizer.zero_grad()
        (-target_lp.mean()).backward()
        optimizer.step()
    else:
        raise RuntimeError(f"model did not memorise its answers in {RECIPE['steps']} steps")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (base / name).exists():
            shutil.copy2(base / name, out / name)
    model.eval().save_pretrained(out)
