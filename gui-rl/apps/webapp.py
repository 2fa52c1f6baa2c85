"""Webapp: a tiny local web app server (stdlib only) for chromium tasks.

    python webapp.py [--port 8000] [--state-dir ~/webapp]     # serve until killed
    python webapp.py --wait [--port 8000] [--timeout 30]       # exit 0 once a server answers on the port

It listens on 127.0.0.1 only (inside a desktop's sandbox, loopback is its own). Routes:

* ``GET /<page>.html`` (and .css, .js): the pages in ``web/`` beside this file;
* ``GET /api/<name>``: the JSON stored in ``<state-dir>/<name>.json`` (``null`` when there is none);
* ``POST /api/<name>``: a JSON body, stored as ``<state-dir>/<name>.json`` (written whole, then renamed into place).

A task's config uploads a page's starting state (``~/webapp/<name>.json``), launches this server, waits for it
(``--wait``), then opens the page in chromium's app mode; the evaluator reads the state file back.
"""

import argparse
import json
import os
import re
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WEB = Path(__file__).resolve().parent / "web"
TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css", ".js": "application/javascript"}
NAME = re.compile(r"^[a-z0-9_-]{1,40}$")


def make_handler(state_dir: Path):
    class Handler(BaseHTTPRequestHandler):
        server_version = "webapp/1"

        def log_message(self, fmt, *args):
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _api_name(self) -> str | None:
            m = re.match(r"^/api/([^/?#]+)", self.path)
            return m.group(1) if m and NAME.match(m.group(1)) else None

        def do_GET(self):
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path.startswith("/api/"):
                name = self._api_name()
                if name is None:
                    return self._send(404, b'{"error": "no such state"}', "application/json")
                file = state_dir / f"{name}.json"
                body = file.read_bytes() if file.is_file() else b"null"
                return self._send(200, body, "application/json")
            name = path.lstrip("/") or "index.html"
            file = WEB / name
            if "/" in name or not file.is_file() or file.suffix not in TYPES:
                return self._send(404, b"not found", "text/plain")
            self._send(200, file.read_bytes(), TYPES[file.suffix])

        def do_POST(self):
            name = self._api_name()
            if name is None:
                return self._send(404, b'{"error": "no such state"}', "application/json")
            try:
                data = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
            except ValueError:
                return self._send(400, b'{"error": "the body is not JSON"}', "application/json")
            state_dir.mkdir(parents=True, exist_ok=True)
            tmp = state_dir / f".{name}.json.tmp"
            tmp.write_text(json.dumps(data, indent=2) + "\n")
            os.replace(tmp, state_dir / f"{name}.json")
            self._send(200, b'{"ok": true}', "application/json")

    return Handler


def wait(port: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/ping", timeout=2):
                return 0
        except OSError:
            time.sleep(0.1)
    print(f"no server on port {port} within {timeout:g} s", file=sys.stderr)
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description="a tiny local web app server")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--state-dir", default="~/webapp")
    parser.add_argument("--wait", action="store_true", help="only wait until a server answers, then exit")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    if args.wait:
        return wait(args.port, args.timeout)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(Path(args.state_dir).expanduser()))
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
