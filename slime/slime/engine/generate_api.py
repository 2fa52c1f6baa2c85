"""SGLang's native `/generate`: request -> sequences, sequences -> response objects."""

from __future__ import annotations

from slime.engine.engine import Engine
from slime.engine.protocol import APIError, GenerateRequest
from slime.engine.scheduler import Sequence


def build_sequences(engine: Engine, req: GenerateRequest) -> tuple[list[Sequence], bool]:
    """One sequence per (prompt, sample); returns them with whether the request was a batch."""
    params = req.sampling()
    prompts, is_batch = req.prompts()
    rids = _request_ids(req.rid, len(prompts))
    sequences = []
    for p, prompt in enumerate(prompts):
        param = "text" if req.text is not None else "input_ids"
        ids = engine.encode_text(prompt) if isinstance(prompt, str) else list(prompt)
        engine.check_prompt(ids, param=f"{param}[{p}]" if is_batch else param)
        if req.logprob_start_len > len(ids):
            raise APIError(400, f"logprob_start_len {req.logprob_start_len} is past the prompt's {len(ids)} tokens",
                           param="logprob_start_len")
        room = engine.room_for(len(ids))
        for i in range(params.n):
            config = params.to_config(default_max_new_tokens=room)
            config.max_new_tokens = min(config.max_new_tokens, room)
            if config.seed is not None:
                config.seed += i  # n samples of one seeded request must differ from each other
            extra = {}
            if rids is not None:
                extra["rid"] = rids[p] if params.n == 1 else f"{rids[p]}-{i}"
            sequences.append(
                Sequence(
                    **extra,
                    prompt_ids=ids,
                    sampling=config,
                    return_logprob=req.return_logprob,
                    logprob_start_len=req.logprob_start_len if req.return_logprob else -1,
                    top_logprobs_num=req.top_logprobs_num if req.return_logprob else 0,
                )
            )
    return sequences, is_batch or params.n > 1


def _request_ids(rid, count: int) -> list[str] | None:
    """The caller's request ids (SGLang's `rid`: one per prompt), echoed as meta_info.id."""
    if rid is None:
        return None
    rids = [rid] if isinstance(rid, str) else list(rid)
    if len(rids) != count:
        raise APIError(400, f"rid has {len(rids)} entries for {count} prompts", param="rid")
    return rids


def _entry(engine: Engine, logprob, token_id: int, with_text: bool) -> list:
    return [logprob, token_id, engine.token_text(token_id) if with_text else None]


def _top(engine: Engine, rows, with_text: bool) -> list:
    return [None if row is None else [_entry(engine, lp, t, with_text) for lp, t in row] for row in rows]


def response_object(engine: Engine, seq: Sequence, req: GenerateRequest, n_tokens: int | None = None) -> dict:
    """The `/generate` output for one sequence, optionally as of its first `n_tokens` outputs (streaming)."""
    n = len(seq.output_ids) if n_tokens is None else n_tokens
    finished = seq.finished and n == len(seq.output_ids)
    text = seq.text if finished else seq.text[: seq.stable_text_len]
    meta = {
        "id": seq.rid,
        "finish_reason": seq.finish_reason if finished else None,
        "prompt_tokens": len(seq.prompt_ids),
        "completion_tokens": n,
        "cached_tokens": seq.cached_tokens,
        "weight_version": seq.weight_version,
    }
    if req.return_logprob:
        with_text = req.return_text_in_logprobs
        meta["output_token_logprobs"] = [
            _entry(engine, lp, t, with_text) for lp, t in zip(seq.output_logprobs[:n], seq.output_ids[:n])
        ]
        if seq.wants_input_logprobs:
            start = seq.logprob_start_len
            meta["input_token_logprobs"] = [
                _entry(engine, lp, t, with_text) for lp, t in zip(seq.input_logprobs, seq.prompt_ids[start:])
            ]
        if seq.top_logprobs_num > 0:
            meta["output_top_logprobs"] = _top(engine, seq.output_top[:n], with_text)
            if seq.wants_input_logprobs:
                meta["input_top_logprobs"] = _top(engine, seq.input_top, with_text)
    return {"text": text, "output_ids": seq.output_ids[:n], "meta_info": meta}
