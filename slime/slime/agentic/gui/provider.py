"""The environment service's `gui` provider: upstream's GUI pool server (reset / step / evaluate / close of an OSWorld
desktop) on the pool server's lease contract.

    python -m slime.agentic.env_service.pool_server --provider gui \
        [--provider-option tasks_dir=gui-rl/tasks] [--provider-option apps_dir=gui-rl/apps]
        [--provider-option width=1280 --provider-option height=720]
        [--provider-option desktop=osworld --provider-option vm_url=http://VM:5000]   # written, not run here
        [--provider-option file_cache=DIR] [--provider-option client_password=password]   # OSWorld's tasks
        [--provider-option terminal_shortcut=1]   # Ctrl+Alt+T opens a terminal, as on OSWorld's image (off: no shell)

* `reset` (``task_meta = {"task": "domain/id"}``; else the lease's task key): a fresh local desktop
  (:class:`.desktop.LocalDesktop`: its own sandbox, Xvfb and scratch home, so a reset restores everything), the
  task's config steps run through the VM server as OSWorld runs them (:mod:`.setup_controller`; downloads from the
  `file_cache` directory, laid out as OSWorld's cache), then the first observation. A task with a step, getter or
  metric not implemented here is refused (422 ``UNSUPPORTED_TASK``, the reasons listed).
* tool `computer_use` (the policy's action, :mod:`.actions`): run as pyautogui code on the desktop with a step
  timeout (a hung command is killed with what it started), then ``sleep_after_s`` for the screen to settle, then
  the observation. ``wait`` sleeps, ``terminate`` records DONE or FAIL and ends the episode (later actions: 409).
  An action that cannot run (a malformed call) is an error observation (no new screen: nothing ran), not an
  episode end. An error result has ``"error": true`` and ``"error_code"``: ``REFUSED`` (nothing ran) or
  ``ACTION_FAILED`` (it ran and failed).
* tool `observe`: the observation again, no action.
* observation: ``{screenshot_b64 (PNG, full size), screen: [w, h], text_view (the OCR text, 0-999 coordinates)}``;
  `observation=screenshot|text|both` (default both) chooses what is sent.
* `evaluate`: the task's evaluator (:func:`.tasks.evaluate`) with the episode's last special action; ``score`` +1
  when OSWorld's score is 1 else -1, ``acc`` the score itself, and why. An infeasible task is solved only by an
  explicit ``terminate(failure)``; a truncated episode is not a FAIL.
* `close`: the desktop's sandbox ends (every process of its uid) and its home is removed.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic.env_service.providers import LeaseContext, LeaseReaper, ProviderError, budget_reply

from .actions import ACTION_FAILED, COMPUTER_USE, REFUSED, ActionError, program, to_step
from .desktop import APPS_DIR, LocalDesktop, OSWorldVM
from .observation import b64, text_view
from .evaluators import EvaluationError
from .file_cache import FileCache
from .setup_controller import DEFAULT_CLIENT_PASSWORD, DesktopFacts, new_cache_dir
from .tasks import TASKS_DIR, GuiTask, SetupError, TaskFormatError, evaluate, find_task, run_setup
from .vm_client import VMError

OBSERVATIONS = ("screenshot", "text", "both")
OBSERVE = {"type": "function", "function": {"name": "observe", "description": "The screen again, without acting.",
                                            "parameters": {"type": "object", "properties": {}}}}


@dataclass
class GuiEnv:
    task: GuiTask
    desktop: LocalDesktop | OSWorldVM
    screen: tuple[int, int]
    last_special: str | None = None  # DONE or FAIL once the agent terminated
    steps: int = 0
    evaluated: bool = False
    timings: dict = field(default_factory=lambda: {"actions": 0.0, "observations": 0.0})
    over_budget: str = ""  # the whole-sandbox budget the desktop went over (the episode is then over: -1)
    cache_dir: Path | None = None  # the episode's own directory: setup outputs, files the getters fetch


class GuiProvider:
    name = "gui"

    def __init__(self, tasks_dir: str | os.PathLike | None = None, width: int = 1280, height: int = 720,
                 step_timeout_s: float = 30.0, sleep_after_s: float = 0.5, observation: str = "both",
                 settle_s: float = 0.5, window_manager: str | None = None, desktop: str = "local",
                 vm_url: str | None = None, apps_dir: str | os.PathLike | None = None,
                 file_cache: str | os.PathLike | None = None, client_password: str = DEFAULT_CLIENT_PASSWORD,
                 terminal_shortcut: bool | str | None = None):
        self.tasks_dir = Path(tasks_dir or os.environ.get("GUI_TASKS_DIR") or TASKS_DIR).resolve()
        if not self.tasks_dir.is_dir():
            raise ValueError(f"gui provider: tasks_dir {self.tasks_dir} is not a directory")
        # the apps the desktops mount (read-only, at the same inner path): a method folder's own (a fork's apps)
        self.apps_dir = Path(apps_dir or os.environ.get("GUI_APPS_DIR") or APPS_DIR).resolve()
        if not self.apps_dir.is_dir():
            raise ValueError(f"gui provider: apps_dir {self.apps_dir} is not a directory")
        if observation not in OBSERVATIONS:
            raise ValueError(f"gui provider: observation must be one of {', '.join(OBSERVATIONS)}")
        self.width, self.height = int(width), int(height)
        self.step_timeout_s, self.sleep_after_s = float(step_timeout_s), float(sleep_after_s)
        self.settle_s = float(settle_s)
        self.observation = observation
        self.window_manager = window_manager or None
        if desktop not in ("local", "osworld"):
            raise ValueError("gui provider: desktop must be local or osworld")
        if desktop == "osworld" and not vm_url:
            raise ValueError("gui provider: desktop=osworld needs vm_url (http://<vm ip>:5000)")
        self.desktop, self.vm_url = desktop, vm_url
        cache = file_cache or os.environ.get("GUI_FILE_CACHE")
        self.file_cache = FileCache(cache) if cache else None  # OSWorld's downloads, filled by the user
        self.client_password = str(client_password)
        # a terminal gives the agent a shell in the desktop (not on the host): on for OSWorld's tasks, which use one;
        # off by default, so the shipped tasks keep "actions only" (README, What the grader guarantees)
        if terminal_shortcut is None:
            terminal_shortcut = os.environ.get("GUI_TERMINAL_SHORTCUT", "0")
        self.terminal_shortcut = str(terminal_shortcut).strip().lower() in ("1", "true", "yes", "on")
        self._reaper = LeaseReaper("gui", docker=False)

    def task_for(self, lease: LeaseContext, task_meta) -> GuiTask:
        if not isinstance(task_meta, dict):
            raise ProviderError(400, "task_meta must be an object with task ('domain/id')")
        key = task_meta.get("task") or task_meta.get("example_id") or lease.task_key
        if isinstance(key, str) and task_meta.get("domain") and "/" not in key:
            key = f"{task_meta['domain']}/{key}"
        try:
            return find_task(str(key), self.tasks_dir)
        except KeyError as e:
            raise ProviderError(404, str(e).strip("'\""), code="UNKNOWN_TASK") from None
        except TaskFormatError as e:
            raise ProviderError(422, str(e), code="BAD_TASK") from None

    async def reset(self, lease: LeaseContext, request: dict) -> tuple[GuiEnv, dict]:
        task = self.task_for(lease, request.get("task_meta") or {})
        if task.unsupported:
            raise ProviderError(422, f"task {task.key} cannot run here: {'; '.join(task.unsupported)}",
                                code="UNSUPPORTED_TASK")
        desktop = self.new_desktop(lease)
        cache_dir = new_cache_dir(lease.workdir)
        try:
            await desktop.start()
            screen = await desktop.client.screen_size()
            await run_setup(desktop.client, task.config, task_dir=task.path.parent if task.path else None,
                            task_id=task.id, file_cache=self.file_cache, cache_dir=cache_dir,
                            facts=DesktopFacts(*screen, self.client_password))
            await asyncio.sleep(self.settle_s)
            env = GuiEnv(task, desktop, screen, cache_dir=cache_dir)
            observation = await self.observe(env)
        except (SetupError, VMError) as e:
            await desktop.aclose()
            raise ProviderError(422, f"task {task.key}: {e}", code="SETUP_FAILED") from None
        except BaseException:
            await desktop.aclose()
            raise
        return env, {"task": task.key, "instruction": task.instruction, "user_msg": task.instruction,
                     "tool_schemas": [COMPUTER_USE, OBSERVE], **observation}

    def new_desktop(self, lease: LeaseContext):
        """A fresh local desktop per reset; or the OSWorld VM at `vm_url` (not run here: restoring its state is the
        cloud provider's snapshot revert, which a reset of this provider does not do)."""
        if self.desktop == "osworld":
            return OSWorldVM(self.vm_url)
        return LocalDesktop(base_dir=lease.workdir, width=self.width, height=self.height,
                            window_manager=self.window_manager, apps_dir=self.apps_dir,
                            terminal_shortcut=self.terminal_shortcut, client_password=self.client_password)

    async def observe(self, env: GuiEnv) -> dict:
        start = time.monotonic()
        client, out = env.desktop.client, {"screen": list(env.screen)}
        if self.observation in ("screenshot", "both"):
            out["screenshot_b64"] = b64(await client.screenshot())
        if self.observation in ("text", "both"):
            out["text_view"] = text_view(await client.accessibility(), env.screen)
        env.timings["observations"] += time.monotonic() - start
        return out

    async def exec_tool(self, env: GuiEnv, tool_call: dict) -> dict:
        if env.evaluated or env.last_special in ("DONE", "FAIL"):
            raise ProviderError(409, "the episode has ended: reset the lease to start another", code="EPISODE_ENDED")
        name, arguments = tool_call.get("name"), tool_call.get("arguments") or {}
        if name == "observe":
            return {"observation": "", **await self.observe(env)}
        if name != "computer_use":
            return _refused(f"unknown tool {name!r} (tools: computer_use, observe)")
        if not isinstance(arguments, dict):
            return _refused("computer_use: arguments must be an object")
        try:
            step = to_step(arguments, env.screen)
        except ActionError as e:  # nothing ran, the screen is as the last observation showed it
            return _refused(f"computer_use: {e}")
        env.steps += 1
        if step.special in ("DONE", "FAIL"):
            env.last_special = step.special
            return {"observation": step.special, "done": True, "status": step.special}
        start = time.monotonic()
        text = ""
        if step.special == "WAIT":
            await asyncio.sleep(step.wait_s)
        else:
            try:
                result = await env.desktop.client.execute(["python3", "-c", program(step.code)],
                                                          timeout=self.step_timeout_s)
                if result.get("returncode"):
                    text = f"[ACTION_ERROR] exit {result['returncode']}: {(result.get('error') or '')[-500:]}"
            except VMError as e:  # timed out (killed with what it started) or the desktop failed
                text = f"[ACTION_ERROR] {e}"
            await asyncio.sleep(self.sleep_after_s)
        env.timings["actions"] += time.monotonic() - start
        env.over_budget = _budget_exceeded(env)
        if env.over_budget:  # the desktop went over a budget: the episode ends here, scored -1
            return {**budget_reply(text, env.over_budget), "done": True, "status": "BUDGET"}
        failed = {"error": True, "error_code": ACTION_FAILED} if text else {"error": False}
        return {"observation": text, "done": False, **failed, **await self.observe(env)}

    async def evaluate(self, env: GuiEnv, request: dict) -> dict:
        env.evaluated = True
        env.over_budget = env.over_budget or _budget_exceeded(env)
        if env.over_budget:
            return {"score": -1.0, "acc": 0.0, "reason": f"the desktop {env.over_budget}", "steps": env.steps,
                    "budget_exceeded": env.over_budget}
        try:
            result = await evaluate(env.desktop.client, env.task, env.last_special, file_cache=self.file_cache,
                                    cache_dir=env.cache_dir)
        except (SetupError, VMError, EvaluationError) as e:
            return {"score": -1.0, "acc": 0.0, "reason": f"the evaluation failed: {e}", "steps": env.steps}
        return {"score": 1.0 if result.score == 1.0 else -1.0, "acc": result.score, "reason": result.reason,
                "parts": list(result.parts), "last_action": env.last_special, "steps": env.steps,
                "timings": {k: round(v, 3) for k, v in env.timings.items()}}

    async def close(self, env: GuiEnv) -> None:
        await env.desktop.aclose()

    def resources(self, env: GuiEnv) -> dict:
        return env.desktop.resources()

    def reap(self, resources: dict) -> None:
        self._reaper(resources)


def _budget_exceeded(env: GuiEnv) -> str:
    """Which whole-sandbox budget the local desktop's sandbox went over ("" for none, or for an OSWorld VM)."""
    box = getattr(env.desktop, "box", None)
    return box.budget_exceeded() if box is not None else ""


def _refused(message: str) -> dict:
    """The result of a call that cannot run (no new observation: nothing ran)."""
    return {"observation": f"[TOOL_ERROR] {message}", "error": True, "error_code": REFUSED}


__all__ = ["GuiEnv", "GuiProvider"]
