"""The HTTP side of a simulated user: OpenAI-style chat requests to the conversation server, as a chat client
such as OpenClaw sends them (full history every time, streamed with a usage chunk, one session id per
conversation), plus the server's `/v1/feedback` for a reaction that ends a conversation and `/v1/stats`,
`/healthz` for the runner's bookkeeping."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from slime.engine.client import weight_version_number

__all__ = ["ChatReply", "ServerClient", "ServerError"]


class ServerError(RuntimeError):
    pass


@dataclass(frozen=True)
class ChatReply:
    content: str
    finish_reason: str | None
    completion_tokens: int | None
    session_id: str | None


class ServerClient:
    def __init__(self, url: str, api_key: str | None = None, model: str = "default", timeout: float = 900.0):
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def chat(self, messages: list[dict], session_id: str, *, side: bool = False, max_tokens: int = 256,
                   temperature: float = 0.6, seed: int | None = None, stream: bool = True) -> ChatReply:
        """One assistant reply. `side=True` marks it a side request (evaluation): served by the same policy,
        never trained on."""
        headers = {"X-Session-Id": session_id, "X-Turn-Type": "side" if side else "main"}
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                "stream": stream}
        if seed is not None:
            body["seed"] = seed
        if stream:
            body["stream_options"] = {"include_usage": True}
            return await self._stream(body, headers)
        response = await self.http.post("/v1/chat/completions", json=body, headers=headers)
        data = _json_or_raise(response)
        choice = data["choices"][0]
        return ChatReply(choice["message"].get("content") or "", choice.get("finish_reason"),
                         (data.get("usage") or {}).get("completion_tokens"), data.get("session_id"))

    async def _stream(self, body: dict, headers: dict) -> ChatReply:
        parts, finish, tokens, session = [], None, None, None
        async with self.http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                _json_or_raise(response)
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                if "error" in chunk:
                    raise ServerError(f"stream error: {chunk['error']}")
                session = chunk.get("session_id", session)
                for choice in chunk.get("choices") or []:
                    parts.append((choice.get("delta") or {}).get("content") or "")
                    finish = choice.get("finish_reason") or finish
                if chunk.get("usage"):
                    tokens = chunk["usage"].get("completion_tokens")
        return ChatReply("".join(parts), finish, tokens, session)

    async def feedback(self, session_id: str, text: str) -> dict:
        """The user's reaction to the latest turn of a conversation that ends here (no further request)."""
        response = await self.http.post("/v1/feedback", json={"session_id": session_id, "text": text})
        return _json_or_raise(response)

    async def stats(self) -> dict:
        return _json_or_raise(await self.http.get("/v1/stats"))

    async def weight_version(self) -> int:
        data = _json_or_raise(await self.http.get("/healthz"))
        return weight_version_number(data.get("weight_version"))

    async def served_model(self) -> str:
        data = _json_or_raise(await self.http.get("/v1/models"))
        return data["data"][0]["id"]


def _json_or_raise(response: httpx.Response) -> dict:
    if response.status_code >= 400:
        raise ServerError(f"{response.request.method} {response.request.url.path}: HTTP {response.status_code}: "
                          f"{response.text[:500]}")
    return response.json()
