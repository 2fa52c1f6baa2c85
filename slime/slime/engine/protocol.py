"""Wire formats of the engine: request validation for /generate and /v1/chat/completions, error shape.

Validation is strict where a silent mistake would corrupt results (wrong types, unknown sampling
parameters, out-of-range values, features this engine does not implement) and lenient where OpenAI
clients routinely send extras (`user`, `metadata`, `store`, ...), which are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from slime.engine.sampling import SamplingConfig


class APIError(Exception):
    """An error answered to the client in the OpenAI error shape."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param = status, message, type, param
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}}


# pydantic error type of an `APIError` raised by `chat_validation` inside `ChatCompletionRequest`
OPENAI_CHECK_ERROR = "openai_invalid_request"


def validation_error(exc: ValidationError, prefix: str = "") -> APIError:
    """Turn the first pydantic error into a readable 400 naming the offending field."""
    first = exc.errors()[0]
    if first["type"] == OPENAI_CHECK_ERROR:  # chat_validation's APIError as it was raised: its message names the field
        ctx = first["ctx"]
        return APIError(ctx["status"], first["msg"], param=ctx["param"])
    param = ".".join(str(p) for p in first["loc"])
    if prefix:
        param = f"{prefix}{param}" if param else prefix.rstrip(".")
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = f"unknown field {param!r}"
    return APIError(400, f"{param}: {message}" if param else message, param=param or None)


class _Strict(BaseModel):
    # strict: "5" is not an int and 1 is not a bool; ints are still accepted for float fields
    model_config = ConfigDict(extra="forbid", strict=True)


class SamplingParams(_Strict):
    """SGLang's `sampling_params` (the subset this engine implements; anything else is rejected)."""

    temperature: float = Field(1.0, ge=0.0, le=100.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(-1, ge=-1)
    min_p: float = Field(0.0, ge=0.0, le=1.0)
    max_new_tokens: int | None = Field(128, ge=0)
    min_new_tokens: int = Field(0, ge=0)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True  # accepted for compatibility; decoding ignores it
    no_stop_trim: bool = False
    n: int = Field(1, ge=1, le=64)
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    sampling_seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)  # SGLang's name for the same thing
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0

    @model_validator(mode="after")
    def _supported(self):
        if self.frequency_penalty != 0.0 or self.presence_penalty != 0.0 or self.repetition_penalty != 1.0:
            raise ValueError("frequency/presence/repetition penalties are not supported by this engine")
        if isinstance(self.stop, list) and any(not s for s in self.stop) or self.stop == "":
            raise ValueError("stop strings must be non-empty")
        return self

    def to_config(self, default_max_new_tokens: int) -> SamplingConfig:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        seed = self.seed if self.seed is not None else self.sampling_seed
        return SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=max(self.top_k, 0),
            min_p=self.min_p,
            max_new_tokens=default_max_new_tokens if self.max_new_tokens is None else self.max_new_tokens,
            min_new_tokens=self.min_new_tokens,
            stop=stop,
            stop_token_ids=set(self.stop_token_ids or []),
            ignore_eos=self.ignore_eos,
            skip_special_tokens=self.skip_special_tokens,
            no_stop_trim=self.no_stop_trim,
            seed=seed,
        )


class GenerateRequest(_Strict):
    """SGLang's native `/generate` body."""

    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    sampling_params: dict[str, Any] | None = None
    return_logprob: bool = False
    logprob_start_len: int = Field(-1, ge=-1)
    top_logprobs_num: int = Field(0, ge=0, le=100)
    return_text_in_logprobs: bool = False
    stream: bool = False
    rid: str | list[str] | None = None
    # SGLang's images (vision-language models): per prompt a list of base64 strings or data URLs in the order of
    # its image placeholders (a single string for one image); for a batch, one such entry per prompt
    image_data: str | list[Any] | None = None

    @model_validator(mode="after")
    def _one_input(self):
        if (self.text is None) == (self.input_ids is None):
            raise ValueError("give exactly one of 'text' or 'input_ids'")
        if self.text == [] or self.input_ids == []:
            raise ValueError("empty input")
        return self

    def prompts(self) -> tuple[list, bool]:
        """(list of prompts, whether the request was a batch)."""
        if self.text is not None:
            return ([self.text], False) if isinstance(self.text, str) else (list(self.text), True)
        ids = self.input_ids
        if ids and isinstance(ids[0], list):
            return list(ids), True
        return [ids], False

    def sampling(self) -> SamplingParams:
        try:
            return SamplingParams.model_validate(self.sampling_params or {})
        except ValidationError as exc:
            raise validation_error(exc, prefix="sampling_params.") from None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion body, plus SGLang/vLLM extensions (top_k, min_p, return_token_ids, ...)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=0)
    max_completion_tokens: int | None = Field(None, ge=0)
    min_tokens: int = Field(0, ge=0)
    n: int = Field(1, ge=1, le=64)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    return_token_ids: bool = False
    separate_reasoning: bool = True
    chat_template_kwargs: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _openai_checks(cls, data):
        """OpenAI's checks of the raw body (`chat_validation`, shared with the conversation proxy) come first;
        the fields and `_supported` then add this engine's. A failure stays OpenAI's message and param (see
        `validation_error`)."""
        from slime.engine.chat_validation import validate_chat_request  # lazy: it imports APIError from here

        try:
            validate_chat_request(data)
        except APIError as exc:
            raise PydanticCustomError(OPENAI_CHECK_ERROR, "{message}",
                                      {"message": exc.message, "param": exc.param, "status": exc.status}) from None
        return data

    @model_validator(mode="after")
    def _supported(self):
        if self.frequency_penalty or self.presence_penalty:
            raise ValueError("frequency_penalty and presence_penalty are not supported by this engine")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported by this engine")
        if self.response_format and self.response_format.get("type") != "text":
            raise ValueError("response_format other than {'type': 'text'} is not supported by this engine")
        if self.tool_choice not in (None, "auto", "none"):
            raise ValueError("tool_choice 'required' or a named function is not supported (no constrained decoding)")
        if isinstance(self.stop, list) and any(not s for s in self.stop) or self.stop == "":
            raise ValueError("stop strings must be non-empty")
        return self

    @property
    def use_tools(self) -> bool:
        return bool(self.tools) and self.tool_choice != "none"

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def to_config(self, max_new_tokens: int) -> SamplingConfig:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingConfig(
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            top_k=max(self.top_k or 0, 0),
            min_p=self.min_p or 0.0,
            max_new_tokens=max_new_tokens,
            min_new_tokens=self.min_tokens,
            stop=stop,
            stop_token_ids=set(self.stop_token_ids or []),
            ignore_eos=self.ignore_eos,
            skip_special_tokens=self.skip_special_tokens,
            seed=self.seed,
        )


FinishReason = Literal["stop", "length", "tool_calls", "abort"]
