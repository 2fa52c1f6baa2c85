"""OpenAI's validation of chat-completions bodies (slime.engine.chat_validation): what OpenAI refuses gets a
400 with OpenAI's kind of message and a param path; what it accepts (and this project's extensions, and every
body the real OpenClaw client sent) passes."""

from __future__ import annotations

import copy

import pytest

from slime.engine.chat_validation import validate_chat_request
from slime.engine.protocol import APIError

USER = {"role": "user", "content": "hi"}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
ASSISTANT_CALL = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL_REPLY = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


def body(*messages, **fields) -> dict:
    return {"model": "m", "messages": list(messages) or [USER], **fields}


def rejected(payload) -> APIError:
    with pytest.raises(APIError) as info:
        validate_chat_request(payload)
    err = info.value
    assert err.status == 400 and err.type == "invalid_request_error"
    assert set(err.body()["error"]) == {"message", "type", "param", "code"}
    return err


# --------------------------------------------------------------------------------------------------
# the examples of OpenAI's messages, word for word
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload, param, message",
    [
        (body({"role": "user", "content": 5}), "messages[0].content",
         "Invalid type for 'messages[0].content': expected one of a string or array of objects, but got an integer "
         "instead."),
        (body(USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}),
         "messages[1].tool_calls[0].function", "Missing required parameter: 'messages[1].tool_calls[0].function'."),
        (body({"role": "robot", "content": "hi"}), "messages[0].role",
         "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and "
         "'developer'."),
        ({"messages": []}, "messages",
         "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."),
        (body(temperature=3), "temperature",
         "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."),
        (body(USER, TOOL_REPLY), "messages[1].role",
         "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."),
        (body(max_tokens=0), "max_tokens",
         "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead."),
        (body(max_tokens="10"), "max_tokens",
         "Invalid type for 'max_tokens': expected an integer, but got a string instead."),
        (body(tools=[{"type": "function", "function": {"name": "get weather"}}]), "tools[0].function.name",
         "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the "
         "pattern '^[a-zA-Z0-9_-]+$'."),
        (body(stream_options={"include_usage": True}), "stream_options",
         "Invalid value for 'stream_options': 'stream_options' is only allowed when 'stream' is enabled."),
        (body(tool_choice="auto"), "tool_choice",
         "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."),
        (body(parallel_tool_calls=True), "parallel_tool_calls",
         "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are "
         "specified."),
        (body(stop=["a", "b", "c", "d", "e"]), "stop",
         "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 "
         "instead."),
        (body(n=130), "n", "Invalid 'n': integer above maximum value. Expected a value <= 128, but got 130 instead."),
    ],
)
def test_openai_messages(payload, param, message):
    err = rejected(payload)
    assert (err.param, err.message) == (param, message)


# --------------------------------------------------------------------------------------------------
# top-level fields
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload, param, fragment",
    [
        ([1, 2], None, "expected an object, but got an array"),
        ("hi", None, "expected an object, but got a string"),
        ({"model": "m"}, "messages", "Missing required parameter: 'messages'"),
        ({"messages": "hi"}, "messages", "expected an array, but got a string"),
        ({"messages": None}, "messages", "expected an array, but got null"),
        (body(model=3), "model", "expected a string, but got an integer"),
        (body(temperature=-0.5), "temperature", "decimal below minimum value. Expected a value >= 0, but got -0.5"),
        (body(temperature="hot"), "temperature", "expected a decimal, but got a string"),
        (body(temperature=True), "temperature", "expected a decimal, but got a boolean"),
        (body(temperature=float("nan")), "temperature", "finite"),
        (body(top_p=1.5), "top_p", "decimal above maximum value. Expected a value <= 1, but got 1.5"),
        (body(top_p=-0.1), "top_p", "decimal below minimum value"),
        (body(n=0), "n", "integer below minimum value. Expected a value >= 1, but got 0"),
        (body(n=2.0), "n", "expected an integer, but got a decimal"),
        (body(n=True), "n", "expected an integer, but got a boolean"),
        (body(max_tokens=-1), "max_tokens", "Expected a value >= 1, but got -1"),
        (body(max_tokens=1.5), "max_tokens", "expected an integer, but got a decimal"),
        (body(max_completion_tokens=0), "max_completion_tokens", "Expected a value >= 1, but got 0"),
        (body(max_completion_tokens="4096"), "max_completion_tokens", "expected an integer, but got a string"),
        (body(stop=5), "stop", "expected one of a string or array of strings, but got an integer"),
        (body(stop=["ok", 3]), "stop[1]", "expected a string, but got an integer"),
        (body(presence_penalty=2.5), "presence_penalty", "decimal above maximum value. Expected a value <= 2"),
        (body(presence_penalty=-3), "presence_penalty", "decimal below minimum value. Expected a value >= -2"),
        (body(frequency_penalty=-2.01), "frequency_penalty", "decimal below minimum value"),
        (body(frequency_penalty="0"), "frequency_penalty", "expected a decimal"),
        (body(logprobs=1), "logprobs", "expected a boolean, but got an integer"),
        (body(logprobs="true"), "logprobs", "expected a boolean, but got a string"),
        (body(top_logprobs=2), "top_logprobs", "only allowed when 'logprobs' is enabled"),
        (body(top_logprobs=2, logprobs=False), "top_logprobs", "only allowed when 'logprobs' is enabled"),
        (body(top_logprobs=21, logprobs=True), "top_logprobs", "integer above maximum value. Expected a value <= 20"),
        (body(top_logprobs=-1, logprobs=True), "top_logprobs", "integer below minimum value"),
        (body(stream=1), "stream", "expected a boolean, but got an integer"),
        (body(stream="yes"), "stream", "expected a boolean, but got a string"),
        (body(stream=True, stream_options=True), "stream_options", "expected an object, but got a boolean"),
        (body(stream=True, stream_options={"include_usage": 1}), "stream_options.include_usage",
         "expected a boolean, but got an integer"),
        (body(stream=False, stream_options={"include_usage": True}), "stream_options", "only allowed when 'stream'"),
        (body(seed="1"), "seed", "expected an integer, but got a string"),
        (body(seed=1.5), "seed", "expected an integer, but got a decimal"),
        (body(seed=2**64), "seed", "integer above maximum value"),
        (body(user=5), "user", "expected a string, but got an integer"),
        (body(user=None), "user", "expected a string, but got null"),
        (body(logit_bias=[1]), "logit_bias", "expected an object, but got an array"),
        (body(logit_bias={"50256": 101}), "logit_bias.50256", "decimal above maximum value. Expected a value <= 100"),
        (body(store="yes"), "store", "expected a boolean"),
        (body(metadata="x"), "metadata", "expected an object"),
    ],
)
def test_top_level_fields_rejected(payload, param, fragment):
    err = rejected(payload)
    assert err.param == param
    assert fragment in err.message


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"temperature": 0}, {"temperature": 2}, {"temperature": 1}, {"temperature": 0.7}, {"temperature": None},
        {"top_p": 0}, {"top_p": 1}, {"top_p": 0.95},
        {"n": 1}, {"n": 128},
        {"max_tokens": 1}, {"max_tokens": 4096}, {"max_completion_tokens": 4096}, {"max_tokens": None},
        {"stop": "END"}, {"stop": ["a", "b", "c", "d"]}, {"stop": []}, {"stop": None},
        {"presence_penalty": -2, "frequency_penalty": 2}, {"presence_penalty": 0.5},
        {"logprobs": True}, {"logprobs": False}, {"logprobs": True, "top_logprobs": 0},
        {"logprobs": True, "top_logprobs": 20}, {"top_logprobs": None},
        {"stream": True}, {"stream": False}, {"stream": True, "stream_options": {"include_usage": True}},
        {"stream": True, "stream_options": {"include_usage": False, "something_new": 1}},
        {"stream": False, "stream_options": None},
        {"seed": 0}, {"seed": -5}, {"seed": 2**63 - 1},
        {"user": "u1"}, {"store": False}, {"metadata": {"a": "b"}}, {"logit_bias": {"50256": -100}},
        {"model": None},
        # unknown top-level fields stay accepted (ignored)
        {"reasoning_effort": "low", "service_tier": "auto", "prompt_cache_key": "k", "whatever": [1, 2]},
        # SGLang/vLLM extensions
        {"top_k": 20}, {"top_k": -1}, {"min_p": 0.05}, {"min_tokens": 2}, {"stop_token_ids": [2, 3]},
        {"ignore_eos": True}, {"skip_special_tokens": False}, {"return_token_ids": True},
        {"separate_reasoning": False}, {"chat_template_kwargs": {"enable_thinking": False}},
        # the proxy's session keys
        {"session_id": "s-1", "turn_type": "side", "session_done": True},
        {"session_id": "s-1", "turn_type": "main", "session_done": "1"},
    ],
)
def test_top_level_fields_accepted(fields):
    payload = body(**fields)
    assert validate_chat_request(payload) is payload["messages"]


@pytest.mark.parametrize(
    "fields, param, fragment",
    [
        ({"top_k": -2}, "top_k", "integer below minimum value. Expected a value >= -1"),
        ({"top_k": 1.5}, "top_k", "expected an integer"),
        ({"min_p": 1.5}, "min_p", "decimal above maximum value"),
        ({"min_tokens": -1}, "min_tokens", "integer below minimum value"),
        ({"stop_token_ids": 2}, "stop_token_ids", "expected an array, but got an integer"),
        ({"stop_token_ids": [2, "3"]}, "stop_token_ids[1]", "expected an integer, but got a string"),
        ({"ignore_eos": 1}, "ignore_eos", "expected a boolean"),
        ({"skip_special_tokens": "no"}, "skip_special_tokens", "expected a boolean"),
        ({"return_token_ids": 1}, "return_token_ids", "expected a boolean"),
        ({"separate_reasoning": "false"}, "separate_reasoning", "expected a boolean"),
        ({"chat_template_kwargs": []}, "chat_template_kwargs", "expected an object, but got an array"),
    ],
)
def test_extensions_are_type_checked(fields, param, fragment):
    err = rejected(body(**fields))
    assert err.param == param and fragment in err.message


# --------------------------------------------------------------------------------------------------
# tools, tool_choice, parallel_tool_calls, response_format
# --------------------------------------------------------------------------------------------------


def _tool(**function) -> dict:
    return {"type": "function", "function": function}


@pytest.mark.parametrize(
    "fields, param, fragment",
    [
        ({"tools": None}, "tools", "expected an array, but got null"),
        ({"tools": {"type": "function"}}, "tools", "expected an array, but got an object"),
        ({"tools": []}, "tools", "empty array"),
        ({"tools": ["get_weather"]}, "tools[0]", "expected an object, but got a string"),
        ({"tools": [{"function": {"name": "f"}}]}, "tools[0].type", "Missing required parameter: 'tools[0].type'"),
        ({"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0].type",
         "Invalid value: 'retrieval'. Supported values are: 'function'."),
        ({"tools": [TOOL, {"type": "function"}]}, "tools[1].function",
         "Missing required parameter: 'tools[1].function'"),
        ({"tools": [{"type": "function", "function": "f"}]}, "tools[0].function", "expected an object"),
        ({"tools": [_tool(description="no name")]}, "tools[0].function.name",
         "Missing required parameter: 'tools[0].function.name'"),
        ({"tools": [_tool(name=3)]}, "tools[0].function.name", "expected a string, but got an integer"),
        ({"tools": [_tool(name="")]}, "tools[0].function.name", "empty string"),
        ({"tools": [_tool(name="a" * 65)]}, "tools[0].function.name",
         "string too long. Expected a string with maximum length 64, but got a string with length 65 instead."),
        ({"tools": [_tool(name="mcp.search")]}, "tools[0].function.name", "string does not match pattern"),
        ({"tools": [_tool(name="f", description=3)]}, "tools[0].function.description", "expected a string"),
        ({"tools": [_tool(name="f", parameters="{}")]}, "tools[0].function.parameters",
         "expected an object, but got a string"),
        ({"tools": [_tool(name="f", strict=1)]}, "tools[0].function.strict", "expected a boolean, but got an integer"),
        ({"tools": [TOOL], "tool_choice": "sometimes"}, "tool_choice",
         "Invalid value: 'sometimes'. Supported values are: 'none', 'auto', and 'required'."),
        ({"tools": [TOOL], "tool_choice": 1}, "tool_choice", "expected one of a string or object"),
        ({"tools": [TOOL], "tool_choice": None}, "tool_choice", "but got null"),
        ({"tools": [TOOL], "tool_choice": {"function": {"name": "get_weather"}}}, "tool_choice.type",
         "Missing required parameter: 'tool_choice.type'"),
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "function": {"name": "get_weather"}}}, "tool_choice.type",
         "Invalid value: 'tool'"),
        ({"tools": [TOOL], "tool_choice": {"type": "function"}}, "tool_choice.function",
         "Missing required parameter: 'tool_choice.function'"),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {}}}, "tool_choice.function.name",
         "Missing required parameter: 'tool_choice.function.name'"),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
         "tool_choice.function.name", "function 'get_time' is not one of the functions in 'tools'"),
        ({"tool_choice": "required"}, "tool_choice", "only allowed when 'tools' are specified"),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice",
         "only allowed when 'tools' are specified"),
        ({"tools": [TOOL], "parallel_tool_calls": "yes"}, "parallel_tool_calls", "expected a boolean"),
        ({"tools": [TOOL], "parallel_tool_calls": None}, "parallel_tool_calls", "expected a boolean, but got null"),
        ({"parallel_tool_calls": False}, "parallel_tool_calls", "only allowed when 'tools' are specified"),
        ({"response_format": "json"}, "response_format", "expected an object, but got a string"),
        ({"response_format": None}, "response_format", "expected an object, but got null"),
        ({"response_format": {}}, "response_format.type", "Missing required parameter: 'response_format.type'"),
        ({"response_format": {"type": "xml"}}, "response_format.type",
         "Invalid value: 'xml'. Supported values are: 'text', 'json_object', and 'json_schema'."),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema",
         "Missing required parameter: 'response_format.json_schema'"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
         "response_format.json_schema.name", "Missing required parameter"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "a b"}}},
         "response_format.json_schema.name", "string does not match pattern"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "strict": "yes"}}},
         "response_format.json_schema.strict", "expected a boolean"),
    ],
)
def test_tools_and_formats_rejected(fields, param, fragment):
    err = rejected(body(**fields))
    assert err.param == param
    assert fragment in err.message


@pytest.mark.parametrize(
    "fields",
    [
        {"tools": [TOOL]},
        {"tools": [_tool(name="a-b_C9" + "x" * 58)]},  # 64 characters
        {"tools": [_tool(name="f", description="d", parameters={"type": "object"}, strict=True)]},
        {"tools": [_tool(name="f", strict=None, parameters=None)]},
        {"tools": [TOOL], "tool_choice": "auto"},
        {"tools": [TOOL], "tool_choice": "none"},
        {"tools": [TOOL], "tool_choice": "required"},
        {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        {"tools": [TOOL], "parallel_tool_calls": False},
        {"tool_choice": "none"},
        {"response_format": {"type": "text"}},
        {"response_format": {"type": "json_object"}},
        {"response_format": {"type": "json_schema",
                             "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True}}},
        {"functions": [{"name": "legacy"}], "function_call": "auto"},  # deprecated fields: ignored
    ],
)
def test_tools_and_formats_accepted(fields):
    validate_chat_request(body(**fields))


# --------------------------------------------------------------------------------------------------
# messages
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "messages, param, fragment",
    [
        (["hi"], "messages[0]", "Invalid type for 'messages[0]': expected an object, but got a string"),
        ([USER, None], "messages[1]", "expected an object, but got null"),
        ([{"content": "hi"}], "messages[0].role", "Missing required parameter: 'messages[0].role'"),
        ([{"role": 1, "content": "hi"}], "messages[0].role", "expected a string, but got an integer"),
        ([{"role": "User", "content": "hi"}], "messages[0].role", "Invalid value: 'User'"),
        ([{"role": "user"}], "messages[0].content", "Missing required parameter: 'messages[0].content'"),
        ([{"role": "system"}], "messages[0].content", "Missing required parameter"),
        ([{"role": "developer", "content": None}], "messages[0].content",
         "expected one of a string or array of objects, but got null"),
        ([{"role": "user", "content": None}], "messages[0].content", "but got null"),
        ([{"role": "user", "content": {"type": "text", "text": "hi"}}], "messages[0].content",
         "expected one of a string or array of objects, but got an object"),
        ([{"role": "user", "content": []}], "messages[0].content", "Invalid 'messages[0].content': empty array"),
        ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]", "expected an object, but got a string"),
        ([{"role": "user", "content": [{"text": "hi"}]}], "messages[0].content[0].type",
         "Missing required parameter: 'messages[0].content[0].type'"),
        ([{"role": "user", "content": [{"type": "text"}]}], "messages[0].content[0].text",
         "Missing required parameter: 'messages[0].content[0].text'"),
        ([{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages[0].content[0].text",
         "expected a string, but got an integer"),
        ([{"role": "user", "content": [{"type": "video", "video": {}}]}], "messages[0].content[0].type",
         "Invalid value: 'video'. Supported values are: 'text', 'image_url', 'input_audio', and 'file'."),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "messages[0].content[0].image_url",
         "Missing required parameter"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
         "messages[0].content[0].image_url.url", "Missing required parameter"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "max"}}]}],
         "messages[0].content[0].image_url.detail", "Invalid value: 'max'. Supported values are: 'auto', 'low', "
                                                    "and 'high'."),
        ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"format": "wav"}}]}],
         "messages[0].content[0].input_audio.data", "Missing required parameter"),
        ([{"role": "user", "content": [{"type": "file", "file": "id"}]}], "messages[0].content[0].file",
         "expected an object"),
        ([{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
         "messages[0].content[0].type", "Invalid value: 'image_url'. Supported values are: 'text'."),
        ([USER, {"role": "assistant"}], "messages[1].content", "Missing required parameter: 'messages[1].content'"),
        ([USER, {"role": "assistant", "content": None}], "messages[1].content", "but got null"),
        ([USER, {"role": "assistant", "content": 3}], "messages[1].content", "but got an integer"),
        ([USER, {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
         "messages[1].content[0].type", "Supported values are: 'text' and 'refusal'."),
        ([USER, {"role": "assistant", "content": [{"type": "refusal"}]}], "messages[1].content[0].refusal",
         "Missing required parameter"),
        ([USER, {"role": "assistant", "content": "x", "refusal": 1}], "messages[1].refusal", "expected a string"),
        ([USER, {"role": "assistant", "content": None, "tool_calls": []}], "messages[1].tool_calls",
         "Invalid 'messages[1].tool_calls': empty array"),
        ([USER, {"role": "assistant", "content": None, "tool_calls": CALL}], "messages[1].tool_calls",
         "expected an array, but got an object"),
        ([USER, {"role": "assistant", "content": None, "tool_calls": ["call_1"]}], "messages[1].tool_calls[0]",
         "expected an object, but got a string"),
        ([USER, {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": None}]}],
         "messages[1].tool_calls[0].id", "expected a string, but got null"),
        ([USER, {"role": "assistant", "content": None,
                 "tool_calls": [{k: v for k, v in CALL.items() if k != "id"}]}],
         "messages[1].tool_calls[0].id", "Missing required parameter: 'messages[1].tool_calls[0].id'"),
        ([USER, {"role": "assistant", "content": None,
                 "tool_calls": [{k: v for k, v in CALL.items() if k != "type"}]}],
         "messages[1].tool_calls[0].type", "Missing required parameter: 'messages[1].tool_calls[0].type'"),
        ([USER, {"role": "assistant", "content": None, "tool_calls": [{**CALL, "type": "code"}]}],
         "messages[1].tool_calls[0].type", "Invalid value: 'code'. Supported values are: 'function'."),
        ([USER, {"role": "assistant", "content": None, "tool_calls": [{**CALL, "function": "get_weather"}]}],
         "messages[1].tool_calls[0].function", "expected an object, but got a string"),
        ([USER, {"role": "assistant", "content": None,
                 "tool_calls": [{**CALL, "function": {"arguments": "{}"}}]}],
         "messages[1].tool_calls[0].function.name", "Missing required parameter"),
        ([USER, {"role": "assistant", "content": None,
                 "tool_calls": [{**CALL, "function": {"name": "get_weather"}}]}],
         "messages[1].tool_calls[0].function.arguments",
         "Missing required parameter: 'messages[1].tool_calls[0].function.arguments'."),
        ([USER, {"role": "assistant", "content": None,
                 "tool_calls": [{**CALL, "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}],
         "messages[1].tool_calls[0].function.arguments",
         "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object "
         "instead."),
        ([USER, {"role": "assistant", "content": None, "function_call": {"name": "f"}}],
         "messages[1].function_call.arguments", "Missing required parameter"),
        ([USER, ASSISTANT_CALL, {"role": "tool", "content": "sunny"}], "messages[2].tool_call_id",
         "Missing required parameter: 'messages[2].tool_call_id'"),
        ([USER, ASSISTANT_CALL, {"role": "tool", "tool_call_id": 1, "content": "sunny"}], "messages[2].tool_call_id",
         "expected a string, but got an integer"),
        ([USER, ASSISTANT_CALL, {"role": "tool", "tool_call_id": "call_1"}], "messages[2].content",
         "Missing required parameter: 'messages[2].content'"),
        ([USER, ASSISTANT_CALL, {"role": "tool", "tool_call_id": "call_1", "content": None}], "messages[2].content",
         "but got null"),
        ([USER, ASSISTANT_CALL, {"role": "tool", "tool_call_id": "call_1", "content": {"out": 1}}],
         "messages[2].content", "expected one of a string or array of objects, but got an object"),
        ([{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "messages[0].role",
         "must be a response to a preceeding message with 'tool_calls'"),
        ([USER, {"role": "assistant", "content": "no calls"}, TOOL_REPLY], "messages[2].role",
         "must be a response to a preceeding message with 'tool_calls'"),
        ([USER, ASSISTANT_CALL, {**TOOL_REPLY, "tool_call_id": "call_2"}], "messages[2].tool_call_id",
         "'tool_call_id' of 'call_2' not found in 'tool_calls'"),
        ([USER, TOOL_REPLY, ASSISTANT_CALL], "messages[1].role", "preceeding message with 'tool_calls'"),
        ([USER, {"role": "function", "content": "x"}], "messages[1].name",
         "Missing required parameter: 'messages[1].name'"),
        ([USER, {"role": "function", "name": "f", "content": 3}], "messages[1].content", "expected a string"),
        ([USER, {"role": "function", "name": "f"}], "messages[1].content", "Missing required parameter"),
        ([{"role": "user", "content": "hi", "name": 5}], "messages[0].name", "expected a string, but got an integer"),
    ],
)
def test_messages_rejected(messages, param, fragment):
    err = rejected(body(*messages))
    assert err.param == param
    assert fragment in err.message


@pytest.mark.parametrize(
    "messages",
    [
        [USER],
        [{"role": "system", "content": "be brief"}, {"role": "developer", "content": "really"}, USER],
        [{"role": "user", "content": ""}],
        [{"role": "system", "content": [{"type": "text", "text": "be brief"}]}, USER],
        [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA",
                                                                          "detail": "low"}},
                                      {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                                      {"type": "file", "file": {"file_id": "file-1"}}]}],
        [USER, {"role": "assistant", "content": "hello"}, USER],
        [USER, {"role": "assistant", "content": [{"type": "text", "text": "hello"}, {"type": "refusal",
                                                                                   "refusal": "no"}]}],
        [USER, {"role": "assistant", "content": "", "refusal": None}],
        [USER, {"role": "assistant", "content": None, "refusal": "I can't help with that."}, USER],
        # a tool round: content null or absent with tool_calls, then the result (string or text parts)
        [USER, ASSISTANT_CALL, TOOL_REPLY],
        [USER, {"role": "assistant", "tool_calls": [CALL]}, TOOL_REPLY, {"role": "assistant", "content": "sunny"}],
        [USER, {**ASSISTANT_CALL, "content": "let me check"},
         {**TOOL_REPLY, "content": [{"type": "text", "text": "sunny"}]}],
        # two parallel calls answered in either order
        [USER, {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
         {**TOOL_REPLY, "tool_call_id": "call_2"}, TOOL_REPLY],
        # unanswered calls are accepted (see the module docstring), and a late answer to an earlier call too
        [USER, ASSISTANT_CALL, USER],
        [USER, ASSISTANT_CALL],
        [USER, ASSISTANT_CALL, USER, TOOL_REPLY],
        # a generated, odd tool name in the history is not refused
        [USER, {"role": "assistant", "content": None,
                "tool_calls": [{**CALL, "function": {"name": "get weather!", "arguments": "not json"}}]}, TOOL_REPLY],
        # what the openai SDK sends back when a response message is appended as is
        [USER, {"role": "assistant", "content": "hi", "tool_calls": None, "function_call": None, "refusal": None,
                "audio": None, "annotations": []}, USER],
        # the deprecated function calling
        [USER, {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
         {"role": "function", "name": "f", "content": "done"}],
        [USER, {"role": "function", "name": "f", "content": None}],
        # extra fields inside messages, as OpenAI-compatible servers accept them
        [{"role": "user", "content": "hi", "name": "alice"},
         {"role": "assistant", "content": "hello", "reasoning_content": "greet back", "name": "bot"},
         {"role": "user", "content": "bye", "timestamp": 3, "cache_control": {"type": "ephemeral"}}],
    ],
)
def test_messages_accepted(messages):
    validate_chat_request(body(*messages))


# --------------------------------------------------------------------------------------------------
# real client traffic
# --------------------------------------------------------------------------------------------------


def test_every_captured_openclaw_body_validates(openclaw_captures):
    assert len(openclaw_captures) >= 5
    for name, capture in openclaw_captures.items():
        payload = capture["body"]
        original = copy.deepcopy(payload)
        assert validate_chat_request(payload) is payload["messages"], name
        assert payload == original, f"{name}: validation must not modify the body"


def test_openclaw_tool_round_is_checked_for_real(openclaw_captures):
    """The tool follow-up capture really exercises the tool rules: dropping its call breaks it."""
    payload = copy.deepcopy(openclaw_captures["03_local_tool_result_followup"]["body"])
    index = next(i for i, m in enumerate(payload["messages"]) if m.get("tool_calls"))
    del payload["messages"][index]["tool_calls"]
    err = rejected(payload)
    assert err.param == f"messages[{index}].content"
    payload = copy.deepcopy(openclaw_captures["03_local_tool_result_followup"]["body"])
    payload["messages"][index + 1]["tool_call_id"] = "call_unknown"
    assert rejected(payload).param == f"messages[{index + 1}].tool_call_id"


def test_the_proxy_uses_the_same_checks():
    from slime.conversation.proxy import validate_chat_body

    payload = body(USER)
    assert validate_chat_body(payload) is payload["messages"]
    with pytest.raises(APIError) as info:
        validate_chat_body(body({"role": "robot", "content": "x"}))
    assert info.value.param == "messages[0].role" and info.value.message.startswith("Invalid value: 'robot'.")
