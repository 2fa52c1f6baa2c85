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
    per_prompt = _images_per_prompt(req.image_data, len(prompts), is_batch)
    sequences = []
    for p, prompt in enumerate(prompts):
        param = "text" if req.text is not None else "input_ids"
        ids = engine.encode_text(prompt) if isinstance(prompt, str) else list(prompt)
        images = image_key = None
        if per_prompt[p]:
            image_param = f"image_data[{p}]" if is_batch else "image_data"
            vision = engine.require_vision(image_param)
            images = vision.preprocess(per_prompt[p], image_param)
            if isinstance(prompt, str):  # one placeholder per image, expanded here
                ids = vision.expand(ids, images, image_param)
            else:  # the caller expanded them (as the engine returns them)
                vision.check_expanded(ids, images, f"{param}[{p}]" if is_batch else param)
            image_key = vision.prefix_key(ids, images)
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
                    images=images,
                    image_key=image_key,
                )
            )
    return sequences, is_batch or params.n > 1


def _images_per_prompt(image_data, count: int, is_batch: bool) -> list[list | None]:
    """SGLang's `image_data` as one list of images (or None) per prompt."""
    if image_data is None:
        return [None] * count
    if not is_batch:
        if isinstance(image_data, list) and len(image_data) == 1 and isinstance(image_data[0], list):
            image_data = image_data[0]  # [[...]]: the batch form for a batch of one
        images = [image_data] if isinstance(image_data, str) else list(image_data)
        return [images or None]
    if not isinstance(image_data, list) or len(image_data) != count:
        raise APIError(400, f"image_data must have one entry per prompt ({count}): a list of images, one image "
                            "or null", param="image_data")
    out = []
    for p, entry in enumerate(image_data):
        if entry is None or isinstance(entry, list):
            out.append(entry or None)
        elif isinstance(entry, str):
            out.append([entry])
        else:
            raise APIError(400, f"image_data[{p}] must be a list of images, one image or null; got "
                                f"{type(entry).__name__}", param=f"image_data[{p}]")
    return out


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
    if seq.images is not None:
        # what a trainer needs to score exactly this: the prompt as run (image pads expanded) and the image grids
        # (pixel values are slime.models.vision.preprocess_images of the same images)
        meta["input_ids"] = list(seq.prompt_ids)
        meta["image_grid_thw"] = seq.images.grid_list
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
