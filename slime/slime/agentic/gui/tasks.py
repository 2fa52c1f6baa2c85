"""GUI tasks in OSWorld's JSON format, their setup steps, and their evaluation, all through the VM server's API (so a
task runs the same on a local desktop and on an OSWorld VM).

A task (``gui-rl/tasks/<domain>/<id>.json``)::

    {"id": "...", "snapshot": "...", "instruction": "...", "source": "...", "related_apps": [...],
     "config": [{"type": "launch", "parameters": {"command": [...]}}, ...],
     "evaluator": {"func": "exact_match", "result": {...}, "expected": {...}, "options": {}, "postconfig": [...],
                   "conj": "and"}}

Setup and postconfig step types (:func:`run_setup`): ``launch`` {command, shell}, ``execute`` / ``command``
{command, shell}, ``sleep`` {seconds}, ``open`` {path}, ``activate_window`` / ``close_window`` {window_name,
strict, by_class}, ``upload_file`` {files: [{content | local_path, path}]} (``content``: text written as is; a
``local_path`` is relative to the task's folder), ``wait_window`` {window_name, timeout} (ours: until a window of
that name shows).

Evaluation (:func:`evaluate`): ``func`` is one metric or a list (then ``result``, ``expected`` and ``options`` are
lists too and ``conj`` combines them: ``and`` = the mean, 0 when any is 0; ``or`` = the max). Getters of ``result``:
``vm_file`` {path} (the file's text, None when missing), ``vm_command_line`` {command, shell} (its stdout),
``vm_command_error`` (its stderr). ``expected``: ``rule`` {rules} (the rules are the metric's argument). Metrics:
``exact_match`` (result == rules.expected, after stripping when options.strip), ``check_include_exclude`` (every
rules.include in the result, no rules.exclude), ``check_json_settings`` (the result parsed as JSON holds every
key/value of rules.expected; dotted keys reach into objects), ``check_lines`` (the result's non-empty lines,
stripped, equal rules.expected), and ``infeasible``.

The FAIL semantics, without upstream's leak (spec section 7): an ``infeasible`` task scores 1 exactly when the agent
itself terminated with failure; a truncated episode (out of steps) or one that ended otherwise scores 0. On any other
task an explicit failure scores 0 and the metric is not run.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .vm_client import VMClient, VMError

TASKS_DIR = Path(__file__).resolve().parents[4] / "gui-rl" / "tasks"
SETUP_TYPES = ("launch", "execute", "command", "sleep", "open", "activate_window", "close_window", "upload_file",
               "wait_window")
METRICS = ("exact_match", "check_include_exclude", "check_json_settings", "check_lines", "infeasible")
GETTERS = ("vm_file", "vm_command_line", "vm_command_error")
FAILED_BY_AGENT = "FAIL"  # the last action when the agent terminated with status failure
MAX_SLEEP_S = 60.0


class TaskFormatError(ValueError):
    """A task file is not a valid task; the message names the file and the field."""


class SetupError(RuntimeError):
    """A setup step failed (the task cannot start as written)."""


@dataclass(frozen=True)
class GuiTask:
    id: str
    instruction: str
    config: tuple[dict, ...]
    evaluator: dict
    domain: str = ""
    snapshot: str = ""
    source: str = ""
    related_apps: tuple[str, ...] = ()
    path: Path | None = None
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        """``domain/id``: how rollouts and the provider name a task."""
        return f"{self.domain}/{self.id}" if self.domain else self.id

    @property
    def infeasible(self) -> bool:
        return _funcs(self.evaluator) == ["infeasible"]


def _funcs(evaluator: dict) -> list[str]:
    func = evaluator.get("func")
    return list(func) if isinstance(func, list) else [func]


def _check_steps(steps, where: str) -> tuple[dict, ...]:
    if not isinstance(steps, list):
        raise TaskFormatError(f"{where} must be a list of steps")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("type") not in SETUP_TYPES:
            raise TaskFormatError(f"{where}[{i}]: type must be one of {', '.join(SETUP_TYPES)}")
        if not isinstance(step.get("parameters", {}), dict):
            raise TaskFormatError(f"{where}[{i}]: parameters must be an object")
    return tuple(steps)


def task_from_dict(data: dict, *, domain: str = "", path: Path | None = None) -> GuiTask:
    where = str(path or "<task>")
    if not isinstance(data, dict):
        raise TaskFormatError(f"{where}: a task is a JSON object")
    for name in ("id", "instruction"):
        if not isinstance(data.get(name), str) or not data[name].strip():
            raise TaskFormatError(f"{where}: {name!r} must be a non-empty string")
    evaluator = data.get("evaluator")
    if not isinstance(evaluator, dict):
        raise TaskFormatError(f"{where}: 'evaluator' must be an object")
    _check_steps(evaluator.get("postconfig", []), f"{where}: evaluator.postconfig")
    funcs = _funcs(evaluator)
    unknown = [f for f in funcs if f not in METRICS]
    if unknown:
        raise TaskFormatError(f"{where}: evaluator.func {unknown[0]!r} is not one of {', '.join(METRICS)}")
    if funcs != ["infeasible"]:
        results = evaluator.get("result")
        results = results if isinstance(results, list) else [results]
        if len(results) != len(funcs):
            raise TaskFormatError(f"{where}: evaluator.result must give one getter per func")
        for r in results:
            if not isinstance(r, dict) or r.get("type") not in GETTERS:
                raise TaskFormatError(f"{where}: evaluator.result type must be one of {', '.join(GETTERS)}")
        if evaluator.get("conj", "and") not in ("and", "or"):
            raise TaskFormatError(f"{where}: evaluator.conj must be 'and' or 'or'")
    return GuiTask(
        id=data["id"], instruction=data["instruction"], config=_check_steps(data.get("config", []), "config"),
        evaluator=evaluator, domain=domain, snapshot=str(data.get("snapshot", "")), source=str(data.get("source", "")),
        related_apps=tuple(data.get("related_apps") or ()), path=path, raw=data)


def load_task(path: str | os.PathLike) -> GuiTask:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise TaskFormatError(f"{path}: {e}") from None
    return task_from_dict(data, domain=path.parent.name, path=path)


def load_tasks(root: str | os.PathLike = TASKS_DIR) -> list[GuiTask]:
    """Every ``<domain>/<id>.json`` under `root` (solutions, ``*.solution.json``, are not tasks), sorted by key."""
    tasks = [load_task(p) for p in sorted(Path(root).glob("*/*.json")) if not p.name.endswith(".solution.json")]
    return sorted(tasks, key=lambda t: t.key)


def find_task(key: str, root: str | os.PathLike = TASKS_DIR) -> GuiTask:
    """A task by ``domain/id`` (or a bare id when it is unique) under `root`; KeyError when there is none."""
    root = Path(root)
    if "/" in key:
        domain, _, task_id = key.partition("/")
        path = root / domain / f"{task_id}.json"
        if ".." in Path(key).parts or not path.is_file():
            raise KeyError(f"no task {key!r} under {root}")
        return load_task(path)
    found = [p for p in root.glob(f"*/{key}.json")]
    if len(found) != 1:
        raise KeyError(f"no task {key!r} under {root}" if not found else f"task id {key!r} is ambiguous: use domain/id")
    return load_task(found[0])


# ------------------------------------------------------------------------------------------------------ setup


async def run_setup(client: VMClient, steps: Sequence[dict], *, task_dir: Path | None = None) -> None:
    """Run setup (or postconfig) steps in order; SetupError names the step that failed."""
    for i, step in enumerate(steps):
        kind, p = step["type"], step.get("parameters", {})
        try:
            await _setup_step(client, kind, p, task_dir)
        except (VMError, OSError, ValueError, KeyError, TypeError) as e:
            raise SetupError(f"setup step {i} ({kind}) failed: {e}") from None


async def _setup_step(client: VMClient, kind: str, p: dict, task_dir: Path | None) -> None:
    if kind == "launch":
        await client.launch(p["command"], shell=bool(p.get("shell", False)))
    elif kind in ("execute", "command"):
        result = await client.execute(p["command"], shell=bool(p.get("shell", False)), timeout=p.get("timeout"))
        if p.get("check", True) and result.get("returncode") not in (0, None):
            raise SetupError(f"exit {result.get('returncode')}: {(result.get('error') or '')[-500:]}")
    elif kind == "sleep":
        await asyncio.sleep(min(float(p.get("seconds", 1)), MAX_SLEEP_S))
    elif kind == "open":
        await client.open_file(p["path"], window_name=p.get("window_name"),
                               timeout_seconds=float(p.get("timeout_seconds", 30)))
    elif kind == "activate_window":
        await client.activate_window(p["window_name"], strict=bool(p.get("strict")), by_class=bool(p.get("by_class")))
    elif kind == "close_window":
        await client.close_window(p["window_name"], strict=bool(p.get("strict")), by_class=bool(p.get("by_class")))
    elif kind == "upload_file":
        for f in p["files"]:
            if "content" in f:
                data = f["content"].encode("utf-8")
            else:
                local = Path(f["local_path"])
                if task_dir is None or local.is_absolute() or ".." in local.parts:
                    raise ValueError(f"local_path {f['local_path']!r} must be relative to the task's folder")
                data = (task_dir / local).read_bytes()
            await client.upload(f["path"], data)
    elif kind == "wait_window":
        await wait_window(client, p["window_name"], float(p.get("timeout", 30)))


async def wait_window(client: VMClient, name: str, timeout: float = 30.0) -> None:
    """Until a visible window whose name holds `name` exists (xdotool on the desktop); SetupError after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await client.execute(["xdotool", "search", "--onlyvisible", "--name", name], timeout=10)
        if result.get("output", "").strip():
            return
        if loop.time() > deadline:
            raise SetupError(f"no window named {name!r} within {timeout:g} s")
        await asyncio.sleep(0.2)


# ------------------------------------------------------------------------------------------------------ evaluation


async def get_result(client: VMClient, getter: dict) -> Any:
    kind = getter["type"]
    if kind == "vm_file":
        data = await client.get_file(getter["path"])
        return None if data is None else data.decode("utf-8", "replace")
    result = await client.execute(getter["command"], shell=bool(getter.get("shell", False)), timeout=getter.get("timeout"))
    return result.get("output" if kind == "vm_command_line" else "error", "")


def _lookup(data: Any, key: str) -> tuple[bool, Any]:
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return False, None
        data = data[part]
    return True, data


def metric(func: str, result: Any, rules: dict, options: dict | None = None) -> float:
    """One metric on a getter's result (None: the file or value is missing, which scores 0)."""
    options = options or {}
    if result is None:
        return 0.0
    if func == "exact_match":
        expected = rules.get("expected")
        if options.get("strip", True) and isinstance(result, str) and isinstance(expected, str):
            return float(result.strip() == expected.strip())
        return float(result == expected)
    if func == "check_include_exclude":
        text = str(result)
        include, exclude = rules.get("include", []), rules.get("exclude", [])
        return float(all(s in text for s in include) and not any(s in text for s in exclude))
    if func == "check_lines":
        lines = [line.strip() for line in str(result).splitlines() if line.strip()]
        return float(lines == list(rules.get("expected", [])))
    if func == "check_json_settings":
        try:
            data = json.loads(result) if isinstance(result, str) else result
        except json.JSONDecodeError:
            return 0.0
        for key, value in (rules.get("expected") or {}).items():
            found, got = _lookup(data, key)
            if not found or got != value:
                return 0.0
        return 1.0
    raise ValueError(f"unknown metric {func!r}")


@dataclass(frozen=True)
class Evaluation:
    score: float  # 0..1 (OSWorld's); the RL reward is +1 only for 1.0
    reason: str
    parts: tuple[float, ...] = ()


async def evaluate(client: VMClient, task: GuiTask, last_action: str | None) -> Evaluation:
    """Score the episode (module docstring): `last_action` is FAIL when the agent terminated with failure, DONE when
    it said it succeeded, None when it did neither (out of steps, an error)."""
    ev = task.evaluator
    if task.infeasible:
        if last_action == FAILED_BY_AGENT:
            return Evaluation(1.0, "infeasible: the agent said it cannot be done")
        return Evaluation(0.0, "infeasible: the agent did not say it cannot be done"
                          + (" (the episode was cut off)" if last_action is None else ""))
    if last_action == FAILED_BY_AGENT:
        return Evaluation(0.0, "the agent gave up on a feasible task")
    await run_setup(client, ev.get("postconfig", []), task_dir=task.path.parent if task.path else None)
    funcs = _funcs(ev)
    listify = (lambda v: v if isinstance(v, list) else [v]) if isinstance(ev.get("func"), list) else (lambda v: [v])
    results, expected = listify(ev.get("result")), listify(ev.get("expected") or {})
    options = listify(ev.get("options") or {})
    parts = []
    for i, func in enumerate(funcs):
        value = await get_result(client, results[i])
        rules = (expected[i] if i < len(expected) else {}) or {}
        parts.append(metric(func, value, rules.get("rules", rules), options[i] if i < len(options) else {}))
    if ev.get("conj", "and") == "or":
        score = max(parts)
    else:
        score = 0.0 if any(p == 0 for p in parts) else sum(parts) / len(parts)
    reason = "" if score == 1.0 else "not met: " + ", ".join(f for f, p in zip(funcs, parts) if p < 1)
    return Evaluation(score, reason, tuple(parts))


# ------------------------------------------------------------------------------------------------------ rows


def split_of(task: GuiTask, every: int = 4) -> str:
    """``heldout`` for every `every`-th task of its domain (in id order), else ``train``: each app is in both."""
    siblings = sorted(p.stem for p in task.path.parent.glob("*.json") if not p.name.endswith(".solution.json")) \
        if task.path else [task.id]
    return "heldout" if siblings.index(task.id) % every == every - 1 else "train"


def training_row(task: GuiTask) -> dict:
    """A prompt row of the trainer (``--input-key prompt --metadata-key metadata``), upstream's metadata shape."""
    return {"prompt": task.key, "label": "", "metadata": {"domain": task.domain, "example_id": task.id,
                                                          "instruction": task.instruction}}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Write the trainer's prompt rows of GUI tasks (JSONL).")
    parser.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--split", choices=["train", "heldout", "all"], default="all")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    tasks = [t for t in load_tasks(args.tasks_dir) if args.split == "all" or split_of(t) == args.split]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(training_row(t)) + "\n" for t in tasks), encoding="utf-8")
    print(f"{len(tasks)} {args.split} tasks -> {args.out}", file=sys.stderr)
    return 0


__all__ = ["FAILED_BY_AGENT", "GETTERS", "METRICS", "SETUP_TYPES", "TASKS_DIR", "Evaluation", "GuiTask",
           "SetupError", "TaskFormatError", "evaluate", "find_task", "get_result", "load_task", "load_tasks",
           "metric", "run_setup", "split_of", "task_from_dict", "training_row", "wait_window"]


if __name__ == "__main__":
    raise SystemExit(main())
