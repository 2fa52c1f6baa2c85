"""How likely a model is to open its reply with a given word: the diagnostic behind the hint-only analysis.

For a persona whose preference is an opener ("Sure!", "Hello"), the sampled held-out rate stays at 0 long after
training has started to move the policy; the probability of the opener's first token at the start of the reply
shows the movement (and, with the hint, how strongly the OPD teacher points at it):

    python -m personalization.first_token --model runs/.../server/ckpt/weights/v000010 --opener Sure
    python -m personalization.first_token --model smollm2 --opener Sure --split train --num 16 \
        --hint 'Start your reply with "Sure!" and then answer.'

Prompts are rendered exactly as the engine renders a chat request (`TeacherPromptBuilder`), with the hint
appended the way the OPD teacher sees it (`hinted_messages`).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

import torch

from slime.conversation.teacher import TeacherPromptBuilder, hinted_messages
from personalization.problems import load_problems

__all__ = ["opener_probabilities"]


def opener_probabilities(model, tokenizer, questions: Sequence[str], opener: str, hint: str | None = None) -> list[float]:
    """P(the reply's first token is `opener`'s first token) for each question asked as one user message."""
    token = tokenizer.encode(opener, add_special_tokens=False)[0]
    builder = TeacherPromptBuilder(tokenizer)
    out = []
    for question in questions:
        messages = [{"role": "user", "content": question}]
        if hint:
            messages = hinted_messages(messages, hint)
        ids = torch.tensor([builder.render_prompt_ids(messages)])
        with torch.no_grad():
            out.append(torch.softmax(model(ids).logits[0, -1].float(), -1)[token].item())
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a model folder or a registry name (smollm2)")
    parser.add_argument("--opener", required=True, help="the word whose first token is measured, e.g. Sure")
    parser.add_argument("--split", default="heldout", choices=["heldout", "train"])
    parser.add_argument("--num", type=int, default=24, help="the first N problems of the split")
    parser.add_argument("--hint", default=None, help="append this hint the way the OPD teacher sees it")
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from slime.models.registry import resolve_model_path

    path = resolve_model_path(args.model)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    questions = [p.question for p in load_problems(args.split)[: args.num]]
    probs = opener_probabilities(model, tokenizer, questions, args.opener, args.hint)
    print(f"P(first token = {tokenizer.decode([tokenizer.encode(args.opener, add_special_tokens=False)[0]])!r}) "
          f"= {statistics.mean(probs):.4f} (mean over {len(probs)} {args.split} problems; max {max(probs):.4f})")


if __name__ == "__main__":
    main()
