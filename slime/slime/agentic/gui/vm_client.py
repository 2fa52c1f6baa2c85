"""An async client of OSWorld's VM server contract (:mod:`.vm_server` lists the routes): the same calls drive a
local desktop (its server on a unix socket) and an OSWorld VM on a cluster (``http://<vm ip>:5000``)."""

from __future__ import annotations

import httpx


class VMError(RuntimeError):
    """The VM server answered with an error status (or not at all); `status` is the HTTP status, 0 for none."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class VMClient:
    def __init__(self, base_url: str = "http://vm", *, uds: str | None = None, timeout: float = 150.0):
        transport = httpx.AsyncHTTPTransport(uds=uds) if uds else None
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.base_url, transport=transport,
                                      timeout=httpx.Timeout(timeout, connect=10.0))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            reply = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise VMError(f"{method} {path}: no answer from the VM server: {e!r}") from None
        if reply.status_code >= 400:
            try:
                body = reply.json()
                message = body.get("message") or body.get("error") or reply.text
            except ValueError:
                message = reply.text
            raise VMError(f"{method} {path}: {reply.status_code}: {str(message)[-2000:]}", reply.status_code)
        return reply

    # -- observation

    async def healthz(self) -> bool:
        try:
            return (await self.http.get("/healthz", timeout=5.0)).status_code == 200
        except httpx.HTTPError:
            return False

    async def screenshot(self) -> bytes:
        return (await self._call("GET", "/screenshot")).content

    async def accessibility(self) -> str:
        return (await self._call("GET", "/accessibility")).json().get("AT") or ""

    async def screen_size(self) -> tuple[int, int]:
        size = (await self._call("POST", "/screen_size")).json()
        return int(size["width"]), int(size["height"])

    async def cursor_position(self) -> tuple[int, int]:
        x, y = (await self._call("GET", "/cursor_position")).json()
        return int(x), int(y)

    # -- commands

    async def execute(self, command: list[str] | str, *, shell: bool = False, timeout: float | None = None) -> dict:
        """``{status, output, error, returncode}``; VMError when it failed to run or timed out (the server kills it)."""
        body = {"command": command, "shell": shell}
        if timeout is not None:
            body["timeout"] = timeout
        return (await self._call("POST", "/execute", json=body)).json()

    async def launch(self, command: list[str] | str, *, shell: bool = False) -> None:
        await self._call("POST", "/setup/launch", json={"command": command, "shell": shell})

    # -- files and windows

    async def get_file(self, path: str) -> bytes | None:
        try:
            return (await self._call("POST", "/file", data={"file_path": path})).content
        except VMError as e:
            if e.status == 404:
                return None
            raise

    async def upload(self, path: str, data: bytes) -> None:
        await self._call("POST", "/setup/upload", data={"file_path": path}, files={"file_data": ("file", data)})

    async def list_directory(self, path: str) -> dict:
        return (await self._call("POST", "/list_directory", json={"path": path})).json()["directory_tree"]

    async def open_file(self, path: str, *, window_name: str | None = None, timeout_seconds: float = 30) -> None:
        body = {"path": path, "timeout_seconds": timeout_seconds}
        if window_name:
            body["window_name"] = window_name
        await self._call("POST", "/setup/open_file", json=body)

    async def activate_window(self, window_name: str, *, strict: bool = False, by_class: bool = False) -> None:
        await self._call("POST", "/setup/activate_window",
                         json={"window_name": window_name, "strict": strict, "by_class": by_class})

    async def close_window(self, window_name: str, *, strict: bool = False, by_class: bool = False) -> None:
        await self._call("POST", "/setup/close_window",
                         json={"window_name": window_name, "strict": strict, "by_class": by_class})


__all__ = ["VMClient", "VMError"]
