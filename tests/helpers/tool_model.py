"""A tiny model fine-tuned to hold one 2-turn tool conversation, for tool-calling round trips through the engine.

The random tiny model (slime.models.tiny) cannot call tools; this helper memorises, on CPU in a few
seconds, the conversation

    user:      What is the weather in Paris?           (with TOOLS = [get_weather(city)])
    assistant: <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>
    tool:      sunny, 21 C
    assistant: It is sunny and 21 C in Paris.

rendered exactly as the engine renders it (the model's chat template, messages normalised the way
/v1/chat/completions normalises them), training only on the assistant tokens. Greedy decoding then
reproduces both answers. The result is cached under cache_dir()/tiny/tool-model-<key>, keyed on the
recipe, and built atomically, so a test session (or several) builds it once.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    }
]

USER_QUESTION = "What is the weather in Paris?"
TOOL_NAME = "get_weather"
TOOL_ARGUMENTS = {"city": "Paris"}
TOOL_RESULT = "sunny, 21 C"
FINAL_ANSWER = "It is sunny and 21 C in Paris."
EOS = "<|im_end|>"
TOOL_CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

# Bump when anything below changes the trained weights.
_RECIPE = {"version": 1, "steps": 400, "lr": 3e-3, "weight_decay": 0.0, "seed": 0, "check_every": 10,
           "target_prob": 0.995}


def turn1_messages() -> list[dict]:
    """The first request's messages (OpenAI shape)."""
    return [{"role": "user", "content": USER_QUESTION}]


def turn2_messages(tool_call_id: str = "call_0") -> list[dict]:
    """The second request's messages (OpenAI shape): turn 1, the assistant's tool call, and the tool result."""
    return [
        {"role": "user", "content": USER_QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": tool_call_id,
                    "type": "function",
                    "function": {"name": TOOL_NAME, "arguments": json.dumps(TOOL_ARGUMENTS)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": tool_call_id, "content": TOOL_RESULT},
    ]


def examples() -> list[tuple[list[dict], str]]:
    """(messages, assistant target text including the end-of-turn token) for both turns."""
    return [(turn1_messages(), TOOL_CALL_TEXT + EOS), (turn2_messages(), FINAL_ANSWER + EOS)]


def render_prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    """Prompt token ids exactly as the engine's /v1/chat/completions builds them."""
    from slime.engine.chat_parsing import normalize_messages

    text = tokenizer.apply_chat_template(
        normalize_messages(messages), tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text, add_special_tokens=False)


def _key(base: Path) -> str:
    blob = json.dumps(
        {"recipe": _RECIPE, "base": base.name, "tools": TOOLS, "examples": examples()}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build_tool_model(out_dir: Path | None = None) -> Path:
    """Return a folder holding the fine-tuned tool model (+ tokenizer), training it if it is not cached."""
    from slime.models.tiny import build_tiny_model
    from slime.utils.paths import atomic_directory, cache_dir

    base = build_tiny_model()
    final = Path(out_dir) if out_dir else cache_dir() / "tiny" / f"tool-model-{_key(base)}"
    if (final / "config.json").exists():
        return final
    with atomic_directory(final) as tmp:
        _train(base, tmp)
    return final


def _train(base: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    torch.manual_seed(_RECIPE["seed"])
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.train()

    rows = []
    for messages, target in examples():
        prompt = render_prompt_ids(tokenizer, messages)
        answer = tokenizer.encode(target, add_special_tokens=False)
        assert answer[-1] == tokenizer.eos_token_id, "the target must end with the end-of-turn token"
        rows.append((prompt, answer))
    width = max(len(p) + len(a) for p, a in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (prompt, answer) in enumerate(rows):  # right padding: positions stay 0..n-1 as in the engine
        ids = prompt + answer
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        labels[i, len(prompt) : len(ids)] = torch.tensor(answer)

    optimizer = torch.optim.AdamW(model.parameters(), lr=_RECIPE["lr"], weight_decay=_RECIPE["weight_decay"])
    # label j is predicted by the logits at position j - 1
    shifted = labels[:, 1:]
    mask = shifted != -100
    floor = torch.log(torch.tensor(_RECIPE["target_prob"]))
    done = False
    for step in range(1, _RECIPE["steps"] + 1):
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        target_lp = logprobs.gather(-1, shifted.clamp(min=0).unsqueeze(-1)).squeeze(-1)[mask]
        loss = -target_lp.mean()
        if step % _RECIPE["check_every"] == 0:
            # memorised: every assistant token is the argmax and has probability >= target_prob
            argmax_ok = bool((logprobs.argmax(-1)[mask] == shifted[mask]).all())
            done = argmax_ok and bool((target_lp >= floor).all())
            if done:
                break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if not done:
        raise RuntimeError(f"tool model did not memorise its conversation in {_RECIPE['steps']} steps "
                           f"(loss {loss.item():.4f})")

    model.eval()
    _check_greedy(model, tokenizer, rows)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (base / name).exists():
            shutil.copy2(base / name, out / name)
    model.save_pretrained(out)
    (out / "tool_model_recipe.json").write_text(json.dumps(
        {**_RECIPE, "steps_run": step, "final_loss": loss.item(), "seconds": round(time.monotonic() - started, 1),
         "base": str(base)}, indent=2))


def _check_greedy(model, tokenizer, rows) -> None:
    """Autoregressive greedy decoding (full forward each step, no cache) must reproduce each answer."""
    import torch

    with torch.no_grad():
        for prompt, answer in rows:
            ids = list(prompt)
            for _ in range(len(answer) + 4):
                next_id = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
                ids.append(next_id)
                if next_id == tokenizer.eos_token_id:
                    break
            got = ids[len(prompt):]
            if got != answer:
                raise RuntimeError(f"tool model greedy output {tokenizer.decode(got)!r} != "
                                   f"{tokenizer.decode(answer)!r}")
