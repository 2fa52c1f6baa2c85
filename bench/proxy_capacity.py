"""Relay capacity of the conversation proxy: streamed tokens relayed per proxy CPU-second.

A load generator engine (a real aiohttp HTTP server speaking what the proxy calls on the engine: `POST
/v1/chat/completions` streamed with `logprobs`, `return_token_ids` and a usage chunk, plus `/health` and
`/v1/models`) streams pre-tokenised replies as fast as the socket allows: each chunk is one token with its id
and log-prob, and the generator yields to its event loop between chunks, so concurrent streams interleave. The
engine is never the bottleneck. `--step-ms 20` paces it like a batched GPU engine instead (every stream gets one
token per 20 ms decode step: 256 streams = 12,800 tokens/s), so that each read carries one token.

N concurrent multi-turn sessions (1, 32, 256) run twice per level: directly against the generator (the
baseline) and through the proxy (rules judge, the SQLite store). Measured in one run: tokens relayed per proxy
CPU-second (utime+stime of the proxy's processes from /proc, which on a shared 2-core machine is what counts,
not wall time; taken once judging has caught up, so storing and judging every turn is part of the cost),
direct and proxied wall throughput, p50/p99 added latency (time to the last byte, proxied minus direct) and
the proxy's RSS. After the run every main-line turn must be in the store with the exact token ids and
log-probs the generator sent; a failed request or a missing/wrong turn makes the value 0.

    python bench/proxy_capacity.py [--levels 1,32,256] [--turns 6] [--reply-tokens 256] [--step-ms 0]
    python bench/proxy_capacity.py --soak 300          # 256 sessions for 5 minutes: failures, stored turns, RSS
    python bench/proxy_capacity.py --profile out.txt   # py-spy --gil over the proxy during the largest level
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import aiohttp

VOCAB = [" the", " model", " answers", " token", " stream", " of", " and", " a", " proxy", " engine", " fast",
         " relay", " every", " turn", " is", " kept", ",", ".", " with", " exact", " ids", " log", "-", "probs",
         " user", " reply", " next", " state", " judge", " sample", " train", " weights"]
N_REPLIES = 16
MODEL = "loadgen"


# ------------------------------------------------------------------------------------------ the replies

def reply_tokens(index: int, length: int) -> tuple[list[int], list[float], str]:
    """Reply `index`: its token ids, log-probs and text (deterministic, so the bench can check the store)."""
    ids = [1000 + (index * 7 + k * 13) % len(VOCAB) for k in range(length)]
    logprobs = [-((index * 31 + k * 17) % 97) / 37.0 for k in range(length)]
    return ids, logprobs, "".join(VOCAB[i - 1000] for i in ids)


def reply_index(messages: list[dict]) -> int:
    """Which reply the generator sends: a function of the last message, which the client can compute too."""
    return zlib.crc32(str(messages[-1].get("content") or "").encode()) % N_REPLIES


def _sse(obj) -> bytes:
    # as our engine writes them (`slime.engine.server._sse`)
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def render_reply(index: int, length: int) -> tuple[dict, list[bytes]]:
    """The stream of one reply after its first chunk, pre-rendered: one chunk per token, the last with the
    finish reason, then the usage chunk (its prompt counts are patched per request) and [DONE]."""
    ids, logprobs, _ = reply_tokens(index, length)
    envelope = {"id": f"chatcmpl-loadgen{index}", "object": "chat.completion.chunk", "created": 1700000000,
                "model": MODEL, "weight_version": "1"}
    chunks = []
    for k, (token_id, logprob) in enumerate(zip(ids, logprobs)):
        text = VOCAB[token_id - 1000]
        choice = {"index": 0, "delta": {"content": text},
                  "logprobs": {"content": [{"token": text, "logprob": logprob, "bytes": list(text.encode()),
                                            "top_logprobs": []}]},
                  "finish_reason": "stop" if k == length - 1 else None, "token_ids": [token_id]}
        chunks.append(_sse({**envelope, "choices": [choice]}))
    return envelope, chunks


class LoadGenerator:
    """The generator's HTTP server (run in its own process by `--serve-loadgen PORT`)."""

    def __init__(self, length: int, step_ms: float = 0.0):
        self.length = length
        self.step = step_ms / 1000
        self.replies = [render_reply(i, length) for i in range(N_REPLIES)]
        self.tick: asyncio.Future | None = None

    async def _decode_steps(self):
        """Paced mode: one shared clock, every stream sends one token per step, as a batched GPU engine does."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.step)
            done, self.tick = self.tick, loop.create_future()
            done.set_result(None)

    async def next_step(self):
        if self.step <= 0:
            await asyncio.sleep(0)  # as fast as the socket allows, but every other stream gets its turn
            return
        if self.tick is None:  # the first stream starts the clock (the future exists before anyone awaits it)
            loop = asyncio.get_running_loop()
            self.tick = loop.create_future()
            self._clock = loop.create_task(self._decode_steps())
        await self.tick

    async def chat(self, request):
        from aiohttp import web

        body = json.loads(await request.read())
        messages = body["messages"]
        envelope, chunks = self.replies[reply_index(messages)]
        # a stand-in prompt: one id per 4 characters of the conversation, as a tokenizer would give roughly
        n_prompt = max(1, sum(len(str(m.get("content") or "")) for m in messages) // 4)
        prompt_ids = [(i * 7919) % 49152 for i in range(n_prompt)]
        if not body.get("stream"):
            ids, logprobs, text = reply_tokens(reply_index(messages), self.length)
            return web.json_response({
                **envelope, "object": "chat.completion", "prompt_token_ids": prompt_ids,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "token_ids": ids,
                             "logprobs": {"content": [{"token": VOCAB[t - 1000], "logprob": lp, "bytes": [],
                                                       "top_logprobs": []} for t, lp in zip(ids, logprobs)]},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": self.length,
                          "total_tokens": n_prompt + self.length}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        first = {**envelope, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "logprobs": None, "finish_reason": None}]}
        if body.get("return_token_ids"):
            first["prompt_token_ids"] = prompt_ids
        await response.write(_sse(first))
        for chunk in chunks:
            await response.write(chunk)
            await self.next_step()
        usage = {"prompt_tokens": n_prompt, "completion_tokens": self.length, "total_tokens": n_prompt + self.length,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        await response.write(_sse({**envelope, "choices": [], "usage": usage}) + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def serve(self, port: int) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/health", lambda r: web.json_response({"status": "ok", "weight_version": "1"}))
        app.router.add_get("/v1/models", lambda r: web.json_response(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 1 << 20}]}))
        web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


def _generator_process(length: int, log_path: Path, step_ms: float = 0.0):
    from slime.engine.launch import ChildServer

    class Generator(ChildServer):
        name = "load generator"

        def command(self):
            return [sys.executable, __file__, "--serve-loadgen", str(self.port), "--reply-tokens", str(length),
                    "--step-ms", str(step_ms)]

    return Generator(log_path=log_path, ready_timeout=60)


# ------------------------------------------------------------------------------------------ measuring

def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (proxy worker processes count too)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process tree (every thread: the store's worker threads count)."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


class Workload:
    """N sessions, each `turns` streamed requests with the whole history, like an OpenClaw conversation. The
    client only reads bytes (it knows each reply from `reply_index`), so its own CPU stays small."""

    def __init__(self, url: str, length: int, proxied: bool, tag: str):
        self.url, self.length, self.proxied, self.tag = url + "/v1/chat/completions", length, proxied, tag
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.requests = 0
        self.started = 0
        self.budget: int | None = None  # requests to start in all (None: one conversation per session)
        self.texts = [reply_tokens(i, length)[2] for i in range(N_REPLIES)]

    async def session(self, http: aiohttp.ClientSession, name: str, turns: int, deadline: float | None):
        history = [{"role": "system", "content": "You are a helpful assistant."},
                   {"role": "user", "content": f"{name}: tell me about the relay."}]
        headers = {"X-Session-Id": name, "X-Turn-Type": "main"} if self.proxied else {}
        for turn in range(turns):
            if (deadline is not None and time.monotonic() > deadline) or \
                    (self.budget is not None and self.started >= self.budget):
                return
            self.started += 1
            body = {"model": MODEL, "messages": history, "stream": True, "stream_options": {"include_usage": True},
                    "max_completion_tokens": self.length}
            started = time.perf_counter()
            tail = b""
            try:
                async with http.post(self.url, json=body, headers=headers) as response:
                    if response.status != 200:
                        raise RuntimeError(f"HTTP {response.status}: {(await response.read())[:300]!r}")
                    async for data in response.content.iter_any():
                        tail = (tail + data)[-64:]
                if not tail.endswith(b"data: [DONE]\n\n"):
                    raise RuntimeError(f"stream ended without [DONE]: ...{tail!r}")
            except Exception as exc:  # noqa: BLE001 - counted, and the session goes on
                self.failures.append(f"{name} turn {turn + 1}: {type(exc).__name__}: {exc}")
                return
            self.latencies.append(time.perf_counter() - started)
            self.requests += 1
            history = history + [{"role": "assistant", "content": self.texts[reply_index(history)]},
                                 {"role": "user", "content": f"ok {turn}, go on about {name}"}]

    async def run(self, sessions: int, turns: int, deadline: float | None = None, budget: int | None = None):
        """Each of `sessions` clients holds one conversation after another until `deadline` passes or `budget`
        requests have started; with neither, one conversation each."""
        self.budget = budget
        connector = aiohttp.TCPConnector(limit=sessions * 2, force_close=False)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as http:
            async def forever(i: int):
                generation = 0
                while True:  # a new session every `turns` turns, so histories stay conversation-sized
                    await self.session(http, f"{self.tag}-{i}-{generation}", turns, deadline)
                    generation += 1
                    if (deadline is None and budget is None) or (deadline is not None and time.monotonic() > deadline) \
                            or (budget is not None and self.started >= budget) or len(self.failures) > 100:
                        return
            await asyncio.gather(*(forever(i) for i in range(sessions)))


# Where the proxy's CPU goes, from a py-spy --gil profile (collapsed stacks): first matching category wins.
PROFILE_CATEGORIES = [
    ("store (SQLite reads/writes in worker threads)", lambda frames, leaf: any("store.py" in f for f in frames)),
    ("judging and sample building", lambda frames, leaf: any(x in f for f in frames for x in (
        "_judge_turn", "judges/", "samples.py", "utils/types.py"))),
    ("socket write to the client (uvicorn send: one send() per write)",
     lambda frames, leaf: "httptools_impl.py" in leaf and "send" in leaf),
    ("upstream read (aiohttp: HTTP parser, StreamReader, read timeout)", lambda frames, leaf: "aiohttp" in leaf),
    ("relay (SSE split, orjson, absorb_chunk, client_chunk)",
     lambda frames, leaf: any(x in leaf for x in ("relay.py", "events (slime", "orjson"))),
    ("ASGI stack (FastAPI/Starlette routing, middleware, send wrappers)",
     lambda frames, leaf: any(x in leaf for x in ("starlette", "fastapi", "uvicorn", "anyio", "contextlib", "_asgi"))),
    ("sessions (validation, fingerprints, next-state matching)",
     lambda frames, leaf: any(x in f for f in frames for x in ("sessions.py", "chat_validation", "service.py"))),
    ("event loop (uvloop/asyncio)", lambda frames, leaf: any(x in leaf for x in ("runners.py", "asyncio", "uvloop"))),
]


def profile_summary(path: str, cpu_s: float, tokens: int) -> list[str]:
    counts: dict[str, int] = {}
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            if not n.isdigit():
                continue
            frames = stack.split(";")
            total += int(n)
            name = next((name for name, test in PROFILE_CATEGORIES if test(frames, frames[-1])), "other")
            counts[name] = counts.get(name, 0) + int(n)
    lines = [f"profile ({total} samples with the GIL held): {cpu_s * 1e6 / tokens:.1f} us of proxy CPU per relayed token"]
    for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {100 * n / total:5.1f}%  {n / total * cpu_s * 1e6 / tokens:5.1f} us/token  {name}")
    return lines


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def check_store(db: Path, length: int) -> tuple[int, list[str]]:
    """Every main-line turn with the exact ids and log-probs the generator sent. Returns (turns, problems)."""
    from slime.conversation.store import ConversationStore

    expected = [reply_tokens(i, length) for i in range(N_REPLIES)]
    problems, count = [], 0
    with ConversationStore(db) as store:
        for turn in store.recent_turns(10**9):
            if turn.turn_type != "main":
                continue
            count += 1
            ids, logprobs, text = expected[reply_index(turn.request["messages"])]
            if turn.response_ids != ids or turn.response_logprobs != logprobs or turn.response_message.get("content") != text:
                problems.append(f"turn {turn.id} ({turn.session_id} #{turn.turn_num}): stored ids/log-probs/text differ")
            if not turn.prompt_ids or turn.status == "aborted":
                problems.append(f"turn {turn.id}: status {turn.status}, {len(turn.prompt_ids)} prompt ids")
    return count, problems


# ------------------------------------------------------------------------------------------ the run

def measure_level(generator, proxy, sessions: int, turns: int, length: int, min_requests: int) -> dict:
    direct = Workload(generator.url, length, proxied=False, tag=f"direct{sessions}")
    proxied = Workload(proxy.url, length, proxied=True, tag=f"proxy{sessions}")
    started, gen_cpu = time.perf_counter(), cpu_seconds(generator.process.pid)
    budget = max(sessions * turns, min_requests)  # enough work that 10 ms CPU-clock ticks do not matter
    asyncio.run(direct.run(sessions, turns, budget=budget))
    direct_wall, direct_gen_cpu = time.perf_counter() - started, cpu_seconds(generator.process.pid) - gen_cpu
    cpu0, started = cpu_seconds(proxy.process.pid), time.perf_counter()
    asyncio.run(proxied.run(sessions, turns, budget=budget))
    proxy_wall = time.perf_counter() - started
    drained = drain_judging(proxy.url)
    proxy_cpu = cpu_seconds(proxy.process.pid) - cpu0
    tokens = proxied.requests * length
    row = {"sessions": sessions, "requests": proxied.requests, "failures": len(direct.failures) + len(proxied.failures),
           "direct_tok_s": direct.requests * length / direct_wall, "proxy_tok_s": tokens / proxy_wall,
           "proxy_cpu_s": proxy_cpu, "tok_per_cpu_s": tokens / max(proxy_cpu, 1e-9),
           "proxy_cpu_ms_per_request": proxy_cpu * 1000 / max(1, proxied.requests),
           "generator_cpu_us_per_token": direct_gen_cpu * 1e6 / max(1, direct.requests * length),
           "p50_direct": _pct(direct.latencies, 0.5) * 1000, "p50_proxy": _pct(proxied.latencies, 0.5) * 1000,
           "p99_direct": _pct(direct.latencies, 0.99) * 1000, "p99_proxy": _pct(proxied.latencies, 0.99) * 1000,
           "rss_mib": rss_mib(proxy.process.pid)}
    for failure in (direct.failures + proxied.failures)[:5]:
        print("  failure:", failure, flush=True)
    print(f"{sessions:4d} sessions: {proxied.requests} requests x {length} tokens; direct {row['direct_tok_s']:,.0f} tok/s, "
          f"proxied {row['proxy_tok_s']:,.0f} tok/s; proxy CPU {proxy_cpu:.2f} s = {row['tok_per_cpu_s']:,.0f} tok per "
          f"CPU-s ({row['proxy_cpu_ms_per_request']:.2f} ms per request); added latency p50 "
          f"{row['p50_proxy'] - row['p50_direct']:+.1f} ms, p99 {row['p99_proxy'] - row['p99_direct']:+.1f} ms "
          f"(direct p50 {row['p50_direct']:.1f} ms); proxy RSS {row['rss_mib']:.0f} MiB; failures {row['failures']}; "
          f"judging caught up {drained:.1f} s after the last request (its CPU counted)",
          flush=True)
    return row


async def _judge_backlog(url: str) -> tuple[int, int]:
    """(turns waiting for the judge, turns judged so far), from the proxy's /v1/stats."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        async with http.get(url + "/v1/stats") as response:
            stats = await response.json()
    return stats["turns"]["by_status"].get("judging", 0), stats["proxy"]["judged"]


async def _judging(url: str) -> str:
    try:
        waiting, judged = await _judge_backlog(url)
        return f"{waiting} turns waiting for the judge, {judged} judged"
    except (aiohttp.ClientError, asyncio.TimeoutError, KeyError) as exc:
        return f"stats unavailable ({type(exc).__name__})"


def drain_judging(url: str, timeout: float = 600.0) -> float:
    """Wait until every turn with a next state is judged: its storing and judging are part of what relaying it
    cost, so the CPU reading comes after. Returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        waiting, _ = asyncio.run(_judge_backlog(url))
        if waiting == 0:
            break
        time.sleep(0.5)
    return time.monotonic() - started


def soak(generator, proxy, sessions: int, turns: int, length: int, seconds: float) -> tuple[int, dict]:
    """`sessions` sessions for `seconds`, RSS sampled every 10 s. Returns (requests, summary)."""
    workload = Workload(proxy.url, length, proxied=True, tag="soak")
    samples: list[tuple[float, float, float]] = []  # (elapsed, RSS MiB, proxy CPU s)
    start, cpu0 = time.monotonic(), cpu_seconds(proxy.process.pid)

    async def monitor():
        while time.monotonic() - start < seconds + 5:
            await asyncio.sleep(10)
            elapsed = time.monotonic() - start
            samples.append((elapsed, rss_mib(proxy.process.pid), cpu_seconds(proxy.process.pid) - cpu0))
            judging = await _judging(proxy.url)
            print(f"  soak {elapsed:5.0f}/{seconds:.0f} s: {workload.requests} requests, {len(workload.failures)} "
                  f"failed, proxy RSS {samples[-1][1]:.0f} MiB, proxy CPU {samples[-1][2]:.1f} s, {judging}", flush=True)

    async def both():
        watcher = asyncio.create_task(monitor())
        await workload.run(sessions, turns, deadline=start + seconds)
        watcher.cancel()

    asyncio.run(both())
    drained = drain_judging(proxy.url)
    cpu = cpu_seconds(proxy.process.pid) - cpu0
    print(f"  judging caught up {drained:.1f} s after the last request", flush=True)
    for failure in workload.failures[:5]:
        print("  failure:", failure, flush=True)
    after_warmup = [rss for t, rss, _ in samples if t >= 60] or [s[1] for s in samples]
    summary = {"requests": workload.requests, "failures": len(workload.failures),
               "rss_start": after_warmup[0], "rss_end": samples[-1][1] if samples else float("nan"),
               "rss_max": max(after_warmup), "tok_per_cpu_s": workload.requests * length / max(1e-9, cpu)}
    return workload.requests, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,32,256", help="concurrent sessions per level")
    parser.add_argument("--turns", type=int, default=6, help="turns per session (per level: this many each)")
    parser.add_argument("--reply-tokens", type=int, default=256)
    parser.add_argument("--step-ms", type=float, default=0.0,
                        help="paced mode: one token per stream every STEP ms (a GPU engine's decode step); "
                             "0: as fast as the socket allows")
    parser.add_argument("--min-requests", type=int, default=300, help="requests per level at least")
    parser.add_argument("--target", type=float, default=50000.0, help="relayed tokens per proxy CPU-second")
    parser.add_argument("--soak", type=float, default=0.0, help="seconds of 256 sessions instead of the levels")
    parser.add_argument("--soak-sessions", type=int, default=256)
    parser.add_argument("--profile", help="py-spy the proxy during the largest level into this file")
    parser.add_argument("--proxy-arg", action="append", default=[], help="extra proxy flag (repeatable)")
    parser.add_argument("--serve-loadgen", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_loadgen:
        LoadGenerator(args.reply_tokens, args.step_ms).serve(args.serve_loadgen)
        return 0

    from slime.conversation.launch import ProxyProcess

    levels = [int(x) for x in args.levels.split(",")]
    log_dir = Path("runs/bench")
    log_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "capacity.db"
        with _generator_process(args.reply_tokens, log_dir / "proxy_capacity_loadgen.log",
                                                 args.step_ms) as generator, \
                ProxyProcess(generator.url, db, *args.proxy_arg, judge="rules",
                             log_path=log_dir / "proxy_capacity_proxy.log") as proxy:
            print(f"load generator {generator.url} (pid {generator.process.pid}), proxy {proxy.url} "
                  f"(pid {proxy.process.pid}), {args.reply_tokens} tokens per reply", flush=True)
            asyncio.run(Workload(generator.url, args.reply_tokens, False, "warm").run(4, 2))
            warm = Workload(proxy.url, args.reply_tokens, True, "warm")
            asyncio.run(warm.run(4, 2))
            sent = warm.requests
            if args.soak:
                requests, summary = soak(generator, proxy, args.soak_sessions, args.turns, args.reply_tokens, args.soak)
                sent += requests
            else:
                rows = []
                for sessions in levels:
                    spy = None
                    if args.profile and sessions == max(levels):
                        spy = subprocess.Popen(["py-spy", "record", "--pid", str(proxy.process.pid), "--format",
                                                "raw", "--output", args.profile, "--rate", "200", "--nonblocking",
                                                "--gil"],  # only the thread holding the GIL: Python's CPU
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    rows.append(measure_level(generator, proxy, sessions, args.turns, args.reply_tokens,
                                               args.min_requests))
                    if spy is not None:
                        spy.send_signal(signal.SIGINT)
                        spy.wait(timeout=60)
                        for line in profile_summary(args.profile, rows[-1]["proxy_cpu_s"],
                                                    rows[-1]["requests"] * args.reply_tokens):
                            print(line, flush=True)
                    sent += rows[-1]["requests"]
            rss_final = rss_mib(proxy.process.pid)
        stored, problems = check_store(db, args.reply_tokens)
    print(f"store: {stored} main-line turns for {sent} proxied requests; {len(problems)} problem(s)", flush=True)
    for problem in problems[:5]:
        print("  ", problem)
    ok = stored == sent and not problems
    if args.soak:
        flat = summary["rss_end"] <= summary["rss_start"] * 1.10
        print(f"soak: {summary['requests']} requests in {args.soak:.0f} s, {summary['failures']} failed, RSS "
              f"{summary['rss_start']:.0f} MiB at 60 s -> {summary['rss_end']:.0f} MiB at the end (max "
              f"{summary['rss_max']:.0f}), {'flat' if flat else 'GROWING'}; {summary['tok_per_cpu_s']:,.0f} tok per "
              "proxy CPU-s", flush=True)
        value = summary["failures"] + (0 if ok else 1) + (0 if flat else 1)
        print(f"RESULT proxy_capacity_soak value={value} target=<=0 {'PASS' if value == 0 else 'FAIL'}")
        return 0
    headline = rows[-1]
    failures = sum(r["failures"] for r in rows)
    print(f"proxy RSS at the end: {rss_final:.0f} MiB; failed requests: {failures}")
    value = headline["tok_per_cpu_s"] if ok and not failures else 0.0
    verdict = "PASS" if value >= args.target else "FAIL"
    print(f"RESULT proxy_capacity value={value:.0f} target=>={args.target:g} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
