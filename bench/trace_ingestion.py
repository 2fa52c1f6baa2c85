"""Trace ingestion while chat is served: throughput of `POST /v1/traces`, and what it costs chat latency.

    python bench/trace_ingestion.py [--traces 10000] [--batch 500] [--chats 40]

Real tiny engine + real proxy + SQLite store on loopback. Baseline: `--chats` sequential chat requests
(8 new tokens each) with nothing else going on, p50/p95 latency. Then the same chat load while a
`TraceClient` ships `--traces` traces (explicit rewards, so each is judged and becomes a sample) in batches
of `--batch`; reports traces per second, the chat latency during ingestion, and checks every trace is
stored exactly once. Last line: `RESULT trace_ingestion value=<traces/s> target=>=200 PASS|FAIL`
(200/s: a busy app's whole day of traces, 10,000, lands in under a minute).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
TARGET = 200.0


def chat_latencies(url: str, n: int, stop: threading.Event | None = None) -> list[float]:
    out = []
    with httpx.Client(timeout=120) as http:
        for i in range(n):
            if stop is not None and stop.is_set():
                break
            start = time.perf_counter()
            resp = http.post(url + "/v1/chat/completions", headers={"X-Session-Id": f"chat-{i}"},
                             json={"messages": [{"role": "user", "content": f"hello number {i}"}], "max_tokens": 8})
            resp.raise_for_status()
            out.append(time.perf_counter() - start)
    return out


def ingest(client, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        client.record(task="bench", model="elsewhere", prompt=f"question {i}: what is {i} + {i}?",
                      response=f"The answer is {2 * i}.", reward=1 if i % 3 else -1, profile={"user": i % 50})
    result = client.flush()
    if result["error"] or result["sent"] != n:
        raise RuntimeError(f"ingestion incomplete: {result}")
    return time.perf_counter() - start


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--chats", type=int, default=40)
    args = parser.parse_args()

    from slime.conversation.launch import ProxyProcess
    from slime.conversation.store import ConversationStore
    from slime.conversation.trace_client import TraceClient
    from slime.engine.launch import EngineProcess
    from slime.models.tiny import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="trace-bench-"))
    with EngineProcess(build_tiny_model(), log_path=work / "engine.log") as engine, \
            ProxyProcess(engine.url, work / "conv.db", judge="rules", log_path=work / "proxy.log") as proxy:
        chat_latencies(proxy.url, 3)  # warm-up
        base = chat_latencies(proxy.url, args.chats)
        print(f"baseline chat: p50 {pct(base, 0.5):.1f} ms, p95 {pct(base, 0.95):.1f} ms ({len(base)} requests)")

        client = TraceClient(proxy.url, spool=work / "spool.jsonl", batch_size=args.batch)
        client.record(prompt="warm-up", response="ok", reward=1)
        client.flush()  # loads the tokenizer once, outside the measurement
        during: list[float] = []
        done = threading.Event()

        def chat_until_done():
            while not done.is_set():
                during.extend(chat_latencies(proxy.url, 5, done))

        chatter = threading.Thread(target=chat_until_done)
        chatter.start()
        start_all = time.perf_counter()
        try:
            seconds = ingest(client, args.traces)
        finally:
            done.set()
            chatter.join()
        rate = args.traces / seconds
        print(f"ingested {args.traces} traces in batches of {args.batch}: {seconds:.1f} s, {rate:.0f} traces/s "
              "(recorded, spooled, sent and stored)")
        while httpx.get(proxy.url + "/v1/stats", timeout=60).json()["traces"]["pending"]:
            time.sleep(0.2)  # judging (here: the explicit rewards) and samples follow in the background
        print(f"all judged into samples {time.perf_counter() - start_all:.1f} s after the first record")
        print(f"chat during ingestion: p50 {pct(during, 0.5):.1f} ms, p95 {pct(during, 0.95):.1f} ms "
              f"({len(during)} requests; baseline p50 {pct(base, 0.5):.1f} ms)")
        stats = httpx.get(proxy.url + "/v1/stats", timeout=60).json()["traces"]
        client.close()
    store = ConversationStore(work / "conv.db")
    try:
        total = store.trace_stats()["total"]
    finally:
        store.close()
    print(f"stored traces: {total} (expected {args.traces + 1}); server counts {stats}")
    ok = total == args.traces + 1 and rate >= TARGET
    print(f"RESULT trace_ingestion value={rate:.0f} target=>={TARGET:.0f} {'PASS' if ok else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
