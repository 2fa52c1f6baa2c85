"""Supervised fine-tuning through the RL trainer, as upstream's SFT stage:

    --loss-type sft_loss --rollout-function-path slime.rollout.sft_rollout.generate_rollout \\
    --rollout-batch-size B --n-samples-per-prompt 1 --global-batch-size B --input-key prompt --metadata-key metadata

No engine generates anything: each training row already holds what the policy should say. A row is a prompt (a list
of chat messages, or a string taken as the user's message) and `metadata.segments`, the response as a list of
`{"text", "loss"}` pieces in order: `loss` 1 trains on the piece, 0 shows it without training (an observation the
environment wrote, as in an agentic trajectory). The prompt is rendered with the policy's chat template, with
`metadata.tools` (OpenAI function schemas) declared as the agent loops declare them, and the generation prompt;
each piece is tokenised on its own and appended, then the end-of-turn token (trained) unless
`metadata.end_of_turn` is false. So a trace in an agent loop's layout trains exactly the tokens that loop would
sample (`toolcall-rl/toolcall_traces.py` writes them for tool-call RL).

`--sft-plain-tokens S [S ...]`: these added-token strings are trained as ordinary text pieces where a response holds
them. For a model whose rows of those tokens were never trained: Qwen2.5-Coder-0.5B-Instruct's `<tool_call>` and
`</tool_call>` output rows sit in a cluster of 3,346 near-identical untrained rows (L2 distance < 0.05), so a
LoRA warm start (which leaves the output layer as it is) that trains the token itself learns to raise the whole
cluster and samples one of its tokens at random (measured: every held-out episode wrote a random token where the
tag belongs, 0 of 72 parsed). As text pieces ("<", "tool", "_call", ">") the tags use trained rows; the agent loops
parse the text, so both spellings are the same tool call.

Evaluation (`evaluation=True`, with `--eval-interval` / `--eval-prompt-data`) is the default eval rollout: the
SFT policy generates through the engine as an RL policy would (e.g. with the agent's custom generate function).
"""

from __future__ import annotations

import re

from slime.rollout.data_source import as_messages, load_tokenizer
from slime.utils.types import RolloutFnTrainOutput, Sample


def plain_ids(tokenizer, text: str) -> list[int]:
    """`text` tokenised as ordinary text, as if the tokenizer had no added token for it (its pre-tokenizer and BPE
    model alone): "<tool_call>" -> "<", "tool", "_call", ">"."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("--sft-plain-tokens needs a fast (Rust) tokenizer")
    pieces = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer is not None else [(text, None)]
    return [token.id for piece, _ in pieces for token in backend.model.tokenize(piece)]


def encode_response(tokenizer, text: str, plain: tuple[str, ...] = ()) -> list[int]:
    """A response piece's ids; the strings in `plain` (added tokens) as ordinary text pieces (`plain_ids`)."""
    if not plain:
        return tokenizer.encode(text, add_special_tokens=False)
    ids: list[int] = []
    for piece in re.split("(" + "|".join(map(re.escape, plain)) + ")", text):
        if piece:
            ids += plain_ids(tokenizer, piece) if piece in plain else tokenizer.encode(piece, add_special_tokens=False)
    return ids


def segment_ids(tokenizer, messages: list[dict], segments: list[dict], tools: list[dict] | None = None,
                end_of_turn: bool = True, plain: tuple[str, ...] = ()) -> tuple[list[int], list[int], int]:
    """(token ids, loss mask over the response, response length) of one SFT row. `plain`: added-token strings
    trained as ordinary text (`--sft-plain-tokens`)."""
    from slime.models.chat_template import render_prompt_ids

    prompt_ids = render_prompt_ids(tokenizer, messages, tools)
    response: list[int] = []
    mask: list[int] = []
    for i, segment in enumerate(segments):
        if not isinstance(segment, dict) or not isinstance(segment.get("text"), str):
            raise ValueError(f"segment {i} must be {{'text': str, 'loss': 0|1}}, got {segment!r}")
        ids = encode_response(tokenizer, segment["text"], plain)
        response += ids
        mask += [1 if segment.get("loss", 1) else 0] * len(ids)
    if end_of_turn:
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no end-of-turn (eos) token to end the response with")
        response.append(tokenizer.eos_token_id)
        mask.append(1)
    if not any(mask):
        raise ValueError("no segment has loss 1: nothing to train on")
    return prompt_ids + response, mask, len(response)


def sft_sample(tokenizer, sample: Sample, plain: tuple[str, ...] = ()) -> Sample:
    """Fill `sample` (prompt + metadata.segments) with its tokens, loss mask and a neutral reward."""
    meta = sample.metadata or {}
    if "segments" not in meta:
        raise ValueError("an SFT row needs metadata.segments (the response as [{'text', 'loss'}, ...]); "
                         "is --metadata-key right?")
    tokens, mask, length = segment_ids(tokenizer, as_messages(sample.prompt), meta["segments"], meta.get("tools"),
                                       bool(meta.get("end_of_turn", True)), plain)
    sample.tokens, sample.loss_mask, sample.response_length = tokens, mask, length
    sample.response = tokenizer.decode(tokens[len(tokens) - length:])
    sample.rollout_log_probs = None
    sample.reward = 0.0  # sft_loss uses no reward; the field only has to be set
    sample.status = Sample.Status.COMPLETED
    return sample


def generate_rollout(args, rollout_id: int, data_source, evaluation: bool = False):
    """slime's rollout-function contract for SFT: `--rollout-batch-size` rows from the data source, tokenised."""
    if evaluation:
        from slime.rollout.default_rollout import generate_rollout as default

        return default(args, rollout_id, data_source, evaluation=True)
    if getattr(args, "loss_type", "sft_loss") != "sft_loss":
        raise ValueError("slime.rollout.sft_rollout trains with --loss-type sft_loss (its rows have no rewards)")
    tokenizer = load_tokenizer(args.hf_checkpoint)
    groups = data_source.get_samples(int(args.rollout_batch_size))
    plain = tuple(getattr(args, "sft_plain_tokens", None) or ())
    for group in groups:
        for sample in group:
            sft_sample(tokenizer, sample, plain)
    samples = [s for g in groups for s in g]
    trained = sum(sum(s.loss_mask) for s in samples)
    return RolloutFnTrainOutput(samples=groups, metrics={
        "sft/rows": len(samples), "sft/trained_tokens": trained,
        "sft/masked_tokens": sum(len(s.loss_mask) for s in samples) - trained})
