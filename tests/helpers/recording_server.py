"""A real HTTP server on 127.0.0.1 that records every request and answers from a per-path table.

For engine APIs we cannot run here (vLLM, SGLang's GPU-only routes): tests check what the client sends and how
it reads the documented answers. `answers[path]` is a (status, JSON-able body or str) pair, or a function of the
parsed request body returning one; unknown paths answer 404. An answer of `DROP` closes the connection without a
response (what a client sees when an engine drops a keep-alive connection or dies mid-request).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DROP = "<drop the connection>"


class RecordingServer:
    def __init__(self, answers: dict):
        self.answers = answers
        self.requests: list[tuple[str, str, object]] = []  # (method, path with query, parsed body)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with server._lock:
                    server.requests.append((self.command, self.path, body))
                answer = server.answers.get(self.path.split("?")[0], (404, {"detail": "Not Found"}))
                answer = answer(body) if callable(answer) else answer
                if answer == DROP:
                    self.close_connection = True
                    return
                status, payload = answer
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "text/plain" if isinstance(payload, str) else "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.requests]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
