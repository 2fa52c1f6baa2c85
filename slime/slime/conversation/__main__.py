"""`python -m slime.conversation <command>`: look into a run's store, export it, or serve the proxy.

    stats  --store PATH [--json]           counts from a store file
    stats  --url http://host:port [--api-key K] [--json]   the same counts from a running proxy (/v1/stats)
    export --store PATH --out DIR          conversations.jsonl + judgements.jsonl
    sessions [--url URL | --store PATH] [--session ID] [--limit N] [--offset N] [--active] [--json]
                                           one line per session, or one session turn by turn
                                           (alias: inspect_sessions)
    serve  ...                             the proxy (all further arguments are the proxy's)
    serve-model --store S [...]            engine + proxy without a trainer (a trainer attaches elsewhere)
    openclaw-config --url URL [--write F]  the openclaw.json that points the OpenClaw client at the server
    collect --store S --output-dir D       judged samples -> a rollout directory (--session-aware, --follow N)
    train --rollout-dir D --checkpoint-dir C [--method M] [trainer flags]   train from a rollout directory
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time


class CliError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def _open_store(path: str):
    from slime.conversation.store import ConversationStore
    from slime.conversation.store_backends import describe, is_postgres

    # ConversationStore creates missing files; a typo'd path must not silently produce an empty store
    if not is_postgres(path) and not os.path.isfile(path):
        raise CliError(f"store file not found: {path}")
    try:
        return ConversationStore(path)
    except (sqlite3.DatabaseError, ConnectionError) as exc:
        raise CliError(f"cannot open store {describe(path)}: {exc}") from None


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
        check = proxy.get("header_check")  # requests the client tagged (the OpenClaw plugin): inference vs tags
        if isinstance(check, dict) and check.get("requests"):
            tt, ss = check.get("turn_type", {}), check.get("session", {})
            row("tags vs inference", f"{check['requests']} tagged request(s)", indent=2)
            row("turn type", f"{tt.get('agree', 0)} agree, {tt.get('disagree', 0)} disagree", indent=4)
            for pair, n in (tt.get("disagreements") or {}).items():
                row(pair, n, indent=6)
            row("session", f"{ss.get('agree', 0)} agree, {ss.get('disagree', 0)} disagree "
                           f"({ss.get('split_sessions', 0)} split, {ss.get('merged_sessions', 0)} merged)", indent=4)
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


def _cmd_openclaw_config(args) -> int:
    from slime.conversation.openclaw_config import describe_server, openclaw_config

    api_key = args.api_key or os.environ.get("OPENCLAW_PROXY_API_KEY")
    try:
        model_id, served_context = describe_server(args.url, api_key)
    except Exception as exc:  # noqa: BLE001 - any failure to ask the server is the user's to fix
        raise CliError(f"cannot read {args.url}/v1/models: {exc}") from None
    context = args.context_window or served_context or 8192
    lean = {"lean": True, "full": False, "auto": None}[args.profile]
    config = openclaw_config(args.url, model_id, api_key=api_key, context_window=context,
                             max_tokens=args.max_tokens, lean=lean, plugin=args.plugin)
    text = json.dumps(config, indent=2) + "\n"
    if args.write:
        path = os.path.expanduser(args.write)
        if os.path.exists(path) and not args.force:
            raise CliError(f"{path} exists; pass --force to replace it (or merge the printed config by hand)")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        provider = next(iter(config["models"]["providers"]))
        print(f"wrote {path} (model {provider}/{model_id}, context {context}, "
              f"{'lean' if config.get('tools') else 'full'} profile)", file=sys.stderr)
    else:
        print(text, end="")
    return 0


DEFAULT_PROXY_URL = "http://127.0.0.1:30000"


def _fetch_json(url: str, path: str, api_key: str | None, params: dict | None = None) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.get(url.rstrip("/") + path, params=params, headers=headers, timeout=30.0)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {url}: {exc}") from None
    if resp.status_code != 200:
        try:
            message = resp.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = resp.text[:200]
        raise CliError(f"{url.rstrip('/')}{path} answered HTTP {resp.status_code}: {message}")
    return resp.json()


def _ago(ts, now: float) -> str:
    if ts is None:
        return "-"
    seconds = max(0.0, now - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def _clip(text, width: int) -> str:
    text = "-" if text is None or text == "" else " ".join(str(text).split())  # one line
    return text if len(text) <= width else text[:width - 1] + "…"


def _signed(value) -> str:
    return "0" if value == 0 else f"{value:+g}"


def _mean(value) -> str:
    return "-" if value is None else f"{value:+.2f}"


def format_sessions(page: dict, now: float | None = None) -> str:
    """One line per session of `ConversationStore.session_summaries()` / `GET /v1/sessions`."""
    import time

    now = time.time() if now is None else now
    sessions = page.get("sessions", [])
    first = page.get("offset", 0) + 1
    scope = "active sessions" if page.get("active_only") else "sessions"
    lines = [f"{scope} {first}-{first + len(sessions) - 1} of {page.get('total', 0)}, most recent first"
             if sessions else f"no {scope} (total {page.get('total', 0)}, offset {page.get('offset', 0)})"]
    if not sessions:
        return lines[0]
    header = (f"{'SESSION':<34} {'SOURCE':<7} {'LAST SEEN':>10} {'STATE':<18} {'MAIN':>4} {'SIDE':>4} {'DEMO':>4} "
              f"{'JUDGED':>6} {'FAIL':>4} {'PEND':>4} {'BATCH':>5} {'TRAIN':>5} {'-1/0/+1':>9} {'MEAN':>5} {'FB':>3}")
    lines.append(header)
    for s in sessions:
        t, sm, r = s.get("turns", {}), s.get("samples", {}), s.get("rewards", {})
        state = "active" if s.get("active") else f"done ({s.get('finalize_reason') or '?'})"
        signs = f"{r.get('-1', 0)}/{r.get('0', 0)}/{r.get('1', 0)}"
        lines.append(
            f"{_clip(s.get('id'), 34):<34} {_clip(s.get('source'), 7):<7} {_ago(s.get('last_seen'), now):>10} "
            f"{_clip(state, 18):<18} {t.get('main', 0):>4} {t.get('side', 0):>4} {t.get('demonstration', 0):>4} "
            f"{s.get('judged', 0):>6} {s.get('judge_failures', 0):>4} {sm.get('pending', 0):>4} "
            f"{sm.get('in_batch', 0):>5} {sm.get('trained', 0):>5} {signs:>9} {_mean(r.get('mean')):>5} "
            f"{s.get('feedback', 0):>3}")
    return "\n".join(lines)


def format_session_detail(detail: dict, now: float | None = None) -> str:
    """One session of `ConversationStore.session_detail()` / `GET /v1/sessions/{id}`: its counts, then its turns."""
    import time
    from datetime import datetime

    now = time.time() if now is None else now

    def when(ts) -> str:
        return "-" if ts is None else f"{datetime.fromtimestamp(ts).isoformat(sep=' ', timespec='seconds')} " \
                                      f"({_ago(ts, now)})"

    t, sm, r = detail.get("turns", {}), detail.get("samples", {}), detail.get("rewards", {})
    rows = [
        ("session", detail.get("id")),
        ("source", detail.get("source") or "-"),
        ("created", when(detail.get("created"))),
        ("last seen", when(detail.get("last_seen"))),
        ("state", "active" if detail.get("active") else
         f"finalized {when(detail.get('finalized'))}, {detail.get('finalize_reason') or '?'}"),
        ("turns", f"{t.get('main', 0)} main, {t.get('side', 0)} side, {t.get('demonstration', 0)} demonstration; "
                  + ", ".join(f"{k} {v}" for k, v in sorted(t.get("by_status", {}).items()))),
        ("judged", f"{detail.get('judged', 0)} ({detail.get('judge_failures', 0)} failed)"),
        ("samples", f"{sm.get('pending', 0)} pending, {sm.get('in_batch', 0)} in batch, "
                    f"{sm.get('trained', 0)} trained"),
        ("rewards", f"-1: {r.get('-1', 0)}  0: {r.get('0', 0)}  +1: {r.get('1', 0)}  mean: {_mean(r.get('mean'))}"),
        ("feedback", detail.get("feedback", 0)),
    ]
    lines = [f"{label:<10} {value}" for label, value in rows]
    turns = detail.get("turn_rows", [])
    if turns:
        lines.append("")
        lines.append(f"{'#':>4} {'TYPE':<5} {'REASON':<20} {'STATUS':<28} {'SCORE':>5} {'SAMPLE':<8} {'REWARD':>6} "
                     f"{'PROMPT':>6} {'RESP':>5} {'VERSION':<8} RESPONSE")
        for row in turns:
            status = row.get("status") or "-"
            if row.get("exclusion_reason"):
                status += f": {row['exclusion_reason']}"
            score = row.get("score")
            score = "-" if score is None else ("fail" if row.get("judge_failed") else _signed(score))
            reward = "-" if row.get("reward") is None else _signed(row["reward"])
            preview = row.get("response_preview") or ""
            if not preview and row.get("tool_calls"):
                preview = "[tool calls: " + ", ".join(str(n) for n in row["tool_calls"]) + "]"
            kind = "demo" if row.get("type") == "demonstration" else row.get("type")
            lines.append(
                f"{row.get('turn_num', 0):>4} {_clip(kind, 5):<5} "
                f"{_clip(row.get('reason'), 20):<20} {_clip(status, 28):<28} {score:>5} "
                f"{_clip(row.get('sample_state'), 8):<8} {reward:>6} "
                f"{row.get('prompt_tokens', 0):>6} {row.get('response_tokens', 0):>5} "
                f"{_clip(row.get('weight_version'), 8):<8} {_clip(preview, 60)}")
    feedback = detail.get("feedback_rows", [])
    if feedback:
        lines.append("")
        for fb in feedback:
            where = "the session" if fb.get("turn_num") is None else f"turn {fb['turn_num']}"
            rating = "" if fb.get("rating") is None else f"rating {_signed(fb['rating'])} "
            lines.append(f"feedback on {where}: {rating}{_clip(fb.get('text'), 80)}")
    return "\n".join(lines)


def _cmd_sessions(args) -> int:
    if args.store and args.url:
        raise CliError(f"{args.command} takes one of --store PATH or --url URL, not both")
    if args.limit < 1 or args.offset < 0:
        raise CliError("--limit must be >= 1 and --offset >= 0")
    if args.store:
        store = _open_store(args.store)
        try:
            if args.session is not None:
                data = store.session_detail(args.session)
                if data is None:
                    raise CliError(f"no session {args.session!r} in {args.store}")
            else:
                data = store.session_summaries(args.limit, args.offset, args.active)
        finally:
            store.close()
    else:
        from urllib.parse import quote

        url = args.url or DEFAULT_PROXY_URL
        api_key = args.api_key or os.environ.get("OPENCLAW_PROXY_API_KEY")
        if args.session is not None:
            data = _fetch_json(url, "/v1/sessions/" + quote(args.session, safe=""), api_key)
        else:
            params = {"limit": args.limit, "offset": args.offset}
            if args.active:
                params["active"] = 1
            data = _fetch_json(url, "/v1/sessions", api_key, params)
    if args.json:
        text = json.dumps(data, indent=2, ensure_ascii=False)
    else:
        text = format_session_detail(data) if args.session is not None else format_sessions(data)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _collect_loop(args, collect_once) -> int:
    """Run `collect_once() -> (path, count)` once, or every `--follow` seconds until Ctrl-C; the samples collected."""
    total = 0
    try:
        while True:
            path, n = collect_once()
            total += n
            if n:
                print(f"{n} samples -> {path}", flush=True)
            if not args.follow:
                return total
            time.sleep(args.follow)
    except KeyboardInterrupt:
        return total


def _collect_over_http(args) -> int:
    from slime.conversation.rollout_dir import HttpCollector

    collector = HttpCollector(args.api_endpoint, args.api_key or os.environ.get("OPENCLAW_PROXY_API_KEY"),
                              args.lease_ttl)
    try:
        total = _collect_loop(args, lambda: collector.collect_once(args.output_dir, limit=args.limit,
                                                                   session_aware=args.session_aware))
    except RuntimeError as exc:
        raise CliError(str(exc)) from None
    finally:
        collector.close()
    print(f"collected {total} samples from {args.api_endpoint} into {args.output_dir}", file=sys.stderr)
    return 0


def _cmd_collect(args) -> int:
    from slime.conversation.lease import TrainerLease
    from slime.conversation.rollout_dir import collect_once
    from slime.conversation.store_backends import is_postgres

    if bool(args.store) == bool(args.api_endpoint):
        raise CliError("collect needs exactly one of --store (a file or postgresql:// URL) or --api-endpoint URL")
    if args.api_endpoint:
        return _collect_over_http(args)
    store = _open_store(args.store)
    try:
        lease = TrainerLease(store, args.lease_ttl, role="collect")
        try:
            lease.acquire()
        except RuntimeError as exc:
            raise CliError(str(exc)) from None
        # claimed by a consumer that died before finishing them (only the lease holder claims): hand them back
        store.release_untrained()
        try:
            total = _collect_loop(args, lambda: collect_once(store, lease, args.output_dir, limit=args.limit,
                                                             session_aware=args.session_aware))
        finally:
            lease.release()
        where = args.store if not is_postgres(args.store) else "the store"
        print(f"collected {total} samples from {where} into {args.output_dir}", file=sys.stderr)
    finally:
        store.close()
    return 0


def _cmd_train(args, extra: list[str]) -> int:
    """The trainer on a rollout directory: `slime/train_async.py` with the rollout-directory data source."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    cmd = [sys.executable, os.path.join(repo, "slime", "train_async.py"), "--hf-checkpoint", args.model_path,
           "--disable-rollout-global-dataset",
           "--data-source-path", "slime.conversation.rollout_dir.RolloutDirDataSource",
           "--rollout-function-path", "slime.conversation.rollout.generate_rollout",
           "--rollout-dir", args.rollout_dir, "--conversation-method", args.method,
           "--num-rollout", str(args.num_rollout), "--rollout-batch-size", str(args.batch_size),
           "--n-samples-per-prompt", "1", "--reward-key", "score", "--lr", str(args.lr),
           "--run-dir", os.path.join(args.checkpoint_dir, "run"), "--save", args.checkpoint_dir,
           "--save-interval", str(args.save_interval)]
    if os.path.isfile(os.path.join(args.checkpoint_dir, "latest_checkpointed_iteration.txt")) and "--load" not in extra:
        cmd += ["--load", args.checkpoint_dir]  # a second run continues the policy the first one trained
    if args.engine_url:
        cmd += ["--rollout-external-engine-addrs", args.engine_url]
    cmd += extra
    if args.gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(sys.executable, cmd)
    return 0  # not reached


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

    oc = sub.add_parser("openclaw-config", help="print or write the openclaw.json that points OpenClaw here")
    oc.add_argument("--url", default="http://127.0.0.1:30000", help="base URL of the running server")
    oc.add_argument("--api-key", help="the server's API key (default $OPENCLAW_PROXY_API_KEY)")
    oc.add_argument("--profile", choices=("auto", "lean", "full"), default="auto",
                    help="lean: OpenClaw's small-model settings (short prompt); auto: lean below a 16k context")
    oc.add_argument("--context-window", type=int, help="default: the server's context length")
    oc.add_argument("--max-tokens", type=int, default=512, help="max_completion_tokens of every request")
    oc.add_argument("--plugin", action="store_true",
                    help="use the rl-training-headers plugin (extensions/rl-training-headers; install it first)")
    oc.add_argument("--write", metavar="PATH", help="write the file (e.g. ~/.openclaw/openclaw.json)")
    oc.add_argument("--force", action="store_true", help="replace an existing file")
    oc.set_defaults(func=_cmd_openclaw_config)

    sessions = sub.add_parser("sessions", aliases=["inspect_sessions"],
                              help="per-session counts (one line each), or one session turn by turn")
    sessions.add_argument("--url", help=f"base URL of a running proxy (default {DEFAULT_PROXY_URL} without --store)")
    sessions.add_argument("--store", help="path of the store file (SQLite) instead of a running proxy")
    sessions.add_argument("--api-key", help="API key of the proxy (default $OPENCLAW_PROXY_API_KEY)")
    sessions.add_argument("--session", metavar="ID", help="show this session: its counts and a row per turn")
    sessions.add_argument("--limit", type=int, default=50, help="sessions per page (default 50, at most 1000 "
                                                                "from a proxy)")
    sessions.add_argument("--offset", type=int, default=0, help="skip this many sessions (most recent first)")
    sessions.add_argument("--active", action="store_true", help="only sessions not yet finalized")
    sessions.add_argument("--json", action="store_true", help="print the raw JSON instead of a table")
    sessions.set_defaults(func=_cmd_sessions)

    sub.add_parser("serve-model", help="engine + proxy on their own, recording into a store a trainer attaches to "
                   "(arguments: see `serve-model --help`)", add_help=False)
    col = sub.add_parser("collect", aliases=["collect_rollouts"],
                         help="move judged samples from a store into a rollout directory (for train --rollout-dir)")
    col.add_argument("--store", help="SQLite file or postgresql:// URL (read directly)")
    col.add_argument("--api-endpoint", help="or the serving host's URL (http://host:port): collect over its API")
    col.add_argument("--api-key", help="with --api-endpoint: the server's key (default $OPENCLAW_PROXY_API_KEY)")
    col.add_argument("--output-dir", required=True, help="the rollout directory (shared with the trainer's host)")
    col.add_argument("--session-aware", action="store_true",
                     help="only samples of sessions that ended, so a session's turns leave together")
    col.add_argument("--limit", type=int, default=None, help="at most this many samples per file")
    col.add_argument("--follow", type=float, default=None, metavar="SECONDS",
                     help="keep collecting every SECONDS until Ctrl-C")
    col.add_argument("--lease-ttl", type=float, default=60.0, help="see the trainer's --trainer-lease-ttl")
    col.set_defaults(func=_cmd_collect)

    tr = sub.add_parser("train", help="train from a rollout directory (slime/train_async.py; extra flags pass through)")
    tr.add_argument("--rollout-dir", required=True)
    tr.add_argument("--checkpoint-dir", required=True, help="checkpoints (--save) and the run's logs (run/)")
    tr.add_argument("--method", default="combine", help="a registry name or module:factory (default combine)")
    tr.add_argument("--model-path", default="smollm2", help="the policy's starting weights (default smollm2)")
    tr.add_argument("--engine-url", default=None,
                    help="push each trained version to this engine (the serving host's); default: a local engine")
    tr.add_argument("--gpus", default=None, help="CUDA_VISIBLE_DEVICES for the trainer")
    tr.add_argument("--batch-size", type=int, default=8, help="samples per step (--rollout-batch-size)")
    tr.add_argument("--num-rollout", type=int, default=100000000, help="steps before it stops")
    tr.add_argument("--lr", type=float, default=1e-5)
    tr.add_argument("--save-interval", type=int, default=10)
    tr.set_defaults(func=_cmd_train, passthrough=True)

    # listed for --help only: main() hands `serve` and everything after it to the proxy untouched
    sub.add_parser("serve", help="run the OpenAI-compatible proxy (arguments: see `serve --help`)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("serve-model", "serve_model"):
        from slime.conversation.serve_model import main as serve_model_main  # engine + proxy, no trainer

        return serve_model_main(argv[1:]) or 0
    if argv and argv[0] == "serve":
        from slime.conversation.proxy import main as proxy_main  # heavy imports only when serving

        return proxy_main(argv[1:]) or 0
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args, extra) if getattr(args, "passthrough", False) else args.func(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
