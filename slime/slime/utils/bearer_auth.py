"""`Authorization: Bearer KEY` for our HTTP servers (engine, proxy, environment service), as plain ASGI middleware.

Kept free of heavy imports: the environment service's pool servers use it without loading torch.
"""

from __future__ import annotations

import secrets

from starlette.responses import JSONResponse


def openai_error_body(message: str) -> dict:
    return {"error": {"message": message, "type": "authentication_error", "param": None, "code": 401}}


class BearerAuth:
    """Require `Authorization: Bearer KEY` on every path but liveness.

    A plain ASGI middleware rather than `@app.middleware("http")`: the latter wraps the request body
    stream in a way that hides client disconnects from handlers, and the engine needs to see them to
    free the batch slots of abandoned requests.
    """

    def __init__(self, app, key: str, open_paths: frozenset[str] | set[str] = frozenset({"/health"}),
                 error_body=None):
        self.app = app
        self.expected = f"Bearer {key}".encode()
        self.open_paths = open_paths
        # the 401's JSON body for a message (default: OpenAI's error shape); other services keep their own shape
        self.error_body = error_body or openai_error_body

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in self.open_paths:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
                body = self.error_body("missing or wrong API key (Authorization: Bearer ...)")
                await JSONResponse(body, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)
