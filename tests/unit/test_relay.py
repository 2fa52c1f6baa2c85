"""What the proxy forwards to the engine, what it keeps from the answer, and what the client gets back."""

from slime.conversation.relay import ForwardPolicy, SampledTurn, build_forward_body, client_chunk, client_response


def test_forward_body_forces_logprobs_ids_and_limits():
    body = {"messages": [{"role": "user", "content": "hi"}], "session_id": "s", "turn_type": "main",
            "session_done": False, "stream": True, "max_completion_tokens": 4096, "temperature": 1.3, "top_p": 0.5}
    forward, wants = build_forward_body(body, ForwardPolicy(served_model_name="m", max_response_tokens=256,
                                                            temperature=0.6))
    assert not {"session_id", "turn_type", "session_done"} & set(forward)
    assert forward["logprobs"] is True and forward["return_token_ids"] is True
    assert forward["stream_options"] == {"include_usage": True} and forward["model"] == "m"
    assert forward["max_completion_tokens"] == 256 and forward["temperature"] == 0.6 and "top_p" not in forward
    assert wants.stream and not wants.logprobs and not wants.usage_in_stream and not wants.token_ids


def test_forward_body_keeps_client_sampling_without_policy():
    forward, wants = build_forward_body({"messages": [], "temperature": 0.2, "max_tokens": 9, "logprobs": True},
                                        ForwardPolicy())
    assert forward["temperature"] == 0.2 and forward["max_tokens"] == 9 and "stream_options" not in forward
    assert wants.logprobs and not wants.stream
    forward, _ = build_forward_body({"messages": []}, ForwardPolicy(max_response_tokens=64))
    assert forward["max_completion_tokens"] == 64  # no budget given: the configured response limit applies


def _chunk(**choice):
    return {"id": "c", "object": "chat.completion.chunk", "weight_version": "3",
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": None, **choice}]}


def test_stream_chunks_accumulate_exact_tokens_and_tool_calls():
    turn = SampledTurn()
    first = _chunk(delta={"role": "assistant", "content": ""})
    first["prompt_token_ids"] = [1, 2, 3]
    turn.absorb_chunk(first)
    turn.absorb_chunk(_chunk(delta={"content": "He"}, token_ids=[7], logprobs={"content": [{"logprob": -0.5}]}))
    turn.absorb_chunk(_chunk(delta={"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                    "function": {"name": "get", "arguments": "{\"a\""}}]},
                             token_ids=[8, 9], logprobs={"content": [{"logprob": -1.0}, {"logprob": -2.0}]}))
    turn.absorb_chunk(_chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                             token_ids=[2], logprobs={"content": [{"logprob": -0.1}]}, finish_reason="tool_calls"))
    turn.absorb_chunk({"choices": [], "usage": {"completion_tokens": 4}})
    assert turn.prompt_ids == [1, 2, 3] and turn.response_ids == [7, 8, 9, 2]
    assert turn.response_logprobs == [-0.5, -1.0, -2.0, -0.1] and turn.weight_version == "3"
    message = turn.message()
    assert message["content"] == "He" and message["tool_calls"][0]["function"] == {"name": "get", "arguments": "{\"a\": 1}"}
    assert turn.finish_reason == "tool_calls" and turn.usage == {"completion_tokens": 4}


def test_client_sees_only_what_it_asked_for():
    _, wants = build_forward_body({"messages": [], "stream": True}, ForwardPolicy())
    extras_only = _chunk(token_ids=[5], logprobs={"content": [{"logprob": -1}]})
    assert client_chunk(extras_only, wants, "s") is None  # a chunk that only carried forced extras
    visible = client_chunk(_chunk(delta={"content": "x"}, token_ids=[5]), wants, "s")
    assert visible["session_id"] == "s" and "token_ids" not in visible["choices"][0]
    assert visible["choices"][0]["logprobs"] is None
    assert client_chunk({"choices": [], "usage": {"total_tokens": 3}}, wants, "s") is None  # usage not requested
    _, wants_usage = build_forward_body({"messages": [], "stream": True, "stream_options": {"include_usage": True}},
                                        ForwardPolicy())
    assert client_chunk({"choices": [], "usage": {"total_tokens": 3}}, wants_usage, "s")["usage"]["total_tokens"] == 3
    _, whole = build_forward_body({"messages": []}, ForwardPolicy())
    data = {"prompt_token_ids": [1], "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                                  "token_ids": [4], "logprobs": {"content": [{"logprob": -1}]}}]}
    out = client_response(data, whole, "s")
    assert out["session_id"] == "s" and "prompt_token_ids" not in out
    assert out["choices"][0]["logprobs"] is None and "token_ids" not in out["choices"][0]
    assert data["choices"][0]["token_ids"] == [4]  # the engine's answer itself is left intact


def test_stream_relayed_exactly_as_openai_sends_it():
    """The whole path of one stream as the proxy runs it (absorb, then the in-place client view, then orjson):
    the bytes the client gets, and the exact ids, log-probs and text that are kept."""
    import orjson

    env = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "weight_version": "7"}
    engine = [
        {**env, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}], "prompt_token_ids": [1, 2, 3]},
        {**env, "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None, "token_ids": [10],
                             "logprobs": {"content": [{"token": "Hel", "logprob": -0.25, "bytes": [72],
                                                       "top_logprobs": []}]}}]},
        {**env, "choices": [{"index": 0, "delta": {}, "finish_reason": None, "token_ids": [11],  # held back
                             "logprobs": {"content": [{"token": "<", "logprob": -1.5, "top_logprobs": []}]}}]},
        {**env, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop", "token_ids": [12],
                             "logprobs": {"content": [{"token": "lo", "logprob": -0.125, "top_logprobs": []}]}}]},
        {**env, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}},
    ]
    _, wants = build_forward_body({"messages": [], "stream": True, "stream_options": {"include_usage": True}},
                                  ForwardPolicy())
    turn, sent = SampledTurn(), []
    for chunk in engine:
        item = orjson.loads(orjson.dumps(chunk))  # as parsed from the engine's bytes
        turn.absorb_chunk(item)
        out = client_chunk(item, wants, "s1")
        if out is not None:
            sent.append(orjson.dumps(out))
    head = b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","weight_version":"7",'
    assert sent == [
        head + b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
               b'"finish_reason":null}],"session_id":"s1"}',
        head + b'"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null,"logprobs":null}],'
               b'"session_id":"s1"}',
        head + b'"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop","logprobs":null}],'
               b'"session_id":"s1"}',
        head + b'"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6},"session_id":"s1"}',
    ]
    assert turn.prompt_ids == [1, 2, 3] and turn.response_ids == [10, 11, 12]
    assert turn.response_logprobs == [-0.25, -1.5, -0.125] and turn.weight_version == "7"
    assert turn.message() == {"role": "assistant", "content": "Hello"} and turn.finish_reason == "stop"
