"""Start the embedded engine: `python -m slime.engine --model-path smollm2 --port 30010`.

Flag names follow `sglang.launch_server` where both have the same meaning, so scripts can switch
between the two by changing the module name.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

DEFAULT_PORT = 30010


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m slime.engine", description=__doc__.splitlines()[0])
    p.add_argument("--model-path", "--model", default="smollm2",
                   help="HF model folder, or 'smollm2' (embedded default) or 'tiny' (random-weight test model)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--api-key", default=os.environ.get("SLIME_ENGINE_API_KEY"),
                   help="require 'Authorization: Bearer KEY' (default: $SLIME_ENGINE_API_KEY, else no key)")
    p.add_argument("--served-model-name", default=None, help="name reported by /v1/models (default: folder name)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"])
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="torch intra-op threads (default $OMP_NUM_THREADS or 1: faster on a loaded 2-core machine)")
    p.add_argument("--context-length", type=int, default=None, help="default: the model's max_position_embeddings")
    p.add_argument("--max-running-requests", type=int, default=32, help="sequences decoded together")
    p.add_argument("--max-queued-requests", type=int, default=256,
                   help="waiting sequences before new requests get 429 + Retry-After")
    p.add_argument("--chunked-prefill-size", type=int, default=512, help="prompt tokens prefilled per loop step")
    p.add_argument("--prefix-cache-tokens", type=int, default=16384, help="token budget of the prefix KV cache")
    p.add_argument("--disable-radix-cache", action="store_true", help="turn the prefix cache off")
    p.add_argument("--weight-version", default="0", help="version reported before the first update")
    p.add_argument("--random-seed", type=int, default=0)
    p.add_argument("--reasoning-parser", default=None, choices=["qwen3", "deepseek-r1"],
                   help="split <think>...</think> into reasoning_content in chat responses")
    p.add_argument("--log-level", default="info")
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch
    import uvicorn

    torch.set_num_threads(args.threads)
    from slime.engine.engine import Engine, EngineConfig
    from slime.engine.server import create_app
    from slime.models import resolve_model_path

    model_path = resolve_model_path(args.model_path)
    config = EngineConfig(
        model_path=str(model_path),
        served_model_name=args.served_model_name,
        dtype=args.dtype,
        device=args.device,
        context_length=args.context_length,
        max_running_requests=args.max_running_requests,
        max_queued_requests=args.max_queued_requests,
        chunked_prefill_size=args.chunked_prefill_size,
        prefix_cache_tokens=0 if args.disable_radix_cache else args.prefix_cache_tokens,
        weight_version=args.weight_version,
        random_seed=args.random_seed,
        api_key=args.api_key,
        reasoning_parser=args.reasoning_parser,
    )
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.api_key:
        print(f"warning: binding {args.host} without --api-key: anyone who can reach it can use the model",
              file=sys.stderr)
    engine = Engine(config)
    print(f"engine: {engine.served_model_name} on http://{args.host}:{args.port} "
          f"(context {engine.context_length}, {args.threads} thread(s), {args.device}/{args.dtype})",
          file=sys.stderr, flush=True)
    uvicorn.run(create_app(engine), host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=5)


if __name__ == "__main__":
    main()
