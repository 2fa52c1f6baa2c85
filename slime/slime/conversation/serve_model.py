"""`python -m slime.conversation serve-model`: the serving half on its own (engine + proxy + judges), recording
into a store that a trainer started elsewhere attaches to. The usage guide's `serve_model.py`.

    python -m slime.conversation serve-model --model-path smollm2 --port 30000 \
        --store postgresql://slime:PW@db-host/slime [--method combine] [--prm-type rules] [proxy flags ...]

It starts the policy engine as a child process (the embedded engine; `--engine-url URL` attaches to one already
running instead, e.g. an SGLang server on the GPUs named by `--gpu-ids`) and serves the conversation proxy in
front of it; every further flag is the proxy's (`python -m slime.conversation serve --help`). Nothing here trains:
a trainer attaches with `--proxy-url`, `--conversation-store` (the same store) and
`--rollout-external-engine-addrs` (this engine, which receives its weight updates). Keys come from the environment:
`OPENCLAW_PROXY_API_KEY` (required beyond loopback) for clients, `SLIME_ENGINE_API_KEY` for the engine.
Ctrl-C stops the proxy, then the engine; turns already recorded stay in the store.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m slime.conversation serve-model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-path", default="smollm2", help="HF folder, or `smollm2` / `tiny` (default smollm2)")
    parser.add_argument("--host", default="127.0.0.1", help="where the proxy (and the engine) listen")
    parser.add_argument("--port", type=int, default=30000, help="the proxy's port: the OpenAI-compatible API")
    parser.add_argument("--engine-port", type=int, default=None, help="the engine's port (default: --port + 10)")
    parser.add_argument("--engine-url", default=None, help="attach to a running engine instead of starting one")
    parser.add_argument("--gpu-ids", default=None,
                        help="GPUs of the engine started here (CUDA_VISIBLE_DEVICES), e.g. 0,1")
    parser.add_argument("--context-length", type=int, default=None, help="the engine's context (default: the model's)")
    parser.add_argument("--store", "--conversation-store", dest="store", required=True,
                        help="a SQLite file (one host) or a postgresql:// URL (trainer on another host)")
    parser.add_argument("--run-dir", default="runs/serve", help="logs (engine.log)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args, proxy_flags = build_parser().parse_known_args(argv)
    from slime.conversation.proxy import main as proxy_main

    def serve(engine_url: str) -> int:
        return proxy_main(["--engine-url", engine_url, "--conversation-store", args.store, "--proxy-host", args.host,
                           "--proxy-port", str(args.port), *proxy_flags]) or 0

    if args.engine_url:
        return serve(args.engine_url)
    from slime.engine.launch import EngineProcess
    from slime.models import resolve_model_path

    engine_key = os.environ.get("SLIME_ENGINE_API_KEY")
    if args.host not in ("127.0.0.1", "localhost", "::1") and not engine_key:
        print("error: an engine reachable beyond loopback needs SLIME_ENGINE_API_KEY (the trainer sends it with "
              "its weight updates)", file=sys.stderr)
        return 2
    extra = ["--context-length", str(args.context_length)] if args.context_length else []
    if args.gpu_ids is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu_ids  # the child inherits it
        extra += ["--device", "cuda"]  # the embedded engine on the first of them (SGLang: start it, --engine-url)
    engine = EngineProcess(resolve_model_path(args.model_path), *extra, port=args.engine_port or args.port + 10,
                           api_key=engine_key, host=args.host, log_path=Path(args.run_dir) / "engine.log",
                           ready_timeout=600)
    print(f"starting the engine on {args.model_path} (log {Path(args.run_dir) / 'engine.log'})", file=sys.stderr)
    with engine:
        print(f"engine ready on {engine.url}; trainers attach with --rollout-external-engine-addrs {engine.url}",
              file=sys.stderr)
        return serve(engine.url)


if __name__ == "__main__":
    sys.exit(main())
