"""Does serving survive training? Clients keep chatting while the trainer publishes weight after weight.

Starts the Binary RL job of `openclaw-rl/run_cpu_smollm2_openclaw_rl.sh` (trainer + engine + proxy; the tiny
model by default so that steps are quick), with a rollout batch of 2. Several client sessions chat through
the proxy without pause, streaming like OpenClaw, and answer each reply with feedback ("thanks" / "try
again") so that judged samples keep flowing and the trainer keeps stepping. The run lasts until the engine
has swapped in at least `--syncs` new weight versions. Every request that does not complete (non-200,
an error event in the stream, a broken connection, no [DONE]) counts as failed. Baseline in the same run:
the same clients against the same proxy before the first training step (no weight sync can happen yet).

    python bench/serve_during_training.py [--model-path tiny] [--syncs 5] [--sessions 4] [--engine vllm]

`--engine vllm`: the policy on a vLLM-CPU engine the trainer starts (`--rollout-engine vllm --device cpu`,
`scripts/setup_vllm_cpu.sh`), LoRA (vLLM's reload cannot update a tied output layer), the tiny Qwen3 with 64-wide
heads (vLLM-CPU's attention has no 16-wide ones) unless `--model-path` says otherwise. vLLM's /health carries no
weight version, so the versions counted are the trainer's publishes (`train/weight_version` in the run's metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

FEEDBACK = ["thanks, that's perfect", "no, that's wrong, try again", "great, thank you", "not what I asked, redo it"]


class Tally:
    def __init__(self):
        self.ok = 0
        self.failed = 0
        self.errors: list[str] = []
        self.versions: set[str] = set()


async def _one_request(client, url, session, history, tally: Tally) -> str | None:
    body = {"messages": history, "stream": True, "stream_options": {"include_usage": True},
            "max_completion_tokens": 12}
    text, done = [], False
    try:
        async with client.stream("POST", url, json=body, headers={"X-Session-Id": session}) as response:
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:200]!r}")
            async for line in response.aiter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    event = json.loads(line[6:])
                    if "error" in event:
                        raise RuntimeError(f"error event: {event['error']}")
                    if event.get("weight_version") is not None:
                        tally.versions.add(str(event["weight_version"]))
                    for choice in event.get("choices") or []:
                        text.append((choice.get("delta") or {}).get("content") or "")
        if not done:
            raise RuntimeError("stream ended without [DONE]")
    except Exception as exc:  # every way a user could see a failure counts
        tally.failed += 1
        tally.errors.append(f"{type(exc).__name__}: {exc}")
        return None
    tally.ok += 1
    return "".join(text)


TURNS_PER_SESSION = 3  # then a fresh session: prompts stay short, and every turn keeps its full history


async def _chat(url: str, sessions: int, stop, tally: Tally, prefix: str):
    async def session(i):
        async with httpx.AsyncClient(timeout=300) as client:
            for k in itertools.count():
                # a session's turns are judged only while the client resends the whole history (a history cut
                # short reads as a new conversation): so the history is never trimmed, the session ends instead
                history = [{"role": "user", "content": f"{prefix} session {i}.{k}: say something nice."}]
                for turn in range(TURNS_PER_SESSION + 1):  # the last request is the previous turn's next state
                    if stop():
                        return
                    reply = await _one_request(client, url, f"{prefix}-{i}-{k}", history, tally)
                    if reply is None:
                        await asyncio.sleep(0.2)
                        break
                    history += [{"role": "assistant", "content": reply},
                                {"role": "user", "content": FEEDBACK[(i + turn) % len(FEEDBACK)]}]

    await asyncio.gather(*(session(i) for i in range(sessions)))


def _version(url: str, metrics: Path | None = None) -> int:
    """The weight version the proxy reports, or with `metrics` (an engine whose health says none) the last one the
    trainer published."""
    if metrics is not None:
        rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
        return max([int(r["train/weight_version"]) for r in rows if "train/weight_version" in r], default=0)
    try:
        return int(httpx.get(url + "/healthz", timeout=5).json().get("weight_version") or 0)
    except (httpx.HTTPError, ValueError):
        return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default=None, help="default: tiny (with --engine vllm: a vLLM-servable tiny)")
    parser.add_argument("--engine", choices=["embedded", "vllm"], default="embedded")
    parser.add_argument("--syncs", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--baseline-seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=1200.0)
    args = parser.parse_args()
    from slime.conversation.launch import ConversationJob

    engine_flags: list[str] = []
    if args.engine == "vllm":
        from slime.models.tiny import TinySpec, build_tiny_model

        args.model_path = args.model_path or str(build_tiny_model(
            TinySpec(num_attention_heads=2, num_key_value_heads=1, head_dim=64)))
        engine_flags = ["--rollout-engine", "vllm", "--device", "cpu", "--use-lora", "--lora-rank", "8"]
    model_path = args.model_path or "tiny"
    with tempfile.TemporaryDirectory() as run_dir:
        job = ConversationJob("openclaw-rl/run_cpu_smollm2_openclaw_rl.sh", "--hf-checkpoint", model_path,
                              "--save-interval", "100000", "--lr", "1e-4", *engine_flags,
                              log_path=Path(run_dir) / "job.log",
                              env={"RUN_DIR": run_dir, "ROLLOUT_BATCH_SIZE": "2", "PRM_TYPE": "rules"})
        metrics = Path(run_dir) / "metrics.jsonl" if args.engine == "vllm" else None
        with job:
            url = job.url
            # baseline: chat before any step could have trained: fresh single-turn sessions never get a next
            # state, so they produce no samples and nothing trains
            baseline = Tally()
            started = time.monotonic()
            base_stop = lambda: time.monotonic() - started > args.baseline_seconds  # noqa: E731
            asyncio.run(_chat_without_feedback(url + "/v1/chat/completions", args.sessions, base_stop, baseline))
            print(f"baseline (no training yet): {baseline.ok} ok, {baseline.failed} failed, "
                  f"weight version {_version(url, metrics)}", flush=True)

            during = Tally()
            start_version = _version(url, metrics)
            started = time.monotonic()
            last_report = [started]
            finished = [False]

            def stop():
                if finished[0]:
                    return True
                now = time.monotonic()
                version = _version(url, metrics) if now - last_report[0] > 2 else None
                if version is not None:
                    last_report[0] = now
                    print(f"  {now - started:6.0f} s: weight version {version}, {during.ok} ok, "
                          f"{during.failed} failed", flush=True)
                    if version - start_version >= args.syncs:
                        finished[0] = True
                        return True
                if job.process.poll() is not None:
                    raise SystemExit(f"the job exited with {job.process.returncode}; see {job.log_path}")
                finished[0] = now - started > args.timeout
                return finished[0]

            asyncio.run(_chat(url + "/v1/chat/completions", args.sessions, stop, during, "train"))
            syncs = _version(url, metrics) - start_version
    print(f"during training: {during.ok} requests ok, {during.failed} failed, {syncs} weight syncs, "
          f"versions seen in responses: {sorted(during.versions, key=lambda v: (len(v), v))}")
    for error in during.errors[:5]:
        print("  failure:", error)
    verdict = "PASS" if during.failed <= 0 and syncs >= args.syncs else "FAIL"
    print(f"RESULT serve_during_training value={during.failed} target=<=0 {verdict}")
    return 0


async def _chat_without_feedback(url, sessions, stop, tally):
    async def session(i):
        async with httpx.AsyncClient(timeout=300) as client:
            n = 0
            while not stop():
                # a new session per request: a turn that never gets a next state is never a sample
                history = [{"role": "user", "content": f"baseline {i}-{n}: hello"}]
                await _one_request(client, url, f"base-{i}-{n}", history, tally)
                n += 1

    await asyncio.gather(*(session(i) for i in range(sessions)))


if __name__ == "__main__":
    sys.exit(main())
