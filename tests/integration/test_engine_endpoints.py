"""Health, information and cache endpoints of a real engine process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest


@pytest.fixture(scope="module")
def http(engine_server):
    with httpx.Client(base_url=engine_server.url, timeout=120.0) as client:
        yield client


def get(http: httpx.Client, path: str) -> dict:
    response = http.get(path)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def test_health(http, engine_client):
    assert get(http, "/health") == {"status": "ok", "weight_version": "0"}
    assert engine_client.health()


def test_health_generate(http, engine_client):
    body = get(http, "/health_generate")
    assert body["status"] == "ok" and body["weight_version"] == "0"
    assert engine_client.health_generate()


def test_models(http, engine_client, tiny_model_path):
    body = get(http, "/v1/models")
    assert body["object"] == "list"
    assert len(body["data"]) == 1
    model = body["data"][0]
    assert model["id"] == Path(tiny_model_path).name
    assert model["object"] == "model"
    assert model["max_model_len"] == 2048
    assert Path(model["root"]) == Path(tiny_model_path).resolve()
    assert engine_client.models() == body


def test_model_info(http, engine_client, tiny_model, tiny_model_path):
    _, tokenizer = tiny_model
    body = get(http, "/get_model_info")
    assert Path(body["model_path"]) == Path(tiny_model_path).resolve()
    assert body["tokenizer_path"] == body["model_path"]
    assert body["served_model_name"] == Path(tiny_model_path).name
    assert body["is_generation"] is True
    assert body["context_length"] == 2048
    assert body["vocab_size"] == len(tokenizer)
    assert body["weight_version"] == "0"
    assert engine_client.model_info() == body


def test_weight_version(http, engine_client):
    assert get(http, "/get_weight_version") == {"weight_version": "0"}
    assert engine_client.weight_version() == "0"


def test_server_info(http, engine_server):
    body = get(http, "/get_server_info")
    assert Path(body["model_path"]).name == body["served_model_name"]
    assert body["dtype"] == "float32"
    assert body["device"] == "cpu"
    assert body["context_length"] == 2048
    assert body["max_running_requests"] == 32
    assert body["max_queued_requests"] == 256
    assert body["chunked_prefill_size"] == 512
    assert body["prefix_cache_tokens"] == 16384
    assert body["weight_version"] == "0"
    assert body["last_error"] is None
    load = body["load"]
    assert load == {"running": 0, "prefilling": 0, "waiting": 0, "swap_pending": False}
    stats = body["stats"]
    assert set(stats) >= {"requests", "generated_tokens", "prompt_tokens", "cached_tokens", "decode_steps"}

    response = http.post("/generate", json={"input_ids": [10, 11, 12], "sampling_params": {"max_new_tokens": 3,
                                                                                           "ignore_eos": True}})
    assert response.status_code == 200
    after = get(http, "/get_server_info")["stats"]
    assert after["requests"] == stats["requests"] + 1
    assert after["prompt_tokens"] == stats["prompt_tokens"] + 3
    assert after["generated_tokens"] == stats["generated_tokens"] + 3


def test_flush_cache(http, engine_client):
    body = {"input_ids": list(range(100, 140)), "sampling_params": {"max_new_tokens": 3, "ignore_eos": True,
                                                                   "temperature": 0}}

    def cached() -> int:
        response = http.post("/generate", json=body)
        assert response.status_code == 200, response.text
        return response.json()["meta_info"]["cached_tokens"]

    cached()
    assert cached() > 0, "a repeated 40-token prompt was not served from the prefix cache"
    response = http.post("/flush_cache")
    assert response.status_code == 200
    assert response.json()["success"] is True
    assert cached() == 0, "the prefix cache still served the prompt after /flush_cache"
    assert cached() > 0
    assert engine_client.flush_cache()["success"] is True
    assert cached() == 0


def test_unknown_route_is_404(http):
    assert http.get("/no/such/route").status_code == 404
