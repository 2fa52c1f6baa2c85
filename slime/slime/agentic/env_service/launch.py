"""Start the environment service as child processes (N pool servers, a router in front when N > 1), or attach
to one that runs elsewhere (`ENV_SERVER_URL`). Each server is its own process on a free loopback port, dies with
its parent, and is stopped by PID. The API key travels in the environment, never on a command line."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from dataclasses import replace
from pathlib import Path

from slime.agentic.env_service.settings import API_KEY_ENV, PoolSettings
from slime.engine.launch import ChildServer


class _EnvServiceProcess(ChildServer):
    ready_path = "/healthz"
    stop_grace = 45.0  # a pool server's graceful shutdown closes every lease (uvicorn allows 30 s, then teardown)

    def environment(self) -> dict:
        env = {**super().environment(), "PYTHONUNBUFFERED": "1"}
        env.pop(API_KEY_ENV, None)
        if self.api_key:
            env[API_KEY_ENV] = self.api_key
        return env


class PoolServerProcess(_EnvServiceProcess):
    """`with PoolServerProcess(settings) as pool: EnvClient(pool.url)`; the settings' port is replaced by a free
    one unless `port` is given."""

    name = "env pool server"

    def __init__(self, settings: PoolSettings, *, port: int | None = None, log_path: str | Path | None = None,
                 ready_timeout: float = 60.0, extra_args: list[str] | None = None):
        super().__init__(port=port, api_key=settings.api_key, log_path=log_path, ready_timeout=ready_timeout,
                         host=settings.host)
        self.settings = settings
        self.extra_args = list(extra_args or ())

    def command(self) -> list[str]:
        s = self.settings
        cmd = [sys.executable, "-m", "slime.agentic.env_service.pool_server", "--host", s.host, "--port",
               str(self.port), "--provider", s.provider, "--state-dir", s.state_dir, "--max-tasks", str(s.max_tasks),
               "--max-runs-per-task", str(s.max_runs_per_task), "--idle-ttl-s", str(s.idle_ttl_s),
               "--reap-interval-s", str(s.reap_interval_s), "--max-concurrent-closes", str(s.max_concurrent_closes),
               "--max-body-bytes", str(s.max_body_bytes), "--exec-timeout-s", str(s.exec_timeout_s),
               "--evaluate-timeout-s", str(s.evaluate_timeout_s), "--reset-timeout-s", str(s.reset_timeout_s),
               "--close-timeout-s", str(s.close_timeout_s), "--log-level", "warning"]
        for key, value in s.provider_options.items():
            cmd += ["--provider-option", f"{key}={value}"]
        return cmd + self.extra_args


class RouterProcess(_EnvServiceProcess):
    name = "env router"

    def __init__(self, workers: list[str], *, api_key: str | None = None, port: int | None = None,
                 log_path: str | Path | None = None, ready_timeout: float = 60.0, host: str = "127.0.0.1"):
        super().__init__(port=port, api_key=api_key, log_path=log_path, ready_timeout=ready_timeout, host=host)
        self.workers = list(workers)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "slime.agentic.env_service.router", "--workers", ",".join(self.workers),
                "--host", self.host, "--port", str(self.port), "--log-level", "warning"]


class EnvService:
    """`with EnvService(settings, workers=2) as service: EnvClient(service.url, service.api_key)`.

    With `url` (or `$ENV_SERVER_URL`) nothing is started: the service runs elsewhere and is only attached.
    Otherwise `workers` pool servers start, each with its own state directory `<state_dir>/pool<i>`, and with more
    than one a router in front of them; `url` is what a client talks to.
    """

    def __init__(self, settings: PoolSettings, *, workers: int = 1, url: str | None = None,
                 log_dir: str | Path | None = None):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.settings, self.workers = settings, workers
        self.attached_url = url if url is not None else (os.environ.get("ENV_SERVER_URL") or None)
        self.api_key = settings.api_key
        self.log_dir = Path(log_dir) if log_dir else Path(settings.state_dir)
        self.pools: list[PoolServerProcess] = []
        self.router: RouterProcess | None = None
        self.url: str | None = self.attached_url

    def start(self) -> EnvService:
        if self.attached_url:
            return self
        try:
            for i in range(self.workers):
                settings = replace(self.settings, state_dir=os.path.join(self.settings.state_dir, f"pool{i}"))
                pool = PoolServerProcess(settings, log_path=self.log_dir / f"pool{i}.log")
                self.pools.append(pool)
                pool.start()
            if self.workers > 1:
                self.router = RouterProcess([p.url for p in self.pools], api_key=self.api_key,
                                            log_path=self.log_dir / "router.log", host=self.settings.host)
                self.router.start()
                self.url = self.router.url
            else:
                self.url = self.pools[0].url
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.router is not None:
            self.router.stop()
        for pool in self.pools:
            pool.stop()

    def __enter__(self) -> EnvService:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_process_services: dict[str, EnvService] = {}
_process_services_lock = threading.Lock()  # rollout threads may ask at once: one service per provider per process


def rollout_service(args, provider: str, options: dict, default_run_dir: str) -> tuple[str, str | None]:
    """(URL, API key) of the environment service an agent's rollout talks to: `--env-server-url`, else
    `$ENV_SERVER_URL` (key `$ENV_SERVER_API_KEY`), else pool servers this process starts on first use
    (`--env-workers` of `--env-provider`, default `provider`, with the provider `options`; state under
    `<run dir>/env_service`) and stops at exit."""
    url = getattr(args, "env_server_url", None) or os.environ.get("ENV_SERVER_URL")
    if url:
        return url, os.environ.get("ENV_SERVER_API_KEY") or None
    name = getattr(args, "env_provider", None) or provider
    with _process_services_lock:
        service = _process_services.get(name)
        if service is None:
            run_dir = getattr(args, "run_dir", None) or default_run_dir
            settings = PoolSettings.from_env(provider=name, state_dir=os.path.join(run_dir, "env_service"),
                                             provider_options=options)
            service = EnvService(settings, workers=int(getattr(args, "env_workers", None) or 1)).start()
            atexit.register(service.stop)
            _process_services[name] = service
    return service.url, service.api_key
