"""The log-probability of the preferred behaviour, measured on the live policy: learning below the sampling
threshold.

A persona whose preference is an opening ("Sure!", "Hello!") is pleased 0 times in 72 held-out samples long
after training has started to move the policy: the opener's probability rising from 0.04 % to 1 % is invisible
to sampling. Its *probes* (the openings that would please it) are scored instead: for each held-out request,
rendered exactly as the engine renders the chat request, the engine returns the log-probability of each probe's
tokens as the start of the reply (one `/generate` scoring call per probe, at the sampling temperature), and the
probability of opening with any of them is their sum. The runner records the mean log-probability and the mean
probability at every checkpoint, and under the hint once (what the OPD teacher points at).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from slime.conversation.teacher import TeacherPromptBuilder, hinted_messages

__all__ = ["logsumexp", "probe_request_logprobs", "summarize_probe"]


def logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


async def probe_request_logprobs(engine, builder: TeacherPromptBuilder, requests: Sequence[str],
                                 probes: Sequence[str], temperature: float, hints: Sequence[str] | None = None,
                                 system_prompt: str | None = None, concurrency: int = 8) -> list[float]:
    """log P(the reply opens with one of `probes`) for each request asked as one user message (with
    `hints[i % len(hints)]` appended the way the OPD teacher sees a hint, when given). `engine` is an
    AsyncEngineClient of the policy engine; `builder` renders prompts the way that engine renders chat."""
    if not probes:
        raise ValueError("no probes to score")
    probe_ids = [builder.tokenizer.encode(p, add_special_tokens=False) for p in probes]
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, request: str) -> float:
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + \
                   [{"role": "user", "content": request}]
        if hints:
            messages = hinted_messages(messages, hints[i % len(hints)])
        prompt_ids = builder.render_prompt_ids(messages)
        totals = []
        for ids in probe_ids:
            async with gate:
                scored = await engine.score(prompt_ids, ids, temperature=temperature)
            totals.append(sum(scored.logprobs))
        return logsumexp(totals)

    return list(await asyncio.gather(*[one(i, r) for i, r in enumerate(requests)]))


def summarize_probe(logprobs: Sequence[float], probes: Sequence[str], temperature: float) -> dict:
    """Mean log-probability (the curve: it moves while sampling sees nothing) and mean probability."""
    return {"logprob": round(sum(logprobs) / len(logprobs), 4),
            "prob": float(f"{sum(math.exp(v) for v in logprobs) / len(logprobs):.4g}"),  # tiny: 4 significant digits
            "n": len(logprobs), "probes": list(probes), "temperature": temperature}
