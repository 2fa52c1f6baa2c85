"""Latency the conversation proxy adds over calling the engine directly, 32 concurrent sessions.

The same seeded workload runs twice against one engine (the tiny model, so that the engine's own time is
small and the proxy's share is visible): directly against the engine's `/v1/chat/completions`, and through
the proxy (session bookkeeping, next-state matching, judging with the rules judge, the SQLite store).
Each session is a multi-turn conversation streamed like OpenClaw does (`stream: true`, usage chunk), with
greedy decoding and a fixed number of new tokens, so both runs generate identical tokens. Runs alternate
direct/proxy several times; latency is time to the last byte of each request. Added latency = proxied
minus direct, at p50 and p99.

    python bench/proxy_overhead.py [--sessions 32] [--turns 6] [--new-tokens 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPLIES = ["thanks, that helps", "no, try again please", "ok, and then?", "great", "tell me more"]


async def _session(client: httpx.AsyncClient, url: str, index: int, turns: int, new_tokens: int,
                   latencies: list[float], proxied: bool):
    history = [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": f"Conversation {index}: tell me about topic {index}."}]
    headers = {"X-Session-Id": f"bench-{index}"} if proxied else {}
    for turn in range(turns):
        body = {"messages": history, "stream": True, "stream_options": {"include_usage": True},
                "max_completion_tokens": new_tokens, "min_tokens": new_tokens, "temperature": 0.0}
        started = time.perf_counter()
        text = []
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                raise RuntimeError(f"{url}: {response.status_code} {await response.aread()}")
            async for line in response.aiter_lines():
                if line.startswith("data: {") and '"delta"' in line:
                    import json

                    for choice in json.loads(line[6:]).get("choices") or []:
                        text.append(choice.get("delta", {}).get("content") or "")
        latencies.append(time.perf_counter() - started)
        history = history + [{"role": "assistant", "content": "".join(text)},
                             {"role": "user", "content": REPLIES[(index + turn) % len(REPLIES)]}]


async def _workload(url: str, sessions: int, turns: int, new_tokens: int, proxied: bool) -> list[float]:
    latencies: list[float] = []
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=sessions * 2)) as client:
        await asyncio.gather(*(_session(client, url, i, turns, new_tokens, latencies, proxied)
                               for i in range(sessions)))
    return latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default="tiny")
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target-ms", type=float, default=2.0)
    args = parser.parse_args()

    from slime.conversation.launch import ProxyProcess
    from slime.engine.launch import EngineProcess
    from slime.models import resolve_model_path

    model = resolve_model_path(args.model_path)
    with tempfile.TemporaryDirectory() as tmp, \
            EngineProcess(model, log_path=Path(tmp) / "engine.log") as engine, \
            ProxyProcess(engine.url, Path(tmp) / "bench.db", judge="rules", log_path=Path(tmp) / "proxy.log") as proxy:
        direct_url, proxy_url = engine.url + "/v1/chat/completions", proxy.url + "/v1/chat/completions"
        asyncio.run(_workload(direct_url, 4, 1, args.new_tokens, False))  # warm-up, not counted
        asyncio.run(_workload(proxy_url, 4, 1, args.new_tokens, True))
        direct, proxied = [], []
        for r in range(args.rounds):
            for name, url, sink, is_proxy in (("direct", direct_url, direct, False), ("proxy", proxy_url, proxied, True)):
                started = time.perf_counter()
                sink += asyncio.run(_workload(url, args.sessions, args.turns, args.new_tokens, is_proxy))
                print(f"round {r + 1}/{args.rounds} {name:6s}: {args.sessions * args.turns} requests in "
                      f"{time.perf_counter() - started:.1f} s, p50 so far {statistics.median(sink) * 1000:.1f} ms",
                      flush=True)
    p50_direct, p50_proxy = _pct(direct, 0.5) * 1000, _pct(proxied, 0.5) * 1000
    p99_direct, p99_proxy = _pct(direct, 0.99) * 1000, _pct(proxied, 0.99) * 1000
    added_p50, added_p99 = p50_proxy - p50_direct, p99_proxy - p99_direct
    print(f"direct: p50 {p50_direct:.2f} ms, p99 {p99_direct:.2f} ms ({len(direct)} requests)")
    print(f"proxy:  p50 {p50_proxy:.2f} ms, p99 {p99_proxy:.2f} ms ({len(proxied)} requests)")
    print(f"added p99 latency: {added_p99:.2f} ms")
    verdict = "PASS" if added_p50 <= args.target_ms else "FAIL"
    print(f"RESULT proxy_overhead value={added_p50:.2f} target=<={args.target_ms:g} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
