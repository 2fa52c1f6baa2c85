"""`python -m slime.conversation <command>`: look into a run's store, export it, or serve the proxy.

    stats  --store PATH [--json]           counts from a store file
    stats  --url http://host:port [--api-key K] [--json]   the same counts from a running proxy (/v1/stats)
    export --store PATH --out DIR          conversations.jsonl + judgements.jsonl
    serve  ...                             the proxy (all further arguments are the proxy's)
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys


class CliError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def _open_store(path: str):
    from slime.conversation.store import ConversationStore

    # ConversationStore creates missing files; a typo'd path must not silently produce an empty store
    if not os.path.isfile(path):
        raise CliError(f"store file not found: {path}")
    try:
        return ConversationStore(path)
    except sqlite3.DatabaseError as exc:
        raise CliError(f"cannot open store {path}: {exc}") from None


def _fetch_stats(url: str, api_key: str | None) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.get(url.rstrip("/") + "/v1/stats", headers=headers, timeout=30.0)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {url}: {exc}") from None
    if resp.status_code != 200:
        raise CliError(f"{url}/v1/stats answered HTTP {resp.status_code}: {resp.text[:200]}")
    return resp.json()


def format_stats(stats: dict) -> str:
    """A plain table of the dict that `ConversationStore.stats()` and the proxy's /v1/stats return."""
    lines: list[str] = []

    def row(label: str, value, indent: int = 0) -> None:
        lines.append(f"{' ' * indent}{label:<{28 - indent}} {value}")

    s = stats.get("sessions", {})
    row("sessions", f"{s.get('total', 0)} ({s.get('active', 0)} active, {s.get('finalized', 0)} finalized)")
    t = stats.get("turns", {})
    row("turns", f"{t.get('main', 0)} main, {t.get('side', 0)} side")
    for status, n in sorted(t.get("by_status", {}).items()):
        row(status, n, indent=2)
    row("judged", f"{stats.get('judged', 0)} ({stats.get('judge_failures', 0)} failed)")
    sm = stats.get("samples", {})
    row("samples", f"{sm.get('pending', 0)} pending, {sm.get('in_batch', 0)} in batch, "
                   f"{sm.get('trained', 0)} trained")
    r = stats.get("rewards", {})
    mean = r.get("mean")
    row("rewards", f"-1: {r.get('-1', 0)}  0: {r.get('0', 0)}  +1: {r.get('1', 0)}  "
                   f"mean: {'-' if mean is None else f'{mean:+.3f}'}")
    excluded = stats.get("excluded", {})
    row("excluded", sum(excluded.values()))
    for reason, n in sorted(excluded.items()):
        row(reason, n, indent=2)
    row("feedback", stats.get("feedback", 0))
    proxy = stats.get("proxy")  # only from a running proxy: its in-memory counters
    if isinstance(proxy, dict):
        row("proxy", "")
        for key, value in proxy.items():
            if not isinstance(value, (dict, list)):
                row(key, value, indent=2)
    return "\n".join(lines)


def _cmd_stats(args) -> int:
    if bool(args.store) == bool(args.url):
        raise CliError("stats needs exactly one of --store PATH or --url URL")
    if args.url:
        stats = _fetch_stats(args.url, args.api_key)
    else:
        store = _open_store(args.store)
        try:
            stats = store.stats()
        finally:
            store.close()
    print(json.dumps(stats, indent=2, ensure_ascii=False) if args.json else format_stats(stats))
    return 0


def _cmd_export(args) -> int:
    store = _open_store(args.store)
    try:
        os.makedirs(args.out, exist_ok=True)
        conv = os.path.join(args.out, "conversations.jsonl")
        judg = os.path.join(args.out, "judgements.jsonl")
        n_conv, n_judge = store.export_jsonl(conv, judg)
    except OSError as exc:
        raise CliError(f"cannot write export: {exc}") from None
    finally:
        store.close()
    print(f"{n_conv} turns -> {conv}")
    print(f"{n_judge} judgements -> {judg}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m slime.conversation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    stats = sub.add_parser("stats", help="sessions, turns, judgements, samples and rewards")
    stats.add_argument("--store", help="path of the store file (SQLite)")
    stats.add_argument("--url", help="base URL of a running proxy, e.g. http://127.0.0.1:30000")
    stats.add_argument("--api-key", help="API key of the proxy (sent as a bearer token)")
    stats.add_argument("--json", action="store_true", help="print the raw JSON instead of a table")
    stats.set_defaults(func=_cmd_stats)

    export = sub.add_parser("export", help="write conversations.jsonl and judgements.jsonl")
    export.add_argument("--store", required=True, help="path of the store file (SQLite)")
    export.add_argument("--out", required=True, help="output directory")
    export.set_defaults(func=_cmd_export)

    # listed for --help only: main() hands `serve` and everything after it to the proxy untouched
    sub.add_parser("serve", help="run the OpenAI-compatible proxy (arguments: see `serve --help`)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        from slime.conversation.proxy import main as proxy_main  # heavy imports only when serving

        return proxy_main(argv[1:]) or 0
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
