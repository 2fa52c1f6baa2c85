"""Translate the engine client's SGLang-protocol calls into vLLM HTTP calls (see slime.engine.vllm_server).

Pure functions: `vllm_call(call)` returns the call to send to vLLM, whose parser turns vLLM's answer back into
the SGLang shape and then runs the original call's parser, so callers see exactly what SGLang would return.
Calls vLLM cannot serve raise `EngineError(error_type="unsupported_by_vllm")` before anything is sent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from slime.engine.client import EngineCall

UNSUPPORTED = "unsupported_by_vllm"

# SGLang sampling_params -> vLLM completion request fields
_SAMPLING = {"max_new_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
             "min_p": "min_p", "stop": "stop", "stop_token_ids": "stop_token_ids", "n": "n", "seed": "seed",
             "repetition_penalty": "repetition_penalty", "frequency_penalty": "frequency_penalty",
             "presence_penalty": "presence_penalty", "ignore_eos": "ignore_eos",
             "skip_special_tokens": "skip_special_tokens", "no_stop_trim": "include_stop_str_in_output",
             "min_new_tokens": "min_tokens",
             # the default rollout sends it (False): vLLM's completion request has the same field
             "spaces_between_special_tokens": "spaces_between_special_tokens"}
_FINISH = {"stop": "stop", "length": "length", "abort": "abort"}
_SAME_PATHS = {"/v1/chat/completions", "/v1/models"}


def unsupported(what: str) -> Exception:
    from slime.engine.client import EngineError

    return EngineError(f"vLLM cannot serve {what}; use an SGLang engine (or our embedded engine) for it",
                       error_type=UNSUPPORTED)


def vllm_call(call: EngineCall) -> EngineCall:
    """The vLLM call for one SGLang-protocol call (update_weights_from_disk is a sequence: `vllm_update_calls`)."""
    if call.path in _SAME_PATHS:
        return call
    if call.path == "/generate":
        return _generate(call)
    if call.path == "/flush_cache":
        return replace(call, path="/reset_prefix_cache")
    if call.path == "/get_weight_version":
        return replace(call, path="/weight_info")
    if call.path in ("/load_lora_adapter", "/unload_lora_adapter"):
        return replace(call, path="/v1" + call.path, parse=_lora_parse(call))
    raise unsupported(f"{call.label}")


def vllm_update_calls(model_path: str, weight_version: str | int | None) -> tuple[list[EngineCall], EngineCall]:
    """The calls that reload full weights from disk in a running vLLM, and the /resume that must always follow.

    mode=wait: running requests finish on the old weights and new ones get 503 (our client resends those)
    until /resume, the same contract as SGLang's update_weights_from_disk.
    """
    from slime.engine.client import EngineCall, json_or_message

    steps = [EngineCall("POST", "/pause?mode=wait", idempotent=False, parse=json_or_message),
             EngineCall("POST", "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": model_path}},
                        idempotent=False, parse=json_or_message),
             EngineCall("POST", "/reset_prefix_cache", parse=json_or_message)]
    if weight_version is not None:
        steps.append(EngineCall("POST", "/update_weight_version", {"new_version": str(weight_version)},
                                idempotent=False, parse=json_or_message))
    # /resume may be resent: resuming a running engine is a no-op. It must reach the engine even when the failed step
    # before it left a dead keep-alive connection in the pool (vLLM closes it after a failed reload's 500).
    return steps, EngineCall("POST", "/resume", parse=json_or_message)


# ---------------------------------------------------------------------------------------------- generate

def _generate(call: EngineCall) -> EngineCall:
    body = dict(call.body or {})
    if body.pop("stream", False):
        raise unsupported("a streamed native /generate (generate_stream); use chat_stream or generate")
    params = dict(body.pop("sampling_params", None) or {})
    return_logprob = body.pop("return_logprob", False)
    start = body.pop("logprob_start_len", -1)
    top_k = body.pop("top_logprobs_num", 0) or 0
    prompt = body.pop("input_ids", None)
    if prompt is None:
        prompt = body.pop("text")
    if body:
        raise unsupported(f"/generate fields {sorted(body)}")
    unknown = sorted(params.keys() - _SAMPLING.keys())
    if unknown:
        raise unsupported(f"sampling parameters {unknown}")
    request = {_SAMPLING[k]: v for k, v in params.items()}
    request["prompt"] = prompt
    scoring = return_logprob and start is not None and start >= 0
    if scoring:
        if params.get("max_new_tokens") != 0:
            raise unsupported("input log-probs together with generated tokens (score with max_new_tokens=0)")
        if float(params.get("temperature", 1.0)) != 1.0:
            from slime.engine.vllm_server import VLLM_SCORING_TEMPERATURE

            raise unsupported(f"teacher scoring at temperature {params['temperature']}: {VLLM_SCORING_TEMPERATURE}")
        if not (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            raise unsupported("scoring anything but one token-id prompt")
        # vLLM generates at least one token; it is discarded.
        request.update(max_tokens=1, prompt_logprobs=top_k, temperature=1.0, return_token_ids=True)
    else:
        request.update(return_token_ids=True, return_weight_versions=True)
        if return_logprob:
            request.update(logprobs=top_k, return_tokens_as_token_ids=True)
    batched = isinstance(prompt, list) and bool(prompt) and not isinstance(prompt[0], int)

    def parse(response: httpx.Response) -> Any:
        payload = response.json()
        results = [_to_sglang(choice, payload, start if scoring else None, top_k)
                   for choice in sorted(payload.get("choices") or [], key=lambda c: c.get("index", 0))]
        if not results:
            from slime.engine.client import invalid_response

            raise invalid_response("vLLM answered without choices", payload)
        single = not batched and int(params.get("n", 1)) == 1
        return call.parse(httpx.Response(200, json=results[0] if single else results))

    return replace(call, path="/v1/completions", body=request, parse=parse)


def _token_id(token: str) -> int:
    # return_tokens_as_token_ids=true writes tokens as "token_id:123"
    return int(str(token).rsplit(":", 1)[-1])


def _to_sglang(choice: dict, payload: dict, score_start: int | None, top_k: int) -> dict:
    spans = choice.get("weight_versions") or []
    meta: dict[str, Any] = {"id": payload.get("id"), "weight_version": spans[0]["version"] if spans else ""}
    if score_start is not None:
        prompt_ids = choice.get("prompt_token_ids")
        if not prompt_ids:
            from slime.engine.client import invalid_response

            # without the ids the scored token cannot be told apart from the top-k candidates
            raise invalid_response("vLLM answered prompt_logprobs without prompt_token_ids", choice)
        positions = (choice.get("prompt_logprobs") or [])[score_start:]
        ids = prompt_ids[score_start:]
        entries, tops = [], []
        for i, position in enumerate(positions):
            position = {int(k): v for k, v in (position or {}).items()}
            token = ids[i]
            chosen = position.get(token)
            entries.append([chosen["logprob"] if chosen else None, token, None])
            ranked = sorted((v.get("rank") or 0, k, v["logprob"]) for k, v in position.items())
            tops.append([[lp, k, None] for rank, k, lp in ranked if rank and rank <= top_k])
        meta["input_token_logprobs"] = entries
        if top_k:
            meta["input_top_logprobs"] = tops
        meta["finish_reason"] = {"type": "length"}
        return {"text": "", "output_ids": [], "meta_info": meta}
    finish = choice.get("finish_reason")
    if finish not in _FINISH:
        raise unsupported(f"finish_reason {finish!r}")
    output_ids = list(choice.get("token_ids") or [])
    meta.update(finish_reason={"type": _FINISH[finish]}, completion_tokens=len(output_ids),
                prompt_tokens=len(choice.get("prompt_token_ids") or []))
    logprobs = choice.get("logprobs")
    if logprobs:
        tokens = [_token_id(t) for t in logprobs.get("tokens") or []]
        meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(logprobs.get("token_logprobs") or [], tokens)]
        if any(logprobs.get("top_logprobs") or []):
            meta["output_top_logprobs"] = [[[lp, _token_id(t), None] for t, lp in (top or {}).items()]
                                           for top in logprobs["top_logprobs"]]
    return {"text": choice.get("text", ""), "output_ids": output_ids, "meta_info": meta}


def _lora_parse(call: EngineCall):
    def parse(response: httpx.Response) -> dict:
        # vLLM answers 200 with a plain-text message; errors arrive as error statuses (handled by the client)
        return {"success": True, "message": response.text}

    return parse
