"""The main job on the embedded default: start the engine with SmolLM2-135M-Instruct and answer one chat request.

Later issues grow this into the full loop (proxy, judges, background training); for now it proves that a
fresh machine can serve the embedded model through the SGLang/OpenAI protocol.
"""

from __future__ import annotations

import argparse
import sys
import time

from slime.engine.client import EngineClient
from slime.engine.launch import EngineProcess
from slime.models import resolve_model_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default="smollm2")
    parser.add_argument("--question", default="In one sentence: why do plants need sunlight?")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    model_path = resolve_model_path(args.model_path)  # converts SmolLM2 once, with progress, before serving
    print(f"[main] starting the engine on {model_path.name} ...", flush=True)
    started = time.monotonic()
    with EngineProcess(model_path) as engine:
        print(f"[main] engine ready at {engine.url} in {time.monotonic() - started:.1f} s", flush=True)
        with EngineClient(engine.url) as client:
            print(f"[main] user: {args.question}", flush=True)
            t0 = time.monotonic()
            reply = client.chat({
                "messages": [{"role": "user", "content": args.question}],
                "max_tokens": args.max_tokens,
                "temperature": 0.0,
                "return_token_ids": True,
            })
            elapsed = time.monotonic() - t0
            choice = reply["choices"][0]
            usage = reply["usage"]
            print(f"[main] assistant: {choice['message']['content']}", flush=True)
            print(f"[main] {usage['completion_tokens']} tokens in {elapsed:.2f} s "
                  f"({usage['completion_tokens'] / elapsed:.1f} tok/s), finish_reason={choice['finish_reason']}, "
                  f"weight_version={reply['weight_version']}", flush=True)
    print("[main] engine stopped", flush=True)
    return 0 if choice["message"]["content"] else 1


if __name__ == "__main__":
    sys.exit(main())
