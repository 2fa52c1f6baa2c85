"""Request validation of the engine's wire formats (slime.engine.protocol)."""

import pytest
from pydantic import ValidationError

from slime.engine.protocol import (
    APIError,
    ChatCompletionRequest,
    GenerateRequest,
    SamplingParams,
    validation_error,
)
from slime.engine.sampling import SamplingConfig


def _sp_error(body: dict) -> APIError:
    with pytest.raises(ValidationError) as info:
        SamplingParams.model_validate(body)
    return validation_error(info.value)


def _chat(**kwargs) -> ChatCompletionRequest:
    body = {"messages": [{"role": "user", "content": "hi"}], **kwargs}
    return ChatCompletionRequest.model_validate(body)


def _chat_error(**kwargs) -> APIError:
    with pytest.raises(ValidationError) as info:
        _chat(**kwargs)
    return validation_error(info.value)


# --------------------------------------------------------------------------------------------------
# APIError / validation_error
# --------------------------------------------------------------------------------------------------


def test_api_error_body_shape():
    err = APIError(404, "no such model", type="not_found_error", param="model")
    assert err.body() == {"error": {"message": "no such model", "type": "not_found_error", "param": "model", "code": 404}}
    assert str(err) == "no such model" and err.status == 404 and err.headers == {}


def test_api_error_defaults():
    err = APIError(400, "bad", headers={"Retry-After": "1"})
    assert err.body() == {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": 400}}
    assert err.headers == {"Retry-After": "1"}


def test_validation_error_names_the_field():
    err = _sp_error({"max_new_tokens": -1})
    assert err.status == 400 and err.param == "max_new_tokens"
    assert err.message.startswith("max_new_tokens: ")
    assert "greater than or equal to 0" in err.message
    assert err.body()["error"]["param"] == "max_new_tokens"


def test_validation_error_for_unknown_field():
    err = _sp_error({"temprature": 0.5})
    assert err.param == "temprature"
    assert err.message == "temprature: unknown field 'temprature'"


def test_validation_error_with_prefix():
    with pytest.raises(ValidationError) as info:
        SamplingParams.model_validate({"top_k": "3"})
    err = validation_error(info.value, prefix="sampling_params.")
    assert err.param == "sampling_params.top_k"
    assert err.message.startswith("sampling_params.top_k: ")


def test_model_level_error_has_no_param():
    err = _sp_error({"frequency_penalty": 0.1})
    assert err.param is None
    assert "penalties are not supported" in err.message


def test_prefixed_model_level_error_names_the_object_not_a_dangling_dot():
    """A whole-object error inside sampling_params (no field location) must not be reported as the
    param 'sampling_params.' with a trailing dot (message 'sampling_params.: Value error, ...')."""
    req = GenerateRequest.model_validate({"text": "a", "sampling_params": {"repetition_penalty": 1.2}})
    with pytest.raises(APIError) as info:
        req.sampling()
    assert info.value.param in (None, "sampling_params")
    assert not info.value.message.startswith("sampling_params.:")


# --------------------------------------------------------------------------------------------------
# SamplingParams
# --------------------------------------------------------------------------------------------------


def test_sampling_params_defaults_and_config():
    sp = SamplingParams()
    assert (sp.temperature, sp.top_p, sp.top_k, sp.min_p, sp.max_new_tokens, sp.n) == (1.0, 1.0, -1, 0.0, 128, 1)
    c = sp.to_config(default_max_new_tokens=77)
    assert isinstance(c, SamplingConfig)
    assert c.top_k == 0  # -1 (off) becomes 0 (off)
    assert c.max_new_tokens == 128  # the field's own default wins over the server default
    assert c.stop == [] and c.stop_token_ids == set() and c.seed is None
    assert c.skip_special_tokens is True and c.ignore_eos is False and c.no_stop_trim is False


@pytest.mark.parametrize(
    "body",
    [
        {"max_new_tokens": "5"},
        {"max_new_tokens": 5.0},
        {"top_k": "3"},
        {"temperature": "0.5"},
        {"temperature": True},
        {"ignore_eos": 1},
        {"ignore_eos": "true"},
        {"stop_token_ids": ["1"]},
        {"stop": 5},
        {"n": "2"},
    ],
)
def test_strict_types(body):
    err = _sp_error(body)
    assert err.param.split(".")[0] == next(iter(body))


def test_int_is_accepted_for_float_fields():
    sp = SamplingParams.model_validate({"temperature": 0, "top_p": 1, "min_p": 0})
    assert sp.temperature == 0.0 and isinstance(sp.temperature, float)
    assert sp.to_config(10).greedy


@pytest.mark.parametrize(
    "body, param",
    [
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"min_new_tokens": -1}, "min_new_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": 100.5}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.01}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"min_p": 1.5}, "min_p"),
        ({"n": 0}, "n"),
        ({"n": 65}, "n"),
    ],
)
def test_out_of_range_values(body, param):
    assert _sp_error(body).param == param


def test_in_range_edges_are_accepted():
    SamplingParams.model_validate(
        {"temperature": 100.0, "top_p": 1.0, "top_k": 0, "min_p": 1.0, "max_new_tokens": 0, "n": 64}
    )
    assert SamplingParams.model_validate({"max_new_tokens": None}).to_config(42).max_new_tokens == 42


@pytest.mark.parametrize(
    "body",
    [{"frequency_penalty": 0.5}, {"presence_penalty": -0.1}, {"repetition_penalty": 1.1}],
)
def test_penalties_are_rejected(body):
    assert "penalt" in _sp_error(body).message


def test_neutral_penalties_are_accepted():
    SamplingParams.model_validate({"frequency_penalty": 0, "presence_penalty": 0.0, "repetition_penalty": 1})


@pytest.mark.parametrize("stop", ["", ["a", ""], [""]])
def test_empty_stop_strings_are_rejected(stop):
    assert "non-empty" in _sp_error({"stop": stop}).message


def test_to_config_maps_every_field():
    sp = SamplingParams.model_validate(
        {
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 40,
            "min_p": 0.05,
            "max_new_tokens": 12,
            "min_new_tokens": 3,
            "stop": "###",
            "stop_token_ids": [5, 6, 5],
            "ignore_eos": True,
            "skip_special_tokens": False,
            "no_stop_trim": True,
            "seed": 11,
        }
    )
    c = sp.to_config(default_max_new_tokens=1000)
    assert c == SamplingConfig(
        temperature=0.7,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        max_new_tokens=12,
        min_new_tokens=3,
        stop=["###"],
        stop_token_ids={5, 6},
        ignore_eos=True,
        skip_special_tokens=False,
        no_stop_trim=True,
        seed=11,
    )


def test_stop_list_is_kept_as_a_list():
    assert SamplingParams.model_validate({"stop": ["a", "bc"]}).to_config(1).stop == ["a", "bc"]


@pytest.mark.parametrize(
    "body, seed",
    [({}, None), ({"seed": 3}, 3), ({"sampling_seed": 4}, 4), ({"seed": 3, "sampling_seed": 4}, 3), ({"seed": 0}, 0)],
)
def test_seed_and_sampling_seed(body, seed):
    assert SamplingParams.model_validate(body).to_config(1).seed == seed


# --------------------------------------------------------------------------------------------------
# GenerateRequest
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, prompts, batch",
    [
        ({"text": "hello"}, ["hello"], False),
        ({"text": ["a", "b"]}, ["a", "b"], True),
        ({"text": ["only"]}, ["only"], True),
        ({"input_ids": [1, 2, 3]}, [[1, 2, 3]], False),
        ({"input_ids": [[1, 2], [3]]}, [[1, 2], [3]], True),
        ({"input_ids": [[7]]}, [[7]], True),
    ],
)
def test_generate_prompts_and_batch_detection(body, prompts, batch):
    assert GenerateRequest.model_validate(body).prompts() == (prompts, batch)


@pytest.mark.parametrize(
    "body, words",
    [
        ({"text": "a", "input_ids": [1]}, "exactly one"),
        ({}, "exactly one"),
        ({"text": None, "input_ids": None}, "exactly one"),
        ({"text": []}, "empty"),
        ({"input_ids": []}, "empty"),
    ],
)
def test_generate_input_validation(body, words):
    with pytest.raises(ValidationError) as info:
        GenerateRequest.model_validate(body)
    assert words in validation_error(info.value).message


@pytest.mark.parametrize(
    "body, param",
    [
        ({"text": "a", "stream": "yes"}, "stream"),
        ({"text": "a", "top_logprobs_num": 101}, "top_logprobs_num"),
        ({"text": "a", "logprob_start_len": -2}, "logprob_start_len"),
        ({"text": "a", "unknown": 1}, "unknown"),
        ({"text": 5}, "text"),
    ],
)
def test_generate_field_validation(body, param):
    with pytest.raises(ValidationError) as info:
        GenerateRequest.model_validate(body)
    assert validation_error(info.value).param.split(".")[0] == param


def test_generate_sampling_params_are_validated_with_a_prefixed_param():
    req = GenerateRequest.model_validate({"text": "a", "sampling_params": {"max_new_tokens": "5"}})
    with pytest.raises(APIError) as info:
        req.sampling()
    assert info.value.status == 400 and info.value.param == "sampling_params.max_new_tokens"
    req = GenerateRequest.model_validate({"text": "a", "sampling_params": {"best_of": 2}})
    with pytest.raises(APIError) as info:
        req.sampling()
    assert info.value.param == "sampling_params.best_of"
    assert "unknown field" in info.value.message


def test_generate_sampling_defaults():
    req = GenerateRequest.model_validate({"input_ids": [1], "sampling_params": {"temperature": 0}})
    assert req.sampling().temperature == 0.0
    assert GenerateRequest.model_validate({"input_ids": [1]}).sampling() == SamplingParams()


# --------------------------------------------------------------------------------------------------
# ChatCompletionRequest
# --------------------------------------------------------------------------------------------------


def test_chat_empty_messages_rejected():
    with pytest.raises(ValidationError) as info:
        ChatCompletionRequest.model_validate({"messages": []})
    assert validation_error(info.value).param == "messages"
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate({})


def test_chat_openai_checks_keep_openai_message_and_param():
    # chat_validation runs inside the model; validation_error hands its error on as raised
    err = _chat_error(temperature=3)
    assert (err.status, err.param) == (400, "temperature")
    assert err.message == ("Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 "
                           "instead.")
    orphan = {"role": "tool", "tool_call_id": "c", "content": "x"}
    err = _chat_error(messages=[{"role": "user", "content": "hi"}, orphan])
    assert (err.param, err.message) == ("messages[1].role", "Invalid parameter: messages with role 'tool' must be a "
                                        "response to a preceeding message with 'tool_calls'.")


def test_chat_unknown_top_level_fields_are_ignored():
    req = _chat(user="u1", metadata={"a": "b"}, store=True, stream=True,
                stream_options={"include_usage": True, "x": 1})
    assert req.stream_options.include_usage is True
    assert not hasattr(req, "user")


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "s"}}}, "not supported"),
        ({"tools": [TOOL], "tool_choice": "required"}, "constrained decoding"),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
         "constrained decoding"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"top_logprobs": 3, "logprobs": False}, "top_logprobs"),
        ({"frequency_penalty": 0.5}, "penalty"),
        ({"presence_penalty": 0.5}, "penalty"),
        ({"stop": ""}, "non-empty"),
        ({"stop": ["x", ""]}, "non-empty"),
    ],
)
def test_chat_unsupported_features_rejected(kwargs, words):
    err = _chat_error(**kwargs)
    assert words in err.message and err.status == 400


@pytest.mark.parametrize(
    "kwargs",
    [
        {"logit_bias": {}},
        {"response_format": {"type": "text"}},
        {"tools": [TOOL], "tool_choice": "auto"},
        {"tool_choice": "none"},
        {"top_logprobs": 3, "logprobs": True},
        {"top_logprobs": 0, "logprobs": True},
        {"frequency_penalty": 0.0, "presence_penalty": 0},
    ],
)
def test_chat_supported_variants_accepted(kwargs):
    _chat(**kwargs)


@pytest.mark.parametrize(
    "kwargs, param",
    [
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": "1"}, "temperature"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_completion_tokens": "10"}, "max_completion_tokens"),
        ({"n": 0}, "n"),
        ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
        ({"top_logprobs": 0}, "top_logprobs"),  # OpenAI: only with logprobs enabled, even 0
        ({"tool_choice": "auto"}, "tool_choice"),  # OpenAI: only with tools
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"logprobs": 1}, "logprobs"),
    ],
)
def test_chat_field_validation(kwargs, param):
    assert _chat_error(**kwargs).param == param


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, None),
        ({"max_tokens": 10}, 10),
        ({"max_completion_tokens": 20}, 20),
        ({"max_tokens": 10, "max_completion_tokens": 20}, 20),
    ],
)
def test_requested_max_tokens_prefers_max_completion_tokens(kwargs, expected):
    assert _chat(**kwargs).requested_max_tokens() == expected


def test_requested_max_tokens_zero_is_a_value():
    # validation refuses 0 (OpenAI's minimum is 1, see test_chat_field_validation); the method still must not
    # take 0 for "unset"
    req = ChatCompletionRequest.model_construct(max_tokens=10, max_completion_tokens=0)
    assert req.requested_max_tokens() == 0


def test_chat_tools_validation():
    req = _chat(tools=[TOOL])
    assert req.use_tools
    assert not _chat(tools=[TOOL], tool_choice="none").use_tools
    assert not _chat().use_tools
    assert _chat_error(tools=[]).param == "tools"  # OpenAI: an empty array is refused


@pytest.mark.parametrize(
    "tool, param, words",
    [
        ({"function": {"name": "f"}}, "tools[1].type", "Missing required parameter"),
        ({"type": "retrieval", "function": {"name": "f"}}, "tools[1].type", "Invalid value: 'retrieval'"),
        ({"type": "function"}, "tools[1].function", "Missing required parameter"),
        ({"type": "function", "function": "f"}, "tools[1].function", "expected an object"),
        ({"type": "function", "function": {"description": "no name"}}, "tools[1].function.name",
         "Missing required parameter"),
        ({"type": "function", "function": {"name": 3}}, "tools[1].function.name", "expected a string"),
    ],
)
def test_chat_malformed_tools_rejected(tool, param, words):
    err = _chat_error(tools=[TOOL, tool])
    assert (err.param, err.status) == (param, 400)
    assert words in err.message


def test_chat_to_config():
    c = _chat(
        temperature=0, top_p=0.5, top_k=-1, min_p=0.1, min_tokens=2, stop="END", stop_token_ids=[9], seed=5,
        ignore_eos=True, skip_special_tokens=False,
    ).to_config(max_new_tokens=33)
    assert c == SamplingConfig(
        temperature=0.0, top_p=0.5, top_k=0, min_p=0.1, max_new_tokens=33, min_new_tokens=2, stop=["END"],
        stop_token_ids={9}, ignore_eos=True, skip_special_tokens=False, seed=5,
    )
    d = _chat().to_config(max_new_tokens=7)
    assert (d.temperature, d.top_p, d.top_k, d.min_p, d.max_new_tokens, d.stop) == (1.0, 1.0, 0, 0.0, 7, [])
    assert _chat(top_k=20).to_config(1).top_k == 20
